#pragma once

// A fix as data: what the advisor (advice/advice.hpp) proposes for a plan
// that does not fit, and what a Plan carries to the renderers. Only the types
// live here, so that a plan can hold its fixes while the advisor, which
// re-prices through the plan pipeline, sits above it.

#include "oomplan/model/gpu.hpp"
#include "oomplan/setup/setup.hpp"
#include "oomplan/util/units.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// How much a move risks the model's accuracy.
enum class Risk {
  none,
  low,       // 8-bit optimizer states, fp8 KV, 8-bit weights, pure bf16
  moderate,  // 4-bit weights
};
std::string_view risk_name(Risk risk);  // "none", "low", "moderate"

// switch_framework: the same cards and job on another framework or engine
// that expresses moves the user's cannot (advice/capability.hpp); listed
// after the same-hardware fixes, or first when they cost far more.
enum class FixGroup {
  same_hardware,
  switch_framework,
  more_gpus,
  other_gpus,
  change_job
};
std::string_view fix_group_name(FixGroup group);  // "same-hardware", ...

// The settings one framework needs for a fix, ready to copy, written by the
// launch writers (launch/launch.hpp write_launch) from the fix's resolved
// setup: `framework` names the stack ("DeepSpeed", "HF Trainer", "TRL",
// "accelerate", "vLLM", "transformers", "torchrun", "environment", ...).
struct LaunchBlock {
  std::string framework;
  std::string text;
  // The file `text` is, as a launch command names it ("ds_config.json",
  // "train_args.json", "accelerate_config.yaml"); empty for a command line
  // or an environment variable. `oomplan check` reads the files back.
  std::string file;
};

struct Fix {
  int rank = 0;    // 1 = best
  std::string id;  // the moves' ids joined by "+", e.g.
                   // "zero-stage+checkpointing-full"; or "more-gpus",
                   // "other-gpus", "shorter-seq", "lora", ...
  FixGroup group = FixGroup::same_hardware;
  std::string title;         // one line for people
  Setup request;             // the fixed setup, as the user would ask for it
  Resolved setup;            // and resolved
  const Gpu* gpu = nullptr;  // its card; points into advise()'s gpu or cards
  Bytes total_bytes = 0;     // the pipeline's total for `request` on `gpu`
  bool fits = false;         // fits with the margin
  Bytes saves_bytes = 0;     // the plan's total - total_bytes
  Bytes host_bytes = 0;      // CPU RAM per node it needs (offload)
  std::optional<Bytes> host_capacity_bytes;  // the node's, when known
  double step_factor = 1.0;  // time per token (or step) relative to the plan
  Risk risk = Risk::none;
  std::string cost;  // in words, each clause once: time, host RAM,
                     // accuracy risk, GPUs and money, what changes for the job
  std::vector<LaunchBlock> launch;  // one block per framework, never repeated
};

// Fixes are listed when the plan does not fit or keeps less than this share
// of the card free (a longer prompt or fragmentation would then OOM).
inline constexpr double k_advise_headroom_share = 0.10;

}  // namespace oomplan
