#pragma once

// `oomplan check` (DESIGN §2, schema oomplan.check/1): each launch plan
// (launch.hpp) becomes a setup and goes through the plan pipeline; the gate
// passes only when every plan fits with the required headroom.
//
// Precedence, lowest first: oomplan's defaults < the framework's defaults
// (LaunchPlan::framework_defaults) < what the file states
// (LaunchPlan::options) < options given explicitly on the command line.
// GPUs per node: an explicit count (--gpus NxNAME) wins over the file's
// (a note says so when they differ); --gpus NAME names the card only, and the
// file's count is planned (1 when the file states none).
//
// Pure: the CLI reads the files, resolves the model and the card, and hands
// them in; nothing here touches a file.

#include "oomplan/launch/launch.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/setup.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomplan {

// What the command line gives every plan of one `oomplan check` call.
struct CheckOptions {
  // The setup options given explicitly, as (flag, value) in option-table
  // order ("" for a switch): they win over every file.
  std::vector<std::pair<std::string, std::string>> given;
  // The GPU count of --gpus NxNAME or of an instance name; nullopt for
  // --gpus NAME or no --gpus (then the file's count is planned).
  std::optional<int> gpus;
  std::string gpus_text;  // --gpus as typed ("8xH100"), for the notes
};

// The model and card one plan runs on, as the CLI resolved them.
struct CheckTarget {
  const Model* model = nullptr;
  // What resolved: the file's model, one of its aliases, or --model; the
  // re-run command lines start with it.
  std::string model_arg;
  ModelOrigin origin;  // how model_arg resolved (the row's plan carries it)
  const Gpu* gpu = nullptr;
  std::vector<std::string> notes;  // how the CLI chose them
};

// How a plan stands against the gate.
enum class CheckVerdict {
  fits,          // fits and keeps the required headroom (--min-headroom)
  low_headroom,  // fits, with less free than the required headroom
  does_not_fit,
};
CheckVerdict check_verdict(const Budget& budget);
std::string_view check_verdict_name(CheckVerdict verdict);  // "fits", ...

// One planned launch plan: the file's facts and the plan of its setup.
struct CheckRow {
  std::string file;    // LaunchPlan::file
  std::string reader;  // LaunchPlan::reader
  std::string framework;
  std::vector<std::string> included_files;
  std::vector<std::string> unused_keys;
  std::vector<std::string> unknown_keys;
  // The reader's notes, then the CLI's (model, card), then the ones the
  // precedence rules add ("--seq 2048 (command line) wins over ...").
  std::vector<std::string> notes;
  // Index among the plans of its file when the file holds a plan list
  // (reader "plans"); nullopt otherwise.
  std::optional<std::size_t> entry;
  Plan plan;
  CheckVerdict verdict = CheckVerdict::does_not_fit;
  // The advisor's first fix when the plan does not pass; nullptr when it
  // passes or the advisor found none. Points into plan.fixes.
  const Fix* first_fix() const;
};

// The setup of `launch` under the precedence above, with GPUs per node and
// nodes filled in, plus the notes the precedence adds. A "--gpus" entry in
// launch.options (a plans file's card) is left to the caller, which resolves
// the card. Throws Error "<where>: <key>: <problem>" for a file value the
// option table rejects; `where` is the file ("a.yaml", "plans.json:
// plans[1]"), launch.file when empty.
struct CheckSetup {
  Setup setup;
  std::vector<std::string> notes;
};
CheckSetup check_setup(const LaunchPlan& launch, const CheckOptions& options,
                       std::string_view where = {});

// check_setup, then the plan pipeline (make_plan) on `target`; `cards` are
// the GPUs the advisor may propose. Throws Error naming `where` when the
// setup is invalid for this model and card.
CheckRow check_plan(const LaunchPlan& launch, const CheckTarget& target,
                    const CheckOptions& options, const std::vector<Gpu>& cards,
                    std::string_view where = {});

// Every row of one `oomplan check` call, in file order.
struct CheckResult {
  std::vector<CheckRow> rows;
  // True only when every plan fits with the required headroom.
  bool fits() const;
};

// Resolves the model and card of one plan (the CLI: catalog names, local
// config.json files, --model, --gpus). It may fill launch.gpus (a plans
// file's instance name states a count). `where` names the plan in messages:
// the file, or "plans.json: plans[1]" for an entry of a plan list. Throws
// Error naming `where`.
using CheckResolver =
    std::function<CheckTarget(LaunchPlan& launch, const std::string& where)>;

// All of `plans` (read_launch_files' order): each resolved, then planned by
// check_plan, with CheckRow::entry numbered for plan lists.
CheckResult check_plans(std::vector<LaunchPlan> plans,
                        const CheckResolver& resolve,
                        const CheckOptions& options,
                        const std::vector<Gpu>& cards);

}  // namespace oomplan
