// oomplan's own plan lists: a JSON array (or {"plans": [...]}) of objects,
// each one plan. An entry's keys are the command line's options by their
// flag without dashes ("seq", "lora_rank"), read through the option table
// (setup/options.hpp), plus the entry's own keys in the table below.

#include "launch/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/setup/options.hpp"
#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan::launch {
namespace {

// One key of an entry: as written, as an option name ("lora-rank"), its
// value and its text as the command line would give it.
struct PlanKey {
  const std::string& key;
  const std::string& name;
  const Json& value;
  const std::string& text;
  const std::string& where;  // "plans.json: plans[2]", for messages
};

void plan_model(const PlanKey& k, LaunchPlan& plan) {
  if (!k.value.is_string()) {
    throw Error(
        fmt::format("{}: model: expected a model name or path", k.where));
  }
  plan.model = k.text;
  plan.model_key = k.key;
}

void plan_unused(const PlanKey& k, LaunchPlan& plan) {
  plan.unused_keys.push_back(k.key);
}

void plan_framework(const PlanKey& k, LaunchPlan& plan) {
  const auto names = framework_names();
  if (std::find(names.begin(), names.end(), k.text) == names.end()) {
    throw Error(fmt::format("{}: framework: {} is not a framework; use {}",
                            k.where, echo(k.text), fmt::join(names, ", ")));
  }
  plan.framework = k.text;
}

struct EntryKey {
  std::string_view name;
  void (*read)(const PlanKey& k, LaunchPlan& plan);
};

// The entry's own keys; every other key is an option.
constexpr std::array k_entry_keys = {
    EntryKey{"model", plan_model},         EntryKey{"name", plan_unused},
    EntryKey{"comment", plan_unused},      EntryKey{"label", plan_unused},
    EntryKey{"framework", plan_framework},
};

// nodes: a count; gpus: "NxNAME" also gives the GPU count.
void plan_count(const PlanKey& k, LaunchPlan& plan) {
  if (k.name == "nodes") {
    const auto n = parse_int(k.text, 1, 100'000);
    if (!n) {
      throw Error(
          fmt::format("{}: nodes: expected a whole number from 1 "
                      "to 100000, got {}",
                      k.where, echo(k.text)));
    }
    plan.nodes = static_cast<int>(*n);
    return;
  }
  if (k.name == "gpus") {
    const auto x = k.text.find('x');
    if (x != std::string::npos) {
      if (const auto n =
              parse_int(std::string_view(k.text).substr(0, x), 1, 100'000)) {
        plan.gpus = static_cast<int>(*n);
      }
    }
  }
  plan.options.push_back({fmt::format("--{}", k.name), k.text, k.key});
}

// Any option of the table (options.hpp), by its flag without dashes: a flag
// takes true or false, a valued option the text the command line takes.
void plan_option(const PlanKey& k, LaunchPlan& plan) {
  const OptionRow* row = oomplan::find_option(fmt::format("--{}", k.name));
  if (row == nullptr || row->flag.empty()) {
    plan.unknown_keys.push_back(k.key);
    return;
  }
  if (row->value_name.empty()) {
    if (!k.value.is_boolean()) {
      throw Error(fmt::format("{}: {}: expected true or false, got {}", k.where,
                              k.key, echo_json(k.value)));
    }
    if (k.value.get<bool>()) {
      plan.options.push_back({fmt::format("--{}", k.name), "", k.key});
    }
    return;
  }
  if (k.value.is_boolean()) {
    throw Error(fmt::format(
        "{}: {}: expected a value such as the command line takes, got {}",
        k.where, k.key, k.text));
  }
  plan_count(k, plan);
}

// A scalar as the command line would write it; nullopt for null.
std::optional<std::string> value_text(const Json& v, const std::string& where,
                                      const std::string& key) {
  if (v.is_object() || v.is_array()) {
    throw Error(fmt::format("{}: {}: expected a single value, got {}", where,
                            key, echo_json(v)));
  }
  if (v.is_null()) {
    return std::nullopt;
  }
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_boolean()) {
    return v.get<bool>() ? "true" : "false";
  }
  if (v.is_number_integer()) {
    return json_text(v);
  }
  return number_text(v.get<double>());
}

// "lora_rank", "--lora-rank" and "lora-rank" name the same option.
std::string option_name(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  if (name.rfind("--", 0) == 0) {
    name = name.substr(2);
  }
  return name;
}

LaunchPlan read_entry(const Json& entry, const std::string& origin,
                      const std::string& where) {
  LaunchPlan plan;
  plan.file = origin;
  plan.reader = "plans";
  plan.framework = "plans";
  for (const auto& item : entry.items()) {
    const std::string& key = item.key();
    const auto text = value_text(item.value(), where, key);
    if (!text) {
      continue;
    }
    const std::string name = option_name(key);
    const PlanKey k{key, name, item.value(), *text, where};
    const auto own =
        std::find_if(k_entry_keys.begin(), k_entry_keys.end(),
                     [&](const EntryKey& e) { return e.name == name; });
    if (own != k_entry_keys.end()) {
      own->read(k, plan);
    } else {
      plan_option(k, plan);
    }
  }
  if (plan.framework != "plans") {
    apply_framework_defaults(plan);
  }
  return plan;
}

}  // namespace

std::vector<LaunchPlan> read_plans(const Json& doc, const std::string& origin) {
  const Json& list = doc.is_array() ? doc : doc["plans"];
  if (!list.is_array()) {
    throw Error(
        fmt::format("{}: plans: expected a list of plan objects", origin));
  }
  if (list.empty()) {
    throw Error(
        fmt::format("{}: holds no plans; give a JSON array of objects "
                    "such as {{\"model\": \"llama3-70b\", \"gpus\": "
                    "\"8xH100\", \"mode\": \"full\"}}",
                    origin));
  }
  std::vector<LaunchPlan> plans;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Json& entry = list[i];
    const std::string where = fmt::format("{}: plans[{}]", origin, i);
    if (!entry.is_object()) {
      throw Error(fmt::format("{}: expected an object of options, got {}",
                              where, echo_json(entry)));
    }
    plans.push_back(read_entry(entry, origin, where));
  }
  return plans;
}

}  // namespace oomplan::launch
