#pragma once

// Private to the Hugging Face importer: one reader per architecture family.
// Each maps its config class's field names and defaults (transformers
// models/<type>/configuration_<type>.py) onto Model; hf_import.cpp holds the
// table model_type -> family. The core dimensions (hidden size, layers,
// heads, vocabulary, MLP width) are required unless the config class is known
// to leave them out of real files (Gemma 3's text_config); every other field
// takes the config class's default, as transformers would.

#include "model/hf_config.hpp"

#include <optional>
#include <string_view>

namespace oomplan::hf {

// What a family reads: the file's top level, its text_config when it has one
// (read before the family is picked, so a malformed one is reported first),
// and the model_type that picked the family (one reader serves several).
struct Source {
  std::string_view type;
  const Config& root;
  const std::optional<Config>& text_config;
};

using FamilyReader = void (*)(const Source& s, Model& m);

// Text decoders (hf_decoders.cpp).
// The linear parameters of the modules a quantization_config list (`key`:
// modules_to_not_convert, ignore, ignored_layers) leaves unquantized, for
// the model `m` as read so far; 0 without the list.
std::int64_t unquantized_params(const Config& q, std::string_view key,
                                const Model& m);

void read_llama(const Source& s, Model& m);  // llama, mistral, ministral3, phi3
void read_qwen(const Source& s, Model& m);   // qwen2, qwen3
void read_granite(const Source& s, Model& m);      // granite
void read_internlm2(const Source& s, Model& m);    // internlm2
void read_smollm3(const Source& s, Model& m);      // smollm3
void read_stablelm(const Source& s, Model& m);     // stablelm
void read_olmo2(const Source& s, Model& m);        // olmo2
void read_olmo3(const Source& s, Model& m);        // olmo3
void read_exaone4(const Source& s, Model& m);      // exaone4
void read_gemma(const Source& s, Model& m);        // gemma
void read_gemma2(const Source& s, Model& m);       // gemma2
void read_cohere(const Source& s, Model& m);       // cohere
void read_cohere2(const Source& s, Model& m);      // cohere2
void read_mixtral(const Source& s, Model& m);      // mixtral
void read_phimoe(const Source& s, Model& m);       // phimoe
void read_qwen_moe(const Source& s, Model& m);     // qwen2_moe, qwen3_moe
void read_deepseek(const Source& s, Model& m);     // deepseek_v2/v3, kimi_k2
void read_glm4_moe(const Source& s, Model& m);     // glm4_moe
void read_gpt_oss(const Source& s, Model& m);      // gpt_oss
void read_gpt_neox(const Source& s, Model& m);     // gpt_neox
void read_phi(const Source& s, Model& m);          // phi
void read_gpt2(const Source& s, Model& m);         // gpt2
void read_starcoder2(const Source& s, Model& m);   // starcoder2
void read_gpt_bigcode(const Source& s, Model& m);  // gpt_bigcode
void read_gptj(const Source& s, Model& m);         // gptj
void read_bloom(const Source& s, Model& m);        // bloom
void read_falcon(const Source& s, Model& m);       // falcon, RefinedWeb*
void read_t5(const Source& s, Model& m);           // t5

// Linear-attention and state-space hybrids (hf_hybrids.cpp).
void read_qwen3_next(const Source& s, Model& m);  // qwen3_next
void read_mamba(const Source& s, Model& m);       // mamba, mamba2
void read_jamba(const Source& s, Model& m);       // jamba
void read_falcon_h1(const Source& s, Model& m);   // falcon_h1

// Vision-language wrappers and their towers (hf_multimodal.cpp).
void read_qwen_vl(const Source& s, Model& m);   // qwen2_vl, qwen2_5_vl
void read_gemma3(const Source& s, Model& m);    // gemma3, gemma3_text
void read_llama4(const Source& s, Model& m);    // llama4, llama4_text
void read_mllama(const Source& s, Model& m);    // mllama
void read_mistral3(const Source& s, Model& m);  // mistral3

}  // namespace oomplan::hf
