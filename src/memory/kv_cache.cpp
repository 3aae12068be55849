// KV-cache bytes: per token and layer (K and V heads split by tp, MLA's
// latent), and the layer-tokens a batch keeps (sliding-window layers capped at
// the window). Inference only: training keeps no cache.

#include "memory/internal.hpp"

#include <algorithm>

namespace oomplan::memory_terms {

std::int64_t kv_heads_per_gpu(const Model& m, int tp) {
  // K and V keep max(1, kv_heads / tp) heads per GPU: GQA/MQA heads are
  // replicated when there are fewer than GPUs (vLLM linear.py
  // QKVParallelLinear num_kv_head_replicas).
  return std::max<std::int64_t>(1, ceil_div(m.num_kv_heads, tp));
}

double kv_layer_tokens(const Model& m, std::int64_t layer_begin,
                       std::int64_t layer_end, std::int64_t seq) {
  if (m.sliding_window <= 0) {
    return static_cast<double>(layer_end - layer_begin) *
           static_cast<double>(seq);
  }
  // Sliding-window (and chunked-attention) layers keep at most the window.
  const std::int64_t local = std::min(seq, m.sliding_window);
  double tokens = 0;
  for (std::int64_t i = layer_begin; i < layer_end; ++i) {
    tokens += static_cast<double>(is_local_layer(m, i) ? local : seq);
  }
  return tokens;
}

// AutoAWQ's fused attention (awq/modules/fused/attn.py QuantAttentionFused,
// cache.py WindowedCache) allocates at load, per layer, an fp16 K and V of
// batch x max_seq_len x kv_heads x head_dim whatever the request's length,
// and a complex64 RoPE table of 2 x max_seq_len x head_dim / 2 (8 B each).
Bytes awq_fused_cache_bytes(const Model& m, const Resolved& s,
                            std::int64_t layer_begin, std::int64_t layer_end) {
  const double len = static_cast<double>(s.awq_fused_len);
  const double layers =
      static_cast<double>(std::max<std::int64_t>(0, layer_end - layer_begin));
  const double hd = static_cast<double>(m.head_dim);
  const double kv = 2.0 * static_cast<double>(s.batch) * len *
                    static_cast<double>(kv_heads_per_gpu(m, s.tp)) * hd * 2.0;
  const double rope = 2.0 * len * (hd / 2.0) * 8.0;
  return saturated_bytes(layers * (kv + rope));
}

}  // namespace oomplan::memory_terms

namespace oomplan {

using namespace memory_terms;

Bytes kv_bytes_per_token(const Model& model, const Resolved& setup,
                         std::int64_t layer_begin, std::int64_t layer_end) {
  const Model& m = model;
  const Bytes bytes = dtype_bytes(setup.kv_dtype);
  Bytes per_layer = 0;
  if (m.kv_lora_rank > 0) {
    // MLA caches one latent "head" of kv_lora_rank + qk_rope_head_dim per
    // token, not split by tp (vllm/v1/kv_cache_interface.py MLAAttentionSpec).
    per_layer = (m.kv_lora_rank + m.qk_rope_head_dim) * bytes;
  } else {
    // K and V, max(1, kv_heads / tp) heads per GPU (GQA/MQA replicate).
    const std::int64_t heads = kv_heads_per_gpu(m, setup.tp);
    per_layer = 2 * heads * m.head_dim * bytes;
  }
  const std::int64_t n = std::max<std::int64_t>(0, layer_end - layer_begin);
  return per_layer * n;
}

Bytes kv_cache_bytes(const Model& model, const Resolved& setup,
                     std::int64_t layer_begin, std::int64_t layer_end,
                     std::int64_t batch, std::int64_t seq) {
  const double per_layer =
      static_cast<double>(kv_bytes_per_token(model, setup, 0, 1));
  const double tokens = kv_layer_tokens(model, layer_begin, layer_end, seq);
  return saturated_bytes(per_layer * tokens * static_cast<double>(batch));
}

}  // namespace oomplan
