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

#include "memory/internal.hpp"

#include "oomplan/model/capability.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace oomplan {
namespace {

// Default caching-allocator reserve for training: reserved exceeds allocated
// by block rounding and freed-but-cached segments of varied sizes (PyTorch
// CUDACachingAllocator rounds to 512 B / 2 MiB blocks and keeps 20 MiB
// segments). torchtune's LoRA tutorial reports reserved 7-9 % above what
// its allocations add up to.
constexpr double k_train_reserve = 0.08;

// FSDP1's rate limiter (limit_all_gathers=True: the default since torch 2.1,
// False in the torch 1.13-2.0 FullyShardedDataParallel signature):
// at most two unsharded flat parameters whose free is still pending on the
// compute stream (torch/distributed/fsdp/_limiter_utils.py _FreeEventQueue
// _max_num_inflight_all_gathers = 2; _runtime_utils.py _unshard
// dequeue_if_needed + event.synchronize() before the next all-gather).
constexpr double k_fsdp1_inflight_all_gathers = 2.0;

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
  double cp = 1;  // context parallel: tokens are this GPU's share
};

// Which saved tensors a layer keeps: a frozen linear (LoRA/QLoRA without an
// adapter on it) needs no copy of its input for a weight gradient, and a
// frozen norm needs no normalised copy for its weight gradient. The q/k/v and
// gate/up inputs are counted in copies: one tensor shared by the projections
// that read it, or one each where every adapter casts its own.
struct Needs {
  bool norm_weight = true;  // norm weights train (full fine-tuning)
  double qkv_in = 1;        // copies of the q/k/v projections' input
  bool o_in = true;
  double up_in = 1;  // copies of gate/up's (or fc1's) input: the second norm's
                     // output
  bool down_in = true;
  double down_copies = 0;  // extra 16-bit copies of down_proj's input
  double mlp_bytes = 0;    // element bytes of gate/up/act (0: the dtype)
};

// Bits of `targets` set in `mask`.
double targeted(unsigned targets, unsigned mask) {
  double n = 0;
  for (unsigned bit = 1; bit <= mask; bit <<= 1U) {
    n += (targets & mask & bit) != 0 ? 1.0 : 0.0;
  }
  return n;
}

// amp computes on fp32 tensors (residual stream, norms) only where the
// parameters reach the layers in fp32: FSDP and ZeRO-3 gather them in the
// 16-bit param_dtype (FSDP MixedPrecision), so the stream stays 16-bit.
bool amp_compute(const Resolved& setup) {
  return setup.precision == Precision::amp && setup.zero < 3 &&
         dtype_bytes(setup.dtype) < 4;
}

Needs needs_of(const Resolved& setup) {
  if (setup.mode == Mode::full && amp_compute(setup)) {
    // torch.autocast casts activations afresh at every op (at::autocast
    // cached_cast caches only leaf tensors that require grad, i.e. the
    // weights), so q, k and v each save their own 16-bit copy of the fp32
    // norm output, gate and up of theirs.
    return {.qkv_in = 3.0, .up_in = 2.0};
  }
  if (setup.mode == Mode::full) {
    return {};
  }
  if (setup.mode == Mode::qlora && setup.precision == Precision::mixed) {
    // PEFT QLoRA runs every frozen projection through bitsandbytes'
    // MatMul4Bit, which keeps its input for backward whenever the input
    // needs a gradient (bitsandbytes/autograd/_functions.py
    // MatMul4Bit.forward: ctx.tensors = (A, B) if any(needs_input_grad[:2])),
    // adapter or not. Under autocast peft/tuners/lora/bnb.py Linear4bit
    // skips its input cast (requires_conversion = not
    // torch.is_autocast_enabled()), so the adapters save that same tensor.
    // torchtune's torchao linear_nf4 (pure precision) saves only the NF4
    // weight, so its frozen linears keep no input.
    if (!setup.prepare_kbit) {
      return {.norm_weight = false};
    }
    // peft utils/other.py prepare_model_for_kbit_training casts every
    // non-Params4bit parameter to fp32: the fp32 embedding makes the residual
    // stream and the norm outputs fp32. bnb.nn.Linear4bit.forward casts its
    // input to the compute dtype (x.to(self.compute_dtype): one 16-bit copy
    // per projection, each saved by MatMul4Bit) and its output back to fp32
    // (.to(inp_dtype)), so gate, up and SiLU keep fp32 tensors; under
    // autocast each adapter's lora_A casts the fp32 input to its own 16-bit
    // copy. The attention output is 16-bit again (flash/SDPA run in the
    // compute dtype), shared by o_proj and its adapter.
    const unsigned t = setup.lora_targets;
    return {.norm_weight = false,
            .qkv_in = 3.0 + targeted(t, k_lora_q | k_lora_k | k_lora_v),
            .o_in = true,
            .up_in = 2.0 + targeted(t, k_lora_gate | k_lora_up),
            .down_in = true,
            .down_copies = (t & k_lora_down) != 0 ? 1.0 : 0.0,
            .mlp_bytes = 4.0};
  }
  const unsigned t = setup.lora_targets;
  const double qkv = targeted(t, k_lora_q | k_lora_k | k_lora_v);
  const double up = targeted(t, k_lora_gate | k_lora_up);
  // DeepSpeed (module.bfloat16()) and FSDP's MixedPrecision run the
  // adapters in 16 bits, where the cast is a no-op.
  if (setup.precision != Precision::pure && setup.zero == 0) {
    // PEFT >= 0.12 keeps adapters in fp32 (get_peft_model
    // autocast_adapter_dtype=True) and casts each adapter's input to them
    // (peft/tuners/lora/layer.py Linear.forward: x =
    // self._cast_input_dtype(x, lora_A.weight.dtype)); under the Trainer's
    // autocast lora_A's matmul casts that copy back to 16 bits and saves it.
    // Each adapted projection thus keeps its own 16-bit copy of its input
    // (autocast caches casts of leaf parameters only).
    return {.norm_weight = false,
            .qkv_in = qkv,
            .o_in = (t & k_lora_o) != 0,
            .up_in = up,
            .down_in = (t & k_lora_down) != 0};
  }
  // torchtune (pure): adapters in the dtype read the shared input.
  return {.norm_weight = false,
          .qkv_in = qkv > 0 ? 1.0 : 0.0,
          .o_in = (t & k_lora_o) != 0,
          .up_in = up > 0 ? 1.0 : 0.0,
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
  // Under amp the residual stream, the norms and their outputs are fp32.
  const double sd = amp_compute(setup) ? 4.0 : d;
  double rep = norms * norm_saved(model, setup, needs, sd) * h;
  rep += needs.qkv_in * d * h;
  rep += model.parallel_block ? 0.0 : needs.up_in * d * h;
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
  const double md = needs.mlp_bytes > 0 ? needs.mlp_bytes : d;
  const double down_extra = needs.down_copies * d;
  auto mlp = [&](double inter, bool down_weight_trains) {
    if (model.mlp == MlpKind::gated) {
      const double act = setup.compile ? 0.0 : md * inter;
      return 2.0 * md * inter + act + (down_weight_trains ? d * inter : 0.0) +
             down_extra * inter;
    }
    return md * inter + (down_weight_trains ? d * inter : 0.0) +
           down_extra * inter;
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

// torchtitan's per-op selective activation checkpointing (selective_ac_option
// "op"): the block's input is kept by the checkpoint and, of the ops run
// inside it, only the outputs of the save list are stashed: matmuls (every
// second one recomputed, the count restarting in each block), SDPA (its
// output and fp32 logsumexp), TP's reduce-scatters and max (float8 amax);
// norms, RoPE, SiLU and products are recomputed (torchtitan v0.1.0
// models/llama3/infra/parallelize.py _save_list and _custom_policy; current
// torchtitan/distributed/activation_checkpoint.py SelectiveAC keeps the
// rule). A Llama block calls its matmuls as wq, wk, wv, wo, w1, w3, w2, so
// wq, wv, w1 and w2 are saved. Under TP the rowwise w2 product is a full
// partial sum (not sharded) and, with sequence parallelism, both
// reduce-scatter outputs are saved too. MoE layers follow the same pattern
// per routed copy (the router gate is force-recomputed). With torchao float8
// linears every projection runs aten._scaled_mm, which current torchtitan
// saves unconditionally (it is one of functorch's compute_intensive_ops and
// not counted among the alternating mm/linear), so all seven outputs stay
// (torchtitan v0.1.0's shorter list saved none of them).
double op_saved_bytes(const Model& model, const Resolved& setup, const Dims& dm,
                      bool moe) {
  const bool f8 = setup.float8;
  const double d = dm.d;
  const double h = dm.h;
  const double heads = as_double(model.num_heads);
  double q_dim = heads * as_double(model.head_dim);
  double kv_dim = as_double(model.num_kv_heads * model.head_dim);
  double o_dim = q_dim;
  if (model.kv_lora_rank > 0) {
    q_dim = heads * as_double(model.qk_nope_head_dim + model.qk_rope_head_dim);
    kv_dim = as_double(model.kv_lora_rank + model.qk_rope_head_dim);
    o_dim = heads * as_double(model.v_head_dim);
  }
  const double rep_div = dm.sp ? dm.t : 1.0;
  double rep = d * h / rep_div;  // the checkpointed block input
  // w2's output (under TP the rowwise partial sum, full size); float8 also
  // wo's.
  rep += (f8 ? 2.0 : 1.0) * d * h;
  if (dm.t > 1 && dm.sp) {
    rep += 2.0 * d * h / dm.t;  // reduce-scatter outputs
  }
  // wq, wv (float8: wk too), the attention output and its logsumexp (fp32,
  // one per head).
  double shard = d * (q_dim + (f8 ? 2.0 : 1.0) * kv_dim + o_dim) + 4.0 * heads;
  // w1 (w3 recomputed; float8: saved too)
  auto mlp = [&](double inter) { return (f8 ? 2.0 : 1.0) * d * inter; };
  if (!moe) {
    shard += mlp(as_double(model.intermediate_size));
  } else {
    const double k = as_double(model.experts_per_tok);
    shard += k * (mlp(as_double(model.moe_intermediate_size)) + d * h);
    if (model.num_shared_experts > 0) {
      const double inter =
          model.shared_expert_intermediate_size > 0
              ? as_double(model.shared_expert_intermediate_size)
              : as_double(model.moe_intermediate_size);
      shard += as_double(model.num_shared_experts) * (mlp(inter) + d * h);
    }
  }
  return dm.tokens * (rep + shard / dm.t);
}

// Activation-gradient working set while one layer runs backward, sharded by
// TP: the larger of the MLP's and the attention's. MLP: the grads of its
// three largest intermediates (gated) or two (plain). Attention (flash-attn
// 2 / SDPA backward): the incoming output gradient, dq with its fp32
// accumulator (flash_bwd dq_accum), and dk, dv at the query heads' width
// (FlashAttention-2 expands GQA keys and values for backward, then sums them
// per KV head: flash_attn_interface dk_expanded / dv_expanded). Eager
// attention is left to its s^2 scores term (Korthikanti's reference, whose
// measurements include no separate working set). At long context this is the
// layer's transient that full checkpointing cannot remove.
double layer_backward_bytes(const Model& model, const Resolved& setup,
                            const Dims& dm, bool moe) {
  double inter = as_double(model.intermediate_size);
  if (moe) {
    inter = as_double(model.experts_per_tok) *
            as_double(model.moe_intermediate_size);
  }
  const double n = model.mlp == MlpKind::gated ? 3.0 : 2.0;
  const double mlp = dm.d * n * inter;
  double q_dim = as_double(model.num_heads * model.head_dim);
  if (model.kv_lora_rank > 0) {
    q_dim = as_double(model.num_heads *
                      (model.qk_nope_head_dim + model.qk_rope_head_dim));
  }
  double attn = setup.attn == Attn::eager
                    ? 0.0
                    : q_dim * (dm.d + 4.0 + dm.d) + 2.0 * q_dim * dm.d;
  if (dm.cp > 1) {
    // Context parallelism (torch distributed/tensor/experimental/
    // _attention.py, torchtitan's default rotate method "allgather"): each
    // rank all-gathers the keys and values of the whole sequence (cp x its
    // own) and accumulates their gradients in fp32 before reduce-scattering
    // them back (_templated_ring_attention_backward).
    const double kv_dim =
        model.kv_lora_rank > 0
            ? q_dim
            : 2.0 * as_double(model.num_kv_heads * model.head_dim);
    attn += dm.cp * kv_dim * (dm.d + 4.0);
  }
  return dm.tokens * std::max(mlp, attn) / dm.t;
}

// Bytes per logit the loss holds at the end of forward and at its peak in
// backward, per loss implementation (vocab-parallel under TP).
struct LossBytes {
  double fwd = 0;
  double bwd = 0;
};
LossBytes loss_bytes(const Resolved& setup) {
  const double d = dtype_bytes(setup.dtype);
  switch (setup.loss) {
    case Loss::chunked:
      if (setup.compile) {
        // Compiled per-chunk CE saves only its 16-bit input chunk (the
        // chunks stay referenced) and writes one chunk's gradient at a time:
        // inductor fuses the fp32 upcast, softmax and NLL backward into one
        // kernel that writes the gradient in the input's dtype, so no fp32
        // chunk is materialised.
        return {d, d + d / k_loss_chunks};
      }
      // Eager: each chunk's log-softmax keeps its fp32 output; backward
      // works one chunk at a time.
      return {4.0 + d, 4.0 + (8.0 + d) / k_loss_chunks};
    case Loss::full:
      // The model returns fp32 logits (torchtune TransformerDecoder
      // output(h).float()) and the loop keeps its reference through backward
      // (`logits = model(...)`, then `loss.backward()`: torchtune recipes
      // until PR #1046 / #1235, torchtitan until PR #391, custom loops that
      // hold `outputs`); log-softmax saves its fp32 output: forward 8 B, the
      // start of backward 16 B (logits, saved output, its gradient, the
      // logits' gradient). Compiled: log-softmax and NLL fused, the fp32
      // logits kept (4 B) and their gradient written in one kernel (4 B).
      return setup.compile ? LossBytes{4.0, 8.0} : LossBytes{8.0, 16.0};
    case Loss::upcast:
      // F.cross_entropy(logits.float()) on 16-bit logits that the loop frees
      // before backward (torchtitan components/loss.py cross_entropy_loss and
      // train.py `del pred`; transformers >= 4.49 loss/loss_utils.py
      // ForCausalLMLoss pads the labels instead of slicing the logits, and
      // Trainer.compute_loss drops `outputs`). Forward: the 16-bit logits,
      // their fp32 copy and log-softmax's fp32 output (d + 8 B); backward:
      // the saved output, NLL's gradient and log-softmax's (12 B). Compiled:
      // inductor keeps the 16-bit input and writes its gradient (d + d).
      return setup.compile ? LossBytes{d, 2.0 * d} : LossBytes{d + 8.0, 12.0};
    case Loss::upcast_shift:
      // transformers 4.46-4.48 ForCausalLMLoss: logits.float(), then
      // shift_logits = logits[..., :-1, :].contiguous(), a second fp32 copy,
      // while the model still holds its 16-bit logits (d + 12 B).
      return setup.compile ? LossBytes{d, 2.0 * d} : LossBytes{d + 12.0, 12.0};
    case Loss::fp32_shift:
      // transformers <= 4.45 LlamaForCausalLM.forward: logits =
      // lm_head(...).float() (the 16-bit product freed at once), then the
      // shifted fp32 copy and log-softmax's output (12 B); Trainer frees
      // the fp32 logits before backward (12 B). Compiled: the fp32 logits
      // are a model output, materialised as in `full`.
      return setup.compile ? LossBytes{4.0, 8.0} : LossBytes{12.0, 12.0};
  }
  return {8.0, 16.0};
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

// FSDP1's memory for its largest wrapped unit of `params` elements (as split
// by tp) sharded over `dp` ranks in `bytes`-byte elements.
struct FsdpOneUnits {
  double unsharded_bytes = 0;      // the padded all-gather output
  double grad_bytes = 0;           // the unit's unsharded flat gradient
  double grad_pad_copy_bytes = 0;  // F.pad's copy when numel % dp != 0
  double grad_shard_bytes = 0;     // the reduce-scatter output
  double held_param_bytes = 0;     // freed all-gather outputs, not reusable
  double held_grad_bytes = 0;      // a gradient the reduce-scatter still reads
};

FsdpOneUnits fsdp1_units(double params, double dp, double bytes) {
  FsdpOneUnits u;
  // One FlatParameter per wrapped unit, padded to a multiple of the world
  // size (torch/distributed/fsdp/_flat_param.py FlatParamHandle._get_shard:
  // chunk(world_size), numel_to_pad = world_size * chunk - numel).
  const double padded = std::ceil(params / dp) * dp;
  u.unsharded_bytes = padded * bytes;
  u.grad_bytes = params * bytes;
  u.grad_pad_copy_bytes = padded > params ? padded * bytes : 0.0;
  u.grad_shard_bytes = padded / dp * bytes;
  // record_stream keeps a freed block out of reuse until the stream it was
  // recorded on passes that point (CUDACachingAllocator free: insert_events;
  // allocated_bytes drops at once, reserved does not). Of the frees the rate
  // limiter lets pend, the oldest is synchronized before the next
  // all-gather allocates and serves it; the others stay held.
  u.held_param_bytes = (k_fsdp1_inflight_all_gathers - 1.0) * u.unsharded_bytes;
  // The reduce-scatter of a unit's gradient overlaps the next unit's backward
  // on the compute stream, so that gradient's block is not reusable then.
  u.held_grad_bytes = u.grad_bytes;
  return u;
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

// The timeline's moments in step order; train_stage fills one Parts each.
struct MomentInfo {
  std::string_view name;
  Phase phase;
};
constexpr std::array<MomentInfo, k_max_moments> k_moments = {{
    {"inside a layer", Phase::forward},
    {"logits", Phase::forward},
    {"loss gradients", Phase::backward},
    {"top layer", Phase::backward},
    {"bottom layer", Phase::backward},
    {"update", Phase::optimizer_step},
}};

struct StageResult {
  Parts peak;
  Phase phase = Phase::forward;
  std::array<Parts, k_max_moments> moments{};  // in k_moments order
  double paged = 0;    // paged optimizer states (unified memory)
  double held = 0;     // reserved, not allocated: FSDP1 record_stream blocks
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
  // FSDP and gradient reduction span data and context parallel ranks
  // (torchtitan parallelize: dp_mesh_dim_names ("dp_shard_cp",)).
  const double dp = std::max(1, setup.dp()) * setup.cp;
  const int zero = setup.zero;
  const bool full = setup.mode == Mode::full;
  const bool first = stage == 0;
  const bool last = stage == pp - 1;
  const std::int64_t n_layers = model.num_layers + model.num_decoder_layers;
  const std::int64_t begin = stage_begin(n_layers, pp, stage);
  const std::int64_t end = stage_begin(n_layers, pp, stage + 1);
  const double d = dtype_bytes(setup.dtype);
  const bool mixed16 = setup.precision == Precision::mixed && d < 4.0;
  const bool amp = setup.precision == Precision::amp;
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
  // One stage holds every layer: the counts have them.
  const LayerSpan here = pp == 1
                             ? LayerSpan{counts.layers(), counts.largest_layer}
                             : span_params(model, begin, end);
  const double largest_layer = as_double(here.largest);
  double layer_sum = as_double(here.params);
  if (last) {
    // The model-wide parameters outside the layers and the vocabulary
    // matrices (the final norm, an lm_head bias) sit with the output on the
    // last stage (torchtitan's pipeline split keeps model.norm and
    // model.output on the last stage).
    layer_sum += as_double(counts.outside_layers);
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
    // amp (torch.autocast over fp32 parameters, HF Trainer bf16=True on a
    // model loaded in fp32): the parameters themselves are fp32.
    const double w = stage_params * (amp ? 4.0 : d) / (zero >= 3 ? dp : 1.0);
    (offload_params ? w_host : w_gpu) = w;
  } else {
    // Frozen base through the shared weight term (NF4 + double quantization
    // for QLoRA, embeddings and lm_head unquantized), sharded by ZeRO-3/FSDP
    // (FSDP+QLoRA shards the quantized storage, bnb_4bit_quant_storage).
    const WeightShare share{.layer_begin = begin,
                            .layer_end = end,
                            .embedding = first,
                            .lm_head = last};
    Resolved base = setup;
    if (amp) {
      base.dtype = Dtype::fp32;  // the frozen base as loaded, fp32
    }
    double w = as_double(weight_bytes(model, base, share));
    if (setup.prepare_kbit) {
      // prepare_model_for_kbit_training: the unquantized parameters
      // (embedding, lm_head, norms) become fp32.
      const double norms =
          (as_double(model.norms_per_layer) * as_double(end - begin) +
           (last ? 1.0 : 0.0)) *
          as_double(model.hidden_size);
      const double vocab = ((first ? embed : 0.0) + (last ? head : 0.0) +
                            (pp > 1 && last && head == 0 ? embed : 0.0)) /
                           t;
      w += (vocab + norms) * (4.0 - d);
    }
    w /= zero >= 3 ? dp : 1.0;
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
    train_w_bytes = setup.precision != Precision::pure ? 4.0 : d;
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
  const double g_elem =
      (bf16_optimizer || (full && amp)) ? 4.0 : (full ? d : train_w_bytes);
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
  // Context parallelism shards every sequence over cp ranks.
  dm.tokens = as_double(setup.batch) * as_double(setup.seq) / setup.cp;
  dm.cp = setup.cp;
  dm.seq = as_double(setup.seq);
  dm.h = as_double(model.hidden_size);
  dm.d = d;
  dm.t = t;
  dm.sp = setup.sequence_parallel && setup.tp > 1;
  double a_all = 0;    // all layers' saved tensors, no checkpointing
  double a_layer = 0;  // the largest layer's
  double op_all = 0;   // all layers' per-op SAC stash (--checkpointing op)
  double op_gap = 0;   // what one layer recomputes beyond its stash
  double op_layer = 0;
  double bwd_layer = 0;
  for (std::int64_t l = begin; l < end; ++l) {
    const bool moe = is_moe_layer(model, l);
    const double a = layer_activation_bytes(model, setup, dm, moe);
    const double o = op_saved_bytes(model, setup, dm, moe);
    a_all += a;
    op_all += o;
    a_layer = std::max(a_layer, a);
    op_layer = std::max(op_layer, o);
    op_gap = std::max(op_gap, a - o);
    bwd_layer =
        std::max(bwd_layer, layer_backward_bytes(model, setup, dm, moe));
    if (model.num_experts == 0 && model.num_decoder_layers == 0) {
      a_all = a * as_double(end - begin);  // dense: every layer alike
      op_all = o * as_double(end - begin);
      break;
    }
  }
  const double layers_here = as_double(end - begin);
  const double scores = layer_scores_bytes(model, setup, dm);
  // Full recomputation keeps each layer's input (2sbh, /t with SP) and
  // recomputes one layer at a time in backward; selective recomputation
  // keeps everything but the attention scores and recomputes one layer's
  // scores at a time (Korthikanti §4.1-4.2). HF's gradient_checkpointing
  // wraps each decoder layer in torch.utils.checkpoint: with
  // use_reentrant=True (transformers' default since 4.35) the layer runs
  // under no_grad and only its inputs are saved (CheckpointFunction
  // ctx.save_for_backward); with use_reentrant=False saved-tensor hooks keep
  // holders instead of tensors and the closure keeps the inputs. Either way
  // the backward of one layer re-runs its forward with grad and holds all of
  // its saved tensors, so both are `full` here.
  // prepare_model_for_kbit_training's fp32 embedding makes the residual
  // stream, and so every layer's input, fp32.
  const double stream = (setup.prepare_kbit || amp_compute(setup)) ? 4.0 : d;
  const double layer_input = dm.tokens * stream * dm.h / (dm.sp ? t : 1.0);
  // DeepSpeed activation checkpointing (runtime/activation_checkpointing/
  // checkpointing.py CheckpointFunction.forward): partition_activations keeps
  // 1/mp of each checkpointed input per tensor-parallel rank
  // (partition_activations: narrow(0, start, numel / mp_size).clone()), and
  // cpu_checkpointing moves those partitions to host RAM (documented as
  // offloading the partitioned activations); backward all-gathers one
  // layer's input again (get_full_inputs).
  const double ds_part = layer_input / (dm.sp ? 1.0 : t);
  // A checkpointed layer's forward re-runs on its kept input
  // (torch.utils.checkpoint CheckpointFunction.backward: detach_variable
  // shares the saved input's storage; non-reentrant checkpointing runs on the
  // inputs the closure holds), so the recompute adds the layer's saved
  // tensors less that input.
  const double recompute_layer = std::max(0.0, a_layer - layer_input);
  double stored = a_all;
  double recompute = 0;
  double per_layer = a_layer;  // what one layer keeps through backward
  // Under activation offload: what the top layer and the one below it hold
  // while backward runs the top one (both back on the GPU).
  double offload_window = -1;  // -1: 2 x per_layer
  double ckpt_host = 0;
  switch (setup.checkpointing) {
    case Checkpointing::none:
      break;
    case Checkpointing::selective:
      stored = a_all - scores * layers_here;
      recompute = scores;
      per_layer = a_layer - scores;
      break;
    case Checkpointing::every: {
      // torchtitan v0.1.0 _apply_ac_to_transformer_block (and torchtune's
      // copy, apply_selective_activation_checkpointing): a counter over the
      // blocks this rank builds wraps block k in full AC when k % N == 0, so
      // floor(L / N) layers keep only their input and the rest keep all.
      const double n_ckpt = std::floor(layers_here / setup.checkpoint_every);
      stored = a_all - n_ckpt * (a_layer - layer_input);
      // The top layer is recomputed only when it is one of them; lower ones
      // are reached after the layers above have freed at least a layer.
      const bool top = std::fmod(layers_here, setup.checkpoint_every) == 0;
      recompute = top ? recompute_layer : 0.0;
      per_layer = a_layer;
      // Offloaded, a checkpointed layer comes back as its input only; the
      // layer below (block L - 1) is checkpointed when N divides L - 1.
      const bool below =
          layers_here >= 2 &&
          std::fmod(layers_here - 1, setup.checkpoint_every) == 0;
      offload_window =
          (top ? layer_input : a_layer) +
          (layers_here >= 2 ? (below ? layer_input : a_layer) : 0.0);
      break;
    }
    case Checkpointing::op:
      stored = op_all;
      recompute = op_gap;
      per_layer = op_layer;
      break;
    case Checkpointing::full:
      stored = layer_input * layers_here;
      recompute = recompute_layer;
      per_layer = layer_input;
      break;
    case Checkpointing::ds_partition:
      // Backward all-gathers the layer's whole input (get_full_inputs) and
      // re-runs the forward on it: the input plus the rest of the layer.
      stored = ds_part * layers_here;
      recompute = layer_input + recompute_layer;
      per_layer = ds_part;
      break;
    case Checkpointing::ds_cpu:
      ckpt_host = ds_part * layers_here;
      stored = 0;
      recompute = layer_input + recompute_layer;
      per_layer = 0;
      break;
  }
  // Policies that run a layer's forward without keeping its intermediates
  // hold only that layer's working set while it runs.
  const bool recomputes_layers =
      setup.checkpointing == Checkpointing::every ||
      setup.checkpointing == Checkpointing::op ||
      setup.checkpointing == Checkpointing::full ||
      setup.checkpointing == Checkpointing::ds_partition ||
      setup.checkpointing == Checkpointing::ds_cpu;
  // 1F1B: stage s holds pp - s micro-batches in flight (the first stage pp),
  // fewer when the step has fewer micro-batches (--grad-accum > 1 given).
  double in_flight = as_double(pp - stage);
  if (setup.grad_accum > 1) {
    in_flight = std::min(in_flight, as_double(setup.grad_accum));
  }
  stored *= in_flight;
  ckpt_host *= in_flight;
  if (last) {
    // The final norm keeps its input (and upcast) for backward.
    stored += dm.tokens *
              (norm_saved(model, setup, needs_of(setup), stream) + d) * dm.h /
              (dm.sp ? t : 1.0);
  }
  double a_host = ckpt_host;
  if (setup.activation_offload) {
    // torchtune OffloadActivations: saved tensors go to pinned CPU memory in
    // forward and return one layer ahead of backward.
    a_host += stored;
    stored = std::min(stored,
                      offload_window >= 0 ? offload_window : 2.0 * per_layer);
  }

  // --- Logits and loss (last stage), per loss implementation (loss_bytes).
  // Chunked CE (torchtune CEWithChunkedOutputLoss) runs the output
  // projection and the loss in 8 chunks.
  double l_fwd = 0;
  double l_bwd = 0;
  if (last) {
    const double elems =
        dm.tokens * as_double(model.vocab_size) / t;  // vocab-parallel
    const LossBytes lb = loss_bytes(setup);
    l_fwd = elems * lb.fwd;
    l_bwd = elems * lb.bwd;
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
    if (setup.fsdp && setup.fsdp_version == 1) {
      const FsdpOneUnits u = fsdp1_units(largest, dp, d);
      if (full) {
        layer_w = u.unsharded_bytes;
      }
      // The root unit (embedding, final norm and lm_head under a
      // transformer-layer wrap: accelerate TRANSFORMER_BASED_WRAP, torchtune
      // 0.1's decoder-layer policy) stays unsharded from forward through
      // backward (torch/distributed/fsdp/_runtime_utils.py
      // _post_forward_reshard frees only `not state._is_root`). The unit
      // computing and the one prefetched (BACKWARD_PRE, the default
      // backward_prefetch) are unsharded next to it.
      const double root = ((first ? embed : 0.0) + (last ? head : 0.0) +
                           (pp > 1 && last && head == 0 ? embed : 0.0)) *
                          d / t;
      buffers += 2.0 * layer_w + root;
      if (full) {
        // The unit's unsharded flat gradient, the padded copy the
        // reduce-scatter takes when the unit does not divide by the world
        // size and its sharded output (_runtime_utils.py _post_backward_hook:
        // F.pad(unsharded_grad, [0, numel_to_pad]), new_sharded_grad).
        buffers += u.grad_bytes + u.grad_pad_copy_bytes + u.grad_shard_bytes;
      }
      // Blocks the caching allocator holds for a stream after their free:
      // all-gather outputs freed with record_stream on the compute stream
      // (_flat_param.py _free_unsharded_flat_param), and the gradient handed
      // to the post_backward stream (_post_backward_hook
      // _no_dispatch_record_stream(autograd_computed_grad)).
      out.held = u.held_param_bytes + (full ? u.held_grad_bytes : 0.0);
    } else {
      buffers += std::max(2.0 * layer_w, layer_w + vocab_unit) +
                 (full ? largest * d : 0.0);
    }
    if (setup.fsdp && offload_params) {
      // CPU offload keeps the shard on the CPU and copies it to the GPU for
      // each all-gather (FSDP1 pre_unshard: FlatParamHandle.flat_param_to or
      // _use_low_precision_shard; FSDP2 FSDPParam.all_gather_inputs:
      // sharded_param_data.to(device)), freed once gathered: one unit's
      // shard at a time.
      buffers += layer_w / dp;
    }
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
                           setup.precision != Precision::mixed && !setup.fsdp)
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
  // prepare_model_for_kbit_training leaves an fp32 lm_head: under autocast
  // each call casts its weight to 16 bits (not cached: autocast caches leaf
  // parameters that require grad only) and the matmul saves that copy for
  // the backward of its input.
  const double head_cast =
      (setup.prepare_kbit && last) ? (head > 0 ? head : embed) * d / t : 0.0;
  fwd.buffers += head_cast;

  // amp: autocast's 16-bit copies of the fp32 weights. Trained weights
  // (full) are cached for the whole autocast region (cached_cast: leaf
  // tensors that require grad; cleared when the region exits after the
  // loss) and saved by each matmul for backward; frozen ones (LoRA) are cast
  // at each call and saved by the matmul while its input needs a gradient.
  // Without checkpointing every layer's copies live from forward into
  // backward; with it the trained copies stay cached to the end of forward
  // and each recomputed layer makes its own. FSDP/ZeRO-3 gather the
  // parameters already in 16 bits (MixedPrecision param_dtype): no copies.
  double cast_all = 0;
  double cast_layer = 0;
  if (amp_compute(setup)) {
    // Norm weights are not cast (RMSNorm's weight * x is no autocast op).
    const double norms =
        (as_double(model.norms_per_layer) * as_double(end - begin) +
         (last ? 1.0 : 0.0)) *
        as_double(model.hidden_size);
    const double linear =
        layer_sum - norms + (last ? (head > 0 ? head : embed) : 0.0);
    cast_all = linear * d / t;
    cast_layer = largest_layer * d / t;
  }
  const bool ckpt = setup.checkpointing != Checkpointing::none &&
                    setup.checkpointing != Checkpointing::selective;
  fwd.buffers += (!ckpt || full) ? cast_all : 0.0;

  Parts fwd_layer = fwd;
  fwd_layer.buffers -= head_cast;
  if (ckpt && !full) {
    fwd_layer.buffers += cast_layer;
  }
  fwd_layer.logits = 0;
  fwd_layer.activations = stored + (recomputes_layers ? bwd_layer : 0.0);

  Parts bwd_start = fwd;
  bwd_start.activations = stored;
  bwd_start.logits = l_bwd;
  if (ckpt && full) {
    bwd_start.buffers -= cast_all;  // the autocast cache is cleared
  }
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
  bwd_top.buffers -= head_cast;
  if (ckpt) {
    bwd_top.buffers += cast_layer - (full ? cast_all : 0.0);
  }
  bwd_top.logits = 0;
  const bool tied = head == 0 && pp == 1;
  bwd_top.gradients = (setup.optimizer_in_bwd && !tied)
                          ? std::max(g_kept, g_step) + ddp_copy
                          : std::max(g_kept, head_grad) + ddp_copy;
  bwd_top.activations = stored + recompute + bwd_layer;

  Parts bwd_end = fwd;
  bwd_end.buffers -= head_cast + ((!ckpt || full) ? cast_all : 0.0);
  bwd_end.buffers += cast_layer;
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

  out.moments = {fwd_layer, fwd, bwd_start, bwd_top, bwd_end, step};
  std::size_t best = 0;
  for (std::size_t i = 1; i < k_max_moments; ++i) {
    if (out.moments[i].allocated() > out.moments[best].allocated()) {
      best = i;
    }
  }
  out.peak = out.moments[best];
  out.phase = k_moments[best].phase;
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
    case Checkpointing::every:
      return "every Nth layer's input + the other layers' saved tensors "
             "(torchtitan/torchtune layer SAC)";
    case Checkpointing::op:
      return "layers x (input + wq, wv, w1, w2 and attention outputs) "
             "(torchtitan per-op SAC) + one layer recomputed";
    case Checkpointing::ds_partition:
      return "layers x checkpointed inputs / tp (DeepSpeed "
             "partition_activations) + one layer recomputed";
    case Checkpointing::ds_cpu:
      return "checkpointed inputs in host RAM (DeepSpeed cpu_checkpointing) "
             "+ one layer gathered and recomputed";
    case Checkpointing::none:
      break;
  }
  return "layers x per-layer saved tensors (Korthikanti 2022 Table 2, "
         "RMSNorm/SwiGLU/GQA terms)";
}

std::string_view logits_formula(const Resolved& setup) {
  switch (setup.loss) {
    case Loss::chunked:
      return "tokens x vocab / tp x (saved chunk logits + one chunk's fp32 "
             "loss gradient) (chunked cross-entropy)";
    case Loss::upcast:
      return "tokens x vocab / tp x (16-bit logits + fp32 copy + "
             "log-softmax; backward 12 B) (loss upcasts, output freed)";
    case Loss::upcast_shift:
      return "tokens x vocab / tp x (16-bit logits + fp32 copy + shifted "
             "fp32 copy + log-softmax) (transformers 4.46-4.48)";
    case Loss::fp32_shift:
      return "tokens x vocab / tp x (fp32 logits + shifted fp32 copy + "
             "log-softmax) (transformers <= 4.45)";
    case Loss::full:
      break;
  }
  return "tokens x vocab / tp x (fp32 log-softmax + its gradient + logits "
         "gradient)";
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

namespace {

// The CPU RAM of the busiest node, from what one GPU of each pipeline stage
// needs (`per_gpu`). Stages are the outermost rank dimension (torchtitan's
// mesh ["pp", "dp_replicate", "dp_shard", "cp", "tp"], Megatron's rank order
// tp-cp-ep-dp-pp, DeepSpeed's PipeModelDataParallelTopology ['pipe', 'data',
// 'model']): stage s holds ranks [s B, (s + 1) B) with B = GPUs / pp, node n
// ranks [n G, (n + 1) G) with G its GPUs. Only nodes at a stage boundary mix
// stages; any other node holds G GPUs of one stage.
double node_host_bytes(const std::vector<double>& per_gpu, int gpus_per_node,
                       int nodes) {
  const auto pp = static_cast<std::int64_t>(per_gpu.size());
  const std::int64_t node = gpus_per_node;
  const std::int64_t per_stage = node * nodes / pp;
  auto node_sum = [&](std::int64_t n) {
    const std::int64_t lo = n * node;
    const std::int64_t hi = lo + node;
    double sum = 0;
    for (std::int64_t s = lo / per_stage; s <= (hi - 1) / per_stage; ++s) {
      const std::int64_t overlap =
          std::min(hi, (s + 1) * per_stage) - std::max(lo, s * per_stage);
      sum +=
          per_gpu[static_cast<std::size_t>(s)] * static_cast<double>(overlap);
    }
    return sum;
  };
  double most = 0;
  for (std::int64_t s = 0; s < pp; ++s) {
    const std::int64_t first = s * per_stage / node;
    const std::int64_t last = ((s + 1) * per_stage - 1) / node;
    most = std::max({most, node_sum(first), node_sum(last)});
    if (last - first >= 2) {
      most = std::max(most, per_gpu[static_cast<std::size_t>(s)] *
                                static_cast<double>(node));
    }
  }
  return most;
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
  int worst_stage = 0;
  double worst_total = -1;
  // CPU RAM one GPU of each stage needs: offloaded bytes plus the paged
  // states that do not fit next to its allocations (below).
  std::vector<double> stage_host;  // pp > 1 only (no allocation otherwise)
  for (int s = 0; s < setup.pp; ++s) {
    const StageResult r = train_stage(model, setup, counts, s);
    // A stage's device total, as total_bytes counts it (paged states
    // before any spill to the host).
    const double device = r.peak.allocated() * (1.0 + reserve) + r.held +
                          static_cast<double>(overhead);
    const double total = device + r.paged;
    const double room =
        std::max(0.0, static_cast<double>(budget.usable_bytes) - device);
    if (setup.pp > 1) {
      stage_host.push_back(r.host + std::max(0.0, r.paged - room));
    }
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
      worst_stage = s;
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

  const Bytes held = saturated_bytes(worst.held);
  const Bytes fragmentation =
      saturated_bytes(static_cast<double>(allocated) * reserve) + held;

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

  // The step's timeline, each moment rounded per part as the components are,
  // so the peak moment's device bytes equal total_bytes().
  for (std::size_t i = 0; i < k_max_moments; ++i) {
    const Parts& m = worst.moments[i];
    const Bytes moment_allocated =
        saturated_bytes(m.weights) + saturated_bytes(m.activations) +
        saturated_bytes(m.logits) + saturated_bytes(m.gradients) +
        saturated_bytes(m.optimizer) + saturated_bytes(m.buffers);
    const Bytes moment_device =
        moment_allocated +
        saturated_bytes(static_cast<double>(moment_allocated) * reserve) +
        held + overhead + paged_device;
    budget.moments[i] = Moment{k_moments[i].name, k_moments[i].phase,
                               moment_allocated, moment_device};
  }
  budget.moment_count = k_max_moments;

  budget.add("weights", weights, weights_formula(setup));
  budget.add("activations", activations, activations_formula(setup));
  budget.add("logits", logits, logits_formula(setup));
  budget.add("gradients", gradients,
             setup.optimizer_in_bwd
                 ? "one parameter's gradient (optimizer step fused into "
                   "backward)"
                 : "trainable params x grad bytes / (dp at ZeRO-2+)");
  budget.add("optimizer", optimizer_alloc + paged_device,
             optimizer_formula(setup));
  if (buffers > 0) {
    std::string_view text =
        setup.zero >= 3 ? "gathered layer + prefetched layer + unsharded "
                          "layer grads (ZeRO-3/FSDP)"
                        : "communication buckets / dequantized NF4 weight";
    if (amp_compute(setup)) {
      text = "autocast 16-bit copies of the fp32 weights (amp) + buckets";
    } else if (setup.prepare_kbit) {
      text =
          "dequantized NF4 weight + 16-bit cast of the fp32 lm_head "
          "(prepare_model_for_kbit_training)";
    }
    budget.add("buffers", buffers, text);
  }
  budget.add("overhead", overhead, "CUDA context + cuBLAS workspace + NCCL");
  budget.add("fragmentation", fragmentation,
             held > 0 ? "allocated x caching-allocator reserve + FSDP1 blocks "
                        "held by record_stream (an all-gather output, a unit's "
                        "gradient)"
                      : "allocated x caching-allocator reserve");

  const double worst_host = worst.host + static_cast<double>(paged_host);
  if (setup.pp > 1) {
    stage_host[static_cast<std::size_t>(worst_stage)] = worst_host;
    budget.host_bytes =
        saturated_bytes(node_host_bytes(stage_host, setup.gpus, setup.nodes));
  } else {
    budget.host_bytes = saturated_bytes(worst_host * setup.gpus);
  }
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
