// LoRA target module names (PEFT target_modules): what each model family's
// modeling file calls the projections oomplan's --lora-targets name, for the
// readers (a name -> the projections it covers) and the writers (the
// projections -> the names this model answers to). PEFT matches a name
// against the end of a module path (peft/tuners/tuners_utils.py
// check_target_module_exists), so "dense" is GPT-NeoX's attention.dense and
// not its mlp.dense_h_to_4h.

#include "launch/internal.hpp"

#include "oomplan/setup/setup.hpp"

#include <algorithm>
#include <array>
#include <span>

namespace oomplan::launch {
namespace {

constexpr unsigned k_qkv = k_lora_q | k_lora_k | k_lora_v;

// transformers' Llama layout and every family that copies its names.
constexpr std::array<LoraModule, 7> k_llama = {{
    {"q_proj", k_lora_q},
    {"k_proj", k_lora_k},
    {"v_proj", k_lora_v},
    {"o_proj", k_lora_o},
    {"gate_proj", k_lora_gate},
    {"up_proj", k_lora_up},
    {"down_proj", k_lora_down},
}};
// modeling_phi3.py: Phi3Attention.qkv_proj, Phi3MLP.gate_up_proj.
constexpr std::array<LoraModule, 4> k_phi3 = {{
    {"qkv_proj", k_qkv},
    {"o_proj", k_lora_o},
    {"gate_up_proj", k_lora_gate | k_lora_up},
    {"down_proj", k_lora_down},
}};
// modeling_phi.py: PhiAttention.dense, PhiMLP.fc1/fc2 (no gate).
constexpr std::array<LoraModule, 6> k_phi = {{
    {"q_proj", k_lora_q},
    {"k_proj", k_lora_k},
    {"v_proj", k_lora_v},
    {"dense", k_lora_o},
    {"fc1", k_lora_up},
    {"fc2", k_lora_down},
}};
// modeling_internlm2.py: InternLM2Attention.wqkv/wo, InternLM2MLP w1 (gate),
// w3 (up), w2 (down).
constexpr std::array<LoraModule, 5> k_internlm2 = {{
    {"wqkv", k_qkv},
    {"wo", k_lora_o},
    {"w1", k_lora_gate},
    {"w3", k_lora_up},
    {"w2", k_lora_down},
}};
// modeling_gpt_neox.py, modeling_falcon.py, modeling_bloom.py.
constexpr std::array<LoraModule, 4> k_neox = {{
    {"query_key_value", k_qkv},
    {"dense", k_lora_o},
    {"dense_h_to_4h", k_lora_up},
    {"dense_4h_to_h", k_lora_down},
}};
// modeling_gptj.py: GPTJAttention.out_proj, GPTJMLP.fc_in/fc_out.
constexpr std::array<LoraModule, 6> k_gptj = {{
    {"q_proj", k_lora_q},
    {"k_proj", k_lora_k},
    {"v_proj", k_lora_v},
    {"out_proj", k_lora_o},
    {"fc_in", k_lora_up},
    {"fc_out", k_lora_down},
}};
// modeling_starcoder2.py: Llama attention, Starcoder2MLP.c_fc/c_proj.
constexpr std::array<LoraModule, 6> k_starcoder2 = {{
    {"q_proj", k_lora_q},
    {"k_proj", k_lora_k},
    {"v_proj", k_lora_v},
    {"o_proj", k_lora_o},
    {"c_fc", k_lora_up},
    {"c_proj", k_lora_down},
}};
// modeling_gpt2.py, modeling_gpt_bigcode.py: attn.c_attn, and c_proj names
// both the attention output and the MLP's down projection.
constexpr std::array<LoraModule, 3> k_gpt2 = {{
    {"c_attn", k_qkv},
    {"c_proj", k_lora_o | k_lora_down},
    {"c_fc", k_lora_up},
}};
// torchtune's names (lora_attn_modules, and w1/w2/w3 as InternLM2 has them).
constexpr std::array<LoraModule, 4> k_torchtune = {{
    {"output_proj", k_lora_o},
    {"q", k_lora_q},
    {"k", k_lora_k},
    {"v", k_lora_v},
}};

}  // namespace

std::span<const LoraModule> lora_modules_of(std::string_view model_type) {
  if (model_type == "phi3") {
    return k_phi3;
  }
  if (model_type == "phi") {
    return k_phi;
  }
  if (model_type == "internlm2") {
    return k_internlm2;
  }
  if (model_type == "gpt_neox" || model_type == "falcon" ||
      model_type == "bloom") {
    return k_neox;
  }
  if (model_type == "gptj") {
    return k_gptj;
  }
  if (model_type == "starcoder2") {
    return k_starcoder2;
  }
  if (model_type == "gpt2" || model_type == "gpt_bigcode") {
    return k_gpt2;
  }
  return k_llama;
}

unsigned lora_module_targets(std::string_view name) {
  // GPT-2's c_proj (attention and MLP) is read before StarCoder2's (MLP
  // only): a file that names it adapts at least what it trains.
  for (const std::span<const LoraModule> family :
       {std::span<const LoraModule>(k_llama),
        std::span<const LoraModule>(k_phi3), std::span<const LoraModule>(k_phi),
        std::span<const LoraModule>(k_internlm2),
        std::span<const LoraModule>(k_neox),
        std::span<const LoraModule>(k_gptj),
        std::span<const LoraModule>(k_gpt2),
        std::span<const LoraModule>(k_starcoder2),
        std::span<const LoraModule>(k_torchtune)}) {
    const auto it =
        std::find_if(family.begin(), family.end(),
                     [&](const LoraModule& m) { return m.name == name; });
    if (it != family.end()) {
      return it->targets;
    }
  }
  return 0;
}

}  // namespace oomplan::launch
