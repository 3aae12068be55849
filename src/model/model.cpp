#include "oomplan/model/model.hpp"

#include <algorithm>
#include <array>

// Parameter arithmetic. Every count is exact: it reproduces the tensor shapes
// of the Hugging Face transformers modeling files (named per term below) and
// matches the published safetensors sizes in catalog_facts.md §1d/§1e.
//
// A model has at most four kinds of layer (dense or MoE; encoder or decoder),
// so the totals are per-kind counts times the number of layers of that kind.

namespace oomplan {
namespace {

// One norm over `width` features: RMSNorm has a weight, LayerNorm a weight and
// a bias (torch.nn.LayerNorm).
std::int64_t norm_params(const Model& m, std::int64_t width) {
  return m.norm == NormKind::layer_norm ? 2 * width : width;
}

// One feed-forward block of width `inter`: gated = gate, up, down
// (LlamaMLP); plain = up, down (GPT2MLP, BloomMLP, FalconMLP, T5DenseActDense).
std::int64_t ffn_weights(const Model& m, std::int64_t inter) {
  const std::int64_t matrices = m.mlp == MlpKind::gated ? 3 : 2;
  return matrices * m.hidden_size * inter;
}

// Mamba-1 mixer, transformers MambaMixer (JambaMambaMixer adds the dt, B and
// C RMSNorms): in_proj h x 2d, conv1d d x K (+ d bias), x_proj d x (R + 2N),
// dt_proj R x d + d, A_log d x N, D d, out_proj d x h.
void add_mamba(const Model& m, ParamCounts& c) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t d = m.ssm_inner_size;
  const std::int64_t n = m.ssm_state_size;
  const std::int64_t r = m.ssm_dt_rank;
  c.attention += h * 2 * d + d * (r + 2 * n) + r * d + d * h;
  c.small += d * m.ssm_conv_kernel + (m.ssm_conv_bias ? d : 0) + d + d * n + d;
  if (m.ssm_proj_bias) {
    c.small += 2 * d + h;
  }
  if (m.ssm_inner_norms) {
    c.small += r + 2 * n;
  }
}

// Mamba-2 mixer, transformers Mamba2Mixer / FalconH1Mixer: in_proj h x (d +
// conv_dim + H) with conv_dim = d + 2 G N (z, x B C, dt), conv1d conv_dim x K
// (+ bias), dt_bias, A_log and D of H each, the gated RMSNorm over d,
// out_proj d x h.
void add_mamba2(const Model& m, ParamCounts& c) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t d = m.ssm_inner_size;
  const std::int64_t conv_dim = d + 2 * m.ssm_groups * m.ssm_state_size;
  const std::int64_t proj = d + conv_dim + m.ssm_num_heads;
  c.attention += h * proj + d * h;
  c.small += conv_dim * m.ssm_conv_kernel + (m.ssm_conv_bias ? conv_dim : 0) +
             3 * m.ssm_num_heads + (m.ssm_gated_norm ? d : 0);
  if (m.ssm_proj_bias) {
    c.small += proj + h;
  }
}

// Gated DeltaNet, transformers Qwen3NextGatedDeltaNet: in_proj_qkvz h x (2 Hk
// dk + 2 Hv dv), in_proj_ba h x 2 Hv, conv1d (2 Hk dk + Hv dv) x K without
// bias, dt_bias and A_log of Hv, the gated RMSNorm over dv, out_proj Hv dv x h.
void add_delta_net(const Model& m, ParamCounts& c) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t key = m.linear_key_heads * m.linear_key_head_dim;
  const std::int64_t value = m.linear_value_heads * m.linear_value_head_dim;
  c.attention +=
      h * (2 * key + 2 * value) + h * 2 * m.linear_value_heads + value * h;
  c.small += (2 * key + value) * m.linear_conv_kernel +
             2 * m.linear_value_heads + m.linear_value_head_dim;
}

// The biases of one feed-forward block: gpt-oss gate_up_proj_bias (2I) and
// down_proj_bias (h); GPT-2/BLOOM/Phi-2 fc1 (I) and fc2 (h).
std::int64_t ffn_biases(const Model& m, std::int64_t inter) {
  if (!m.mlp_bias) {
    return 0;
  }
  const std::int64_t inner = m.mlp == MlpKind::gated ? 2 * inter : inter;
  return inner + m.hidden_size;
}

// One attention block (self- or cross-attention) added to `c`.
void add_attention(const Model& m, ParamCounts& c) {
  const std::int64_t h = m.hidden_size;
  const std::int64_t heads = m.num_heads;
  if (m.kv_lora_rank > 0) {
    // Multi-head latent attention, DeepseekV3Attention (modeling_deepseek_v3):
    // q_a_proj h x q_lora + q_a_layernorm, q_b_proj q_lora x H(nope+rope)
    // (or one q_proj h x H(nope+rope) without q_lora), kv_a_proj_with_mqa
    // h x (kv_lora+rope) + kv_a_layernorm, kv_b_proj kv_lora x H(nope+v),
    // o_proj H·v x h.
    const std::int64_t qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
    std::int64_t q = 0;
    if (m.q_lora_rank > 0) {
      q = h * m.q_lora_rank + m.q_lora_rank * heads * qk_dim;
      c.small += m.q_lora_rank;
    } else {
      q = h * heads * qk_dim;
    }
    const std::int64_t kv =
        h * (m.kv_lora_rank + m.qk_rope_head_dim) +
        m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim);
    const std::int64_t o = heads * m.v_head_dim * h;
    c.attention += q + kv + o;
    c.kv_proj += kv;
    c.small += m.kv_lora_rank;
    return;
  }
  // LlamaAttention: q_proj h x H·d, k_proj and v_proj h x Hkv·d, o_proj H·d x
  // h (fused qkv in Phi-3, Falcon and BLOOM has the same shape in total).
  const std::int64_t d = m.head_dim;
  // Qwen3NextAttention: q_proj h x 2 H d (query and output gate).
  const std::int64_t q = h * heads * d * (m.attention_output_gate ? 2 : 1);
  const std::int64_t kv = 2 * h * m.num_kv_heads * d;
  const std::int64_t o = heads * d * h;
  c.attention += q + kv + o;
  c.kv_proj += kv;
  if (m.qkv_bias) {
    c.small += heads * d + 2 * m.num_kv_heads * d;
  }
  if (m.o_bias) {
    c.small += h;
  }
  if (m.qk_norm) {
    // Qwen3Attention / Gemma3Attention q_norm and k_norm over head_dim.
    c.small += 2 * norm_params(m, d);
  }
  if (m.qk_norm_full) {
    // Olmo2Attention: q_norm over H d and k_norm over Hkv d.
    c.small += norm_params(m, heads * d) + norm_params(m, m.num_kv_heads * d);
  }
  if (m.attention_sinks) {
    // GptOssAttention.sinks: one learned logit per head.
    c.small += heads;
  }
}

// One decoder (or encoder) layer with token mixer `kind`. `moe`: routed
// experts instead of a dense MLP; `cross`: a T5 decoder layer with
// cross-attention and a third norm.
ParamCounts layer_counts(const Model& m, LayerKind kind, bool moe, bool cross) {
  ParamCounts c;
  switch (kind) {
    case LayerKind::attention:
      add_attention(m, c);
      break;
    case LayerKind::mamba:
      add_mamba(m, c);
      break;
    case LayerKind::mamba2:
      add_mamba2(m, c);
      break;
    case LayerKind::linear_attention:
      add_delta_net(m, c);
      break;
    case LayerKind::attention_mamba2:
      add_attention(m, c);
      add_mamba2(m, c);
      break;
  }
  if (cross) {
    add_attention(m, c);
  }
  const std::int64_t norms = m.norms_per_layer + (cross ? 1 : 0);
  c.small += norms * norm_params(m, m.hidden_size);

  if (m.mlp == MlpKind::none) {
    c.active = c.total();
    return c;
  }
  if (!moe) {
    c.mlp += ffn_weights(m, m.intermediate_size);
    c.small += ffn_biases(m, m.intermediate_size);
    c.active = c.total();
    return c;
  }
  // Sparse MoE block (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock,
  // DeepseekV3MoE, GptOssMLP, Llama4TextMoe): router gate h x E, E experts
  // of moe_intermediate_size, optional shared experts.
  const std::int64_t expert = ffn_weights(m, m.moe_intermediate_size);
  const std::int64_t expert_bias = ffn_biases(m, m.moe_intermediate_size);
  c.experts += m.num_experts * expert;
  c.small += m.num_experts * expert_bias;
  c.router += m.hidden_size * m.num_experts;
  if (m.router_bias) {
    // gpt-oss router.bias; DeepSeek-V3 gate.e_score_correction_bias.
    c.small += m.num_experts;
  }
  if (m.num_shared_experts > 0) {
    // DeepSeek: one MLP of n_shared x moe_intermediate_size; Qwen2-MoE and
    // Llama 4: shared_expert_intermediate_size (Llama 4: the expert size).
    const std::int64_t inter = m.shared_expert_intermediate_size > 0
                                   ? m.shared_expert_intermediate_size
                                   : m.moe_intermediate_size;
    c.shared_experts += m.num_shared_experts * ffn_weights(m, inter);
    c.small += m.num_shared_experts * ffn_biases(m, inter);
  }
  if (m.shared_expert_gate) {
    // Qwen2MoeSparseMoeBlock.shared_expert_gate: Linear(h, 1, bias=False).
    c.router += m.hidden_size;
  }
  const std::int64_t idle = m.num_experts - m.experts_per_tok;
  c.active = c.total() - idle * (expert + expert_bias);
  return c;
}

void accumulate(ParamCounts& sum, const ParamCounts& c, std::int64_t times) {
  sum.attention += times * c.attention;
  sum.kv_proj += times * c.kv_proj;
  sum.mlp += times * c.mlp;
  sum.experts += times * c.experts;
  sum.shared_experts += times * c.shared_experts;
  sum.router += times * c.router;
  sum.small += times * c.small;
  sum.active += times * c.active;
}

constexpr std::array<LayerKind, 5> k_layer_kinds = {
    LayerKind::attention, LayerKind::mamba, LayerKind::mamba2,
    LayerKind::linear_attention, LayerKind::attention_mamba2};

// How many of the layers [begin, end) have each (kind, MoE) combination:
// [kind][moe].
std::array<std::array<std::int64_t, 2>, 5> layer_census(const Model& m,
                                                        std::int64_t begin,
                                                        std::int64_t end) {
  std::array<std::array<std::int64_t, 2>, 5> n{};
  if (m.layer_types.empty()) {
    const std::int64_t moe = moe_layer_count(m, begin, end);
    n[static_cast<std::size_t>(LayerKind::attention)] = {
        std::max<std::int64_t>(0, end - begin) - moe, moe};
    return n;
  }
  for (std::int64_t i = begin; i < end; ++i) {
    const auto kind = static_cast<std::size_t>(layer_kind(m, i));
    ++n[kind][is_moe_layer(m, i) ? 1 : 0];
  }
  return n;
}

}  // namespace

ParamCounts count_params(const Model& model) {
  const Model& m = model;
  ParamCounts c;
  const bool encoder_decoder = m.num_decoder_layers > 0;
  if (encoder_decoder) {
    // T5: encoder layers (self-attention, FFN, 2 norms) and decoder layers
    // (self- and cross-attention, FFN, 3 norms), modeling_t5.T5Block.
    const ParamCounts encoder =
        layer_counts(m, LayerKind::attention, false, false);
    const ParamCounts decoder =
        layer_counts(m, LayerKind::attention, false, true);
    accumulate(c, encoder, m.num_layers);
    accumulate(c, decoder, m.num_decoder_layers);
    // Each stack's first layer also holds its relative bias table.
    c.largest_layer = std::max(encoder.total(), decoder.total()) +
                      m.relative_attention_buckets * m.num_heads;
  } else {
    const auto census = layer_census(m, 0, m.num_layers);
    for (const LayerKind kind : k_layer_kinds) {
      for (const bool moe : {false, true}) {
        const std::int64_t n = census[static_cast<std::size_t>(kind)][moe];
        if (n > 0) {
          const ParamCounts layer = layer_counts(m, kind, moe, false);
          accumulate(c, layer, n);
          c.largest_layer = std::max(c.largest_layer, layer.total());
        }
      }
    }
  }

  // Embeddings: token table V x h (+ GPT-2 wpe positions x h); lm_head V x h
  // unless tied (catalog_facts.md §1e).
  c.embedding =
      m.vocab_size * m.hidden_size + m.learned_positions * m.hidden_size;
  c.lm_head = m.tie_word_embeddings ? 0 : m.vocab_size * m.hidden_size;
  std::int64_t global_small = norm_params(m, m.hidden_size);  // final norm
  if (encoder_decoder) {
    // T5: encoder and decoder final_layer_norm, and one relative attention
    // bias table (buckets x heads) in the first layer of each stack.
    global_small += norm_params(m, m.hidden_size) +
                    2 * m.relative_attention_buckets * m.num_heads;
  }
  if (m.embedding_norm) {
    global_small += norm_params(m, m.hidden_size);  // BLOOM
  }
  if (m.lm_head_bias) {
    global_small += m.vocab_size;  // Phi-2 lm_head.bias
  }
  c.small += global_small;
  // The bias tables belong to their stack's first layer (layer_params).
  c.outside_layers =
      global_small -
      (encoder_decoder ? 2 * m.relative_attention_buckets * m.num_heads : 0);
  c.active += c.embedding + c.lm_head + global_small;
  c.extra = m.extra_params;
  return c;
}

std::int64_t layer_params(const Model& model, std::int64_t layer) {
  const Model& m = model;
  if (m.num_decoder_layers > 0) {
    const bool cross = layer >= m.num_layers;
    const bool first = layer == 0 || layer == m.num_layers;
    const std::int64_t bias =
        first ? m.relative_attention_buckets * m.num_heads : 0;
    return layer_counts(m, LayerKind::attention, false, cross).total() + bias;
  }
  return layer_counts(m, layer_kind(m, layer), is_moe_layer(m, layer), false)
      .total();
}

LayerSpan span_params(const Model& model, std::int64_t begin,
                      std::int64_t end) {
  const Model& m = model;
  LayerSpan out;
  if (m.num_decoder_layers > 0) {
    // Encoder-decoder: few layers, each stack's first with its bias table.
    for (std::int64_t l = begin; l < end; ++l) {
      const std::int64_t p = layer_params(m, l);
      out.params += p;
      out.largest = std::max(out.largest, p);
    }
    return out;
  }
  const auto census = layer_census(m, begin, end);
  for (const LayerKind kind : k_layer_kinds) {
    for (const bool moe : {false, true}) {
      const std::int64_t n = census[static_cast<std::size_t>(kind)][moe];
      if (n > 0) {
        const std::int64_t p = layer_counts(m, kind, moe, false).total();
        out.params += n * p;
        out.largest = std::max(out.largest, p);
      }
    }
  }
  return out;
}

std::int64_t moe_layer_count(const Model& model, std::int64_t begin,
                             std::int64_t end) {
  // Layers l >= first_k_dense with (l + 1) % moe_every == 0: the multiples
  // of moe_every in [max(begin, first_k_dense) + 1, end].
  const std::int64_t from = std::max(begin, model.first_k_dense);
  if (model.num_experts == 0 || model.moe_every < 1 || end <= from) {
    return 0;
  }
  return end / model.moe_every - from / model.moe_every;
}

double approx_params(const Model& model) {
  const Model& m = model;
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  const double h = d(m.hidden_size);
  const double qk =
      d(std::max(m.head_dim, m.qk_nope_head_dim + m.qk_rope_head_dim));
  const double v = d(std::max(m.head_dim, m.v_head_dim));
  // Every term of layer_counts, each taken at its largest.
  const double attention =
      2 * (h * d(m.num_heads) * (qk + v) + 2 * h * d(m.num_kv_heads) * qk +
           h * d(m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) +
           d(m.kv_lora_rank + m.q_lora_rank) * d(m.num_heads) * (qk + v)) +
      4 * d(m.num_heads) * (qk + v) + 4 * h;
  // A dense MLP and all experts at their widest, whichever the layer is:
  // routed experts at moe_intermediate_size, shared ones at the wider of the
  // two (Qwen2-57B-A14B: 64 routed of 2,560, one shared of 20,480).
  const double routed = d(m.moe_intermediate_size);
  const double shared = std::max(routed, d(m.shared_expert_intermediate_size));
  const double dense = d(m.intermediate_size);
  const double mlp =
      3 * h * dense + 3 * dense + h +
      d(m.num_experts) * (3 * h * routed + 3 * routed + h) +
      d(m.num_shared_experts) * (3 * h * shared + 3 * shared + h) +
      h * (d(m.num_experts) + 1) + d(m.num_experts);
  const double norms = d(m.norms_per_layer + 1) * 2 * h +
                       2 * d(m.num_heads + m.num_kv_heads) * qk;
  // Every mixer at its widest on every layer: the output gate, Mamba-1,
  // Mamba-2 and DeltaNet terms of add_attention, add_mamba, add_mamba2 and
  // add_delta_net.
  const double inner = d(m.ssm_inner_size);
  const double state = d(m.ssm_state_size);
  const double conv_dim = inner + 2 * d(m.ssm_groups) * state;
  const double heads = d(m.ssm_num_heads);
  const double rank = d(m.ssm_dt_rank);
  const double kernel = d(m.ssm_conv_kernel) + 1;
  const double ssm =
      h * d(m.num_heads) * qk +
      (h * 2 * inner + inner * (rank + 2 * state) + rank * inner + inner * h +
       inner * kernel + 3 * inner + inner * state + 2 * inner + h + rank +
       2 * state) +
      (h * (inner + conv_dim + heads) + inner * h + conv_dim * kernel +
       3 * heads + inner + inner + conv_dim + heads + h);
  const double key = d(m.linear_key_heads) * d(m.linear_key_head_dim);
  const double value = d(m.linear_value_heads) * d(m.linear_value_head_dim);
  const double delta = h * (2 * key + 2 * value) +
                       h * 2 * d(m.linear_value_heads) + value * h +
                       (2 * key + value) * d(m.linear_conv_kernel) +
                       2 * d(m.linear_value_heads) + d(m.linear_value_head_dim);
  const double layers = d(m.num_layers) + d(m.num_decoder_layers);
  return layers * (attention + mlp + norms + ssm + delta) +
         2 * d(m.vocab_size) * h + d(m.learned_positions) * h +
         d(m.vocab_size) + 4 * h +
         2 * d(m.relative_attention_buckets) * d(m.num_heads) +
         d(m.extra_params);
}

bool is_local_layer(const Model& model, std::int64_t layer) {
  if (model.sliding_window <= 0) {
    return false;
  }
  return model.global_every == 0 || (layer + 1) % model.global_every != 0;
}

bool is_moe_layer(const Model& model, std::int64_t layer) {
  if (model.num_experts == 0 || layer < model.first_k_dense) {
    return false;
  }
  return (layer + 1) % model.moe_every == 0;
}

LayerKind layer_kind(const Model& model, std::int64_t layer) {
  if (model.layer_types.empty() || layer < 0 ||
      layer >= static_cast<std::int64_t>(model.layer_types.size())) {
    return LayerKind::attention;
  }
  return model.layer_types[static_cast<std::size_t>(layer)];
}

bool is_attention_layer(const Model& model, std::int64_t layer) {
  const LayerKind kind = layer_kind(model, layer);
  return kind == LayerKind::attention || kind == LayerKind::attention_mamba2;
}

std::int64_t attention_layer_count(const Model& model) {
  if (model.layer_types.empty()) {
    return model.num_layers;
  }
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < model.num_layers; ++i) {
    n += is_attention_layer(model, i) ? 1 : 0;
  }
  return n;
}

Bytes recurrent_state_bytes_per_sequence(const Model& model, Dtype conv_dtype,
                                         Dtype ssm_dtype, int tp_in) {
  const Model& m = model;
  const std::int64_t tp = std::max(1, tp_in);
  // vLLM's divide() asserts that tp divides; a setup that does not is
  // rejected before this, and rounding up keeps the figure an upper bound.
  const auto shard = [&](std::int64_t n) { return (n + tp - 1) / tp; };
  const std::int64_t conv_bytes = dtype_bytes(conv_dtype);
  const std::int64_t ssm_bytes = dtype_bytes(ssm_dtype);
  const std::int64_t window = std::max<std::int64_t>(0, m.ssm_conv_kernel - 1);
  // mamba1_state_shape: conv (d/tp, K-1), temporal (d/tp, N).
  const std::int64_t mamba1 =
      shard(m.ssm_inner_size) * window * conv_bytes +
      shard(m.ssm_inner_size) * m.ssm_state_size * ssm_bytes;
  // mamba2_state_shape: groups extended to tp when tp does not divide them
  // (extra_groups_for_head_shards), conv ((d + 2 G N)/tp, K-1), temporal
  // (H/tp, head_dim, N).
  const std::int64_t groups =
      m.ssm_groups > 0 && m.ssm_groups % tp != 0 ? tp : m.ssm_groups;
  const std::int64_t mamba2 =
      shard(m.ssm_inner_size + 2 * groups * m.ssm_state_size) * window *
          conv_bytes +
      shard(m.ssm_num_heads) * m.ssm_head_dim * m.ssm_state_size * ssm_bytes;
  // gated_delta_net_state_shape: conv ((2 Hk dk + Hv dv)/tp, K-1), temporal
  // (Hv/tp, dv, dk).
  const std::int64_t delta_window =
      std::max<std::int64_t>(0, m.linear_conv_kernel - 1);
  const std::int64_t delta =
      shard(2 * m.linear_key_heads * m.linear_key_head_dim +
            m.linear_value_heads * m.linear_value_head_dim) *
          delta_window * conv_bytes +
      shard(m.linear_value_heads) * m.linear_value_head_dim *
          m.linear_key_head_dim * ssm_bytes;
  Bytes total = 0;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(m.layer_types.size());
       ++i) {
    switch (m.layer_types[static_cast<std::size_t>(i)]) {
      case LayerKind::attention:
        break;
      case LayerKind::mamba:
        total += mamba1;
        break;
      case LayerKind::mamba2:
      case LayerKind::attention_mamba2:
        total += mamba2;
        break;
      case LayerKind::linear_attention:
        total += delta;
        break;
    }
  }
  return total;
}

Bytes recurrent_state_bytes_per_sequence(const Model& model, Dtype dtype) {
  return recurrent_state_bytes_per_sequence(model, dtype, dtype, 1);
}

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::attention:
      return "attention";
    case LayerKind::mamba:
      return "mamba";
    case LayerKind::mamba2:
      return "mamba2";
    case LayerKind::linear_attention:
      return "linear_attention";
    case LayerKind::attention_mamba2:
      return "attention_mamba2";
  }
  return "attention";
}

std::optional<LayerKind> layer_kind_from_name(std::string_view name) {
  for (const LayerKind kind : k_layer_kinds) {
    if (layer_kind_name(kind) == name) {
      return kind;
    }
  }
  return std::nullopt;
}

}  // namespace oomplan
