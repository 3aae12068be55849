#pragma once

// Private to the memory layer: every term of a budget as a named function,
// grouped by the file that defines it, and the structs they pass. memory()
// (memory.cpp) calls add_inference (infer.cpp) or add_training (train.cpp),
// which compose these terms. Tests call the terms directly.

#include "oomplan/memory/memory.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan::memory_terms {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Counts are exact integers; the arithmetic is in double because several
// factors are fractional (8-bit block constants, NF4, chunks).
inline double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

// --- Compositions (infer.cpp, train.cpp) ------------------------------------

// Inference: weights, KV cache, prefill activations, logits, overhead (engine
// hf or vllm), and the inference warnings.
void add_inference(const Model& model, const Gpu& gpu, const Resolved& setup,
                   Budget& budget);

// Training (full, lora, qlora): model states, activations, logits, buffers,
// overhead, the step's timeline and its peak.
void add_training(const Model& model, const Gpu& gpu, const Resolved& setup,
                  Budget& budget);

// --- Weights (weights.cpp; weight_bytes itself is public) -------------------

// Number of MoE layers among [0, end) (closed form of is_moe_layer()).
std::int64_t moe_layers_before(const Model& m, std::int64_t end);

// Bytes of `params` linear weights stored in `quant` (never automatic here);
// `dtype` is the bytes per parameter of --dtype, `rows` the output rows these
// weights have (for per-row scales), `block_fp8` DeepSeek's 128x128 scales.
double linear_bytes(Quant quant, double params, double rows, double dtype,
                    bool block_fp8);

// fp8 on DeepSeek's own FP8 checkpoint: block-scaled weights.
bool block_scaled_fp8(const Model& m, Quant quant);

// One GPU's share of the decoder layers [layer_begin, layer_end), by kind.
struct LayerShare {
  double n = 0;           // layers here
  double frac = 0;        // share of all layers
  double dense_frac = 0;  // share of the dense layers
  double moe_frac = 0;    // share of the MoE layers
  std::int64_t moe_here = 0;
};
LayerShare layer_share(const Model& m, const WeightShare& share);

// Linear parameters of that share on one GPU, split by tensor parallelism.
struct TpParams {
  double attention = 0;  // q and o / tp, k and v max(1, kv/tp) heads
  double mlp = 0;
  double experts = 0;
  double shared = 0;
  double router = 0;  // replicated
};
TpParams tp_linear_params(const Model& m, const ParamCounts& c, double tp,
                          const LayerShare& ls);

// vLLM's MXFP4 MoE expert shapes on one GPU for a card's compute capability:
// padded columns per GPU and padded hidden size.
enum class Mxfp4Kernel { triton, flashinfer, marlin };
struct Mxfp4Padding {
  std::int64_t inter = 0;
  std::int64_t hidden = 0;
  Mxfp4Kernel kernel = Mxfp4Kernel::triton;
  // Triton and FlashInfer keep the expert biases in fp32.
  bool fp32_bias() const { return kernel != Mxfp4Kernel::marlin; }
};
Mxfp4Padding mxfp4_padding(std::int64_t part, std::int64_t hidden, int cc);
// The checkpoint's expert scales that vLLM's Triton backend leaves
// allocated (before 0.21): experts / 32 bytes.
double mxfp4_retained_scales(const Model& m, const Resolved& setup,
                             double experts, int cc);

// Routed-expert parameters as vLLM's MXFP4 kernels pad them (engine vllm).
double mxfp4_expert_params(const Model& m, const Resolved& setup,
                           double experts, int cc);
// vLLM's padded (fp32 after Triton/FlashInfer) expert biases less the
// checkpoint's bf16 ones, over `moe_here` layers (engine vllm).
double mxfp4_bias_bytes(const Model& m, const Resolved& setup,
                        std::int64_t moe_here, int cc);

// Every linear weight of the share in the resolved quant with its scales.
double quantized_linear_bytes(const Model& m, const Resolved& setup,
                              const WeightShare& share, const LayerShare& ls,
                              const TpParams& p);

// The vocabulary as loaded: vLLM pads it to a multiple of 64 (x tp).
std::int64_t padded_vocab(const Model& m, const Resolved& setup);

// lm_head parameters of a share (its own copy when tied on a later stage),
// with `pad` padding parameters; 0 when tied on the embedding's GPU.
double lm_head_params(const Model& m, const ParamCounts& c,
                      const WeightShare& share, double pad);

// vLLM's RoPE cos/sin cache on every GPU.
double rope_cache_bytes(const Model& m, double dtype);

// vLLM's dequantized copy of a quantized MLA kv_b_proj over `layers` layers.
double mla_dequant_bytes(const Model& m, const Resolved& setup, double layers);

// --- KV cache (kv_cache.cpp; kv_bytes_per_token, kv_cache_bytes public) -----

// K and V heads on one GPU: max(1, ceil(kv_heads / tp)).
std::int64_t kv_heads_per_gpu(const Model& m, int tp);

// Layer-tokens one sequence of `seq` tokens keeps over layers [begin, end),
// sliding-window layers capped at the window.
double kv_layer_tokens(const Model& m, std::int64_t layer_begin,
                       std::int64_t layer_end, std::int64_t seq);

// AutoAWQ fused layers' preallocated K/V cache and RoPE tables over layers
// [begin, end) (--awq-fused-len).
Bytes awq_fused_cache_bytes(const Model& m, const Resolved& s,
                            std::int64_t layer_begin, std::int64_t layer_end);

// --- Overhead (overhead.cpp; runtime_overhead_bytes public) -----------------

// The caching allocator's reserve as a share of allocated tensors: --reserve,
// else 5 % for inference and 8 % for training.
double inference_reserve(const Resolved& setup);
double training_reserve(const Resolved& setup);
// reserve x allocated, rounded.
Bytes allocator_reserve_bytes(double reserve, Bytes allocated);

Bytes cublas_workspace_bytes(const Gpu& gpu);
// GPUs one process's NCCL communicators span (1: none).
int communicating_gpus(const Resolved& setup);
Bytes nccl_buffer_bytes(int gpus);

// --- Stages (stages.cpp) ----------------------------------------------------

// One GPU's share of the model: decoder layers [begin, end), and whether it
// holds the embedding (first stage) and the final norm + lm_head (last).
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  bool first = true;
  bool last = true;
};
WeightShare share_of(const Range& r);

// vLLM's pipeline stage `stage` of `pp` (get_pp_indices).
Range pp_range(std::int64_t layers, int pp, int stage);
// transformers device_map="auto" over setup.gpus GPUs.
std::vector<Range> split_ranges(const Model& m, const Resolved& s);
// engine hf's ranges: split_ranges under --split layers, else pp_range.
std::vector<Range> hf_ranges(const Model& m, const Resolved& s);

// First layer of training pipeline stage `stage` (Megatron, torchtune).
std::int64_t train_stage_begin(std::int64_t layers, int pp, int stage);
// Micro-batches stage `stage` holds in flight under 1F1B.
double micro_batches_in_flight(const Resolved& setup, int stage);
// CPU RAM of the busiest node from each stage's per-GPU need.
double node_host_bytes(const std::vector<double>& per_gpu, int gpus_per_node,
                       int nodes);

// One pipeline stage of a training job on one GPU: its layers, its share of
// the vocabulary matrices and what its terms divide by.
struct TrainLayout {
  int stage = 0;
  int pp = 1;
  bool first = true;       // holds the embedding
  bool last = true;        // holds the final norm, lm_head and the loss
  std::int64_t begin = 0;  // decoder layers [begin, end)
  std::int64_t end = 0;
  double t = 1;             // tensor parallel
  double dp = 1;            // data x context parallel ranks (ZeRO/FSDP)
  double d = 2;             // bytes of --dtype
  double embed = 0;         // embedding parameters (whole model)
  double head = 0;          // lm_head parameters (0: tied)
  double extra = 0;         // vision tower etc.
  double layer_params = 0;  // the stage's layers (+ final norm on the last)
  double largest_layer = 0;
  double layers() const { return static_cast<double>(end - begin); }
  // Embedding and lm_head parameters here (a tied head on a later stage is
  // a copy of its own); integers, so the sum is exact.
  double vocab_params() const {
    return (first ? embed : 0.0) + (last ? head : 0.0) +
           (pp > 1 && last && head == 0 ? embed : 0.0);
  }
  // Every parameter of the stage on one GPU (before ZeRO), split by TP.
  double params() const {
    return (layer_params + (first ? embed + extra : 0.0) + (last ? head : 0.0) +
            (pp > 1 && last && head == 0 ? embed : 0.0)) /
           t;
  }
};
TrainLayout train_layout(const Model& model, const Resolved& setup,
                         const ParamCounts& counts, int stage);

// --- HF generate (hf_activations.cpp) ---------------------------------------

// Residual stream, normed input and layer output over the prompt.
double hf_hidden_buffers(const Model& m, const Resolved& s);
// q, k, v, o over the prompt (eager: + expanded K/V, s^2 scores, mask).
double hf_attention_transient(const Model& m, const Resolved& s);
// The MLP's (or an MoE block's) intermediates over the prompt.
double hf_mlp_transient(const Model& m, const Resolved& s);
// bitsandbytes 4-bit: one MLP matrix dequantized to dtype.
double nf4_dequant_transient(const Model& m, const Resolved& s);
// GPTQ kernels (engine hf): the scratch AutoGPTQ's exllama / exllamav2
// allocate once per GPU at load, over the largest quantized linear; 0 for the
// others.
Bytes gptq_kernel_scratch(const Model& m, const Resolved& s);
// The largest layer dequantized for one call of `rows` rows by the 4-bit
// kernels that do so: GPTQ's cuda-old (from 128 rows) and torch (always) to
// int32 first, AutoAWQ's GEMM (from 1024 rows) to fp16; 0 else.
double int4_dequant_transient(const Model& m, const Resolved& s, double rows);
// hidden + max(attention, MLP) + dequant.
Bytes hf_prefill_activations(const Model& m, const Resolved& s);
// The prefill's logits: the last position's and their fp32 copy, or (before
// transformers 4.45) every position's, upcast to fp32.
Bytes hf_logits(const Model& m, const Resolved& s);
// Before transformers 4.45 the prefill computes every position's logits.
bool hf_full_prefill_logits(const Resolved& s);
// Before transformers 4.42 generate passes the KV cache as tuples: each
// decode step builds the new cache while the old one is still referenced.
bool hf_tuple_cache(const Resolved& s);
// What else a decode step of a tuple-cache release holds: the prefill's
// fp32 logits over every position, which generate keeps through step 2.
Bytes hf_decode_logits(const Model& m, const Resolved& s);

// --- vLLM start-up profile (vllm_profile.cpp) -------------------------------

// vLLM's KV block size in tokens.
inline constexpr std::int64_t k_vllm_block = 16;

// gpu_memory_utilization x capacity.
Bytes vllm_requested_bytes(const Gpu& gpu, const Resolved& s);
// The dense layers' peak of the dummy forward beyond 5 hidden buffers:
// max(MLP, q/k/v projections).
double vllm_dense_forward(const Model& m, const Resolved& s);
struct VllmMoeActivation {
  double workspace = 0;  // fused_moe's caches, kept past the forward
  double forward = 0;    // the MoE layer's peak during the forward
};
VllmMoeActivation vllm_moe_activation(const Model& m, const Gpu& gpu,
                                      const Resolved& s);
// The last stage's dummy sampler run, with the forward's hidden states.
double vllm_text_sampler(const Model& m, const Resolved& s,
                         double moe_workspace);
// The profile run's torch peak on a worker holding `r`.
Bytes vllm_activation(const Model& m, const Gpu& gpu, const Resolved& s,
                      const Range& r);
// Non-torch memory the profiler counts on one worker.
Bytes vllm_non_torch(const Gpu& gpu, const Resolved& s);

// The capture list and graph count of this setup (vllm.hpp).
struct VllmGraphs {
  VllmGraphMode mode = VllmGraphMode::none;
  std::vector<std::int64_t> sizes;
  std::int64_t count = 0;
};
VllmGraphs vllm_graphs(const Resolved& s);
// The CUDA-graph pool of a worker holding `r`.
Bytes vllm_cuda_graphs(const Model& m, const Resolved& s, const Range& r,
                       const VllmGraphs& graphs);

// KV cache groups of the hybrid allocator (full and sliding layers).
struct VllmKvGroups {
  std::int64_t size = 1;   // layers per group
  std::int64_t count = 1;  // groups
};
VllmKvGroups vllm_kv_groups(std::int64_t full_layers,
                            std::int64_t local_layers);

// One worker's profile and pool.
struct VllmStage {
  Bytes weights = 0;
  Bytes activation = 0;
  Bytes non_torch = 0;
  Bytes graphs = 0;
  Bytes available = 0;
  Bytes per_token = 0;
  std::int64_t blocks = 0;       // KV blocks this worker can hold
  std::int64_t groups = 1;       // KV cache groups (hybrid allocator)
  std::int64_t full_layers = 0;  // full-attention layers on this worker
  std::int64_t local_layers = 0;
  std::int64_t group_size = 0;
  Bytes layer_token = 0;  // KV bytes per token of one layer
};
VllmStage vllm_stage(const Model& m, const Gpu& gpu, const Resolved& s,
                     const Range& r, Bytes requested);
// KV bytes one request of `len` tokens needs on this worker.
double vllm_needed(const Model& m, const Resolved& s, const VllmStage& st,
                   std::int64_t len);
// The longest max_model_len this worker's pool holds.
std::int64_t vllm_max_len(const Model& m, const Resolved& s,
                          const VllmStage& st);
// Requests of max_model_len the pool holds at once.
double vllm_max_concurrency(const Model& m, const Resolved& s,
                            const VllmStage& st);

// The worker with the fewest KV tokens, which limits the engine; each stage
// is appended to `stages` when pp > 1.
struct VllmWorker {
  VllmStage stage;
  std::int64_t tokens = 0;   // engine-wide KV tokens (may be negative)
  std::int64_t max_len = 0;  // smallest max_model_len fit over the workers
};
VllmWorker vllm_limiting_worker(const Model& m, const Gpu& gpu,
                                const Resolved& s, Bytes requested,
                                std::vector<Stage>& stages);

// --- vLLM start-up checks (vllm_checks.cpp) ---------------------------------

int vllm_min_capability(Quant quant);
std::string vllm_quant_method(Quant quant);
// Free memory at init_device.
double vllm_free_at_start(const Gpu& gpu, const Resolved& s);
// Refusals before any memory is counted ("" when none).
std::string vllm_config_error(const Model& m, const Gpu& gpu,
                              const Resolved& s);
// A max_model_len whose KV does not fit, V0's or V1's words.
std::string vllm_max_len_kv_error(const Resolved& s, double need,
                                  Bytes available, std::int64_t kv_tokens,
                                  std::int64_t max_len_fit);
// The memory checks of init_device and determine_available_memory.
std::string vllm_memory_error(const Model& m, const Gpu& gpu, const Resolved& s,
                              const VllmStage& worst, std::int64_t kv_tokens,
                              std::int64_t max_len_fit);
// The first refusal in vLLM's order, "" when vLLM would start.
std::string vllm_startup_error(const Model& m, const Gpu& gpu,
                               const Resolved& s, const VllmStage& worst,
                               std::int64_t kv_tokens,
                               std::int64_t max_len_fit);

// --- vLLM multimodal dummies (vllm_vision.cpp) ------------------------------

std::int64_t video_groups(const Model& m, std::int64_t frames);
std::int64_t video_frames(const Model& m, std::int64_t tokens_per_group,
                          std::int64_t limit, std::int64_t start,
                          std::int64_t cap);
// Frames of the dummy video a release profiles (0 without video).
std::int64_t dummy_video_frames(const Model& m, VllmVersion version,
                                std::int64_t tokens_per_image,
                                std::int64_t max_model_len);
VllmVisionProfile tiled_profile(const Model& m, Dtype dtype, int tp,
                                std::int64_t seqs);
// Patches whose pixel values are held, and of the tower's largest call.
struct VisionPatches {
  std::int64_t pixels = 0;
  std::int64_t tower = 0;
};
// The dummy items each engine profiles (fills items, tokens and patches per
// item, V1's modality and encoder budget).
VisionPatches v0_vision_items(VllmVisionProfile& p, std::int64_t image_tokens,
                              std::int64_t video_tokens,
                              std::int64_t image_patches,
                              std::int64_t video_patches, std::int64_t batched,
                              std::int64_t seqs);
VisionPatches v1_vision_items(VllmVisionProfile& p, VllmVersion version,
                              std::int64_t image_tokens,
                              std::int64_t video_tokens,
                              std::int64_t image_patches,
                              std::int64_t video_patches, std::int64_t batched,
                              std::int64_t seqs, std::int64_t max_model_len);
Bytes vision_pixel_bytes(const Model& m, std::int64_t patches);
Bytes vision_tower_bytes(const Model& m, Dtype dtype, int tp,
                         std::int64_t patches);
// Rows of each item's encoder output V1 keeps.
std::int64_t v1_encoder_rows(const VllmVisionProfile& p, VllmVersion version);

// --- Training model states (train_states.cpp) -------------------------------

// dp when ZeRO's stage reaches `stage` (1 states, 2 gradients, 3 weights).
double zero_shards(const Resolved& setup, int stage, double dp);
bool offloads_optimizer(const Resolved& setup);
bool offloads_params(const Resolved& setup);  // ZeRO-3 / FSDP only
bool mixed16(const Resolved& setup);          // mixed precision, 16-bit dtype

// LoRA adapter parameters of one layer, and of layers [begin, end).
double lora_layer_params(const Model& model, const Resolved& setup, bool moe);
double adapter_params(const Model& model, const Resolved& setup,
                      std::int64_t begin, std::int64_t end);
// Norm weights of the stage's layers (+ the final norm on the last).
double stage_norm_params(const Model& model, const TrainLayout& at);
// prepare_model_for_kbit_training's fp32 upcast of vocabulary and norms.
double kbit_fp32_upcast_bytes(const Model& model, const Resolved& setup,
                              const TrainLayout& at);
// A LoRA/QLoRA frozen base on one GPU.
double frozen_base_bytes(const Model& model, const Resolved& setup,
                         const TrainLayout& at);

struct TrainWeights {
  double gpu = 0;              // resident on the GPU
  double host = 0;             // offloaded (ZeRO-3 / FSDP parameter offload)
  double trainable = 0;        // trainable parameters here (before ZeRO)
  double trainable_bytes = 2;  // bytes of one trainable weight
};
TrainWeights trained_weights(const Model& model, const Resolved& setup,
                             const TrainLayout& at);

// The frozen reference model of DPO/KTO full fine-tuning
// (Resolved::holds_reference): {on the GPU, offloaded to the host}.
struct ReferenceWeights {
  double gpu = 0;
  double host = 0;
};
ReferenceWeights reference_weights(const Resolved& setup,
                                   const TrainLayout& at);
std::string_view reference_formula(const Resolved& setup);

bool deepspeed_bf16_optimizer(const Resolved& setup);
double gradient_element_bytes(const Resolved& setup, const TrainWeights& tw);

// Bytes of one kind on the GPU, in paged unified memory and in host RAM.
struct Placed {
  double gpu = 0;
  double paged = 0;
  double host = 0;
};
Placed stage_gradients(const Resolved& setup, double trainable,
                       double element_bytes, double dp);
double master_bytes_per_param(const Resolved& setup);
// Optimizer state bytes per trainable parameter, without the master copy.
double state_bytes_per_param(const Resolved& setup, double hidden);
bool paged(Optimizer optimizer);
Placed optimizer_states(const Model& model, const Resolved& setup,
                        double trainable, double dp);

// Parameters that get gradients here (before ZeRO): the trainable ones, or
// the whole layers under FSDP1 frozen grads.
double gradient_params(const Resolved& setup, const TrainLayout& at,
                       const TrainWeights& tw);
// Gradients carried from one micro-batch to the next: unsharded under FSDP
// no_sync, else `sharded` (stage_gradients' GPU bytes).
double accumulated_gradient_bytes(const Resolved& setup, double params,
                                  double element_bytes, double sharded);
// LitGPT's StableEmbedding gradient (QLoRA from 0.5.0), on the first stage.
double stable_embedding_grad_bytes(const Resolved& setup,
                                   const TrainLayout& at);
// Gradients alive before backward starts (accumulation, flat buffers).
double kept_gradient_bytes(const Resolved& setup, double gradients);
double largest_trainable_param(const Model& model, const Resolved& setup,
                               const TrainLayout& at);
// Gradients alive at the end of backward (one parameter's when the
// optimizer steps in backward).
double step_gradient_bytes(const Resolved& setup, double gradients,
                           double largest_param, double element_bytes);
double output_projection_gradient_bytes(const Resolved& setup,
                                        const TrainLayout& at, double gradients,
                                        double element_bytes);
double adamw_8bit_dequant_bytes(const Resolved& setup, double largest_param);
double deepspeed_fp32_grad_bytes(const Resolved& setup, double trainable,
                                 double dp);

struct PagedSplit {
  Bytes device = 0;
  Bytes host = 0;
};
// Paged states fill the device's `room` and spill the rest to the host.
PagedSplit paged_state_split(Bytes paged_bytes, Bytes room);

std::string_view weights_formula(const Resolved& setup);
std::string_view gradients_formula(const Resolved& setup);
std::string_view optimizer_formula(const Resolved& setup);

// --- Training activations (train_activations.cpp) ---------------------------

struct Dims {
  double tokens = 0;  // micro-batch x sequence on this GPU
  double seq = 0;
  double h = 0;
  double d = 2;  // bytes of one activation element (--dtype)
  double t = 1;  // tensor parallel
  bool sp = false;
  double cp = 1;  // context parallel: tokens are this GPU's share
};
Dims train_dims(const Model& model, const Resolved& setup);

// Which saved tensors a layer keeps: a frozen linear (LoRA/QLoRA without an
// adapter on it) needs no copy of its input for a weight gradient, and a
// frozen norm needs no normalised copy for its weight gradient. The q/k/v and
// gate/up inputs are counted in copies: one tensor shared by the projections
// that read it, or one each where every adapter casts its own.
struct Needs {
  bool norm_weight = true;  // norm weights train (full fine-tuning)
  double qkv_in = 1;        // copies of the q/k/v projections' input
  bool o_in = true;
  double up_in = 1;  // copies of gate/up's (or fc1's) input: the second norm's
                     // output
  bool down_in = true;
  double down_copies = 0;  // extra 16-bit copies of down_proj's input
  double mlp_bytes = 0;    // element bytes of gate/up/act (0: the dtype)
  // 1-byte LoRA dropout masks, one per adapted projection's input.
  double qkv_masks = 0;
  double o_masks = 0;
  double up_masks = 0;
  double down_masks = 0;
};
double targeted(unsigned targets, unsigned mask);
bool amp_compute(const Resolved& setup);
Needs qlora_mixed_needs(const Resolved& setup);
Needs qlora_bnb_pure_needs(const Resolved& setup);
// transformers' KV cache a training forward keeps (--use-cache).
double training_kv_cache_bytes(const Model& model, const Resolved& setup,
                               const TrainLayout& at);
Needs adapter_needs(const Resolved& setup);
Needs lora_dropout_needs(Needs needs, const Resolved& setup);
Needs needs_of(const Resolved& setup);
bool has_dropout(const Model& model);
double norm_saved(const Model& model, const Resolved& setup, const Needs& needs,
                  double d);
double layer_scores_bytes(const Model& model, const Resolved& setup,
                          const Dims& dm);
// Per token: norms, their outputs, dropout masks (replicated under TP).
double replicated_saved_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm);
// Per token: q, k, v, attention output, o_proj input (sharded by TP).
double attention_saved_bytes(const Model& model, const Resolved& setup,
                             const Dims& dm);
// Per token: one MLP of width `inter`.
double mlp_saved_bytes(const Model& model, const Resolved& setup,
                       const Dims& dm, double inter);
// Per token: an MoE block (router, top-k routed copies, shared experts).
double moe_saved_bytes(const Model& model, const Resolved& setup,
                       const Dims& dm);
double layer_activation_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm, bool moe);
double op_saved_bytes(const Model& model, const Resolved& setup, const Dims& dm,
                      bool moe);
double layer_backward_bytes(const Model& model, const Resolved& setup,
                            const Dims& dm, bool moe);

// The stage's layers swept once: totals and largest per layer.
struct LayerSweep {
  double all = 0;      // all layers' saved tensors, no checkpointing
  double largest = 0;  // the largest layer's
  double op_all = 0;   // all layers' per-op SAC stash (--checkpointing op)
  double op_gap = 0;   // what one layer recomputes beyond its stash
  double op_largest = 0;
  double backward = 0;  // the largest layer's backward working set
};
LayerSweep layer_sweep(const Model& model, const Resolved& setup,
                       const Dims& dm, std::int64_t begin, std::int64_t end);

double residual_stream_bytes(const Resolved& setup);
double checkpointed_input_bytes(const Resolved& setup, const Dims& dm);
double deepspeed_partitioned_input_bytes(const Resolved& setup, const Dims& dm);

// What a checkpointing policy keeps for one micro-batch.
struct Checkpointed {
  double stored = 0;           // kept from forward into backward
  double recompute = 0;        // added while backward recomputes one layer
  double per_layer = 0;        // what one layer keeps through backward
  double offload_window = -1;  // activation offload's resident pair (-1:
                               // 2 x per_layer)
  double host = 0;             // DeepSpeed cpu_checkpointing
};
Checkpointed every_n_checkpointed(const Resolved& setup, const LayerSweep& s,
                                  double layer_input, double layers);
Checkpointed checkpointed_activations(const Resolved& setup,
                                      const LayerSweep& s, double scores,
                                      const Dims& dm, double layers);
bool recomputes_layers(const Resolved& setup);
double final_norm_saved_bytes(const Model& model, const Resolved& setup,
                              const Dims& dm);

struct StageActivations {
  double stored = 0;          // every micro-batch in flight, final norm
  double recompute = 0;       // one layer recomputed in backward
  double largest_layer = 0;   // the largest layer's saved tensors
  double backward_layer = 0;  // the largest layer's backward working set
  double host = 0;            // offloaded activations
};
StageActivations stage_activations(const Model& model, const Resolved& setup,
                                   const TrainLayout& at);
std::string_view activations_formula(const Resolved& setup);

// --- Logits and loss (train_loss.cpp) ---------------------------------------

// Bytes per logit the loss holds at the end of forward and at its peak in
// backward, per loss implementation (vocab-parallel under TP).
struct LossBytes {
  double fwd = 0;
  double bwd = 0;
};
LossBytes loss_bytes(const Resolved& setup);
// The last stage's logits: tokens x vocab / tp x loss_bytes.
struct LogitBytes {
  double fwd = 0;
  double bwd = 0;
};
LogitBytes logit_bytes(const Model& model, const Resolved& setup,
                       const Dims& dm);
// DPO/KTO: the reference forward's 16-bit logits, live with the policy's at
// the end of its forward (0 without a reference forward).
double reference_logit_bytes(const Model& model, const Resolved& setup,
                             const Dims& dm);
std::string_view logits_formula(const Resolved& setup);

// --- Buffers (buffers.cpp) --------------------------------------------------

// FSDP1's memory for its largest wrapped unit of `params` elements (as split
// by tp) sharded over `dp` ranks in `bytes`-byte elements.
struct FsdpOneUnits {
  double unsharded_bytes = 0;      // the padded all-gather output
  double grad_bytes = 0;           // the unit's unsharded flat gradient
  double grad_pad_copy_bytes = 0;  // F.pad's copy when numel % dp != 0
  double grad_shard_bytes = 0;     // the reduce-scatter output
  double held_param_bytes = 0;     // freed all-gather outputs, not reusable
  double held_grad_bytes = 0;      // a gradient the reduce-scatter still reads
};
FsdpOneUnits fsdp1_units(double params, double dp, double bytes);
double fsdp1_gradient_buffers(const FsdpOneUnits& u);

// One decoder layer as ZeRO-3 / FSDP gathers it.
double gathered_layer_bytes(const Model& model, const Resolved& setup,
                            const TrainLayout& at);
double fsdp_root_unit_bytes(const TrainLayout& at);
double vocab_unit_bytes(const TrainLayout& at);
double zero3_gather_bytes(const Resolved& setup, const TrainLayout& at,
                          double layer_w);
double fsdp_offload_copy_bytes(double layer_w, double dp);
double zero12_bucket_bytes(const Model& model, double element_bytes);

struct ShardingBuffers {
  double bytes = 0;  // allocated
  double held = 0;   // reserved by record_stream (FSDP1)
  double layer = 0;  // one gathered unit
};
ShardingBuffers fsdp1_buffers(const Resolved& setup, const TrainLayout& at,
                              double layer_w);
ShardingBuffers sharding_buffers(const Model& model, const Resolved& setup,
                                 const TrainLayout& at, double element_bytes);
double ddp_bucket_copy_bytes(const Resolved& setup, double dp,
                             double gradients);
double nf4_dequant_bytes(const Model& model, const Resolved& setup);
double kbit_head_cast_bytes(const Resolved& setup, const TrainLayout& at);

struct AutocastCopies {
  double all = 0;    // every linear weight's 16-bit copy on the stage
  double layer = 0;  // one layer's
  double head = 0;   // lm_head's (in `all`): outside any checkpointed layer
};
AutocastCopies autocast_weight_copies(const Model& model, const Resolved& setup,
                                      const TrainLayout& at);
std::string_view buffers_formula(const Resolved& setup);

}  // namespace oomplan::memory_terms
