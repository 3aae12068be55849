#pragma once

// Advice: each fix is a transformation of the setup the user asked for (and
// maybe the GPU) with a cost; the plan pipeline's price() re-prices it.
// Fixes are ranked: those that make the plan fit first, then by cost class
// (free knobs, compute, accuracy, hardware, offload last), then by saving.

#include "oomplan/gpu.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/model.hpp"
#include "oomplan/setup.hpp"
#include "oomplan/time.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

enum class CostClass { free, compute, accuracy, hardware, offload };

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
  Setup request;      // the fixed setup, as the user would ask for it
  Resolved setup;     // and resolved (valid)
  const Gpu* gpu = nullptr;  // its GPU (another card for "bigger-gpu"); points
                             // into advise()'s `gpu` or `gpus`
  Bytes total_bytes = 0;     // price(model, *gpu, request): the total
  bool fits = false;         // and whether it fits
  Bytes saves_bytes = 0;     // the original total - total_bytes
  CostClass cost_class = CostClass::free;
  std::string cost;  // in words: time, GPUs, host RAM, then what it changes
                     // for the user, e.g. "+33 % time per token"
  double step_factor = 1.0;  // new time per token / old (estimate_time)
  std::string engine_flags;  // matching vLLM / DeepSpeed / FSDP /
                             // transformers launch flags; may be empty
};

// Ranked fixes for `setup` (as asked; valid) on `gpu`: those that fit
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
