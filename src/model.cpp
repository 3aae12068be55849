#include "oomplan/model.hpp"

#include <algorithm>

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
  const std::int64_t q = h * heads * d;
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
  if (m.attention_sinks) {
    // GptOssAttention.sinks: one learned logit per head.
    c.small += heads;
  }
}

// One decoder (or encoder) layer. `moe`: routed experts instead of a dense
// MLP; `cross`: a T5 decoder layer with cross-attention and a third norm.
ParamCounts layer_counts(const Model& m, bool moe, bool cross) {
  ParamCounts c;
  add_attention(m, c);
  if (cross) {
    add_attention(m, c);
  }
  const std::int64_t norms = m.norms_per_layer + (cross ? 1 : 0);
  c.small += norms * norm_params(m, m.hidden_size);

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

std::int64_t moe_layer_count(const Model& m) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < m.num_layers; ++i) {
    n += is_moe_layer(m, i) ? 1 : 0;
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
    accumulate(c, layer_counts(m, false, false), m.num_layers);
    accumulate(c, layer_counts(m, false, true), m.num_decoder_layers);
  } else {
    const std::int64_t moe_layers = moe_layer_count(m);
    accumulate(c, layer_counts(m, false, false), m.num_layers - moe_layers);
    if (moe_layers > 0) {
      accumulate(c, layer_counts(m, true, false), moe_layers);
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
    return layer_counts(m, false, cross).total() + bias;
  }
  return layer_counts(m, is_moe_layer(m, layer), false).total();
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
  // A dense MLP and all experts at their widest, whichever the layer is.
  const double expert = std::max(d(m.moe_intermediate_size),
                                 d(m.shared_expert_intermediate_size));
  const double dense = d(m.intermediate_size);
  const double mlp = 3 * h * dense + 3 * dense + h +
                     (d(m.num_experts) + d(m.num_shared_experts)) *
                         (3 * h * expert + 3 * expert + h) +
                     h * (d(m.num_experts) + 1) + d(m.num_experts);
  const double norms = d(m.norms_per_layer + 1) * 2 * h;
  const double layers = d(m.num_layers) + d(m.num_decoder_layers);
  return layers * (attention + mlp + norms) + 2 * d(m.vocab_size) * h +
         d(m.learned_positions) * h + d(m.vocab_size) + 4 * h +
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

}  // namespace oomplan
