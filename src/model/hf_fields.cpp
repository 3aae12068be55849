// The config fields several architecture families share (hf_config.hpp).

#include "model/hf_config.hpp"

#include <algorithm>

namespace oomplan::hf {

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

int as_period(std::int64_t value) {
  return static_cast<int>(std::clamp<std::int64_t>(value, 0, k_max_layers));
}

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

std::int64_t expanded(const Config& root, std::string_view key,
                      std::int64_t hidden) {
  return (Count{root.get({key}, 2)} * hidden).value();
}

std::int64_t dt_rank(const Config& c, std::string_view key,
                     std::int64_t hidden) {
  const json* value = c.find({key});
  if (value == nullptr ||
      (value->is_string() && value->get<std::string>() == "auto")) {
    return (hidden + 15) / 16;
  }
  return c.get({key}, 0);
}

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

}  // namespace oomplan::hf
