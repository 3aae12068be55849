// transformers generate (PyTorch eager) at its peak, the prefill: the largest
// transient of one decoder layer over the prompt, the hidden states between
// layers, and the last position's logits.

#include "memory/internal.hpp"

#include <algorithm>

namespace oomplan::memory_terms {

double hf_hidden_buffers(const Model& m, const Resolved& s) {
  // Residual stream, normed input and the layer output (LlamaDecoderLayer).
  const double t = as_double(s.batch) * as_double(s.seq);
  return 3.0 * t * as_double(m.hidden_size) * dtype_bytes(s.dtype);
}

double hf_attention_transient(const Model& m, const Resolved& s) {
  const double d = dtype_bytes(s.dtype);
  const int tp = s.tp;
  const double b = as_double(s.batch);
  const double seq = as_double(s.seq);
  const double t = b * seq;
  const double heads = as_double(m.num_heads) / tp;
  const double qk_dim = m.kv_lora_rank > 0
                            ? as_double(m.qk_nope_head_dim + m.qk_rope_head_dim)
                            : as_double(m.head_dim);
  const double kvh =
      m.kv_lora_rank > 0 ? heads : as_double(kv_heads_per_gpu(m, tp));
  // q, k, v projections and the attention output; eager expands K/V to every
  // query head (repeat_kv in modeling_llama). sdpa passes enable_gqa instead
  // when no padding mask is needed (sdpa_attention.py use_gqa_in_sdpa) and
  // flash reads the KV heads directly.
  double attention = t * (2.0 * heads + 2.0 * kvh) * qk_dim * d;
  if (s.awq_fused_len > 0) {
    // AutoAWQ QuantAttentionFused over the prompt, whatever --attn: K and V
    // repeat_interleave'd to every query head, fp16 scores, then
    // F.softmax(scores.float()) holds the fp32 copy and the fp32 result
    // beside them (2 + 4 + 4 B per score), and one (1, 1, s, s) causal mask
    // (awq/modules/fused/attn.py, awq/utils/fused_utils.py).
    return attention + 2.0 * t * heads * qk_dim * d +
           b * heads * seq * seq * (d + 8.0) + seq * seq * d;
  }
  if (s.attn == Attn::eager) {
    attention += 2.0 * t * heads * qk_dim * d;
    // eager_attention_forward: q.k^T scores b x heads x s^2 in dtype; the
    // masked copy, the fp32 softmax and its cast back each allocate while the
    // previous tensor is still referenced, so the peak holds 2 x dtype + 4 B
    // per score, plus the 4D causal mask b x s^2 in dtype.
    attention += b * heads * seq * seq * (2.0 * d + 4.0) + b * seq * seq * d;
  }
  return attention;
}

double hf_mlp_transient(const Model& m, const Resolved& s) {
  const double d = dtype_bytes(s.dtype);
  const int tp = s.tp;
  const double t = as_double(s.batch) * as_double(s.seq);
  const double h = as_double(m.hidden_size);
  // MLP: down(act(gate(x)) * up(x)) holds act(gate), up and their product
  // (gated, 3 x I); GELU MLPs hold fc1 and its activation (2 x I).
  const double matrices = m.mlp == MlpKind::gated ? 3.0 : 2.0;
  const double mlp = matrices * t * as_double(m.intermediate_size) / tp * d;
  if (m.num_experts == 0) {
    return mlp;
  }
  // HF MoE blocks loop over experts: the fp32 router logits, the output
  // accumulator and one expert's MLP over its tokens (taken as all tokens, a
  // bound), plus shared experts over every token.
  const double shared_i = as_double(m.num_shared_experts) *
                          as_double(m.shared_expert_intermediate_size > 0
                                        ? m.shared_expert_intermediate_size
                                        : m.moe_intermediate_size);
  const double moe =
      t * as_double(m.num_experts) * 4.0 + t * h * d +
      matrices * t * as_double(m.moe_intermediate_size) / tp * d +
      matrices * t * shared_i / tp * d;
  return std::max(mlp, moe);
}

double nf4_dequant_transient(const Model& m, const Resolved& s) {
  if (s.quant != Quant::nf4 && s.quant != Quant::nf4_nodq) {
    return 0;
  }
  // bitsandbytes 4-bit layers dequantize their weight to dtype before the
  // matmul when more than one token goes through (bnb matmul_4bit ->
  // dequantize_4bit + F.linear): one MLP matrix at a time.
  const double widest =
      as_double(std::max(m.intermediate_size, m.moe_intermediate_size));
  return as_double(m.hidden_size) * widest / s.tp * dtype_bytes(s.dtype);
}

namespace {

// A quantized linear's features per GPU (tensor parallel splits one side).
struct LinearShape {
  double in = 0;
  double out = 0;
};

// The linears GPTQ and AWQ quantize in a decoder layer (the lm_head stays
// 16-bit):
// q, o; the MLP's gate/up and down; routed and shared experts.
std::vector<LinearShape> quantized_linears(const Model& m, int tp) {
  const double h = as_double(m.hidden_size);
  const double q = as_double(m.num_heads) * as_double(m.head_dim);
  std::vector<LinearShape> out = {{h, q / tp}, {q / tp, h}};
  for (const std::int64_t i : {m.intermediate_size, m.moe_intermediate_size,
                               m.shared_expert_intermediate_size}) {
    if (i > 0) {
      out.push_back({h, as_double(i) / tp});
      out.push_back({as_double(i) / tp, h});
    }
  }
  return out;
}

}  // namespace

Bytes gptq_kernel_scratch(const Model& m, const Resolved& s) {
  double most = 0;
  for (const LinearShape& l : quantized_linears(m, s.tp)) {
    switch (s.gptq_kernel) {
      case GptqKernel::exllama:
        // AutoGPTQ autogptq_post_init (auto_gptq/modeling/_utils.py): per
        // device, temp_dq = fp16 in x out of the largest layer; temp_state
        // is 1 x 1 without act-order.
        most = std::max(most, 2.0 * l.in * l.out);
        break;
      case GptqKernel::exllamav2:
        // qlinear_exllamav2.py scratch_space_fixed(max_input_len=2048,
        // max_batch_size=8): temp_dq_size (in x out x 2 + 128) +
        // temp_fwd_size (out x 2048 x 8 x 4 + 128), the largest layer's,
        // one buffer per device that every layer shares.
        most = std::max(most, 2.0 * l.in * l.out + 128.0 +
                                  l.out * 2048.0 * 8.0 * 4.0 + 128.0);
        break;
      default:
        break;
    }
  }
  return saturated_bytes(most);
}

double int4_dequant_transient(const Model& m, const Resolved& s, double rows) {
  // Bytes per weight of the whole layer dequantized for one call:
  // - AutoGPTQ qlinear_cuda_old.py (kernel_switch_threshold 128) and
  //   GPTQModel's TorchQuantLinear (always) shift the packed weight out to
  //   an int32 in x out tensor first: 4 B;
  // - AutoAWQ's WQLinear_GEMM (awq/modules/linear/gemm.py) calls
  //   dequantize_weights_cuda and torch.matmul when batch x tokens >= 1024
  //   (FP16_MATMUL_HEURISTIC_CONDITION): an fp16 in x out weight, 2 B. Its
  //   fused layers keep it for down_proj (awq/modules/fused/mlp.py); from
  //   v5 transformers loads unfused AWQ with GPTQModel instead.
  double per_weight = 0;
  if ((s.gptq_kernel == GptqKernel::cuda_old && rows >= 128) ||
      s.gptq_kernel == GptqKernel::torch) {
    per_weight = 4.0;
  } else if (s.quant == Quant::awq && s.engine == Engine::hf && !s.training() &&
             rows >= 1024 &&
             (s.awq_fused_len > 0 ||
              s.transformers_release < k_transformers_awq_gptqmodel)) {
    per_weight = 2.0;
  }
  double most = 0;
  for (const LinearShape& l : quantized_linears(m, s.tp)) {
    most = std::max(most, per_weight * l.in * l.out);
  }
  return most;
}

Bytes hf_prefill_activations(const Model& m, const Resolved& s) {
  return saturated_bytes(
      hf_hidden_buffers(m, s) +
      std::max(hf_attention_transient(m, s), hf_mlp_transient(m, s)) +
      nf4_dequant_transient(m, s) +
      int4_dequant_transient(m, s, as_double(s.batch) * as_double(s.seq)));
}

// The prefill's logits by transformers release (generation/utils.py and
// modeling_llama.py LlamaForCausalLM.forward):
// - from 4.46 (#33902): lm_head over the last position only in dtype
//   (logits_to_keep=1), and the fp32 copy _sample() takes of it;
// - 4.45 (#31292, num_logits_to_keep=1): the last position, upcast with
//   .float() in the model: the same bytes;
// - before 4.45: lm_head over every prompt position, then
//   `logits = logits.float()`: both copies live at the cast (one when the
//   model already runs in fp32).
bool hf_full_prefill_logits(const Resolved& s) {
  return s.transformers_release < k_transformers_last_logits;
}

Bytes hf_logits(const Model& m, const Resolved& s) {
  const double d = dtype_bytes(s.dtype);
  const double rows = as_double(s.batch) * as_double(m.vocab_size);
  if (hf_full_prefill_logits(s)) {
    return saturated_bytes(rows * as_double(s.seq) * (d < 4 ? d + 4.0 : d));
  }
  return saturated_bytes(rows * (d + 4.0));
}

// generate before 4.42 keeps the cache as tuples in model_kwargs; the model
// wraps them (DynamicCache.from_legacy_cache, 4.36-4.41) or concatenates in
// each attention layer (before 4.36), and torch.cat makes a new tensor per
// layer while the old tuple is still referenced: two full caches at the end
// of every step (transformers #30536, "2 copies of the full cache in every
// iteration"). From 4.42 generate carries one DynamicCache whose update()
// replaces each layer's tensor, freeing the old one.
bool hf_tuple_cache(const Resolved& s) {
  return s.transformers_release < k_transformers_one_cache;
}

// Before 4.42 the loop takes `outputs.logits[:, -1, :]` as a view and never
// deletes `outputs`, so the prefill's fp32 logits over every position
// outlive step 1 (#30536: step 2 peaks at 2 x past KV + the first
// iteration's logits).
Bytes hf_decode_logits(const Model& m, const Resolved& s) {
  return saturated_bytes(as_double(s.batch) * as_double(s.seq) *
                         as_double(m.vocab_size) * 4.0);
}

}  // namespace oomplan::memory_terms
