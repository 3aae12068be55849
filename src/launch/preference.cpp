// Preference training in the launch readers: the one refusal of the methods
// oomplan does not model, the --objective option, and TRL's loss_type names.
//
// Sources: trl/trainer/dpo_config.py, cpo_config.py, kto_config.py (the
// loss_type values each trainer accepts).

#include "launch/internal.hpp"

#include <fmt/format.h>

#include <array>

namespace oomplan::launch {
namespace {

struct LossObjective {
  std::string_view loss_type;
  std::string_view objective;
};

// DPOConfig.loss_type values hold a reference model (dpo); CPOConfig's
// (CPOTrainer, reference-free: SimPO is its loss_type "simpo") run chosen and
// rejected without one (simpo); KTOConfig's score single completions (kto).
// "sigmoid", "hinge" and "ipo" are both DPO's and CPO's: read as DPO, the
// trainer with the reference.
constexpr std::array k_loss_objectives = {
    LossObjective{"sigmoid", "dpo"},
    LossObjective{"hinge", "dpo"},
    LossObjective{"ipo", "dpo"},
    LossObjective{"exo_pair", "dpo"},
    LossObjective{"nca_pair", "dpo"},
    LossObjective{"robust", "dpo"},
    LossObjective{"bco_pair", "dpo"},
    LossObjective{"sppo_hard", "dpo"},
    LossObjective{"aot", "dpo"},
    LossObjective{"aot_pair", "dpo"},
    LossObjective{"aot_unpaired", "dpo"},
    LossObjective{"apo_zero", "dpo"},
    LossObjective{"apo_down", "dpo"},
    LossObjective{"discopop", "dpo"},
    LossObjective{"sft", "dpo"},
    LossObjective{"simpo", "simpo"},
    LossObjective{"alphapo", "simpo"},
    LossObjective{"kto", "kto"},
    LossObjective{"apo_zero_unpaired", "kto"},
};

}  // namespace

void refuse_method(const KeyReader& keys, std::string_view key,
                   std::string_view method) {
  keys.fail(key, fmt::format("{} training is not modelled (it generates "
                             "during training or holds reward and value "
                             "models); oomplan plans sft and the preference "
                             "objectives dpo, orpo, kto and simpo",
                             echo(method)));
}

void set_objective(LaunchPlan& plan, std::string_view objective,
                   std::string key) {
  if (objective != "sft") {
    set_option(plan, "--objective", std::string(objective), std::move(key));
  }
}

std::string_view trl_loss_objective(std::string_view loss_type) {
  for (const LossObjective& l : k_loss_objectives) {
    if (l.loss_type == loss_type) {
      return l.objective;
    }
  }
  return "";
}

}  // namespace oomplan::launch
