// Model states of training on one GPU (ZeRO paper §3: 2 + 2 + K bytes per
// parameter): the weights (full, or a frozen base and LoRA adapters), their
// gradients, the optimizer's master copy and states, how ZeRO/FSDP shard
// them, where offload and paged optimizers put them, and the gradient and
// optimizer temporaries of the step.

#include "memory/internal.hpp"

#include <algorithm>

namespace oomplan::memory_terms {
namespace {

// bitsandbytes blockwise 8-bit optimizer states: uint8 codes plus one fp32
// absmax per 256-element block (bitsandbytes/optim/optimizer.py
// Optimizer2State.init_state: blocks = ceil(n / 256)).
constexpr double k_bnb_8bit_state_bytes = 1.0 + 4.0 / 256.0;

// DeepSpeed ZeRO-3 converts the fp16 gradient partition to fp32 one sub-group
// at a time (sub_group_size default 1e9 elements, stage3.py
// _prepare_fp32_grad_for_sub_group).
constexpr double k_zero3_sub_group = 1e9;

}  // namespace

// ZeRO (Rajbhandari et al. 2020, §5 Figure 1): stage 1 shards the optimizer
// states over the data-parallel ranks, stage 2 also the gradients, stage 3
// also the parameters.
double zero_shards(const Resolved& setup, int stage, double dp) {
  return setup.zero >= stage ? dp : 1.0;
}

// DeepSpeed offload_optimizer (ZeRO-Offload), FSDP CPUOffload.
bool offloads_optimizer(const Resolved& setup) {
  return setup.offload == Offload::optimizer || setup.offload == Offload::all;
}

// DeepSpeed offload_param works at ZeRO-3 only (ZeRO-Infinity); FSDP's
// CPUOffload(offload_params=True) shards like stage 3.
bool offloads_params(const Resolved& setup) {
  return setup.zero >= 3 &&
         (setup.offload == Offload::params || setup.offload == Offload::all);
}

// Mixed precision with 16-bit weights keeps an fp32 master copy
// (Micikevicius et al. 2018; DeepSpeed fp16/bf16, Megatron).
bool mixed16(const Resolved& setup) {
  return setup.precision == Precision::mixed && dtype_bytes(setup.dtype) < 4;
}

// LoRA's own saved tensors are the rank-r intermediates (negligible); its
// dropout copies (lora_dropout > 0: a copy and a 1-byte mask of each adapted
// input) are activations (train_activations.cpp lora_dropout_needs).
//
// LoRA adapter parameters of one layer: rank x (in + out) per targeted
// projection (peft LoraLayer: lora_A in x r, lora_B r x out). On MoE layers
// gate/up/down adapters go on every expert (PEFT "all-linear" wraps each
// expert's nn.Linear) and on the shared experts.
double lora_layer_params(const Model& model, const Resolved& setup, bool moe) {
  const double r = setup.lora_rank;
  const double h = as_double(model.hidden_size);
  const unsigned t = setup.lora_targets;
  double q_out = as_double(model.num_heads * model.head_dim);
  double kv_out = as_double(model.num_kv_heads * model.head_dim);
  double o_in = q_out;
  if (model.kv_lora_rank > 0) {
    q_out = as_double(model.num_heads *
                      (model.qk_nope_head_dim + model.qk_rope_head_dim));
    kv_out = as_double(model.kv_lora_rank + model.qk_rope_head_dim);
    o_in = as_double(model.num_heads * model.v_head_dim);
  }
  double n = 0;
  n += (t & k_lora_q) != 0 ? r * (h + q_out) : 0.0;
  n += (t & k_lora_k) != 0 ? r * (h + kv_out) : 0.0;
  n += (t & k_lora_v) != 0 ? r * (h + kv_out) : 0.0;
  n += (t & k_lora_o) != 0 ? r * (o_in + h) : 0.0;
  auto ffn = [&](double inter) {
    double f = 0;
    if (model.mlp == MlpKind::gated) {
      f += (t & k_lora_gate) != 0 ? r * (h + inter) : 0.0;
    }
    f += (t & k_lora_up) != 0 ? r * (h + inter) : 0.0;
    f += (t & k_lora_down) != 0 ? r * (inter + h) : 0.0;
    return f;
  };
  if (!moe) {
    n += ffn(as_double(model.intermediate_size));
  } else {
    n += as_double(model.num_experts) *
         ffn(as_double(model.moe_intermediate_size));
    if (model.num_shared_experts > 0) {
      const double inter =
          model.shared_expert_intermediate_size > 0
              ? as_double(model.shared_expert_intermediate_size)
              : as_double(model.moe_intermediate_size);
      n += as_double(model.num_shared_experts) * ffn(inter);
    }
  }
  return n;
}

// Adapters of layers [begin, end): peft LoraLayer on each targeted linear.
double adapter_params(const Model& model, const Resolved& setup,
                      std::int64_t begin, std::int64_t end) {
  double adapters = 0;
  for (std::int64_t l = begin; l < end; ++l) {
    adapters += lora_layer_params(model, setup, is_moe_layer(model, l));
    if (model.num_experts == 0 && model.num_decoder_layers == 0) {
      adapters *= as_double(end - begin);  // dense: every layer alike
      break;
    }
  }
  return adapters;
}

double stage_norm_params(const Model& model, const TrainLayout& at) {
  // Each layer's norms, and the final norm on the last stage.
  return (as_double(model.norms_per_layer) * at.layers() +
          (at.last ? 1.0 : 0.0)) *
         as_double(model.hidden_size);
}

double kbit_fp32_upcast_bytes(const Model& model, const Resolved& setup,
                              const TrainLayout& at) {
  if (!setup.prepare_kbit) {
    return 0;
  }
  // prepare_model_for_kbit_training: the unquantized parameters (embedding,
  // lm_head, norms) become fp32.
  const double vocab = at.vocab_params() / at.t;
  return (vocab + stage_norm_params(model, at)) * (4.0 - at.d);
}

double frozen_base_bytes(const Model& model, const Resolved& setup,
                         const TrainLayout& at) {
  // The frozen base through the shared weight term (NF4 + double
  // quantization for QLoRA, embeddings and lm_head unquantized), sharded by
  // ZeRO-3/FSDP (FSDP+QLoRA shards the quantized storage,
  // bnb_4bit_quant_storage).
  const WeightShare share{.layer_begin = at.begin,
                          .layer_end = at.end,
                          .embedding = at.first,
                          .lm_head = at.last};
  Resolved base = setup;
  if (setup.precision == Precision::amp) {
    base.dtype = Dtype::fp32;  // the frozen base as loaded, fp32
  }
  double w = as_double(weight_bytes(model, base, share));
  w += kbit_fp32_upcast_bytes(model, setup, at);
  w /= zero_shards(setup, 3, at.dp);
  return w;
}

// Weights on one GPU (ZeRO paper §3: 2 bytes per parameter in 16-bit mixed
// training), ZeRO-3 sharded, on the host under parameter offload.
TrainWeights trained_weights(const Model& model, const Resolved& setup,
                             const TrainLayout& at) {
  TrainWeights tw;
  double w = 0;
  if (setup.mode == Mode::full) {
    tw.trainable = at.params();
    tw.trainable_bytes = at.d;
    // amp (torch.autocast over fp32 parameters, HF Trainer bf16=True on a
    // model loaded in fp32): the parameters themselves are fp32.
    const bool amp = setup.precision == Precision::amp;
    w = tw.trainable * (amp ? 4.0 : at.d) / zero_shards(setup, 3, at.dp);
  } else {
    w = frozen_base_bytes(model, setup, at);
    tw.trainable = adapter_params(model, setup, at.begin, at.end) / at.t;
    // PEFT keeps adapters in fp32 when the base is 16-bit
    // (autocast_adapter_dtype); torchtune (pure) keeps them in the dtype.
    tw.trainable_bytes = setup.precision != Precision::pure ? 4.0 : at.d;
    w += tw.trainable * tw.trainable_bytes / zero_shards(setup, 3, at.dp);
  }
  (offloads_params(setup) ? tw.host : tw.gpu) = w;
  return tw;
}

ReferenceWeights reference_weights(const Resolved& setup,
                                   const TrainLayout& at) {
  ReferenceWeights r;
  if (!setup.holds_reference()) {
    return r;
  }
  // A second copy of the weights in the compute dtype, frozen (no gradients,
  // no optimizer states). TRL's prepare_deepspeed shards it like the policy
  // under ZeRO-3 and gives it ZeRO stage 0 (a full replica) otherwise
  // (trl/models/utils.py prepare_deepspeed); under FSDP it is wrapped and
  // sharded like the policy (prepare_fsdp). Same TP/PP split as the policy.
  const double bytes = at.params() * at.d / zero_shards(setup, 3, at.dp);
  (offloads_params(setup) ? r.host : r.gpu) = bytes;
  return r;
}

std::string_view reference_formula(const Resolved& setup) {
  return setup.zero >= 3 ? "frozen reference copy: params / (tp x pp x dp) x "
                           "dtype bytes (sharded like the policy)"
                         : "frozen reference copy: params / (tp x pp) x "
                           "dtype bytes (ZeRO stage 0 replica)";
}

bool deepspeed_bf16_optimizer(const Resolved& setup) {
  // DeepSpeed runs bf16 with ZeRO-1 through its BF16_Optimizer, which
  // accumulates gradients in a full-size fp32 buffer
  // (bf16_optimizer.py fp32_groups_gradients_flat).
  return setup.mode == Mode::full && setup.zero == 1 && !setup.fsdp &&
         setup.dtype == Dtype::bf16 && setup.precision == Precision::mixed;
}

double gradient_element_bytes(const Resolved& setup, const TrainWeights& tw) {
  // Gradients in the training dtype (fp32 adapters: fp32 grads; amp: fp32
  // parameters, fp32 grads).
  const bool full = setup.mode == Mode::full;
  const bool amp = setup.precision == Precision::amp;
  return (deepspeed_bf16_optimizer(setup) || (full && amp))
             ? 4.0
             : (full ? static_cast<double>(dtype_bytes(setup.dtype))
                     : tw.trainable_bytes);
}

Placed stage_gradients(const Resolved& setup, double trainable,
                       double element_bytes, double dp) {
  // ZeRO-2+ shards the gradients; with the optimizer offloaded, DeepSpeed
  // streams reduced gradients to pinned CPU buffers (ZeRO-Offload) and FSDP
  // offloads them with the parameters.
  const double g = trainable * element_bytes / zero_shards(setup, 2, dp);
  if ((offloads_optimizer(setup) && setup.zero >= 2) ||
      offloads_params(setup)) {
    return {.gpu = 0, .host = g};
  }
  return {.gpu = g};
}

double master_bytes_per_param(const Resolved& setup) {
  // fp32 master copy under mixed 16-bit full training (LoRA adapters are
  // already fp32).
  return (setup.mode == Mode::full && mixed16(setup)) ? 4.0 : 0.0;
}

// Optimizer state bytes per trainable parameter on the GPU, excluding the
// fp32 master copy. AdamW keeps m and v in fp32 under mixed precision (ZeRO
// paper's K = 12 with the master) and in the parameter dtype under pure
// precision (torch.optim.AdamW zeros_like(param)); bitsandbytes 8-bit keeps
// uint8 codes with per-block absmax; its 32-bit paged AdamW keeps fp32
// states whatever the parameter dtype; SGD one momentum buffer; Adafactor
// (transformers, beta1 None) fp32 row and column factors of v.
double state_bytes_per_param(const Resolved& setup, double hidden) {
  const double pd = setup.precision != Precision::pure
                        ? 4.0
                        : static_cast<double>(dtype_bytes(setup.dtype));
  switch (setup.optimizer) {
    case Optimizer::adamw:
      return 2.0 * pd;
    case Optimizer::adamw_8bit:
    case Optimizer::paged_adamw_8bit:
      return 2.0 * k_bnb_8bit_state_bytes;
    case Optimizer::paged_adamw:
      return 8.0;
    case Optimizer::sgd:
      return pd;
    case Optimizer::adafactor:
      // A matrix r x c keeps r + c fp32 values: ~ 2/hidden per parameter.
      return 4.0 * 2.0 / hidden;
  }
  return 2.0 * pd;
}

bool paged(Optimizer optimizer) {
  return optimizer == Optimizer::paged_adamw ||
         optimizer == Optimizer::paged_adamw_8bit;
}

Placed optimizer_states(const Model& model, const Resolved& setup,
                        double trainable, double dp) {
  // ZeRO-1+ shards the master copy and the states.
  const double master = master_bytes_per_param(setup);
  const double states =
      state_bytes_per_param(setup, as_double(model.hidden_size));
  const double shards = zero_shards(setup, 1, dp);
  if (offloads_optimizer(setup)) {
    // The master copy and states live in host RAM (DeepSpeed CPU Adam, FSDP
    // CPUOffload); the fp32 gradient copy the CPU optimizer steps with too.
    const double all = trainable * (master + states) / shards;
    return {.host = all + trainable * 4.0 / shards};
  }
  if (paged(setup.optimizer)) {
    // bitsandbytes paged states: cudaMallocManaged, outside PyTorch's
    // allocator; the master copy (mixed) stays ordinary.
    return {.gpu = trainable * master / shards,
            .paged = trainable * states / shards};
  }
  return {.gpu = trainable * (master + states) / shards};
}

double gradient_params(const Resolved& setup, const TrainLayout& at,
                       const TrainWeights& tw) {
  // An FSDP1 FlatParameter requires grad when any parameter flattened into
  // it does, so with use_orig_params=True a layer unit holding adapters
  // computes its frozen weights' gradients too
  // (torch/distributed/fsdp/_wrap_utils.py: "the gradient memory usage will
  // be higher than expected"). The root unit (embedding, head) holds none.
  return setup.fsdp_frozen_grads ? at.layer_params / at.t + tw.trainable
                                 : tw.trainable;
}

double accumulated_gradient_bytes(const Resolved& setup, double params,
                                  double element_bytes, double sharded) {
  // Under FSDP1 no_sync() every rank accumulates the unsharded gradients
  // until the last micro-batch reduce-scatters them
  // (FullyShardedDataParallel.no_sync: "accumulate the full model
  // gradients (instead of gradient shards)"); FSDP2's
  // set_requires_gradient_sync(False) keeps each parameter's unsharded
  // accumulated gradient the same way.
  return setup.fsdp_no_sync ? params * element_bytes : sharded;
}

double stable_embedding_grad_bytes(const Resolved& setup,
                                   const TrainLayout& at) {
  // LitGPT >= 0.5.0 QLoRA (litgpt/finetune/lora.py main, #1770): after
  // instantiate_bnb_optimizer it swaps transformer.wte for a bitsandbytes
  // StableEmbedding, whose new weight requires grad but is in no optimizer:
  // every backward writes its vocab x hidden gradient in the weight's dtype
  // and optimizer.zero_grad() never frees it, so from the second step on it
  // is alive throughout.
  return setup.stable_embedding && at.first ? at.embed * at.d / at.t : 0.0;
}

double kept_gradient_bytes(const Resolved& setup, double gradients) {
  // Gradients that exist before backward starts: earlier micro-batches'
  // under accumulation, and the flat gradient buffers that mixed-precision
  // frameworks allocate once and keep: DeepSpeed's partition
  // (stage_1_and_2.py grads_in_partition, stage3.py
  // grad_partitions_flat_buffer, bf16_optimizer.py fp32 gradients),
  // Megatron's contiguous main_grad buffer. PyTorch-native pure-precision
  // and FSDP loops (torchtune, LitGPT) free them:
  // zero_grad(set_to_none=True).
  const bool accum = setup.grad_accum > 1 && !setup.optimizer_in_bwd;
  const bool flat_buffer = !setup.fsdp && !setup.optimizer_in_bwd &&
                           setup.precision == Precision::mixed &&
                           (setup.zero >= 1 || setup.mode == Mode::full);
  return (accum || flat_buffer) ? gradients : 0.0;
}

double largest_trainable_param(const Model& model, const Resolved& setup,
                               const TrainLayout& at) {
  // The largest trainable tensor: an embedding or MLP matrix (full), an
  // adapter matrix (LoRA), as sharded on this GPU.
  const double h = as_double(model.hidden_size);
  if (setup.mode == Mode::full) {
    return std::max({h * as_double(model.intermediate_size),
                     h * as_double(model.moe_intermediate_size), at.embed,
                     at.head}) /
           at.t / zero_shards(setup, 3, at.dp);
  }
  return as_double(setup.lora_rank) *
         std::max(h, as_double(model.intermediate_size)) / at.t;
}

double step_gradient_bytes(const Resolved& setup, double gradients,
                           double largest_param, double element_bytes) {
  // One parameter's gradient when the optimizer steps inside backward
  // (torchtune optimizer_in_bwd: each parameter steps and frees its grad).
  return setup.optimizer_in_bwd
             ? std::min(gradients, largest_param * element_bytes)
             : gradients;
}

double output_projection_gradient_bytes(const Resolved& setup,
                                        const TrainLayout& at, double gradients,
                                        double element_bytes) {
  // The lm_head's (or the tied embedding's) gradient, formed at the start of
  // backward on the last stage.
  if (setup.mode != Mode::full || !at.last) {
    return 0.0;
  }
  return std::min(gradients,
                  (at.head > 0 ? at.head : at.embed) / at.t * element_bytes);
}

double adamw_8bit_dequant_bytes(const Resolved& setup, double largest_param) {
  // torchao's 8-bit AdamW (low_bit_optim single_param_adam) dequantizes one
  // parameter's m and v to fp32, updates and requantizes them: 8 B per
  // element of the largest parameter. bitsandbytes' paged 8-bit kernel
  // updates blocks in place.
  return setup.optimizer == Optimizer::adamw_8bit && !offloads_optimizer(setup)
             ? 8.0 * largest_param
             : 0.0;
}

double deepspeed_fp32_grad_bytes(const Resolved& setup, double trainable,
                                 double dp) {
  if (setup.optimizer_in_bwd || offloads_optimizer(setup) || setup.zero < 1 ||
      setup.fsdp || !mixed16(setup) || deepspeed_bf16_optimizer(setup)) {
    return 0.0;
  }
  // DeepSpeed casts the gradient partition to fp32 for its optimizer
  // (stage_1_and_2.py step: single_grad_partition.to(fp32); stage3.py per
  // sub-group). torch.optim.AdamW is modelled fused (fused=True: torchtune,
  // HF Trainer's adamw_torch_fused): no whole-model temporaries; its foreach
  // path would add one state-sized list (_multi_tensor_adamw:
  // exp_avg_sq_sqrt).
  double part = trainable / dp;
  if (setup.zero >= 3) {
    part = std::min(part, k_zero3_sub_group);
  }
  return 4.0 * part;
}

PagedSplit paged_state_split(Bytes paged_bytes, Bytes room) {
  // Paged states live in unified memory: they occupy the device as long as
  // it has room and spill to host RAM beyond that (cudaMallocManaged
  // oversubscription), which is why bitsandbytes pages them.
  if (paged_bytes > room) {
    return {.device = room, .host = paged_bytes - room};
  }
  return {.device = paged_bytes, .host = 0};
}

// Static formula text for each component (DESIGN: written next to the
// arithmetic).
std::string_view weights_formula(const Resolved& setup) {
  const bool z3 = setup.zero >= 3;
  switch (setup.mode) {
    case Mode::full:
      return z3 ? "params / (tp x pp x dp) x dtype bytes (ZeRO-3 shard)"
                : "params / (tp x pp) x dtype bytes";
    case Mode::lora:
      return z3 ? "frozen base / (tp x pp x dp) + LoRA adapters r x (in + out)"
                : "frozen base / (tp x pp) + LoRA adapters r x (in + out)";
    case Mode::qlora:
      return z3 ? "NF4 base (0.5 B + DQ scales) / (tp x pp x dp) + LoRA "
                  "adapters r x (in + out)"
                : "NF4 base (0.5 B + DQ scales) / (tp x pp) + LoRA adapters r "
                  "x (in + out)";
    case Mode::infer:
      break;
  }
  return "";
}

std::string_view gradients_formula(const Resolved& setup) {
  if (setup.stable_embedding) {
    return "trainable params x grad bytes + vocab x hidden x dtype "
           "(LitGPT's StableEmbedding, in no optimizer)";
  }
  return setup.optimizer_in_bwd
             ? "one parameter's gradient (optimizer step fused into backward)"
             : "trainable params x grad bytes / (dp at ZeRO-2+)";
}

std::string_view optimizer_formula(const Resolved& setup) {
  switch (setup.optimizer) {
    case Optimizer::adamw:
      return setup.precision == Precision::mixed
                 ? "trainable params x (4 master + 4 m + 4 v) B / ZeRO shard"
                 : "trainable params x 2 x dtype bytes (m, v) / ZeRO shard";
    case Optimizer::adamw_8bit:
      return "trainable params x 2 x (1 B + fp32 absmax / 256) (bitsandbytes "
             "8-bit)";
    case Optimizer::paged_adamw:
      return "trainable params x 8 B fp32 m, v in paged unified memory";
    case Optimizer::paged_adamw_8bit:
      return "trainable params x 2 x (1 B + absmax / 256) in paged unified "
             "memory";
    case Optimizer::sgd:
      return "trainable params x momentum bytes";
    case Optimizer::adafactor:
      return "factored second moment: (rows + cols) x 4 B per matrix";
  }
  return "";
}

}  // namespace oomplan::memory_terms
