#pragma once

// Advice: each fix is a transformation Setup -> Setup with a cost; memory()
// re-prices it. Fixes are ranked: those that make the plan fit first, then by
// cost class (free knobs, compute, accuracy, hardware, offload last), then by
// saving.

#include "oomplan/gpu.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/model.hpp"
#include "oomplan/setup.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

enum class CostClass { free, compute, accuracy, hardware, offload };

// Throughput and time of one setup (issue 4 §2). A training step is one
// optimizer step over the global batch (micro-batch x dp x grad_accum
// sequences); an inference step is one decode step of `batch` sequences per
// replica at the average context seq / 2. Assumptions (the k_ constants in
// time.cpp): 40 % MFU in training and prefill-like compute, 80 % of peak HBM
// bandwidth in decode, 75 % of link bandwidth in NCCL collectives.
struct StepTime {
  double compute_s = 0;  // FLOPs / (peak x MFU), pipeline bubble included
  double memory_s = 0;   // bytes moved / bandwidth (decode)
  double comm_s = 0;     // collectives over NVLink / PCIe / the network
  double offload_s = 0;  // bytes over PCIe to the host (and CPU optimizer)
  double step_s = 0;     // total estimated step: training optimizer step, or
                         // one decode step (one token per sequence)
  double tokens_per_step = 0;  // tokens the whole job processes per step
  double tokens_per_s = 0;     // whole job
  double usd_per_mtok = 0;     // 0 when no price
  double flops_per_step = 0;   // whole job
  bool comm_bound = false;  // communication exceeds compute (slow interconnect)
  bool no_nvlink = false;   // several GPUs talk over PCIe only
};

// REQUIRES: `setup` resolved and validated. Pure: never calls memory().
StepTime estimate_time(const Model& model, const Gpu& gpu, const Setup& setup);

struct Fix {
  int rank = 0;
  std::string id;     // e.g. "reduce-batch", "fp8-kv-cache"
  std::string title;  // one line for people
  Setup setup;        // the fixed setup
  const Gpu* gpu =
      nullptr;  // the fixed setup's GPU (may change: more or bigger cards)
  Bytes total_bytes = 0;  // re-priced by memory()
  bool fits = false;
  Bytes saves_bytes = 0;  // old total - new total
  CostClass cost_class = CostClass::free;
  std::string cost;          // e.g. "+33 % step time", "4 more GPUs ($12.40/h)"
  double step_factor = 1.0;  // new step time / old
  std::string engine_flags;  // matching vLLM / DeepSpeed / FSDP launch flags,
                             // may be empty
};

// Ranked fixes for `setup` on `gpu` (the first ones fit), plus the smallest
// combination that fits when no single fix does (id "combination").
std::vector<Fix> advise(const Model& model, const Gpu& gpu, const Setup& setup,
                        const std::vector<Gpu>& gpus);

}  // namespace oomplan
