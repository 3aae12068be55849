#pragma once

// `oomplan fit`: enumerate GPU type, count, tp, pp, dp, ZeRO stage,
// micro-batch, checkpointing, offload, quantization and KV dtype; every
// candidate is priced by memory(); keep the Pareto front on (GPUs, estimated
// step time, headroom).

#include "oomplan/gpu.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/model.hpp"
#include "oomplan/setup.hpp"
#include "oomplan/time.hpp"

#include <vector>

namespace oomplan {

// The largest GPU count sizing without --gpus and the advisor try, and fit's
// default bound (8 nodes of 8 GPUs); `oomplan fit --max-gpus` goes further.
inline constexpr int k_sizing_max_gpus = 64;

struct FitConstraints {
  double min_headroom_gib = 0;       // --min-headroom, GiB per GPU
  int max_gpus = k_sizing_max_gpus;  // --max-gpus: total GPUs, all nodes
  bool no_offload = false;           // --no-offload: never CPU offload
  bool no_quant = false;             // --no-quant: no weight or KV quantization
  std::int64_t global_batch = 0;     // --global-batch sequences; 0: free
  int top = 10;                      // --top: plans returned
};

struct FitPlan {
  const Gpu* gpu = nullptr;
  Setup request;   // as asked: plan_args(model_arg, model, *gpu, request)
  Resolved setup;  // resolved
  Bytes total_bytes = 0;
  Bytes headroom_bytes = 0;
  bool fits = false;
  StepTime time;
};

struct FitResult {
  std::vector<FitPlan> plans;  // Pareto front, best first, at most `top`
  std::int64_t evaluated = 0;  // candidates priced by memory()
  std::int64_t front = 0;      // plans on the front before the top-N cut
  Setup base;                  // the user's fixed settings (mode, seq, ...)
  int max_gpus = 0;            // the bound searched
};

// The GPU counts `fit` (and `oomplan MODEL` without --gpus) try, up to
// `max_gpus`: 1, 2, 4, 8 inside one node, then whole 8-GPU nodes.
std::vector<int> gpu_counts(int max_gpus);

// REQUIRES: `base` carries the user's fixed settings (mode, seq, engine, batch
// for inference, ...; validated, resolved or not); `gpus` the GPU types to
// try. Training enumerates tp, pp, dp, ZeRO stage, micro-batch (grad-accum
// keeps --global-batch), checkpointing and offload; inference enumerates tp,
// pp, replicas, weight quantization and (vLLM) the fp8 KV cache.
FitResult fit(const Model& model, const std::vector<const Gpu*>& gpus,
              const Setup& base, const FitConstraints& constraints);

}  // namespace oomplan
