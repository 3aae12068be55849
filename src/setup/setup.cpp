#include "oomplan/setup/setup.hpp"

#include <array>
#include <cstddef>
#include <string>

namespace oomplan {
namespace {

// Names indexed by enum value: one table per enum serves parsing, help and
// JSON.
constexpr std::array k_modes = {
    std::string_view{"infer"}, std::string_view{"full"},
    std::string_view{"lora"}, std::string_view{"qlora"}};
constexpr std::array k_engines = {std::string_view{"hf"},
                                  std::string_view{"vllm"}};
constexpr std::array k_offloads = {
    std::string_view{"none"}, std::string_view{"optimizer"},
    std::string_view{"params"}, std::string_view{"all"}};
constexpr std::array k_checkpointings = {
    std::string_view{"none"},    std::string_view{"selective"},
    std::string_view{"every-N"}, std::string_view{"op"},
    std::string_view{"full"},    std::string_view{"ds-partition"},
    std::string_view{"ds-cpu"}};
constexpr std::array k_attns = {std::string_view{"eager"},
                                std::string_view{"sdpa"},
                                std::string_view{"flash"}};
constexpr std::array k_precisions = {std::string_view{"mixed"},
                                     std::string_view{"pure"},
                                     std::string_view{"amp"}};
constexpr std::array k_optimizers = {
    std::string_view{"adamw"},       std::string_view{"adamw-8bit"},
    std::string_view{"paged-adamw"}, std::string_view{"paged-adamw-8bit"},
    std::string_view{"sgd"},         std::string_view{"adafactor"}};
constexpr std::array k_losses = {
    std::string_view{"full"}, std::string_view{"chunked"},
    std::string_view{"upcast"}, std::string_view{"upcast-shift"},
    std::string_view{"fp32-shift"}};
constexpr std::array k_objectives = {
    std::string_view{"sft"}, std::string_view{"dpo"}, std::string_view{"orpo"},
    std::string_view{"kto"}, std::string_view{"simpo"}};
constexpr std::array k_frameworks = {
    std::string_view{"vllm"},       std::string_view{"deepspeed"},
    std::string_view{"hf-trainer"}, std::string_view{"trl"},
    std::string_view{"accelerate"}, std::string_view{"axolotl"},
    std::string_view{"torchtune"},  std::string_view{"llama-factory"},
    std::string_view{"megatron"},   std::string_view{"torchtitan"},
    std::string_view{"generate"},   std::string_view{"litgpt"}};
constexpr std::array k_gptq_kernels = {
    std::string_view{"none"},      std::string_view{"exllama"},
    std::string_view{"exllamav2"}, std::string_view{"marlin"},
    std::string_view{"cuda-old"},  std::string_view{"torch"},
    std::string_view{"triton"}};
constexpr std::array k_eras = {std::string_view{"v0"},
                               std::string_view{"v1-early"},
                               std::string_view{"current"}};

template <std::size_t N, typename Enum>
std::string_view name_of(const std::array<std::string_view, N>& names,
                         Enum value) {
  return names.at(static_cast<std::size_t>(value));
}

template <typename Enum, std::size_t N>
Enum value_of(const std::array<std::string_view, N>& names,
              std::string_view name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) {
      return static_cast<Enum>(i);
    }
  }
  return static_cast<Enum>(0);
}

template <std::size_t N>
std::vector<std::string_view> all_of(
    const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

struct TargetName {
  std::string_view name;
  unsigned bit;
};
constexpr std::array k_targets = {
    TargetName{"q", k_lora_q},       TargetName{"k", k_lora_k},
    TargetName{"v", k_lora_v},       TargetName{"o", k_lora_o},
    TargetName{"gate", k_lora_gate}, TargetName{"up", k_lora_up},
    TargetName{"down", k_lora_down},
};

}  // namespace

std::string_view mode_name(Mode mode) {
  return name_of(k_modes, mode);
}
std::string_view framework_name(Framework framework) {
  return name_of(k_frameworks, framework);
}
std::optional<Framework> framework_from_name(std::string_view name) {
  for (std::size_t i = 0; i < k_frameworks.size(); ++i) {
    if (k_frameworks[i] == name) {
      return static_cast<Framework>(i);
    }
  }
  return std::nullopt;
}
Framework default_framework(Mode mode, Engine engine) {
  if (engine == Engine::vllm) {
    return Framework::vllm;
  }
  return mode == Mode::infer ? Framework::generate : Framework::hf_trainer;
}
std::string_view engine_name(Engine engine) {
  return name_of(k_engines, engine);
}
std::string_view offload_name(Offload offload) {
  return name_of(k_offloads, offload);
}
std::string_view checkpointing_name(Checkpointing c) {
  return name_of(k_checkpointings, c);
}
std::string checkpointing_text(Checkpointing c, int every) {
  if (c == Checkpointing::every) {
    return "every-" + std::to_string(every);
  }
  return std::string(checkpointing_name(c));
}
std::string_view attn_name(Attn attn) {
  return name_of(k_attns, attn);
}
std::string_view precision_name(Precision precision) {
  return name_of(k_precisions, precision);
}
std::string_view optimizer_name(Optimizer optimizer) {
  return name_of(k_optimizers, optimizer);
}
std::string_view loss_name(Loss loss) {
  return name_of(k_losses, loss);
}
std::string_view objective_name(TrainObjective objective) {
  return name_of(k_objectives, objective);
}
std::string_view gptq_kernel_name(GptqKernel kernel) {
  return name_of(k_gptq_kernels, kernel);
}
std::string_view vllm_era_name(VllmEra era) {
  return name_of(k_eras, era);
}

std::vector<std::string_view> mode_names() {
  return all_of(k_modes);
}
std::vector<std::string_view> engine_names() {
  return all_of(k_engines);
}
std::vector<std::string_view> offload_names() {
  return all_of(k_offloads);
}
std::vector<std::string_view> checkpointing_names() {
  return all_of(k_checkpointings);
}
std::vector<std::string_view> attn_names() {
  return all_of(k_attns);
}
std::vector<std::string_view> precision_names() {
  return all_of(k_precisions);
}
std::vector<std::string_view> optimizer_names() {
  return all_of(k_optimizers);
}
std::vector<std::string_view> loss_names() {
  return all_of(k_losses);
}
std::vector<std::string_view> objective_names() {
  return all_of(k_objectives);
}

Mode mode_from_name(std::string_view name) {
  return value_of<Mode>(k_modes, name);
}
Engine engine_from_name(std::string_view name) {
  return value_of<Engine>(k_engines, name);
}
Offload offload_from_name(std::string_view name) {
  return value_of<Offload>(k_offloads, name);
}
Checkpointing checkpointing_from_name(std::string_view name) {
  return value_of<Checkpointing>(k_checkpointings, name);
}
Attn attn_from_name(std::string_view name) {
  return value_of<Attn>(k_attns, name);
}
Precision precision_from_name(std::string_view name) {
  return value_of<Precision>(k_precisions, name);
}
Optimizer optimizer_from_name(std::string_view name) {
  return value_of<Optimizer>(k_optimizers, name);
}
Loss loss_from_name(std::string_view name) {
  return value_of<Loss>(k_losses, name);
}
TrainObjective objective_from_name(std::string_view name) {
  return value_of<TrainObjective>(k_objectives, name);
}

unsigned lora_targets_from_text(std::string_view text) {
  if (text == "qv") {
    return k_lora_q | k_lora_v;
  }
  if (text == "attn") {
    return k_lora_attn;
  }
  if (text == "all") {
    return k_lora_all;
  }
  unsigned targets = 0;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto word = text.substr(0, comma);
    bool known = false;
    for (const auto& target : k_targets) {
      if (target.name == word) {
        targets |= target.bit;
        known = true;
      }
    }
    if (!known) {
      return 0;
    }
    text = comma == std::string_view::npos ? std::string_view{}
                                           : text.substr(comma + 1);
  }
  return targets;
}

std::vector<std::string_view> lora_target_names() {
  std::vector<std::string_view> names;
  for (const auto& target : k_targets) {
    names.push_back(target.name);
  }
  return names;
}

std::string lora_targets_text(unsigned targets) {
  if (targets == (k_lora_q | k_lora_v)) {
    return "qv";
  }
  if (targets == k_lora_attn) {
    return "attn";
  }
  if (targets == k_lora_all) {
    return "all";
  }
  std::string text;
  for (const auto& target : k_targets) {
    if ((targets & target.bit) != 0) {
      if (!text.empty()) {
        text += ',';
      }
      text += target.name;
    }
  }
  return text;
}

std::optional<VllmEra> vllm_era_from_text(std::string_view text) {
  // "X.Y" or "X.Y.Z"; only the major and minor numbers matter.
  const auto release = release_from_text(text);
  if (!release) {
    return std::nullopt;
  }
  return vllm_era_of(*release);
}

VllmEra vllm_era_of(VllmVersion version) {
  if (version < VllmVersion{0, 7, 0}) {
    return VllmEra::v0;
  }
  if (version < VllmVersion{0, 11, 0}) {
    return VllmEra::v1_early;
  }
  return VllmEra::current;
}

VllmVersion vllm_era_release(VllmEra era) {
  switch (era) {
    case VllmEra::v0:
      return VllmVersion{0, 6, k_vllm_any_patch};
    case VllmEra::v1_early:
      return VllmVersion{0, 10, k_vllm_any_patch};
    case VllmEra::current:
      break;
  }
  return k_vllm_default_version;
}

std::string_view vllm_era_version(VllmEra era) {
  switch (era) {
    case VllmEra::v0:
      return "0.6";
    case VllmEra::v1_early:
      return "0.10";
    case VllmEra::current:
      break;
  }
  return "";
}

}  // namespace oomplan
