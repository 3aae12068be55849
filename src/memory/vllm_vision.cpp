// The multimodal part of vLLM's start-up profile (vllm.hpp
// vllm_vision_profile): how many dummy images or videos it runs through the
// vision tower, their pixel values, the tower's peak and the encoder outputs
// kept through the text dummy run. mllama's tiled images are V0 only.

#include "memory/internal.hpp"

#include <algorithm>

namespace oomplan {

std::int64_t vision_tokens_per_image(const Model& model) {
  if (model.vision_layers <= 0 || model.vision_patch_size <= 0) {
    return 0;
  }
  const std::int64_t side = model.vision_image_size / model.vision_patch_size;
  const std::int64_t merge = std::max<std::int64_t>(1, model.vision_merge_size);
  return std::max<std::int64_t>(1, (side / merge) * (side / merge));
}

}  // namespace oomplan

namespace oomplan::memory_terms {

// Decoder tokens of a dummy video of `frames` frames at the largest image
// size: frames are padded to a multiple of temporal_patch_size by adding
// frames % temporal (qwen2_vl.py _get_vision_info), grid_t at least 1.
std::int64_t video_groups(const Model& m, std::int64_t frames) {
  const std::int64_t t =
      std::max<std::int64_t>(1, m.vision_temporal_patch_size);
  return std::max<std::int64_t>(1, (frames + frames % t) / t);
}

// Frames of vLLM's dummy video (Qwen2VLProcessingInfo
// get_num_frames_with_most_features, one video per prompt): the most frames
// whose tokens fit in `limit`, counted up from `start`, at most `cap`, at
// least 1. The loop stops at the cap (16 frames at most).
std::int64_t video_frames(const Model& m, std::int64_t tokens_per_group,
                          std::int64_t limit, std::int64_t start,
                          std::int64_t cap) {
  std::int64_t frames = start;
  while (frames < cap &&
         video_groups(m, frames + 1) * tokens_per_group <= limit) {
    ++frames;
  }
  return std::max<std::int64_t>(1, std::min(frames, cap));
}

std::int64_t dummy_video_frames(const Model& m, VllmVersion version,
                                std::int64_t tokens_per_image,
                                std::int64_t max_model_len) {
  if (!m.vision_video) {
    return 0;
  }
  // Video models get one dummy video per prompt next to one image, its frames
  // at the largest image size: up to 0.8.5 (V0 and V1) from the max_model_len
  // left after the image, counted from 0 frames, at most 16
  // (_MAX_FRAMES_PER_VIDEO); 0.11 (#25557's era) from all of max_model_len,
  // counted from 1, at most 14. Releases in between are not pinned: the
  // older rule up to 0.10 here.
  const bool newer = version >= vllm_release(0, 11);
  return video_frames(m, tokens_per_image,
                      newer ? max_model_len : max_model_len - tokens_per_image,
                      newer ? 1 : 0, newer ? 14 : 16);
}

// mllama, which only V0's EncoderDecoderModelRunner ran (profile_run):
// max_num_seqs sequences, each with one image of the most features
// (max_num_tiles tiles, MllamaProcessingInfo
// get_image_size_with_most_features), all through the tower in one call.
VllmVisionProfile tiled_profile(const Model& m, Dtype dtype, int tp,
                                std::int64_t seqs) {
  VllmVisionProfile p;
  const std::int64_t side = m.vision_image_size / m.vision_patch_size;
  // Each tile is side² patches and a class token (calc_token_per_chunk),
  // padded to a multiple of 8 inside the tower (MllamaVisionModel.forward).
  const std::int64_t chunk = side * side + 1;
  p.items = seqs;
  p.tokens_per_item = m.vision_max_tiles * chunk;
  p.patches_per_item = m.vision_max_tiles * ceil_div(chunk, 8) * 8;
  const double d = dtype_bytes(dtype);
  const double n = as_double(p.items);
  const double len = as_double(p.patches_per_item);
  const double hv = as_double(m.vision_hidden_size);
  p.pixel_bytes = saturated_bytes(n * as_double(m.vision_max_tiles) * 3.0 *
                                  as_double(m.vision_image_size) *
                                  as_double(m.vision_image_size) * 4.0);
  // _prepare_aspect_ratio_attention_mask: one (L x L) additive mask per
  // image, in the model dtype, for every layer (SDPA with attn_mask); the
  // outputs of intermediate_layers_indices stacked for the output; and one
  // layer at its peak (residual, normed input and output, next to qkv +
  // output or fc1 + GELU, split by TP).
  const double layer =
      3.0 * hv +
      std::max(4.0 * hv, 2.0 * as_double(m.vision_intermediate_size)) /
          as_double(tp);
  p.tower_bytes = saturated_bytes(
      n * d *
      (len * len + as_double(m.vision_intermediate_layers) * len * hv +
       len * layer));
  // The projected cross_attention_states (tokens x text hidden) stay through
  // the text dummy run, where each cross-attention layer projects them to
  // its K and V (kv heads split by TP, replicated below one per rank).
  p.encoder_cache = saturated_bytes(n * as_double(p.tokens_per_item) *
                                    as_double(m.hidden_size) * d);
  const double kv_heads =
      std::max(1.0, as_double(m.num_kv_heads) / static_cast<double>(tp));
  p.cross_kv_bytes = saturated_bytes(n * as_double(p.tokens_per_item) * 2.0 *
                                     kv_heads * as_double(m.head_dim) * d);
  return p;
}

VisionPatches v0_vision_items(VllmVisionProfile& p, std::int64_t image_tokens,
                              std::int64_t video_tokens,
                              std::int64_t image_patches,
                              std::int64_t video_patches, std::int64_t batched,
                              std::int64_t seqs) {
  // worker/model_runner.py _dummy_run: max_num_seqs = min(max_num_seqs,
  // max_num_batched_tokens // get_max_multimodal_tokens()), at least 1, the
  // tokens being every modality's largest item x its limit (1 in V0,
  // config.py get_limit_per_prompt): an image, and a video where the model
  // takes one. The tower runs images and videos in separate calls
  // (Qwen2VLForConditionalGeneration: _process_image_input, then
  // _process_video_input).
  p.tokens_per_item = image_tokens + video_tokens;
  p.items = std::clamp<std::int64_t>(batched / p.tokens_per_item, 1, seqs);
  p.patches_per_item = image_patches + video_patches;
  return {p.items * p.patches_per_item,
          p.items * std::max(image_patches, video_patches)};
}

VisionPatches v1_vision_items(VllmVisionProfile& p, VllmVersion version,
                              std::int64_t image_tokens,
                              std::int64_t video_tokens,
                              std::int64_t image_patches,
                              std::int64_t video_patches, std::int64_t batched,
                              std::int64_t seqs, std::int64_t max_model_len) {
  // V1 profiles one modality, the one with the most tokens per item
  // (MultiModalBudget.get_modality_with_max_tokens; the image on a tie, being
  // first).
  p.video = video_tokens > image_tokens;
  p.tokens_per_item = p.video ? video_tokens : image_tokens;
  p.patches_per_item = p.video ? video_patches : image_patches;
  // v1/core/encoder_cache_manager.py compute_mm_encoder_budget: both budgets
  // are max(max_num_batched_tokens, max tokens per item) (SchedulerConfig sets
  // max_num_encoder_input_tokens = encoder_cache_size =
  // max_num_batched_tokens).
  p.encoder_budget = std::max(batched, p.tokens_per_item);
  // MultiModalBudget.get_max_items (v1/worker/utils.py 0.11,
  // multimodal/encoder_budget.py later): budget // tokens, at most
  // max_num_seqs x max(1, min(limit 999, max_model_len // tokens)) (V1's
  // default limit, config/multimodal.py); 0.8.5's profile_run took
  // cdiv(budget, tokens) instead (the release it changed in is not pinned:
  // ceil up to 0.10, floor from 0.11 here).
  const std::int64_t by_budget =
      version < vllm_release(0, 11)
          ? ceil_div(p.encoder_budget, p.tokens_per_item)
          : p.encoder_budget / p.tokens_per_item;
  const std::int64_t per_prompt =
      std::clamp<std::int64_t>(max_model_len / p.tokens_per_item, 1, 999);
  p.items = std::max<std::int64_t>(1, std::min(by_budget, seqs * per_prompt));
  return {p.items * p.patches_per_item, p.items * p.patches_per_item};
}

Bytes vision_pixel_bytes(const Model& m, std::int64_t patches) {
  // pixel_values as the HF image processor returns them (float32), moved to
  // the GPU by _get_mm_dummy_batch and referenced by profile_run until it
  // returns: C x temporal x patch² values per patch.
  const double pixel_values = 3.0 * as_double(m.vision_temporal_patch_size) *
                              as_double(m.vision_patch_size) *
                              as_double(m.vision_patch_size);
  return saturated_bytes(as_double(patches) * pixel_values * 4.0);
}

Bytes vision_tower_bytes(const Model& m, Dtype dtype, int tp,
                         std::int64_t patches) {
  // One encoder layer at its peak, the towers in vLLM being tensor-parallel
  // (siglip.py SiglipAttention/SiglipMLP, qwen2_5_vl.py Qwen2_5_VisionBlock:
  // QKVParallelLinear, ColumnParallelLinear): the residual, the normed input
  // and the layer output (3 x hidden), next to the larger of attention (qkv
  // 3h/tp + output h/tp; flash / SDPA kernels keep no patches² scores) and
  // the MLP (fc1 + GELU 2I/tp, or Qwen2.5-VL's gate_up + SiLU 3I/tp).
  const double hv = as_double(m.vision_hidden_size);
  const double iv = as_double(m.vision_intermediate_size);
  const double mlp = (m.vision_gated_mlp ? 3.0 : 2.0) * iv / tp;
  const double attention = 4.0 * hv / tp;
  return saturated_bytes(as_double(patches) *
                         (3.0 * hv + std::max(mlp, attention)) *
                         dtype_bytes(dtype));
}

std::int64_t v1_encoder_rows(const VllmVisionProfile& p, VllmVersion version) {
  // profile_run keeps every item's output (tokens x text hidden) in
  // self.encoder_cache until the text dummy run and sampler are done. 0.10.0
  // to 0.11.0 first padded each output to encoder_budget rows ("embeddings
  // that encoder outputs are scattered onto", new_zeros((encoder_budget,
  // hidden))); #25810 pads to the item's own maximum.
  const bool padded =
      vllm_release(0, 10, 0) <= version && version <= vllm_release(0, 11, 0);
  return padded ? p.encoder_budget : p.tokens_per_item;
}

}  // namespace oomplan::memory_terms

namespace oomplan {

using namespace memory_terms;

VllmVisionProfile vllm_vision_profile(const Model& model, VllmVersion version,
                                      VllmEngine engine, Dtype dtype, int tp,
                                      std::int64_t max_num_seqs,
                                      std::int64_t max_num_batched_tokens,
                                      std::int64_t max_model_len) {
  VllmVisionProfile p;
  const std::int64_t tpi = vision_tokens_per_image(model);
  if (tpi == 0) {
    return p;
  }
  const std::int64_t seqs = std::max<std::int64_t>(1, max_num_seqs);
  if (model.vision_max_tiles > 0) {
    // V1 never ran mllama (vllm_removed_error says why it would not start).
    return engine == VllmEngine::v0 ? tiled_profile(model, dtype, tp, seqs) : p;
  }
  const std::int64_t side = model.vision_image_size / model.vision_patch_size;
  const std::int64_t batched =
      std::max<std::int64_t>(1, max_num_batched_tokens);
  const std::int64_t len = std::max<std::int64_t>(0, max_model_len);
  p.frames = dummy_video_frames(model, version, tpi, len);
  const std::int64_t groups =
      model.vision_video ? video_groups(model, p.frames) : 0;
  const std::int64_t video_tokens = groups * tpi;
  const std::int64_t image_patches = side * side;
  const std::int64_t video_patches = groups * side * side;
  const VisionPatches patches =
      engine == VllmEngine::v0
          ? v0_vision_items(p, tpi, video_tokens, image_patches, video_patches,
                            batched, seqs)
          : v1_vision_items(p, version, tpi, video_tokens, image_patches,
                            video_patches, batched, seqs, len);
  p.pixel_bytes = vision_pixel_bytes(model, patches.pixels);
  p.tower_bytes = vision_tower_bytes(model, dtype, tp, patches.tower);
  if (engine == VllmEngine::v1) {
    p.encoder_rows = v1_encoder_rows(p, version);
    p.encoder_cache =
        saturated_bytes(as_double(p.items) * as_double(p.encoder_rows) *
                        as_double(model.hidden_size) * dtype_bytes(dtype));
  }
  return p;
}

}  // namespace oomplan
