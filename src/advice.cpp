#include "oomplan/advice.hpp"

#include "oomplan/capability.hpp"
#include "oomplan/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <span>

// The advisor. Invariants:
// - every fix is a transformation of the Setup the user asked for (and maybe
//   the GPU), re-priced by the plan pipeline's price(); no Budget is ever
//   edited by hand, and a transformation check() rejects is dropped;
// - a fix is listed only when it changes the plan: it lowers the total, or it
//   turns a plan that does not fit into one that does (vLLM gpu-util raised);
// - the order is deterministic: fits first, then cost class (within
//   accuracy the lower risk, within compute the smaller slowdown), then
//   saving, then id;
// - combinations are searched only when the plan does not fit and no single
//   fix of the same or a cheaper class does; one per class, fewest fixes.

namespace oomplan {
namespace {

// vLLM gpu_memory_utilization values tried, high to low.
constexpr std::array k_gpu_utils = {0.95, 0.92, 0.9, 0.85, 0.8,
                                    0.75, 0.7,  0.6, 0.5};
// The allocator reserve expandable_segments leaves: segments grow in place,
// so a percent or two remains (PyTorch CUDACachingAllocator
// expandable_segments notes).
constexpr double k_expandable_reserve = 0.02;
// Fragmentation worth a fix: at least 3 % of the card.
constexpr double k_fragmentation_share = 0.03;
// Optimizer states worth 8-bit AdamW: at least 1 % of the card.
constexpr double k_optimizer_share = 0.01;

struct Ctx {
  const Model& model;
  const Setup& base;
  const std::vector<Gpu>& gpus;
  Bytes base_total = 0;  // the plan's total, before any fix
  StepTime base_time;    // and its time
};

// A candidate plan: the setup (as asked) and card a fix leads to, with its
// words. `resolved` is the setup the step starts from, resolved: the
// transformations read it and write `setup`.
struct Step {
  Setup setup;
  Resolved resolved;
  const Gpu* gpu = nullptr;
  std::string title;
  std::string changes;  // what it changes for the user, may be empty
  std::string flags;    // engine launch flags, may be empty
};

std::string join(const std::string& a, const std::string& b,
                 std::string_view sep) {
  if (a.empty()) {
    return b;
  }
  if (b.empty()) {
    return a;
  }
  return a + std::string(sep) + b;
}

using Apply = std::optional<Step> (*)(const Ctx&, const Step&);

struct FixKind {
  std::string_view id;
  CostClass cost_class;
  std::string_view group;  // fixes of one group never combine
  Apply apply;
  // Offered only when the plan has this component, at least `min_share` of
  // the card; empty: always.
  std::string_view needs = {};
  double min_share = 0;
};

// --- Free knobs ---------------------------------------------------------

std::optional<Step> reduce_batch(const Ctx& c, const Step& from) {
  const Setup& s = from.setup;
  // Optimizer-in-backward steps every micro-batch: no gradient accumulation
  // to keep the global batch with.
  if (s.batch <= 1 || (s.training() && s.optimizer_in_bwd)) {
    return std::nullopt;
  }
  // Training keeps the global batch: divisors of the micro-batch, grad-accum
  // multiplied by the same factor. Inference halves the concurrency.
  std::vector<std::int64_t> options;
  if (s.training()) {
    for (std::int64_t b = s.batch - 1; b >= 1; --b) {
      if (s.batch % b == 0) {
        options.push_back(b);
      }
    }
  } else {
    for (std::int64_t b = s.batch / 2; b >= 1; b /= 2) {
      options.push_back(b);
    }
  }
  auto with_batch = [&s](std::int64_t b) {
    Setup t = s;
    t.batch = b;
    if (s.training()) {
      t.grad_accum = static_cast<int>(s.grad_accum * (s.batch / b));
    }
    return t;
  };
  // The largest option that fits, else a single sequence.
  Step to = from;
  to.setup = with_batch(1);
  for (const std::int64_t b : options) {
    const Setup trial = with_batch(b);
    if (fits(c.model, *from.gpu, trial)) {
      to.setup = trial;
      break;
    }
  }
  const std::int64_t b = to.setup.batch;
  if (s.training()) {
    to.title = fmt::format("micro-batch {} -> {}, grad-accum {} -> {}", s.batch,
                           b, s.grad_accum, to.setup.grad_accum);
    to.changes = "global batch unchanged";
    to.flags = fmt::format(
        "--per_device_train_batch_size {} --gradient_accumulation_steps {}", b,
        to.setup.grad_accum);
  } else {
    to.title = fmt::format("{} -> {} concurrent sequences", s.batch, b);
    to.changes = "fewer sequences per step";
    if (s.engine == Engine::vllm) {
      to.flags = fmt::format("--max-num-seqs {}", b);
    }
  }
  return to;
}

// The largest value in [lo, hi) on a `grain` grid for which `make(value)`
// fits, by bisection (memory grows with sequence length); nullopt when even
// `lo` does not fit.
template <typename Make>
std::optional<std::int64_t> largest_fitting(const Ctx& c, const Gpu& gpu,
                                            std::int64_t lo, std::int64_t hi,
                                            std::int64_t grain, Make make) {
  std::int64_t a = lo / grain;
  std::int64_t b = (hi - 1) / grain;
  if (b < a || !fits(c.model, gpu, make(a * grain))) {
    return std::nullopt;
  }
  while (a < b) {
    const std::int64_t mid = (a + b + 1) / 2;
    if (fits(c.model, gpu, make(mid * grain))) {
      a = mid;
    } else {
      b = mid - 1;
    }
  }
  return a * grain;
}

std::optional<Step> shorter_seq(const Ctx& c, const Step& from) {
  const Setup& s = from.setup;
  if (s.engine == Engine::vllm || s.seq <= 512) {
    return std::nullopt;
  }
  auto make = [&s](std::int64_t seq) {
    Setup t = s;
    t.seq = seq;
    t.max_model_len.reset();
    return t;
  };
  const auto best = largest_fitting(c, *from.gpu, 256, s.seq, 256, make);
  Step to = from;
  to.setup = make(best ? *best : s.seq / 2);
  const std::int64_t seq = to.setup.seq;
  to.title = fmt::format("sequence length {} -> {} tokens", s.seq, seq);
  to.changes = fmt::format("context {} -> {} tokens", s.seq, seq);
  to.flags = s.training()
                 ? fmt::format("--max_seq_length {}", seq)
                 : fmt::format("max_length={} (prompt + new tokens)", seq);
  return to;
}

std::optional<Step> max_model_len(const Ctx& c, const Step& from) {
  const Setup& s = from.setup;
  const std::int64_t len = from.resolved.max_model_len;
  if (s.engine != Engine::vllm || len <= 256) {
    return std::nullopt;
  }
  // vLLM admits a request only when max_model_len tokens fit in the KV pool;
  // the request length follows it down.
  auto make = [&s](std::int64_t n) {
    Setup t = s;
    t.max_model_len = n;
    t.seq = std::min(s.seq, n);
    return t;
  };
  const auto best = largest_fitting(c, *from.gpu, 256, len, 256, make);
  Step to = from;
  to.setup = make(best ? *best : len / 2);
  const std::int64_t n = *to.setup.max_model_len;
  to.title = fmt::format("max-model-len {} -> {}", len, n);
  to.changes = fmt::format("longest request {} -> {} tokens", len, n);
  to.flags = fmt::format("--max-model-len {}", n);
  return to;
}

std::optional<Step> flash_attention(const Ctx& /*c*/, const Step& from) {
  const Setup& s = from.setup;
  if (s.attn == Attn::flash) {
    return std::nullopt;
  }
  // FlashAttention-2 needs Ampere (sm80) or newer; older cards get SDPA's
  // memory-efficient kernel instead.
  const bool flash_ok = runs_flash_attention(*from.gpu);
  if (!flash_ok && s.attn == Attn::sdpa) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.attn = flash_ok ? Attn::flash : Attn::sdpa;
  to.title = flash_ok ? "flash attention (no s^2 score matrix)"
                      : "SDPA memory-efficient attention (no s^2 scores)";
  to.flags = flash_ok ? R"(attn_implementation="flash_attention_2")"
                      : R"(attn_implementation="sdpa")";
  return to;
}

std::optional<Step> gpu_util(const Ctx& c, const Step& from) {
  const Setup& s = from.setup;
  if (s.engine != Engine::vllm || fits(c.model, *from.gpu, s)) {
    return std::nullopt;
  }
  // Lower it when the start-up free-memory check fails, raise it when the KV
  // pool is short: the fitting value nearest to the current one.
  std::optional<double> best;
  for (const double u : k_gpu_utils) {
    if (std::abs(u - s.gpu_util) < 1e-9) {
      continue;
    }
    Setup t = s;
    t.gpu_util = u;
    if (fits(c.model, *from.gpu, t) &&
        (!best || std::abs(u - s.gpu_util) < std::abs(*best - s.gpu_util))) {
      best = u;
    }
  }
  if (!best) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.gpu_util = *best;
  to.title = fmt::format("gpu-util {} -> {}", s.gpu_util, *best);
  to.changes = *best > s.gpu_util ? "less memory left to other processes"
                                  : "smaller KV cache pool";
  to.flags = fmt::format("--gpu-memory-utilization {}", *best);
  return to;
}

std::optional<Step> expandable_segments(const Ctx& /*c*/, const Step& from) {
  const Setup& s = from.setup;
  if (s.reserve && *s.reserve <= k_expandable_reserve) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.reserve = k_expandable_reserve;
  to.title = "expandable segments (less allocator fragmentation)";
  to.flags = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
  return to;
}

std::optional<Step> chunked_loss(const Ctx& /*c*/, const Step& from) {
  if (!from.setup.training() || from.setup.loss == Loss::chunked) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.loss = Loss::chunked;
  to.title = "chunked cross-entropy (no full fp32 logits)";
  to.flags =
      "torchtune: loss=CEWithChunkedOutputLoss; transformers: "
      "--use_liger_kernel true";
  return to;
}

std::optional<Step> optimizer_in_bwd(const Ctx& /*c*/, const Step& from) {
  const Setup& s = from.setup;
  if (!s.training() || s.optimizer_in_bwd || s.grad_accum > 1) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.optimizer_in_bwd = true;
  to.title = "optimizer step in backward (no full gradient buffer)";
  to.changes = "no gradient accumulation";
  to.flags = "torchtune: optimizer_in_bwd=True";
  return to;
}

std::optional<Step> half_precision(const Ctx& /*c*/, const Step& from) {
  if (from.setup.dtype != Dtype::fp32) {
    return std::nullopt;
  }
  // Seed checklist step 2: fp32 doubles every 16-bit byte. bf16 needs Ampere;
  // older cards get fp16.
  const bool bf16 = runs_bf16(*from.gpu);
  Step to = from;
  to.setup.dtype = bf16 ? Dtype::bf16 : Dtype::fp16;
  to.title = fmt::format("{} instead of fp32", dtype_name(to.setup.dtype));
  to.flags = from.setup.training()
                 ? (bf16 ? "--bf16 true" : "--fp16 true")
                 : (bf16 ? "torch_dtype=torch.bfloat16 (vLLM: --dtype bfloat16)"
                         : "torch_dtype=torch.float16 (vLLM: --dtype half)");
  return to;
}

std::optional<Step> pure_bf16(const Ctx& /*c*/, const Step& from) {
  const Setup& s = from.setup;
  if (s.mode != Mode::full || s.precision == Precision::pure ||
      s.dtype == Dtype::fp32) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.precision = Precision::pure;
  to.title = fmt::format("pure {} training (no fp32 master weights or states)",
                         dtype_name(s.dtype));
  to.changes =
      "small accuracy risk (16-bit updates; torchtune's and LitGPT's default)";
  to.flags = "torchtune: dtype=bf16; LitGPT: --precision bf16-true";
  return to;
}

// --- Compute ------------------------------------------------------------

std::optional<Step> checkpointing(const Step& from, Checkpointing level) {
  const Setup& s = from.setup;
  if (!s.training() || s.checkpointing >= level) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.checkpointing = level;
  if (level == Checkpointing::selective) {
    to.title = "selective activation recomputation (attention core)";
    to.flags = "Megatron: --recompute-granularity selective";
  } else {
    to.title = "full activation checkpointing (keep layer inputs only)";
    to.flags =
        "--gradient_checkpointing true; torchtune: "
        "enable_activation_checkpointing=True";
  }
  return to;
}

std::optional<Step> checkpointing_selective(const Ctx& /*c*/,
                                            const Step& from) {
  return checkpointing(from, Checkpointing::selective);
}

std::optional<Step> checkpointing_full(const Ctx& /*c*/, const Step& from) {
  return checkpointing(from, Checkpointing::full);
}

std::optional<Step> activation_offload(const Ctx& /*c*/, const Step& from) {
  if (!from.setup.training() || from.setup.activation_offload) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.activation_offload = true;
  to.title = "offload activations to CPU RAM (overlapped with compute)";
  to.flags = "torchtune: enable_activation_offloading=True";
  return to;
}

std::string zero_flags(int stage) {
  std::string flags =
      fmt::format(R"(DeepSpeed: "zero_optimization": {{"stage": {}}})", stage);
  if (stage == 3) {
    flags += R"(; FSDP: --fsdp "full_shard auto_wrap")";
  }
  return flags;
}

std::optional<Step> zero_up(const Ctx& c, const Step& from) {
  const Resolved& r = from.resolved;
  if (!r.training() || r.dp() <= 1 || r.zero >= 3) {
    return std::nullopt;
  }
  // The lowest stage that fits (least communication), else stage 3.
  Step to = from;
  to.setup.fsdp = false;
  int stage = 3;
  for (int lower = r.zero + 1; lower < 3; ++lower) {
    Setup t = from.setup;
    t.zero = lower;
    if (fits(c.model, *from.gpu, t)) {
      stage = lower;
      break;
    }
  }
  to.setup.zero = stage;
  to.title =
      fmt::format("ZeRO stage {} -> {} (shard {} over {} GPUs)", r.zero, stage,
                  stage == 1   ? "optimizer states"
                  : stage == 2 ? "optimizer states + gradients"
                               : "weights, gradients, states",
                  r.dp());
  to.flags = zero_flags(stage);
  return to;
}

std::optional<Step> pipeline(const Ctx& c, const Step& from) {
  const Resolved& r = from.resolved;
  const std::int64_t layers = c.model.num_layers + c.model.num_decoder_layers;
  if (!r.training() || r.dp() < 2 || r.pp * 2 > layers) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.pp = r.pp * 2;
  to.title = fmt::format("pipeline parallel {} -> {} (layers split over GPUs)",
                         r.pp, to.setup.pp);
  to.changes = fmt::format("data parallel {} -> {}", r.dp(),
                           r.total_gpus() / (r.tp * to.setup.pp));
  to.flags = fmt::format(
      "Megatron: --pipeline-model-parallel-size {}; DeepSpeed PipelineModule "
      "num_stages={}",
      to.setup.pp, to.setup.pp);
  return to;
}

// --- Accuracy -----------------------------------------------------------

std::optional<Step> fp8_kv_cache(const Ctx& /*c*/, const Step& from) {
  const Setup& s = from.setup;
  if (s.training() || s.engine != Engine::vllm ||
      from.resolved.kv_dtype == Dtype::fp8 ||
      from.gpu->compute_capability < k_cc_ampere) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.kv_dtype = Dtype::fp8;
  to.title = "fp8 KV cache (half the bytes per token)";
  to.changes = from.gpu->fp8_tflops > 0
                   ? "small accuracy risk"
                   : fmt::format(
                         "small accuracy risk; {} has no fp8 tensor cores: "
                         "stored in fp8, converted to 16-bit on read",
                         from.gpu->name);
  to.flags = "--kv-cache-dtype fp8";
  return to;
}

std::optional<Step> optimizer_8bit(const Ctx& /*c*/, const Step& from) {
  const Setup& s = from.setup;
  if (!s.training() || (s.optimizer != Optimizer::adamw &&
                        s.optimizer != Optimizer::paged_adamw)) {
    return std::nullopt;
  }
  Step to = from;
  const bool paged = s.optimizer == Optimizer::paged_adamw;
  to.setup.optimizer =
      paged ? Optimizer::paged_adamw_8bit : Optimizer::adamw_8bit;
  to.title = "8-bit AdamW states (bitsandbytes)";
  to.changes = "low accuracy risk (Dettmers et al. 2022 match 32-bit Adam)";
  to.flags = paged ? "--optim paged_adamw_8bit" : "--optim adamw_bnb_8bit";
  return to;
}

std::optional<Step> quantize(const Step& from, Quant quant) {
  const Setup& s = from.setup;
  const auto options = quantization_options(*from.gpu, s.engine);
  if (s.training() || from.resolved.quant != Quant::none ||
      std::find(options.begin(), options.end(), quant) == options.end()) {
    return std::nullopt;
  }
  const bool vllm = s.engine == Engine::vllm;
  Step to = from;
  to.setup.quant = quant;
  switch (quant) {
    case Quant::int8:
      to.title = "8-bit weights (int8)";
      to.changes = "small accuracy risk";
      to.flags = vllm ? "an int8 W8A16/W8A8 checkpoint (compressed-tensors)"
                      : "BitsAndBytesConfig(load_in_8bit=True)";
      break;
    case Quant::fp8:
      to.title = "fp8 weights";
      to.changes =
          from.gpu->fp8_tflops > 0
              ? "small accuracy risk"
              : "small accuracy risk; no fp8 tensor cores: weight-only "
                "fp8 (Marlin), compute in 16-bit";
      to.flags = vllm ? "--quantization fp8" : "FbgemmFp8Config()";
      break;
    default:
      to.title = vllm ? "4-bit AWQ weights" : "4-bit NF4 weights";
      to.changes = "moderate accuracy risk (4-bit)";
      to.flags = vllm ? "--quantization awq (an AWQ checkpoint)"
                      : R"(BitsAndBytesConfig(load_in_4bit=True, )"
                        R"(bnb_4bit_quant_type="nf4", )"
                        R"(bnb_4bit_use_double_quant=True))";
      break;
  }
  return to;
}

std::optional<Step> quantize_int8(const Ctx& /*c*/, const Step& from) {
  return quantize(from, Quant::int8);
}

std::optional<Step> quantize_fp8(const Ctx& /*c*/, const Step& from) {
  return quantize(from, Quant::fp8);
}

std::optional<Step> quantize_4bit(const Ctx& /*c*/, const Step& from) {
  return quantize(from,
                  quantization_options(*from.gpu, from.setup.engine).back());
}

std::optional<Step> lora_instead(const Ctx& /*c*/, const Step& from) {
  if (from.setup.mode != Mode::full) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.mode = Mode::lora;
  to.setup.quant = Quant::automatic;
  to.setup.precision = Precision::mixed;
  to.title = fmt::format("LoRA (rank {}) instead of full fine-tuning",
                         to.setup.lora_rank);
  to.changes = "trains adapters only; frozen base";
  to.flags = R"(peft LoraConfig(r=16, target_modules="all-linear"))";
  return to;
}

std::optional<Step> qlora_instead(const Ctx& /*c*/, const Step& from) {
  const Mode mode = from.setup.mode;
  if (mode != Mode::full && mode != Mode::lora) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.mode = Mode::qlora;
  to.setup.quant = Quant::automatic;  // resolves to nf4
  to.title = "QLoRA: 4-bit NF4 base + LoRA adapters";
  to.changes = mode == Mode::full ? "trains adapters only; 4-bit frozen base"
                                  : "4-bit frozen base (small accuracy risk)";
  to.flags =
      R"(BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", )"
      R"(bnb_4bit_use_double_quant=True) + peft LoraConfig)";
  return to;
}

// --- Hardware -----------------------------------------------------------

// The next GPU count: powers of two inside a node, then doubling whole
// nodes.
void next_count(Setup& s) {
  if (s.nodes == 1 && s.gpus < k_gpus_per_node) {
    s.gpus = std::min(k_gpus_per_node, s.gpus * 2);
  } else {
    s.nodes *= 2;
  }
}

std::optional<Step> more_gpus(const Ctx& c, const Step& from) {
  const Setup& s = from.setup;
  Setup t = s;
  // Data parallelism lowers per-GPU memory only when it shards: training
  // without ZeRO moves to ZeRO-3 / FSDP with the new GPUs.
  const Resolved& r = from.resolved;
  const bool add_sharding = r.training() && r.zero == 0;
  if (add_sharding) {
    t.zero = 3;
  }
  std::optional<Setup> found;
  std::optional<Setup> first;  // one step up
  while (true) {
    next_count(t);
    if (t.total_gpus() > k_sizing_max_gpus) {
      break;
    }
    if (t.training()) {
      // Data parallel grows; grad-accum shrinks when that keeps the global
      // batch exact.
      const int dp_old = r.dp();
      const int dp_new = t.total_gpus() / (r.tp * r.pp);
      const int global = s.grad_accum * dp_old;
      t.grad_accum =
          global % dp_new == 0 ? std::max(1, global / dp_new) : s.grad_accum;
    } else if (s.split_layers) {
      // transformers device_map="auto": whole layers over more GPUs of one
      // process, so one node at most.
      if (t.nodes > 1) {
        break;
      }
    } else {
      // Inference: tensor parallel over each node's GPUs, pipeline over nodes.
      t.tp = t.gpus;
      t.pp = t.nodes;
    }
    if (!first) {
      first = t;
    }
    if (fits(c.model, *from.gpu, t)) {
      found = t;
      break;
    }
  }
  if (!first) {
    return std::nullopt;
  }
  Step to = from;
  to.setup = found ? *found : *first;
  if (!found) {
    // Nothing fits up to the bound: show what one doubling saves, at the
    // user's grad-accum.
    to.setup.grad_accum = s.grad_accum;
  }
  const Resolved n = resolve(c.model, *from.gpu, to.setup);
  std::string how;
  if (n.split_layers) {
    how = "whole layers per GPU";
  } else if (n.training()) {
    how = fmt::format("data parallel {}{}", n.dp(),
                      add_sharding ? ", ZeRO-3 / FSDP" : "");
  } else {
    how = fmt::format("tensor parallel {}{}", n.tp,
                      n.pp > 1 ? fmt::format(", pipeline {}", n.pp) : "");
  }
  to.title =
      fmt::format("{} -> {} GPUs ({})", s.total_gpus(), n.total_gpus(), how);
  if (n.training()) {
    to.flags = n.nodes > 1
                   ? fmt::format("torchrun --nnodes {} --nproc_per_node {}",
                                 n.nodes, n.gpus)
                   : fmt::format("torchrun --nproc_per_node {}", n.gpus);
    if (add_sharding) {
      to.flags += "; " + zero_flags(3);
    }
  } else if (n.engine == Engine::vllm) {
    to.flags = fmt::format("--tensor-parallel-size {}", n.tp);
    if (n.pp > 1) {
      to.flags += fmt::format(" --pipeline-parallel-size {}", n.pp);
    }
  } else if (n.split_layers) {
    to.flags = R"(device_map="auto" over the GPUs)";
  } else {
    to.flags = fmt::format(
        R"(tp_plan="auto" under torchrun --nproc_per_node {})", n.gpus);
  }
  return to;
}

std::optional<Step> bigger_gpu(const Ctx& c, const Step& from) {
  // The smallest bigger card that fits; else the biggest card (which only
  // matters inside a combination: alone it changes nothing and is dropped).
  const Gpu* best = nullptr;
  const Gpu* biggest = nullptr;
  for (const Gpu& g : c.gpus) {
    // Same vendor (the software stack stays), a card the catalog lists as
    // common unless the user's own card is not.
    if (g.capacity_bytes <= from.gpu->capacity_bytes ||
        g.vendor != from.gpu->vendor || (!g.common && from.gpu->common)) {
      continue;
    }
    if (biggest == nullptr || g.capacity_bytes > biggest->capacity_bytes ||
        (g.capacity_bytes == biggest->capacity_bytes &&
         g.name < biggest->name)) {
      biggest = &g;
    }
    // A default the user left to vLLM (its scheduler budget) follows the
    // card: resolve() derives it for `g`.
    if (!fits(c.model, g, from.setup)) {
      continue;
    }
    if (best == nullptr || g.capacity_bytes < best->capacity_bytes ||
        (g.capacity_bytes == best->capacity_bytes && g.name < best->name)) {
      best = &g;
    }
  }
  if (best == nullptr) {
    best = biggest;
  }
  if (best == nullptr) {
    return std::nullopt;
  }
  Step to = from;
  to.gpu = best;
  to.title = fmt::format("{} -> {} ({} each)", from.gpu->name, best->name,
                         format_gib(best->capacity_bytes));
  return to;
}

// --- Offload ------------------------------------------------------------

std::optional<Step> offload(const Step& from, Offload where) {
  const Setup& s = from.setup;
  if (s.offload == where || s.offload == Offload::all) {
    return std::nullopt;
  }
  Step to = from;
  to.setup.offload = where;
  if (s.training()) {
    // DeepSpeed offloads only under ZeRO (stage 2 keeps the weights whole,
    // stage 3 is needed for offload_param).
    const int stage =
        where == Offload::optimizer ? std::max(2, from.resolved.zero) : 3;
    if (where == Offload::optimizer) {
      to.title = "offload optimizer states to CPU RAM (ZeRO-Offload)";
      to.flags = fmt::format(
          R"(DeepSpeed: "zero_optimization": {{"stage": {}, )"
          R"("offload_optimizer": {{"device": "cpu", "pin_memory": true}}}})",
          stage);
    } else {
      to.title = "offload weights and optimizer states to CPU RAM";
      to.flags =
          fmt::format(R"(DeepSpeed: "zero_optimization": {{"stage": {}, )"
                      R"("offload_param": {{"device": "cpu"}}, )"
                      R"("offload_optimizer": {{"device": "cpu"}}}}; )"
                      R"(FSDP: --fsdp "full_shard auto_wrap offload")",
                      stage);
    }
  } else {
    to.title = "offload weights to CPU RAM (streamed every step)";
    to.flags =
        s.engine == Engine::vllm
            ? "--cpu-offload-gb N"
            : R"(device_map="auto", max_memory={0: "..GiB", "cpu": "..GiB"})";
  }
  return to;
}

std::optional<Step> offload_optimizer(const Ctx& /*c*/, const Step& from) {
  if (!from.setup.training() || from.setup.offload != Offload::none) {
    return std::nullopt;
  }
  return offload(from, Offload::optimizer);
}

std::optional<Step> offload_all(const Ctx& /*c*/, const Step& from) {
  return offload(from, from.setup.training() ? Offload::all : Offload::params);
}

// The table: one row per fix, in cost-class order (the order combinations
// are applied in; searching fixes last so they search the combined setup).
constexpr std::array k_fixes = {
    FixKind{"half-precision", CostClass::free, "dtype", half_precision},
    FixKind{"flash-attention", CostClass::free, "attn", flash_attention},
    FixKind{"chunked-loss", CostClass::free, "loss", chunked_loss},
    FixKind{"optimizer-in-bwd", CostClass::free, "inbwd", optimizer_in_bwd},
    FixKind{"expandable-segments", CostClass::free, "alloc",
            expandable_segments, "fragmentation", k_fragmentation_share},
    FixKind{"checkpointing-selective", CostClass::compute, "ckpt",
            checkpointing_selective},
    FixKind{"checkpointing-full", CostClass::compute, "ckpt",
            checkpointing_full},
    FixKind{"activation-offload", CostClass::compute, "actoff",
            activation_offload},
    FixKind{"zero-stage", CostClass::compute, "zero", zero_up},
    FixKind{"pipeline-parallel", CostClass::compute, "pp", pipeline},
    FixKind{"fp8-kv-cache", CostClass::accuracy, "kv", fp8_kv_cache,
            "kv_cache"},
    FixKind{"optimizer-8bit", CostClass::accuracy, "optim", optimizer_8bit,
            "optimizer", k_optimizer_share},
    FixKind{"pure-bf16", CostClass::accuracy, "precision", pure_bf16},
    FixKind{"quantize-int8", CostClass::accuracy, "quant", quantize_int8},
    FixKind{"quantize-fp8", CostClass::accuracy, "quant", quantize_fp8},
    FixKind{"quantize-4bit", CostClass::accuracy, "quant", quantize_4bit},
    FixKind{"lora", CostClass::accuracy, "mode", lora_instead},
    FixKind{"qlora", CostClass::accuracy, "mode", qlora_instead},
    FixKind{"offload-optimizer", CostClass::offload, "offload",
            offload_optimizer},
    FixKind{"cpu-offload", CostClass::offload, "offload", offload_all},
    FixKind{"bigger-gpu", CostClass::hardware, "card", bigger_gpu},
    FixKind{"more-gpus", CostClass::hardware, "count", more_gpus},
    FixKind{"reduce-batch", CostClass::free, "batch", reduce_batch},
    FixKind{"shorter-seq", CostClass::free, "seq", shorter_seq},
    FixKind{"max-model-len", CostClass::free, "seq", max_model_len},
    FixKind{"gpu-util", CostClass::free, "util", gpu_util},
};

// Whether `kind` applies to a plan with `budget` (fixes aimed at one
// component are offered only when that component is there).
bool relevant(const FixKind& kind, const Budget& budget) {
  if (kind.needs.empty()) {
    return true;
  }
  const Bytes bytes = budget.bytes_of(kind.needs);
  return bytes > 0 &&
         static_cast<double>(bytes) >=
             kind.min_share * static_cast<double>(budget.capacity_bytes);
}

// Seconds per token, the unit fixes are compared in (a fix may change how
// many tokens a step holds).
double seconds_per_token(const StepTime& t) {
  return t.tokens_per_step > 0 ? t.step_s / t.tokens_per_step : 0;
}

std::string percent(double factor) {
  return fmt::format("{:+.0f} % time per token", (factor - 1) * 100);
}

// Prices the step and words its cost.
Fix make_fix(const Ctx& c, std::string id, CostClass cost_class,
             const Step& step, const Priced& priced) {
  Fix fix;
  fix.id = std::move(id);
  fix.title = step.title;
  fix.request = priced.request;
  fix.setup = priced.setup;
  fix.gpu = step.gpu;
  fix.total_bytes = priced.budget.total_bytes();
  fix.fits = priced.budget.fits();
  fix.saves_bytes = c.base_total - fix.total_bytes;
  fix.cost_class = cost_class;
  fix.engine_flags = step.flags;

  const StepTime t =
      estimate_time(c.model, *step.gpu, priced.setup, priced.budget);
  const double before = seconds_per_token(c.base_time);
  const double after = seconds_per_token(t);
  fix.step_factor = before > 0 && after > 0 ? after / before : 1.0;
  // The cost in words: what it costs (time, GPUs, host RAM), then what it
  // changes for the user (global batch, context, accuracy).
  const bool slower = std::abs(fix.step_factor - 1) >= 0.05;
  const std::string time = slower ? percent(fix.step_factor) : "";
  std::string cost;
  switch (cost_class) {
    case CostClass::free:
      cost = join("free", time, ", ");
      break;
    case CostClass::compute:
      cost = percent(fix.step_factor);
      break;
    case CostClass::accuracy:
      cost = time;
      break;
    case CostClass::hardware: {
      const int old_gpus = c.base.total_gpus();
      const int new_gpus = priced.setup.total_gpus();
      const double gpu_hours = fix.step_factor * new_gpus / old_gpus;
      cost = new_gpus != old_gpus
                 ? fmt::format("+{} GPUs, {:.2f}x GPU-hours per token",
                               new_gpus - old_gpus, gpu_hours)
                 : join("bigger card", time, ", ");
      if (c.base.price && new_gpus != old_gpus) {
        cost +=
            fmt::format(", +${:.2f}/h", *c.base.price * (new_gpus - old_gpus));
      }
      break;
    }
    case CostClass::offload:
      cost = fmt::format("{} ({:.1f} s per step over PCIe)",
                         percent(fix.step_factor), t.offload_s);
      if (priced.budget.host_bytes > 0) {
        cost += fmt::format(", {} host RAM per node",
                            format_gib(priced.budget.host_bytes));
      }
      break;
  }
  fix.cost = join(cost, step.changes, "; ");
  return fix;
}

// Within the accuracy class: 8-bit formats risk less than 4-bit ones, and
// both less than changing the training method.
int accuracy_risk(std::string_view id) {
  if (id == "quantize-4bit") {
    return 2;
  }
  if (id == "lora" || id == "combination") {
    return 3;
  }
  if (id == "qlora") {
    return 4;
  }
  return 1;
}

bool better(const Fix& a, const Fix& b) {
  if (a.fits != b.fits) {
    return a.fits;
  }
  if (a.cost_class != b.cost_class) {
    return a.cost_class < b.cost_class;
  }
  if (a.cost_class == CostClass::accuracy &&
      accuracy_risk(a.id) != accuracy_risk(b.id)) {
    return accuracy_risk(a.id) < accuracy_risk(b.id);
  }
  // Within compute, the cheaper slowdown first (in 5 % steps): selective
  // before full recomputation when both fit.
  if (a.cost_class == CostClass::compute) {
    const auto sa = std::lround(a.step_factor * 20);
    const auto sb = std::lround(b.step_factor * 20);
    if (sa != sb) {
      return sa < sb;
    }
  }
  if (a.saves_bytes != b.saves_bytes) {
    return a.saves_bytes > b.saves_bytes;
  }
  return a.id < b.id;
}

// Applies the fixes `chosen` (indices into k_fixes, ascending) in table order.
std::optional<Step> apply_all(const Ctx& c, const Step& start,
                              std::span<const std::size_t> chosen) {
  Step step = start;
  std::string title;
  std::string changes;
  std::string flags;
  for (const std::size_t i : chosen) {
    auto next = k_fixes.at(i).apply(c, step);
    if (!next) {
      return std::nullopt;
    }
    title = join(title, next->title, " + ");
    changes = join(changes, next->changes, "; ");
    flags = join(flags, next->flags, "; ");
    step = *next;
    step.resolved = resolve(c.model, *step.gpu, step.setup);
  }
  step.title = title;
  step.changes = changes;
  step.flags = flags;
  return step;
}

// Ranks a fitting combination: cheapest worst member, then fewest fixes,
// then cheapest in sum, then fewest GPUs, then the largest saving.
struct ComboScore {
  int worst = 0;
  std::size_t size = 0;
  int sum = 0;
  int gpus = 0;
  Bytes saves = 0;
  bool operator<(const ComboScore& o) const {
    if (worst != o.worst) {
      return worst < o.worst;
    }
    if (size != o.size) {
      return size < o.size;
    }
    if (sum != o.sum) {
      return sum < o.sum;
    }
    if (gpus != o.gpus) {
      return gpus < o.gpus;
    }
    return saves > o.saves;
  }
};

// Adds the smallest combinations of `applicable` fixes (indices into
// k_fixes) that fit: pairs, then triples, then quadruples (no two of one
// group), cheaper in their dearest member than `cheapest_fitting` (the
// cheapest class a single fix fits with); the best for each cost class of
// its dearest member. Shorter sequences join only when nothing else works:
// they change the task.
void add_combinations(const Ctx& c, const Step& start,
                      const std::vector<std::size_t>& applicable,
                      int cheapest_fitting, std::vector<Fix>& fixes) {
  // The best combination for each cost class of its dearest member, so the
  // list shows e.g. both "QLoRA + ..." and "more GPUs + ...".
  constexpr std::size_t k_classes = 5;
  std::array<std::optional<std::pair<ComboScore, Fix>>, k_classes> best;
  std::vector<std::size_t> chosen;
  bool allow_seq = false;
  auto consider = [&]() {
    ComboScore score;
    CostClass worst = CostClass::free;
    for (const std::size_t i : chosen) {
      const FixKind& kind = k_fixes.at(i);
      worst = std::max(worst, kind.cost_class);
      score.sum +=
          10 * static_cast<int>(kind.cost_class) +
          (kind.cost_class == CostClass::accuracy ? accuracy_risk(kind.id) : 0);
    }
    score.worst = static_cast<int>(worst);
    score.size = chosen.size();
    auto& slot = best.at(static_cast<std::size_t>(worst));
    if (score.worst >= cheapest_fitting ||
        (slot && slot->first.size < score.size)) {
      return;  // a single fix or a smaller combination already does it
    }
    const auto step = apply_all(c, start, chosen);
    if (!step) {
      return;
    }
    const Pricing pricing = price(c.model, *step->gpu, step->setup);
    const auto& priced = pricing.priced;
    if (!priced || !priced->budget.fits()) {
      return;
    }
    score.saves = c.base_total - priced->budget.total_bytes();
    score.gpus = priced->setup.total_gpus();
    if (!slot || score < slot->first) {
      slot.emplace(score, make_fix(c, "combination", worst, *step, *priced));
    }
  };
  const std::size_t n = applicable.size();
  // Depth-first over subsets of size `size` in table order.
  auto grow = [&](auto& self, std::size_t from, std::size_t size) -> void {
    if (chosen.size() == size) {
      consider();
      return;
    }
    for (std::size_t j = from; j < n; ++j) {
      const FixKind& kind = k_fixes.at(applicable[j]);
      const bool clash =
          (!allow_seq && kind.group == "seq") ||
          std::any_of(chosen.begin(), chosen.end(), [&](std::size_t i) {
            return k_fixes.at(i).group == kind.group;
          });
      if (clash) {
        continue;
      }
      chosen.push_back(applicable[j]);
      self(self, j + 1, size);
      chosen.pop_back();
    }
  };
  for (const bool seq : {false, true}) {
    allow_seq = seq;
    for (std::size_t size = 2; size <= 4; ++size) {
      grow(grow, 0, size);
    }
    if (std::any_of(best.begin(), best.end(),
                    [](const auto& b) { return b.has_value(); })) {
      break;
    }
  }
  // A free or compute-only combination is the way; when every combination
  // changes the task, buys hardware or offloads, all routes are shown.
  bool cheap_found = false;
  for (auto& b : best) {
    if (b && !cheap_found) {
      cheap_found = b->second.cost_class <= CostClass::compute;
      fixes.push_back(std::move(b->second));
    }
  }
}

}  // namespace

std::vector<Quant> quantization_options(const Gpu& gpu, Engine engine) {
  const bool vllm = engine == Engine::vllm;
  std::vector<Quant> options;
  if (!vllm) {
    options.push_back(Quant::int8);
  }
  // vLLM runs fp8 checkpoints weight-only (Marlin) from Ampere on;
  // transformers' fp8 kernels (FBGEMM) need fp8 tensor cores.
  if (gpu.compute_capability >= k_cc_ampere && (vllm || gpu.fp8_tflops > 0)) {
    options.push_back(Quant::fp8);
  }
  options.push_back(vllm ? Quant::awq : Quant::nf4);
  return options;
}

std::vector<Fix> advise(const Model& model, const Gpu& gpu, const Setup& setup,
                        const std::vector<Gpu>& gpus) {
  const Pricing pricing = price(model, gpu, setup);
  if (!pricing.priced) {
    return {};
  }
  const Priced* base = &*pricing.priced;
  const Bytes base_total = base->budget.total_bytes();
  const bool base_fits = base->budget.fits();
  if (base_fits && base->setup.engine == Engine::vllm) {
    // vLLM sizes its KV pool to gpu-util x capacity by design: a plan that
    // starts has nothing to fix, and its headroom is the 1 - gpu-util left.
    return {};
  }
  const Ctx c{model, setup, gpus, base_total,
              estimate_time(model, gpu, base->setup, base->budget)};
  const Step start{setup, base->setup, &gpu, "", "", ""};

  std::vector<Fix> fixes;
  std::vector<std::size_t> applicable;  // kinds that change the setup
  for (std::size_t i = 0; i < k_fixes.size(); ++i) {
    const FixKind& kind = k_fixes.at(i);
    if (!relevant(kind, base->budget)) {
      continue;
    }
    const auto step = kind.apply(c, start);
    if (!step) {
      continue;
    }
    const Pricing step_pricing = price(model, *step->gpu, step->setup);
    const auto& priced = step_pricing.priced;
    if (!priced) {
      continue;
    }
    applicable.push_back(i);
    const Bytes total = priced->budget.total_bytes();
    const bool now_fits = priced->budget.fits();
    if (total >= base_total && !(now_fits && !base_fits)) {
      continue;  // alone a no-op or worse (it may still help in combination)
    }
    fixes.push_back(
        make_fix(c, std::string(kind.id), kind.cost_class, *step, *priced));
  }

  // Combinations, when no single fix fits or only dearer ones do. A shorter
  // sequence changes the task, so a fitting one does not stand in for a
  // combination that keeps it.
  int cheapest_fitting = static_cast<int>(CostClass::offload) + 1;
  for (const Fix& f : fixes) {
    if (f.fits && f.id != "shorter-seq" && f.id != "max-model-len") {
      cheapest_fitting =
          std::min(cheapest_fitting, static_cast<int>(f.cost_class));
    }
  }
  if (!base_fits && applicable.size() >= 2) {
    add_combinations(c, start, applicable, cheapest_fitting, fixes);
  }
  std::sort(fixes.begin(), fixes.end(), better);
  for (std::size_t i = 0; i < fixes.size(); ++i) {
    fixes[i].rank = static_cast<int>(i + 1);
  }
  return fixes;
}

}  // namespace oomplan
