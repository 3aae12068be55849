// Text-decoder families of the Hugging Face importer (hf_families.hpp): the
// Llama layout and its relatives, the mixture-of-experts decoders, DeepSeek's
// multi-head latent attention, the GPT-style LayerNorm decoders and T5.

#include "model/hf_families.hpp"

#include <algorithm>

namespace oomplan::hf {

// ---- the Llama layout ----

namespace {

// Qwen2Config and SmolLM3Config: sliding_window applies only when
// use_sliding_window says so (default false), on the layers layer_types names.
void set_opt_in_sliding(const Config& c, Model& m) {
  const std::int64_t window = c.window("sliding_window", 0);  // validated
  set_sliding(m, c.flag("use_sliding_window", false) ? window : 0,
              std::max(0, global_every_from_layer_types(c)));
}

}  // namespace

// LlamaConfig, MistralConfig (sliding_window 4096), Phi3Config
// (sliding_window None).
void read_llama(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
  const std::int64_t window =
      s.root.window("sliding_window", s.type == "mistral" ? 4096 : 0);
  set_sliding(m, window, std::max(0, global_every_from_layer_types(s.root)));
}

// SmolLM3Config (modeling_smollm3.py): the Llama layout, tied by default;
// its NoPE layers (no_rope_layers) skip RoPE and hold the same parameters.
void read_smollm3(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, true);
  set_opt_in_sliding(s.root, m);
}

// StableLmConfig (modeling_stablelm.py): Llama attention with q/k/v bias when
// use_qkv_bias and o without, a gated SiLU MLP without bias, LayerNorms with
// bias (use_norm_bias is not read), one per layer with use_parallel_residual;
// qk_layernorm adds a LayerNorm per head over q and k (bias=False: the
// count adds their d-wide biases too, a few hundred thousand parameters);
// untied.
void read_stablelm(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
  m.norm = NormKind::layer_norm;
  m.qkv_bias = s.root.flag("use_qkv_bias", false);
  m.o_bias = false;
  m.mlp_bias = false;
  if (s.root.flag("use_parallel_residual", false)) {
    m.parallel_block = true;
    m.norms_per_layer = 1;
  }
  m.qk_norm_full = s.root.flag("qk_layernorm", false);
}

// Qwen2Config (q/k/v bias; use_sliding_window false), Qwen3Config (head_dim
// 128, q/k norm).
void read_qwen(const Source& s, Model& m) {
  const bool qwen3 = s.type == "qwen3";
  read_llama_like(s.root, m, qwen3 ? 128 : 0, false);
  if (qwen3) {
    m.qk_norm = true;
  } else {
    m.qkv_bias = true;  // Qwen2Attention: q, k, v with bias, o without
    m.o_bias = false;
  }
  set_opt_in_sliding(s.root, m);
}

// GraniteConfig: the Llama layout; its multipliers scale activations, not
// parameters.
void read_granite(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
}

// InternLM2Config / modeling_internlm2.py (trust_remote_code;
// InternEvo-HFModels d335092): the Llama shapes with q, k and v fused in one
// wqkv; `bias` (default true) puts a bias on wqkv and wo, never on the w1/w3/w2
// MLP; untied output head.
void read_internlm2(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
  m.qkv_bias = s.root.flag("bias", true);
  m.o_bias = m.qkv_bias;
  m.mlp_bias = false;
}

// Olmo2Config / modeling_olmo2.py: Llama attention and MLP with q_norm and
// k_norm over the whole projections and the norms after each sublayer
// (post_attention_layernorm, post_feedforward_layernorm).
void read_olmo2(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
  m.qk_norm_full = true;
}

// Olmo3Config (modular_olmo3.py): OLMo 2's modules, with sliding-window
// attention (sliding_window, default 4096) on the layers layer_types names,
// by default three of every four.
void read_olmo3(const Source& s, Model& m) {
  read_olmo2(s, m);
  const int every = global_every_from_layer_types(s.root);
  set_sliding(m, s.root.window("sliding_window", 4096),
              every == -2 ? 4 : every);
}

// Exaone4Config (modular_exaone4.py): Llama projections without bias,
// per-head q_norm/k_norm over head_dim, OLMo 2's post-norm layer; sliding
// window (default 4096) on the layers layer_types names, else all but every
// sliding_window_pattern-th (default 4; "LLLG" spells 4).
void read_exaone4(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
  m.qk_norm = true;
  int every = global_every_from_layer_types(s.root);
  if (every == -2) {
    const json* pattern = s.root.find({"sliding_window_pattern"});
    every = pattern == nullptr ? 4
            : pattern->is_number_integer()
                ? as_period(pattern->get<std::int64_t>())
            : pattern->is_string()
                ? static_cast<int>(pattern->get<std::string>().find('G') + 1)
                : 4;
  }
  set_sliding(m, s.root.window("sliding_window", 4096), every);
}

// GemmaConfig (Gemma 1): head_dim 256, GeGLU, tied embeddings.
void read_gemma(const Source& s, Model& m) {
  read_llama_like(s.root, m, 256, true);
}

// Gemma2Config: head_dim 256, sliding_window 4096 on even layers, four norms
// per layer, tied embeddings.
void read_gemma2(const Source& s, Model& m) {
  read_llama_like(s.root, m, 256, true);
  m.norms_per_layer = 4;
  const int every = global_every_from_layer_types(s.root);
  set_sliding(m, s.root.window("sliding_window", 4096),
              every == -2 ? 2 : every);
}

// CohereForCausalLM: parallel attention and MLP after one LayerNorm without
// bias (weight only, counted like RMSNorm); tied embeddings.
void read_cohere(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, true);
  m.parallel_block = true;
  m.norms_per_layer = 1;
}

// Cohere2Config (Command R7B, Command A): Cohere's parallel block after one
// bias-free LayerNorm, tied embeddings, and sliding-window layers with every
// sliding_window_pattern-th layer global.
void read_cohere2(const Source& s, Model& m) {
  read_cohere(s, m);
  int every = global_every_from_layer_types(s.root);
  if (every == -2) {
    every = as_period(s.root.get({"sliding_window_pattern"}, 4));
  }
  set_sliding(m, s.root.window("sliding_window", 4096), every);
}

// ---- mixture of experts ----

// MixtralConfig: experts as wide as intermediate_size.
void read_mixtral(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, false);
  read_moe_common(s.root, m, "num_local_experts");
  m.moe_intermediate_size = m.intermediate_size;
  set_sliding(m, s.root.window("sliding_window", 0), 0);
}

// PhimoeConfig / modeling_phimoe.py: the Mixtral layout with LayerNorms
// (weight and bias), biased q, k, v, o (attention_bias) and an lm_head bias
// (lm_head_bias).
void read_phimoe(const Source& s, Model& m) {
  const Config& root = s.root;
  read_llama_like(root, m, 0, false);
  read_moe_common(root, m, "num_local_experts");
  m.moe_intermediate_size = m.intermediate_size;
  m.norm = NormKind::layer_norm;
  m.qkv_bias = m.o_bias = root.flag("attention_bias", false);
  m.lm_head_bias = root.flag("lm_head_bias", false);
  set_sliding(m, root.window("sliding_window", 0), 0);
}

// Qwen2MoeConfig / Qwen3MoeConfig: sparse blocks every decoder_sparse_step
// layers; Qwen2-MoE adds one shared expert with its own width and a sigmoid
// gate (Qwen2MoeSparseMoeBlock), Qwen3-MoE per-head q/k norm.
void read_qwen_moe(const Source& s, Model& m) {
  const Config& root = s.root;
  const bool qwen3 = s.type == "qwen3_moe";
  read_llama_like(root, m, qwen3 ? 128 : 0, false);
  read_moe_common(root, m, "num_experts");
  m.moe_intermediate_size = root.need({"moe_intermediate_size"});
  read_qwen_sparse(root, m);
  if (qwen3) {
    m.qk_norm = true;
    return;
  }
  m.qkv_bias = true;
  m.o_bias = false;
  m.shared_expert_intermediate_size =
      root.get({"shared_expert_intermediate_size"}, 0);
  m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
  m.shared_expert_gate = m.num_shared_experts > 0;
}

// DeepseekV2Config / DeepseekV3Config (Kimi K2: the DeepseekV3ForCausalLM
// architecture under its own model_type, config.json "architectures"):
// multi-head latent attention, routed and shared experts after
// first_k_dense_replace dense layers.
void read_deepseek(const Source& s, Model& m) {
  const Config& c = s.root;
  read_llama_like(c, m, 0, false);
  m.q_lora_rank = c.get({"q_lora_rank"}, 0);
  m.kv_lora_rank = c.need({"kv_lora_rank"});
  m.qk_rope_head_dim = c.need({"qk_rope_head_dim"});
  m.qk_nope_head_dim = c.need({"qk_nope_head_dim"});
  m.v_head_dim = c.need({"v_head_dim"});
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  m.num_kv_heads = m.num_heads;  // MLA: every head reads the shared latent
  if (c.get({"n_routed_experts"}, 0) <= 0) {
    return;
  }
  read_moe_common(c, m, "n_routed_experts");
  m.moe_intermediate_size = c.need({"moe_intermediate_size"});
  m.num_shared_experts = c.get({"n_shared_experts"}, 0);
  m.first_k_dense = c.get({"first_k_dense_replace"}, 0);
  if (c.get({"moe_layer_freq"}, 1) != 1) {
    c.fail("moe_layer_freq",
           "only 1 (every layer after the dense ones) is "
           "supported");
  }
  // DeepseekV3TopkRouter.e_score_correction_bias (topk_method noaux_tc).
  m.router_bias = c.text("topk_method") == "noaux_tc";
}

// Glm4MoeConfig / modeling_glm4_moe.py: GQA with q, k, v biases
// (attention_bias) and no o bias, optional per-head q/k RMSNorm
// (use_qk_norm), DeepSeek-style MoE after first_k_dense_replace dense layers
// (routed experts, n_shared_experts x moe_intermediate_size shared, a router
// with e_score_correction_bias). The MTP layers (num_nextn_predict_layers)
// are not part of Glm4MoeForCausalLM.
void read_glm4_moe(const Source& s, Model& m) {
  const Config& root = s.root;
  read_llama_like(root, m, 128, false);
  m.qkv_bias = root.flag("attention_bias", false);
  m.o_bias = false;
  m.qk_norm = root.flag("use_qk_norm", false);
  read_moe_common(root, m, "n_routed_experts");
  m.moe_intermediate_size = root.need({"moe_intermediate_size"});
  m.num_shared_experts = root.get({"n_shared_experts"}, 1);
  m.first_k_dense = root.get({"first_k_dense_replace"}, 1);
  m.router_bias = true;
}

// GptOssConfig: biases on q, k, v, o; learned sinks; 128-token sliding window
// on even layers; MoE with router and expert biases.
void read_gpt_oss(const Source& s, Model& m) {
  const Config& root = s.root;
  read_llama_like(root, m, 64, false);
  m.qkv_bias = root.flag("attention_bias", true);
  m.o_bias = m.qkv_bias;
  m.attention_sinks = true;
  m.mlp_bias = true;
  m.router_bias = true;
  read_moe_common(root, m, "num_local_experts");
  m.moe_intermediate_size = m.intermediate_size;
  const int every = global_every_from_layer_types(root);
  set_sliding(m, root.window("sliding_window", 128), every == -2 ? 2 : every);
}

// ---- GPT-style decoders: LayerNorms, plain GELU MLPs, biases ----

namespace {

// The block every family below shares: a plain (GELU) MLP and LayerNorms
// with weight and bias.
void set_gpt_block(Model& m) {
  m.mlp = MlpKind::plain;
  m.norm = NormKind::layer_norm;
}

}  // namespace

// GPTNeoXConfig (Pythia, GPT-NeoX-20B): fused qkv and dense with bias, GELU
// MLP with bias, two LayerNorms per layer, untied embed_out.
void read_gpt_neox(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"hidden_size"});
  m.num_layers = root.need({"num_hidden_layers"});
  m.num_heads = root.need({"num_attention_heads"});
  m.num_kv_heads = m.num_heads;
  m.head_dim = exact_head_dim(root, root.key({"hidden_size"}), m.hidden_size,
                              root.key({"num_attention_heads"}), m.num_heads);
  m.intermediate_size = root.need({"intermediate_size"});
  m.vocab_size = root.need({"vocab_size"});
  m.max_position_embeddings = root.get({"max_position_embeddings"}, 2048);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
  set_gpt_block(m);
  m.parallel_block = root.flag("use_parallel_residual", true);
  m.qkv_bias = m.o_bias = root.flag("attention_bias", true);
  m.mlp_bias = true;
}

// Starcoder2Config (modeling_starcoder2.py): separate q/k/v/o and a GELU
// MLP (c_fc, c_proj), every linear biased when use_bias (default true), two
// LayerNorms per layer, lm_head without bias; tie_word_embeddings is not in
// the config class, so PretrainedConfig's true applies unless the file says
// otherwise (starcoder2-15b: false); sliding_window on every layer.
void read_starcoder2(const Source& s, Model& m) {
  read_llama_like(s.root, m, 0, true);
  set_gpt_block(m);
  const bool bias = s.root.flag("use_bias", true);
  m.qkv_bias = m.o_bias = m.mlp_bias = bias;
  set_sliding(m, s.root.window("sliding_window", 0), 0);
}

// GPTBigCodeConfig (modeling_gpt_bigcode.py, StarCoder 1, SantaCoder): GPT-2's
// names and layout, with one K/V head when multi_query (the default) in the
// fused c_attn; lm_head without bias, tied.
void read_gpt_bigcode(const Source& s, Model& m) {
  read_gpt2(s, m);
  if (s.root.flag("multi_query", true)) {
    m.num_kv_heads = 1;
  }
}

// GPTJConfig (modeling_gptj.py): q/k/v/out_proj without bias, fc_in/fc_out
// with bias, attention and MLP in parallel after one LayerNorm, rotary
// positions (no table), untied lm_head with bias.
void read_gptj(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"n_embd", "hidden_size"});
  m.num_layers = root.need({"n_layer", "num_hidden_layers"});
  m.num_heads = root.need({"n_head", "num_attention_heads"});
  m.num_kv_heads = m.num_heads;
  m.head_dim =
      exact_head_dim(root, root.key({"n_embd", "hidden_size"}), m.hidden_size,
                     root.key({"n_head", "num_attention_heads"}), m.num_heads);
  m.intermediate_size = root.get({"n_inner"}, 4 * m.hidden_size);
  m.vocab_size = root.get({"vocab_size"}, 50400);
  m.max_position_embeddings = root.get({"n_positions"}, 2048);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
  set_gpt_block(m);
  m.norms_per_layer = 1;
  m.parallel_block = true;
  m.mlp_bias = true;
  m.lm_head_bias = true;
}

// PhiConfig (Phi-1/1.5/2): parallel block after one LayerNorm, biases on
// every linear layer including lm_head, GELU MLP.
void read_phi(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"hidden_size"});
  m.num_layers = root.need({"num_hidden_layers"});
  m.num_heads = root.need({"num_attention_heads"});
  m.num_kv_heads = root.get({"num_key_value_heads"}, m.num_heads);
  m.head_dim = exact_head_dim(root, root.key({"hidden_size"}), m.hidden_size,
                              root.key({"num_attention_heads"}), m.num_heads);
  m.intermediate_size = root.need({"intermediate_size"});
  m.vocab_size = root.need({"vocab_size"});
  m.max_position_embeddings = root.get({"max_position_embeddings"}, 2048);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
  set_gpt_block(m);
  m.norms_per_layer = 1;
  m.parallel_block = true;
  m.qkv_bias = m.o_bias = m.mlp_bias = true;
  m.lm_head_bias = true;
}

// GPT2Config: n_embd, n_layer, n_head, n_inner (None = 4 n_embd), n_positions
// learned positions; biases everywhere; tied lm_head.
void read_gpt2(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"n_embd", "hidden_size"});
  m.num_layers = root.need({"n_layer", "num_hidden_layers"});
  m.num_heads = root.need({"n_head", "num_attention_heads"});
  m.num_kv_heads = m.num_heads;
  m.head_dim =
      exact_head_dim(root, root.key({"n_embd", "hidden_size"}), m.hidden_size,
                     root.key({"n_head", "num_attention_heads"}), m.num_heads);
  m.intermediate_size = root.get({"n_inner"}, 4 * m.hidden_size);
  m.vocab_size = root.get({"vocab_size"}, 50257);
  m.max_position_embeddings = root.get({"n_positions"}, 1024);
  m.learned_positions = m.max_position_embeddings;
  m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
  set_gpt_block(m);
  m.qkv_bias = m.o_bias = m.mlp_bias = true;
}

// BloomConfig: n_embed / hidden_size, n_layer, n_head, 4h GELU MLP, ALiBi (no
// position table), word_embeddings_layernorm, biases, tied.
void read_bloom(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"hidden_size", "n_embed"});
  m.num_layers = root.need({"n_layer", "num_hidden_layers"});
  m.num_heads = root.need({"n_head", "num_attention_heads"});
  m.num_kv_heads = m.num_heads;
  m.head_dim =
      exact_head_dim(root, root.key({"hidden_size", "n_embed"}), m.hidden_size,
                     root.key({"n_head", "num_attention_heads"}), m.num_heads);
  m.intermediate_size = 4 * m.hidden_size;
  m.vocab_size = root.get({"vocab_size"}, 250880);
  m.max_position_embeddings = root.get({"seq_length"}, 2048);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
  set_gpt_block(m);
  m.qkv_bias = m.o_bias = m.mlp_bias = true;
  m.embedding_norm = true;
}

// FalconConfig: new_decoder_architecture uses num_kv_heads groups and two
// LayerNorms (ln_attn, ln_mlp); the older one multi-query (1 KV head) with
// one input LayerNorm when parallel_attn. ffn_hidden_size = 4h.
void read_falcon(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"hidden_size", "n_embed"});
  m.num_layers = root.need({"num_hidden_layers", "n_layer"});
  m.num_heads = root.need({"num_attention_heads", "n_head"});
  const bool new_arch = root.flag("new_decoder_architecture", false);
  const bool parallel = root.flag("parallel_attn", true);
  if (new_arch) {
    m.num_kv_heads = root.get({"num_kv_heads", "n_head_kv"}, m.num_heads);
  } else {
    m.num_kv_heads = root.flag("multi_query", true) ? 1 : m.num_heads;
  }
  m.head_dim =
      exact_head_dim(root, root.key({"hidden_size", "n_embed"}), m.hidden_size,
                     root.key({"num_attention_heads", "n_head"}), m.num_heads);
  m.intermediate_size = root.get({"ffn_hidden_size"}, 4 * m.hidden_size);
  m.vocab_size = root.need({"vocab_size"});
  m.max_position_embeddings = root.get({"max_position_embeddings"}, 2048);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
  set_gpt_block(m);
  m.parallel_block = parallel;
  m.norms_per_layer = new_arch ? 2 : (parallel ? 1 : 2);
  const bool bias = root.flag("bias", false);
  m.qkv_bias = m.o_bias = m.mlp_bias = bias;
}

// ---- encoder-decoder ----

// T5Config: d_model, d_ff, d_kv, num_heads, num_layers, num_decoder_layers
// (None = num_layers); feed_forward_proj "relu" (wi, wo) or "gated-gelu"
// (wi_0, wi_1, wo); T5LayerNorm is weight-only; tied by default.
void read_t5(const Source& s, Model& m) {
  const Config& root = s.root;
  m.hidden_size = root.need({"d_model"});
  m.intermediate_size = root.need({"d_ff"});
  m.head_dim = root.need({"d_kv"});
  m.num_heads = root.need({"num_heads"});
  m.num_kv_heads = m.num_heads;
  m.num_layers = root.need({"num_layers"});
  m.num_decoder_layers = root.get({"num_decoder_layers"}, m.num_layers);
  m.vocab_size = root.need({"vocab_size"});
  m.max_position_embeddings = root.get({"n_positions"}, 512);
  m.relative_attention_buckets =
      root.get({"relative_attention_num_buckets"}, 32);
  m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
  const std::string proj = root.text("feed_forward_proj");
  m.mlp = proj.rfind("gated-", 0) == 0 ? MlpKind::gated : MlpKind::plain;
}

}  // namespace oomplan::hf
