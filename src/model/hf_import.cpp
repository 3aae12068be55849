// g++ 12 reports a false -Warray-bounds inside std::map (stl_tree.h) once
// nlohmann::json's object code is inlined into this file, wherever the
// branches happen to fall. The warning's location is the header, so the
// pragma must come before the includes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif

#include "util/json_errors.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

// Hugging Face config.json import. Each model_type maps its config class's
// field names and defaults (transformers models/<type>/configuration_<type>.py)
// onto Model. The core dimensions (hidden size, layers, heads, vocabulary,
// MLP width) are required unless the config class is known to leave them out
// of real files (Gemma 3's text_config); every other field takes the config
// class's default, as transformers would.
//
// Untrusted input: every integer read is a whole number from 0 to 2^53; the
// model is checked by check_model() (the catalog's own structure check)
// before its parameters are counted; the vision-tower sums, computed from
// fields check_model() does not see, use Count, which throws instead of
// wrapping.

namespace oomplan {
namespace {

using nlohmann::json;

// The largest integer a config may hold: 2^53, the last one a JSON number
// keeps exactly in every parser (Python's json included). Real configs stay
// below 2^40 (token ids, max positions).
constexpr std::int64_t k_max_config_integer = std::int64_t{1} << 53;

// Thrown by Count on overflow; import_hf_config turns it into one Error.
struct Overflow {};

// A parameter count computed from config values: + and * throw Overflow
// instead of wrapping. Implicit from int64 so that formulas read as written.
class Count {
 public:
  constexpr Count(std::int64_t value) : m_value(value) {}  // NOLINT
  std::int64_t value() const { return m_value; }

  friend Count operator+(Count a, Count b) {
    std::int64_t out = 0;
    if (__builtin_add_overflow(a.m_value, b.m_value, &out)) {
      throw Overflow{};
    }
    return out;
  }
  friend Count operator*(Count a, Count b) {
    std::int64_t out = 0;
    if (__builtin_mul_overflow(a.m_value, b.m_value, &out)) {
      throw Overflow{};
    }
    return out;
  }
  // REQUIRES: b > 0.
  friend Count operator/(Count a, Count b) { return a.m_value / b.m_value; }

 private:
  std::int64_t m_value;
};

// One config object (the file, or its text_config / vision_config) with the
// file name and the path prefix for messages.
class Config {
 public:
  Config(const json& object, std::string_view origin, std::string prefix)
      : m_object(object), m_origin(origin), m_prefix(std::move(prefix)) {}

  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw Error(fmt::format("{}: {}{}: {}", escape_for_message(m_origin),
                            escape_for_message(m_prefix),
                            escape_for_message(key), problem));
  }

  // The value of the first of `keys` present and not null, or nullptr.
  const json* find(std::initializer_list<std::string_view> keys) const {
    for (const auto key : keys) {
      const auto it = m_object.find(std::string(key));
      if (it != m_object.end() && !it->is_null()) {
        return &*it;
      }
    }
    return nullptr;
  }
  bool has(std::string_view key) const { return find({key}) != nullptr; }

  // The first of `keys` the config states (the first of them when none).
  std::string_view key(std::initializer_list<std::string_view> keys) const {
    for (const auto k : keys) {
      if (has(k)) {
        return k;
      }
    }
    return *keys.begin();
  }

  // A window size: an explicit null turns it off (Mistral-7B-v0.3's
  // "sliding_window": null), a missing key takes the class default.
  std::int64_t window(std::string_view key, std::int64_t fallback) const {
    const auto it = m_object.find(std::string(key));
    if (it != m_object.end() && it->is_null()) {
      return 0;
    }
    return get({key}, fallback);
  }

  // A required positive integer under any of `keys` (the first names it).
  std::int64_t need(std::initializer_list<std::string_view> keys) const {
    const json* value = find(keys);
    if (value == nullptr) {
      fail(*keys.begin(), "missing");
    }
    return positive(*keys.begin(), *value);
  }

  // An optional integer from 0 to 2^53 under any of `keys`, else
  // `fallback`.
  std::int64_t get(std::initializer_list<std::string_view> keys,
                   std::int64_t fallback) const {
    const json* value = find(keys);
    if (value == nullptr) {
      return fallback;
    }
    return whole(*keys.begin(), *value, 0);
  }

  bool flag(std::string_view key, bool fallback) const {
    const json* value = find({key});
    if (value == nullptr) {
      return fallback;
    }
    if (!value->is_boolean()) {
      fail(key, fmt::format("must be true or false, but is {}", shown(*value)));
    }
    return value->get<bool>();
  }

  std::string text(std::string_view key) const {
    const json* value = find({key});
    if (value == nullptr) {
      return {};
    }
    if (!value->is_string()) {
      fail(key, fmt::format("must be a string, but is {}", shown(*value)));
    }
    return value->get<std::string>();
  }

  // A nested object (text_config, vision_config), or nullopt.
  std::optional<Config> child(std::string_view key) const {
    const json* value = find({key});
    if (value == nullptr) {
      return std::nullopt;
    }
    if (!value->is_object()) {
      fail(key,
           fmt::format("must be an object, but is {}", value->type_name()));
    }
    return Config(*value, m_origin, m_prefix + std::string(key) + ".");
  }

  // A nested object under a key that is not a literal (a config group
  // name), or nullopt when absent or not an object.
  static std::optional<Config> member(const Config& parent, const json& value,
                                      std::string_view key) {
    if (!value.is_object()) {
      return std::nullopt;
    }
    return Config(value, parent.m_origin,
                  parent.m_prefix + std::string(key) + ".");
  }

  const json& object() const { return m_object; }
  std::string_view origin() const { return m_origin; }
  const std::string& prefix() const { return m_prefix; }

  // A value as the message shows it: a scalar's JSON text, escaped and cut
  // short; "an array" or "an object" for the others.
  static std::string shown(const json& value) {
    if (value.is_array()) {
      return "an array";
    }
    if (value.is_object()) {
      return "an object";
    }
    return escape_for_message(
        value.dump(-1, ' ', false, json::error_handler_t::replace));
  }

 private:
  // An integer from `min` to 2^53.
  std::int64_t whole(std::string_view key, const json& value,
                     std::int64_t min) const {
    const bool integer = value.is_number_integer();
    const bool too_large =
        integer && value.is_number_unsigned()
            ? value.get<std::uint64_t>() >
                  static_cast<std::uint64_t>(k_max_config_integer)
            : integer && value.get<std::int64_t>() > k_max_config_integer;
    if (!integer || (!too_large && value.get<std::int64_t>() < min)) {
      fail(key, fmt::format("must be a {}whole number, but is {}",
                            min > 0 ? "positive " : "", shown(value)));
    }
    if (too_large) {
      fail(key, fmt::format("must be at most {}, but is {}",
                            k_max_config_integer, shown(value)));
    }
    return value.get<std::int64_t>();
  }

  std::int64_t positive(std::string_view key, const json& value) const {
    return whole(key, value, 1);
  }

  const json& m_object;
  std::string_view m_origin;
  std::string m_prefix;
};

// layer_types ["sliding_attention", "full_attention", ...] (transformers
// 4.53+): the period of the global layers, 0 when none is global, -1 when
// every layer is global.
int global_every_from_layer_types(const Config& c) {
  const json* types = c.find({"layer_types"});
  if (types == nullptr || !types->is_array() || types->empty()) {
    return -2;  // absent
  }
  std::vector<bool> global;
  for (const auto& t : *types) {
    global.push_back(t.is_string() && t.get<std::string>() == "full_attention");
  }
  const auto first = std::find(global.begin(), global.end(), true);
  if (first == global.end()) {
    return 0;
  }
  const auto period = static_cast<int>(first - global.begin()) + 1;
  if (period == 1) {
    return -1;
  }
  return period;
}

// A layer period from the config as an int. A period beyond k_max_layers
// (and so beyond num_layers, which check_model bounds) marks no layer in
// range, exactly as the clamped value does.
int as_period(std::int64_t value) {
  return static_cast<int>(std::clamp<std::int64_t>(value, 0, k_max_layers));
}

// hidden / heads where the modeling code requires the division to be exact
// (GPT2Attention, BloomAttention, FalconAttention, PhiAttention and
// GPTNeoXAttention raise ValueError otherwise).
std::int64_t exact_head_dim(const Config& c, std::string_view hidden_key,
                            std::int64_t hidden, std::string_view heads_key,
                            std::int64_t heads) {
  if (hidden % heads != 0) {
    c.fail(heads_key,
           fmt::format("{} does not divide {} {}", heads, hidden_key, hidden));
  }
  return hidden / heads;
}

void set_sliding(Model& m, std::int64_t window, int global_every) {
  if (window <= 0 || global_every == -1) {
    m.sliding_window = 0;
    m.global_every = 0;
    return;
  }
  m.sliding_window = window;
  m.global_every = std::max(global_every, 0);
}

// Llama-family decoders: the fields LlamaConfig, MistralConfig, Qwen2Config,
// Qwen3Config, Phi3Config, Gemma2Config, Gemma3TextConfig, CohereConfig,
// DeepseekV3Config, GptOssConfig and Llama4TextConfig share.
void read_llama_like(const Config& c, Model& m, std::int64_t default_head_dim,
                     bool default_tie) {
  m.hidden_size = c.need({"hidden_size"});
  m.num_layers = c.need({"num_hidden_layers"});
  m.num_heads = c.need({"num_attention_heads"});
  m.num_kv_heads = c.get({"num_key_value_heads"}, m.num_heads);
  m.head_dim =
      c.get({"head_dim"}, default_head_dim > 0 ? default_head_dim
                                               : m.hidden_size / m.num_heads);
  if (m.head_dim < 1) {
    c.fail("head_dim", "must be positive");
  }
  m.intermediate_size = c.need({"intermediate_size"});
  m.vocab_size = c.need({"vocab_size"});
  m.max_position_embeddings = c.get({"max_position_embeddings"}, 0);
  m.tie_word_embeddings = c.flag("tie_word_embeddings", default_tie);
  const bool bias = c.flag("attention_bias", false);
  m.qkv_bias = bias;
  m.o_bias = bias;
  m.mlp_bias = c.flag("mlp_bias", false);
}

// A config object with defaults layered under it (Gemma 3's text_config omits
// fields whose Gemma3TextConfig default is right).
json with_defaults(const json& object, const json& defaults) {
  json merged = defaults;
  for (const auto& item : object.items()) {
    if (!item.value().is_null()) {
      merged[item.key()] = item.value();
    }
  }
  return merged;
}

void read_moe_common(const Config& c, Model& m, std::string_view experts_key) {
  m.num_experts = c.need({experts_key});
  m.experts_per_tok = c.need({"num_experts_per_tok", "experts_per_token"});
  if (m.experts_per_tok > m.num_experts) {
    c.fail("num_experts_per_tok",
           fmt::format("{} exceeds {} {}", m.experts_per_tok, experts_key,
                       m.num_experts));
  }
}

// d_inner = expand x hidden_size (Mamba, Mamba-2, Jamba and Falcon-H1's
// default), in checked arithmetic: a hostile expand overflows.
std::int64_t expanded(const Config& root, std::string_view key,
                      std::int64_t hidden) {
  return (Count{root.get({key}, 2)} * hidden).value();
}

// ceil(hidden / 16), the "auto" time-step rank of MambaConfig and
// JambaConfig (math.ceil(self.hidden_size / 16)).
std::int64_t dt_rank(const Config& c, std::string_view key,
                     std::int64_t hidden) {
  const json* value = c.find({key});
  if (value == nullptr ||
      (value->is_string() && value->get<std::string>() == "auto")) {
    return (hidden + 15) / 16;
  }
  return c.get({key}, 0);
}

// layer_types ["linear_attention", "full_attention", ...] (Qwen3NextConfig),
// or nullopt when the config has none.
// num_hidden_layers checked before a per-layer list is built from it (the
// list is built while reading, before check_model() sees the model): a
// count of 2^32 would otherwise allocate gigabytes first.
std::size_t layer_slots(const Config& c, std::int64_t layers) {
  if (layers < 1 || layers > k_max_layers) {
    c.fail("num_hidden_layers",
           layers < 1 ? fmt::format("must be positive, but is {}", layers)
                      : fmt::format("must be from 1 to {}, but is {}",
                                    k_max_layers, layers));
  }
  return static_cast<std::size_t>(layers);
}

std::optional<std::vector<LayerKind>> mixer_layer_types(const Config& c,
                                                        std::int64_t layers) {
  const json* types = c.find({"layer_types"});
  if (types == nullptr) {
    return std::nullopt;
  }
  layer_slots(c, layers);
  if (!types->is_array() ||
      static_cast<std::int64_t>(types->size()) != layers) {
    c.fail("layer_types",
           fmt::format("must list the {} layers' types", layers));
  }
  std::vector<LayerKind> out;
  for (const auto& t : *types) {
    const std::string name = t.is_string() ? t.get<std::string>() : "";
    if (name == "full_attention") {
      out.push_back(LayerKind::attention);
    } else if (name == "linear_attention") {
      out.push_back(LayerKind::linear_attention);
    } else {
      c.fail("layer_types",
             fmt::format("{} is not full_attention or linear_attention",
                         Config::shown(t)));
    }
  }
  return out;
}

// Qwen2-MoE / Qwen3-MoE: decoder_sparse_step and mlp_only_layers. Dense
// layers listed in mlp_only_layers are modelled as the first ones, which keeps
// the totals exact (only pipeline stage splits see the difference).
void read_qwen_sparse(const Config& c, Model& m) {
  m.moe_every = std::max(1, as_period(c.get({"decoder_sparse_step"}, 1)));
  const json* dense = c.find({"mlp_only_layers"});
  if (dense == nullptr) {
    return;
  }
  // Qwen3MoeDecoderLayer: layer_idx in mlp_only_layers gives a dense MLP;
  // each entry must be a layer of the model, named once.
  if (!dense->is_array()) {
    c.fail("mlp_only_layers", fmt::format("must be a list of layer indices, "
                                          "but is {}",
                                          Config::shown(*dense)));
  }
  std::vector<bool> seen(layer_slots(c, m.num_layers), false);
  for (const auto& item : *dense) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < 0 ||
        item.get<std::int64_t>() >= m.num_layers ||
        (item.is_number_unsigned() &&
         item.get<std::uint64_t>() >= static_cast<std::uint64_t>(INT64_MAX))) {
      c.fail("mlp_only_layers",
             fmt::format("{} is not a layer index from 0 to {}",
                         Config::shown(item), m.num_layers - 1));
    }
    const auto layer = static_cast<std::size_t>(item.get<std::int64_t>());
    if (seen[layer]) {
      c.fail("mlp_only_layers", fmt::format("layer {} is listed twice", layer));
    }
    seen[layer] = true;
  }
  m.first_k_dense = static_cast<std::int64_t>(dense->size());
}

void read_deepseek(const Config& c, Model& m) {
  read_llama_like(c, m, 0, false);
  m.q_lora_rank = c.get({"q_lora_rank"}, 0);
  m.kv_lora_rank = c.need({"kv_lora_rank"});
  m.qk_rope_head_dim = c.need({"qk_rope_head_dim"});
  m.qk_nope_head_dim = c.need({"qk_nope_head_dim"});
  m.v_head_dim = c.need({"v_head_dim"});
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  m.num_kv_heads = m.num_heads;  // MLA: every head reads the shared latent
  if (c.get({"n_routed_experts"}, 0) > 0) {
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
}

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

Quant quant_from_config(const Config& q) {
  const std::string method = q.text("quant_method");
  if (method == "bitsandbytes") {
    if (q.flag("load_in_4bit", false)) {
      return q.flag("bnb_4bit_use_double_quant", false) ? Quant::nf4
                                                        : Quant::nf4_nodq;
    }
    if (q.flag("load_in_8bit", false)) {
      return Quant::int8;
    }
    q.fail("load_in_4bit", "bitsandbytes config loads neither 4 nor 8 bit");
  }
  if (method == "gptq") {
    return q.get({"bits"}, 4) == 8 ? Quant::int8 : Quant::gptq;
  }
  if (method == "awq") {
    return Quant::awq;
  }
  if (method == "fp8" || method == "fbgemm_fp8") {
    return Quant::fp8;
  }
  if (method == "mxfp4") {
    return Quant::mxfp4;
  }
  if (method == "compressed-tensors") {
    // The weights' scheme of the first config group decides:
    // config_groups.<name>.weights.{num_bits, type}.
    if (const auto groups = q.child("config_groups")) {
      for (const auto& item : groups->object().items()) {
        const auto group = Config::member(*groups, item.value(), item.key());
        const auto weights = group ? group->child("weights") : std::nullopt;
        if (!weights) {
          continue;
        }
        const std::int64_t bits = weights->get({"num_bits"}, 0);
        std::string type = weights->text("type");
        if (type.empty()) {
          type = "int";  // QuantizationArgs.type default
        }
        if (bits == 8) {
          return type == "float" ? Quant::fp8 : Quant::int8;
        }
        if (bits == 4) {
          return type == "float" ? Quant::mxfp4 : Quant::int4;
        }
        weights->fail("num_bits",
                      fmt::format("unsupported {}-bit {} weights; supported: "
                                  "4 and 8 bits",
                                  bits, escape_for_message(type)));
      }
    }
    q.fail("config_groups", "no weights scheme found");
  }
  q.fail("quant_method",
         fmt::format("unsupported '{}'; supported: bitsandbytes, gptq, awq, "
                     "fp8, compressed-tensors, mxfp4",
                     escape_for_message(method)));
}

std::string default_name(std::string_view origin) {
  std::string path(origin);
  const auto slash = path.find_last_of('/');
  if (slash != std::string::npos && path.substr(slash + 1) == "config.json") {
    path.erase(slash);
    const auto parent = path.find_last_of('/');
    return parent == std::string::npos ? path : path.substr(parent + 1);
  }
  return path;
}

// check_model() on an imported model: the catalog's structure check, with
// the message naming the config file (and the index for checkpoint_bytes).
void check_imported(const Model& m, std::string_view origin,
                    std::string_view text_prefix) {
  const auto problem = check_model(m);
  if (!problem) {
    return;
  }
  std::string field = std::string(text_prefix) + problem->field;
  std::string text = problem->problem;
  if (problem->field == "checkpoint_bytes") {
    field = "model.safetensors.index.json: metadata.total_size";
  } else if (problem->field == "extra_params") {
    field = "vision_config";
    text = fmt::format(
        "these sizes give {} parameters outside the text model, more than "
        "10^15",
        m.extra_params);
  }
  throw Error(
      fmt::format("{}: {}: {}", escape_for_message(origin), field, text));
}

// metadata.total_size of a model.safetensors.index.json: an integer from 1
// to 2^63 - 1 (safetensors writes the sum of the tensors' byte sizes).
std::int64_t index_total_size(std::string_view text, std::string_view origin) {
  const std::string where = fmt::format("{}: model.safetensors.index.json",
                                        escape_for_message(origin));
  check_json_depth(text, where);
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}", where, strip_json_prefix(e.what())));
  }
  if (!index.is_object()) {
    throw Error(fmt::format("{}: must hold a JSON object", where));
  }
  const auto metadata = index.find("metadata");
  if (metadata == index.end() || !metadata->is_object()) {
    throw Error(fmt::format("{}: metadata.total_size: missing", where));
  }
  const auto total = metadata->find("total_size");
  if (total == metadata->end()) {
    throw Error(fmt::format("{}: metadata.total_size: missing", where));
  }
  const bool too_large =
      total->is_number_unsigned() &&
      total->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX);
  if (!total->is_number_integer() || too_large ||
      total->get<std::int64_t>() < 1) {
    throw Error(fmt::format(
        "{}: metadata.total_size: must be a byte count from 1 to {}, but is "
        "{}",
        where, INT64_MAX, Config::shown(*total)));
  }
  return total->get<std::int64_t>();
}

}  // namespace

Model import_hf_config(std::string_view config_text, std::string_view origin,
                       std::optional<std::string_view> index_text) {
  check_json_depth(config_text, escape_for_message(origin));
  json doc;
  try {
    doc = json::parse(config_text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}", escape_for_message(origin),
                            strip_json_prefix(e.what())));
  }
  if (!doc.is_object()) {
    throw Error(fmt::format("{}: a config.json must hold a JSON object",
                            escape_for_message(origin)));
  }
  const Config root(doc, origin, "");
  const std::string type = root.text("model_type");
  if (type.empty()) {
    root.fail("model_type", "missing");
  }

  Model m;
  m.model_type = type;
  m.hf_id = root.text("_name_or_path");
  m.name = m.hf_id.empty() ? default_name(origin) : m.hf_id;

  // Multimodal wrappers: the text model lives in text_config.
  const auto text_config = root.child("text_config");
  json gemma3_text;  // owns the defaulted Gemma 3 text_config
  std::optional<Config> gemma3_config;

  try {
    if (type == "llama" || type == "mistral" || type == "qwen2" ||
        type == "qwen3" || type == "phi3") {
      // LlamaConfig, MistralConfig (sliding_window 4096), Qwen2Config (q/k/v
      // bias; use_sliding_window false), Qwen3Config (head_dim 128, q/k norm),
      // Phi3Config (sliding_window None).
      read_llama_like(root, m, type == "qwen3" ? 128 : 0, false);
      if (type == "qwen2") {
        m.qkv_bias = true;  // Qwen2Attention: q, k, v with bias, o without
        m.o_bias = false;
      }
      if (type == "qwen3") {
        m.qk_norm = true;
      }
      std::int64_t window =
          root.window("sliding_window", type == "mistral" ? 4096 : 0);
      if ((type == "qwen2" || type == "qwen3") &&
          !root.flag("use_sliding_window", false)) {
        window = 0;
      }
      set_sliding(m, window, std::max(0, global_every_from_layer_types(root)));
    } else if (type == "qwen2_5_vl" || type == "qwen2_vl") {
      // Qwen2_5_VLConfig: a Qwen2 decoder (q/k/v bias) whose fields sit at the
      // top level (text_config in transformers 4.5x+ files), plus the vision
      // transformer and patch merger.
      const Config& t = text_config ? *text_config : root;
      read_llama_like(t, m, 0, false);
      m.qkv_bias = true;
      m.o_bias = false;
      if (const auto vision = root.child("vision_config")) {
        m.extra_params = type == "qwen2_vl"
                             ? qwen2_vision_params(*vision).value()
                             : qwen25_vision_params(*vision).value();
        read_qwen_vision(*vision, type == "qwen2_5_vl", m);
      }
    } else if (type == "mixtral") {
      read_llama_like(root, m, 0, false);
      read_moe_common(root, m, "num_local_experts");
      m.moe_intermediate_size = m.intermediate_size;
      set_sliding(m, root.window("sliding_window", 0), 0);
    } else if (type == "qwen2_moe" || type == "qwen3_moe") {
      read_llama_like(root, m, type == "qwen3_moe" ? 128 : 0, false);
      read_moe_common(root, m, "num_experts");
      m.moe_intermediate_size = root.need({"moe_intermediate_size"});
      read_qwen_sparse(root, m);
      if (type == "qwen2_moe") {
        m.qkv_bias = true;
        m.o_bias = false;
        // Qwen2MoeSparseMoeBlock: one shared expert with its own width and a
        // sigmoid gate.
        m.shared_expert_intermediate_size =
            root.get({"shared_expert_intermediate_size"}, 0);
        m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
        m.shared_expert_gate = m.num_shared_experts > 0;
      } else {
        m.qk_norm = true;
      }
    } else if (type == "gemma") {
      // GemmaConfig (Gemma 1): head_dim 256, GeGLU, tied embeddings.
      read_llama_like(root, m, 256, true);
    } else if (type == "granite") {
      // GraniteConfig: the Llama layout; its multipliers scale activations,
      // not parameters.
      read_llama_like(root, m, 0, false);
    } else if (type == "gpt_neox") {
      // GPTNeoXConfig (Pythia, GPT-NeoX-20B): fused qkv and dense with bias,
      // GELU MLP with bias, two LayerNorms per layer, untied embed_out.
      m.hidden_size = root.need({"hidden_size"});
      m.num_layers = root.need({"num_hidden_layers"});
      m.num_heads = root.need({"num_attention_heads"});
      m.num_kv_heads = m.num_heads;
      m.head_dim =
          exact_head_dim(root, root.key({"hidden_size"}), m.hidden_size,
                         root.key({"num_attention_heads"}), m.num_heads);
      m.intermediate_size = root.need({"intermediate_size"});
      m.vocab_size = root.need({"vocab_size"});
      m.max_position_embeddings = root.get({"max_position_embeddings"}, 2048);
      m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
      m.mlp = MlpKind::plain;
      m.norm = NormKind::layer_norm;
      m.parallel_block = root.flag("use_parallel_residual", true);
      m.qkv_bias = m.o_bias = root.flag("attention_bias", true);
      m.mlp_bias = true;
    } else if (type == "gemma2") {
      // Gemma2Config: head_dim 256, sliding_window 4096 on even layers, four
      // norms per layer, tied embeddings.
      read_llama_like(root, m, 256, true);
      m.norms_per_layer = 4;
      const int every = global_every_from_layer_types(root);
      set_sliding(m, root.window("sliding_window", 4096),
                  every == -2 ? 2 : every);
    } else if (type == "gemma3" || type == "gemma3_text") {
      // Gemma3TextConfig defaults; real gemma3 text_config files omit
      // vocab_size (262208), heads (8 / 4) and head_dim (256).
      // (Parsed from text: g++ 12 misreports the initializer-list form with
      // -Warray-bounds.)
      const json defaults = json::parse(
          R"({"vocab_size": 262208, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 256,
            "sliding_window": 4096, "tie_word_embeddings": true})");
      if (type == "gemma3" && !text_config) {
        root.fail("text_config", "missing");
      }
      gemma3_text = with_defaults(
          type == "gemma3" ? text_config->object() : doc, defaults);
      gemma3_config.emplace(gemma3_text, origin,
                            type == "gemma3" ? "text_config." : "");
      const Config& t = *gemma3_config;
      read_llama_like(t, m, 256, true);
      m.norms_per_layer = 4;
      m.qk_norm = true;
      int every = global_every_from_layer_types(t);
      if (every == -2) {
        every = as_period(
            t.get({"sliding_window_pattern", "_sliding_window_pattern"}, 6));
      }
      set_sliding(m, t.window("sliding_window", 4096), every);
      if (type == "gemma3") {
        if (const auto vision = root.child("vision_config")) {
          m.extra_params = siglip_params(*vision, m.hidden_size).value();
          read_siglip_vision(root, *vision, m);
        }
      }
    } else if (type == "cohere") {
      // CohereForCausalLM: parallel attention and MLP after one LayerNorm
      // without bias (weight only, counted like RMSNorm); tied embeddings.
      read_llama_like(root, m, 0, true);
      m.parallel_block = true;
      m.norms_per_layer = 1;
    } else if (type == "deepseek_v2" || type == "deepseek_v3" ||
               type == "kimi_k2") {
      // Kimi K2: the DeepseekV3ForCausalLM architecture under its own
      // model_type (config.json "architectures").
      read_deepseek(root, m);
    } else if (type == "gpt_oss") {
      // GptOssConfig: biases on q, k, v, o; learned sinks; 128-token sliding
      // window on even layers; MoE with router and expert biases.
      read_llama_like(root, m, 64, false);
      m.qkv_bias = root.flag("attention_bias", true);
      m.o_bias = m.qkv_bias;
      m.attention_sinks = true;
      m.mlp_bias = true;
      m.router_bias = true;
      read_moe_common(root, m, "num_local_experts");
      m.moe_intermediate_size = m.intermediate_size;
      const int every = global_every_from_layer_types(root);
      set_sliding(m, root.window("sliding_window", 128),
                  every == -2 ? 2 : every);
    } else if (type == "llama4" || type == "llama4_text") {
      // Llama4TextConfig: experts of intermediate_size plus one shared expert
      // of the same width; dense layers of intermediate_size_mlp; MoE every
      // interleave_moe_layer_step layers; chunked attention except on the NoPE
      // layers (every no_rope_layer_interval-th).
      // Llama4ForConditionalGeneration adds the vision model and projector
      // (extra_params).
      const Config& t = type == "llama4" && text_config ? *text_config : root;
      read_llama_like(t, m, 0, false);
      const std::int64_t expert_width = m.intermediate_size;
      m.intermediate_size = t.get({"intermediate_size_mlp"}, expert_width);
      read_moe_common(t, m, "num_local_experts");
      m.moe_intermediate_size = expert_width;
      m.num_shared_experts = 1;
      m.moe_every =
          std::max(1, as_period(t.get({"interleave_moe_layer_step"}, 1)));
      set_sliding(m, t.get({"attention_chunk_size"}, 0),
                  as_period(t.get({"no_rope_layer_interval"}, 4)));
      if (type == "llama4") {
        if (const auto vision = root.child("vision_config")) {
          m.extra_params = llama4_vision_params(*vision, m.hidden_size).value();
        }
      }
    } else if (type == "mllama") {
      // MllamaTextConfig: a Llama decoder whose cross_attention_layers add
      // q_norm and k_norm (head_dim each) and two gate scalars; embed_tokens
      // holds 8 extra rows. Those and the vision model go to extra_params.
      if (!text_config) {
        root.fail("text_config", "missing");
      }
      read_llama_like(*text_config, m, 0, false);
      Count cross = 0;
      if (const json* layers = text_config->find({"cross_attention_layers"});
          layers && layers->is_array()) {
        cross = static_cast<std::int64_t>(layers->size());
      }
      Count extra =
          8 * Count(m.hidden_size) + cross * (2 * Count(m.head_dim) + 2);
      if (const auto vision = root.child("vision_config")) {
        extra = extra + mllama_vision_params(*vision, m.hidden_size);
        read_mllama_vision(*vision, m);
      }
      m.extra_params = extra.value();
    } else if (type == "mistral3") {
      if (!text_config) {
        root.fail("text_config", "missing");
      }
      read_llama_like(*text_config, m, 0, false);
      set_sliding(m, text_config->window("sliding_window", 0), 0);
      if (const auto vision = root.child("vision_config")) {
        m.extra_params = pixtral_params(root, *vision, m.hidden_size).value();
      }
    } else if (type == "phi") {
      // PhiConfig (Phi-1/1.5/2): parallel block after one LayerNorm, biases on
      // every linear layer including lm_head, GELU MLP.
      m.hidden_size = root.need({"hidden_size"});
      m.num_layers = root.need({"num_hidden_layers"});
      m.num_heads = root.need({"num_attention_heads"});
      m.num_kv_heads = root.get({"num_key_value_heads"}, m.num_heads);
      m.head_dim =
          exact_head_dim(root, root.key({"hidden_size"}), m.hidden_size,
                         root.key({"num_attention_heads"}), m.num_heads);
      m.intermediate_size = root.need({"intermediate_size"});
      m.vocab_size = root.need({"vocab_size"});
      m.max_position_embeddings = root.get({"max_position_embeddings"}, 2048);
      m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
      m.mlp = MlpKind::plain;
      m.norm = NormKind::layer_norm;
      m.norms_per_layer = 1;
      m.parallel_block = true;
      m.qkv_bias = m.o_bias = m.mlp_bias = true;
      m.lm_head_bias = true;
    } else if (type == "gpt2") {
      // GPT2Config: n_embd, n_layer, n_head, n_inner (None = 4 n_embd),
      // n_positions learned positions; biases everywhere; tied lm_head.
      m.hidden_size = root.need({"n_embd", "hidden_size"});
      m.num_layers = root.need({"n_layer", "num_hidden_layers"});
      m.num_heads = root.need({"n_head", "num_attention_heads"});
      m.num_kv_heads = m.num_heads;
      m.head_dim = exact_head_dim(
          root, root.key({"n_embd", "hidden_size"}), m.hidden_size,
          root.key({"n_head", "num_attention_heads"}), m.num_heads);
      m.intermediate_size = root.get({"n_inner"}, 4 * m.hidden_size);
      m.vocab_size = root.get({"vocab_size"}, 50257);
      m.max_position_embeddings = root.get({"n_positions"}, 1024);
      m.learned_positions = m.max_position_embeddings;
      m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
      m.mlp = MlpKind::plain;
      m.norm = NormKind::layer_norm;
      m.qkv_bias = m.o_bias = m.mlp_bias = true;
    } else if (type == "bloom") {
      // BloomConfig: n_embed / hidden_size, n_layer, n_head, 4h GELU MLP,
      // ALiBi (no position table), word_embeddings_layernorm, biases, tied.
      m.hidden_size = root.need({"hidden_size", "n_embed"});
      m.num_layers = root.need({"n_layer", "num_hidden_layers"});
      m.num_heads = root.need({"n_head", "num_attention_heads"});
      m.num_kv_heads = m.num_heads;
      m.head_dim = exact_head_dim(
          root, root.key({"hidden_size", "n_embed"}), m.hidden_size,
          root.key({"n_head", "num_attention_heads"}), m.num_heads);
      m.intermediate_size = 4 * m.hidden_size;
      m.vocab_size = root.get({"vocab_size"}, 250880);
      m.max_position_embeddings = root.get({"seq_length"}, 2048);
      m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
      m.mlp = MlpKind::plain;
      m.norm = NormKind::layer_norm;
      m.qkv_bias = m.o_bias = m.mlp_bias = true;
      m.embedding_norm = true;
    } else if (type == "falcon" || type == "RefinedWeb" ||
               type == "RefinedWebModel") {
      // FalconConfig: new_decoder_architecture uses num_kv_heads groups and two
      // LayerNorms (ln_attn, ln_mlp); the older one multi-query (1 KV head)
      // with one input LayerNorm when parallel_attn. ffn_hidden_size = 4h.
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
      m.head_dim = exact_head_dim(
          root, root.key({"hidden_size", "n_embed"}), m.hidden_size,
          root.key({"num_attention_heads", "n_head"}), m.num_heads);
      m.intermediate_size = root.get({"ffn_hidden_size"}, 4 * m.hidden_size);
      m.vocab_size = root.need({"vocab_size"});
      m.max_position_embeddings = root.get({"max_position_embeddings"}, 2048);
      m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
      m.mlp = MlpKind::plain;
      m.norm = NormKind::layer_norm;
      m.parallel_block = parallel;
      m.norms_per_layer = new_arch ? 2 : (parallel ? 1 : 2);
      const bool bias = root.flag("bias", false);
      m.qkv_bias = m.o_bias = m.mlp_bias = bias;
    } else if (type == "t5") {
      // T5Config: d_model, d_ff, d_kv, num_heads, num_layers,
      // num_decoder_layers (None = num_layers); feed_forward_proj "relu" (wi,
      // wo) or "gated-gelu" (wi_0, wi_1, wo); T5LayerNorm is weight-only; tied
      // by default.
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
    } else if (type == "glm4_moe") {
      // Glm4MoeConfig / modeling_glm4_moe.py: GQA with q, k, v biases
      // (attention_bias) and no o bias, optional per-head q/k RMSNorm
      // (use_qk_norm), DeepSeek-style MoE after first_k_dense_replace dense
      // layers (routed experts, n_shared_experts x moe_intermediate_size
      // shared, a router with e_score_correction_bias). The MTP layers
      // (num_nextn_predict_layers) are not part of Glm4MoeForCausalLM.
      read_llama_like(root, m, 128, false);
      m.qkv_bias = root.flag("attention_bias", false);
      m.o_bias = false;
      m.qk_norm = root.flag("use_qk_norm", false);
      read_moe_common(root, m, "n_routed_experts");
      m.moe_intermediate_size = root.need({"moe_intermediate_size"});
      m.num_shared_experts = root.get({"n_shared_experts"}, 1);
      m.first_k_dense = root.get({"first_k_dense_replace"}, 1);
      m.router_bias = true;
    } else if (type == "phimoe") {
      // PhimoeConfig / modeling_phimoe.py: the Mixtral layout with
      // LayerNorms (weight and bias), biased q, k, v, o (attention_bias) and
      // an lm_head bias (lm_head_bias).
      read_llama_like(root, m, 0, false);
      read_moe_common(root, m, "num_local_experts");
      m.moe_intermediate_size = m.intermediate_size;
      m.norm = NormKind::layer_norm;
      m.qkv_bias = m.o_bias = root.flag("attention_bias", false);
      m.lm_head_bias = root.flag("lm_head_bias", false);
      set_sliding(m, root.window("sliding_window", 0), 0);
    } else if (type == "olmo2") {
      // Olmo2Config / modeling_olmo2.py: Llama attention and MLP with
      // q_norm and k_norm over the whole projections and the norms after
      // each sublayer (post_attention_layernorm, post_feedforward_layernorm).
      read_llama_like(root, m, 0, false);
      m.qk_norm_full = true;
    } else if (type == "cohere2") {
      // Cohere2Config (Command R7B, Command A): Cohere's parallel block after
      // one bias-free LayerNorm, tied embeddings, and sliding-window layers
      // with every sliding_window_pattern-th layer global.
      read_llama_like(root, m, 0, true);
      m.parallel_block = true;
      m.norms_per_layer = 1;
      int every = global_every_from_layer_types(root);
      if (every == -2) {
        every = as_period(root.get({"sliding_window_pattern"}, 4));
      }
      set_sliding(m, root.window("sliding_window", 4096), every);
    } else if (type == "qwen3_next") {
      // Qwen3NextConfig / modeling_qwen3_next.py: full_attention_interval-th
      // layers are gated attention (q_proj doubled for the output gate,
      // per-head q/k norm), the others gated DeltaNet; every layer a
      // Qwen2-MoE-style sparse block with one gated shared expert.
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
        const std::int64_t interval =
            std::max<std::int64_t>(1, root.get({"full_attention_interval"}, 4));
        m.layer_types.reserve(layer_slots(root, m.num_layers));
        for (std::int64_t i = 0; i < m.num_layers; ++i) {
          m.layer_types.push_back((i + 1) % interval == 0
                                      ? LayerKind::attention
                                      : LayerKind::linear_attention);
        }
      }
    } else if (type == "mamba" || type == "mamba2") {
      // MambaConfig / Mamba2Config: MambaBlock = RMSNorm + mixer, no MLP and
      // no attention; d_inner = expand x hidden; embeddings tied by default
      // in Mamba, not in Mamba-2.
      m.hidden_size = root.need({"hidden_size"});
      m.num_layers = root.need({"num_hidden_layers"});
      m.vocab_size = root.need({"vocab_size"});
      m.mlp = MlpKind::none;
      m.norms_per_layer = 1;
      m.ssm_inner_size = root.get({"intermediate_size"},
                                  expanded(root, "expand", m.hidden_size));
      m.ssm_conv_kernel = root.get({"conv_kernel"}, 4);
      m.ssm_proj_bias = root.flag("use_bias", false);
      m.ssm_conv_bias = root.flag("use_conv_bias", true);
      if (type == "mamba") {
        m.ssm_state_size = root.get({"state_size"}, 16);
        m.ssm_dt_rank = dt_rank(root, "time_step_rank", m.hidden_size);
        m.tie_word_embeddings = root.flag("tie_word_embeddings", true);
        m.layer_types.assign(layer_slots(root, m.num_layers), LayerKind::mamba);
      } else {
        m.ssm_inner_size = expanded(root, "expand", m.hidden_size);
        m.ssm_state_size = root.get({"state_size"}, 128);
        m.ssm_num_heads = root.get({"num_heads"}, 128);
        m.ssm_head_dim = root.get({"head_dim"}, 64);
        m.ssm_groups = root.get({"n_groups"}, 8);
        m.ssm_gated_norm = root.flag("rms_norm", true);
        m.tie_word_embeddings = root.flag("tie_word_embeddings", false);
        m.layer_types.assign(layer_slots(root, m.num_layers),
                             LayerKind::mamba2);
      }
    } else if (type == "jamba") {
      // JambaConfig / modeling_jamba.py: layer i attends iff i %
      // attn_layer_period == attn_layer_offset, else a Mamba mixer with dt,
      // B and C RMSNorms; a MoE block iff i % expert_layer_period ==
      // expert_layer_offset; two RMSNorms per layer; no attention biases.
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
      m.num_experts = root.get({"num_experts"}, 16);
      if (m.num_experts > 1) {
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
      } else {
        m.num_experts = 0;  // one expert is a dense MLP (JambaMLP)
      }
      m.ssm_inner_size = expanded(root, "mamba_expand", m.hidden_size);
      m.ssm_state_size = root.get({"mamba_d_state"}, 16);
      m.ssm_conv_kernel = root.get({"mamba_d_conv"}, 4);
      m.ssm_dt_rank = dt_rank(root, "mamba_dt_rank", m.hidden_size);
      m.ssm_conv_bias = root.flag("mamba_conv_bias", true);
      m.ssm_proj_bias = root.flag("mamba_proj_bias", false);
      m.ssm_inner_norms = true;
    } else if (type == "falcon_h1") {
      // FalconH1Config / modeling_falcon_h1.py: every layer runs attention
      // (LlamaAttention) and a Mamba-2 mixer side by side after one RMSNorm,
      // then a gated MLP after another; d_inner = mamba_d_ssm (or
      // mamba_expand x hidden); the mixer's gated norm only with
      // mamba_rms_norm.
      read_llama_like(root, m, 0, false);
      m.ssm_inner_size = root.get(
          {"mamba_d_ssm"}, expanded(root, "mamba_expand", m.hidden_size));
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
    } else {
      root.fail(
          "model_type",
          fmt::format("unsupported '{}'; supported: llama, mistral, "
                      "mixtral, qwen2, qwen2_moe, qwen2_vl, qwen2_5_vl, "
                      "qwen3, qwen3_moe, qwen3_next, gemma, gemma2, gemma3, "
                      "gemma3_text, phi, phi3, phimoe, cohere, cohere2, "
                      "olmo2, falcon, falcon_h1, granite, deepseek_v2, "
                      "deepseek_v3, kimi_k2, glm4_moe, gpt_oss, gpt2, "
                      "gpt_neox, bloom, llama4, mllama, mistral3, t5, jamba, "
                      "mamba, mamba2",
                      escape_for_message(type)));
    }
  } catch (const Overflow&) {
    throw Error(fmt::format(
        "{}: the sizes in this config give more than 10^15 parameters (they "
        "overflow 64-bit arithmetic)",
        escape_for_message(origin)));
  }
  // The text model's fields sit under text_config in multimodal wrappers.
  const bool nested =
      text_config &&
      (type == "gemma3" || type == "mllama" || type == "mistral3" ||
       type == "llama4" || type == "qwen2_5_vl" || type == "qwen2_vl");
  const std::string_view text_prefix = nested ? "text_config." : "";
  check_imported(m, origin, text_prefix);

  // Checkpoint format: quantization_config, else torch_dtype (dtype in
  // transformers 4.56+).
  const auto quant_config = root.child("quantization_config");
  if (quant_config) {
    m.checkpoint_quant = quant_from_config(*quant_config);
  }
  std::string dtype = root.text("torch_dtype");
  if (dtype.empty()) {
    dtype = root.text("dtype");
  }
  if (dtype == "float32") {
    m.checkpoint_dtype = Dtype::fp32;
  } else if (dtype == "float16") {
    m.checkpoint_dtype = Dtype::fp16;
  }

  if (index_text) {
    m.checkpoint_bytes = index_total_size(*index_text, origin);
    check_imported(m, origin, text_prefix);
  }
  return m;
}

}  // namespace oomplan
