#pragma once

// Model: the architecture facts that decide memory, as plain values. Field
// names follow the Hugging Face config.json names where one exists
// (models/README.md is the field reference). Invariants (check_model(), run by
// the catalog loader and the Hugging Face importer before any arithmetic;
// trusted by the core): every size within its k_max_ bound, num_heads %
// num_kv_heads == 0, experts_per_tok <= num_experts, at most k_max_params
// parameters.

#include "oomplan/model/dtype.hpp"
#include "oomplan/util/units.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

enum class MlpKind {
  gated,  // SwiGLU / GeGLU: gate, up, down (3 matrices of hidden x
          // intermediate)
  plain,  // GELU MLP: up, down (2 matrices); GPT-2, BLOOM, Falcon, T5, Phi-2
  none,   // no feed-forward block (Mamba, Mamba-2: MambaBlock is norm + mixer)
};

// The token mixer of one decoder layer.
enum class LayerKind {
  attention,         // self-attention (full, or local per sliding_window)
  mamba,             // Mamba-1 selective SSM (transformers MambaMixer)
  mamba2,            // Mamba-2 SSD (Mamba2Mixer)
  linear_attention,  // gated DeltaNet (Qwen3NextGatedDeltaNet)
  attention_mamba2,  // attention and Mamba-2 side by side (FalconH1)
};

enum class NormKind {
  rms,         // RMSNorm: weight only
  layer_norm,  // LayerNorm: weight and bias
};

// Which step of MODEL's resolution found the model (docs/models.md, "How a
// name is resolved"): a path, the catalog, the Hugging Face cache, or a
// catalog model the name mirrors under another org. The report's first line
// and the JSON's model.source say it.
enum class ModelStep { catalog, path, hf_cache, mirror };

struct ModelOrigin {
  ModelStep step = ModelStep::catalog;
  // path: the config.json read; hf_cache: the snapshot folder read; mirror:
  // the name as typed. Empty for the catalog.
  std::string detail;
};

struct Model {
  std::string name;                  // catalog id, e.g. "llama-3-70b"
  std::string hf_id;                 // e.g. "meta-llama/Meta-Llama-3-70B"
  std::vector<std::string> aliases;  // e.g. "llama3-70b", "llama-3-70b"
  std::string model_type;            // HF model_type, e.g. "llama", "qwen3_moe"

  // Core transformer dimensions.
  std::int64_t hidden_size = 0;
  std::int64_t num_layers =
      0;  // decoder layers (T5: encoder layers, see num_decoder_layers)
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;  // explicit or hidden_size / num_heads
  std::int64_t intermediate_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;

  // Block structure.
  MlpKind mlp = MlpKind::gated;
  NormKind norm = NormKind::rms;
  int norms_per_layer = 2;  // Gemma 2/3: 4 (pre/post attention and MLP)
  bool parallel_block =
      false;  // attention and MLP read the same input (Falcon, Cohere, GPT-J)
  bool qkv_bias = false;      // Qwen2, gpt-oss, GPT-2, BLOOM
  bool o_bias = false;        // gpt-oss, GPT-2, BLOOM
  bool mlp_bias = false;      // GPT-2, BLOOM, gpt-oss experts
  bool qk_norm = false;       // per-head RMSNorm on q and k (Qwen3, Gemma 3)
  bool qk_norm_full = false;  // OLMo 2: q_norm/k_norm over all of q (H d), k
  bool attention_output_gate =
      false;  // Qwen3-Next: q_proj also yields a per-head sigmoid gate
  bool attention_sinks = false;  // gpt-oss: one learned sink per head
  std::int64_t learned_positions =
      0;  // GPT-2: max_position_embeddings rows of position embeddings
  bool embedding_norm = false;  // BLOOM word_embeddings_layernorm
  bool lm_head_bias = false;    // Phi-2: lm_head has a bias of vocab_size

  // Attention layout. sliding_window > 0 gives local layers a window (Llama 4:
  // chunk size); global_every == 0 means every layer is local, N means layer i
  // is global iff (i + 1) % N == 0.
  std::int64_t sliding_window = 0;
  int global_every = 0;

  // Mixture of experts (num_experts == 0: dense).
  std::int64_t num_experts = 0;
  std::int64_t experts_per_tok = 0;
  std::int64_t moe_intermediate_size = 0;
  std::int64_t num_shared_experts = 0;
  std::int64_t shared_expert_intermediate_size =
      0;                           // Qwen2-MoE; 0: moe_intermediate_size
  std::int64_t first_k_dense = 0;  // DeepSeek first_k_dense_replace
  bool shared_expert_gate =
      false;  // Qwen2-MoE: a hidden_size x 1 sigmoid gate on the shared expert
  int moe_every = 1;         // layer i is MoE iff (i + 1) % moe_every == 0
  bool router_bias = false;  // gpt-oss router bias, DeepSeek-V3 score bias

  // Multi-head latent attention (kv_lora_rank > 0: DeepSeek V2/V3).
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t v_head_dim = 0;

  // Encoder-decoder (T5): decoder layers, each with self- and cross-attention.
  std::int64_t num_decoder_layers = 0;
  std::int64_t relative_attention_buckets =
      0;  // T5 relative position bias table

  // Hybrid and state-space models. layer_types is empty when every layer is
  // attention; else it has num_layers entries.
  std::vector<LayerKind> layer_types;
  // Mamba-1 / Mamba-2 mixers (MambaMixer, Mamba2Mixer, FalconH1Mixer).
  std::int64_t ssm_inner_size = 0;   // d_inner: expand x hidden, mamba_d_ssm
  std::int64_t ssm_state_size = 0;   // N: state_size, mamba_d_state
  std::int64_t ssm_conv_kernel = 0;  // K: conv_kernel, mamba_d_conv
  std::int64_t ssm_dt_rank = 0;      // Mamba-1 time_step_rank (dt rank)
  std::int64_t ssm_num_heads = 0;    // Mamba-2 heads
  std::int64_t ssm_head_dim = 0;     // Mamba-2 head dim (heads x dim = inner)
  std::int64_t ssm_groups = 0;       // Mamba-2 n_groups of B and C
  bool ssm_conv_bias = true;         // use_conv_bias
  bool ssm_proj_bias = false;        // use_bias on in_proj and out_proj
  bool ssm_inner_norms = false;      // Jamba: dt, B and C RMSNorms
  bool ssm_gated_norm = true;        // Mamba-2 gated RMSNorm over d_inner
  // Gated DeltaNet (Qwen3-Next linear attention).
  std::int64_t linear_key_heads = 0;
  std::int64_t linear_value_heads = 0;
  std::int64_t linear_key_head_dim = 0;
  std::int64_t linear_value_head_dim = 0;
  std::int64_t linear_conv_kernel = 0;

  // Parameters outside the text model (vision tower, projector) that the
  // checkpoint holds.
  std::int64_t extra_params = 0;

  // The vision tower of a vision-language checkpoint (vision_layers 0: none
  // described): what vLLM's start-up profile runs its dummy images through.
  // One image of the largest size is (image / patch)² patches; every
  // merge x merge patches become one decoder token.
  std::int64_t vision_image_size = 0;  // side in pixels of the largest image
  std::int64_t vision_patch_size = 0;
  std::int64_t vision_temporal_patch_size = 1;  // frames per patch (Qwen-VL 2)
  std::int64_t vision_merge_size = 1;  // Qwen-VL spatial_merge_size, Gemma 3
                                       // pooling (64² patches -> 16² tokens)
  std::int64_t vision_hidden_size = 0;
  std::int64_t vision_intermediate_size = 0;
  std::int64_t vision_layers = 0;
  bool vision_gated_mlp = false;  // gate_up + SiLU (Qwen2.5-VL) vs fc1 + GELU
  std::int64_t vision_max_tiles = 0;  // mllama: an image is up to this many
                                      // tiles of vision_image_size (0: no
                                      // tiling)
  std::int64_t vision_intermediate_layers = 0;  // mllama: encoder layers
                                                // whose outputs are kept
  bool vision_video = false;  // takes video (Qwen2-VL, Qwen2.5-VL): vLLM also
                              // profiles a dummy video

  // The checkpoint's own weight format (`--quant auto`); Quant::none means
  // dtype weights.
  Quant checkpoint_quant = Quant::none;
  Dtype checkpoint_dtype = Dtype::bf16;
  // Linear weights the quantized checkpoint keeps in dtype: the modules its
  // quantization_config names in modules_to_not_convert / ignore (a
  // config.json import; 0 for the catalog's models).
  std::int64_t unquantized_params = 0;

  // Published figures for lint tests and exact weight sizes (0 = unknown).
  std::int64_t official_params =
      0;  // exact count from the publisher or the reference
  std::int64_t checkpoint_bytes = 0;  // safetensors index metadata.total_size
  std::int64_t params = 0;  // exact text-model count (catalog_facts), for lint
  std::int64_t params_active = 0;  // exact per-token count, for lint
  std::string checkpoint_note;     // how the checkpoint stores its weights

  bool operator==(const Model&) const = default;
};

// Parameter counts by group; every group sums over all layers. Linear weights
// are what quantization and tensor parallelism act on; norms and biases stay in
// dtype and replicate.
struct ParamCounts {
  std::int64_t embedding = 0;  // token (+ learned position) embeddings
  std::int64_t lm_head = 0;    // 0 when tied to the embedding
  std::int64_t attention =
      0;  // the token mixer's linear weights: q, k, v, o (+ MLA down/up
          // projections; Mamba in/x/dt/out and DeltaNet projections)
  std::int64_t kv_proj =
      0;  // the k and v part of `attention` (replicated when kv < tp)
  std::int64_t mlp = 0;             // dense MLP layers
  std::int64_t experts = 0;         // routed experts, all layers
  std::int64_t shared_experts = 0;  // shared experts, all layers
  std::int64_t router = 0;          // MoE gates
  std::int64_t small = 0;  // norms, biases, sinks, relative position tables
  std::int64_t extra = 0;  // vision tower etc. (Model::extra_params)
  std::int64_t outside_layers =
      0;  // the part of `small` in no layer: final norms, lm_head bias
  std::int64_t largest_layer = 0;  // the largest layer (span_params.largest)
  std::int64_t active =
      0;  // parameters used per token (MoE: top-k routed + shared)

  std::int64_t linear() const {
    return attention + mlp + experts + shared_experts + router;
  }
  std::int64_t total() const {
    return embedding + lm_head + linear() + small + extra;
  }
  // Every layer together (span_params over all of them).
  std::int64_t layers() const {
    return total() - embedding - lm_head - extra - outside_layers;
  }
};

// Exact parameter counts from the architecture (catalog_facts.md §1e formula,
// extended to MoE, MLA, sinks, biases and encoder-decoder).
ParamCounts count_params(const Model& model);

// Parameters of decoder layer `layer` (0-based) alone, for pipeline and layer
// splits: attention, MLP or experts, router, the layer's norms and biases.
// Encoder-decoder models (num_decoder_layers > 0) number the encoder layers
// 0..num_layers-1 and the decoder layers after them.
std::int64_t layer_params(const Model& model, std::int64_t layer);

// The layers [begin, end) together: layer_params summed, and the largest.
// Constant time unless the model mixes token mixers (layer_types).
struct LayerSpan {
  std::int64_t params = 0;
  std::int64_t largest = 0;
};
LayerSpan span_params(const Model& model, std::int64_t begin, std::int64_t end);

// How many of the layers [begin, end) are MoE layers (is_moe_layer).
std::int64_t moe_layer_count(const Model& model, std::int64_t begin,
                             std::int64_t end);

// An upper bound of count_params(model).total() computed in double, so it
// cannot overflow. Loaders reject models above k_max_params (no real model
// comes within a factor 100 of it), which keeps every int64 count exact.
double approx_params(const Model& model);
inline constexpr double k_max_params = 1e15;

// Structure bounds. Each lies far above every published model (the largest
// known value is in the comment), so a value beyond one is a typo or a hostile
// file; within them every per-layer product fits an int64, per-layer loops
// stay under a millisecond, and approx_params() decides the rest.
// Deepest: 126 layers (Llama 3.1 405B); deepest transformer published, DeepNet
// (Wang et al. 2022), 1,000 (500 + 500).
inline constexpr std::int64_t k_max_layers = 4096;
// Widest: hidden 25,600 (Megatron 1T, Narayanan et al. 2021, Table 1).
inline constexpr std::int64_t k_max_hidden = std::int64_t{1} << 20;
// Most query heads: 160 (Megatron 1T); DeepSeek-V3 and Llama 3.1 405B 128.
inline constexpr std::int64_t k_max_heads = std::int64_t{1} << 14;
// Widest head: 256 (Gemma 2/3); MLA q heads 192 (DeepSeek-V3).
inline constexpr std::int64_t k_max_head_dim = std::int64_t{1} << 14;
// Widest MLP: 73,728 (PaLM 540B, 4 x 18,432).
inline constexpr std::int64_t k_max_intermediate = std::int64_t{1} << 22;
// Widest SSM state: 256 (Falcon-H1 34B); conv kernels: 4.
inline constexpr std::int64_t k_max_conv_kernel = 1024;
// Largest vocabulary: 262,208 (Gemma 3).
inline constexpr std::int64_t k_max_vocab = std::int64_t{1} << 24;
// Longest context: 10,485,760 positions (Llama 4 Scout).
inline constexpr std::int64_t k_max_positions = std::int64_t{1} << 30;
// Most experts: 2,048 (Switch-C); 512 (Qwen3-Next), 384 (Kimi K2).
inline constexpr std::int64_t k_max_experts = std::int64_t{1} << 16;
// Norms per layer: 4 (Gemma 2/3); T5 buckets: 32.
inline constexpr std::int64_t k_max_norms_per_layer = 16;
inline constexpr std::int64_t k_max_buckets = std::int64_t{1} << 20;
// A checkpoint stores each parameter in 1 bit (BitNet-style packing) to 8
// bytes (fp64): metadata.total_size outside that range is not this model.
inline constexpr double k_min_checkpoint_bytes_per_param = 1.0 / 8.0;
inline constexpr double k_max_checkpoint_bytes_per_param = 8.0;

// One problem in a model's structure: the catalog key of the field
// (models/README.md) and what is wrong, e.g. {"num_key_value_heads", "3 does
// not divide num_attention_heads 4"}.
struct ModelProblem {
  std::string field;
  std::string problem;
};

// The one structure check, shared by the catalog loader and the Hugging Face
// importer: every size within its bound above, kv heads dividing the heads,
// head_dim >= 1, MoE settings and dense-layer counts inside the layer count,
// at most k_max_params parameters, checkpoint_bytes (when set) plausible for
// the parameter count. It compares before it multiplies, so it is safe on any
// values. Returns the first problem, or nullopt when the core may trust
// `model`.
std::optional<ModelProblem> check_model(const Model& model);

// True when layer `layer` uses the sliding window (or chunked attention).
bool is_local_layer(const Model& model, std::int64_t layer);

// True when layer `layer` is a MoE layer.
bool is_moe_layer(const Model& model, std::int64_t layer);

// The token mixer of layer `layer` (attention when layer_types is empty).
LayerKind layer_kind(const Model& model, std::int64_t layer);

// True when layer `layer` keeps a KV cache (attention, alone or beside a
// Mamba-2 mixer); false for Mamba and linear-attention layers. The KV cache
// counts only these layers.
bool is_attention_layer(const Model& model, std::int64_t layer);

// Number of attention layers among [0, num_layers).
std::int64_t attention_layer_count(const Model& model);

// The recurrent state one sequence keeps on one GPU, all layers together,
// which stays the same size however long the sequence grows: per Mamba-1
// layer a conv state (d_inner/tp x (K-1)) and an SSM state (d_inner/tp x N);
// per Mamba-2 layer conv ((d_inner + 2 G N)/tp x (K-1), with G rounded up to
// tp when tp does not divide it) and SSM (heads/tp x head_dim x N); per
// gated-DeltaNet layer conv ((2 Hk dk + Hv dv)/tp x (K-1)) and recurrent
// (Hv/tp x dv x dk) (vllm/model_executor/layers/mamba/mamba_utils.py
// MambaStateShapeCalculator, vLLM 0.11). Conv states are stored in
// `conv_dtype`, SSM/recurrent states in `ssm_dtype` (vLLM's
// mamba_cache_dtype / mamba_ssm_cache_dtype, "auto" = the model dtype:
// MambaStateDtypeCalculator). 0 for a pure-attention model.
// REQUIRES: tp >= 1.
Bytes recurrent_state_bytes_per_sequence(const Model& model, Dtype conv_dtype,
                                         Dtype ssm_dtype, int tp);
// The same with both states in `dtype`, on one GPU (tp 1).
Bytes recurrent_state_bytes_per_sequence(const Model& model, Dtype dtype);

// Canonical names of the layer kinds ("attention", "mamba", "mamba2",
// "linear_attention", "attention_mamba2"), and back.
std::string_view layer_kind_name(LayerKind kind);
std::optional<LayerKind> layer_kind_from_name(std::string_view name);

}  // namespace oomplan
