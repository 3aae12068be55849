#include "oomplan/plan.hpp"

#include "oomplan/capability.hpp"
#include "oomplan/error.hpp"
#include "oomplan/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

// The plan pipeline. Invariants:
// - resolve() is the only place a default is derived from the model, the card
//   or another field; everything downstream sees a Resolved;
// - check() is the only validation of a setup; it returns the problem instead
//   of throwing, and each message is the contract's one line;
// - price() is the only chain resolve -> check -> memory(); make_plan() adds
//   the advisor and the time model on top.

namespace oomplan {

namespace {

// Tensor and pipeline parallel sizes. Inference spreads one replica over a
// node's GPUs (vLLM and transformers tp_plan); training starts
// data-parallel. device_map="auto" runs one process holding whole layers per
// GPU.
std::pair<int, int> tp_pp(const Setup& s) {
  if (s.split_layers) {
    return {1, 1};
  }
  return {
      s.tp.value_or(s.training() ? 1 : std::max(1, s.gpus / std::max(1, s.pp))),
      s.pp};
}

}  // namespace

int resolved_dp(const Setup& setup) {
  const auto [tp, pp] = tp_pp(setup);
  return setup.total_gpus() / (tp * pp * setup.cp);
}

Resolved resolve(const Model& model, const Gpu& gpu, const Setup& s) {
  Resolved r;
  r.gpus = s.gpus;
  r.nodes = s.nodes;
  r.mode = s.mode;
  r.engine = s.engine;
  r.seq = s.seq;
  r.batch = s.batch;
  r.dtype = s.dtype;
  r.kv_dtype = s.kv_dtype.value_or(s.dtype);
  r.pp = s.pp;
  r.cp = s.cp;
  r.split_layers = s.split_layers;
  r.sequence_parallel = s.sequence_parallel;
  r.fsdp = s.fsdp;
  r.fsdp_version = s.fsdp_version.value_or(k_default_fsdp_version);
  r.offload = s.offload;
  r.checkpointing = s.checkpointing;
  r.checkpoint_every = s.checkpoint_every;
  r.attn = s.attn;
  r.precision = s.precision;
  r.optimizer = s.optimizer;
  r.compile = s.compile;
  r.float8 = s.float8;
  r.prepare_kbit = s.prepare_kbit;
  r.lora_rank = s.lora_rank;
  r.lora_targets = s.lora_targets;
  r.optimizer_in_bwd = s.optimizer_in_bwd;
  r.loss = s.loss;
  r.activation_offload = s.activation_offload;
  r.grad_accum = s.grad_accum;
  r.gpu_util = s.gpu_util;
  r.enforce_eager = s.enforce_eager;
  r.vllm_version = s.vllm_version;
  r.vllm_release = s.vllm_release.value_or(vllm_era_release(s.vllm_version));
  r.overhead_gib = s.overhead_gib;
  r.reserve = s.reserve;
  r.price = s.price;
  const double capacity = static_cast<double>(gpu.capacity_bytes);
  if (s.min_headroom_gib) {
    r.min_headroom_bytes =
        round_bytes(*s.min_headroom_gib * static_cast<double>(k_gib));
  } else if (s.min_headroom_share) {
    r.min_headroom_bytes = round_bytes(*s.min_headroom_share * capacity);
  } else if (s.engine != Engine::vllm || s.training()) {
    r.min_headroom_bytes = round_bytes(k_low_headroom_share * capacity);
  }
  if (s.host_ram_gib) {
    r.host_ram_bytes =
        round_bytes(*s.host_ram_gib * static_cast<double>(k_gib));
  }

  std::tie(r.tp, r.pp) = tp_pp(s);
  r.zero = s.zero.value_or(s.fsdp ? 3 : 0);
  // --quant auto: the checkpoint's own format; QLoRA's base is NF4.
  r.quant = s.quant;
  if (r.quant == Quant::automatic) {
    r.quant = s.mode == Mode::qlora ? Quant::nf4 : model.checkpoint_quant;
  }
  if (r.quant == Quant::automatic) {
    r.quant = Quant::none;
  }
  // --seq, but never past the model's context: vLLM's own default is the
  // derived max_model_len (config.py _get_and_verify_max_len), and an
  // explicit longer one is refused at start-up. The plan warns
  // (seq_beyond_context) when --seq exceeds the context.
  r.max_model_len = s.max_model_len.value_or(
      model.max_position_embeddings > 0
          ? std::min(s.seq, model.max_position_embeddings)
          : s.seq);
  // vLLM: the engine the release runs for this model, card and precision,
  // then its scheduler defaults (vllm.hpp).
  r.vllm_engine =
      vllm_engine_of(model, gpu, r.vllm_release, r.dtype, r.kv_dtype, r.quant);
  r.max_num_seqs = s.max_num_seqs.value_or(
      vllm_default_max_num_seqs(gpu, r.vllm_release, r.vllm_engine));
  r.max_num_batched_tokens =
      s.max_num_batched_tokens.value_or(vllm_default_batched_tokens(
          model, gpu, r.vllm_release, r.vllm_engine, r.max_model_len));
  r.p2p = resolve_p2p(s.p2p, gpu, r.tp, r.gpus);
  return r;
}

namespace {

// The tensor-parallel sizes vLLM accepts: tp divides the attention heads, and
// the KV heads divide by tp or tp by them (replication).
std::string valid_tp_text(const Model& model) {
  const std::int64_t n = model.num_heads;
  const std::int64_t kv = model.kv_lora_rank > 0 ? n : model.num_kv_heads;
  std::string text;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0 && (kv <= 0 || kv % d == 0 || d % kv == 0)) {
      text += text.empty() ? "" : ", ";
      text += std::to_string(d);
    }
  }
  return text;
}

// Options that contradict each other, whatever the model: each message names
// both and the fix.
std::optional<std::string> check_request(const Setup& s) {
  if (s.fsdp && s.zero && *s.zero != 3) {
    return fmt::format(
        "--fsdp shards like ZeRO stage 3 and contradicts --zero {}; drop "
        "--zero or use --zero 3",
        *s.zero);
  }
  if (s.fsdp_version && !s.fsdp) {
    return fmt::format(
        "--fsdp-version {} applies to FSDP FULL_SHARD; add --fsdp or drop "
        "--fsdp-version",
        *s.fsdp_version);
  }
  if (s.split_layers && s.tp && *s.tp > 1) {
    return fmt::format(
        "--split layers puts whole layers on each GPU and contradicts --tp "
        "{}; drop one of them",
        *s.tp);
  }
  if (s.split_layers && s.pp > 1) {
    return fmt::format(
        "--split layers already splits the layers and contradicts --pp {}; "
        "drop one of them",
        s.pp);
  }
  if (s.engine == Engine::vllm && s.training()) {
    return fmt::format(
        "--engine vllm serves models and cannot train (--mode {}); use "
        "--engine hf for training or --mode infer with vllm",
        mode_name(s.mode));
  }
  if (s.mode == Mode::full && s.quant != Quant::automatic &&
      s.quant != Quant::none) {
    return fmt::format(
        "--mode full updates every weight and cannot train --quant {} "
        "weights; drop --quant or use --mode qlora (or lora) over the "
        "quantized base",
        quant_name(s.quant));
  }
  if (s.mode == Mode::qlora && s.quant == Quant::none) {
    return std::string(
        "--mode qlora trains adapters over a quantized base and contradicts "
        "--quant none; use --mode lora for a 16-bit base");
  }
  if (s.engine == Engine::vllm && s.split_layers) {
    return std::string(
        "--split layers is transformers' device_map=\"auto\" and does not "
        "apply to --engine vllm; use --tp or --pp");
  }
  if (!s.training() && ((s.zero && *s.zero != 0) || s.fsdp)) {
    return std::string(
        "--zero and --fsdp apply to training (--mode full, lora or qlora)");
  }
  if (s.cp > 1 && !s.training()) {
    return std::string(
        "--cp shards a training step's sequence over GPUs (torchtitan context "
        "parallelism); use it with --mode full, lora or qlora");
  }
  if (s.cp > 1 && s.seq % (2 * std::int64_t{s.cp}) != 0) {
    // torch context_parallel's load balancing for causal attention splits
    // the sequence into 2 x cp chunks (torchtitan: seq % (2 * cp) == 0).
    return fmt::format(
        "--seq {} does not split into 2 x --cp {} equal chunks; use a --seq "
        "divisible by {}",
        s.seq, s.cp, 2 * s.cp);
  }
  if (s.float8 && !s.training()) {
    return std::string(
        "--float8 is torchao float8 training; use it with --mode full, lora or "
        "qlora (for fp8 inference weights use --quant fp8)");
  }
  if (s.precision == Precision::amp && s.mode == Mode::qlora) {
    return std::string(
        "--precision amp keeps fp32 parameters, and a 4-bit base has none to "
        "keep; for PEFT's fp32 norms, embeddings and lm_head use --precision "
        "mixed --prepare-kbit");
  }
  if (s.prepare_kbit &&
      (s.mode != Mode::qlora || s.precision != Precision::mixed)) {
    return std::string(
        "--prepare-kbit is PEFT's prepare_model_for_kbit_training for a "
        "bitsandbytes base; use it with --mode qlora --precision mixed");
  }
  const std::int64_t total = std::int64_t{s.gpus} * s.nodes;
  if (total > k_max_gpus) {
    return fmt::format(
        "{} GPUs per node x {} nodes = {} GPUs is above the {} limit", s.gpus,
        s.nodes, total, k_max_gpus);
  }
  return std::nullopt;
}

// The layout against the GPUs and the model.
std::optional<std::string> check_layout(const Model& model, const Setup& s,
                                        const Resolved& r) {
  const std::int64_t total = r.total_gpus();
  const std::int64_t group = std::int64_t{r.tp} * r.pp;
  if (r.cp > 1 && (group * r.cp > total || total % (group * r.cp) != 0)) {
    return fmt::format(
        "--tp {} x --pp {} x --cp {} = {} GPUs per replica does not divide the "
        "{} GPUs; choose tp x pp x cp that divides {}",
        r.tp, r.pp, r.cp, group * r.cp, total, total);
  }
  if (group > total || total % group != 0) {
    if (!s.tp) {
      return fmt::format(
          "--pp {} does not divide the {} GPUs; use a --pp that divides {}",
          r.pp, total, total);
    }
    return fmt::format(
        "--tp {} x --pp {} = {} GPUs per replica does not divide the {} GPUs; "
        "choose tp x pp that divides {}",
        r.tp, r.pp, group, total, total);
  }
  // DeepSpeed's offload_optimizer is "valid for ZeRO stage 1, 2, 3" and
  // offload_param for stage 3 only (docs/_pages/config-json.md); FSDP's
  // CPUOffload moves parameters, gradients and states (--fsdp is stage 3).
  if (r.training() && r.offload != Offload::none && r.zero == 0) {
    return fmt::format(
        "--offload {} needs ZeRO: DeepSpeed offloads only inside its ZeRO "
        "optimizer (stage 1 or more, parameters at stage 3); add --zero 3 "
        "or --fsdp",
        offload_name(r.offload));
  }
  if (r.training() && r.zero < 3 &&
      (r.offload == Offload::params || r.offload == Offload::all)) {
    return fmt::format(
        "--offload {} moves the parameters only at ZeRO stage 3 "
        "(offload_param) or with --fsdp; at stage {} use --offload optimizer, "
        "or add --zero 3",
        offload_name(r.offload), r.zero);
  }
  if (r.sequence_parallel && r.tp == 1) {
    return std::string(
        "--sequence-parallel splits activations over the tensor-parallel "
        "group and needs --tp 2 or more");
  }
  const std::string& name = model.name;
  if (model.num_heads > 0 && model.num_heads % r.tp != 0) {
    if (!s.tp) {
      // The user asked for GPUs, not for this tensor-parallel size: say
      // where it came from and what to change.
      return fmt::format(
          "{} GPUs per node mean tensor parallel {} by default, which does not "
          "divide the {} attention heads of {}; pass --tp with a divisor of {} "
          "(and --pp so that tp x pp divides the GPUs), or --split layers",
          r.gpus, r.tp, model.num_heads, name, model.num_heads);
    }
    return fmt::format(
        "--tp {} does not divide the {} attention heads of {}; valid: {}", r.tp,
        model.num_heads, name, valid_tp_text(model));
  }
  if (model.kv_lora_rank == 0 && model.num_kv_heads > 0 &&
      model.num_kv_heads % r.tp != 0 && r.tp % model.num_kv_heads != 0) {
    return fmt::format(
        "--tp {} does not divide the {} KV heads of {} (nor do they divide "
        "it); valid: {}",
        r.tp, model.num_kv_heads, name, valid_tp_text(model));
  }
  const std::int64_t layers =
      model.num_layers + std::max<std::int64_t>(0, model.num_decoder_layers);
  if (r.pp > layers) {
    return fmt::format("--pp {} exceeds the {} layers of {}", r.pp, layers,
                       name);
  }
  if (r.split_layers && r.gpus > layers) {
    return fmt::format(
        "--split layers puts whole layers on each GPU: {} GPUs exceed the {} "
        "layers of {}",
        r.gpus, layers, name);
  }
  return std::nullopt;
}

}  // namespace

namespace {

// Every check of a setup, given its resolution (computed once by the caller).
std::optional<std::string> check_resolved(const Model& model, const Gpu& gpu,
                                          const Setup& setup,
                                          const Resolved& resolved) {
  if (auto problem = check_request(setup)) {
    return problem;
  }
  // torchao float8 training runs torch._scaled_mm, which needs fp8 tensor
  // cores (compute capability 8.9: Ada, Hopper and newer).
  if (setup.float8 && below(gpu, k_cc_fp8_tensor_cores)) {
    return fmt::format(
        "--float8 needs fp8 tensor cores (compute capability 8.9 or newer: "
        "L4, L40S, RTX 4090, H100, H200, B200); {} has {}.{}",
        gpu.name, gpu.compute_capability / 10, gpu.compute_capability % 10);
  }
  return check_layout(model, setup, resolved);
}

}  // namespace

std::optional<std::string> check(const Model& model, const Gpu& gpu,
                                 const Setup& setup) {
  return check_resolved(model, gpu, setup, resolve(model, gpu, setup));
}

Pricing price(const Model& model, const Gpu& gpu, const Setup& setup) {
  Pricing out;
  Priced p{setup, resolve(model, gpu, setup), {}};
  if (auto problem = check_resolved(model, gpu, setup, p.setup)) {
    out.problem = std::move(*problem);
    return out;
  }
  p.budget = memory(model, gpu, p.setup);
  out.priced = std::move(p);
  return out;
}

bool fits(const Model& model, const Gpu& gpu, const Setup& setup) {
  const Pricing p = price(model, gpu, setup);
  return p.priced && p.priced->budget.fits();
}

Plan make_plan(const Model& model, const Gpu& gpu, const Setup& setup,
               const std::vector<Gpu>& cards, const std::string& model_arg) {
  Pricing pricing = price(model, gpu, setup);
  if (!pricing.priced) {
    throw Error(pricing.problem);
  }
  Plan plan;
  plan.model = &model;
  plan.gpu = &gpu;
  plan.request = setup;
  plan.setup = pricing.priced->setup;
  plan.budget = std::move(pricing.priced->budget);
  plan.model_arg = model_arg;
  const bool tight =
      static_cast<double>(plan.budget.headroom_bytes()) <
      k_advise_headroom_share * static_cast<double>(plan.budget.usable_bytes);
  if (!plan.budget.fits() || tight) {
    plan.fixes = advise(model, gpu, setup, cards);
  }
  plan.time = estimate_time(model, gpu, plan.setup, plan.budget);
  return plan;
}

Sizing make_sizing(const Model& model, const std::vector<Gpu>& cards,
                   const Setup& setup, const std::string& model_arg) {
  Sizing sizing;
  sizing.model = &model;
  sizing.setup = setup;
  sizing.model_arg = model_arg;
  sizing.max_gpus = k_sizing_max_gpus;
  SearchScope scope;
  scope.quantize = false;  // the job's own weight format
  scope.offload = false;
  Searcher searcher(model, setup, scope);
  std::string first_problem;
  bool any_valid = false;
  const std::vector<int> counts = gpu_counts(k_sizing_max_gpus);
  for (const Gpu& gpu : cards) {
    if (!gpu.common) {
      continue;
    }
    SizingRow row;
    row.gpu = &gpu;
    if (auto found = searcher.fewest(gpu, counts, Objective::balanced)) {
      any_valid = true;
      row.count = found->setup.total_gpus();
      row.request = found->request;
      row.setup = found->setup;
      row.moves = found->moves;
      row.total_bytes = found->budget.total_bytes();
      row.usable_bytes = found->budget.usable_bytes;
      row.fits = true;
    } else {
      // The user's setup on the most GPUs tried, to show how far off it is.
      Pricing p =
          price(model, gpu, with_gpu_count(setup, counts.back(), model));
      if (p.priced) {
        any_valid = true;
        row.request = p.priced->request;
        row.setup = p.priced->setup;
        row.total_bytes = p.priced->budget.total_bytes();
        row.usable_bytes = p.priced->budget.usable_bytes;
      } else if (first_problem.empty()) {
        first_problem = p.problem;
      }
    }
    sizing.rows.push_back(row);
  }
  if (!any_valid && !first_problem.empty()) {
    throw Error(first_problem);
  }
  return sizing;
}

std::string shell_word(const std::string& word) {
  const bool safe =
      !word.empty() && word.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                           "XYZ0123456789-_./:@+,=") == std::string::npos;
  if (safe) {
    return word;
  }
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::vector<std::string> plan_argv(const std::string& model_arg,
                                   const Model& model, const Gpu& gpu,
                                   const Setup& setup) {
  const Resolved resolved = resolve(model, gpu, setup);
  const OptionContext context{model, gpu, setup, resolved};
  std::vector<std::string> argv = {model_arg};
  for (const OptionRow& row : option_rows()) {
    for (auto& word : row.args(context)) {
      argv.push_back(std::move(word));
    }
  }
  return argv;
}

std::string plan_args(const std::string& model_arg, const Model& model,
                      const Gpu& gpu, const Setup& setup) {
  std::string out;
  for (const auto& word : plan_argv(model_arg, model, gpu, setup)) {
    if (!out.empty()) {
      out += ' ';
    }
    out += shell_word(word);
  }
  return out;
}

}  // namespace oomplan
