#pragma once

// `oomplan fit`: enumerate GPU type, count, tp, pp, dp, ZeRO stage,
// micro-batch, checkpointing, offload, quantization and KV dtype; every
// candidate is priced by memory(); keep the Pareto front on (GPUs, estimated
// step time, headroom).

#include "oomplan/advice.hpp"
#include "oomplan/gpu.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/model.hpp"
#include "oomplan/setup.hpp"

#include <vector>

namespace oomplan {

struct FitConstraints {
  double min_headroom_gib = 0;
  int max_gpus = 64;
  bool no_offload = false;
  bool no_quant = false;
  std::int64_t global_batch = 0;  // 0: unconstrained
  int top = 10;
};

struct FitPlan {
  const Gpu* gpu = nullptr;
  Setup setup;
  Bytes total_bytes = 0;
  Bytes headroom_bytes = 0;
  bool fits = false;
  StepTime time;
};

struct FitResult {
  std::vector<FitPlan> plans;  // Pareto front, best first
  std::int64_t evaluated = 0;  // candidates priced
};

// REQUIRES: `base` carries the user's fixed settings (mode, seq, ...); `gpus`
// the GPU types to try.
FitResult fit(const Model& model, const std::vector<const Gpu*>& gpus,
              const Setup& base, const FitConstraints& constraints);

}  // namespace oomplan
