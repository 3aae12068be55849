#include "oomplan/catalog.hpp"

#include "json_errors.hpp"

#include "oomplan/error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

// Catalog loading. Every entry is validated here, once, with a message that
// names the file, the entry and the field ("models/llama.json: llama-3-70b:
// hidden_size: must be positive"); after this the core trusts the values.
// Unknown fields are errors so that a typo in a catalog cannot silently fall
// back to a default.

namespace oomplan {
namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char ch) {
    return static_cast<char>(std::tolower(ch));
  });
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

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

// Reads one JSON object (a catalog entry) field by field. Every read marks its
// key as known; finish() rejects the keys nobody read.
class EntryReader {
 public:
  EntryReader(const json& object, std::string_view origin, std::string entry)
      : m_object(object), m_origin(origin), m_entry(std::move(entry)) {}

  [[noreturn]] void fail(std::string_view field,
                         std::string_view problem) const {
    throw Error(
        fmt::format("{}: {}: {}: {}", m_origin, m_entry, field, problem));
  }

  const json* find(std::string_view key) {
    m_known.emplace(key);
    const auto it = m_object.find(std::string(key));
    return it == m_object.end() ? nullptr : &*it;
  }

  std::string string(std::string_view key, bool required = false) {
    const json* value = find(key);
    if (value == nullptr) {
      if (required) {
        fail(key, "missing");
      }
      return {};
    }
    if (!value->is_string()) {
      fail(key, fmt::format("must be a string, but is {}", value->type_name()));
    }
    return value->get<std::string>();
  }

  std::vector<std::string> strings(std::string_view key) {
    const json* value = find(key);
    std::vector<std::string> out;
    if (value == nullptr) {
      return out;
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
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  // An integer >= `min`; `fallback` when absent (or required).
  std::int64_t integer(std::string_view key, std::int64_t fallback,
                       std::int64_t min, bool required = false) {
    const json* value = find(key);
    if (value == nullptr) {
      if (required) {
        fail(key, "missing");
      }
      return fallback;
    }
    if (!value->is_number_integer()) {
      fail(key,
           fmt::format("must be an integer, but is {}", value->type_name()));
    }
    if (value->is_number_unsigned() &&
        value->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      fail(key, "is too large");
    }
    const auto n = value->get<std::int64_t>();
    if (n < min) {
      fail(key, min == 1
                    ? fmt::format("must be positive, but is {}", n)
                    : fmt::format("must be at least {}, but is {}", min, n));
    }
    return n;
  }

  // An integer >= `min` that fits an int (layer periods, counts of norms).
  int small_int(std::string_view key, int fallback, int min) {
    constexpr std::int64_t k_max = 1'000'000;
    const std::int64_t n = integer(key, fallback, min);
    if (n > k_max) {
      fail(key, fmt::format("must be at most {}, but is {}", k_max, n));
    }
    return static_cast<int>(n);
  }

  double number(std::string_view key) {
    const json* value = find(key);
    if (value == nullptr) {
      return 0;
    }
    if (!value->is_number()) {
      fail(key, fmt::format("must be a number, but is {}", value->type_name()));
    }
    const double n = value->get<double>();
    if (n < 0) {
      fail(key, fmt::format("must not be negative, but is {}", n));
    }
    return n;
  }

  bool boolean(std::string_view key) {
    const json* value = find(key);
    if (value == nullptr) {
      return false;
    }
    if (!value->is_boolean()) {
      fail(key,
           fmt::format("must be true or false, but is {}", value->type_name()));
    }
    return value->get<bool>();
  }

  // Rejects fields that no read asked for, suggesting the nearest known one.
  void finish() const {
    for (const auto& item : m_object.items()) {
      if (m_known.count(item.key()) == 0) {
        const std::vector<std::string> known(m_known.begin(), m_known.end());
        const auto near = suggest(item.key(), known);
        fail(item.key(),
             near ? fmt::format("unknown field; did you mean {}?", *near)
                  : std::string("unknown field (models/README.md lists the "
                                "fields)"));
      }
    }
  }

 private:
  const json& m_object;
  std::string_view m_origin;
  std::string m_entry;
  std::set<std::string, std::less<>> m_known;
};

// The entry's label for messages: its id/name, or "models[3]" without one.
std::string entry_label(const json& object, std::string_view list,
                        std::size_t index, std::string_view key) {
  if (object.is_object()) {
    const auto it = object.find(std::string(key));
    if (it != object.end() && it->is_string() &&
        !it->get<std::string>().empty()) {
      return it->get<std::string>();
    }
  }
  return fmt::format("{}[{}]", list, index);
}

Model read_model(const json& object, std::string_view origin,
                 std::string label) {
  EntryReader r(object, origin, std::move(label));
  Model m;
  m.name = r.string("id", true);
  m.hf_id = r.string("hf_id");
  m.aliases = r.strings("aliases");
  m.model_type = r.string("model_type");

  m.hidden_size = r.integer("hidden_size", 0, 1, true);
  m.num_layers = r.integer("num_hidden_layers", 0, 1, true);
  m.num_heads = r.integer("num_attention_heads", 0, 1, true);
  m.num_kv_heads = r.integer("num_key_value_heads", m.num_heads, 1);
  if (m.num_heads % m.num_kv_heads != 0) {
    r.fail("num_key_value_heads",
           fmt::format("{} does not divide num_attention_heads {}",
                       m.num_kv_heads, m.num_heads));
  }
  const bool has_head_dim = r.find("head_dim") != nullptr;
  if (!has_head_dim && m.hidden_size % m.num_heads != 0) {
    r.fail("head_dim",
           fmt::format("missing, and hidden_size {} is not a multiple of "
                       "num_attention_heads {}",
                       m.hidden_size, m.num_heads));
  }
  m.head_dim = r.integer("head_dim", m.hidden_size / m.num_heads, 1);
  m.intermediate_size = r.integer("intermediate_size", 0, 1, true);
  m.vocab_size = r.integer("vocab_size", 0, 1, true);
  m.max_position_embeddings = r.integer("max_position_embeddings", 0, 1);
  m.tie_word_embeddings = r.boolean("tie_word_embeddings");

  const std::string mlp = r.string("mlp");
  if (mlp == "plain") {
    m.mlp = MlpKind::plain;
  } else if (!mlp.empty() && mlp != "gated") {
    r.fail("mlp", fmt::format("'{}' is not gated or plain", mlp));
  }
  const std::string norm = r.string("norm");
  if (norm == "layer_norm") {
    m.norm = NormKind::layer_norm;
  } else if (!norm.empty() && norm != "rms") {
    r.fail("norm", fmt::format("'{}' is not rms or layer_norm", norm));
  }
  m.norms_per_layer = r.small_int("norms_per_layer", 2, 1);
  m.parallel_block = r.boolean("parallel_block");
  m.qkv_bias = r.boolean("qkv_bias");
  m.o_bias = r.boolean("o_bias");
  m.mlp_bias = r.boolean("mlp_bias");
  m.qk_norm = r.boolean("qk_norm");
  m.attention_sinks = r.boolean("attention_sinks");
  m.learned_positions = r.integer("learned_positions", 0, 0);
  m.embedding_norm = r.boolean("embedding_norm");
  m.lm_head_bias = r.boolean("lm_head_bias");

  m.sliding_window = r.integer("sliding_window", 0, 0);
  m.global_every = r.small_int("global_every", 0, 0);

  m.num_experts = r.integer("num_experts", 0, 0);
  m.experts_per_tok = r.integer("num_experts_per_tok", 0, 0);
  m.moe_intermediate_size = r.integer("moe_intermediate_size", 0, 0);
  m.num_shared_experts = r.integer("num_shared_experts", 0, 0);
  m.shared_expert_intermediate_size =
      r.integer("shared_expert_intermediate_size", 0, 0);
  m.first_k_dense = r.integer("first_k_dense_replace", 0, 0);
  m.moe_every = r.small_int("moe_every", 1, 1);
  m.router_bias = r.boolean("router_bias");
  m.shared_expert_gate = r.boolean("shared_expert_gate");
  if (m.num_experts > 0) {
    if (m.experts_per_tok < 1 || m.experts_per_tok > m.num_experts) {
      r.fail("num_experts_per_tok",
             fmt::format("must be from 1 to num_experts {}, but is {}",
                         m.num_experts, m.experts_per_tok));
    }
    if (m.moe_intermediate_size < 1) {
      r.fail("moe_intermediate_size", "must be positive in a MoE model");
    }
  }
  if (m.first_k_dense > m.num_layers) {
    r.fail("first_k_dense_replace",
           fmt::format("{} exceeds num_hidden_layers {}", m.first_k_dense,
                       m.num_layers));
  }

  m.q_lora_rank = r.integer("q_lora_rank", 0, 0);
  m.kv_lora_rank = r.integer("kv_lora_rank", 0, 0);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", 0, 0);
  m.qk_nope_head_dim = r.integer("qk_nope_head_dim", 0, 0);
  m.v_head_dim = r.integer("v_head_dim", 0, 0);
  if (m.kv_lora_rank > 0 &&
      (m.qk_rope_head_dim < 1 || m.qk_nope_head_dim < 1 || m.v_head_dim < 1)) {
    r.fail("kv_lora_rank",
           "multi-head latent attention needs qk_rope_head_dim, "
           "qk_nope_head_dim and v_head_dim");
  }

  m.num_decoder_layers = r.integer("num_decoder_layers", 0, 0);
  m.relative_attention_buckets =
      r.integer("relative_attention_num_buckets", 0, 0);
  m.extra_params = r.integer("extra_params", 0, 0);

  const std::string quant = r.string("checkpoint_quant");
  if (!quant.empty()) {
    const auto q = quant_from_name(quant);
    if (!q || *q == Quant::automatic) {
      r.fail("checkpoint_quant",
             fmt::format("unknown format '{}'; valid: none, int8, fp8, int4, "
                         "nf4, nf4-nodq, gptq, awq, mxfp4",
                         quant));
    }
    m.checkpoint_quant = *q;
  }
  const std::string dtype = r.string("checkpoint_dtype");
  if (!dtype.empty()) {
    const auto d = dtype_from_name(dtype);
    if (!d) {
      r.fail("checkpoint_dtype",
             fmt::format("unknown dtype '{}'; valid: fp32, bf16, fp16, fp8",
                         dtype));
    }
    m.checkpoint_dtype = *d;
  }
  m.checkpoint_note = r.string("checkpoint_note");
  m.params = r.integer("params", 0, 0);
  m.params_active = r.integer("params_active", 0, 0);
  m.official_params = r.integer("official_params", 0, 0);
  m.checkpoint_bytes = r.integer("checkpoint_bytes", 0, 0);
  if (approx_params(m) > k_max_params) {
    r.fail("hidden_size", "these sizes give more than 10^15 parameters");
  }
  r.string("official_params_source");  // documentation only
  r.strings("sources");                // documentation only
  r.finish();
  return m;
}

Gpu read_gpu(const json& object, std::string_view origin, std::string label) {
  EntryReader r(object, origin, std::move(label));
  Gpu g;
  g.name = r.string("name", true);
  g.full_name = r.string("full_name");
  g.aliases = r.strings("aliases");
  g.vendor = r.string("vendor");
  g.arch = r.string("arch");
  g.compute_capability = r.small_int("compute_capability", 0, 0);
  g.capacity_bytes = r.integer("capacity_bytes", 0, 1, true);
  g.smi_bytes = r.integer("smi_bytes", 0, 0);
  g.capacity_note = r.string("capacity_note");
  g.bandwidth_gb_s = r.number("bandwidth_gb_s");
  g.bf16_tflops = r.number("bf16_tflops");
  g.fp8_tflops = r.number("fp8_tflops");
  g.nvlink_gb_s = r.number("nvlink_gb_s");
  g.pcie_gb_s = r.number("pcie_gb_s");
  g.interconnect = r.string("interconnect");
  g.common = r.boolean("common");
  g.note = r.string("note");
  r.strings("sources");  // documentation only
  r.finish();
  return g;
}

constexpr std::int64_t k_max_gpus = 100'000;

Instance read_instance(const json& object, std::string_view origin,
                       std::string label) {
  EntryReader r(object, origin, std::move(label));
  Instance i;
  i.name = r.string("name", true);
  i.gpu = r.string("gpu", true);
  i.count = static_cast<int>(r.integer("count", 0, 1, true));
  if (i.count > k_max_gpus) {
    r.fail("count", fmt::format("must be at most {}", k_max_gpus));
  }
  r.string("source");  // documentation only
  r.finish();
  return i;
}

// Names and aliases must be unique (case-insensitively) across a list.
template <typename T>
void check_unique(const std::vector<T>& entries, std::string_view what,
                  std::string_view origin) {
  std::set<std::string> seen;
  for (const T& entry : entries) {
    std::vector<std::string> keys{entry.name};
    if constexpr (!std::is_same_v<T, Instance>) {
      keys.insert(keys.end(), entry.aliases.begin(), entry.aliases.end());
    }
    for (const auto& key : keys) {
      if (!seen.insert(lower(key)).second) {
        throw Error(
            fmt::format("{}: {}: name or alias '{}' is used by "
                        "another {}",
                        origin, entry.name, key, what));
      }
    }
  }
}

template <typename T>
void merge_list(std::vector<T>& base, std::vector<T>& extra) {
  for (T& entry : extra) {
    const auto same = std::find_if(base.begin(), base.end(), [&](const T& b) {
      return iequals(b.name, entry.name);
    });
    if (same != base.end()) {
      // The override keeps the built-in spelling and aliases, so `8xH100`
      // still finds an overridden H100-80.
      entry.name = same->name;
      if constexpr (!std::is_same_v<T, Instance>) {
        for (auto& alias : same->aliases) {
          const bool known = std::any_of(
              entry.aliases.begin(), entry.aliases.end(),
              [&](const std::string& a) { return iequals(a, alias); });
          if (!known) {
            entry.aliases.push_back(std::move(alias));
          }
        }
      }
      *same = std::move(entry);
    } else {
      base.push_back(std::move(entry));
    }
  }
}

// Edit distance with transpositions counted once (optimal string alignment),
// case-insensitive, as ninja's EditDistance with allow_replacements.
std::size_t edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = lower(a_in);
  const std::string b = lower(b_in);
  std::vector<std::vector<std::size_t>> d(
      a.size() + 1, std::vector<std::size_t>(b.size() + 1, 0));
  for (std::size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (std::size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
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

// Every instance must name a GPU of the catalog.
void check_instances(const Catalog& catalog) {
  for (const Instance& instance : catalog.instances) {
    if (find_named(catalog.gpus, instance.gpu) == nullptr) {
      throw Error(fmt::format("instance {}: unknown GPU '{}'", instance.name,
                              instance.gpu));
    }
  }
}

}  // namespace

Catalog parse_catalog(std::string_view text, std::string_view origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}", origin, strip_json_prefix(e.what())));
  }
  if (!doc.is_object()) {
    throw Error(fmt::format(
        "{}: the top level must be an object with \"models\", \"gpus\" or "
        "\"instances\"",
        origin));
  }
  Catalog catalog;
  for (const auto& item : doc.items()) {
    const std::string& key = item.key();
    const json& list = item.value();
    if (key != "models" && key != "gpus" && key != "instances") {
      throw Error(fmt::format(
          "{}: {}: unknown top-level key; expected models, gpus or instances",
          origin, key));
    }
    if (!list.is_array()) {
      throw Error(fmt::format("{}: {}: must be an array, but is {}", origin,
                              key, list.type_name()));
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& entry = list[i];
      const std::string label =
          entry_label(entry, key, i, key == "models" ? "id" : "name");
      if (!entry.is_object()) {
        throw Error(fmt::format("{}: {}: must be an object, but is {}", origin,
                                label, entry.type_name()));
      }
      if (key == "models") {
        catalog.models.push_back(read_model(entry, origin, label));
      } else if (key == "gpus") {
        catalog.gpus.push_back(read_gpu(entry, origin, label));
      } else {
        catalog.instances.push_back(read_instance(entry, origin, label));
      }
    }
  }
  check_unique(catalog.models, "model", origin);
  check_unique(catalog.gpus, "GPU", origin);
  check_unique(catalog.instances, "instance", origin);
  return catalog;
}

void merge_catalog(Catalog& base, Catalog extra) {
  merge_list(base.models, extra.models);
  merge_list(base.gpus, extra.gpus);
  merge_list(base.instances, extra.instances);
  check_instances(base);
}

Catalog builtin_catalog() {
  // Model families in the order `oomplan models` lists them (most used
  // first); files not named here follow in name order.
  constexpr std::array<std::string_view, 9> k_family_order = {
      "models/llama.json",   "models/mistral.json", "models/qwen.json",
      "models/gemma.json",   "models/phi.json",     "models/deepseek.json",
      "models/gpt_oss.json", "models/falcon.json",  "models/cohere.json"};
  std::vector<CatalogFile> files = builtin_catalog_files();
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

const Model& find_model(const Catalog& catalog, std::string_view name) {
  if (const Model* m = find_named(catalog.models, name)) {
    return *m;
  }
  for (const Model& m : catalog.models) {
    if (!m.hf_id.empty() && iequals(m.hf_id, name)) {
      return m;
    }
  }
  const auto near = suggest(name, all_names(catalog.models));
  throw Error(
      near ? fmt::format("unknown model '{}'; did you mean {}?", name, *near)
           : fmt::format("unknown model '{}'; `oomplan models` lists "
                         "the catalog, or pass a config.json path",
                         name));
}

const Gpu& find_gpu(const Catalog& catalog, std::string_view name) {
  if (const Gpu* g = find_named(catalog.gpus, name)) {
    return *g;
  }
  const auto near = suggest(name, all_names(catalog.gpus));
  throw Error(
      near ? fmt::format("unknown GPU '{}'; did you mean {}?", name, *near)
           : fmt::format("unknown GPU '{}'; `oomplan gpus` lists the catalog",
                         name));
}

GpuSpec parse_gpu_spec(const Catalog& catalog, std::string_view spec_in) {
  // "4 x A100-80" and a pasted " 8xH100 " mean what they say.
  const std::string_view spec = trim(spec_in);
  if (spec.empty()) {
    throw Error("empty --gpus; expected NxNAME, e.g. 4xA100-80");
  }
  if (const Instance* instance = find_instance(catalog, spec)) {
    return {&find_gpu(catalog, instance->gpu), instance->count};
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
        count_text, spec, k_max_gpus));
  }
  if (name.empty()) {
    throw Error(fmt::format(
        "missing GPU name in '{}'; expected NxNAME, e.g. 4xA100-80", spec));
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
        count_text, spec, k_max_gpus));
  }
  if (count < 1 || count > k_max_gpus) {
    throw Error(fmt::format("GPU count must be from 1 to {}, but is {} in '{}'",
                            k_max_gpus, count_text, spec));
  }
  return {&find_gpu(catalog, name), static_cast<int>(count)};
}

std::optional<std::string> suggest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  // ninja's SpellcheckStringV: the closest candidate within 3 edits; ties go
  // to the first candidate (the catalog lists the most used card first).
  constexpr std::size_t k_max_distance = 3;
  std::optional<std::string> best;
  std::size_t best_distance = k_max_distance + 1;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance && distance < candidate.size()) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

}  // namespace oomplan
