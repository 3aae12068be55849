#include "oomplan/advice/sizing.hpp"

#include "oomplan/plan/plan.hpp"
#include "oomplan/util/error.hpp"

namespace oomplan {

Sizing make_sizing(const Model& model, const std::vector<Gpu>& cards,
                   const Setup& setup, const std::string& model_arg) {
  Sizing sizing;
  sizing.model = &model;
  sizing.setup = setup;
  sizing.model_arg = model_arg;
  sizing.max_gpus = k_sizing_max_gpus;
  SearchScope scope;
  scope.quantize = false;  // the job's own weight format
  scope.offload = false;
  Searcher searcher(model, setup, scope);
  std::string first_problem;
  bool any_valid = false;
  const std::vector<int> counts = gpu_counts(k_sizing_max_gpus);
  for (const Gpu& gpu : cards) {
    if (!gpu.common) {
      continue;
    }
    SizingRow row;
    row.gpu = &gpu;
    if (auto found = searcher.fewest(gpu, counts, Objective::balanced)) {
      any_valid = true;
      row.count = found->setup.total_gpus();
      row.request = found->request;
      row.setup = found->setup;
      row.moves = found->moves;
      row.total_bytes = found->budget.total_bytes();
      row.usable_bytes = found->budget.usable_bytes;
      row.fits = true;
    } else {
      // The user's setup on the most GPUs tried, to show how far off it is.
      Pricing p =
          price(model, gpu, with_gpu_count(setup, counts.back(), model));
      if (p.priced) {
        any_valid = true;
        row.request = p.priced->request;
        row.setup = p.priced->setup;
        row.total_bytes = p.priced->budget.total_bytes();
        row.usable_bytes = p.priced->budget.usable_bytes;
      } else if (first_problem.empty()) {
        first_problem = p.problem;
      }
    }
    sizing.rows.push_back(row);
  }
  if (!any_valid && !first_problem.empty()) {
    throw Error(first_problem);
  }
  return sizing;
}

}  // namespace oomplan
