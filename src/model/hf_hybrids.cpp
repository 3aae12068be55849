// Linear-attention and state-space families of the Hugging Face importer
// (hf_families.hpp): Qwen3-Next's gated DeltaNet, Mamba and Mamba-2, and the
// attention/Mamba hybrids Jamba and Falcon-H1.

#include "model/hf_families.hpp"

#include <algorithm>

namespace oomplan::hf {

namespace {

// Every full_attention_interval-th layer attends, the others run gated
// DeltaNet (Qwen3NextConfig's default when layer_types is absent).
std::vector<LayerKind> every_nth_attention(const Config& root,
                                           std::int64_t layers) {
  const std::int64_t interval =
      std::max<std::int64_t>(1, root.get({"full_attention_interval"}, 4));
  std::vector<LayerKind> out;
  out.reserve(layer_slots(root, layers));
  for (std::int64_t i = 0; i < layers; ++i) {
    out.push_back((i + 1) % interval == 0 ? LayerKind::attention
                                          : LayerKind::linear_attention);
  }
  return out;
}

}  // namespace

// Qwen3NextConfig / modeling_qwen3_next.py: full_attention_interval-th layers
// are gated attention (q_proj doubled for the output gate, per-head q/k
// norm), the others gated DeltaNet; every layer a Qwen2-MoE-style sparse
// block with one gated shared expert.
void read_qwen3_next(const Source& s, Model& m) {
  const Config& root = s.root;
  read_llama_like(root, m, 256, false);
  m.attention_output_gate = true;
  m.qk_norm = true;
  read_moe_common(root, m, "num_experts");
  m.moe_intermediate_size = root.need({"moe_intermediate_size"});
  m.shared_expert_intermediate_size =
      root.get({"shared_expert_intermediate_size"}, 0);
  m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
  m.shared_expert_gate = m.num_shared_experts > 0;
  read_qwen_sparse(root, m);
  m.linear_key_heads = root.get({"linear_num_key_heads"}, 16);
  m.linear_value_heads = root.get({"linear_num_value_heads"}, 32);
  m.linear_key_head_dim = root.get({"linear_key_head_dim"}, 128);
  m.linear_value_head_dim = root.get({"linear_value_head_dim"}, 128);
  m.linear_conv_kernel = root.get({"linear_conv_kernel_dim"}, 4);
  if (auto types = mixer_layer_types(root, m.num_layers)) {
    m.layer_types = std::move(*types);
  } else {
    m.layer_types = every_nth_attention(root, m.num_layers);
  }
}

// MambaConfig / Mamba2Config: MambaBlock = RMSNorm + mixer, no MLP and no
// attention; d_inner = expand x hidden; embeddings tied by default in Mamba,
// not in Mamba-2.
void read_mamba(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"hidden_size"});
  m.num_layers = root.need({"num_hidden_layers"});
  m.vocab_size = root.need({"vocab_size"});
  m.mlp = MlpKind::none;
  m.norms_per_layer = 1;
  m.ssm_inner_size =
      root.get({"intermediate_size"}, expanded(root, "expand", m.hidden_size));
  m.ssm_conv_kernel = root.get({"conv_kernel"}, 4);
  m.ssm_proj_bias = root.flag("use_bias", false);
  m.ssm_conv_bias = root.flag("use_conv_bias", true);
  if (s.type == "mamba") {
    m.ssm_state_size = root.get({"state_size"}, 16);
    m.ssm_dt_rank = dt_rank(root, "time_step_rank", m.hidden_size);
    m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
    m.layer_types.assign(layer_slots(root, m.num_layers), LayerKind::mamba);
    return;
  }
  m.ssm_inner_size = expanded(root, "expand", m.hidden_size);
  m.ssm_state_size = root.get({"state_size"}, 128);
  m.ssm_num_heads = root.get({"num_heads"}, 128);
  m.ssm_head_dim = root.get({"head_dim"}, 64);
  m.ssm_groups = root.get({"n_groups"}, 8);
  m.ssm_gated_norm = root.flag("rms_norm", true);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
  m.layer_types.assign(layer_slots(root, m.num_layers), LayerKind::mamba2);
}

namespace {

// JambaConfig: a MoE block iff i % expert_layer_period ==
// expert_layer_offset; one expert is a dense MLP (JambaMLP).
void read_jamba_experts(const Config& root, Model& m) {
  m.num_experts = root.get({"num_experts"}, 16);
  if (m.num_experts <= 1) {
    m.num_experts = 0;
    return;
  }
  m.experts_per_tok = root.get({"num_experts_per_tok"}, 2);
  m.moe_intermediate_size = m.intermediate_size;
  const std::int64_t period = root.get({"expert_layer_period"}, 2);
  const std::int64_t offset = root.get({"expert_layer_offset"}, 1);
  if (period < 1 || offset != period - 1) {
    root.fail("expert_layer_offset",
              fmt::format("only expert_layer_offset = "
                          "expert_layer_period - 1 is supported, but "
                          "they are {} and {}",
                          offset, period));
  }
  m.moe_every = as_period(period);
}

}  // namespace

// JambaConfig / modeling_jamba.py: layer i attends iff i % attn_layer_period
// == attn_layer_offset, else a Mamba mixer with dt, B and C RMSNorms; two
// RMSNorms per layer; no attention biases.
void read_jamba(const Source& s, Model& m) {
  const Config& root = s.root;
  read_llama_like(root, m, 0, false);
  m.qkv_bias = m.o_bias = m.mlp_bias = false;
  const std::int64_t attn_period =
      std::max<std::int64_t>(1, root.get({"attn_layer_period"}, 8));
  const std::int64_t attn_offset = root.get({"attn_layer_offset"}, 4);
  m.layer_types.reserve(layer_slots(root, m.num_layers));
  for (std::int64_t i = 0; i < m.num_layers; ++i) {
    m.layer_types.push_back(i % attn_period == attn_offset
                                ? LayerKind::attention
                                : LayerKind::mamba);
  }
  read_jamba_experts(root, m);
  m.ssm_inner_size = expanded(root, "mamba_expand", m.hidden_size);
  m.ssm_state_size = root.get({"mamba_d_state"}, 16);
  m.ssm_conv_kernel = root.get({"mamba_d_conv"}, 4);
  m.ssm_dt_rank = dt_rank(root, "mamba_dt_rank", m.hidden_size);
  m.ssm_conv_bias = root.flag("mamba_conv_bias", true);
  m.ssm_proj_bias = root.flag("mamba_proj_bias", false);
  m.ssm_inner_norms = true;
}

// FalconH1Config / modeling_falcon_h1.py: every layer runs attention
// (LlamaAttention) and a Mamba-2 mixer side by side after one RMSNorm, then a
// gated MLP after another; d_inner = mamba_d_ssm (or mamba_expand x hidden);
// the mixer's gated norm only with mamba_rms_norm.
void read_falcon_h1(const Source& s, Model& m) {
  const Config& root = s.root;
  read_llama_like(root, m, 0, false);
  m.ssm_inner_size =
      root.get({"mamba_d_ssm"}, expanded(root, "mamba_expand", m.hidden_size));
  m.ssm_num_heads = root.get({"mamba_n_heads"}, 128);
  m.ssm_head_dim = root.get({"mamba_d_head"}, 64);
  m.ssm_groups = root.get({"mamba_n_groups"}, 1);
  m.ssm_state_size = root.get({"mamba_d_state"}, 256);
  m.ssm_conv_kernel = root.get({"mamba_d_conv"}, 4);
  m.ssm_conv_bias = root.flag("mamba_conv_bias", true);
  m.ssm_proj_bias = root.flag("mamba_proj_bias", false);
  if (root.flag("projectors_bias", false) != m.ssm_proj_bias) {
    root.fail("projectors_bias",
              "a different bias on in_proj (mamba_proj_bias) and "
              "out_proj (projectors_bias) is not supported");
  }
  m.ssm_gated_norm = root.flag("mamba_rms_norm", false);
  m.layer_types.assign(layer_slots(root, m.num_layers),
                       LayerKind::attention_mamba2);
}

}  // namespace oomplan::hf
