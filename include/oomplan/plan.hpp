#pragma once

// The pipeline of one plan, in one direction:
//   Setup --resolve--> Resolved --check--> memory() --> advise --> time
// Every command goes through here: `plan` (make_plan), sizing without --gpus
// (make_sizing), the advisor and `fit` (price), and the readers still to come
// (launch configs, OOM logs). Nothing else chains these steps.

#include "oomplan/advice.hpp"
#include "oomplan/gpu.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/model.hpp"
#include "oomplan/search.hpp"
#include "oomplan/setup.hpp"
#include "oomplan/time.hpp"

#include <optional>
#include <string>
#include <vector>

namespace oomplan {

// Fills every default of `setup` for `model` on `gpu`: tp, quant, KV dtype,
// ZeRO stage, max-model-len, the vLLM scheduler budget. Pure and total: an
// invalid setup resolves to something check() rejects.
Resolved resolve(const Model& model, const Gpu& gpu, const Setup& setup);
// resolve(...).dp() without the rest of resolve (the search asks it for
// every setup it builds).
int resolved_dp(const Setup& setup);

// The first problem with `setup` for `model` on `gpu`, as the one-line
// message the CLI prints ("--tp 3 does not divide the 64 attention heads of
// llama-3-70b; valid: 1, 2, 4, 8, 16, 32, 64"); nullopt when the plan can be
// priced. The only validation of a setup: values a row of the option table
// parsed are already within their own bounds.
std::optional<std::string> check(const Model& model, const Gpu& gpu,
                                 const Setup& setup);

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
};

// The whole pipeline for `setup` on `gpu`; `cards` are the catalog's GPUs the
// advisor may propose. Throws Error with check()'s message when the setup is
// invalid.
Plan make_plan(const Model& model, const Gpu& gpu, const Setup& setup,
               const std::vector<Gpu>& cards, const std::string& model_arg);

// `oomplan MODEL` without --gpus: for each common GPU, the fewest that fit
// with the cheapest setup (the search's free and compute knobs: no weight
// quantization, no offload).
struct SizingRow {
  const Gpu* gpu = nullptr;
  int count = 0;   // total GPUs of the smallest setup that fits; 0: none
  Setup request;   // that setup as asked (the user's on the most GPUs tried
  Resolved setup;  // when none fits), and resolved
  std::vector<Move> moves;  // what the search changed
  Bytes total_bytes = 0;    // per GPU
  Bytes usable_bytes = 0;   // per GPU
  bool fits = false;
};
struct Sizing {
  const Model* model = nullptr;
  Setup setup;            // the user's setup (gpus unset)
  std::string model_arg;  // what the user typed for MODEL
  int max_gpus = 0;       // the largest count tried
  std::vector<SizingRow> rows;
};

// Sizes `setup` on every common card of `cards`. Throws Error with the first
// problem when no layout of any card is valid.
Sizing make_sizing(const Model& model, const std::vector<Gpu>& cards,
                   const Setup& setup, const std::string& model_arg);

// The command line after `oomplan` that plans `setup` for `model` on `gpu`
// again (DESIGN §2 fixes[].argv): MODEL, --gpus NxNAME, then every option the
// table prints, in table order. plan_args joins it for a POSIX shell.
std::vector<std::string> plan_argv(const std::string& model_arg,
                                   const Model& model, const Gpu& gpu,
                                   const Setup& setup);
std::string plan_args(const std::string& model_arg, const Model& model,
                      const Gpu& gpu, const Setup& setup);

// Quotes `word` for a POSIX shell when it holds anything but safe characters.
std::string shell_word(const std::string& word);

}  // namespace oomplan
