// Weight bytes on one GPU for every quantization format: which layers and
// vocabulary rows a GPU holds, how tensor parallelism splits them, the bytes
// per parameter of each format with its scales, and what vLLM adds when it
// loads (vocabulary padding, MXFP4 padding, RoPE cache, MLA's dequantized
// kv_b_proj). Shared by inference and training (a frozen LoRA base).

#include "memory/internal.hpp"

#include <algorithm>

namespace oomplan::memory_terms {

std::int64_t moe_layers_before(const Model& m, std::int64_t end) {
  if (m.num_experts == 0 || end <= m.first_k_dense) {
    return 0;
  }
  const std::int64_t every = std::max(1, m.moe_every);
  // Layer i is MoE iff i >= first_k_dense and (i + 1) % every == 0, i.e. the
  // multiples of `every` in [first_k_dense + 1, end].
  return end / every - m.first_k_dense / every;
}

double linear_bytes(Quant quant, double params, double rows, double dtype,
                    bool block_fp8) {
  switch (quant) {
    case Quant::automatic:  // never in a Resolved
    case Quant::none:
      return params * dtype;
    case Quant::int8:
      // bitsandbytes Int8Params: int8 CB plus one fp32 SCB absmax per output
      // row (bitsandbytes/nn/modules.py Int8Params); vLLM W8A16 likewise.
      return params + 4.0 * rows;
    case Quant::fp8:
      if (block_fp8) {
        // DeepSeek-V3 checkpoint: e4m3 weights + one fp32
        // weight_scale_inv per 128x128 block (README_WEIGHTS.md).
        return params * (1.0 + 4.0 / (128.0 * 128.0));
      }
      // vLLM Fp8LinearMethod: e4m3 weights, per-tensor (dynamic) or
      // per-channel (compressed-tensors) fp32 scales: one per output row
      // bounds both.
      return params + 4.0 * rows;
    case Quant::int4:
    case Quant::gptq:
    case Quant::awq:
      // GPTQ/AWQ group 128: packed int4 qweight (0.5 B), fp16 scales (2 B
      // per group) and int4 packed qzeros (0.5 B per group)
      // (vllm/model_executor/layers/quantization/gptq.py create_weights).
      return params * (0.5 + 2.5 / 128.0);
    case Quant::nf4:
      // bitsandbytes NF4 with double quantization (QLoRA §3, Dettmers et al.
      // 2023): 4-bit codes, an 8-bit absmax per 64-value block, and fp32
      // second-level constants per 256 blocks.
      return params * (0.5 + 1.0 / 64.0 + 4.0 / (64.0 * 256.0));
    case Quant::nf4_nodq:
      // bitsandbytes NF4 without double quantization: fp32 absmax per 64.
      return params * (0.5 + 4.0 / 64.0);
    case Quant::mxfp4:
      // OCP MX FP4: 4-bit E2M1 codes + one E8M0 scale byte per 32 values
      // (4.25 bit; gpt-oss checkpoint, catalog_facts.md §1d).
      return params * (0.5 + 1.0 / 32.0);
  }
  return params * dtype;
}

bool block_scaled_fp8(const Model& m, Quant quant) {
  // DeepSeek's own FP8 checkpoint is block-scaled, whether fp8 came from
  // --quant auto or --quant fp8; fp8 on any other model is vLLM's online
  // per-tensor quantization.
  return quant == Quant::fp8 && m.checkpoint_quant == Quant::fp8 &&
         m.model_type.rfind("deepseek", 0) == 0;
}

// The layers a GPU holds, as shares of all, dense and MoE layers (pipeline
// stages and device_map splits hold whole layers).
LayerShare layer_share(const Model& m, const WeightShare& share) {
  const std::int64_t layers = std::max<std::int64_t>(1, m.num_layers);
  const std::int64_t begin =
      std::clamp<std::int64_t>(share.layer_begin, 0, layers);
  const std::int64_t end =
      std::clamp<std::int64_t>(share.layer_end, begin, layers);
  LayerShare ls;
  ls.n = static_cast<double>(end - begin);
  ls.frac = ls.n / static_cast<double>(layers);
  const std::int64_t moe_total = moe_layers_before(m, layers);
  ls.moe_here = moe_layers_before(m, end) - moe_layers_before(m, begin);
  const std::int64_t dense_total = layers - moe_total;
  const std::int64_t dense_here = (end - begin) - ls.moe_here;
  ls.dense_frac = dense_total > 0 ? static_cast<double>(dense_here) /
                                        static_cast<double>(dense_total)
                                  : 0.0;
  ls.moe_frac = moe_total > 0 ? static_cast<double>(ls.moe_here) /
                                    static_cast<double>(moe_total)
                              : 0.0;
  return ls;
}

TpParams tp_linear_params(const Model& m, const ParamCounts& c, double tp,
                          const LayerShare& ls) {
  // Tensor parallelism (Megatron column/row split, vLLM linear.py): q and o
  // by heads, MLP and experts by columns; k and v keep max(1, kv/tp) heads
  // per GPU, so they are replicated when kv_heads < tp.
  const double kv_share =
      m.num_kv_heads > 0 && m.kv_lora_rank == 0
          ? static_cast<double>(std::max<std::int64_t>(
                1, m.num_kv_heads / static_cast<std::int64_t>(tp))) /
                static_cast<double>(m.num_kv_heads)
          : 1.0 / tp;
  TpParams p;
  p.attention = static_cast<double>(c.attention - c.kv_proj) * ls.frac / tp +
                static_cast<double>(c.kv_proj) * ls.frac * kv_share;
  p.mlp = static_cast<double>(c.mlp) * ls.dense_frac / tp;
  p.experts = static_cast<double>(c.experts) * ls.moe_frac / tp;
  p.shared = static_cast<double>(c.shared_experts) * ls.moe_frac / tp;
  // The router is a small replicated linear layer that stays in dtype.
  p.router = static_cast<double>(c.router) * ls.moe_frac;
  return p;
}

// vLLM's MXFP4 MoE weight shapes per GPU (quantization/mxfp4.py
// get_mxfp4_backend + Mxfp4MoEMethod.create_weights): Hopper runs the Triton
// kernels, which pad the expert columns to a multiple of 64; Blackwell
// (SM100) the FlashInfer kernels, which pad columns and hidden to 256; older
// cards (and SM120) Marlin, 128 and 256 (its n % 256, k % 128 rule).
Mxfp4Padding mxfp4_padding(std::int64_t part, std::int64_t hidden, int cc) {
  auto up = [](std::int64_t v, std::int64_t to) {
    return ceil_div(v, to) * to;
  };
  if (cc == 0 || (cc >= 90 && cc < 100)) {
    return {up(part, 64), hidden, Mxfp4Kernel::triton};
  }
  if (cc >= 100 && cc < 110) {
    return {up(part, 256), up(hidden, 256), Mxfp4Kernel::flashinfer};
  }
  return {up(part, 128), up(hidden, 256), Mxfp4Kernel::marlin};
}

// The Triton backend's process_weights_after_loading swizzles the expert
// scales into a new tensor and, before vLLM #46549 ("Free unused MXFP4
// scales in OAI Triton Backend", 2026-06, taken as 0.21), leaves the
// checkpoint's w13/w2 weight scales allocated: one more E8M0 byte per 32
// expert weights. gpt-oss-120b at TP1 on an H100, vLLM 0.14.1: "Model
// loading took 64.38 GiB" (vllm#33155) against 60.87 GiB without them.
double mxfp4_retained_scales(const Model& m, const Resolved& setup,
                             double experts, int cc) {
  if (setup.engine != Engine::vllm ||
      setup.vllm_release >= vllm_release(0, 21) ||
      m.moe_intermediate_size < setup.tp) {
    return 0;
  }
  const Mxfp4Padding pad =
      mxfp4_padding(m.moe_intermediate_size / setup.tp, m.hidden_size, cc);
  return pad.kernel == Mxfp4Kernel::triton ? experts / 32.0 : 0.0;
}

double mxfp4_expert_params(const Model& m, const Resolved& setup,
                           double experts, int cc) {
  if (setup.engine != Engine::vllm || m.moe_intermediate_size <= 0) {
    return experts;
  }
  const std::int64_t part = m.moe_intermediate_size / setup.tp;
  if (part <= 0) {
    return experts;
  }
  const Mxfp4Padding pad = mxfp4_padding(part, m.hidden_size, cc);
  // gate_up [E, 2 x I_pad, H_pad / 2] and down [E, H_pad, I_pad / 2].
  return experts * (static_cast<double>(pad.inter * pad.hidden) /
                    static_cast<double>(part * m.hidden_size));
}

double mxfp4_bias_bytes(const Model& m, const Resolved& setup,
                        std::int64_t moe_here, int cc) {
  if (setup.engine != Engine::vllm || m.moe_intermediate_size <= 0 ||
      !m.mlp_bias) {
    return 0;
  }
  const double dtype = dtype_bytes(setup.dtype);
  const std::int64_t part = m.moe_intermediate_size / setup.tp;
  const Mxfp4Padding pad = mxfp4_padding(part, m.hidden_size, cc);
  // w13_bias (2 x padded columns, split by tp) and w2_bias (padded hidden, on
  // every GPU) per expert, in place of the checkpoint's bf16 ones in c.small;
  // fp32 after the Triton and FlashInfer kernels'
  // process_weights_after_loading.
  const double bias_bytes = pad.fp32_bias() ? 4.0 : dtype;
  const double per_layer_bf16 =
      static_cast<double>(m.num_experts) *
      static_cast<double>(2 * m.moe_intermediate_size + m.hidden_size);
  const double per_layer_padded =
      static_cast<double>(m.num_experts) *
      static_cast<double>(2 * pad.inter + pad.hidden);
  return static_cast<double>(moe_here) *
         (bias_bytes * per_layer_padded - dtype * per_layer_bf16);
}

double quantized_linear_bytes(const Model& m, const Resolved& setup,
                              const WeightShare& share, const LayerShare& ls,
                              const TpParams& p) {
  const double dtype = dtype_bytes(setup.dtype);
  const double h =
      static_cast<double>(std::max<std::int64_t>(1, m.hidden_size));
  if (setup.quant == Quant::mxfp4 && m.num_experts > 0) {
    // gpt-oss: only the routed experts are MXFP4; attention and everything
    // else stay 16-bit (reproduces the checkpoint bytes exactly).
    const int cc = share.compute_capability;
    const double experts = mxfp4_expert_params(m, setup, p.experts, cc);
    double bytes = 0;
    bytes += mxfp4_bias_bytes(m, setup, ls.moe_here, cc);
    bytes +=
        share.unread ? mxfp4_retained_scales(m, setup, p.experts, cc) : 0.0;
    bytes += (p.attention + p.mlp + p.shared) * dtype +
             linear_bytes(setup.quant, experts, experts / h, dtype, false);
    return bytes;
  }
  const double linear = p.attention + p.mlp + p.experts + p.shared;
  // The modules the checkpoint's quantization_config leaves in dtype
  // (Model::unquantized_params), as a share of every linear weight, on each
  // GPU alike.
  double kept = 0;
  if (m.unquantized_params > 0 && setup.quant == m.checkpoint_quant) {
    const ParamCounts c = count_params(m);
    const double all =
        static_cast<double>(c.attention + c.mlp + c.experts + c.shared_experts);
    kept =
        all > 0
            ? linear *
                  std::min(1.0, static_cast<double>(m.unquantized_params) / all)
            : 0.0;
  }
  return kept * dtype + linear_bytes(setup.quant, linear - kept,
                                     (linear - kept) / h, dtype,
                                     block_scaled_fp8(m, setup.quant));
}

std::int64_t padded_vocab(const Model& m, const Resolved& setup) {
  // vLLM pads the vocabulary to a multiple of 64 before dividing it by tp
  // (vocab_parallel_embedding.py pad_vocab_size,
  // num_embeddings_per_partition); a multiple of 64 x tp when 64 alone would
  // not divide. transformers keeps it as is.
  const std::int64_t vocab = m.vocab_size;
  if (setup.engine != Engine::vllm) {
    return vocab;
  }
  const std::int64_t tp = setup.tp;
  std::int64_t padded = ceil_div(vocab, 64) * 64;
  if (padded % tp != 0) {
    padded = ceil_div(vocab, 64 * tp) * 64 * tp;
  }
  return padded;
}

double lm_head_params(const Model& m, const ParamCounts& c,
                      const WeightShare& share, double pad) {
  double head = static_cast<double>(c.lm_head);
  if (m.tie_word_embeddings && !share.embedding) {
    // A tied lm_head on a later pipeline stage needs its own copy.
    head = static_cast<double>(m.vocab_size * m.hidden_size);
  }
  if (head > 0) {
    head += pad;
  }
  return head;
}

// Rotary cos/sin cache vLLM keeps on every GPU: max_position_embeddings x
// rotary_dim values in dtype (vllm/model_executor/layers/rotary_embedding
// RotaryEmbedding._compute_cos_sin_cache). Gemma 3 holds two (local and
// global base); models without RoPE (learned positions, ALiBi, T5 buckets)
// none.
double rope_cache_bytes(const Model& m, double dtype) {
  if (m.learned_positions > 0 || m.model_type == "bloom" ||
      m.model_type == "t5" || m.max_position_embeddings <= 0) {
    return 0;
  }
  const std::int64_t rotary =
      m.kv_lora_rank > 0 ? m.qk_rope_head_dim : m.head_dim;
  const double positions = static_cast<double>(m.max_position_embeddings);
  double cached = positions;
  if (m.model_type.rfind("gemma3", 0) == 0) {
    // Gemma 3 (vllm/model_executor/models/gemma3.py): the sliding layers
    // use a default RoPE, the global layers config.rope_scaling. The 128k
    // sizes (4B/12B/27B) scale linearly by 8 (catalog_facts.md, rope_type
    // linear, factor 8.0) and LinearScalingRotaryEmbedding caches
    // max_position x factor positions; the 32k 1B has no scaling.
    const double factor = m.max_position_embeddings > 32768 ? 8.0 : 1.0;
    cached = positions + positions * factor;
  }
  // gpt-oss builds its YaRN rope in fp32 (models/gpt_oss.py OAIAttention:
  // get_rope(..., dtype=torch.float32)).
  const double bytes = m.model_type == "gpt_oss" ? 4.0 : dtype;
  return cached * static_cast<double>(rotary) * bytes;
}

double mla_dequant_bytes(const Model& m, const Resolved& setup, double layers) {
  if (m.kv_lora_rank <= 0 || setup.quant == Quant::none) {
    return 0;
  }
  // MLA with a quantized kv_b_proj: vLLM dequantizes it once into W_UK_T and
  // W_UV in dtype (mla attention process_weights_after_loading), kv_lora x
  // heads/tp x (nope + v) per layer, next to the quantized original.
  const double tp = setup.tp;
  return layers * static_cast<double>(m.kv_lora_rank) *
         static_cast<double>(m.num_heads) / tp *
         static_cast<double>(m.qk_nope_head_dim + m.v_head_dim) *
         dtype_bytes(setup.dtype);
}

}  // namespace oomplan::memory_terms

namespace oomplan {

using namespace memory_terms;

namespace {

// The weights one GPU holds, before what the engine builds at load (rope
// cache, MLA's dequantized copy).
double held_weight_bytes(const Model& m, const Resolved& setup,
                         const WeightShare& share) {
  const ParamCounts c = count_params(m);
  const double dtype = dtype_bytes(setup.dtype);
  const double tp = setup.tp;
  const LayerShare ls = layer_share(m, share);
  const TpParams p = tp_linear_params(m, c, tp, ls);

  double bytes = 0;
  bytes += quantized_linear_bytes(m, setup, share, ls, p);
  bytes += p.router * dtype;
  // Norms, biases, sinks: replicated on every GPU, in dtype.
  bytes += static_cast<double>(c.small) * ls.frac * dtype;

  // Embedding and lm_head stay in dtype (bitsandbytes skips lm_head and
  // nn.Embedding, GPTQ/AWQ/FP8 checkpoints keep them 16-bit) and are split
  // by vocabulary across tp, vLLM's padding rows included.
  const double h =
      static_cast<double>(std::max<std::int64_t>(1, m.hidden_size));
  const double pad =
      static_cast<double>(padded_vocab(m, setup) - m.vocab_size) * h;
  if (share.embedding) {
    bytes += (static_cast<double>(c.embedding) + pad) / tp * dtype;
    // Vision tower and projector (multimodal checkpoints) load with the
    // embedding on the first stage.
    bytes += static_cast<double>(c.extra) / tp * dtype;
  }
  if (share.lm_head) {
    bytes += lm_head_params(m, c, share, pad) / tp * dtype;
  }
  return bytes;
}

// The safetensors index's metadata.total_size (Model::checkpoint_bytes) is
// the exact size of a quantized checkpoint loaded as stored (its own
// format): what the per-parameter formats above miss (modules the
// quantizer left in bf16, such as Llama-3.1-405B-FP8's attention and first
// and last layers; scales) is the difference from the stored layout
// (transformers' shapes on one GPU), spread over the GPUs in proportion to
// the weights each holds. A 16-bit checkpoint's parameters are counted
// exactly; what its index adds are buffers no engine loads (Llama 2's
// rotary inv_freq, skipped by vLLM's load_weights). Neither is DeepSeek-V3's
// MTP layer loaded for decoding (num_nextn_predict_layers; vLLM
// models/deepseek_v2.py skips it), which its index counts.
double checkpoint_correction(const Model& m, const Resolved& setup,
                             const WeightShare& share, double here) {
  if (checkpoint_size_use(m, setup) != CheckpointSizeUse::as_stored) {
    return 0;
  }
  WeightShare whole;
  whole.layer_end = m.num_layers;
  whole.compute_capability = share.compute_capability;
  whole.unread = share.unread;
  Resolved one = setup;
  one.tp = 1;
  const double all_here_engine = held_weight_bytes(m, one, whole);
  one.engine = Engine::hf;
  const double stored = held_weight_bytes(m, one, whole);
  if (all_here_engine <= 0 || stored <= 0) {
    return 0;
  }
  return (static_cast<double>(m.checkpoint_bytes) - stored) * here /
         all_here_engine;
}

}  // namespace

CheckpointSizeUse checkpoint_size_use(const Model& m, const Resolved& setup) {
  if (m.checkpoint_bytes <= 0) {
    return CheckpointSizeUse::absent;
  }
  // A quantized checkpoint is stored in its own format whatever --dtype
  // says (its scales and unquantized modules in torch_dtype); a 16-bit one
  // in checkpoint_dtype.
  const bool as_stored =
      setup.quant == m.checkpoint_quant &&
      (setup.quant != Quant::none || setup.dtype == m.checkpoint_dtype);
  if (!as_stored) {
    return CheckpointSizeUse::converted;
  }
  if (m.model_type == "deepseek_v3") {
    return CheckpointSizeUse::mtp_layer;
  }
  return setup.quant == Quant::none ? CheckpointSizeUse::counted
                                    : CheckpointSizeUse::as_stored;
}

Bytes weight_bytes(const Model& model, const Resolved& setup,
                   const WeightShare& share) {
  const Model& m = model;
  double bytes = held_weight_bytes(m, setup, share);
  bytes += checkpoint_correction(m, setup, share, bytes);
  if (setup.engine == Engine::vllm) {
    const LayerShare ls = layer_share(m, share);
    const double dtype = dtype_bytes(setup.dtype);
    bytes += rope_cache_bytes(m, dtype);
    bytes += mla_dequant_bytes(m, setup, ls.n);
  }
  return saturated_bytes(bytes);
}

}  // namespace oomplan
