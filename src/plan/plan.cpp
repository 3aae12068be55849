#include "oomplan/plan/plan.hpp"

#include "oomplan/util/error.hpp"

#include <utility>

// price() is the only chain resolve -> check -> memory(); make_plan() adds
// the advisor and the time model on top.

namespace oomplan {

Pricing price(const Model& model, const Gpu& gpu, const Setup& setup) {
  Pricing out;
  Priced p{setup, resolve(model, gpu, setup), {}};
  if (auto problem = check(model, gpu, setup, p.setup)) {
    out.problem = std::move(*problem);
    return out;
  }
  p.budget = memory(model, gpu, p.setup);
  out.priced = std::move(p);
  return out;
}

bool fits(const Model& model, const Gpu& gpu, const Setup& setup) {
  const Pricing p = price(model, gpu, setup);
  return p.priced && p.priced->budget.fits();
}

Plan make_plan(const Model& model, const Gpu& gpu, const Setup& setup,
               const std::string& model_arg, const Advisor& advisor) {
  Pricing pricing = price(model, gpu, setup);
  if (!pricing.priced) {
    throw Error(pricing.problem);
  }
  Plan plan;
  plan.model = &model;
  plan.gpu = &gpu;
  plan.request = setup;
  plan.setup = pricing.priced->setup;
  plan.budget = std::move(pricing.priced->budget);
  plan.model_arg = model_arg;
  const bool tight =
      static_cast<double>(plan.budget.headroom_bytes()) <
      k_advise_headroom_share * static_cast<double>(plan.budget.usable_bytes);
  if (advisor && (!plan.budget.fits() || tight)) {
    plan.fixes = advisor(model, gpu, setup);
  }
  plan.time = estimate_time(model, gpu, plan.setup, plan.budget);
  return plan;
}

}  // namespace oomplan
