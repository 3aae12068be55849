#include "oomplan/setup/resolve.hpp"

#include "oomplan/model/capability.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

// resolve() is the only place a default is derived from the model, the card
// or another field; everything downstream sees a Resolved.

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

namespace {

// The user's overrides and the margins they resolve to on this card.
void resolve_margins(const Setup& s, const Gpu& gpu, Resolved& r) {
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
}

// The training options; those that apply to some jobs only are cleared for
// the others (r.fsdp_version is resolved first).
void resolve_training(const Setup& s, Resolved& r) {
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
  // A full fine-tune has no adapters to drop out (a framework's LoRA
  // default stays out of its plan).
  r.lora_dropout =
      s.mode == Mode::lora || s.mode == Mode::qlora ? s.lora_dropout : 0.0;
  r.untied_head = s.untied_head;
  r.optimizer_in_bwd = s.optimizer_in_bwd;
  r.loss = s.loss;
  r.activation_offload = s.activation_offload;
  r.grad_accum = s.grad_accum;
  // no_sync matters only where FSDP shards gradients and micro-batches
  // accumulate; frozen grads only where FSDP1 flattens adapters with the
  // 16-bit base (QLoRA's 4-bit storage has no gradient).
  r.fsdp_no_sync = s.fsdp_no_sync && s.fsdp && s.grad_accum > 1 &&
                   !s.optimizer_in_bwd && s.mode != Mode::infer;
  r.fsdp_frozen_grads = s.fsdp_frozen_grads && s.fsdp && r.fsdp_version == 1 &&
                        s.mode == Mode::lora;
  // Without checkpointing the cached keys and values are the tensors
  // attention saves anyway.
  r.use_cache = s.use_cache && s.mode != Mode::infer &&
                s.checkpointing != Checkpointing::none;
  r.nf4_backend = s.nf4_backend.value_or(
      s.precision == Precision::pure ? Nf4Backend::torchao : Nf4Backend::bnb);
}

// LitGPT's layouts by release where its scripts leave no choice
// (litgpt/finetune/lora.py and full.py at each release).
// The kernel transformers runs GPTQ weights with: before 4.49 AutoGPTQ's
// exllama through optimum (GPTQConfig.post_init sets exllama_config
// {"version": 1}); from 4.49 GPTQModel's backend="auto", which takes Marlin
// on CUDA compute capability 8.0+ (a symmetric checkpoint) and ExLlamaV2
// below it and on ROCm (gptqmodel/utils/importer.py select_quant_linear).
GptqKernel gptq_default_kernel(const Gpu& gpu, Release transformers) {
  if (transformers < k_transformers_gptqmodel) {
    return GptqKernel::exllama;
  }
  return gpu.vendor == "NVIDIA" && !below(gpu, k_cc_ampere)
             ? GptqKernel::marlin
             : GptqKernel::exllamav2;
}

void resolve_litgpt(const Setup& s, Resolved& r) {
  r.litgpt_release = s.litgpt_release.value_or(k_litgpt_default);
  r.lm_head_chunk = r.training() ? s.lm_head_chunk : 0;
  if (s.framework != Framework::litgpt || !r.training()) {
    return;
  }
  r.stable_embedding =
      r.mode == Mode::qlora && r.litgpt_release >= k_litgpt_stable_embedding;
  if (r.total_gpus() <= 1) {
    return;
  }
  // Several devices are always FSDP FULL_SHARD (FSDPStrategy before 0.5.11,
  // ModelParallelStrategy's fully_shard after), with no_backward_sync on
  // every micro-batch but the last; one device runs no strategy at all.
  r.fsdp = true;
  r.zero = 3;
  r.fsdp_no_sync = s.fsdp_no_sync && r.grad_accum > 1 && !r.optimizer_in_bwd;
  // On several devices every Block is checkpointed: finetune_full's and the
  // FSDP1 finetune_lora's FSDPStrategy(activation_checkpointing_policy=
  // {Block}), FSDP2 finetune_lora's parallelize_fn(activation_checkpointing=
  // True); neither script has a setting for it.
  if (r.checkpointing == Checkpointing::none) {
    r.checkpointing = Checkpointing::full;
  }
  if (!s.fsdp_version) {
    r.fsdp_version =
        r.mode == Mode::full || r.litgpt_release < k_litgpt_fsdp2_lora ? 1 : 2;
  }
  // Lightning's FSDPStrategy gathers bf16-mixed parameters in bf16
  // (FSDPPrecision: MixedPrecision(param_dtype=bfloat16)); its
  // ModelParallelStrategy keeps plain torch.autocast and LitGPT's
  // parallelize_fn calls fully_shard without a mixed-precision policy.
  r.fsdp_autocast = r.fsdp_version == 2 && r.precision == Precision::amp;
  // Before 0.5.8, FSDPStrategy(auto_wrap_policy={Block}) flattened the
  // adapters with their frozen Block (Lightning's use_orig_params=True).
  r.fsdp_frozen_grads =
      r.mode == Mode::lora && r.fsdp && r.fsdp_version == 1 &&
      (s.fsdp_frozen_grads || r.litgpt_release < k_litgpt_linear_wrap);
}

}  // namespace

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
  resolve_training(s, r);
  r.objective = s.objective;
  r.precompute_ref = s.precompute_ref;
  r.gpu_util = s.gpu_util;
  r.enforce_eager = s.enforce_eager;
  r.vllm_version = s.vllm_version;
  r.vllm_release = s.vllm_release.value_or(vllm_era_release(s.vllm_version));
  r.transformers_release =
      s.transformers_release.value_or(k_transformers_default);
  r.torchtitan_release = s.torchtitan_release.value_or(k_torchtitan_default);
  r.compiled_loss =
      s.compile && !(s.framework == Framework::torchtitan &&
                     r.torchtitan_release < k_torchtitan_compiled_loss);
  resolve_margins(s, gpu, r);
  std::tie(r.tp, r.pp) = tp_pp(s);
  r.zero = s.zero.value_or(s.fsdp ? 3 : 0);
  resolve_litgpt(s, r);
  // --quant auto: the checkpoint's own format; QLoRA's base is NF4.
  r.quant = s.quant;
  if (r.quant == Quant::automatic) {
    r.quant = s.mode == Mode::qlora ? Quant::nf4 : model.checkpoint_quant;
  }
  // No framework trains through MXFP4 weights as stored: the gpt-oss
  // fine-tuning recipe loads them with Mxfp4Config(dequantize=True) into
  // bf16 (openai/gpt-oss cookbook "Fine-tuning with TRL"; transformers
  // quantizers/quantizer_mxfp4.py). The plan says so (Warning::
  // mxfp4_dequantized).
  if (s.quant == Quant::automatic && r.quant == Quant::mxfp4 &&
      s.mode != Mode::infer) {
    r.quant = Quant::none;
  }
  if (r.quant == Quant::automatic) {
    r.quant = Quant::none;
  }
  // AutoAWQ's fused modules replace the attention of AWQ layers only, and
  // only transformers-style inference loads them (check() refuses the rest).
  const bool fusable = r.quant == Quant::awq && r.engine == Engine::hf;
  r.awq_fused_len = fusable && !r.training() ? s.awq_fused_len : 0;
  if (r.quant == Quant::gptq && r.engine == Engine::hf && !r.training()) {
    r.gptq_kernel = s.gptq_kernel.value_or(
        gptq_default_kernel(gpu, r.transformers_release));
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

}  // namespace oomplan
