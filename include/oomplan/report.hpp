#pragma once

// Rendering: a Plan as text, JSON (oomplan.plan/1) or Markdown. No arithmetic
// beyond bytes -> GiB for display.

#include "oomplan/advice.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/search.hpp"

#include <string>
#include <vector>

namespace oomplan {

// Everything one `oomplan plan` run shows.
struct Plan {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Setup setup;  // resolved
  Budget budget;
  std::vector<Fix> fixes;
  StepTime time;
  std::string
      model_arg;  // what the user typed for MODEL (for fix command lines)
};

struct RenderOptions {
  bool color = false;
};

std::string render_text(const Plan& plan, const RenderOptions& options);
std::string render_json(const Plan& plan);
std::string render_markdown(const Plan& plan);

// The complete command line after `oomplan` that plans `setup` (DESIGN §2
// fixes[].args).
std::string plan_args(const std::string& model_arg, const Gpu& gpu,
                      const Setup& setup);

// Warning bits -> sentences.
std::vector<std::string> warning_texts(const Plan& plan);

}  // namespace oomplan

namespace oomplan {

// `oomplan fit` output: the Pareto front as text (top N with command lines),
// JSON (oomplan.fit/1) or Markdown. `model_arg` is what the user typed for
// MODEL.
std::string render_fit_text(const FitResult& result, const Model& model,
                            const std::string& model_arg);
std::string render_fit_json(const FitResult& result, const Model& model,
                            const std::string& model_arg);
std::string render_fit_markdown(const FitResult& result, const Model& model,
                                const std::string& model_arg);

}  // namespace oomplan
