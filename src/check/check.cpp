#include "oomplan/check/check.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace oomplan {
namespace {

// "--seq 2048", "--fsdp".
std::string option_text(std::string_view flag, std::string_view value) {
  return value.empty() ? std::string(flag) : fmt::format("{} {}", flag, value);
}

// Applies one option that a file (or its framework) states, naming the file
// and the key when the option table rejects the value.
void apply_file_option(Setup& setup, std::string_view where,
                       const LaunchOption& option) {
  try {
    apply_option(setup, option.flag, option.value);
  } catch (const Error& e) {
    const std::string key = option.key.empty() ? option.flag : option.key;
    throw Error(fmt::format("{}: {}: {}", where, key, e.what()));
  }
}

std::string gpus_words(int count) {
  return count == 1 ? "1 GPU" : fmt::format("{} GPUs", count);
}

}  // namespace

CheckVerdict check_verdict(const Budget& budget) {
  if (budget.fits_with_margin()) {
    return CheckVerdict::fits;
  }
  return budget.fits() ? CheckVerdict::low_headroom
                       : CheckVerdict::does_not_fit;
}

std::string_view check_verdict_name(CheckVerdict verdict) {
  switch (verdict) {
    case CheckVerdict::fits:
      return "fits";
    case CheckVerdict::low_headroom:
      return "low headroom";
    case CheckVerdict::does_not_fit:
      return "does not fit";
  }
  return "does not fit";
}

const Fix* CheckRow::first_fix() const {
  if (verdict == CheckVerdict::fits || plan.fixes.empty()) {
    return nullptr;
  }
  return &plan.fixes.front();
}

CheckSetup check_setup(const LaunchPlan& launch, const CheckOptions& options,
                       std::string_view where) {
  if (where.empty()) {
    where = launch.file;
  }
  CheckSetup out;
  Setup& setup = out.setup;
  setup.framework = framework_from_name(launch.framework);
  for (const LaunchOption& option : launch.framework_defaults) {
    apply_file_option(setup, where, option);
  }
  // --mode on the command line takes what the framework does in that mode
  // (a LitGPT config read as finetune_lora, planned as finetune_full).
  const auto mode_of = [](const std::vector<LaunchOption>& list) {
    const auto it =
        std::find_if(list.begin(), list.end(),
                     [](const LaunchOption& o) { return o.flag == "--mode"; });
    return it == list.end() ? std::string() : it->value;
  };
  const auto given_mode =
      std::find_if(options.given.begin(), options.given.end(),
                   [](const auto& g) { return g.first == "--mode"; });
  if (given_mode != options.given.end()) {
    std::string file_mode = mode_of(launch.options);
    if (file_mode.empty()) {
      file_mode = mode_of(launch.framework_defaults);
    }
    for (const LaunchOption& option : framework_mode_changes(
             launch.framework, file_mode, given_mode->second)) {
      apply_file_option(setup, where, option);
    }
  }
  // What the file states, by flag, for the notes below.
  std::map<std::string, const LaunchOption*> stated;
  for (const LaunchOption& option : launch.options) {
    if (option.flag == "--gpus") {
      continue;  // the card: resolved by the caller
    }
    apply_file_option(setup, where, option);
    stated[option.flag] = &option;
  }
  if (launch.nodes) {
    setup.nodes = *launch.nodes;
  }
  if (options.gpus) {
    setup.gpus = *options.gpus;
    if (launch.gpus && *launch.gpus != *options.gpus) {
      // "4 nodes x 8 GPUs" when the file states nodes, else per node.
      const int nodes = launch.nodes.value_or(1);
      const auto layout = [nodes](int gpus) {
        return nodes > 1 ? fmt::format("{} nodes x {}", nodes, gpus_words(gpus))
                         : fmt::format("{} per node", gpus_words(gpus));
      };
      out.notes.push_back(fmt::format(
          "the file launches {}; --gpus {} (command line) wins: planned on {}",
          layout(*launch.gpus), options.gpus_text, layout(*options.gpus)));
    }
  } else if (launch.gpus) {
    setup.gpus = *launch.gpus;
  } else {
    setup.gpus = 1;
    out.notes.push_back(
        "the file states no GPU count: planned on 1 GPU; give --gpus NxNAME "
        "to plan more");
  }
  for (const auto& [flag, value] : options.given) {
    apply_option(setup, flag, value);
    const auto it = stated.find(flag);
    if (it != stated.end() && it->second->value != value) {
      out.notes.push_back(fmt::format(
          "{} (command line) wins over the file's {} ({})",
          option_text(flag, value),
          it->second->key.empty() ? it->second->flag : it->second->key,
          option_text(it->second->flag, it->second->value)));
    }
    if (flag == "--nodes" && launch.nodes &&
        std::to_string(*launch.nodes) != value) {
      out.notes.push_back(
          fmt::format("--nodes {} (command line) wins over the file's {} "
                      "nodes",
                      value, *launch.nodes));
    }
  }
  return out;
}

CheckRow check_plan(const LaunchPlan& launch, const CheckTarget& target,
                    const CheckOptions& options, const std::vector<Gpu>& cards,
                    std::string_view where) {
  if (where.empty()) {
    where = launch.file;
  }
  CheckSetup setup = check_setup(launch, options, where);
  CheckRow row;
  row.file = launch.file;
  row.reader = launch.reader;
  row.framework = launch.framework;
  row.included_files = launch.included_files;
  row.unused_keys = launch.unused_keys;
  row.unknown_keys = launch.unknown_keys;
  row.notes = launch.notes;
  if (!launch.included_files.empty()) {
    // Which files the plan comes from; a path a config names is read
    // relative to that config's folder, as the frameworks open it.
    row.notes.push_back(fmt::format(
        "read with {} (a path a config names is looked up from the working "
        "directory, then beside the config and in the folders above it)",
        fmt::join(launch.included_files, ", ")));
  }
  row.notes.insert(row.notes.end(), target.notes.begin(), target.notes.end());
  row.notes.insert(row.notes.end(), setup.notes.begin(), setup.notes.end());
  try {
    row.plan = make_plan(*target.model, *target.gpu, setup.setup,
                         target.model_arg, advisor(cards));
    row.plan.origin = target.origin;
    if (target.origin.step == ModelStep::hf_cache ||
        target.origin.step == ModelStep::mirror) {
      row.notes.push_back(origin_phrase(*target.model, target.origin));
    }
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
  row.verdict = check_verdict(row.plan.budget);
  if (const auto& vllm = row.plan.budget.vllm; vllm && !vllm->error.empty()) {
    // Within the card, yet no plan: the verdict needs the reason.
    row.notes.push_back(fmt::format("vLLM would not start: {}", vllm->error));
  }
  return row;
}

bool CheckResult::fits() const {
  return std::all_of(rows.begin(), rows.end(), [](const CheckRow& row) {
    return row.verdict == CheckVerdict::fits;
  });
}

CheckResult check_plans(std::vector<LaunchPlan> plans,
                        const CheckResolver& resolve,
                        const CheckOptions& options,
                        const std::vector<Gpu>& cards) {
  CheckResult result;
  std::map<std::string, std::size_t> next_entry;
  for (LaunchPlan& launch : plans) {
    std::optional<std::size_t> entry;
    std::string where = launch.file;
    if (launch.reader == "plans") {
      entry = next_entry[launch.file]++;
      where = fmt::format("{}: plans[{}]", launch.file, *entry);
    }
    const CheckTarget target = resolve(launch, where);
    result.rows.push_back(check_plan(launch, target, options, cards, where));
    result.rows.back().entry = entry;
  }
  return result;
}

}  // namespace oomplan
