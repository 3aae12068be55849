#pragma once

// The time and cost model both the advisor and the search use: the step time
// of one resolved setup from FLOPs, bytes moved and links. Pure; it never
// calls memory().

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/setup/setup.hpp"

namespace oomplan {

// Throughput and time of one setup (issue 4 §2). A training step is one
// optimizer step over the global batch (micro-batch x dp x grad_accum
// sequences); an inference step is one decode step of `batch` sequences per
// replica at the average context seq / 2. Assumptions (the k_ constants
// below): 40 % MFU in training and prefill-like compute, 80 % of peak HBM
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

// The time model's stated assumptions (time.cpp uses them; reports quote them).
// Model FLOPs utilisation of dense training and of compute-bound inference:
// Llama 3 pre-training reports 38-43 % MFU on H100 (Llama 3 paper, Table 4);
// fine-tuning stacks (FSDP, DeepSpeed) land at or below that.
inline constexpr double k_mfu = 0.40;
// Memory-bound decode reaches about 80 % of the HBM peak in vLLM/TensorRT-LLM
// GEMV kernels.
inline constexpr double k_bandwidth_util = 0.80;
// NCCL ring collectives reach about 75 % of the link's one-direction peak
// (nccl-tests busbw on NVLink and PCIe).
inline constexpr double k_link_util = 0.75;

StepTime estimate_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup);
// The same with memory()'s budget for that setup: with --engine vllm the batch
// is capped at the requests its KV cache holds at once (max_concurrency of
// --seq-token requests), as vLLM's scheduler would.
StepTime estimate_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup, const Budget& budget);

}  // namespace oomplan
