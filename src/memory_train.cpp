// Training memory (full fine-tuning, LoRA, QLoRA) for the most loaded GPU.
//
// The model is a timeline of one optimizer step, per GPU:
//   forward         weights + optimizer states (+ gradients that persist:
//                   earlier micro-batches', flat framework buffers) + stored
//                   activations, plus either one layer's working set (inside
//                   the layers) or the logits (after them);
//   backward        at its start the logits' loss gradients (and, chunked,
//                   the output projection's weight gradient) join the stored
//                   activations; then the top layer is recomputed (full
//                   checkpointing); at its end the full gradient buffer
//                   exists and activations are gone (gradients grow linearly
//                   as activations are freed, so the maximum is at an end);
//   optimizer_step  weights + states + gradients + the optimizer's
//                   temporaries (DeepSpeed's fp32 gradient partition, 8-bit
//                   AdamW's dequantized states of one parameter).
// The peak is the largest moment; the components describe it and sum to the
// total. Frameworks differ in what persists; each choice below names the one
// it follows (DeepSpeed, Megatron, torchtune, PEFT, PyTorch FSDP/DDP).
//
// Invariants: no heap allocation unless pp > 1 (stages); every formula names
// its source; byte counts are rounded once per component.

#include "memory_internal.hpp"

#include "oomplan/capability.hpp"

#include <algorithm>
#include <cstdint>

namespace oomplan {
namespace {

// Default caching-allocator reserve for training: reserved exceeds allocated
// by block rounding and freed-but-cached segments of varied sizes (PyTorch
// CUDACachingAllocator rounds to 512 B / 2 MiB blocks and keeps 20 MiB
// segments). torchtune's LoRA tutorial reports reserved 7-9 % above what
// its allocations add up to.
constexpr double k_train_reserve = 0.08;

// bitsandbytes blockwise 8-bit optimizer states: uint8 codes plus one fp32
// absmax per 256-element block (bitsandbytes/optim/optimizer.py
// Optimizer2State.init_state: blocks = ceil(n / 256)).
constexpr double k_bnb_8bit_state_bytes = 1.0 + 4.0 / 256.0;

// torchtune's CEWithChunkedOutputLoss splits the output projection into 8
// chunks (num_output_chunks = 8).
constexpr double k_loss_chunks = 8.0;

// DeepSpeed ZeRO-3 converts the fp16 gradient partition to fp32 one sub-group
// at a time (sub_group_size default 1e9 elements, stage3.py
// _prepare_fp32_grad_for_sub_group).
constexpr double k_zero3_sub_group = 1e9;

// Counts are exact integers; the arithmetic below is in double because
// several factors are fractional (8-bit block constants, NF4, chunks).
double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

struct Dims {
  double tokens = 0;  // micro-batch x sequence on this GPU
  double seq = 0;
  double h = 0;
  double d = 2;  // bytes of one activation element (--dtype)
  double t = 1;  // tensor parallel
  bool sp = false;
};

// Which saved tensors a layer keeps: a frozen linear (LoRA/QLoRA without an
// adapter on it) needs no copy of its input for a weight gradient, and a
// frozen norm needs no normalised copy for its weight gradient.
struct Needs {
  bool norm_weight = true;  // norm weights train (full fine-tuning)
  bool qkv_in = true;       // q/k/v projections need their input
  bool o_in = true;
  bool up_in = true;  // gate/up (or fc1) need the second norm's output
  bool down_in = true;
};

Needs needs_of(const Resolved& setup) {
  if (setup.mode == Mode::full) {
    return {};
  }
  if (setup.mode == Mode::qlora && setup.precision == Precision::mixed) {
    // PEFT QLoRA runs every frozen projection through bitsandbytes'
    // MatMul4Bit, which keeps its input for backward whenever the input
    // needs a gradient (bitsandbytes/autograd/_functions.py
    // MatMul4Bit.forward: ctx.tensors = (A, B) if any(needs_input_grad[:2])),
    // adapter or not. torchtune's torchao linear_nf4 (pure precision) saves
    // only the NF4 weight, so its frozen linears keep no input.
    return {.norm_weight = false};
  }
  const unsigned t = setup.lora_targets;
  return {.norm_weight = false,
          .qkv_in = (t & (k_lora_q | k_lora_k | k_lora_v)) != 0,
          .o_in = (t & k_lora_o) != 0,
          .up_in = (t & (k_lora_gate | k_lora_up)) != 0,
          .down_in = (t & k_lora_down) != 0};
}

// Dropout masks exist only where the architecture trains with dropout: GPT-2
// (resid/attn pdrop 0.1) and T5 (dropout_rate 0.1). Llama-family configs set
// attention_dropout 0.0, and F.dropout(p=0) stores nothing.
bool has_dropout(const Model& model) {
  return model.model_type == "gpt2" || model.model_type == "t5";
}

// Bytes one norm saves per token and feature, before its output is counted
// (the next linear saves that). LayerNorm (native_layer_norm) keeps its input
// and per-row mean/rstd. Eager RMSNorm (LlamaRMSNorm, torchtune RMSNorm)
// upcasts: pow() saves the fp32 copy of the input and `weight * x_normed`
// saves the normalised 16-bit tensor when the weight trains. torch.compile
// fuses the norm into one kernel that saves only its input.
double norm_saved(const Model& model, const Resolved& setup, const Needs& needs,
                  double d) {
  if (model.norm == NormKind::layer_norm || setup.compile) {
    return d;
  }
  return 4.0 + (needs.norm_weight ? d : 0.0);
}

// Eager attention materialises b x heads x s^2 scores per layer: softmax
// output, dropout mask and dropout output (Korthikanti: 5as^2b in 16-bit),
// or, without dropout, HF's fp32 softmax and its 16-bit cast
// (softmax(..., dtype=float32).to(dtype)). Selective recomputation drops
// exactly this term; flash and sdpa never store it.
double layer_scores_bytes(const Model& model, const Resolved& setup,
                          const Dims& dm) {
  if (setup.attn != Attn::eager) {
    return 0;
  }
  const double d = dm.d;
  const double per =
      has_dropout(model) ? 2.0 * d + 1.0 : (d >= 4.0 ? 4.0 : 4.0 + d);
  return dm.tokens * as_double(model.num_heads) * dm.seq * per / dm.t;
}

// Bytes one decoder layer keeps for backward on one GPU (no checkpointing):
// Korthikanti et al. 2022 Table 2, sbh(34 + 5as/h) for GPT, re-derived per
// saved tensor so that it adapts to RMSNorm, GQA, SwiGLU, MoE and frozen
// LoRA bases. With GPT-2 dims (LayerNorm, GELU MLP of 4h, dropout, eager)
// the terms add up to exactly 34 sbh + 5 as^2 b; tensor parallelism shards
// all but the norms and dropout masks (10 sbh), sequence parallelism those
// too (Table 2, rows 2-3).
double layer_activation_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm, bool moe) {
  const Needs needs = needs_of(setup);
  const double d = dm.d;
  const double h = dm.h;
  const double heads = as_double(model.num_heads);

  // Attention widths. MLA (DeepSeek) attends with nope+rope query/key heads
  // and v_head_dim values; eager and sdpa attention repeat GQA key/value heads
  // to all heads before the kernel (repeat_kv), flash takes them as they are.
  double q_dim = heads * as_double(model.head_dim);
  double kv_heads = as_double(model.num_kv_heads);
  double k_dim = kv_heads * as_double(model.head_dim);
  double v_dim = k_dim;
  double o_dim = q_dim;
  double latent = 0;  // MLA: compressed q and kv saved for their up-projections
  if (model.kv_lora_rank > 0) {
    const double qk =
        as_double(model.qk_nope_head_dim + model.qk_rope_head_dim);
    q_dim = heads * qk;
    k_dim = heads * qk;
    v_dim = heads * as_double(model.v_head_dim);
    o_dim = v_dim;
    latent = d * as_double(model.q_lora_rank + model.kv_lora_rank +
                           model.qk_rope_head_dim);
  } else if (setup.attn != Attn::flash) {
    k_dim = q_dim;
    v_dim = q_dim;
  }

  // Per token, replicated under TP (norms, their outputs, dropout masks).
  const bool dropout = has_dropout(model);
  const double norms = as_double(model.norms_per_layer);
  double rep = norms * norm_saved(model, setup, needs, d) * h;
  rep += (needs.qkv_in ? d * h : 0.0);
  rep += (needs.up_in && !model.parallel_block ? d * h : 0.0);
  rep += dropout ? 2.0 * h : 0.0;  // residual dropout masks, 1 B each

  // Per token, sharded by TP: q, k, v for the attention kernel, its output
  // (flash/sdpa keep it for their backward), the o_proj input copy
  // (transpose().contiguous()).
  double shard = d * (q_dim + k_dim + v_dim) + latent;
  if (setup.attn != Attn::eager) {
    shard += d * o_dim;
  }
  shard += needs.o_in ? d * o_dim : 0.0;

  // --compile is modelled by its mechanism, not by a fitted factor: fused
  // RMSNorm (above) and fused SiLU-times-up (below) save 8 sbh + 2 s.b.I
  // bytes per layer less, which reproduces torchtune's Llama 3.2 3B table
  // (60.0 -> 51.0 GiB with compile) to within 4 %.
  //
  // MLP. SwiGLU (LlamaMLP: down(act(gate(x)) * up(x))) saves gate(x) for
  // SiLU's backward, act(gate(x)) and up(x) for the product's, and the
  // product for down_proj (4 x I). torch.compile fuses SiLU and the product
  // and recomputes act(gate(x)) in backward (3 x I). A plain GELU MLP saves
  // the GELU input and output (Korthikanti: 8sbh + 8sbh at I = 4h).
  auto mlp = [&](double inter, bool down_weight_trains) {
    if (model.mlp == MlpKind::gated) {
      const double act = setup.compile ? 0.0 : d * inter;
      return 2.0 * d * inter + act + (down_weight_trains ? d * inter : 0.0);
    }
    return d * inter + (down_weight_trains ? d * inter : 0.0);
  };
  if (!moe) {
    shard += mlp(as_double(model.intermediate_size), needs.down_in);
  } else {
    // Routed experts see top-k copies of each token: the gathered input,
    // each expert's MLP and its output (kept to be scaled by the routing
    // weight); the router keeps fp32 logits and softmax (MixtralSparseMoeBlock,
    // Qwen3MoeSparseMoeBlock).
    const double k = as_double(model.experts_per_tok);
    const double experts = as_double(model.num_experts);
    shard += 8.0 * experts;
    shard += k * (2.0 * d * h +
                  mlp(as_double(model.moe_intermediate_size), needs.down_in));
    if (model.num_shared_experts > 0) {
      const double inter =
          model.shared_expert_intermediate_size > 0
              ? as_double(model.shared_expert_intermediate_size)
              : as_double(model.moe_intermediate_size);
      shard += as_double(model.num_shared_experts) * mlp(inter, needs.down_in);
    }
  }

  const double rep_div = dm.sp ? dm.t : 1.0;
  return dm.tokens * (rep / rep_div + shard / dm.t) +
         layer_scores_bytes(model, setup, dm);
}

// Activation-gradient working set while one layer runs backward: the grads of
// the MLP's three largest intermediates (gated) or two (plain), sharded by TP.
double layer_backward_bytes(const Model& model, const Dims& dm, bool moe) {
  double inter = as_double(model.intermediate_size);
  if (moe) {
    inter = as_double(model.experts_per_tok) *
            as_double(model.moe_intermediate_size);
  }
  const double n = model.mlp == MlpKind::gated ? 3.0 : 2.0;
  return dm.tokens * dm.d * n * inter / dm.t;
}

// Optimizer state bytes per trainable parameter on the GPU, excluding the
// fp32 master copy. AdamW keeps m and v in fp32 under mixed precision (ZeRO
// paper's K = 12 with the master) and in the parameter dtype under pure
// precision (torch.optim.AdamW zeros_like(param)); bitsandbytes 8-bit keeps
// uint8 codes with per-block absmax; its 32-bit paged AdamW keeps fp32
// states whatever the parameter dtype; SGD one momentum buffer; Adafactor
// (transformers, beta1 None) fp32 row and column factors of v.
double state_bytes_per_param(const Resolved& setup, double hidden) {
  const double pd = setup.precision == Precision::mixed
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

// LoRA's own saved tensors are the rank-r intermediates (negligible); its
// dropout copies (lora_dropout > 0: a copy and a 1-byte mask of each adapted
// input) are not modelled, as torchtune's default is 0.
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

// Decoder layers [begin, end) of pipeline stage `stage` (layers split as
// evenly as possible, earlier stages taking the remainder, as Megatron's
// and torchtune's pipeline splitters do).
std::int64_t stage_begin(std::int64_t layers, int pp, int stage) {
  const std::int64_t base = layers / pp;
  const std::int64_t extra = layers % pp;
  return stage * base + std::min<std::int64_t>(stage, extra);
}

// Everything one GPU holds, by component, at one phase.
struct Parts {
  double weights = 0;
  double activations = 0;
  double logits = 0;
  double gradients = 0;
  double optimizer = 0;  // allocated optimizer states and temporaries
  double buffers = 0;    // ZeRO/FSDP gathered layers, DDP buckets, QLoRA
                         // dequantized weight
  double allocated() const {
    return weights + activations + logits + gradients + optimizer + buffers;
  }
};

struct StageResult {
  Parts peak;
  Phase phase = Phase::forward;
  double paged = 0;    // paged optimizer states (unified memory)
  double host = 0;     // CPU RAM this GPU's offload needs
  double weights = 0;  // for the stages table
  double activations = 0;
  std::int64_t layers = 0;
};

// The training timeline of one pipeline stage on one GPU.
StageResult train_stage(const Model& model, const Resolved& setup,
                        const ParamCounts& counts, int stage) {
  const int pp = setup.pp;
  const double t = setup.tp;
  const double dp = std::max(1, setup.dp());
  const int zero = setup.zero;
  const bool full = setup.mode == Mode::full;
  const bool first = stage == 0;
  const bool last = stage == pp - 1;
  const std::int64_t n_layers = model.num_layers + model.num_decoder_layers;
  const std::int64_t begin = stage_begin(n_layers, pp, stage);
  const std::int64_t end = stage_begin(n_layers, pp, stage + 1);
  const double d = dtype_bytes(setup.dtype);
  const bool mixed16 = setup.precision == Precision::mixed && d < 4.0;
  const bool offload_opt =
      setup.offload == Offload::optimizer || setup.offload == Offload::all;
  const bool offload_params = zero >= 3 && (setup.offload == Offload::params ||
                                            setup.offload == Offload::all);

  StageResult out;
  out.layers = end - begin;

  // --- Parameters on this GPU (before ZeRO): the stage's layers, embedding
  // on the first stage, lm_head on the last (tied: the first stage's
  // embedding serves both when pp == 1), all split by TP.
  const double embed = as_double(counts.embedding);
  const double head = as_double(counts.lm_head);
  double layer_sum = 0;
  double largest_layer = 0;
  if (pp == 1) {
    layer_sum = as_double(counts.total() - counts.embedding - counts.lm_head -
                          counts.extra);
    for (std::int64_t l : {std::int64_t{0}, model.first_k_dense,
                           std::int64_t{model.moe_every - 1}, n_layers - 1}) {
      if (l >= 0 && l < n_layers) {
        largest_layer =
            std::max(largest_layer, as_double(layer_params(model, l)));
      }
    }
  } else {
    // Layers of one kind (dense, MoE, encoder-decoder cross) hold the same
    // parameters: count each kind once.
    double kinds[3] = {-1, -1, -1};
    for (std::int64_t l = begin; l < end; ++l) {
      const std::size_t kind = l >= model.num_layers    ? 2
                               : is_moe_layer(model, l) ? 1
                                                        : 0;
      if (kinds[kind] < 0) {
        kinds[kind] = as_double(layer_params(model, l));
      }
      layer_sum += kinds[kind];
      largest_layer = std::max(largest_layer, kinds[kind]);
    }
  }
  const double stage_params =
      (layer_sum + (first ? embed + as_double(counts.extra) : 0.0) +
       (last ? head : 0.0) + (pp > 1 && last && head == 0 ? embed : 0.0)) /
      t;

  // --- Weights, gradients, optimizer states (ZeRO paper §3, Figure 1:
  // 2 + 2 + K bytes per parameter; stage 1 shards K over DP, stage 2 also
  // the gradients, stage 3 also the weights).
  double w_gpu = 0;          // weights resident on the GPU
  double w_host = 0;         // weights offloaded
  double trainable = 0;      // trainable parameters on this GPU (before ZeRO)
  double train_w_bytes = d;  // bytes of one trainable weight
  if (full) {
    trainable = stage_params;
    const double w = stage_params * d / (zero >= 3 ? dp : 1.0);
    (offload_params ? w_host : w_gpu) = w;
  } else {
    // Frozen base through the shared weight term (NF4 + double quantization
    // for QLoRA, embeddings and lm_head unquantized), sharded by ZeRO-3/FSDP
    // (FSDP+QLoRA shards the quantized storage, bnb_4bit_quant_storage).
    const WeightShare share{.layer_begin = begin,
                            .layer_end = end,
                            .embedding = first,
                            .lm_head = last};
    const double w =
        as_double(weight_bytes(model, setup, share)) / (zero >= 3 ? dp : 1.0);
    (offload_params ? w_host : w_gpu) = w;
    double adapters = 0;
    for (std::int64_t l = begin; l < end; ++l) {
      adapters += lora_layer_params(model, setup, is_moe_layer(model, l));
      if (model.num_experts == 0 && model.num_decoder_layers == 0) {
        adapters *= as_double(end - begin);  // dense: every layer alike
        break;
      }
    }
    trainable = adapters / t;
    // PEFT keeps adapters in fp32 when the base is 16-bit
    // (autocast_adapter_dtype); torchtune (pure) keeps them in the dtype.
    train_w_bytes = setup.precision == Precision::mixed ? 4.0 : d;
    const double a = trainable * train_w_bytes / (zero >= 3 ? dp : 1.0);
    (offload_params ? w_host : w_gpu) += a;
  }

  // Gradients in the training dtype (fp32 adapters: fp32 grads); ZeRO-2+
  // shards them; with the optimizer offloaded, DeepSpeed streams reduced
  // gradients to pinned CPU buffers (ZeRO-Offload) and FSDP offloads them
  // with the parameters.
  // DeepSpeed runs bf16 with ZeRO-1 through its BF16_Optimizer, which
  // accumulates gradients in a full-size fp32 buffer
  // (bf16_optimizer.py fp32_groups_gradients_flat).
  const bool bf16_optimizer = full && zero == 1 && !setup.fsdp &&
                              setup.dtype == Dtype::bf16 &&
                              setup.precision == Precision::mixed;
  const double g_elem = bf16_optimizer ? 4.0 : (full ? d : train_w_bytes);
  double g_full = trainable * g_elem / (zero >= 2 ? dp : 1.0);
  double g_host = 0;
  if ((offload_opt && zero >= 2) || offload_params) {
    g_host = g_full;
    g_full = 0;
  }

  // Optimizer: fp32 master copy under mixed 16-bit full training (LoRA
  // adapters are already fp32), states per optimizer; ZeRO-1+ shards them.
  const double master = (full && mixed16) ? 4.0 : 0.0;
  const double states =
      state_bytes_per_param(setup, as_double(model.hidden_size));
  const double o_all = trainable * (master + states) / (zero >= 1 ? dp : 1.0);
  double o_gpu = 0;
  double o_paged = 0;
  double o_host = 0;
  if (offload_opt) {
    // The master copy and states live in host RAM (DeepSpeed CPU Adam, FSDP
    // CPUOffload); the fp32 gradient copy the CPU optimizer steps with too.
    o_host = o_all + trainable * 4.0 / (zero >= 1 ? dp : 1.0);
  } else if (paged(setup.optimizer)) {
    // bitsandbytes paged states: cudaMallocManaged, outside PyTorch's
    // allocator; the master copy (mixed) stays ordinary.
    o_paged = trainable * states / (zero >= 1 ? dp : 1.0);
    o_gpu = trainable * master / (zero >= 1 ? dp : 1.0);
  } else {
    o_gpu = o_all;
  }

  // --- Activations (Korthikanti et al. 2022 §4), per micro-batch.
  Dims dm;
  dm.tokens = as_double(setup.batch) * as_double(setup.seq);
  dm.seq = as_double(setup.seq);
  dm.h = as_double(model.hidden_size);
  dm.d = d;
  dm.t = t;
  dm.sp = setup.sequence_parallel && setup.tp > 1;
  double a_all = 0;    // all layers' saved tensors, no checkpointing
  double a_layer = 0;  // the largest layer's
  double bwd_layer = 0;
  for (std::int64_t l = begin; l < end; ++l) {
    const bool moe = is_moe_layer(model, l);
    const double a = layer_activation_bytes(model, setup, dm, moe);
    a_all += a;
    a_layer = std::max(a_layer, a);
    bwd_layer = std::max(bwd_layer, layer_backward_bytes(model, dm, moe));
    if (model.num_experts == 0 && model.num_decoder_layers == 0) {
      a_all = a * as_double(end - begin);  // dense: every layer alike
      break;
    }
  }
  const double layers_here = as_double(end - begin);
  const double scores = layer_scores_bytes(model, setup, dm);
  // Full recomputation keeps each layer's input (2sbh, /t with SP) and
  // recomputes one layer at a time in backward; selective recomputation
  // keeps everything but the attention scores and recomputes one layer's
  // scores at a time (Korthikanti §4.1-4.2).
  const double layer_input = dm.tokens * d * dm.h / (dm.sp ? t : 1.0);
  double stored = a_all;
  double recompute = 0;
  if (setup.checkpointing == Checkpointing::full) {
    stored = layer_input * layers_here;
    recompute = a_layer;
  } else if (setup.checkpointing == Checkpointing::selective) {
    stored = a_all - scores * layers_here;
    recompute = scores;
  }
  // 1F1B: stage s holds pp - s micro-batches in flight (the first stage pp),
  // fewer when the step has fewer micro-batches (--grad-accum > 1 given).
  double in_flight = as_double(pp - stage);
  if (setup.grad_accum > 1) {
    in_flight = std::min(in_flight, as_double(setup.grad_accum));
  }
  stored *= in_flight;
  if (last) {
    // The final norm keeps its input (and upcast) for backward.
    stored += dm.tokens * (norm_saved(model, setup, needs_of(setup), d) + d) *
              dm.h / (dm.sp ? t : 1.0);
  }
  double a_host = 0;
  if (setup.activation_offload) {
    // torchtune OffloadActivations: saved tensors go to pinned CPU memory in
    // forward and return one layer ahead of backward.
    a_host = stored;
    stored = std::min(
        stored, 2.0 * (setup.checkpointing == Checkpointing::full ? layer_input
                                                                  : a_layer));
  }

  // --- Logits and loss (last stage). Eager: the model returns fp32 logits
  // (torchtune TransformerDecoder output(h).float(), LlamaForCausalLM
  // logits.float() before transformers 4.45) and the training loop keeps its
  // reference to them through backward (`logits = model(...)`, then
  // `loss.backward()`: torchtune recipes until PR #1046 / #1235 added
  // `del logits` in mid-2024, torchtitan until PR #391, custom HF/PEFT loops
  // that hold `outputs`); log-softmax saves its fp32 output. Forward holds
  // 8 B per logit, the start of backward 16 B (logits, saved output, its
  // gradient, the logits' gradient). Loops that free the logits first hold
  // 12 B: oomplan takes the loop that keeps them, the common one in the
  // published 2023-24 runs. Chunked CE (torchtune CEWithChunkedOutputLoss)
  // runs the output projection and the loss in 8 chunks.
  double l_fwd = 0;
  double l_bwd = 0;
  if (last) {
    const double elems =
        dm.tokens * as_double(model.vocab_size) / t;  // vocab-parallel
    if (setup.loss == Loss::chunked && setup.compile) {
      // Compiled per-chunk CE saves only its 16-bit input chunk (the
      // chunks stay referenced) and writes one chunk's gradient at a time:
      // inductor fuses the fp32 upcast, softmax and NLL backward into one
      // kernel that writes the gradient in the input's dtype, so no fp32
      // chunk is materialised.
      l_fwd = elems * d;
      l_bwd = elems * (d + d / k_loss_chunks);
    } else if (setup.loss == Loss::chunked) {
      // Eager: each chunk's log-softmax keeps its fp32 output; backward
      // works one chunk at a time.
      l_fwd = elems * (4.0 + d);
      l_bwd = elems * (4.0 + (8.0 + d) / k_loss_chunks);
    } else if (setup.compile) {
      // A compiled loss fuses log-softmax and NLL: it keeps the fp32 logits
      // (4 B) and writes their gradient in one kernel (4 B).
      l_fwd = elems * 4.0;
      l_bwd = elems * 8.0;
    } else {
      l_fwd = elems * 8.0;
      l_bwd = elems * 16.0;
    }
  }

  // --- Communication and gather buffers.
  double buffers = 0;
  const double largest = largest_layer / t;
  if (zero >= 3 && dp > 1) {
    // ZeRO-3 / FSDP gather the layer being computed and prefetch the next
    // (FSDP BACKWARD_PRE, DeepSpeed prefetch bucket), and hold one layer of
    // unsharded gradients before reduce-scatter (the DeepSpeed estimator's
    // 4 B x largest layer). Frozen bases gather in their stored format.
    double layer_w = largest * d;
    if (!full) {
      const WeightShare one{.layer_begin = begin,
                            .layer_end = begin + 1,
                            .embedding = false,
                            .lm_head = false};
      layer_w = as_double(weight_bytes(model, setup, one));
    }
    // DeepSpeed is modelled at the HF "auto" settings (prefetch bucket
    // 0.9 h^2, reduce bucket h^2); its stage3_max_live_parameters (1e9) can
    // keep more gathered parameters alive when layers are reused.
    // Embedding and lm_head are gathered as units of their own (torchtune's
    // custom_sharded_layers, DeepSpeed's per-module fetch): a large
    // vocabulary can make them the largest unit. FSDP keeps the root unit
    // unsharded between forward and backward, which is why recipes wrap
    // them separately; HF accelerate's transformer-layer wrap instead keeps
    // them gathered (2 x vocab x hidden x 2 B more).
    const double vocab_unit =
        std::max(first ? embed : 0.0, last ? head : 0.0) * d / t;
    buffers += std::max(2.0 * layer_w, layer_w + vocab_unit) +
               (full ? largest * d : 0.0);
  } else if (zero >= 1 && dp > 1) {
    // DeepSpeed ZeRO-1/2 reduce buckets, double-buffered (contiguous
    // gradients ipg_buffer), at the HF "auto" size hidden^2.
    buffers += 2.0 * dm.h * dm.h * g_elem;
  }
  // DDP's Reducer keeps flat bucket copies of every gradient unless
  // gradient_as_bucket_view=True (the default is False): gradient memory
  // that lives for the whole step. Mixed-precision frameworks reduce from
  // their persistent flat gradient buffer instead (Megatron's grad buffer is
  // its bucket), counted in the timeline below.
  const double ddp_copy = (zero == 0 && dp > 1 && full &&
                           setup.precision == Precision::pure && !setup.fsdp)
                              ? g_full
                              : 0.0;
  // QLoRA: each NF4 matmul dequantizes its weight to the dtype first
  // (bitsandbytes dequantize_4bit, torchao linear_nf4): the largest matrix.
  double dequant = 0;
  if (setup.mode == Mode::qlora) {
    const double inter = std::max(as_double(model.intermediate_size),
                                  as_double(model.moe_intermediate_size));
    dequant = dm.h * inter * d / t;
  }

  // --- The timeline.
  // Gradients that exist before backward starts: earlier micro-batches'
  // under accumulation, and the flat gradient buffers that mixed-precision
  // frameworks allocate once and keep: DeepSpeed's partition
  // (stage_1_and_2.py grads_in_partition, stage3.py
  // grad_partitions_flat_buffer, bf16_optimizer.py fp32 gradients), Megatron's
  // contiguous main_grad buffer. PyTorch-native pure-precision and FSDP
  // loops (torchtune, LitGPT) free them: zero_grad(set_to_none=True).
  const bool accum = setup.grad_accum > 1 && !setup.optimizer_in_bwd;
  const bool flat_buffer = !setup.fsdp && !setup.optimizer_in_bwd &&
                           setup.precision == Precision::mixed &&
                           (zero >= 1 || full);
  const double g_kept = (accum || flat_buffer) ? g_full : 0.0;
  // One parameter's gradient when the optimizer steps inside backward
  // (torchtune optimizer_in_bwd: each parameter steps and frees its grad).
  // The largest trainable tensor: an embedding or MLP matrix (full), an
  // adapter matrix (LoRA), as sharded on this GPU.
  const double largest_param =
      full ? std::max({dm.h * as_double(model.intermediate_size),
                       dm.h * as_double(model.moe_intermediate_size), embed,
                       head}) /
                 t / (zero >= 3 ? dp : 1.0)
           : as_double(setup.lora_rank) *
                 std::max(dm.h, as_double(model.intermediate_size)) / t;
  const double g_step = setup.optimizer_in_bwd
                            ? std::min(g_full, largest_param * g_elem)
                            : g_full;
  const double head_grad =
      (full && last) ? std::min(g_full, (head > 0 ? head : embed) / t * g_elem)
                     : 0.0;

  Parts fwd;
  fwd.weights = w_gpu;
  fwd.optimizer = o_gpu;
  fwd.gradients = g_kept + ddp_copy;
  // The forward's last moment: every stored activation and the logits.
  fwd.activations = stored;
  fwd.logits = l_fwd;
  fwd.buffers = buffers + dequant;

  // Inside the layers, before any logits exist: under full checkpointing a
  // layer's forward saves nothing, only its working set lives while it runs
  // (and is freed before the output projection).
  Parts fwd_layer = fwd;
  fwd_layer.logits = 0;
  fwd_layer.activations =
      stored + (setup.checkpointing == Checkpointing::full ? bwd_layer : 0.0);

  Parts bwd_start = fwd;
  bwd_start.activations = stored;
  bwd_start.logits = l_bwd;
  // The output projection's weight gradient, optimizer-in-backward or not:
  // autograd sums a parameter's gradient over all its uses before its
  // accumulate hook fires (torch/csrc/autograd/engine.cpp InputBuffer;
  // register_post_accumulate_grad_hook). Chunked CE runs the projection's
  // backward chunk by chunk, so its gradient grows while the later chunks'
  // logits are still held; the whole-sequence loss finishes its backward
  // (freeing the fp32 terms) before the projection's runs.
  const bool chunked = setup.loss == Loss::chunked;
  bwd_start.gradients = std::max(g_kept, chunked ? head_grad : 0.0) + ddp_copy;

  // The first layer backward meets: every stored input still there, the
  // top layer recomputed, the logits' gradients already consumed, the head's
  // gradient formed. With tied embeddings the same parameter is used again
  // at the bottom, so under optimizer-in-backward its gradient waits there
  // for the embedding's contribution; an untied head has stepped and freed
  // its gradient.
  Parts bwd_top = fwd;
  bwd_top.logits = 0;
  const bool tied = head == 0 && pp == 1;
  bwd_top.gradients = (setup.optimizer_in_bwd && !tied)
                          ? std::max(g_kept, g_step) + ddp_copy
                          : std::max(g_kept, head_grad) + ddp_copy;
  bwd_top.activations = stored + recompute + bwd_layer;

  Parts bwd_end = fwd;
  bwd_end.logits = 0;
  bwd_end.gradients = g_step + ddp_copy;
  // The bottom layer's activations (saved or recomputed) live until its own
  // backward is done.
  bwd_end.activations = a_layer + bwd_layer;

  // torchao's 8-bit AdamW (low_bit_optim single_param_adam) dequantizes one
  // parameter's m and v to fp32, updates and requantizes them: 8 B per
  // element of the largest parameter. bitsandbytes' paged 8-bit kernel
  // updates blocks in place.
  const double opt_temp =
      setup.optimizer == Optimizer::adamw_8bit && !offload_opt
          ? 8.0 * largest_param
          : 0.0;
  if (setup.optimizer_in_bwd) {
    bwd_end.optimizer += opt_temp;
  }

  Parts step = fwd;
  step.optimizer += setup.optimizer_in_bwd ? 0.0 : opt_temp;
  step.activations = 0;
  step.logits = 0;
  step.buffers = 0;
  step.gradients = g_step + ddp_copy;
  if (!setup.optimizer_in_bwd && !offload_opt) {
    if (zero >= 1 && !setup.fsdp && mixed16 && !bf16_optimizer) {
      // DeepSpeed casts the gradient partition to fp32 for its optimizer
      // (stage_1_and_2.py step: single_grad_partition.to(fp32); stage3.py
      // per sub-group).
      double part = trainable / dp;
      if (zero >= 3) {
        part = std::min(part, k_zero3_sub_group);
      }
      step.gradients += 4.0 * part;
    }
  }
  // torch.optim.AdamW is modelled fused (fused=True: torchtune, HF Trainer's
  // adamw_torch_fused): no whole-model temporaries. Its foreach path would
  // add one state-sized list (_multi_tensor_adamw: exp_avg_sq_sqrt).

  struct Candidate {
    const Parts* parts;
    Phase phase;
  };
  const Candidate candidates[] = {
      {&fwd_layer, Phase::forward},  {&fwd, Phase::forward},
      {&bwd_start, Phase::backward}, {&bwd_top, Phase::backward},
      {&bwd_end, Phase::backward},   {&step, Phase::optimizer_step}};
  const Candidate* best = &candidates[0];
  for (const Candidate& c : candidates) {
    if (c.parts->allocated() > best->parts->allocated()) {
      best = &c;
    }
  }
  out.peak = *best->parts;
  out.phase = best->phase;
  out.paged = o_paged;
  out.host = w_host + g_host + o_host + a_host;
  out.weights = w_gpu;
  out.activations = stored + recompute;
  return out;
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

std::string_view activations_formula(const Resolved& setup) {
  switch (setup.checkpointing) {
    case Checkpointing::full:
      return "layers x tokens x hidden x dtype (checkpointed inputs) + one "
             "layer recomputed (Korthikanti 2022)";
    case Checkpointing::selective:
      return "layers x per-layer saved tensors without attention scores "
             "(Korthikanti 2022 selective)";
    case Checkpointing::none:
      break;
  }
  return "layers x per-layer saved tensors (Korthikanti 2022 Table 2, "
         "RMSNorm/SwiGLU/GQA terms)";
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

}  // namespace

void add_training(const Model& model, const Gpu& gpu, const Resolved& setup,
                  Budget& budget) {
  const ParamCounts counts = count_params(model);

  // The most loaded pipeline stage decides the plan; every stage is listed
  // when pp > 1.
  const double reserve = setup.reserve.value_or(k_train_reserve);
  const Bytes overhead = runtime_overhead_bytes(gpu, setup);

  StageResult worst;
  double worst_total = -1;
  for (int s = 0; s < setup.pp; ++s) {
    const StageResult r = train_stage(model, setup, counts, s);
    // A stage's device total, as total_bytes counts it (paged states
    // before any spill to the host).
    const double total = r.peak.allocated() * (1.0 + reserve) +
                         static_cast<double>(overhead) + r.paged;
    if (setup.pp > 1) {
      budget.stages.push_back(
          Stage{.stage = s,
                .layers = r.layers,
                .weights_bytes = saturated_bytes(r.weights),
                .kv_cache_bytes = 0,
                .activations_bytes = saturated_bytes(r.activations),
                .total_bytes = saturated_bytes(total)});
    }
    if (total > worst_total) {
      worst_total = total;
      worst = r;
    }
  }

  const Parts& p = worst.peak;
  const Bytes weights = saturated_bytes(p.weights);
  const Bytes activations = saturated_bytes(p.activations);
  const Bytes logits = saturated_bytes(p.logits);
  const Bytes gradients = saturated_bytes(p.gradients);
  const Bytes optimizer_alloc = saturated_bytes(p.optimizer);
  const Bytes buffers = saturated_bytes(p.buffers);
  const Bytes allocated =
      weights + activations + logits + gradients + optimizer_alloc + buffers;

  const Bytes fragmentation =
      saturated_bytes(static_cast<double>(allocated) * reserve);

  // Paged states live in unified memory: they occupy the device as long as
  // it has room and spill to host RAM beyond that (cudaMallocManaged
  // oversubscription), which is why bitsandbytes pages them.
  Bytes paged_device = saturated_bytes(worst.paged);
  Bytes paged_host = 0;
  if (paged_device > 0) {
    budget.warnings |= static_cast<unsigned>(Warning::paged_unified_memory);
    const Bytes room = std::max<Bytes>(
        0, budget.usable_bytes - allocated - fragmentation - overhead);
    if (paged_device > room) {
      paged_host = paged_device - room;
      paged_device = room;
    }
  }

  budget.add("weights", weights, weights_formula(setup));
  budget.add("activations", activations, activations_formula(setup));
  budget.add("logits", logits,
             setup.loss == Loss::chunked
                 ? "tokens x vocab / tp x (saved chunk logits + one chunk's "
                   "fp32 loss gradient) (chunked cross-entropy)"
                 : "tokens x vocab / tp x (fp32 log-softmax + its gradient + "
                   "logits gradient)");
  budget.add("gradients", gradients,
             setup.optimizer_in_bwd
                 ? "one parameter's gradient (optimizer step fused into "
                   "backward)"
                 : "trainable params x grad bytes / (dp at ZeRO-2+)");
  budget.add("optimizer", optimizer_alloc + paged_device,
             optimizer_formula(setup));
  if (buffers > 0) {
    budget.add("buffers", buffers,
               setup.zero >= 3
                   ? "gathered layer + prefetched layer + unsharded layer "
                     "grads (ZeRO-3/FSDP)"
                   : "communication buckets / dequantized NF4 weight");
  }
  budget.add("overhead", overhead, "CUDA context + cuBLAS workspace + NCCL");
  budget.add("fragmentation", fragmentation,
             "allocated x caching-allocator reserve");

  const double node_gpus = setup.gpus;
  budget.host_bytes = saturated_bytes(
      (worst.host + static_cast<double>(paged_host)) * node_gpus);
  if (budget.host_bytes > 0) {
    budget.warnings |= static_cast<unsigned>(Warning::host_memory);
  }

  // Conditions the report explains (the same tests as inference, plus
  // sharded data parallelism over PCIe).
  if (setup.attn == Attn::eager) {
    budget.warnings |= static_cast<unsigned>(Warning::eager_attention_s2);
  }
  if (model.max_position_embeddings > 0 &&
      setup.seq > model.max_position_embeddings) {
    budget.warnings |= static_cast<unsigned>(Warning::seq_beyond_context);
  }
  const bool sharded_dp = setup.dp() > 1 && setup.zero >= 1;
  if ((setup.tp > 1 || setup.pp > 1 || sharded_dp) && gpu.nvlink_gb_s <= 0) {
    budget.warnings |= static_cast<unsigned>(Warning::no_nvlink);
  }
  if (setup.attn == Attn::flash && !runs_flash_attention(gpu)) {
    budget.warnings |= static_cast<unsigned>(Warning::flash_unsupported);
  }

  budget.peak.allocated_bytes = allocated;
  budget.peak.reserved_bytes = allocated + fragmentation;
  budget.peak.device_bytes = budget.total_bytes();
  budget.peak.phase = worst.phase;
}

}  // namespace oomplan
