#include "oomplan/model/catalog.hpp"

#include "util/json_errors.hpp"

#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

// Catalog loading. Every entry is validated here, once, with a message that
// names the file, the entry and the field ("models/llama.json: llama-3-70b:
// hidden_size: must be positive"); after this the core trusts the values.
// Unknown fields are errors so that a typo in a catalog cannot silently fall
// back to a default. Every piece of user text a message echoes goes through
// escape_for_message().

namespace oomplan {
namespace {

// ordered_json keeps an object as one vector of members (in file order, so the
// first unknown key in the file is the one reported): a third fewer
// allocations than std::map for entries of a dozen keys.
using json = nlohmann::ordered_json;

char lower_char(char ch) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower_char);
  return out;
}

std::string_view trim(std::string_view s) {
  const auto space = [](char ch) {
    return std::isspace(static_cast<unsigned char>(ch)) != 0;
  };
  while (!s.empty() && space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

std::string echo(std::string_view s) {
  return escape_for_message(s);
}

// Upper bounds of the GPU and instance numbers: far above any real part, so a
// value beyond is a unit slip (bytes given in GiB, GB/s in B/s).
constexpr std::int64_t k_max_gpus = 100'000;
constexpr std::int64_t k_max_device_bytes = std::int64_t{1} << 50;  // 1 PiB
constexpr double k_max_rate = 1e6;  // GB/s or TFLOPS; B200: 7,700 / 2,250
constexpr double k_max_host_ram_gib = 1 << 20;  // 1 PiB; p5: 2,048 GiB
constexpr double k_max_price = 1e5;             // USD/hour; p5en: ~85

// Reads one JSON object (a catalog entry) field by field onto a starting
// value (a default entry, or the entry a --catalog file overrides). Every
// read marks its key as known; finish() rejects the keys nobody read.
class EntryReader {
 public:
  EntryReader(const json& object, std::string_view origin, std::string entry,
              bool fresh)
      : m_object(object),
        m_origin(origin),
        m_entry(std::move(entry)),
        m_fresh(fresh) {
    // One allocation each for the keys an entry's reader asks for (a GPU
    // reads about 20, a model about 80).
    m_known.reserve(k_reserved_keys);
    m_present.reserve(k_reserved_keys);
  }

  [[noreturn]] void fail(std::string_view field,
                         std::string_view problem) const {
    throw Error(fmt::format("{}: {}: {}: {}", echo(m_origin), m_entry,
                            echo(field), problem));
  }

  const json* find(std::string_view key) {
    m_known.push_back(key);
    const auto it = m_object.find(key);
    if (it == m_object.end()) {
      return nullptr;
    }
    if (std::find(m_present.begin(), m_present.end(), key) == m_present.end()) {
      m_present.push_back(key);
    }
    return &*it;
  }

  // A field a new entry must state; an override may leave it out.
  [[noreturn]] void missing(std::string_view key) const {
    fail(key, "missing");
  }

  std::string string(std::string_view key, std::string current,
                     bool required = false) {
    const json* value = find(key);
    if (value == nullptr) {
      if (required && m_fresh) {
        missing(key);
      }
      return current;
    }
    if (!value->is_string()) {
      fail(key, fmt::format("must be a string, but is {}", value->type_name()));
    }
    return value->get<std::string>();
  }

  // The strings of `key` added to `current` (an override keeps the base's
  // aliases), without case-insensitive duplicates and without `except` (an
  // alias equal to the entry's own name).
  std::vector<std::string> strings(std::string_view key,
                                   std::vector<std::string> current,
                                   std::string_view except = {}) {
    const json* value = find(key);
    if (value == nullptr) {
      return current;
    }
    if (!value->is_array()) {
      fail(key, fmt::format("must be an array of strings, but is {}",
                            value->type_name()));
    }
    for (const auto& item : *value) {
      if (!item.is_string()) {
        fail(key, fmt::format("must be an array of strings, but holds {}",
                              item.type_name()));
      }
      const auto& text = item.get_ref<const std::string&>();
      const bool known =
          iequals(text, except) ||
          std::any_of(current.begin(), current.end(),
                      [&](const std::string& s) { return iequals(s, text); });
      if (!known) {
        current.push_back(text);
      }
    }
    return current;
  }

  // Every string of the array `key`, in order (empty when absent).
  std::vector<std::string> string_list(std::string_view key) {
    const json* value = find(key);
    std::vector<std::string> out;
    if (value == nullptr) {
      return out;
    }
    if (!value->is_array()) {
      fail(key, fmt::format("must be an array of strings, but is {}",
                            value->type_name()));
    }
    out.reserve(value->size());
    for (const auto& item : *value) {
      if (!item.is_string()) {
        fail(key, fmt::format("must be an array of strings, but holds {}",
                              item.type_name()));
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  // An integer from `min` to `max`; `current` when absent.
  std::int64_t integer(std::string_view key, std::int64_t current,
                       std::int64_t min, bool required = false,
                       std::int64_t max = INT64_MAX) {
    const json* value = find(key);
    if (value == nullptr) {
      if (required && m_fresh) {
        missing(key);
      }
      return current;
    }
    if (!value->is_number_integer()) {
      fail(key,
           fmt::format("must be an integer, but is {}", value->type_name()));
    }
    if (value->is_number_unsigned() &&
        value->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      fail(key, fmt::format("must be at most {}, but is {}", max,
                            value->get<std::uint64_t>()));
    }
    const auto n = value->get<std::int64_t>();
    if (n < min) {
      fail(key, min == 1
                    ? fmt::format("must be positive, but is {}", n)
                    : fmt::format("must be at least {}, but is {}", min, n));
    }
    if (n > max) {
      fail(key, fmt::format("must be from {} to {}, but is {}", min, max, n));
    }
    return n;
  }

  // An integer field of type int (layer periods, counts of norms).
  int small_int(std::string_view key, int current, int min, std::int64_t max) {
    return static_cast<int>(integer(key, current, min, false, max));
  }

  // A finite number from 0 to `max` (> 0 when `positive`); `current` when
  // absent.
  double number(std::string_view key, double current, double max,
                bool required = false, bool positive = false) {
    const json* value = find(key);
    if (value == nullptr) {
      if (required && m_fresh) {
        missing(key);
      }
      return current;
    }
    if (!value->is_number()) {
      fail(key, fmt::format("must be a number, but is {}", value->type_name()));
    }
    const double n = value->get<double>();
    if (!std::isfinite(n) || n < 0 || (positive && n <= 0) || n > max) {
      fail(key, fmt::format("must be {} to {}, but is {}",
                            positive ? "above 0 and up" : "from 0", max,
                            value->dump()));
    }
    return n;
  }

  bool boolean(std::string_view key, bool current) {
    const json* value = find(key);
    if (value == nullptr) {
      return current;
    }
    if (!value->is_boolean()) {
      fail(key,
           fmt::format("must be true or false, but is {}", value->type_name()));
    }
    return value->get<bool>();
  }

  // Rejects fields that no read asked for, suggesting the nearest known one.
  // When every member of the object was read there is nothing to look for.
  void finish() const {
    if (m_present.size() == m_object.size()) {
      return;
    }
    for (const auto& item : m_object.items()) {
      const std::string& key = item.key();
      if (std::find(m_known.begin(), m_known.end(), key) == m_known.end()) {
        const std::vector<std::string> known(m_known.begin(), m_known.end());
        const auto near = suggest(key, known);
        fail(key, near ? fmt::format("unknown field; did you mean {}?", *near)
                       : std::string("unknown field (models/README.md lists "
                                     "the fields)"));
      }
    }
  }

 private:
  const json& m_object;
  std::string_view m_origin;
  std::string m_entry;
  bool m_fresh;
  static constexpr std::size_t k_reserved_keys = 128;
  std::vector<std::string_view> m_known;    // every key asked for
  std::vector<std::string_view> m_present;  // the asked keys the object has
};

// The entry's label for messages: its id/name, or "models[3]" without one.
std::string entry_label(const json& object, std::string_view list,
                        std::size_t index, std::string_view key) {
  if (object.is_object()) {
    const auto it = object.find(key);
    if (it != object.end() && it->is_string() &&
        !it->get_ref<const std::string&>().empty()) {
      return echo(it->get_ref<const std::string&>());
    }
  }
  return fmt::format("{}[{}]", list, index);
}

// ---- model entries ----

// One Model field a catalog entry may state, read with its type and bounds:
// an integer from `min`, a boolean, or an int from `min` to `max` (layer
// periods, counts of norms). Exactly one member pointer is set.
struct ModelField {
  std::string_view key;
  std::int64_t Model::*integer = nullptr;
  bool Model::*flag = nullptr;
  int Model::*small = nullptr;
  std::int64_t min = 0;
  std::int64_t max = 0;
};

constexpr ModelField integer_field(std::string_view key,
                                   std::int64_t Model::*member,
                                   std::int64_t min = 0) {
  return {key, member, nullptr, nullptr, min, 0};
}
constexpr ModelField flag_field(std::string_view key, bool Model::*member) {
  return {key, nullptr, member, nullptr, 0, 0};
}
constexpr ModelField small_field(std::string_view key, int Model::*member,
                                 std::int64_t min, std::int64_t max) {
  return {key, nullptr, nullptr, member, min, max};
}

// Reads `fields` in order (the order decides which of two bad fields is
// reported, and the known-key order near-name suggestions see).
template <std::size_t N>
void read_fields(EntryReader& r, Model& m,
                 const std::array<ModelField, N>& fields) {
  for (const ModelField& f : fields) {
    if (f.integer != nullptr) {
      m.*f.integer = r.integer(f.key, m.*f.integer, f.min);
    } else if (f.flag != nullptr) {
      m.*f.flag = r.boolean(f.key, m.*f.flag);
    } else {
      m.*f.small =
          r.small_int(f.key, m.*f.small, static_cast<int>(f.min), f.max);
    }
  }
}

// Block structure, attention layout, mixture of experts and multi-head
// latent attention (models/README.md).
constexpr std::array k_block_fields = {
    small_field("norms_per_layer", &Model::norms_per_layer, 1,
                k_max_norms_per_layer),
    flag_field("parallel_block", &Model::parallel_block),
    flag_field("qkv_bias", &Model::qkv_bias),
    flag_field("o_bias", &Model::o_bias),
    flag_field("mlp_bias", &Model::mlp_bias),
    flag_field("qk_norm", &Model::qk_norm),
    flag_field("qk_norm_full", &Model::qk_norm_full),
    flag_field("attention_output_gate", &Model::attention_output_gate),
    flag_field("attention_sinks", &Model::attention_sinks),
    integer_field("learned_positions", &Model::learned_positions),
    flag_field("embedding_norm", &Model::embedding_norm),
    flag_field("lm_head_bias", &Model::lm_head_bias),
    integer_field("sliding_window", &Model::sliding_window),
    small_field("global_every", &Model::global_every, 0, k_max_layers),
    integer_field("num_experts", &Model::num_experts),
    integer_field("num_experts_per_tok", &Model::experts_per_tok),
    integer_field("moe_intermediate_size", &Model::moe_intermediate_size),
    integer_field("num_shared_experts", &Model::num_shared_experts),
    integer_field("shared_expert_intermediate_size",
                  &Model::shared_expert_intermediate_size),
    integer_field("first_k_dense_replace", &Model::first_k_dense),
    small_field("moe_every", &Model::moe_every, 1, k_max_layers),
    flag_field("router_bias", &Model::router_bias),
    flag_field("shared_expert_gate", &Model::shared_expert_gate),
    integer_field("q_lora_rank", &Model::q_lora_rank),
    integer_field("kv_lora_rank", &Model::kv_lora_rank),
    integer_field("qk_rope_head_dim", &Model::qk_rope_head_dim),
    integer_field("qk_nope_head_dim", &Model::qk_nope_head_dim),
    integer_field("v_head_dim", &Model::v_head_dim),
};

// State-space and linear-attention mixers, encoder-decoder and vision tower
// fields.
constexpr std::array k_mixer_fields = {
    integer_field("ssm_inner_size", &Model::ssm_inner_size),
    integer_field("ssm_state_size", &Model::ssm_state_size),
    integer_field("ssm_conv_kernel", &Model::ssm_conv_kernel),
    integer_field("ssm_dt_rank", &Model::ssm_dt_rank),
    integer_field("ssm_num_heads", &Model::ssm_num_heads),
    integer_field("ssm_head_dim", &Model::ssm_head_dim),
    integer_field("ssm_groups", &Model::ssm_groups),
    flag_field("ssm_conv_bias", &Model::ssm_conv_bias),
    flag_field("ssm_proj_bias", &Model::ssm_proj_bias),
    flag_field("ssm_inner_norms", &Model::ssm_inner_norms),
    flag_field("ssm_gated_norm", &Model::ssm_gated_norm),
    integer_field("linear_key_heads", &Model::linear_key_heads),
    integer_field("linear_value_heads", &Model::linear_value_heads),
    integer_field("linear_key_head_dim", &Model::linear_key_head_dim),
    integer_field("linear_value_head_dim", &Model::linear_value_head_dim),
    integer_field("linear_conv_kernel", &Model::linear_conv_kernel),
    integer_field("num_decoder_layers", &Model::num_decoder_layers),
    integer_field("relative_attention_num_buckets",
                  &Model::relative_attention_buckets),
    integer_field("extra_params", &Model::extra_params),
    integer_field("vision_image_size", &Model::vision_image_size),
    integer_field("vision_patch_size", &Model::vision_patch_size),
    integer_field("vision_temporal_patch_size",
                  &Model::vision_temporal_patch_size, 1),
    integer_field("vision_merge_size", &Model::vision_merge_size, 1),
    integer_field("vision_hidden_size", &Model::vision_hidden_size),
    integer_field("vision_intermediate_size", &Model::vision_intermediate_size),
    integer_field("vision_layers", &Model::vision_layers),
    flag_field("vision_gated_mlp", &Model::vision_gated_mlp),
    flag_field("vision_video", &Model::vision_video),
    integer_field("vision_max_tiles", &Model::vision_max_tiles),
    integer_field("vision_intermediate_layers",
                  &Model::vision_intermediate_layers),
};

// Parameter counts and the checkpoint's size, for the catalog lint.
constexpr std::array k_count_fields = {
    integer_field("params", &Model::params),
    integer_field("params_active", &Model::params_active),
    integer_field("official_params", &Model::official_params),
    integer_field("checkpoint_bytes", &Model::checkpoint_bytes),
};

// id (a new entry's name; an override keeps the built-in spelling), hf_id,
// aliases, model_type.
void read_model_names(EntryReader& r, Model& m, bool fresh) {
  const std::string id = r.string("id", m.name, true);
  if (fresh) {
    m.name = id;
  }
  if (m.name.empty()) {
    r.fail("id", "must not be empty");
  }
  m.hf_id = r.string("hf_id", m.hf_id);
  m.aliases = r.strings("aliases", m.aliases, m.name);
  m.model_type = r.string("model_type", m.model_type);
}

// The core dimensions; a new entry without head_dim takes hidden_size /
// num_attention_heads, which must then divide evenly.
void read_model_dimensions(EntryReader& r, Model& m, bool fresh) {
  m.hidden_size = r.integer("hidden_size", m.hidden_size, 1, true);
  m.num_layers = r.integer("num_hidden_layers", m.num_layers, 1, true);
  // 0 heads and 0 intermediate_size are for attention-free and MLP-free
  // (Mamba) models; check_model() requires them wherever a layer needs them.
  m.num_heads = r.integer("num_attention_heads", m.num_heads, 0, true);
  m.num_kv_heads =
      r.integer("num_key_value_heads", fresh ? m.num_heads : m.num_kv_heads, 0);
  const bool has_head_dim = r.find("head_dim") != nullptr;
  if (fresh && !has_head_dim && m.num_heads > 0 &&
      m.hidden_size % m.num_heads != 0) {
    r.fail("head_dim",
           fmt::format("missing, and hidden_size {} is not a multiple of "
                       "num_attention_heads {}",
                       m.hidden_size, m.num_heads));
  }
  const std::int64_t derived_head_dim =
      m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
  m.head_dim = r.integer("head_dim", fresh ? derived_head_dim : m.head_dim, 0);
  m.intermediate_size =
      r.integer("intermediate_size", m.intermediate_size, 0, true);
  m.vocab_size = r.integer("vocab_size", m.vocab_size, 1, true);
  m.max_position_embeddings =
      r.integer("max_position_embeddings", m.max_position_embeddings, 0);
  m.tie_word_embeddings =
      r.boolean("tie_word_embeddings", m.tie_word_embeddings);
}

// mlp and norm: names of MlpKind and NormKind.
void read_model_kinds(EntryReader& r, Model& m) {
  if (r.find("mlp") != nullptr) {
    const std::string text = r.string("mlp", "");
    if (text == "plain") {
      m.mlp = MlpKind::plain;
    } else if (text == "gated") {
      m.mlp = MlpKind::gated;
    } else if (text == "none") {
      m.mlp = MlpKind::none;
    } else {
      r.fail("mlp",
             fmt::format("'{}' is not gated, plain or none", echo(text)));
    }
  }
  if (r.find("norm") != nullptr) {
    const std::string text = r.string("norm", "");
    if (text == "layer_norm") {
      m.norm = NormKind::layer_norm;
    } else if (text == "rms") {
      m.norm = NormKind::rms;
    } else {
      r.fail("norm", fmt::format("'{}' is not rms or layer_norm", echo(text)));
    }
  }
}

void read_model_layer_types(EntryReader& r, Model& m) {
  if (r.find("layer_types") == nullptr) {
    return;
  }
  m.layer_types.clear();
  for (const std::string& name : r.string_list("layer_types")) {
    const auto kind = layer_kind_from_name(name);
    if (!kind) {
      r.fail("layer_types", fmt::format("'{}' is not attention, mamba, mamba2, "
                                        "linear_attention or attention_mamba2",
                                        echo(name)));
    }
    m.layer_types.push_back(*kind);
  }
}

// checkpoint_quant and checkpoint_dtype: how the published weights are
// stored.
void read_model_checkpoint(EntryReader& r, Model& m) {
  if (r.find("checkpoint_quant") != nullptr) {
    const std::string text = r.string("checkpoint_quant", "");
    const auto q = quant_from_name(text);
    if (!q || *q == Quant::automatic) {
      r.fail("checkpoint_quant",
             fmt::format("unknown format '{}'; valid: none, int8, fp8, int4, "
                         "nf4, nf4-nodq, gptq, awq, mxfp4",
                         echo(text)));
    }
    m.checkpoint_quant = *q;
  }
  if (r.find("checkpoint_dtype") != nullptr) {
    const std::string text = r.string("checkpoint_dtype", "");
    const auto d = dtype_from_name(text);
    if (!d) {
      r.fail("checkpoint_dtype",
             fmt::format("unknown dtype '{}'; valid: fp32, bf16, fp16, fp8",
                         echo(text)));
    }
    m.checkpoint_dtype = *d;
  }
  m.checkpoint_note = r.string("checkpoint_note", m.checkpoint_note);
}

// Reads a model entry onto `base` (nullptr: a new, complete entry), one group
// of fields after another.
Model read_model(const json& object, std::string_view origin, std::string label,
                 const Model* base) {
  const bool fresh = base == nullptr;
  EntryReader r(object, origin, std::move(label), fresh);
  Model m = fresh ? Model{} : *base;
  read_model_names(r, m, fresh);
  read_model_dimensions(r, m, fresh);
  read_model_kinds(r, m);
  read_fields(r, m, k_block_fields);
  read_model_layer_types(r, m);
  read_fields(r, m, k_mixer_fields);
  read_model_checkpoint(r, m);
  read_fields(r, m, k_count_fields);
  r.string("official_params_source", "");  // documentation only
  r.strings("sources", {});                // documentation only
  r.finish();
  if (const auto problem = check_model(m)) {
    r.fail(problem->field, problem->problem);
  }
  return m;
}

Gpu read_gpu(const json& object, std::string_view origin, std::string label,
             const Gpu* base) {
  const bool fresh = base == nullptr;
  EntryReader r(object, origin, std::move(label), fresh);
  Gpu g = fresh ? Gpu{} : *base;
  const std::string name = r.string("name", g.name, true);
  if (fresh) {
    g.name = name;
  }
  if (g.name.empty()) {
    r.fail("name", "must not be empty");
  }
  g.full_name = r.string("full_name", g.full_name);
  g.aliases = r.strings("aliases", g.aliases, g.name);
  g.vendor = r.string("vendor", g.vendor);
  g.arch = r.string("arch", g.arch);
  g.compute_capability =
      r.small_int("compute_capability", g.compute_capability, 0, 1000);
  g.capacity_bytes = r.integer("capacity_bytes", g.capacity_bytes, 1, true,
                               k_max_device_bytes);
  g.smi_bytes =
      r.integer("smi_bytes", g.smi_bytes, 0, false, k_max_device_bytes);
  g.capacity_note = r.string("capacity_note", g.capacity_note);
  // The time model divides by these: a GPU without them cannot be timed.
  g.bandwidth_gb_s =
      r.number("bandwidth_gb_s", g.bandwidth_gb_s, k_max_rate, true, true);
  g.bf16_tflops =
      r.number("bf16_tflops", g.bf16_tflops, k_max_rate, true, true);
  g.fp8_tflops = r.number("fp8_tflops", g.fp8_tflops, k_max_rate);
  g.nvlink_gb_s = r.number("nvlink_gb_s", g.nvlink_gb_s, k_max_rate);
  g.pcie_gb_s = r.number("pcie_gb_s", g.pcie_gb_s, k_max_rate, true, true);
  g.interconnect = r.string("interconnect", g.interconnect);
  g.common = r.boolean("common", g.common);
  g.note = r.string("note", g.note);
  r.strings("sources", {});  // documentation only
  r.finish();
  return g;
}

Instance read_instance(const json& object, std::string_view origin,
                       std::string label, const Instance* base) {
  const bool fresh = base == nullptr;
  EntryReader r(object, origin, std::move(label), fresh);
  Instance i = fresh ? Instance{} : *base;
  const std::string name = r.string("name", i.name, true);
  if (fresh) {
    i.name = name;
  }
  if (i.name.empty()) {
    r.fail("name", "must not be empty");
  }
  i.gpu = r.string("gpu", i.gpu, true);
  i.count = static_cast<int>(r.integer("count", i.count, 1, true, k_max_gpus));
  const double ram_gib = r.number(
      "host_ram_gib",
      static_cast<double>(i.host_ram_bytes) / static_cast<double>(k_gib),
      k_max_host_ram_gib);
  i.host_ram_bytes = round_bytes(ram_gib * static_cast<double>(k_gib));
  i.price_usd_per_hour =
      r.number("price_usd_per_hour", i.price_usd_per_hour, k_max_price);
  r.string("source", "");  // documentation only
  r.finish();
  return i;
}

// The keys of an entry: its name, then its aliases (instances have none).
template <typename T>
std::vector<std::string_view> keys_of(const T& entry) {
  std::vector<std::string_view> keys{entry.name};
  if constexpr (!std::is_same_v<T, Instance>) {
    keys.insert(keys.end(), entry.aliases.begin(), entry.aliases.end());
  }
  return keys;
}

// Names and aliases must be unique (case-insensitively) across a list.
template <typename T>
void check_unique(const std::vector<T>& entries, std::string_view what,
                  std::string_view origin) {
  std::set<std::string, std::less<>> seen;
  for (const T& entry : entries) {
    for (const auto key : keys_of(entry)) {
      if (!seen.insert(lower(key)).second) {
        throw Error(
            fmt::format("{}: {}: name or alias '{}' is used by another {}",
                        echo(origin), echo(entry.name), echo(key), what));
      }
    }
  }
}

// Edit distance with transpositions counted once (optimal string alignment),
// case-insensitive, as ninja's EditDistance with allow_replacements, computed
// only within `max` of the diagonal: returns max + 1 as soon as the distance
// must exceed `max`. O(|a| x (2 max + 1)) time.
std::size_t edit_distance_within(std::string_view a, std::string_view b,
                                 std::size_t max) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  const std::size_t over = max + 1;
  if ((n > m ? n - m : m - n) > max) {
    return over;
  }
  // Rows i-2, i-1 and i of the table, each m + 1 wide; cells outside the
  // band hold `over`.
  std::vector<std::size_t> before(m + 1, over);
  std::vector<std::size_t> prev(m + 1, over);
  std::vector<std::size_t> row(m + 1, over);
  for (std::size_t j = 0; j <= std::min(m, max); ++j) {
    prev[j] = j;
  }
  for (std::size_t i = 1; i <= n; ++i) {
    std::fill(row.begin(), row.end(), over);
    const std::size_t lo = i > max ? i - max : 0;
    const std::size_t hi = std::min(m, i + max);
    std::size_t best = over;
    for (std::size_t j = lo; j <= hi; ++j) {
      if (j == 0) {
        row[0] = i;
      } else {
        const std::size_t cost =
            lower_char(a[i - 1]) == lower_char(b[j - 1]) ? 0 : 1;
        std::size_t d =
            std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost});
        if (i > 1 && j > 1 && lower_char(a[i - 1]) == lower_char(b[j - 2]) &&
            lower_char(a[i - 2]) == lower_char(b[j - 1])) {
          d = std::min(d, before[j - 2] + 1);
        }
        row[j] = std::min(d, over);
      }
      best = std::min(best, row[j]);
    }
    if (best > max) {
      return over;
    }
    std::swap(before, prev);
    std::swap(prev, row);
  }
  return std::min(prev[m], over);
}

// True when `name` has a vision marker as a word of its own: "vl" or
// "vision" between separators ("Qwen2.5-VL-7B", "Llama-3.2-11B-Vision").
bool is_multimodal_name(std::string_view name) {
  const std::string lowered = lower(name);
  const auto is_word_char = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0;
  };
  std::size_t start = 0;
  while (start < lowered.size()) {
    while (start < lowered.size() && !is_word_char(lowered[start])) {
      ++start;
    }
    std::size_t end = start;
    while (end < lowered.size() && is_word_char(lowered[end])) {
      ++end;
    }
    const std::string_view word(lowered.data() + start, end - start);
    if (word == "vl" || word == "vision") {
      return true;
    }
    start = end;
  }
  return false;
}

template <typename T>
std::vector<std::string> all_names(const std::vector<T>& entries) {
  std::vector<std::string> names;
  for (const T& entry : entries) {
    names.push_back(entry.name);
    names.insert(names.end(), entry.aliases.begin(), entry.aliases.end());
  }
  return names;
}

template <typename T>
const T* find_named(const std::vector<T>& entries, std::string_view name) {
  for (const T& entry : entries) {
    if (iequals(entry.name, name)) {
      return &entry;
    }
  }
  for (const T& entry : entries) {
    for (const auto& alias : entry.aliases) {
      if (iequals(alias, name)) {
        return &entry;
      }
    }
  }
  return nullptr;
}

const Instance* find_instance(const Catalog& catalog, std::string_view name) {
  for (const Instance& instance : catalog.instances) {
    if (iequals(instance.name, name)) {
      return &instance;
    }
  }
  return nullptr;
}

// Every instance must name a GPU of the catalog (by name or alias).
void check_instances(const Catalog& catalog) {
  std::unordered_map<std::string, const Gpu*> gpus;
  for (const Gpu& gpu : catalog.gpus) {
    for (const auto key : keys_of(gpu)) {
      gpus.emplace(lower(key), &gpu);
    }
  }
  for (const Instance& instance : catalog.instances) {
    if (gpus.count(lower(instance.gpu)) == 0) {
      throw Error(fmt::format("instance {}: unknown GPU '{}'",
                              echo(instance.name), echo(instance.gpu)));
    }
  }
}

// Parses a catalog document and checks its shape; calls `reserve(list, n)`
// before the n entries of each list and `visit(list, entry, label)` for every
// entry of "models", "gpus" and "instances".
template <typename Reserve, typename Visit>
void visit_document(std::string_view text, std::string_view origin,
                    Reserve reserve, Visit visit) {
  check_json_depth(text, echo(origin));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(
        fmt::format("{}: {}", echo(origin), strip_json_prefix(e.what())));
  }
  if (!doc.is_object()) {
    throw Error(fmt::format(
        "{}: the top level must be an object with \"models\", \"gpus\" or "
        "\"instances\"",
        echo(origin)));
  }
  for (const auto& item : doc.items()) {
    const std::string& key = item.key();
    const json& list = item.value();
    if (key != "models" && key != "gpus" && key != "instances") {
      throw Error(fmt::format(
          "{}: {}: unknown top-level key; expected models, gpus or instances",
          echo(origin), echo(key)));
    }
    if (!list.is_array()) {
      throw Error(fmt::format("{}: {}: must be an array, but is {}",
                              echo(origin), key, list.type_name()));
    }
    reserve(std::string_view(key), list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& entry = list[i];
      const std::string label =
          entry_label(entry, key, i, key == "models" ? "id" : "name");
      if (!entry.is_object()) {
        throw Error(fmt::format("{}: {}: must be an object, but is {}",
                                echo(origin), label, entry.type_name()));
      }
      visit(std::string_view(key), entry, label);
    }
  }
}

// Merges --catalog entries into one list of the base catalog (see
// merge_catalog_files). `m_keys` maps every lower-cased name and alias of the
// list to its entry.
template <typename T>
class ListMerger {
 public:
  using Reader = T (*)(const json&, std::string_view, std::string, const T*);

  ListMerger(std::vector<T>& list, std::string_view what,
             std::string_view name_key, Reader read,
             std::vector<std::string>& warnings)
      : m_list(list),
        m_what(what),
        m_name_key(name_key),
        m_read(read),
        m_warnings(warnings) {
    m_keys.reserve(2 * m_list.size());
    for (std::size_t i = 0; i < m_list.size(); ++i) {
      const auto keys = keys_of(m_list[i]);
      for (std::size_t k = 0; k < keys.size(); ++k) {
        m_keys.emplace(lower(keys[k]), Key{i, k > 0});
      }
    }
    m_defined_in.resize(m_list.size());
  }

  // Room for `n` more entries, so that growing the lists touches no more
  // memory than they end up using.
  void reserve(std::size_t n) {
    m_list.reserve(m_list.size() + n);
    m_defined_in.reserve(m_list.size() + n);
    m_keys.reserve(m_keys.size() + n);
  }

  void add(const json& entry, std::string_view origin,
           const std::string& label) {
    std::string name;
    const auto it = entry.find(m_name_key);
    if (it != entry.end() && it->is_string()) {
      name = it->get<std::string>();
    }
    const auto found = name.empty() ? m_keys.end() : m_keys.find(lower(name));
    if (found == m_keys.end()) {
      T fresh = m_read(entry, origin, label, nullptr);
      const std::size_t index = m_list.size();
      m_list.push_back(std::move(fresh));
      m_defined_in.push_back(origin);
      claim(index, m_list[index].name, false, origin, label);
      claim_aliases(index, {}, origin, label);
      return;
    }
    const std::size_t index = found->second.index;
    if (!m_defined_in[index].empty()) {
      conflict(origin, label, name, m_defined_in[index]);
    }
    if (found->second.alias) {
      m_warnings.push_back(fmt::format(
          "{}: {}: '{}' is an alias of built-in {} {}; this entry overrides "
          "it field by field",
          echo(origin), label, echo(name), m_what, echo(m_list[index].name)));
    }
    const auto old_keys = keys_of(m_list[index]);
    std::vector<std::string> old(old_keys.begin(), old_keys.end());
    T merged = m_read(entry, origin, label, &m_list[index]);
    m_list[index] = std::move(merged);
    m_defined_in[index] = origin;
    claim_aliases(index, old, origin, label);
  }

 private:
  struct Key {
    std::size_t index;
    bool alias;
  };

  [[noreturn]] void conflict(std::string_view origin, const std::string& label,
                             std::string_view key,
                             std::string_view other) const {
    if (other == origin) {
      throw Error(
          fmt::format("{}: {}: name or alias '{}' is used by another {}",
                      echo(origin), label, echo(key), m_what));
    }
    throw Error(fmt::format(
        "{}: {}: {} '{}' is also defined in {}; keep one definition",
        echo(origin), label, m_what, echo(key), echo(other)));
  }

  // Registers the aliases of entry `index` that are not in `old`.
  void claim_aliases(std::size_t index, const std::vector<std::string>& old,
                     std::string_view origin, const std::string& label) {
    if constexpr (!std::is_same_v<T, Instance>) {
      std::vector<std::string> aliases = m_list[index].aliases;
      for (const std::string& alias : aliases) {
        const bool had = std::any_of(
            old.begin(), old.end(),
            [&](const std::string& s) { return iequals(s, alias); });
        if (!had) {
          claim(index, alias, true, origin, label);
        }
      }
    }
  }

  // Gives `key` to entry `index`, resolving a clash with another entry.
  void claim(std::size_t index, const std::string& key, bool alias,
             std::string_view origin, const std::string& label) {
    std::string lowered = lower(key);
    const auto it = m_keys.find(lowered);
    if (it == m_keys.end()) {
      m_keys.emplace(std::move(lowered), Key{index, alias});
      return;
    }
    const std::size_t other = it->second.index;
    if (other == index) {
      return;
    }
    if (!m_defined_in[other].empty()) {
      conflict(origin, label, key, m_defined_in[other]);
    }
    T& owner = m_list[other];
    if (!it->second.alias) {
      // A built-in name always finds its own entry: drop the new alias.
      m_warnings.push_back(fmt::format(
          "{}: {}: alias '{}' is the name of built-in {} {}, which keeps it; "
          "the alias is ignored",
          echo(origin), label, echo(key), m_what, echo(owner.name)));
      if constexpr (!std::is_same_v<T, Instance>) {
        auto& mine = m_list[index].aliases;
        mine.erase(std::remove_if(
                       mine.begin(), mine.end(),
                       [&](const std::string& a) { return iequals(a, key); }),
                   mine.end());
      }
      return;
    }
    m_warnings.push_back(fmt::format(
        "{}: {}: '{}' was an alias of built-in {} {}; it now finds this "
        "entry",
        echo(origin), label, echo(key), m_what, echo(owner.name)));
    if constexpr (!std::is_same_v<T, Instance>) {
      auto& theirs = owner.aliases;
      theirs.erase(
          std::remove_if(theirs.begin(), theirs.end(),
                         [&](const std::string& a) { return iequals(a, key); }),
          theirs.end());
    }
    it->second = Key{index, alias};
  }

  std::vector<T>& m_list;
  std::string_view m_what;
  std::string_view m_name_key;
  Reader m_read;
  std::vector<std::string>& m_warnings;
  std::unordered_map<std::string, Key> m_keys;
  // The --catalog file that defined or overrode each entry ("": built-in).
  std::vector<std::string_view> m_defined_in;
};

}  // namespace

Catalog parse_catalog(std::string_view text, std::string_view origin) {
  Catalog catalog;
  visit_document(
      text, origin,
      [&](std::string_view list, std::size_t n) {
        if (list == "models") {
          catalog.models.reserve(catalog.models.size() + n);
        } else if (list == "gpus") {
          catalog.gpus.reserve(catalog.gpus.size() + n);
        } else {
          catalog.instances.reserve(catalog.instances.size() + n);
        }
      },
      [&](std::string_view list, const json& entry, const std::string& label) {
        if (list == "models") {
          catalog.models.push_back(read_model(entry, origin, label, nullptr));
        } else if (list == "gpus") {
          catalog.gpus.push_back(read_gpu(entry, origin, label, nullptr));
        } else {
          catalog.instances.push_back(
              read_instance(entry, origin, label, nullptr));
        }
      });
  check_unique(catalog.models, "model", origin);
  check_unique(catalog.gpus, "GPU", origin);
  check_unique(catalog.instances, "instance", origin);
  return catalog;
}

std::vector<std::string> merge_catalog_files(
    Catalog& base, const std::vector<CatalogFile>& files) {
  std::vector<std::string> warnings;
  ListMerger<Model> models(base.models, "model", "id", read_model, warnings);
  ListMerger<Gpu> gpus(base.gpus, "GPU", "name", read_gpu, warnings);
  ListMerger<Instance> instances(base.instances, "instance", "name",
                                 read_instance, warnings);
  for (const CatalogFile& file : files) {
    visit_document(
        file.text, file.origin,
        [&](std::string_view list, std::size_t n) {
          if (list == "models") {
            models.reserve(n);
          } else if (list == "gpus") {
            gpus.reserve(n);
          } else {
            instances.reserve(n);
          }
        },
        [&](std::string_view list, const json& entry,
            const std::string& label) {
          if (list == "models") {
            models.add(entry, file.origin, label);
          } else if (list == "gpus") {
            gpus.add(entry, file.origin, label);
          } else {
            instances.add(entry, file.origin, label);
          }
        });
  }
  check_instances(base);
  return warnings;
}

Catalog assemble_catalog(std::vector<CatalogFile> files) {
  // Model families in the order `oomplan models` lists them (most used
  // first); files not named here follow in name order.
  constexpr std::array<std::string_view, 9> k_family_order = {
      "models/llama.json",   "models/mistral.json", "models/qwen.json",
      "models/gemma.json",   "models/phi.json",     "models/deepseek.json",
      "models/gpt_oss.json", "models/falcon.json",  "models/cohere.json"};
  std::sort(files.begin(), files.end(),
            [](const CatalogFile& a, const CatalogFile& b) {
              return a.origin < b.origin;
            });
  const auto rank = [&](const CatalogFile& f) {
    return std::find(k_family_order.begin(), k_family_order.end(), f.origin) -
           k_family_order.begin();
  };
  std::stable_sort(files.begin(), files.end(),
                   [&](const CatalogFile& a, const CatalogFile& b) {
                     return rank(a) < rank(b);
                   });
  Catalog all;
  for (const CatalogFile& file : files) {
    Catalog one = parse_catalog(file.text, file.origin);
    // Shipped files must not override each other: append, then check.
    for (auto& m : one.models) {
      all.models.push_back(std::move(m));
    }
    for (auto& g : one.gpus) {
      all.gpus.push_back(std::move(g));
    }
    for (auto& i : one.instances) {
      all.instances.push_back(std::move(i));
    }
  }
  check_unique(all.models, "model", "models/*.json");
  check_unique(all.gpus, "GPU", "models/*.json");
  check_unique(all.instances, "instance", "models/*.json");
  check_instances(all);
  return all;
}

const Model* lookup_model(const Catalog& catalog, std::string_view name) {
  if (const Model* m = find_named(catalog.models, name)) {
    return m;
  }
  for (const Model& m : catalog.models) {
    if (!m.hf_id.empty() && iequals(m.hf_id, name)) {
      return &m;
    }
  }
  return nullptr;
}

namespace {

// The names a vision-language name may be suggested: never one that drops the
// modality ("Qwen/Qwen2.5-VL-7B-Instruct" is three edits from its text-only
// sibling, a different model).
std::vector<std::string> suggestible_names(const Catalog& catalog,
                                           std::string_view name) {
  std::vector<std::string> names = all_names(catalog.models);
  if (is_multimodal_name(name)) {
    names.erase(std::remove_if(names.begin(), names.end(),
                               [](const std::string& candidate) {
                                 return !is_multimodal_name(candidate);
                               }),
                names.end());
  }
  return names;
}

// A pre-quantized copy's suffix and the weights it holds, as the publishers
// name them: Qwen's -AWQ, -GPTQ-Int4 / -GPTQ-Int8 (gptq 8-bit loads as int8,
// hf_import.cpp quant_from_config), Neural Magic's -FP8(-Dynamic), unsloth's
// -bnb-4bit and hugging-quants' / axolotl-quants' -BNB-NF4(-BF16) (nf4 with
// double quantization in their quantization_config).
struct QuantSuffix {
  std::string_view suffix;
  Quant quant;
};
constexpr std::array<QuantSuffix, 9> k_quant_suffixes = {{
    {"-bnb-nf4-bf16", Quant::nf4},
    {"-bnb-nf4", Quant::nf4},
    {"-gptq-int4", Quant::gptq},
    {"-gptq-int8", Quant::int8},
    {"-gptq", Quant::gptq},
    {"-awq", Quant::awq},
    {"-fp8-dynamic", Quant::fp8},
    {"-fp8", Quant::fp8},
    {"-bnb-4bit", Quant::nf4},
}};

bool strip_suffix(std::string& key, std::string_view suffix) {
  if (key.size() > suffix.size() &&
      std::string_view(key).substr(key.size() - suffix.size()) == suffix) {
    key.resize(key.size() - suffix.size());
    return true;
  }
  return false;
}

// A repository name as mirrors vary it: the part after the last '/',
// lower-case, without one trailing -hf, -fp16 or -bf16 (the conversions
// mirrors add: NousResearch/Llama-2-7b-hf, TheBloke/Llama-2-7B-fp16) and,
// when `quant` is given, one pre-quantization suffix, stored in *quant.
std::string repo_key(std::string_view id, Quant* quant = nullptr) {
  const auto slash = id.rfind('/');
  std::string key =
      lower(slash == std::string_view::npos ? id : id.substr(slash + 1));
  if (quant != nullptr) {
    *quant = Quant::none;
    for (const QuantSuffix& q : k_quant_suffixes) {
      if (strip_suffix(key, q.suffix)) {
        *quant = q.quant;
        break;
      }
    }
  }
  for (const std::string_view suffix : {"-hf", "-fp16", "-bf16"}) {
    if (strip_suffix(key, suffix)) {
      break;
    }
  }
  return key;
}

}  // namespace

const Model& find_model(const Catalog& catalog, std::string_view name) {
  if (const Model* m = lookup_model(catalog, name)) {
    return *m;
  }
  const auto near = suggest(name, suggestible_names(catalog, name));
  throw Error(near ? fmt::format("unknown model '{}'; did you mean {}?",
                                 echo(name), echo(*near))
                   : fmt::format("unknown model '{}'; `oomplan models` lists "
                                 "the catalog, or pass a config.json path",
                                 echo(name)));
}

std::vector<Mirror> mirror_candidates(const Catalog& catalog,
                                      std::string_view name) {
  std::vector<Mirror> found;
  Quant quant = Quant::none;
  const std::string key = repo_key(name, &quant);
  if (key.empty()) {
    return found;
  }
  for (const Model& m : catalog.models) {
    bool same = !m.hf_id.empty() && repo_key(m.hf_id) == key;
    same = same || repo_key(m.name) == key;
    for (const std::string& alias : m.aliases) {
      same = same || repo_key(alias) == key;
    }
    if (same) {
      found.push_back({&m, quant});
    }
  }
  return found;
}

std::string origin_phrase(const Model& model, const ModelOrigin& origin) {
  switch (origin.step) {
    case ModelStep::catalog:
      return "catalog";
    case ModelStep::path:
      return fmt::format("from {}", origin.detail);
    case ModelStep::hf_cache:
      return fmt::format("from the Hugging Face cache ({})", origin.detail);
    case ModelStep::mirror:
      if (model.checkpoint_quant != Quant::none) {
        return fmt::format(
            "{} planned as {} with {} weights, same architecture",
            origin.detail, model.name, quant_name(model.checkpoint_quant));
      }
      return fmt::format("{} planned as {}, same architecture", origin.detail,
                         model.name);
  }
  return {};
}

std::vector<std::string> closest_models(const Catalog& catalog,
                                        std::string_view name,
                                        std::size_t count) {
  const std::size_t max_edits = std::clamp<std::size_t>(name.size() / 3, 3, 8);
  const auto slash = name.rfind('/');
  const std::string_view repo =
      slash == std::string_view::npos ? name : name.substr(slash + 1);
  std::vector<std::pair<std::size_t, const Model*>> ranked;
  for (const Model& m : catalog.models) {
    std::size_t best = max_edits + 1;
    const auto consider = [&](std::string_view candidate) {
      if (is_multimodal_name(name) && !is_multimodal_name(candidate)) {
        return;
      }
      // "someorg/Llama-3-8b-instrct" is near a name by its repository part.
      best = std::min({best, edit_distance_within(name, candidate, max_edits),
                       edit_distance_within(repo, candidate, max_edits)});
    };
    consider(m.name);
    for (const std::string& alias : m.aliases) {
      consider(alias);
    }
    if (!m.hf_id.empty()) {
      consider(m.hf_id);
    }
    if (best <= max_edits) {
      ranked.emplace_back(best, &m);
    }
  }
  std::stable_sort(
      ranked.begin(), ranked.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  // Only the nearest and those one edit further: "lama3-70b" is llama-3-70b
  // or llama-2-70b, not every 7B that is three edits away.
  std::vector<std::string> names;
  for (std::size_t i = 0; i < ranked.size() && i < count &&
                          ranked[i].first <= ranked.front().first + 1;
       ++i) {
    names.push_back(ranked[i].second->name);
  }
  return names;
}

const Gpu& find_gpu(const Catalog& catalog, std::string_view name) {
  if (const Gpu* g = find_named(catalog.gpus, name)) {
    return *g;
  }
  const auto near = suggest(name, all_names(catalog.gpus));
  throw Error(
      near ? fmt::format("unknown GPU '{}'; did you mean {}?", echo(name),
                         echo(*near))
           : fmt::format("unknown GPU '{}'; `oomplan gpus` lists the catalog",
                         echo(name)));
}

GpuSpec parse_gpu_spec(const Catalog& catalog, std::string_view spec_in) {
  // "4 x A100-80" and a pasted " 8xH100 " mean what they say.
  const std::string_view spec = trim(spec_in);
  if (spec.empty()) {
    throw Error("empty --gpus; expected NxNAME, e.g. 4xA100-80");
  }
  if (const Instance* instance = find_instance(catalog, spec)) {
    return {&find_gpu(catalog, instance->gpu), instance->count, instance,
            instance->host_ram_bytes, instance->price_usd_per_hour};
  }
  // A bare name means one GPU. Checked first: names such as MI300X hold an x.
  if (const Gpu* g = find_named(catalog.gpus, spec)) {
    return {g, 1};
  }
  const auto x = spec.find_first_of("xX");
  if (x == std::string_view::npos || x == 0) {
    find_gpu(catalog, spec);  // throws with a suggestion
  }
  const std::string_view count_text = trim(spec.substr(0, x));
  const std::string_view name = trim(spec.substr(x + 1));
  const bool numeric =
      std::all_of(count_text.begin(), count_text.end(), [](char ch) {
        return std::isdigit(static_cast<unsigned char>(ch)) != 0 || ch == '-' ||
               ch == '+';
      });
  if (!numeric) {
    if (find_named(catalog.gpus, name) == nullptr) {
      find_gpu(catalog, spec);  // not NxNAME at all: unknown GPU
    }
    throw Error(fmt::format(
        "invalid GPU count '{}' in '{}'; expected a whole number from 1 to {}",
        echo(count_text), echo(spec), k_max_gpus));
  }
  if (name.empty()) {
    throw Error(
        fmt::format("missing GPU name in '{}'; expected NxNAME, e.g. 4xA100-80",
                    echo(spec)));
  }
  std::int64_t count = 0;
  const char* first = count_text.data();
  const char* last = first + count_text.size();
  if (count_text.size() > 1 && *first == '+') {
    ++first;
  }
  const auto [end, ec] = std::from_chars(first, last, count);
  if (ec == std::errc::result_out_of_range) {
    count = count_text.front() == '-' ? -1 : k_max_gpus + 1;
  } else if (ec != std::errc() || end != last) {
    throw Error(fmt::format(
        "invalid GPU count '{}' in '{}'; expected a whole number from 1 to {}",
        echo(count_text), echo(spec), k_max_gpus));
  }
  if (count < 1 || count > k_max_gpus) {
    throw Error(fmt::format("GPU count must be from 1 to {}, but is {} in '{}'",
                            k_max_gpus, echo(count_text), echo(spec)));
  }
  return {&find_gpu(catalog, name), static_cast<int>(count)};
}

std::optional<double> gpu_hour_price(const Catalog& catalog, const Gpu& gpu) {
  std::optional<double> best;
  for (const Instance& instance : catalog.instances) {
    if (instance.price_usd_per_hour <= 0 || instance.count < 1) {
      continue;
    }
    // The GPU by name, else by alias as find_named() resolves it (the
    // catalog is searched only for an alias: `fit` asks for every card).
    const bool alias = std::any_of(
        gpu.aliases.begin(), gpu.aliases.end(),
        [&](const std::string& a) { return iequals(a, instance.gpu); });
    const Gpu* carried =
        alias ? find_named(catalog.gpus, instance.gpu) : nullptr;
    if (!iequals(instance.gpu, gpu.name) &&
        (carried == nullptr || !iequals(carried->name, gpu.name))) {
      continue;
    }
    const double per_gpu = instance.price_usd_per_hour / instance.count;
    if (!best || per_gpu < *best) {
      best = per_gpu;
    }
  }
  return best;
}

std::optional<std::string> suggest(std::string_view word,
                                   const std::vector<std::string>& candidates,
                                   std::size_t max_edits) {
  // ninja's SpellcheckStringV: the closest candidate within a few edits; ties
  // go to the first candidate (the catalog lists the most used card first).
  std::optional<std::string> best;
  std::size_t best_distance = max_edits + 1;
  for (const auto& candidate : candidates) {
    const std::size_t limit = std::min(best_distance - 1, max_edits);
    const std::size_t distance = edit_distance_within(word, candidate, limit);
    if (distance <= limit && distance < best_distance &&
        distance < candidate.size()) {
      best_distance = distance;
      best = candidate;
    }
    if (best_distance == 0) {
      break;
    }
  }
  return best;
}

}  // namespace oomplan
