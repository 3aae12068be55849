// The build's catalog generator: validates models/*.json with the loader the
// tool uses at run time (assemble_catalog: parse_catalog + check_model + the
// cross-file checks) and writes a C++ source defining builtin_catalog() as
// field assignments, so the shipped catalog costs no JSON parsing at run time
// and a bad catalog file fails the build with the loader's message.
//
// Usage: oomplan_catalog_gen OUT.cpp models/a.json models/b.json ...
// OUT.cpp is rewritten only when its text changes.
//
// Every field of Model, Gpu and Instance is emitted below (in declaration
// order) when it differs from the default; tests/test_catalog.cpp checks that
// the compiled catalog equals the JSON one, entry by entry.

#include "oomplan/model/catalog.hpp"
#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

using oomplan::Dtype;
using oomplan::Gpu;
using oomplan::Instance;
using oomplan::LayerKind;
using oomplan::MlpKind;
using oomplan::Model;
using oomplan::NormKind;
using oomplan::Quant;

// A C++ string literal holding `text` exactly (octal escapes cannot run into
// the next character, unlike hex ones).
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (byte < 0x20 || byte >= 0x7f) {
      fmt::format_to(std::back_inserter(out), "\\{:03o}", byte);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string number(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) {
    text += ".0";
  }
  return text;
}

std::string enumerator(MlpKind kind) {
  switch (kind) {
    case MlpKind::gated:
      return "MlpKind::gated";
    case MlpKind::plain:
      return "MlpKind::plain";
    case MlpKind::none:
      return "MlpKind::none";
  }
  return "MlpKind::gated";
}

std::string enumerator(NormKind kind) {
  switch (kind) {
    case NormKind::rms:
      return "NormKind::rms";
    case NormKind::layer_norm:
      return "NormKind::layer_norm";
  }
  return "NormKind::rms";
}

std::string enumerator(oomplan::LayerKind kind) {
  return fmt::format("LayerKind::{}", oomplan::layer_kind_name(kind));
}

std::string enumerator(Quant quant) {
  switch (quant) {
    case Quant::automatic:
      return "Quant::automatic";
    case Quant::none:
      return "Quant::none";
    case Quant::int8:
      return "Quant::int8";
    case Quant::fp8:
      return "Quant::fp8";
    case Quant::int4:
      return "Quant::int4";
    case Quant::nf4:
      return "Quant::nf4";
    case Quant::nf4_nodq:
      return "Quant::nf4_nodq";
    case Quant::gptq:
      return "Quant::gptq";
    case Quant::awq:
      return "Quant::awq";
    case Quant::mxfp4:
      return "Quant::mxfp4";
  }
  return "Quant::none";
}

std::string enumerator(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp32:
      return "Dtype::fp32";
    case Dtype::bf16:
      return "Dtype::bf16";
    case Dtype::fp16:
      return "Dtype::fp16";
    case Dtype::fp8:
      return "Dtype::fp8";
  }
  return "Dtype::bf16";
}

// Assignments of the fields that differ from the defaults.
class Fields {
 public:
  void add(const char* field, const std::string& value,
           const std::string& fallback) {
    if (value != fallback) {
      put(field, literal(value));
    }
  }
  void add(const char* field, const std::vector<std::string>& value,
           const std::vector<std::string>& fallback) {
    if (value != fallback) {
      // names() builds each string once; a braced list of std::string
      // would build every alias twice (the initializer_list, then its copy).
      std::string list = "names({";
      for (std::size_t i = 0; i < value.size(); ++i) {
        list += (i > 0 ? ", " : "") + literal(value[i]);
      }
      put(field, list + "})");
    }
  }
  void add(const char* field, std::int64_t value, std::int64_t fallback) {
    if (value != fallback) {
      put(field, fmt::format("{}", value));
    }
  }
  void add(const char* field, int value, int fallback) {
    if (value != fallback) {
      put(field, fmt::format("{}", value));
    }
  }
  void add(const char* field, double value, double fallback) {
    if (value != fallback) {
      put(field, number(value));
    }
  }
  void add(const char* field, bool value, bool fallback) {
    if (value != fallback) {
      put(field, value ? "true" : "false");
    }
  }
  void add(const char* field, const std::vector<oomplan::LayerKind>& value,
           const std::vector<oomplan::LayerKind>& fallback) {
    if (value != fallback) {
      std::string list = "{";
      for (std::size_t i = 0; i < value.size(); ++i) {
        list += (i > 0 ? ", " : "") + enumerator(value[i]);
      }
      put(field, list + "}");
    }
  }
  template <typename Enum>
  void add_enum(const char* field, Enum value, Enum fallback) {
    if (value != fallback) {
      put(field, enumerator(value));
    }
  }
  const std::string& text() const { return m_text; }

 private:
  void put(const char* field, const std::string& value) {
    fmt::format_to(std::back_inserter(m_text), "    e.{} = {};\n", field,
                   value);
  }
  std::string m_text;
};

std::string model(const Model& m) {
  const Model d;
  Fields f;
  f.add("name", m.name, d.name);
  f.add("hf_id", m.hf_id, d.hf_id);
  f.add("aliases", m.aliases, d.aliases);
  f.add("model_type", m.model_type, d.model_type);
  f.add("hidden_size", m.hidden_size, d.hidden_size);
  f.add("num_layers", m.num_layers, d.num_layers);
  f.add("num_heads", m.num_heads, d.num_heads);
  f.add("num_kv_heads", m.num_kv_heads, d.num_kv_heads);
  f.add("head_dim", m.head_dim, d.head_dim);
  f.add("intermediate_size", m.intermediate_size, d.intermediate_size);
  f.add("vocab_size", m.vocab_size, d.vocab_size);
  f.add("max_position_embeddings", m.max_position_embeddings,
        d.max_position_embeddings);
  f.add("tie_word_embeddings", m.tie_word_embeddings, d.tie_word_embeddings);
  f.add_enum("mlp", m.mlp, d.mlp);
  f.add_enum("norm", m.norm, d.norm);
  f.add("norms_per_layer", m.norms_per_layer, d.norms_per_layer);
  f.add("parallel_block", m.parallel_block, d.parallel_block);
  f.add("qkv_bias", m.qkv_bias, d.qkv_bias);
  f.add("o_bias", m.o_bias, d.o_bias);
  f.add("mlp_bias", m.mlp_bias, d.mlp_bias);
  f.add("qk_norm", m.qk_norm, d.qk_norm);
  f.add("qk_norm_full", m.qk_norm_full, d.qk_norm_full);
  f.add("attention_output_gate", m.attention_output_gate,
        d.attention_output_gate);
  f.add("attention_sinks", m.attention_sinks, d.attention_sinks);
  f.add("learned_positions", m.learned_positions, d.learned_positions);
  f.add("embedding_norm", m.embedding_norm, d.embedding_norm);
  f.add("lm_head_bias", m.lm_head_bias, d.lm_head_bias);
  f.add("sliding_window", m.sliding_window, d.sliding_window);
  f.add("global_every", m.global_every, d.global_every);
  f.add("num_experts", m.num_experts, d.num_experts);
  f.add("experts_per_tok", m.experts_per_tok, d.experts_per_tok);
  f.add("moe_intermediate_size", m.moe_intermediate_size,
        d.moe_intermediate_size);
  f.add("num_shared_experts", m.num_shared_experts, d.num_shared_experts);
  f.add("shared_expert_intermediate_size", m.shared_expert_intermediate_size,
        d.shared_expert_intermediate_size);
  f.add("first_k_dense", m.first_k_dense, d.first_k_dense);
  f.add("shared_expert_gate", m.shared_expert_gate, d.shared_expert_gate);
  f.add("moe_every", m.moe_every, d.moe_every);
  f.add("router_bias", m.router_bias, d.router_bias);
  f.add("q_lora_rank", m.q_lora_rank, d.q_lora_rank);
  f.add("kv_lora_rank", m.kv_lora_rank, d.kv_lora_rank);
  f.add("qk_rope_head_dim", m.qk_rope_head_dim, d.qk_rope_head_dim);
  f.add("qk_nope_head_dim", m.qk_nope_head_dim, d.qk_nope_head_dim);
  f.add("v_head_dim", m.v_head_dim, d.v_head_dim);
  f.add("num_decoder_layers", m.num_decoder_layers, d.num_decoder_layers);
  f.add("relative_attention_buckets", m.relative_attention_buckets,
        d.relative_attention_buckets);
  f.add("layer_types", m.layer_types, d.layer_types);
  f.add("ssm_inner_size", m.ssm_inner_size, d.ssm_inner_size);
  f.add("ssm_state_size", m.ssm_state_size, d.ssm_state_size);
  f.add("ssm_conv_kernel", m.ssm_conv_kernel, d.ssm_conv_kernel);
  f.add("ssm_dt_rank", m.ssm_dt_rank, d.ssm_dt_rank);
  f.add("ssm_num_heads", m.ssm_num_heads, d.ssm_num_heads);
  f.add("ssm_head_dim", m.ssm_head_dim, d.ssm_head_dim);
  f.add("ssm_groups", m.ssm_groups, d.ssm_groups);
  f.add("ssm_conv_bias", m.ssm_conv_bias, d.ssm_conv_bias);
  f.add("ssm_proj_bias", m.ssm_proj_bias, d.ssm_proj_bias);
  f.add("ssm_inner_norms", m.ssm_inner_norms, d.ssm_inner_norms);
  f.add("ssm_gated_norm", m.ssm_gated_norm, d.ssm_gated_norm);
  f.add("linear_key_heads", m.linear_key_heads, d.linear_key_heads);
  f.add("linear_value_heads", m.linear_value_heads, d.linear_value_heads);
  f.add("linear_key_head_dim", m.linear_key_head_dim, d.linear_key_head_dim);
  f.add("linear_value_head_dim", m.linear_value_head_dim,
        d.linear_value_head_dim);
  f.add("linear_conv_kernel", m.linear_conv_kernel, d.linear_conv_kernel);
  f.add("extra_params", m.extra_params, d.extra_params);
  f.add("vision_image_size", m.vision_image_size, d.vision_image_size);
  f.add("vision_patch_size", m.vision_patch_size, d.vision_patch_size);
  f.add("vision_temporal_patch_size", m.vision_temporal_patch_size,
        d.vision_temporal_patch_size);
  f.add("vision_merge_size", m.vision_merge_size, d.vision_merge_size);
  f.add("vision_hidden_size", m.vision_hidden_size, d.vision_hidden_size);
  f.add("vision_intermediate_size", m.vision_intermediate_size,
        d.vision_intermediate_size);
  f.add("vision_layers", m.vision_layers, d.vision_layers);
  f.add("vision_gated_mlp", m.vision_gated_mlp, d.vision_gated_mlp);
  f.add("vision_video", m.vision_video, d.vision_video);
  f.add("vision_max_tiles", m.vision_max_tiles, d.vision_max_tiles);
  f.add("vision_intermediate_layers", m.vision_intermediate_layers,
        d.vision_intermediate_layers);
  f.add_enum("checkpoint_quant", m.checkpoint_quant, d.checkpoint_quant);
  f.add_enum("checkpoint_dtype", m.checkpoint_dtype, d.checkpoint_dtype);
  f.add("official_params", m.official_params, d.official_params);
  f.add("checkpoint_bytes", m.checkpoint_bytes, d.checkpoint_bytes);
  f.add("params", m.params, d.params);
  f.add("params_active", m.params_active, d.params_active);
  f.add("checkpoint_note", m.checkpoint_note, d.checkpoint_note);
  return f.text();
}

std::string gpu(const Gpu& g) {
  const Gpu d;
  Fields f;
  f.add("name", g.name, d.name);
  f.add("full_name", g.full_name, d.full_name);
  f.add("aliases", g.aliases, d.aliases);
  f.add("vendor", g.vendor, d.vendor);
  f.add("arch", g.arch, d.arch);
  f.add("compute_capability", g.compute_capability, d.compute_capability);
  f.add("capacity_bytes", g.capacity_bytes, d.capacity_bytes);
  f.add("smi_bytes", g.smi_bytes, d.smi_bytes);
  f.add("capacity_note", g.capacity_note, d.capacity_note);
  f.add("bandwidth_gb_s", g.bandwidth_gb_s, d.bandwidth_gb_s);
  f.add("bf16_tflops", g.bf16_tflops, d.bf16_tflops);
  f.add("fp8_tflops", g.fp8_tflops, d.fp8_tflops);
  f.add("nvlink_gb_s", g.nvlink_gb_s, d.nvlink_gb_s);
  f.add("pcie_gb_s", g.pcie_gb_s, d.pcie_gb_s);
  f.add("common", g.common, d.common);
  f.add("interconnect", g.interconnect, d.interconnect);
  f.add("note", g.note, d.note);
  return f.text();
}

std::string instance(const Instance& i) {
  const Instance d;
  Fields f;
  f.add("name", i.name, d.name);
  f.add("gpu", i.gpu, d.gpu);
  f.add("count", i.count, d.count);
  f.add("host_ram_bytes", i.host_ram_bytes, d.host_ram_bytes);
  f.add("price_usd_per_hour", i.price_usd_per_hour, d.price_usd_per_hour);
  return f.text();
}

template <typename T, typename Emit>
void emit_list(std::string& out, const char* type, const char* list,
               const std::vector<T>& entries, Emit emit) {
  fmt::format_to(std::back_inserter(out), "  c.{}.reserve({});\n", list,
                 entries.size());
  // Each entry is built in place and assigned only the fields that differ
  // from the defaults: no temporary to move into the vector (start-up cost
  // grows with the catalog; docs/development.md, "The benchmark").
  for (const T& entry : entries) {
    fmt::format_to(std::back_inserter(out),
                   "  {{\n    {}& e = c.{}.emplace_back();\n{}  }}\n", type,
                   list, emit(entry));
  }
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw oomplan::Error(fmt::format("cannot read '{}'", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fputs("usage: oomplan_catalog_gen OUT.cpp FILE.json...\n", stderr);
    return 2;
  }
  try {
    std::vector<std::string> origins;
    std::vector<std::string> texts;
    for (int i = 2; i < argc; ++i) {
      const std::string path = argv[i];
      const auto slash = path.find_last_of('/');
      origins.push_back("models/" + (slash == std::string::npos
                                         ? path
                                         : path.substr(slash + 1)));
      texts.push_back(read(path));
    }
    std::vector<oomplan::CatalogFile> files;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      files.push_back({origins[i], texts[i]});
    }
    const oomplan::Catalog catalog = oomplan::assemble_catalog(files);

    std::string out =
        "// Generated by oomplan_catalog_gen from models/*.json: do not edit.\n"
        "#include \"oomplan/model/catalog.hpp\"\n\n"
        "#include <initializer_list>\n"
        "#include <string>\n"
        "#include <string_view>\n"
        "#include <vector>\n\n"
        "namespace oomplan {\n\n"
        "namespace {\n\n"
        "// The aliases, each string built once from its literal (start-up "
        "cost\n"
        "// grows with the catalog: docs/development.md, \"The benchmark\").\n"
        "std::vector<std::string> "
        "names(std::initializer_list<std::string_view> "
        "list) {\n"
        "  std::vector<std::string> out;\n"
        "  out.reserve(list.size());\n"
        "  for (const std::string_view name : list) {\n"
        "    out.emplace_back(name);\n"
        "  }\n"
        "  return out;\n"
        "}\n\n"
        "}  // namespace\n\n"
        "Catalog builtin_catalog() {\n"
        "  Catalog c;\n";
    emit_list(out, "Model", "models", catalog.models, model);
    emit_list(out, "Gpu", "gpus", catalog.gpus, gpu);
    emit_list(out, "Instance", "instances", catalog.instances, instance);
    out += "  return c;\n}\n\n}  // namespace oomplan\n";

    const std::string path = argv[1];
    std::ifstream old(path, std::ios::binary);
    std::ostringstream old_text;
    if (old) {
      old_text << old.rdbuf();
    }
    if (old_text.str() != out) {
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file << out;
      if (!file) {
        throw oomplan::Error(fmt::format("cannot write '{}'", path));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oomplan_catalog_gen: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
