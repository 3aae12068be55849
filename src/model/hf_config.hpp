#pragma once

// g++ 12 reports a false -Warray-bounds inside std::map (stl_tree.h) once
// nlohmann::json's object code is inlined into a file, wherever the branches
// happen to fall. The warning's location is the header, so the pragma must
// come before the includes (this header is the first include of every
// hf_*.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif

// Private to the Hugging Face importer (model/hf_*.cpp): one config object
// read with the config class's defaults (Config), checked parameter
// arithmetic (Count), and the field readers the architecture families share.
//
// Untrusted input: every integer read is a whole number from 0 to 2^53; the
// model is checked by check_model() (the catalog's own structure check)
// before its parameters are counted; the vision-tower sums, computed from
// fields check_model() does not see, use Count, which throws instead of
// wrapping.

#include "oomplan/model/model.hpp"
#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan::hf {

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

// ---- field readers the families share (hf_fields.cpp) ----

// layer_types ["sliding_attention", "full_attention", ...] (transformers
// 4.53+): the period of the global layers, 0 when none is global, -1 when
// every layer is global, -2 when the config has no layer_types.
int global_every_from_layer_types(const Config& c);

// A layer period from the config as an int. A period beyond k_max_layers
// (and so beyond num_layers, which check_model bounds) marks no layer in
// range, exactly as the clamped value does.
int as_period(std::int64_t value);

// hidden / heads where the modeling code requires the division to be exact
// (GPT2Attention, BloomAttention, FalconAttention, PhiAttention and
// GPTNeoXAttention raise ValueError otherwise).
std::int64_t exact_head_dim(const Config& c, std::string_view hidden_key,
                            std::int64_t hidden, std::string_view heads_key,
                            std::int64_t heads);

void set_sliding(Model& m, std::int64_t window, int global_every);

// Llama-family decoders: the fields LlamaConfig, MistralConfig, Qwen2Config,
// Qwen3Config, Phi3Config, Gemma2Config, Gemma3TextConfig, CohereConfig,
// DeepseekV3Config, GptOssConfig and Llama4TextConfig share.
void read_llama_like(const Config& c, Model& m, std::int64_t default_head_dim,
                     bool default_tie);

// A config object with defaults layered under it (Gemma 3's text_config omits
// fields whose Gemma3TextConfig default is right).
json with_defaults(const json& object, const json& defaults);

void read_moe_common(const Config& c, Model& m, std::string_view experts_key);

// d_inner = expand x hidden_size (Mamba, Mamba-2, Jamba and Falcon-H1's
// default), in checked arithmetic: a hostile expand overflows.
std::int64_t expanded(const Config& root, std::string_view key,
                      std::int64_t hidden);

// ceil(hidden / 16), the "auto" time-step rank of MambaConfig and
// JambaConfig (math.ceil(self.hidden_size / 16)).
std::int64_t dt_rank(const Config& c, std::string_view key,
                     std::int64_t hidden);

// num_hidden_layers checked before a per-layer list is built from it (the
// list is built while reading, before check_model() sees the model): a
// count of 2^32 would otherwise allocate gigabytes first.
std::size_t layer_slots(const Config& c, std::int64_t layers);

// layer_types ["linear_attention", "full_attention", ...] (Qwen3NextConfig),
// or nullopt when the config has none.
std::optional<std::vector<LayerKind>> mixer_layer_types(const Config& c,
                                                        std::int64_t layers);

// Qwen2-MoE / Qwen3-MoE: decoder_sparse_step and mlp_only_layers. Dense
// layers listed in mlp_only_layers are modelled as the first ones, which keeps
// the totals exact (only pipeline stage splits see the difference).
void read_qwen_sparse(const Config& c, Model& m);

}  // namespace oomplan::hf
