#include "oomplan/model/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

// check_model(): the structure check the catalog loader and the Hugging Face
// importer share. Order matters: every bound is checked with comparisons
// alone, then approx_params() (double arithmetic, which cannot overflow) caps
// the total, and only then does the exact int64 count run.

namespace oomplan {
namespace {

// Fails with "must be from `min` to `max`, but is `value`".
std::optional<ModelProblem> range(std::string_view field, std::int64_t value,
                                  std::int64_t min, std::int64_t max) {
  if (value >= min && value <= max) {
    return std::nullopt;
  }
  if (value < min && min == 1) {
    return ModelProblem{std::string(field),
                        fmt::format("must be positive, but is {}", value)};
  }
  if (value < min && min == 0) {
    return ModelProblem{std::string(field),
                        fmt::format("must not be negative, but is {}", value)};
  }
  return ModelProblem{
      std::string(field),
      fmt::format("must be from {} to {}, but is {}", min, max, value)};
}

std::optional<ModelProblem> check_bounds(const Model& m) {
  struct Bound {
    std::string_view field;
    std::int64_t value;
    std::int64_t min;
    std::int64_t max;
  };
  const bool moe = m.num_experts > 0;
  const bool mla = m.kv_lora_rank > 0;
  const auto max_params = static_cast<std::int64_t>(k_max_params);
  // Attention-free models (Mamba) have no heads; MLP-free ones (Mamba) no
  // intermediate size.
  bool attention = m.layer_types.empty();
  bool mamba = false;
  bool mamba2 = false;
  bool delta = false;
  for (const LayerKind kind : m.layer_types) {
    attention = attention || kind == LayerKind::attention ||
                kind == LayerKind::attention_mamba2;
    mamba = mamba || kind == LayerKind::mamba;
    mamba2 = mamba2 || kind == LayerKind::mamba2 ||
             kind == LayerKind::attention_mamba2;
    delta = delta || kind == LayerKind::linear_attention;
  }
  const std::int64_t heads_min = attention ? 1 : 0;
  const std::int64_t ssm_min = mamba || mamba2 ? 1 : 0;
  const std::int64_t mamba2_min = mamba2 ? 1 : 0;
  const std::int64_t delta_min = delta ? 1 : 0;
  // A described vision tower needs its image, patch and widths; 65,536
  // pixels a side is far above any processor's largest image (Qwen2.5-VL's
  // 3,584).
  const std::int64_t vision_min = m.vision_layers > 0 ? 1 : 0;
  constexpr std::int64_t k_max_vision_image = 65536;
  // mllama tiles an image into 4 (max_num_tiles); 64 leaves room.
  constexpr std::int64_t k_max_vision_tiles = 64;
  // clang-format off
  const Bound bounds[] = {
      {"hidden_size",                     m.hidden_size,                     1, k_max_hidden},
      {"num_hidden_layers",               m.num_layers,                      1, k_max_layers},
      {"num_attention_heads",             m.num_heads,                       heads_min, k_max_heads},
      {"num_key_value_heads",             m.num_kv_heads,                    heads_min, k_max_heads},
      {"head_dim",                        m.head_dim,                        heads_min, k_max_head_dim},
      {"intermediate_size",               m.intermediate_size,               m.mlp == MlpKind::none ? 0 : 1, k_max_intermediate},
      {"vocab_size",                      m.vocab_size,                      1, k_max_vocab},
      {"max_position_embeddings",         m.max_position_embeddings,         0, k_max_positions},
      {"norms_per_layer",                 m.norms_per_layer,                 1, k_max_norms_per_layer},
      {"learned_positions",               m.learned_positions,               0, k_max_positions},
      {"sliding_window",                  m.sliding_window,                  0, k_max_positions},
      {"global_every",                    m.global_every,                    0, k_max_layers},
      {"num_experts",                     m.num_experts,                     0, k_max_experts},
      {"num_experts_per_tok",             m.experts_per_tok,                 0, k_max_experts},
      {"moe_intermediate_size",           m.moe_intermediate_size,           moe ? 1 : 0, k_max_intermediate},
      {"num_shared_experts",              m.num_shared_experts,              0, k_max_experts},
      {"shared_expert_intermediate_size", m.shared_expert_intermediate_size, 0, k_max_intermediate},
      {"first_k_dense_replace",           m.first_k_dense,                   0, k_max_layers},
      {"moe_every",                       m.moe_every,                       1, k_max_layers},
      {"q_lora_rank",                     m.q_lora_rank,                     0, k_max_hidden},
      {"kv_lora_rank",                    m.kv_lora_rank,                    0, k_max_hidden},
      {"qk_rope_head_dim",                m.qk_rope_head_dim,                mla ? 1 : 0, k_max_head_dim},
      {"qk_nope_head_dim",                m.qk_nope_head_dim,                mla ? 1 : 0, k_max_head_dim},
      {"v_head_dim",                      m.v_head_dim,                      mla ? 1 : 0, k_max_head_dim},
      {"num_decoder_layers",              m.num_decoder_layers,              0, k_max_layers},
      {"relative_attention_num_buckets",  m.relative_attention_buckets,      0, k_max_buckets},
      {"ssm_inner_size",                  m.ssm_inner_size,                  ssm_min, k_max_intermediate},
      {"ssm_state_size",                  m.ssm_state_size,                  ssm_min, k_max_head_dim},
      {"ssm_conv_kernel",                 m.ssm_conv_kernel,                 ssm_min, k_max_conv_kernel},
      {"ssm_dt_rank",                     m.ssm_dt_rank,                     mamba ? 1 : 0, k_max_hidden},
      {"ssm_num_heads",                   m.ssm_num_heads,                   mamba2_min, k_max_heads},
      {"ssm_head_dim",                    m.ssm_head_dim,                    mamba2_min, k_max_head_dim},
      {"ssm_groups",                      m.ssm_groups,                      mamba2_min, k_max_heads},
      {"linear_key_heads",                m.linear_key_heads,                delta_min, k_max_heads},
      {"linear_value_heads",              m.linear_value_heads,              delta_min, k_max_heads},
      {"linear_key_head_dim",             m.linear_key_head_dim,             delta_min, k_max_head_dim},
      {"linear_value_head_dim",           m.linear_value_head_dim,           delta_min, k_max_head_dim},
      {"linear_conv_kernel",              m.linear_conv_kernel,              delta_min, k_max_conv_kernel},
      {"extra_params",                    m.extra_params,                    0, max_params},
      {"vision_image_size",               m.vision_image_size,               vision_min, k_max_vision_image},
      {"vision_patch_size",               m.vision_patch_size,               vision_min, k_max_vision_image},
      {"vision_temporal_patch_size",      m.vision_temporal_patch_size,      1, k_max_vision_image},
      {"vision_merge_size",               m.vision_merge_size,               1, k_max_vision_image},
      {"vision_hidden_size",              m.vision_hidden_size,              vision_min, k_max_hidden},
      {"vision_intermediate_size",        m.vision_intermediate_size,        vision_min, k_max_intermediate},
      {"vision_layers",                   m.vision_layers,                   0, k_max_layers},
      {"vision_max_tiles",                m.vision_max_tiles,                0, k_max_vision_tiles},
      {"vision_intermediate_layers",      m.vision_intermediate_layers,      0, k_max_layers},
      {"params",                          m.params,                          0, max_params},
      {"params_active",                   m.params_active,                   0, max_params},
      {"official_params",                 m.official_params,                 0, max_params},
      {"checkpoint_bytes",                m.checkpoint_bytes,                0, INT64_MAX},
  };
  // clang-format on
  for (const Bound& b : bounds) {
    if (auto problem = range(b.field, b.value, b.min, b.max)) {
      return problem;
    }
  }
  return std::nullopt;
}

// The relations between fields; every field is within its bound already.
std::optional<ModelProblem> check_relations(const Model& m) {
  if (m.num_experts > 0 &&
      (m.experts_per_tok < 1 || m.experts_per_tok > m.num_experts)) {
    return ModelProblem{
        "num_experts_per_tok",
        fmt::format("must be from 1 to num_experts {}, but is {}",
                    m.num_experts, m.experts_per_tok)};
  }
  if (m.first_k_dense > m.num_layers) {
    return ModelProblem{
        "first_k_dense_replace",
        fmt::format("{} dense layers exceed num_hidden_layers {}",
                    m.first_k_dense, m.num_layers)};
  }
  if (!m.layer_types.empty() &&
      static_cast<std::int64_t>(m.layer_types.size()) != m.num_layers) {
    return ModelProblem{
        "layer_types",
        fmt::format("lists {} layers, but num_hidden_layers is {}",
                    m.layer_types.size(), m.num_layers)};
  }
  if (m.mlp == MlpKind::none && m.num_experts > 0) {
    return ModelProblem{"num_experts",
                        "a model without feed-forward blocks has no experts"};
  }
  const bool mamba2 =
      std::any_of(m.layer_types.begin(), m.layer_types.end(), [](LayerKind k) {
        return k == LayerKind::mamba2 || k == LayerKind::attention_mamba2;
      });
  if (mamba2 && m.ssm_num_heads * m.ssm_head_dim != m.ssm_inner_size) {
    // Mamba2Mixer reshapes the scan output (heads, head_dim) into d_inner.
    return ModelProblem{
        "ssm_num_heads",
        fmt::format("{} heads of {} make {}, not ssm_inner_size {}",
                    m.ssm_num_heads, m.ssm_head_dim,
                    m.ssm_num_heads * m.ssm_head_dim, m.ssm_inner_size)};
  }
  if (mamba2 && m.ssm_num_heads % m.ssm_groups != 0) {
    return ModelProblem{"ssm_groups",
                        fmt::format("{} does not divide ssm_num_heads {}",
                                    m.ssm_groups, m.ssm_num_heads)};
  }
  if (m.linear_key_heads > 0 &&
      m.linear_value_heads % m.linear_key_heads != 0) {
    return ModelProblem{"linear_key_heads",
                        fmt::format("{} does not divide linear_value_heads {}",
                                    m.linear_key_heads, m.linear_value_heads)};
  }
  if (m.num_kv_heads > m.num_heads) {
    return ModelProblem{"num_key_value_heads",
                        fmt::format("{} exceeds num_attention_heads {}",
                                    m.num_kv_heads, m.num_heads)};
  }
  if (m.num_kv_heads == 0) {
    // Attention-free (the bounds require kv heads when a layer attends).
    return std::nullopt;
  }
  if (m.num_heads % m.num_kv_heads != 0) {
    return ModelProblem{"num_key_value_heads",
                        fmt::format("{} does not divide num_attention_heads {}",
                                    m.num_kv_heads, m.num_heads)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ModelProblem> check_model(const Model& model) {
  const Model& m = model;
  if (auto problem = check_bounds(m)) {
    return problem;
  }
  if (auto problem = check_relations(m)) {
    return problem;
  }
  if (approx_params(m) > k_max_params) {
    return ModelProblem{"hidden_size",
                        "these sizes give more than 10^15 parameters"};
  }
  if (m.checkpoint_bytes > 0) {
    // Within the bounds above the exact count cannot overflow.
    const auto params = static_cast<double>(count_params(m).total());
    const double bytes = static_cast<double>(m.checkpoint_bytes);
    if (bytes < params * k_min_checkpoint_bytes_per_param ||
        bytes > params * k_max_checkpoint_bytes_per_param) {
      return ModelProblem{
          "checkpoint_bytes",
          fmt::format("{} bytes cannot hold {} parameters (1 bit to 8 bytes "
                      "each: {:.0f} to {:.0f} bytes)",
                      m.checkpoint_bytes, count_params(m).total(),
                      params * k_min_checkpoint_bytes_per_param,
                      params * k_max_checkpoint_bytes_per_param)};
    }
  }
  return std::nullopt;
}

}  // namespace oomplan
