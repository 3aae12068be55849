// Vision-language families of the Hugging Face importer (hf_families.hpp):
// the wrappers whose text model sits under text_config, and their vision
// towers and projectors, counted into Model::extra_params, with the tower
// dimensions vLLM's multimodal profile runs.

#include "model/hf_families.hpp"

#include <algorithm>
#include <cmath>

namespace oomplan::hf {

namespace {

// SigLIP vision tower (SiglipVisionConfig defaults) and the Gemma 3
// projector: per layer 4 (h² + h) attention + 2 h I + I + h MLP + 2 LayerNorms;
// patch conv 3 p² h + h; (image/patch)² positions x h; post LayerNorm.
Count siglip_params(const Config& v, Count text_hidden) {
  const Count h = v.get({"hidden_size"}, 768);
  const Count inter = v.get({"intermediate_size"}, 3072);
  const Count layers = v.get({"num_hidden_layers"}, 12);
  const Count image = v.get({"image_size"}, 224);
  const Count patch = std::max<std::int64_t>(1, v.get({"patch_size"}, 16));
  const Count channels = v.get({"num_channels"}, 3);
  const Count per_layer =
      4 * (h * h + h) + (2 * h * inter + inter + h) + 2 * (2 * h);
  const Count positions = (image / patch) * (image / patch);
  const Count tower = layers * per_layer + (channels * patch * patch * h + h) +
                      positions * h + 2 * h;
  // Gemma3MultiModalProjector: mm_input_projection_weight (h x text hidden)
  // and mm_soft_emb_norm (RMSNorm over h).
  return tower + h * text_hidden + h;
}

// Pixtral vision tower (PixtralVisionConfig) and Mistral3MultiModalProjector:
// per layer 4 h² attention + 3 h I gated MLP + 2 RMSNorms; patch conv 3 p² h
// without bias; ln_pre; projector RMSNorm h, patch merger (h s² x h),
// linear_1 (h x text), linear_2 (text x text), biases when
// multimodal_projector_bias.
Count pixtral_params(const Config& root, const Config& v, Count text_hidden) {
  const Count h = v.get({"hidden_size"}, 1024);
  const Count inter = v.get({"intermediate_size"}, 4096);
  const Count layers = v.get({"num_hidden_layers"}, 24);
  const Count patch = v.get({"patch_size"}, 16);
  const Count channels = v.get({"num_channels"}, 3);
  const Count tower = layers * (4 * h * h + 3 * h * inter + 2 * h) +
                      channels * patch * patch * h + h;
  const Count merge = root.get({"spatial_merge_size"}, 2);
  const bool bias = root.flag("multimodal_projector_bias", true);
  const Count projector = h + h * merge * merge * h + h * text_hidden +
                          text_hidden * text_hidden +
                          (bias ? 2 * text_hidden : 0);
  return tower + projector;
}

// Mllama (Llama 3.2 Vision) vision model, MllamaVisionModel: patch conv (no
// bias), class embedding, gated position embedding (patches+1 rows + tile
// table), pre/post tile embeddings, two LayerNorms, `num_hidden_layers`
// encoder layers and `num_global_layers` gated ones (fc1/fc2 with bias, 2
// LayerNorms), then the projector Linear(vision_output_dim, text hidden).
Count mllama_vision_params(const Config& v, Count text_hidden) {
  const Count h = v.get({"hidden_size"}, 1280);
  const Count inter = v.get({"intermediate_size"}, 5120);
  const Count layers = v.get({"num_hidden_layers"}, 32);
  const Count global_layers = v.get({"num_global_layers"}, 8);
  const Count image = v.get({"image_size"}, 560);
  const Count patch = std::max<std::int64_t>(1, v.get({"patch_size"}, 14));
  const Count channels = v.get({"num_channels"}, 3);
  const Count tiles = v.get({"max_num_tiles"}, 4);
  const Count out_dim = v.get({"vision_output_dim"}, 7680);
  Count ratios = 8;  // supported_aspect_ratios for 4 tiles
  if (const json* r = v.find({"supported_aspect_ratios"}); r && r->is_array()) {
    ratios = static_cast<std::int64_t>(r->size());
  }
  const Count patches = (image / patch) * (image / patch) + 1;
  const Count layer = 4 * h * h + (2 * h * inter + inter + h) + 2 * (2 * h);
  const Count tower = channels * patch * patch * h + h + (patches * h + 1) +
                      (ratios + 1) * tiles * patches * h +
                      2 * ((ratios + 1) * tiles * h + 1) + 2 * (2 * h) +
                      layers * layer + global_layers * (layer + 2);
  return tower + out_dim * text_hidden + text_hidden;
}

// What vLLM's profile runs through the Mllama tower (MllamaVisionConfig
// defaults): max_num_tiles tiles of image_size, the local and the gated
// global layers, intermediate_layers_indices kept for the output.
void read_mllama_vision(const Config& v, Model& m) {
  m.vision_image_size = v.get({"image_size"}, 560);
  m.vision_patch_size = std::max<std::int64_t>(1, v.get({"patch_size"}, 14));
  m.vision_hidden_size = v.get({"hidden_size"}, 1280);
  m.vision_intermediate_size = v.get({"intermediate_size"}, 5120);
  m.vision_layers = (Count(v.get({"num_hidden_layers"}, 32)) +
                     Count(v.get({"num_global_layers"}, 8)))
                        .value();
  m.vision_max_tiles = v.get({"max_num_tiles"}, 4);
  m.vision_intermediate_layers = 5;  // [3, 7, 15, 23, 30]
  if (const json* kept = v.find({"intermediate_layers_indices"});
      kept && kept->is_array()) {
    m.vision_intermediate_layers = static_cast<std::int64_t>(kept->size());
  }
}

// Llama4VisionModel and Llama4MultiModalProjector (modeling_llama4.py):
// unfold patch linear (C p² x h, no bias), class embedding, (image/patch)² + 1
// positions, LayerNorms before and after, encoder layers with biased q, k, v,
// o and fc1/fc2 plus 2 LayerNorms; the pixel-shuffle MLP fc1 (intermediate x
// projector_input_dim) and fc2 (projector_output_dim²), then linear_1
// (vision_output_dim x text hidden); no biases outside the encoder.
Count llama4_vision_params(const Config& v, Count text_hidden) {
  const Count h = v.get({"hidden_size"}, 768);
  const Count inter = v.get({"intermediate_size"}, 3072);
  const Count layers = v.get({"num_hidden_layers"}, 34);
  const Count image = v.get({"image_size"}, 448);
  const Count patch = std::max<std::int64_t>(1, v.get({"patch_size"}, 14));
  const Count channels = v.get({"num_channels"}, 3);
  const Count proj_in = v.get({"projector_input_dim"}, 4096);
  const Count proj_out = v.get({"projector_output_dim"}, 4096);
  const Count out_dim = v.get({"vision_output_dim"}, 7680);
  const Count positions = (image / patch) * (image / patch) + 1;
  const Count layer =
      4 * (h * h + h) + (2 * h * inter + inter + h) + 2 * (2 * h);
  return channels * patch * patch * h + h + positions * h + 2 * (2 * h) +
         layers * layer + inter * proj_in + proj_out * proj_out +
         out_dim * text_hidden;
}

// Qwen2.5-VL vision transformer (modeling_qwen2_5_vl.py): Conv3d patch
// embedding (C x temporal x p² x h, no bias); `depth` blocks of two RMSNorms,
// qkv (h x 3h + 3h), proj (h² + h) and a gated MLP with biases; the patch
// merger: RMSNorm h, Linear(h s², h s²) and Linear(h s², out_hidden_size),
// both with bias.
Count qwen25_vision_params(const Config& v) {
  const Count h = v.get({"hidden_size"}, 1280);
  const Count inter = v.get({"intermediate_size"}, 3420);
  const Count depth = v.get({"depth"}, 32);
  const Count patch = v.get({"patch_size"}, 14);
  const Count temporal = v.get({"temporal_patch_size"}, 2);
  const Count channels = v.get({"in_chans", "in_channels"}, 3);
  const Count merge = v.get({"spatial_merge_size"}, 2);
  const Count out = v.get({"out_hidden_size"}, 3584);
  const Count block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) +
                      (3 * h * inter + 2 * inter + h);
  const Count merged = h * merge * merge;
  return channels * temporal * patch * patch * h + depth * block + h +
         (merged * merged + merged) + (merged * out + out);
}

// The SigLIP tower's dimensions for vLLM's multimodal profile. Gemma 3
// pools the (image / patch)² patches to mm_tokens_per_image tokens
// (Gemma3MultiModalProjector: tokens_per_side = sqrt(mm_tokens_per_image)),
// so vision_merge_size is patches per side / tokens per side.
void read_siglip_vision(const Config& root, const Config& v, Model& m) {
  m.vision_image_size = v.get({"image_size"}, 224);
  m.vision_patch_size = std::max<std::int64_t>(1, v.get({"patch_size"}, 16));
  m.vision_hidden_size = v.get({"hidden_size"}, 768);
  m.vision_intermediate_size = v.get({"intermediate_size"}, 3072);
  m.vision_layers = v.get({"num_hidden_layers"}, 12);
  const auto tokens_per_side = static_cast<std::int64_t>(
      std::sqrt(static_cast<double>(root.get({"mm_tokens_per_image"}, 256))));
  m.vision_merge_size =
      std::max<std::int64_t>(1, m.vision_image_size / m.vision_patch_size /
                                    std::max<std::int64_t>(1, tokens_per_side));
}

// The Qwen-VL tower's dimensions for vLLM's multimodal profile. The largest
// image is the processor's max_pixels resized to a multiple of patch x merge
// (vllm/model_executor/models/qwen2_vl.py
// Qwen2VLProcessingInfo.get_image_size_with_most_features, smart_resize);
// max_pixels lives in preprocessor_config.json, not config.json: 12,845,056
// in Qwen/Qwen2-VL-* and Qwen/Qwen2.5-VL-* -> 3,584 px a side.
void read_qwen_vision(const Config& v, bool qwen25, Model& m) {
  constexpr double k_max_pixels = 12845056;
  m.vision_patch_size = std::max<std::int64_t>(1, v.get({"patch_size"}, 14));
  m.vision_temporal_patch_size =
      std::max<std::int64_t>(1, v.get({"temporal_patch_size"}, 2));
  m.vision_merge_size =
      std::max<std::int64_t>(1, v.get({"spatial_merge_size"}, 2));
  const std::int64_t factor =
      (Count{m.vision_patch_size} * m.vision_merge_size).value();
  m.vision_image_size = static_cast<std::int64_t>(std::sqrt(k_max_pixels) /
                                                  static_cast<double>(factor)) *
                        factor;
  m.vision_layers = v.get({"depth"}, 32);
  m.vision_video = true;  // get_supported_mm_limits: image and video
  if (qwen25) {
    m.vision_hidden_size = v.get({"hidden_size"}, 1280);
    m.vision_intermediate_size = v.get({"intermediate_size"}, 3420);
    m.vision_gated_mlp = true;  // Qwen2_5_VisionMLP: gate_up_proj + SiLU
  } else {
    m.vision_hidden_size = v.get({"embed_dim"}, 1280);
    m.vision_intermediate_size =
        (Count(m.vision_hidden_size) * Count(v.get({"mlp_ratio"}, 4))).value();
  }
}

// Qwen2-VL vision transformer (modeling_qwen2_vl.py): the same layout with
// LayerNorms (weight and bias), a GELU MLP of mlp_ratio x embed_dim and a
// LayerNorm in the merger; the output width is vision_config.hidden_size.
Count qwen2_vision_params(const Config& v) {
  const Count h = v.get({"embed_dim"}, 1280);
  const Count inter = h * v.get({"mlp_ratio"}, 4);
  const Count depth = v.get({"depth"}, 32);
  const Count patch = v.get({"patch_size"}, 14);
  const Count temporal = v.get({"temporal_patch_size"}, 2);
  const Count channels = v.get({"in_chans", "in_channels"}, 3);
  const Count merge = v.get({"spatial_merge_size"}, 2);
  const Count out = v.get({"hidden_size"}, 3584);
  const Count block = 2 * (2 * h) + (3 * h * h + 3 * h) + (h * h + h) +
                      (2 * h * inter + inter + h);
  const Count merged = h * merge * merge;
  return channels * temporal * patch * patch * h + depth * block + 2 * h +
         (merged * merged + merged) + (merged * out + out);
}

}  // namespace

// Qwen2_5_VLConfig / Qwen2VLConfig: a Qwen2 decoder (q/k/v bias) whose fields
// sit at the top level (text_config in transformers 4.5x+ files), plus the
// vision transformer and patch merger.
void read_qwen_vl(const Source& s, Model& m) {
  const Config& t = s.text_config ? *s.text_config : s.root;
  read_llama_like(t, m, 0, false);
  m.qkv_bias = true;
  m.o_bias = false;
  if (const auto vision = s.root.child("vision_config")) {
    m.extra_params = s.type == "qwen2_vl"
                         ? qwen2_vision_params(*vision).value()
                         : qwen25_vision_params(*vision).value();
    read_qwen_vision(*vision, s.type == "qwen2_5_vl", m);
  }
}

// Gemma3TextConfig defaults; real gemma3 text_config files omit vocab_size
// (262208), heads (8 / 4) and head_dim (256). Gemma3ForConditionalGeneration
// adds the SigLIP tower and projector (extra_params).
void read_gemma3(const Source& s, Model& m) {
  const bool wrapper = s.type == "gemma3";
  if (wrapper && !s.text_config) {
    s.root.fail("text_config", "missing");
  }
  // (Parsed from text: g++ 12 misreports the initializer-list form with
  // -Warray-bounds.)
  const json defaults = json::parse(
      R"({"vocab_size": 262208, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256,
        "sliding_window": 4096, "tie_word_embeddings": true})");
  const json text = with_defaults(
      wrapper ? s.text_config->object() : s.root.object(), defaults);
  const Config t(text, s.root.origin(), wrapper ? "text_config." : "");
  read_llama_like(t, m, 256, true);
  m.norms_per_layer = 4;
  m.qk_norm = true;
  int every = global_every_from_layer_types(t);
  if (every == -2) {
    every = as_period(
        t.get({"sliding_window_pattern", "_sliding_window_pattern"}, 6));
  }
  set_sliding(m, t.window("sliding_window", 4096), every);
  if (!wrapper) {
    return;
  }
  if (const auto vision = s.root.child("vision_config")) {
    m.extra_params = siglip_params(*vision, m.hidden_size).value();
    read_siglip_vision(s.root, *vision, m);
  }
}

// Llama4TextConfig: experts of intermediate_size plus one shared expert of
// the same width; dense layers of intermediate_size_mlp; MoE every
// interleave_moe_layer_step layers; chunked attention except on the NoPE
// layers (every no_rope_layer_interval-th). Llama4ForConditionalGeneration
// adds the vision model and projector (extra_params).
void read_llama4(const Source& s, Model& m) {
  const bool wrapper = s.type == "llama4";
  const Config& t = wrapper && s.text_config ? *s.text_config : s.root;
  read_llama_like(t, m, 0, false);
  const std::int64_t expert_width = m.intermediate_size;
  m.intermediate_size = t.get({"intermediate_size_mlp"}, expert_width);
  read_moe_common(t, m, "num_local_experts");
  m.moe_intermediate_size = expert_width;
  m.num_shared_experts = 1;
  m.moe_every = std::max(1, as_period(t.get({"interleave_moe_layer_step"}, 1)));
  set_sliding(m, t.get({"attention_chunk_size"}, 0),
              as_period(t.get({"no_rope_layer_interval"}, 4)));
  if (!wrapper) {
    return;
  }
  if (const auto vision = s.root.child("vision_config")) {
    m.extra_params = llama4_vision_params(*vision, m.hidden_size).value();
  }
}

// MllamaTextConfig: a Llama decoder whose cross_attention_layers add q_norm
// and k_norm (head_dim each) and two gate scalars; embed_tokens holds 8 extra
// rows. Those and the vision model go to extra_params.
void read_mllama(const Source& s, Model& m) {
  if (!s.text_config) {
    s.root.fail("text_config", "missing");
  }
  const Config& t = *s.text_config;
  read_llama_like(t, m, 0, false);
  Count cross = 0;
  if (const json* layers = t.find({"cross_attention_layers"});
      layers && layers->is_array()) {
    cross = static_cast<std::int64_t>(layers->size());
  }
  Count extra = 8 * Count(m.hidden_size) + cross * (2 * Count(m.head_dim) + 2);
  if (const auto vision = s.root.child("vision_config")) {
    extra = extra + mllama_vision_params(*vision, m.hidden_size);
    read_mllama_vision(*vision, m);
  }
  m.extra_params = extra.value();
}

// Mistral3Config: a Mistral decoder under text_config, the Pixtral tower and
// Mistral3MultiModalProjector.
void read_mistral3(const Source& s, Model& m) {
  if (!s.text_config) {
    s.root.fail("text_config", "missing");
  }
  read_llama_like(*s.text_config, m, 0, false);
  set_sliding(m, s.text_config->window("sliding_window", 0), 0);
  if (const auto vision = s.root.child("vision_config")) {
    m.extra_params = pixtral_params(s.root, *vision, m.hidden_size).value();
  }
}

}  // namespace oomplan::hf
