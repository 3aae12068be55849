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

#include "oomplan/advice/search.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/plan/fix.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/setup.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// The ranked fixes for `setup` (as asked; valid) on `gpu`, in group order.
// `cards` are the catalog's GPUs the other-gpus group may propose (the
// common ones of the same vendor). A vLLM plan that starts gets none.
// Deterministic. `prices`: the on-demand USD per GPU-hour of each of `cards`
// (same order, nullopt where unknown; empty: none known). The user's --price
// is the price of the user's card only: another card's cost uses its own
// price from `prices`, or shows none.
std::vector<Fix> advise(const Model& model, const Gpu& gpu, const Setup& setup,
                        const std::vector<Gpu>& cards,
                        const std::vector<std::optional<double>>& prices = {});

// The advisor every command passes to make_plan(): advise() over `cards`.
Advisor advisor(const std::vector<Gpu>& cards,
                std::vector<std::optional<double>> prices = {});

}  // namespace oomplan
