// Activations of training: what one decoder layer saves for backward
// (Korthikanti et al. 2022, re-derived per saved tensor), what each
// checkpointing policy keeps and recomputes, the micro-batches a pipeline
// stage holds, the final norm's input and activation offload.

#include "memory/internal.hpp"

#include <algorithm>
#include <cmath>

namespace oomplan::memory_terms {

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
  return setup.precision == Precision::amp &&
         (setup.zero < 3 || setup.fsdp_autocast) &&
         dtype_bytes(setup.dtype) < 4;
}

Needs qlora_mixed_needs(const Resolved& setup) {
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

Needs qlora_bnb_pure_needs(const Resolved& setup) {
  // bitsandbytes' MatMul4Bit saves its input whenever it needs a gradient
  // (qlora_mixed_needs), in pure precision too (LitGPT bf16-true with
  // BitsandbytesPrecision, LLaMA-Factory pure_bf16): every frozen
  // projection keeps the tensor it reads, shared by the projections that
  // read the same one. With LoRA dropout each adapter adds its own dropped
  // copy (peft/tuners/lora/layer.py Linear.forward).
  const unsigned t = setup.lora_targets;
  const bool drop = setup.lora_dropout > 0;
  return {.norm_weight = false,
          .qkv_in =
              1.0 + (drop ? targeted(t, k_lora_q | k_lora_k | k_lora_v) : 0.0),
          .o_in = true,
          .up_in = 1.0 + (drop ? targeted(t, k_lora_gate | k_lora_up) : 0.0),
          .down_in = true,
          .down_copies = drop && (t & k_lora_down) != 0 ? 1.0 : 0.0};
}

Needs adapter_needs(const Resolved& setup) {
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
  // torchtune (pure): adapters in the dtype read the shared input; with
  // LoRA dropout each reads its own dropped copy (lora_dropout_needs).
  const bool drop = setup.lora_dropout > 0;
  return {.norm_weight = false,
          .qkv_in = drop ? qkv : (qkv > 0 ? 1.0 : 0.0),
          .o_in = (t & k_lora_o) != 0,
          .up_in = drop ? up : (up > 0 ? 1.0 : 0.0),
          .down_in = (t & k_lora_down) != 0};
}

Needs lora_dropout_needs(Needs needs, const Resolved& setup) {
  // lora_dropout > 0 gives every adapted projection its own nn.Dropout
  // (peft/tuners/lora/layer.py update_layer: nn.Dropout(p=lora_dropout),
  // nn.Identity at 0; Linear.forward: lora_B(lora_A(dropout(x)))). lora_A
  // saves the dropped copy in place of the input it shares with the base
  // (one copy per adapter, adapter_needs), and native_dropout keeps a bool
  // mask, 1 B per element of each adapted input.
  if (setup.lora_dropout <= 0) {
    return needs;
  }
  const unsigned t = setup.lora_targets;
  needs.qkv_masks = targeted(t, k_lora_q | k_lora_k | k_lora_v);
  needs.o_masks = targeted(t, k_lora_o);
  needs.up_masks = targeted(t, k_lora_gate | k_lora_up);
  needs.down_masks = targeted(t, k_lora_down);
  return needs;
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
  if (setup.mode == Mode::qlora && setup.nf4_backend == Nf4Backend::bnb) {
    if (setup.precision == Precision::mixed) {
      return lora_dropout_needs(qlora_mixed_needs(setup), setup);
    }
    if (setup.precision == Precision::pure) {
      return lora_dropout_needs(qlora_bnb_pure_needs(setup), setup);
    }
  }
  return lora_dropout_needs(adapter_needs(setup), setup);
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

double replicated_saved_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm) {
  // Per token, replicated under TP (norms, their outputs, dropout masks).
  const Needs needs = needs_of(setup);
  const double d = dm.d;
  const double h = dm.h;
  const double norms = as_double(model.norms_per_layer);
  // Under amp the residual stream, the norms and their outputs are fp32.
  const double sd = amp_compute(setup) ? 4.0 : d;
  double rep = norms * norm_saved(model, setup, needs, sd) * h;
  rep += needs.qkv_in * d * h;
  // A parallel block's MLP reads the attention's input, saved once, unless
  // its adapters drop their own copies.
  rep +=
      model.parallel_block && needs.up_masks == 0 ? 0.0 : needs.up_in * d * h;
  rep += (needs.qkv_masks + needs.up_masks) * h;
  rep += has_dropout(model) ? 2.0 * h : 0.0;  // residual dropout masks, 1 B
  return rep;
}

double attention_saved_bytes(const Model& model, const Resolved& setup,
                             const Dims& dm) {
  const Needs needs = needs_of(setup);
  const double d = dm.d;
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
  // Per token, sharded by TP: q, k, v for the attention kernel, its output
  // (flash/sdpa keep it for their backward), the o_proj input copy
  // (transpose().contiguous()).
  double shard = d * (q_dim + k_dim + v_dim) + latent;
  if (setup.attn != Attn::eager) {
    shard += d * o_dim;
  }
  shard += needs.o_in ? d * o_dim : 0.0;
  shard += needs.o_masks * o_dim;
  return shard;
}

// --compile is modelled by its mechanism, not by a fitted factor: fused
// RMSNorm (norm_saved) and fused SiLU-times-up (here) save 8 sbh + 2 s.b.I
// bytes per layer less, which reproduces torchtune's Llama 3.2 3B table
// (60.0 -> 51.0 GiB with compile) to within 4 %.
//
// MLP. SwiGLU (LlamaMLP: down(act(gate(x)) * up(x))) saves gate(x) for
// SiLU's backward, act(gate(x)) and up(x) for the product's, and the
// product for down_proj (4 x I). torch.compile fuses SiLU and the product
// and recomputes act(gate(x)) in backward (3 x I). A plain GELU MLP saves
// the GELU input and output (Korthikanti: 8sbh + 8sbh at I = 4h).
double mlp_saved_bytes(const Model& model, const Resolved& setup,
                       const Dims& dm, double inter) {
  const Needs needs = needs_of(setup);
  const double d = dm.d;
  const double md = needs.mlp_bytes > 0 ? needs.mlp_bytes : d;
  const double down_extra = needs.down_copies * d + needs.down_masks;
  const bool down_weight_trains = needs.down_in;
  if (model.mlp == MlpKind::gated) {
    const double act = setup.compile ? 0.0 : md * inter;
    return 2.0 * md * inter + act + (down_weight_trains ? d * inter : 0.0) +
           down_extra * inter;
  }
  return md * inter + (down_weight_trains ? d * inter : 0.0) +
         down_extra * inter;
}

double moe_saved_bytes(const Model& model, const Resolved& setup,
                       const Dims& dm) {
  // Routed experts see top-k copies of each token: the gathered input, each
  // expert's MLP and its output (kept to be scaled by the routing weight);
  // the router keeps fp32 logits and softmax (MixtralSparseMoeBlock,
  // Qwen3MoeSparseMoeBlock).
  const double k = as_double(model.experts_per_tok);
  const double experts = as_double(model.num_experts);
  double shard = 8.0 * experts;
  shard += k * (2.0 * dm.d * dm.h +
                mlp_saved_bytes(model, setup, dm,
                                as_double(model.moe_intermediate_size)));
  if (model.num_shared_experts > 0) {
    const double inter = model.shared_expert_intermediate_size > 0
                             ? as_double(model.shared_expert_intermediate_size)
                             : as_double(model.moe_intermediate_size);
    shard += as_double(model.num_shared_experts) *
             mlp_saved_bytes(model, setup, dm, inter);
  }
  return shard;
}

// Bytes one decoder layer keeps for backward on one GPU (no checkpointing):
// Korthikanti et al. 2022 Table 2, sbh(34 + 5as/h) for GPT, re-derived per
// saved tensor so that it adapts to RMSNorm, GQA, SwiGLU, MoE and frozen
// LoRA bases. With GPT-2 dims (LayerNorm, GELU MLP of 4h, dropout, eager)
// the terms add up to exactly 34 sbh + 5 as^2 b; tensor parallelism shards
// all but the norms and dropout masks (10 sbh), sequence parallelism those
// too (Table 2, rows 2-3). The per-token terms are whole bytes, so their sum
// is exact in any order.
double layer_activation_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm, bool moe) {
  const double rep = replicated_saved_bytes(model, setup, dm);
  double shard = attention_saved_bytes(model, setup, dm);
  shard += moe ? moe_saved_bytes(model, setup, dm)
               : mlp_saved_bytes(model, setup, dm,
                                 as_double(model.intermediate_size));
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
// per routed copy (the router gate is force-recomputed). torchao's float8
// linears change nothing here: Float8Linear's forward calls torch.mm on
// Float8TrainingTensor arguments (torchao/float8/float8_linear.py
// matmul_with_hp_or_float8_args), and SAC's dispatch mode sees that aten.mm
// before the subclass turns it into _scaled_mm, so the same alternate
// outputs are saved (torchtitan benchmarks/llama3_h100_202412_torchtitan.md:
// 77.0 GiB compiled, 76.8 GiB compiled with float8).
double op_saved_bytes(const Model& model, const Resolved& setup, const Dims& dm,
                      bool moe) {
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
  // A plain MLP (fc1, GELU, fc2) has one matmul fewer than the gated one:
  // its fc2 is the block's sixth matmul, recomputed.
  const bool gated = model.mlp == MlpKind::gated;
  const double rep_div = dm.sp ? dm.t : 1.0;
  // The checkpointed block input, in the residual stream's dtype (fp32
  // under amp or prepare_model_for_kbit_training), as full checkpointing
  // keeps it.
  double rep = residual_stream_bytes(setup) * h / rep_div;
  // w2's output (under TP the rowwise partial sum, full size).
  rep += (gated ? 1.0 : 0.0) * d * h;
  if (dm.t > 1 && dm.sp) {
    rep += 2.0 * d * h / dm.t;  // reduce-scatter outputs
  }
  // wq, wv, the attention output and its logsumexp (fp32, one per head).
  double shard = d * (q_dim + kv_dim + o_dim) + 4.0 * heads;
  // w1 (w3 recomputed); a plain MLP's fc1.
  auto mlp = [&](double inter) { return d * inter; };
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

Dims train_dims(const Model& model, const Resolved& setup) {
  Dims dm;
  // Context parallelism shards every sequence over cp ranks. Preference
  // objectives run chosen and rejected as 2 x batch rows in one forward
  // (TRL dpo_trainer.py concatenated_forward; Resolved::rows_per_example).
  dm.tokens = as_double(setup.batch * setup.rows_per_example()) *
              as_double(setup.seq) / setup.cp;
  dm.cp = setup.cp;
  dm.seq = as_double(setup.seq);
  dm.h = as_double(model.hidden_size);
  dm.d = dtype_bytes(setup.dtype);
  dm.t = setup.tp;
  dm.sp = setup.sequence_parallel && setup.tp > 1;
  return dm;
}

// Every layer of the stage through the per-layer terms above; dense models
// (all layers alike) take one.
LayerSweep layer_sweep(const Model& model, const Resolved& setup,
                       const Dims& dm, std::int64_t begin, std::int64_t end) {
  LayerSweep s;
  for (std::int64_t l = begin; l < end; ++l) {
    const bool moe = is_moe_layer(model, l);
    const double a = layer_activation_bytes(model, setup, dm, moe);
    const double o = op_saved_bytes(model, setup, dm, moe);
    s.all += a;
    s.op_all += o;
    s.largest = std::max(s.largest, a);
    s.op_largest = std::max(s.op_largest, o);
    s.op_gap = std::max(s.op_gap, a - o);
    s.backward =
        std::max(s.backward, layer_backward_bytes(model, setup, dm, moe));
    if (model.num_experts == 0 && model.num_decoder_layers == 0) {
      s.all = a * as_double(end - begin);  // dense: every layer alike
      s.op_all = o * as_double(end - begin);
      break;
    }
  }
  return s;
}

double residual_stream_bytes(const Resolved& setup) {
  // prepare_model_for_kbit_training's fp32 embedding makes the residual
  // stream, and so every layer's input, fp32; so does amp.
  return (setup.prepare_kbit || amp_compute(setup))
             ? 4.0
             : static_cast<double>(dtype_bytes(setup.dtype));
}

double checkpointed_input_bytes(const Resolved& setup, const Dims& dm) {
  // A checkpointed layer keeps its input: tokens x hidden (/t with SP).
  return dm.tokens * residual_stream_bytes(setup) * dm.h / (dm.sp ? dm.t : 1.0);
}

double deepspeed_partitioned_input_bytes(const Resolved& setup,
                                         const Dims& dm) {
  // DeepSpeed activation checkpointing (runtime/activation_checkpointing/
  // checkpointing.py CheckpointFunction.forward): partition_activations keeps
  // 1/mp of each checkpointed input per tensor-parallel rank
  // (partition_activations: narrow(0, start, numel / mp_size).clone()), and
  // cpu_checkpointing moves those partitions to host RAM (documented as
  // offloading the partitioned activations); backward all-gathers one
  // layer's input again (get_full_inputs).
  return checkpointed_input_bytes(setup, dm) / (dm.sp ? 1.0 : dm.t);
}

Checkpointed every_n_checkpointed(const Resolved& setup, const LayerSweep& s,
                                  double layer_input, double layers) {
  // torchtitan v0.1.0 _apply_ac_to_transformer_block (and torchtune's copy,
  // apply_selective_activation_checkpointing): a counter over the blocks this
  // rank builds wraps block k in full AC when k % N == 0, so floor(L / N)
  // layers keep only their input and the rest keep all.
  const double every = setup.checkpoint_every;
  Checkpointed c;
  const double n_ckpt = std::floor(layers / every);
  c.stored = s.all - n_ckpt * (s.largest - layer_input);
  // The top layer is recomputed only when it is one of them; lower ones are
  // reached after the layers above have freed at least a layer.
  const bool top = std::fmod(layers, every) == 0;
  c.recompute = top ? std::max(0.0, s.largest - layer_input) : 0.0;
  c.per_layer = s.largest;
  // Offloaded, a checkpointed layer comes back as its input only; the layer
  // below (block L - 1) is checkpointed when N divides L - 1.
  const bool below = layers >= 2 && std::fmod(layers - 1, every) == 0;
  c.offload_window = (top ? layer_input : s.largest) +
                     (layers >= 2 ? (below ? layer_input : s.largest) : 0.0);
  return c;
}

// Full recomputation keeps each layer's input (2sbh, /t with SP) and
// recomputes one layer at a time in backward; selective recomputation keeps
// everything but the attention scores and recomputes one layer's scores at a
// time (Korthikanti §4.1-4.2). HF's gradient_checkpointing wraps each decoder
// layer in torch.utils.checkpoint: with use_reentrant=True (transformers'
// default since 4.35) the layer runs under no_grad and only its inputs are
// saved (CheckpointFunction ctx.save_for_backward); with use_reentrant=False
// saved-tensor hooks keep holders instead of tensors and the closure keeps
// the inputs. Either way the backward of one layer re-runs its forward with
// grad and holds all of its saved tensors, so both are `full` here.
Checkpointed checkpointed_activations(const Resolved& setup,
                                      const LayerSweep& s, double scores,
                                      const Dims& dm, double layers) {
  const double layer_input = checkpointed_input_bytes(setup, dm);
  const double ds_part = deepspeed_partitioned_input_bytes(setup, dm);
  // A checkpointed layer's forward re-runs on its kept input
  // (torch.utils.checkpoint CheckpointFunction.backward: detach_variable
  // shares the saved input's storage; non-reentrant checkpointing runs on the
  // inputs the closure holds), so the recompute adds the layer's saved
  // tensors less that input.
  const double recompute_layer = std::max(0.0, s.largest - layer_input);
  switch (setup.checkpointing) {
    case Checkpointing::none:
      break;
    case Checkpointing::selective:
      return {.stored = s.all - scores * layers,
              .recompute = scores,
              .per_layer = s.largest - scores};
    case Checkpointing::every:
      return every_n_checkpointed(setup, s, layer_input, layers);
    case Checkpointing::op:
      return {
          .stored = s.op_all, .recompute = s.op_gap, .per_layer = s.op_largest};
    case Checkpointing::full:
      return {.stored = layer_input * layers,
              .recompute = recompute_layer,
              .per_layer = layer_input};
    case Checkpointing::ds_partition:
      // Backward all-gathers the layer's whole input (get_full_inputs) and
      // re-runs the forward on it: the input plus the rest of the layer.
      return {.stored = ds_part * layers,
              .recompute = layer_input + recompute_layer,
              .per_layer = ds_part};
    case Checkpointing::ds_cpu:
      return {.stored = 0,
              .recompute = layer_input + recompute_layer,
              .per_layer = 0,
              .host = ds_part * layers};
  }
  return {.stored = s.all, .recompute = 0, .per_layer = s.largest};
}

bool recomputes_layers(const Resolved& setup) {
  // Policies that run a layer's forward without keeping its intermediates
  // hold only that layer's working set while it runs.
  return setup.checkpointing == Checkpointing::every ||
         setup.checkpointing == Checkpointing::op ||
         setup.checkpointing == Checkpointing::full ||
         setup.checkpointing == Checkpointing::ds_partition ||
         setup.checkpointing == Checkpointing::ds_cpu;
}

double final_norm_saved_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm) {
  // The final norm keeps its input (and upcast) for backward.
  const double stream = residual_stream_bytes(setup);
  return dm.tokens *
         (norm_saved(model, setup, needs_of(setup), stream) + dm.d) * dm.h /
         (dm.sp ? dm.t : 1.0);
}

// What one stage keeps from forward into backward: the policy's tensors for
// every micro-batch in flight (1F1B), the final norm's input, activation
// offload.
StageActivations stage_activations(const Model& model, const Resolved& setup,
                                   const TrainLayout& at) {
  const Dims dm = train_dims(model, setup);
  const LayerSweep sweep = layer_sweep(model, setup, dm, at.begin, at.end);
  const double scores = layer_scores_bytes(model, setup, dm);
  const Checkpointed c =
      checkpointed_activations(setup, sweep, scores, dm, at.layers());
  const double in_flight = micro_batches_in_flight(setup, at.stage);
  StageActivations a;
  a.stored = c.stored * in_flight;
  a.host = c.host * in_flight;
  if (at.last) {
    a.stored += final_norm_saved_bytes(model, setup, dm);
  }
  if (setup.activation_offload) {
    // torchtune OffloadActivations: saved tensors go to pinned CPU memory in
    // forward and return one layer ahead of backward; the top layer and the
    // one below it are back while backward runs the top one.
    a.host += a.stored;
    a.stored = std::min(
        a.stored, c.offload_window >= 0 ? c.offload_window : 2.0 * c.per_layer);
  }
  a.recompute = c.recompute;
  a.largest_layer = sweep.largest;
  a.backward_layer = sweep.backward;
  return a;
}

double training_kv_cache_bytes(const Model& model, const Resolved& setup,
                               const TrainLayout& at) {
  // With use_cache on, each decoder layer returns its keys and values after
  // RoPE and before repeat_kv, and the model collects them for the whole
  // forward (transformers modeling_llama.py: present key/values, later
  // DynamicCache). Under FSDP's or llama-recipes' checkpoint_wrapper they are
  // outputs of the checkpointed layer, so they outlive its dropped saves
  // until the output is released after the loss.
  if (!setup.use_cache) {
    return 0;
  }
  const Dims dm = train_dims(model, setup);
  return 2.0 * as_double(model.num_kv_heads * model.head_dim) * dm.tokens *
         dm.d * at.layers() / at.t;
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

}  // namespace oomplan::memory_terms
