#pragma once

// Shared by the libFuzzer targets (tests/fuzz/fuzz_<name>.cpp): the contract
// checks every target makes, and a structure-aware JSON mutator.
//
// A target is LLVMFuzzerTestOneInput(data, size) calling one parser. The
// contract: the parser returns a valid value or throws oomplan::Error whose
// message is one printable line; any other exception escapes and libFuzzer
// reports it as a crash, and a broken contract calls fail(), which aborts.

#include "oomplan/model/model.hpp"
#include "oomplan/util/error.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace oomplan::fuzz {

// Reports a broken contract and aborts (libFuzzer saves the input).
[[noreturn]] inline void fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "contract broken: %.*s: %.*s\n",
               static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void require(bool ok, std::string_view what,
                    std::string_view detail = "") {
  if (!ok) {
    fail(what, detail);
  }
}

// An Error's message: non-empty, one line, no control characters, short
// (user text is cut at 200 bytes, so no message needs 2 KB), and starting
// with `prefix` (the origin every loader message names).
inline void check_error(const Error& e, std::string_view prefix = "") {
  const std::string_view message = e.what();
  require(!message.empty(), "empty error message");
  require(message.size() < 2048, "error message over 2 KB", message);
  for (const char ch : message) {
    const auto byte = static_cast<unsigned char>(ch);
    require(byte >= 0x20 && byte != 0x7f, "control character in message",
            message);
  }
  require(message.substr(0, prefix.size()) == prefix,
          "message does not name its origin", message);
}

// A model the loaders accepted: check_model() holds, the counts are positive
// and add up (every group non-negative, the per-layer counts sum to the layer
// part of the total, active <= total, approx_params bounds the total).
inline void check_model_contract(const Model& m) {
  if (const auto problem = check_model(m)) {
    fail("accepted model fails check_model",
         problem->field + ": " + problem->problem);
  }
  const ParamCounts c = count_params(m);
  for (const std::int64_t group :
       {c.embedding, c.lm_head, c.attention, c.kv_proj, c.mlp, c.experts,
        c.shared_experts, c.router, c.small, c.extra, c.active}) {
    require(group >= 0, "negative parameter group", m.name);
  }
  const std::int64_t total = c.total();
  require(total > 0, "no parameters", m.name);
  require(c.active <= total, "more active than total parameters", m.name);
  require(c.kv_proj <= c.attention, "kv projections exceed attention", m.name);
  const double approx = approx_params(m);
  require(std::isfinite(approx) && approx >= static_cast<double>(total) &&
              approx <= k_max_params,
          "approx_params does not bound the count", m.name);
  std::int64_t layers = 0;
  const std::int64_t n = m.num_layers + m.num_decoder_layers;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t p = layer_params(m, i);
    require(p > 0, "a layer without parameters", m.name);
    layers += p;
  }
  // Everything outside the layers: embeddings, lm_head, extra and the global
  // small parameters (at most three LayerNorms of 2 hidden each: final,
  // T5's second stack, BLOOM's embedding norm; an lm_head bias; T5's bias
  // tables, which layer_params already counts once per stack).
  const std::int64_t outside = c.embedding + c.lm_head + c.extra;
  require(layers + outside <= total, "layers exceed the total", m.name);
  const std::int64_t rest = total - layers - outside;
  require(rest <= m.vocab_size + 6 * m.hidden_size,
          "the layers and embeddings do not add up to the total", m.name);
}

// --- Structure-aware mutation of JSON inputs.

using nlohmann::json;

// Values that sit on the bounds and overflow edges of the loaders.
inline json interesting_number(std::minstd_rand& rng) {
  static const std::vector<json> k_values = {
      0,
      1,
      -1,
      2,
      3,
      4,
      7,
      8,
      16,
      64,
      127,
      128,
      4095,
      4096,
      4097,
      1 << 20,
      (1 << 20) + 1,
      1 << 24,
      std::int64_t{1} << 30,
      std::int64_t{2147483647},
      std::int64_t{2147483648},
      std::int64_t{4294967296},
      std::int64_t{1} << 53,
      (std::int64_t{1} << 53) + 1,
      std::int64_t{1} << 62,
      std::numeric_limits<std::int64_t>::max(),
      std::numeric_limits<std::int64_t>::min(),
      std::numeric_limits<std::uint64_t>::max(),
      1e15,
      1e300,
      -1e300,
      0.5,
      1.5,
      4096.0};
  return k_values[rng() % k_values.size()];
}

inline std::string interesting_string(std::minstd_rand& rng) {
  static const std::vector<std::string> k_values = {"",
                                                    "llama",
                                                    "mistral",
                                                    "mixtral",
                                                    "qwen2",
                                                    "qwen2_moe",
                                                    "qwen3",
                                                    "qwen3_moe",
                                                    "qwen3_next",
                                                    "gemma",
                                                    "gemma2",
                                                    "gemma3",
                                                    "gemma3_text",
                                                    "gemma3n",
                                                    "phi",
                                                    "phi3",
                                                    "phimoe",
                                                    "cohere",
                                                    "cohere2",
                                                    "falcon",
                                                    "falcon_h1",
                                                    "jamba",
                                                    "mamba",
                                                    "mamba2",
                                                    "olmo2",
                                                    "glm4_moe",
                                                    "kimi_k2",
                                                    "deepseek_v2",
                                                    "deepseek_v3",
                                                    "gpt_oss",
                                                    "gpt2",
                                                    "gpt_neox",
                                                    "bloom",
                                                    "llama4",
                                                    "mllama",
                                                    "mistral3",
                                                    "t5",
                                                    "qwen2_5_vl",
                                                    "compressed-tensors",
                                                    "bitsandbytes",
                                                    "gptq",
                                                    "awq",
                                                    "fp8",
                                                    "mxfp4",
                                                    "float",
                                                    "int",
                                                    "plain",
                                                    "gated",
                                                    "rms",
                                                    "layer_norm",
                                                    "full_attention",
                                                    "sliding_attention",
                                                    "linear_attention",
                                                    "float16",
                                                    "float32",
                                                    "bfloat16",
                                                    "H100-80",
                                                    "H100",
                                                    "A100-80",
                                                    "bad\nname",
                                                    "\x1b[31m",
                                                    "caf\xc3\xa9",
                                                    std::string(300, 'a')};
  return k_values[rng() % k_values.size()];
}

// Keys the loaders read (HF config.json and catalog entries).
inline std::string interesting_key(std::minstd_rand& rng) {
  static const std::vector<std::string> k_keys = {
      "model_type",
      "hidden_size",
      "num_hidden_layers",
      "num_attention_heads",
      "num_key_value_heads",
      "head_dim",
      "intermediate_size",
      "vocab_size",
      "max_position_embeddings",
      "tie_word_embeddings",
      "sliding_window",
      "layer_types",
      "use_sliding_window",
      "sliding_window_pattern",
      "num_experts",
      "num_local_experts",
      "n_routed_experts",
      "num_experts_per_tok",
      "moe_intermediate_size",
      "n_shared_experts",
      "shared_expert_intermediate_size",
      "first_k_dense_replace",
      "moe_layer_freq",
      "decoder_sparse_step",
      "mlp_only_layers",
      "q_lora_rank",
      "kv_lora_rank",
      "qk_rope_head_dim",
      "qk_nope_head_dim",
      "v_head_dim",
      "text_config",
      "vision_config",
      "quantization_config",
      "quant_method",
      "config_groups",
      "weights",
      "num_bits",
      "type",
      "load_in_4bit",
      "bits",
      "n_embd",
      "n_layer",
      "n_head",
      "n_inner",
      "n_positions",
      "d_model",
      "d_ff",
      "d_kv",
      "num_heads",
      "num_layers",
      "num_decoder_layers",
      "image_size",
      "patch_size",
      "depth",
      "cross_attention_layers",
      "interleave_moe_layer_step",
      "attention_chunk_size",
      "intermediate_size_mlp",
      "torch_dtype",
      "new_decoder_architecture",
      "multi_query",
      "ffn_hidden_size",
      "attn_layer_period",
      "attn_layer_offset",
      "expert_layer_period",
      "expert_layer_offset",
      "state_size",
      "conv_kernel",
      "expand",
      "mamba_d_state",
      "mamba_d_conv",
      "mamba_expand",
      "mamba_n_heads",
      "mamba_d_head",
      "mamba_n_groups",
      "linear_num_key_heads",
      "linear_num_value_heads",
      "linear_key_head_dim",
      "linear_value_head_dim",
      "linear_conv_kernel_dim",
      "full_attention_interval",
      "__index__",
      "metadata",
      "total_size",
      "id",
      "name",
      "aliases",
      "capacity_bytes",
      "bandwidth_gb_s",
      "bf16_tflops",
      "pcie_gb_s",
      "gpu",
      "count",
      "host_ram_gib",
      "price_usd_per_hour",
      "models",
      "gpus",
      "instances",
      "global_every",
      "moe_every",
      "norms_per_layer",
      "checkpoint_bytes",
      "extra_params"};
  return k_keys[rng() % k_keys.size()];
}

inline json interesting_value(std::minstd_rand& rng) {
  switch (rng() % 8) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return interesting_string(rng);
    case 3:
      return json::array({interesting_number(rng), interesting_number(rng)});
    case 4:
      return json::object({{interesting_key(rng), interesting_number(rng)}});
    default:
      return interesting_number(rng);
  }
}

// Every node of `node`, parents before children.
inline void collect(json& node, std::vector<json*>& out) {
  out.push_back(&node);
  if (node.is_object() || node.is_array()) {
    for (auto& child : node) {
      collect(child, out);
    }
  }
}

// One structural change to `doc`.
inline void mutate_once(json& doc, std::minstd_rand& rng) {
  std::vector<json*> nodes;
  collect(doc, nodes);
  json& node = *nodes[rng() % nodes.size()];
  const unsigned op = rng() % 10;
  if (node.is_number() && op < 6) {
    if (op < 3) {
      node = interesting_number(rng);
    } else if (node.is_number_integer() && !node.is_number_unsigned()) {
      // v - 1, v + 1, 2 v or 0 - v, when they fit.
      const std::int64_t v = node.get<std::int64_t>();
      const std::int64_t deltas[] = {-1, 1, v};
      std::int64_t out = 0;
      const bool overflow =
          rng() % 4 == 0 ? __builtin_sub_overflow(std::int64_t{0}, v, &out)
                         : __builtin_add_overflow(v, deltas[rng() % 3], &out);
      node = overflow ? json(v) : json(out);
    } else {
      node = interesting_number(rng);
    }
    return;
  }
  if (node.is_string() && op < 6) {
    node = interesting_string(rng);
    return;
  }
  if (node.is_object() && op < 8) {
    if (op < 3 && !node.empty()) {
      // Delete a key.
      auto it = node.begin();
      std::advance(it, static_cast<long>(rng() % node.size()));
      node.erase(it);
    } else if (op < 5 && !node.empty()) {
      // Rename a key, keeping its value.
      auto it = node.begin();
      std::advance(it, static_cast<long>(rng() % node.size()));
      json value = *it;
      const std::string old_key = it.key();
      node.erase(old_key);
      node[interesting_key(rng)] = std::move(value);
    } else {
      node[interesting_key(rng)] = interesting_value(rng);
    }
    return;
  }
  if (node.is_array() && op < 8) {
    if (op < 3 && !node.empty()) {
      node.erase(static_cast<std::size_t>(rng() % node.size()));
    } else if (op < 5 && !node.empty()) {
      json copy = node[static_cast<std::size_t>(rng() % node.size())];
      node.push_back(std::move(copy));
    } else {
      node.push_back(interesting_value(rng));
    }
    return;
  }
  if (op == 8 && nodes.size() > 1) {
    // Copy another subtree over this one (never an ancestor of it: copy
    // first).
    json copy = *nodes[rng() % nodes.size()];
    node = std::move(copy);
    return;
  }
  node = interesting_value(rng);
}

// libFuzzer's custom mutator: a third of the time bytes (LLVMFuzzerMutate),
// else the input parsed as JSON, changed 1-4 times and written back. Inputs
// that are not JSON, and results that do not fit `max_size`, fall back to
// bytes.
inline size_t mutate_json(uint8_t* data, size_t size, size_t max_size,
                          unsigned int seed) {
  std::minstd_rand rng(seed);
  if (rng() % 3 == 0) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  json doc =
      json::parse(std::string_view(reinterpret_cast<const char*>(data), size),
                  nullptr, false);
  if (doc.is_discarded()) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  const unsigned rounds = 1 + rng() % 4;
  for (unsigned i = 0; i < rounds; ++i) {
    mutate_once(doc, rng);
  }
  const std::string text = doc.dump(rng() % 2 == 0 ? -1 : 1, ' ', false,
                                    json::error_handler_t::replace);
  if (text.size() > max_size) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  std::copy(text.begin(), text.end(), data);
  return text.size();
}

}  // namespace oomplan::fuzz
