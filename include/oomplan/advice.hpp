#pragma once

// The advisor (DESIGN §3). When a plan does not fit with its margin, or keeps
// less than k_advise_headroom_share of the card free, it proposes the changes
// an expert would make, each found by the search (search.hpp) and priced by
// the plan pipeline, in four groups and in this order:
//   same-hardware  the same cards and the same job: the cheapest minimal set
//                  of moves that fits with the margin, then the alternatives
//                  that trade differently (faster, or less accuracy risk);
//   more-gpus      the same job on the fewest more of the same cards;
//   other-gpus     the same job on other cards, the common ones first;
//   change-job     a shorter sequence or context, LoRA or QLoRA instead of
//                  full fine-tuning, a smaller global batch, fewer concurrent
//                  sequences: each says that it changes the job.

#include "oomplan/gpu.hpp"
#include "oomplan/model.hpp"
#include "oomplan/search.hpp"
#include "oomplan/setup.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

enum class FixGroup { same_hardware, more_gpus, other_gpus, change_job };
std::string_view fix_group_name(FixGroup group);  // "same-hardware", ...

// The settings one framework needs for a fix, ready to copy: `framework` is
// "DeepSpeed", "accelerate FSDP", "transformers", "torchtune", "Megatron",
// "torchrun", "vLLM" or "environment".
struct LaunchBlock {
  std::string framework;
  std::string text;
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

// The ranked fixes for `setup` (as asked; valid) on `gpu`, in group order.
// `cards` are the catalog's GPUs the other-gpus group may propose (the
// common ones of the same vendor). A vLLM plan that starts gets none.
// Deterministic.
std::vector<Fix> advise(const Model& model, const Gpu& gpu, const Setup& setup,
                        const std::vector<Gpu>& cards);

}  // namespace oomplan
