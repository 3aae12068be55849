#include "oomplan/model/capability.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/setup/resolve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

// check() is the only validation of a setup; it returns the problem instead
// of throwing, and each message is the contract's one line.

namespace oomplan {

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

// The training objective's options (--objective, --precompute-ref).
std::optional<std::string> check_objective(const Setup& s) {
  if (s.objective != TrainObjective::sft && !s.training()) {
    return std::string(
        "--objective trains on chosen and rejected sequences; use it with "
        "--mode full, lora or qlora");
  }
  if (s.precompute_ref && s.objective != TrainObjective::dpo &&
      s.objective != TrainObjective::kto) {
    return std::string(
        "--precompute-ref applies to the objectives with a reference model; "
        "use it with --objective dpo or kto");
  }
  return std::nullopt;
}

// FSDP's own options against the sharding and the job.
std::optional<std::string> check_fsdp(const Setup& s) {
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
  if (s.fsdp_frozen_grads &&
      (!s.fsdp || s.fsdp_version.value_or(k_default_fsdp_version) != 1 ||
       s.mode != Mode::lora)) {
    return "--fsdp-frozen-grads applies to --mode lora under --fsdp "
           "--fsdp-version 1 (FSDP1 flat units); add them or drop "
           "--fsdp-frozen-grads";
  }
  return std::nullopt;
}

// Options that contradict each other, whatever the model: each message names
// both and the fix.
std::optional<std::string> check_request(const Setup& s) {
  if (auto problem = check_objective(s)) {
    return problem;
  }
  if (auto problem = check_fsdp(s)) {
    return problem;
  }
  // litgpt/finetune/lora.py: "Quantization is currently not supported for
  // multi-GPU training" (NotImplementedError when devices * num_nodes > 1).
  if (s.framework == Framework::litgpt && s.mode == Mode::qlora &&
      s.total_gpus() > 1) {
    return fmt::format(
        "--framework litgpt quantizes on one device only (finetune_lora "
        "raises NotImplementedError for --quantize on {} devices); use --gpus "
        "1xNAME or --mode lora",
        s.total_gpus());
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

std::optional<std::string> check(const Model& model, const Gpu& gpu,
                                 const Setup& setup, const Resolved& resolved) {
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
  // AutoAWQ fuses its own WQLinear layers for inference (awq/models/base.py
  // from_quantized, fuse_layers); nothing else loads that cache.
  if (setup.awq_fused_len > 0 && resolved.awq_fused_len == 0) {
    return std::string(
        "--awq-fused-len sizes AutoAWQ's fused-layer cache, which only AWQ "
        "weights served with --engine hf (--mode infer) allocate; drop it, or "
        "add --quant awq");
  }
  if (setup.gptq_kernel && resolved.gptq_kernel == GptqKernel::none) {
    return std::string(
        "--gptq-kernel picks the kernel transformers runs GPTQ weights with "
        "(--engine hf, --mode infer); drop it, or add --quant gptq");
  }
  return check_layout(model, setup, resolved);
}

std::optional<std::string> check(const Model& model, const Gpu& gpu,
                                 const Setup& setup) {
  return check(model, gpu, setup, resolve(model, gpu, setup));
}

}  // namespace oomplan
