#include "advice/knobs.hpp"

#include "oomplan/advice/capability.hpp"
#include "oomplan/model/capability.hpp"
#include "oomplan/setup/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

// The knobs a search turns, one row each. Invariants:
// - a row's moves keep the job: mode, engine, model, sequence length and
//   global batch stay (a micro-batch move leaves the grad-accum to the
//   search, which keeps the global batch);
// - the rows are in the order a search lists its knobs, and the walk breaks
//   ties by that order: a new row goes where it should win its ties;
// - a row's levels function returns no move when the knob is already at its
//   most frugal setting, or the start has nothing it could change.

namespace oomplan {
namespace {

// vLLM gpu_memory_utilization values a search tries.
constexpr std::array k_gpu_utils = {0.95, 0.92, 0.9, 0.85, 0.8,
                                    0.75, 0.7,  0.6, 0.5};
// The allocator reserve expandable_segments leaves: segments grow in place,
// so a percent or two remains (PyTorch CUDACachingAllocator
// expandable_segments notes).
constexpr double k_expandable_reserve = 0.02;
// Training layouts beyond data parallelism need a Megatron-style stack.
constexpr double k_layout_effort = 0.25;

// The jobs a knob applies to.
enum class Jobs : std::uint8_t {
  all,
  training,
  inference,     // vLLM or transformers
  vllm,          // vLLM serving
  hf,            // all but vLLM serving: training, transformers inference
  hf_inference,  // transformers inference
};

bool serves_with_vllm(const Resolved& r) {
  return r.engine == Engine::vllm && !r.training();
}

bool runs(Jobs jobs, const Resolved& r) {
  switch (jobs) {
    case Jobs::all:
      return true;
    case Jobs::training:
      return r.training();
    case Jobs::inference:
      return !r.training();
    case Jobs::vllm:
      return serves_with_vllm(r);
    case Jobs::hf:
      return !serves_with_vllm(r);
    case Jobs::hf_inference:
      return !r.training() && !serves_with_vllm(r);
  }
  return false;
}

bool in_scope(KnobScope knob, const SearchScope& scope) {
  switch (knob) {
    case KnobScope::plain:
      return true;
    case KnobScope::quantize:
      return scope.quantize;
    case KnobScope::offload:
      return scope.offload;
  }
  return false;
}

// Which move of a knob saves the most memory.
enum class Frugal : std::uint8_t {
  first,   // the first
  second,  // the second, or the first when it is alone
  last,    // the last
  marked,  // the one marked `frugal` (the first when none is)
};

// What a row's levels function reads: the start as asked and as resolved
// on the card, and the search's scope.
struct Start {
  const Gpu& gpu;
  const Setup& setup;
  const Resolved& r;
  const SearchScope& scope;
  const Capability& cap;  // what the start's framework expresses
};

// A move as a row's levels function makes it.
struct Step {
  std::string id;
  std::string title;
  std::function<void(Setup&)> apply;
  double effort = 0;           // Move::effort
  std::optional<Risk> risk{};  // the row's risk when empty
  bool frugal = false;         // Frugal::marked
};
using Steps = std::vector<Step>;

// --- Training.

// Layouts on the same GPUs: tensor parallel inside a node, pipelines
// across; --split layers for transformers inference.
Steps layouts(const Start& k) {
  const Resolved& r = k.r;
  const int total = r.total_gpus();
  const bool can =
      r.training() ? k.cap.training_layouts : k.cap.inference_layouts;
  if (!k.scope.layouts || total <= 1 || !can) {
    return {};
  }
  Steps out;
  const std::int64_t global = std::int64_t{r.grad_accum} * std::max(1, r.dp());
  for (const int tp : k_tp_sizes) {
    for (const int pp : k_pp_sizes) {
      if (tp > r.gpus || tp * pp > total || total % (tp * pp) != 0 ||
          (tp == r.tp && pp == r.pp && !r.split_layers)) {
        continue;
      }
      const int dp = total / (tp * pp);
      if (r.training() && global % dp != 0) {
        continue;  // would change the global batch
      }
      out.push_back({"layout",
                     fmt::format("tp {} x pp {} x dp {} on the same {} GPUs",
                                 tp, pp, dp, total),
                     [tp, pp](Setup& s) {
                       s.tp = tp;
                       s.pp = pp;
                       s.split_layers = false;
                     },
                     r.training() ? k_layout_effort : 0.0});
    }
  }
  if (!r.training() && !serves_with_vllm(r) && !r.split_layers &&
      r.nodes == 1 && k.cap.framework == Framework::generate) {
    out.push_back({"split-layers", "whole layers per GPU (device_map=\"auto\")",
                   [](Setup& s) {
                     s.split_layers = true;
                     s.tp.reset();
                     s.pp = 1;
                   }});
  }
  return out;
}

Steps zero_stages(const Start& k) {
  const int zero = k.r.zero;
  if (k.setup.fsdp || zero >= 3) {
    return {};
  }
  Steps out;
  for (int stage = zero + 1; stage <= 3; ++stage) {
    out.push_back({"zero-stage",
                   fmt::format("ZeRO stage {} -> {}", zero, stage),
                   [stage](Setup& s) { s.zero = stage; }});
  }
  return out;
}

Steps checkpointing(const Start& k) {
  Steps out;
  if (k.r.checkpointing < Checkpointing::selective &&
      k.cap.selective_checkpoint) {
    out.push_back(
        {"checkpointing-selective",
         "selective activation recomputation (attention core)",
         [](Setup& s) { s.checkpointing = Checkpointing::selective; }});
  }
  if (k.r.checkpointing < Checkpointing::full) {
    out.push_back({"checkpointing-full",
                   "full activation checkpointing (layer inputs only)",
                   [](Setup& s) { s.checkpointing = Checkpointing::full; }});
  }
  return out;
}

Steps chunked_loss(const Start& k) {
  if (k.r.loss == Loss::chunked) {
    return {};
  }
  return {{"chunked-loss", "chunked cross-entropy (no full fp32 logits)",
           [](Setup& s) { s.loss = Loss::chunked; }}};
}

// Smaller micro-batches, the global batch kept by gradient accumulation:
// divisors of the micro-batch, largest first.
Steps micro_batches(const Start& k) {
  const Resolved& r = k.r;
  if (r.batch <= 1 || r.optimizer_in_bwd) {
    return {};
  }
  Steps out;
  for (std::int64_t b = r.batch - 1; b >= 1; --b) {
    if (r.batch % b != 0) {
      continue;
    }
    const std::int64_t more = std::int64_t{r.grad_accum} * (r.batch / b);
    if (more > k_max_grad_accum) {
      continue;  // beyond what --grad-accum takes (options.hpp)
    }
    out.push_back({"micro-batch",
                   fmt::format("micro-batch {} -> {}, grad-accum {} -> {}",
                               r.batch, b, r.grad_accum, more),
                   [b](Setup& s) { s.batch = b; }});
  }
  return out;
}

Steps optimizer_8bit(const Start& k) {
  const Optimizer from = k.r.optimizer;
  if (from != Optimizer::adamw && from != Optimizer::paged_adamw) {
    return {};
  }
  // torchtune's recipes use bitsandbytes' PagedAdamW8bit
  // (memory_optimizations.rst "Lower Precision Optimizers").
  const bool paged =
      from == Optimizer::paged_adamw || k.cap.framework == Framework::torchtune;
  const Optimizer to =
      paged ? Optimizer::paged_adamw_8bit : Optimizer::adamw_8bit;
  return {{"optimizer-8bit",
           paged ? "paged 8-bit AdamW states (bitsandbytes)"
                 : "8-bit AdamW states (bitsandbytes)",
           [to](Setup& s) { s.optimizer = to; }}};
}

// torchtune steps each parameter as its gradient is ready and frees it: no
// gradient buffer, and no gradient accumulation
// (memory_optimizations.rst "Optimizer in Backward").
Steps optimizer_in_backward(const Start& k) {
  if (k.r.optimizer_in_bwd) {
    return {};
  }
  return {{"optimizer-in-bwd",
           "optimizer step in backward (no gradient buffer)",
           [](Setup& s) { s.optimizer_in_bwd = true; }}};
}

// From mixed precision (fp32 master weights) or amp (fp32 parameters under
// torch.autocast: LitGPT's default bf16-mixed, the HF Trainer's --bf16 on an
// fp32 model) to the weights in the 16-bit dtype.
Steps pure_16bit(const Start& k) {
  if (k.r.dtype == Dtype::fp32 ||
      (k.r.precision != Precision::mixed && k.r.precision != Precision::amp)) {
    return {};
  }
  const std::string_view what = k.r.precision == Precision::amp
                                    ? "no fp32 weights under autocast"
                                    : "no fp32 master weights";
  return {{"pure-bf16",
           fmt::format("pure {} training ({}: small updates round away)",
                       dtype_name(k.r.dtype), what),
           [](Setup& s) { s.precision = Precision::pure; }}};
}

Steps state_offload(const Start& k) {
  // The plan offloads inside a ZeRO optimizer or FSDP (check()): a stack
  // with neither (torchtune on one GPU) gets no state offload here.
  if (!k.cap.zero && !k.setup.fsdp) {
    return {};
  }
  Steps out;
  if (k.r.offload == Offload::none && k.cap.optimizer_offload) {
    out.push_back({"offload-optimizer",
                   "optimizer states in CPU RAM (ZeRO-Offload)",
                   [](Setup& s) { s.offload = Offload::optimizer; }});
  }
  if (!k.cap.param_offload) {
    return out;
  }
  // FSDP's CPUOffload moves parameters, gradients and optimizer states
  // together (torch/distributed/fsdp/api.py): only the whole offload.
  if (k.r.offload == Offload::none && !k.setup.fsdp) {
    out.push_back({"offload-params",
                   "weights in CPU RAM (ZeRO-Infinity offload_param)",
                   [](Setup& s) { s.offload = Offload::params; }});
  }
  if (k.r.offload != Offload::all) {
    out.push_back({"offload-all",
                   "weights, gradients and optimizer states in CPU RAM "
                   "(ZeRO-Infinity / FSDP CPU offload)",
                   [](Setup& s) { s.offload = Offload::all; }});
  }
  return out;
}

// torchtune offloads the checkpointed layer inputs on a side stream and
// recommends it only with checkpointing on
// (docs/source/tutorials/memory_optimizations.rst).
Steps activation_offload(const Start& k) {
  if (k.r.activation_offload) {
    return {};
  }
  return {{"activation-offload",
           "checkpointed layer inputs in CPU RAM (overlapped)",
           [](Setup& s) { s.activation_offload = true; }}};
}

// accelerate's GradientAccumulationPlugin(sync_each_batch=True): FSDP
// reduce-scatters after every micro-batch, so each GPU keeps its gradient
// shard instead of the unsharded no_sync accumulation, at one
// reduce-scatter per micro-batch.
Steps sync_each_batch(const Start& k) {
  if (!k.r.fsdp_no_sync) {
    return {};
  }
  return {{"sync-each-batch",
           "reduce-scatter after every micro-batch (sync_each_batch): only "
           "the gradient shard is kept",
           [](Setup& s) { s.fsdp_no_sync = false; }}};
}

Steps sequence_parallel(const Start& k) {
  if (k.r.sequence_parallel || k.r.gpus <= 1) {
    return {};
  }
  return {{"sequence-parallel",
           "sequence parallelism over the tensor-parallel group",
           [](Setup& s) { s.sequence_parallel = true; }}};
}

// --- Training and transformers inference.

Steps attention(const Start& k) {
  if (k.r.attn != Attn::flash && runs_flash_attention(k.gpu)) {
    return {{"flash-attention", "flash attention (no s^2 score matrix)",
             [](Setup& s) { s.attn = Attn::flash; }}};
  }
  if (k.r.attn == Attn::eager) {
    return {{"sdpa-attention", "SDPA memory-efficient attention",
             [](Setup& s) { s.attn = Attn::sdpa; }}};
  }
  return {};
}

// transformers generate before 4.45 holds every prompt position's logits in
// fp32, and before 4.42 two copies of the KV cache while decoding
// (memory/hf_activations.cpp): upgrading frees both at no cost.
Steps transformers_upgrade(const Start& k) {
  if (!(k.r.transformers_release < k_transformers_last_logits)) {
    return {};
  }
  return {{"upgrade-transformers",
           "transformers 4.45 or newer (last-position logits, one KV cache)",
           [](Setup& s) { s.transformers_release.reset(); }}};
}

// AutoAWQ's fused layers allocate their cache for max_seq_len tokens (by
// default the model's whole context) and run eager fp32-softmax attention
// over the prompt: size the cache to the job, or load the AWQ layers unfused
// (transformers' default) so --attn applies and the cache grows with use.
Steps awq_fused(const Start& k) {
  if (k.r.awq_fused_len == 0) {
    return {};
  }
  Steps steps;
  if (k.r.awq_fused_len > k.r.seq) {
    steps.push_back({"awq-fused-len", "AutoAWQ fused cache sized to --seq",
                     [seq = k.r.seq](Setup& s) { s.awq_fused_len = seq; }});
  }
  steps.push_back({"awq-unfused",
                   "AWQ layers unfused (no preallocated cache, no fp32 "
                   "scores)",
                   [](Setup& s) { s.awq_fused_len = 0; }});
  return steps;
}

// GPTQ kernels (memory/hf_activations.cpp): exllamav2 keeps 2048 x 8 rows
// of scratch per output column of the largest layer (never read), cuda-old
// and torch dequantize whole layers per call. Marlin keeps neither and is
// GPTQModel's fastest from compute capability 8.0 (transformers 4.49+);
// before 4.49 AutoGPTQ's exllama (v1) keeps one dequantized layer; triton
// dequantizes inside its kernel.
Steps gptq_kernels(const Start& k) {
  const GptqKernel now = k.r.gptq_kernel;
  if (now == GptqKernel::none || now == GptqKernel::marlin ||
      now == GptqKernel::exllama || now == GptqKernel::triton) {
    return {};
  }
  const bool gptqmodel = k.r.transformers_release >= k_transformers_gptqmodel;
  const auto to = [](GptqKernel kernel) {
    return [kernel](Setup& s) { s.gptq_kernel = kernel; };
  };
  Steps steps;
  if (gptqmodel && k.gpu.vendor == "NVIDIA" && !below(k.gpu, k_cc_ampere)) {
    steps.push_back({"gptq-marlin", "GPTQ Marlin kernel (no scratch buffer)",
                     to(GptqKernel::marlin)});
  } else if (gptqmodel) {
    steps.push_back({"gptq-triton",
                     "GPTQ Triton kernel (dequantizes inside the matmul)",
                     to(GptqKernel::triton)});
  } else {
    steps.push_back({"gptq-exllama",
                     "GPTQ exllama kernel (one dequantized layer of scratch)",
                     to(GptqKernel::exllama)});
  }
  return steps;
}

Steps expandable_segments(const Start& k) {
  if (k.r.reserve && *k.r.reserve <= k_expandable_reserve) {
    return {};
  }
  return {{"expandable-segments",
           "expandable segments (less allocator fragmentation)",
           [](Setup& s) { s.reserve = k_expandable_reserve; }}};
}

Steps half_precision(const Start& k) {
  if (k.r.dtype != Dtype::fp32) {
    return {};
  }
  const Dtype half = runs_bf16(k.gpu) ? Dtype::bf16 : Dtype::fp16;
  if (half == Dtype::fp16 && !k.cap.fp16) {
    return {};
  }
  return {{"half-precision",
           fmt::format("{} instead of fp32", dtype_name(half)),
           [half](Setup& s) { s.dtype = half; }}};
}

// A card without bf16 (compute capability < 8.0) runs a bf16 job in fp16:
// vLLM casts with --dtype float16 (platforms/cuda.py
// check_if_supports_dtype), training with fp16 mixed precision and loss
// scaling (torch.cuda.amp.GradScaler).
Steps fp16_without_bf16(const Start& k) {
  if (k.r.dtype != Dtype::bf16 || runs_bf16(k.gpu) || !k.cap.fp16) {
    return {};
  }
  return {{"fp16", "fp16 instead of bf16 (the card has no bf16)",
           [](Setup& s) { s.dtype = Dtype::fp16; }}};
}

// --- Inference.

// 8-bit formats before 4-bit (quantization_options); 4-bit weights are a
// moderate accuracy risk.
Steps weight_formats(const Start& k) {
  if (k.r.quant != Quant::none) {
    return {};
  }
  const bool vllm = serves_with_vllm(k.r);
  Steps out;
  for (const Quant q : quantization_options(k.gpu, k.r.engine)) {
    if (q == Quant::fp8 && !k.cap.fp8_weights) {
      continue;
    }
    if (quant_bits(q) == 4) {
      out.push_back({"quantize-4bit",
                     vllm ? "4-bit AWQ weights" : "4-bit NF4 weights",
                     [q](Setup& s) { s.quant = q; }, 0, Risk::moderate});
    } else {
      out.push_back({fmt::format("quantize-{}", quant_name(q)),
                     fmt::format("{} weights", quant_name(q)),
                     [q](Setup& s) { s.quant = q; }});
    }
  }
  return out;
}

Steps cpu_offload(const Start& k) {
  if (k.r.offload != Offload::none) {
    return {};
  }
  return {{"cpu-offload", "weights in CPU RAM, streamed to the GPU every step",
           [](Setup& s) { s.offload = Offload::params; }}};
}

// --- vLLM serving.

// Nearest to the start's value first; the highest value is the frugal one
// (the most room for the KV cache).
Steps gpu_utils(const Start& k) {
  const double from = k.r.gpu_util;
  std::vector<double> utils(k_gpu_utils.begin(), k_gpu_utils.end());
  std::erase_if(utils, [&](double u) { return std::abs(u - from) < 1e-9; });
  std::stable_sort(utils.begin(), utils.end(), [&](double a, double b) {
    return std::abs(a - from) < std::abs(b - from);
  });
  Steps out;
  for (const double u : utils) {
    out.push_back({"gpu-util", fmt::format("gpu-util {} -> {}", from, u),
                   [u](Setup& s) { s.gpu_util = u; }, 0, std::nullopt,
                   u == k_gpu_utils.front()});
  }
  return out;
}

Steps fp8_kv_cache(const Start& k) {
  if (k.r.kv_dtype == Dtype::fp8 || k.gpu.compute_capability < k_cc_ampere) {
    return {};
  }
  return {{"fp8-kv-cache", "fp8 KV cache (half the bytes per token)",
           [](Setup& s) { s.kv_dtype = Dtype::fp8; }}};
}

Steps enforce_eager(const Start& k) {
  if (k.r.enforce_eager) {
    return {};
  }
  return {{"enforce-eager", "no CUDA graphs (--enforce-eager)",
           [](Setup& s) { s.enforce_eager = true; }}};
}

Steps max_num_seqs(const Start& k) {
  Steps out;
  for (std::int64_t n = k.r.max_num_seqs / 2; n >= 16; n /= 2) {
    out.push_back({"max-num-seqs",
                   fmt::format("max-num-seqs {} -> {} (fewer requests at once)",
                               k.r.max_num_seqs, n),
                   [n](Setup& s) { s.max_num_seqs = n; }});
  }
  return out;
}

// V0 schedules whole prompts (no chunked prefill to shrink).
Steps max_num_batched_tokens(const Start& k) {
  if (k.r.vllm_version == VllmEra::v0) {
    return {};
  }
  Steps out;
  for (std::int64_t n = k.r.max_num_batched_tokens / 2; n >= 1024; n /= 2) {
    out.push_back(
        {"max-num-batched-tokens",
         fmt::format("max-num-batched-tokens {} -> {} (smaller prefill chunks)",
                     k.r.max_num_batched_tokens, n),
         [n](Setup& s) { s.max_num_batched_tokens = n; }});
  }
  return out;
}

// One knob: what it changes, the jobs it applies to, the search scope that
// adds it, its role in the walk, which of its moves saves the most memory,
// the accuracy risk of its moves (unless a move says otherwise), the
// capability the user's framework needs for it (capability.hpp; none: the
// levels function asks per move) and the function that makes its moves.
struct KnobRow {
  std::string_view name;
  Jobs jobs;
  KnobScope scope;
  KnobRole role;
  Frugal frugal;
  Risk risk;
  bool Capability::*needs;
  Steps (*steps)(const Start&);
};

using C = Capability;

// The layouts come first; then training's knobs, the kernels and the
// allocator, precision, and inference's formats and engine limits. The
// expandable-segments reserve is a side knob in training only (the
// relaxation is proven there: test_properties.cpp frugal_side_knobs).
// clang-format off
constexpr std::array k_knobs = {
//        what it changes               jobs                scope                role              frugal           risk            needs                      moves
  KnobRow{"layout",                     Jobs::all,          KnobScope::plain,    KnobRole::layout, Frugal::first,   Risk::none,     nullptr,                   layouts},
  KnobRow{"ZeRO stage",                 Jobs::training,     KnobScope::plain,    KnobRole::other,  Frugal::last,    Risk::none,     &C::zero,                  zero_stages},
  KnobRow{"activation checkpointing",   Jobs::training,     KnobScope::plain,    KnobRole::side,   Frugal::second,  Risk::none,     &C::full_checkpoint,       checkpointing},
  KnobRow{"loss",                       Jobs::training,     KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     &C::chunked_loss,          chunked_loss},
  KnobRow{"micro-batch",                Jobs::training,     KnobScope::plain,    KnobRole::other,  Frugal::last,    Risk::none,     nullptr,                   micro_batches},
  KnobRow{"optimizer states",           Jobs::training,     KnobScope::quantize, KnobRole::other,  Frugal::first,   Risk::low,      &C::optimizer_8bit,        optimizer_8bit},
  KnobRow{"optimizer step",             Jobs::training,     KnobScope::plain,    KnobRole::exclusive, Frugal::first, Risk::none,   &C::optimizer_in_bwd,      optimizer_in_backward},
  KnobRow{"master weights",             Jobs::training,     KnobScope::quantize, KnobRole::exclusive, Frugal::first, Risk::low,    &C::pure_bf16,             pure_16bit},
  KnobRow{"state offload",              Jobs::training,     KnobScope::offload,  KnobRole::other,  Frugal::last,    Risk::none,     nullptr,                   state_offload},
  KnobRow{"gradient sync",              Jobs::training,     KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     &C::sync_each_batch,       sync_each_batch},
  KnobRow{"activation offload",         Jobs::training,     KnobScope::offload,  KnobRole::other,  Frugal::first,   Risk::none,     &C::activation_offload,    activation_offload},
  KnobRow{"sequence parallelism",       Jobs::training,     KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     &C::sequence_parallel,     sequence_parallel},
  KnobRow{"attention",                  Jobs::hf,           KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     nullptr,                   attention},
  KnobRow{"allocator reserve",          Jobs::training,     KnobScope::plain,    KnobRole::side,   Frugal::first,   Risk::none,     &C::expandable_segments,   expandable_segments},
  KnobRow{"transformers release",       Jobs::hf_inference, KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     nullptr,                   transformers_upgrade},
  KnobRow{"AutoAWQ fused layers",       Jobs::hf_inference, KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     nullptr,                   awq_fused},
  KnobRow{"GPTQ kernel",                Jobs::hf_inference, KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     nullptr,                   gptq_kernels},
  KnobRow{"allocator reserve",          Jobs::hf_inference, KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     &C::expandable_segments,   expandable_segments},
  KnobRow{"dtype",                      Jobs::all,          KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::low,      nullptr,                   half_precision},
  KnobRow{"dtype",                      Jobs::all,          KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::low,      nullptr,                   fp16_without_bf16},
  KnobRow{"weight format",              Jobs::inference,    KnobScope::quantize, KnobRole::other,  Frugal::last,    Risk::low,      nullptr,                   weight_formats},
  KnobRow{"gpu-util",                   Jobs::vllm,         KnobScope::plain,    KnobRole::other,  Frugal::marked,  Risk::none,     &C::gpu_util,              gpu_utils},
  KnobRow{"KV cache dtype",             Jobs::vllm,         KnobScope::quantize, KnobRole::other,  Frugal::first,   Risk::low,      &C::fp8_kv,                fp8_kv_cache},
  KnobRow{"CUDA graphs",                Jobs::vllm,         KnobScope::plain,    KnobRole::other,  Frugal::first,   Risk::none,     nullptr,                   enforce_eager},
  KnobRow{"max-num-seqs",               Jobs::vllm,         KnobScope::plain,    KnobRole::other,  Frugal::last,    Risk::none,     nullptr,                   max_num_seqs},
  KnobRow{"max-num-batched-tokens",     Jobs::vllm,         KnobScope::plain,    KnobRole::other,  Frugal::last,    Risk::none,     nullptr,                   max_num_batched_tokens},
  KnobRow{"weights offload",            Jobs::hf_inference, KnobScope::offload,  KnobRole::other,  Frugal::first,   Risk::none,     &C::param_offload,         cpu_offload},
};
// clang-format on

// The level of `frugal` among a knob's levels (level i + 1 is steps[i]).
std::size_t frugal_level(Frugal frugal, const Steps& steps) {
  switch (frugal) {
    case Frugal::first:
      return 1;
    case Frugal::second:
      return std::min<std::size_t>(2, steps.size());
    case Frugal::last:
      return steps.size();
    case Frugal::marked:
      break;
  }
  const auto marked = std::find_if(steps.begin(), steps.end(),
                                   [](const Step& s) { return s.frugal; });
  return marked == steps.end()
             ? 1
             : static_cast<std::size_t>(marked - steps.begin()) + 1;
}

Knob knob_of(const KnobRow& row, Steps steps) {
  Knob knob{row.name, {}, frugal_level(row.frugal, steps), row.scope, row.role};
  knob.levels.reserve(steps.size() + 1);
  knob.levels.push_back({});  // the start
  for (Step& step : steps) {
    knob.levels.push_back({Move{std::move(step.id), std::move(step.title),
                                step.risk.value_or(row.risk), step.effort},
                           std::move(step.apply)});
  }
  return knob;
}

}  // namespace

std::vector<Knob> knobs_for(const Gpu& gpu, const Setup& start,
                            const Resolved& r, const SearchScope& scope) {
  const Capability cap = capability_of(start);
  const Start k{gpu, start, r, scope, cap};
  std::vector<Knob> out;
  for (const KnobRow& row : k_knobs) {
    if (!runs(row.jobs, r) || !in_scope(row.scope, scope) ||
        (row.needs != nullptr && !(cap.*row.needs))) {
      continue;
    }
    Steps steps = row.steps(k);
    if (!steps.empty()) {
      out.push_back(knob_of(row, std::move(steps)));
    }
  }
  return out;
}

}  // namespace oomplan
