// Hugging Face config.json import: the table of architecture families
// (model_type -> the reader of that family's keys, hf_families.hpp), the
// checkpoint format (quantization_config, torch_dtype), the safetensors
// index, and import_hf_config, which composes them: parse, pick the family,
// read the common keys and the family's keys, validate.

#include "model/hf_families.hpp"
#include "util/json_errors.hpp"

#include "oomplan/model/catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

namespace oomplan {
namespace hf {
namespace {

struct Family {
  std::string_view model_type;
  FamilyReader read;
  // Multimodal wrappers keep the text model's fields under text_config:
  // check_model()'s messages then name "text_config.<field>".
  bool text_config_fields = false;
  // Named in the "unsupported model_type" message (other spellings are not).
  bool listed = true;
};

// Every model_type import_hf_config reads, the listed ones in the order the
// "unsupported" message names them.
constexpr std::array k_families = {
    Family{"llama", read_llama},
    Family{"mistral", read_llama},
    Family{"ministral3", read_llama},
    Family{"mixtral", read_mixtral},
    Family{"qwen2", read_qwen},
    Family{"qwen2_moe", read_qwen_moe},
    Family{"qwen2_vl", read_qwen_vl, true},
    Family{"qwen2_5_vl", read_qwen_vl, true},
    Family{"qwen3", read_qwen},
    Family{"qwen3_moe", read_qwen_moe},
    Family{"qwen3_next", read_qwen3_next},
    Family{"gemma", read_gemma},
    Family{"gemma2", read_gemma2},
    Family{"gemma3", read_gemma3, true},
    Family{"gemma3_text", read_gemma3},
    Family{"phi", read_phi},
    Family{"phi3", read_llama},
    Family{"phimoe", read_phimoe},
    Family{"cohere", read_cohere},
    Family{"cohere2", read_cohere2},
    Family{"olmo2", read_olmo2},
    Family{"olmo3", read_olmo3},
    Family{"exaone4", read_exaone4},
    Family{"falcon", read_falcon},
    Family{"falcon_h1", read_falcon_h1},
    Family{"granite", read_granite},
    Family{"internlm2", read_internlm2},
    Family{"deepseek_v2", read_deepseek},
    Family{"deepseek_v3", read_deepseek},
    Family{"kimi_k2", read_deepseek},
    Family{"glm4_moe", read_glm4_moe},
    Family{"gpt_oss", read_gpt_oss},
    Family{"gpt2", read_gpt2},
    Family{"gpt_bigcode", read_gpt_bigcode},
    Family{"gptj", read_gptj},
    Family{"starcoder2", read_starcoder2},
    Family{"stablelm", read_stablelm},
    Family{"smollm3", read_smollm3},
    Family{"gpt_neox", read_gpt_neox},
    Family{"bloom", read_bloom},
    Family{"llama4", read_llama4, true},
    Family{"mllama", read_mllama, true},
    Family{"mistral3", read_mistral3, true},
    Family{"t5", read_t5},
    Family{"jamba", read_jamba},
    Family{"mamba", read_mamba},
    Family{"mamba2", read_mamba},
    // Falcon's remote-code model_types and Llama 4's text-only config.
    Family{"RefinedWeb", read_falcon, false, false},
    Family{"RefinedWebModel", read_falcon, false, false},
    Family{"llama4_text", read_llama4, false, false},
};

const Family& find_family(const Config& root, std::string_view type) {
  const auto it =
      std::find_if(k_families.begin(), k_families.end(),
                   [&](const Family& f) { return f.model_type == type; });
  if (it != k_families.end()) {
    return *it;
  }
  std::string listed;
  for (const Family& f : k_families) {
    if (f.listed) {
      listed += fmt::format("{}{}", listed.empty() ? "" : ", ", f.model_type);
    }
  }
  root.fail("model_type", fmt::format("unsupported '{}'; supported: {}",
                                      escape_for_message(type), listed));
}

// The family's keys, with checked parameter arithmetic: an overflow is one
// Error naming the file.
void read_family(const Family& family, const Source& source, Model& m) {
  try {
    family.read(source, m);
  } catch (const Overflow&) {
    throw Error(fmt::format(
        "{}: the sizes in this config give more than 10^15 parameters (they "
        "overflow 64-bit arithmetic)",
        escape_for_message(source.root.origin())));
  }
}

// compressed-tensors: the weights' scheme of the first config group decides:
// config_groups.<name>.weights.{num_bits, type}.
Quant compressed_tensors_quant(const Config& q) {
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
    return compressed_tensors_quant(q);
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

json parse_config(std::string_view config_text, std::string_view origin) {
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
  return doc;
}

// Checkpoint format: quantization_config, else torch_dtype (dtype in
// transformers 4.56+).
void read_checkpoint_format(const Config& root, Model& m) {
  if (const auto quant_config = root.child("quantization_config")) {
    m.checkpoint_quant = quant_from_config(*quant_config);
    // gpt-oss's MXFP4 list names its attention and router, which the
    // MXFP4 layout keeps 16-bit already (memory/weights.cpp).
    if (m.checkpoint_quant != Quant::mxfp4) {
      for (const std::string_view key :
           {"modules_to_not_convert", "ignore", "ignored_layers"}) {
        m.unquantized_params += unquantized_params(*quant_config, key, m);
      }
    }
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
}

}  // namespace
}  // namespace hf

Model import_hf_config(std::string_view config_text, std::string_view origin,
                       std::optional<std::string_view> index_text) {
  const hf::json doc = hf::parse_config(config_text, origin);
  const hf::Config root(doc, origin, "");
  const std::string type = root.text("model_type");
  if (type.empty()) {
    root.fail("model_type", "missing");
  }
  Model m;
  m.model_type = type;
  m.hf_id = root.text("_name_or_path");
  m.name = m.hf_id.empty() ? hf::default_name(origin) : m.hf_id;
  // Multimodal wrappers: the text model lives in text_config.
  const auto text_config = root.child("text_config");
  const hf::Family& family = hf::find_family(root, type);
  hf::read_family(family, hf::Source{type, root, text_config}, m);
  const std::string_view text_prefix =
      text_config && family.text_config_fields ? "text_config." : "";
  hf::check_imported(m, origin, text_prefix);
  hf::read_checkpoint_format(root, m);
  if (index_text) {
    m.checkpoint_bytes = hf::index_total_size(*index_text, origin);
    hf::check_imported(m, origin, text_prefix);
  }
  return m;
}

}  // namespace oomplan
