#pragma once

// Advice: each fix is a transformation Setup -> Setup (and maybe the GPU)
// with a cost; resolve_setup + validate_setup + memory() re-price it. Fixes
// are ranked: those that make the plan fit first, then by cost class (free
// knobs, compute, accuracy, hardware, offload last), then by saving.
// estimate_time is the time and cost model both advice and search use.

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

// REQUIRES: `setup` resolved and validated. Pure: never calls memory().
StepTime estimate_time(const Model& model, const Gpu& gpu, const Setup& setup);
// The same with memory()'s budget for that setup: with --engine vllm the batch
// is capped at the requests its KV cache holds at once (max_concurrency of
// --seq-token requests), as vLLM's scheduler would.
StepTime estimate_time(const Model& model, const Gpu& gpu, const Setup& setup,
                       const Budget& budget);

// The weight formats a 16-bit inference plan on `gpu` can move to, 8-bit
// before 4-bit, the 4-bit one last: int8 (transformers only: vLLM has no
// on-the-fly int8), fp8 where it runs (vLLM weight-only from Ampere;
// transformers' FBGEMM needs fp8 tensor cores), then AWQ (vLLM) or NF4
// (transformers). advise's quantize-* fixes and fit's search both use it.
std::vector<Quant> quantization_options(const Gpu& gpu, Engine engine);

// Fix ids, one per transformation in advice.cpp's table: free knobs
// "half-precision", "flash-attention", "chunked-loss", "optimizer-in-bwd",
// "expandable-segments", "reduce-batch", "shorter-seq", "max-model-len",
// "gpu-util"; compute "checkpointing-selective", "checkpointing-full",
// "activation-offload", "zero-stage", "pipeline-parallel"; accuracy
// "fp8-kv-cache", "optimizer-8bit", "pure-bf16", "quantize-int8",
// "quantize-fp8", "quantize-4bit", "lora", "qlora"; hardware "more-gpus",
// "bigger-gpu"; offload "offload-optimizer", "cpu-offload"; and
// "combination" (several of them at once).
struct Fix {
  int rank = 0;       // 1 = best
  std::string id;     // see above
  std::string title;  // one line for people, e.g. "ZeRO stage 0 -> 3 (...)"
  Setup setup;        // the fixed setup, resolved and validated
  const Gpu* gpu = nullptr;  // its GPU (another card for "bigger-gpu"); points
                             // into advise()'s `gpu` or `gpus`
  Bytes total_bytes = 0;     // memory(model, *gpu, setup).total_bytes()
  bool fits = false;         // memory(...).fits()
  Bytes saves_bytes = 0;     // the original total - total_bytes
  CostClass cost_class = CostClass::free;
  std::string cost;  // in words: time, GPUs, host RAM, then what it changes
                     // for the user, e.g. "+33 % time per token"
  double step_factor = 1.0;  // new time per token / old (estimate_time)
  std::string engine_flags;  // matching vLLM / DeepSpeed / FSDP /
                             // transformers launch flags; may be empty
};

// Ranked fixes for `setup` (resolved and validated) on `gpu`: those that fit
// first, then by cost class, then by saving, then by id. Each lowers the
// total or makes the plan fit; fixes that do not apply or change nothing are
// left out. When no single fix fits (or only dearer ones, or only a shorter
// sequence), the smallest combination that fits is added (id "combination"):
// the free/compute one when there is one, else one per cost class.
// `gpus` are the cards "bigger-gpu" may propose (same vendor, common ones).
// A vLLM plan that starts gets no fixes. Deterministic.
std::vector<Fix> advise(const Model& model, const Gpu& gpu, const Setup& setup,
                        const std::vector<Gpu>& gpus);

}  // namespace oomplan
