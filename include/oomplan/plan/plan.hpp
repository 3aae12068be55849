#pragma once

// The pipeline of one plan, in one direction:
//   Setup --resolve--> Resolved --check--> memory() --> advisor --> time
// Every command goes through here: `plan` (make_plan), the advisor, sizing
// and `fit` (price), `check` and `diagnose` (make_plan). resolve and check
// are the setup layer's (setup/resolve.hpp), memory() the core's
// (memory/memory.hpp), the time model time/time.hpp's. The advisor sits
// above this layer (it re-prices through price()): make_plan takes it as a
// function, advice/advice.hpp's advisor(cards).

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/plan/fix.hpp"
#include "oomplan/setup/resolve.hpp"
#include "oomplan/setup/setup.hpp"
#include "oomplan/time/time.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace oomplan {

// One setup priced by the core: what was asked, its resolution and budget.
struct Priced {
  Setup request;
  Resolved setup;
  Budget budget;
};

// resolve -> check -> memory. Either `priced` is set, or `problem` says why
// the setup cannot be planned.
struct Pricing {
  std::optional<Priced> priced;
  std::string problem;
};
Pricing price(const Model& model, const Gpu& gpu, const Setup& setup);

// True when `setup` is valid and its plan fits.
bool fits(const Model& model, const Gpu& gpu, const Setup& setup);

// Everything one `oomplan plan` run shows.
struct Plan {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Setup request;   // as asked
  Resolved setup;  // resolved
  Budget budget;
  std::vector<Fix> fixes;
  StepTime time;
  std::string model_arg;  // what the user typed for MODEL (re-run lines)
  ModelOrigin origin;     // how MODEL was resolved (the first line)
};

// The fixes for `setup` (valid, as asked) on `gpu`: advice/advice.hpp's
// advisor(cards) is the one every command passes.
using Advisor =
    std::function<std::vector<Fix>(const Model&, const Gpu&, const Setup&)>;

// The whole pipeline for `setup` on `gpu`. The advisor is asked when the plan
// does not fit or keeps less than k_advise_headroom_share free; without one
// the plan has no fixes. Throws Error with check()'s message when the setup
// is invalid.
Plan make_plan(const Model& model, const Gpu& gpu, const Setup& setup,
               const std::string& model_arg, const Advisor& advisor = {});

}  // namespace oomplan
