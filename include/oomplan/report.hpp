#pragma once

// Rendering: a Plan as text, JSON (oomplan.plan/1) or Markdown. No arithmetic
// beyond bytes -> GiB for display.

#include "oomplan/advice.hpp"
#include "oomplan/catalog.hpp"
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

// `oomplan MODEL` without --gpus: for each common GPU, the fewest that fit.
struct SizingRow {
  const Gpu* gpu = nullptr;
  int count = 0;  // total GPUs of the smallest setup tried that fits; 0: none
  Setup setup;    // that setup, resolved (the last one tried when none fits)
  Bytes total_bytes = 0;   // per GPU
  Bytes usable_bytes = 0;  // per GPU
  bool fits = false;
};
struct Sizing {
  const Model* model = nullptr;
  Setup setup;            // the user's setup (gpus unset)
  std::string model_arg;  // what the user typed for MODEL
  int max_gpus = 0;       // the largest count tried
  std::vector<SizingRow> rows;
};
std::string render_sizing_text(const Sizing& sizing,
                               const RenderOptions& options);
// {"schema": "oomplan.sizing/1", "model", "max_gpus", "options": [...]}; each
// option has gpu, count (null when none fits), args, total_bytes,
// usable_bytes, capacity_bytes, headroom_bytes and fits.
std::string render_sizing_json(const Sizing& sizing);
std::string render_sizing_markdown(const Sizing& sizing);

// `oomplan models` / `oomplan gpus`: the catalog as a table or as JSON
// ({"schema": "oomplan.models/1", "models": [...]}, {"schema":
// "oomplan.gpus/1", "gpus": [...], "instances": [...]}).
std::string render_models_text(const Catalog& catalog);
std::string render_models_json(const Catalog& catalog);
std::string render_gpus_text(const Catalog& catalog);
std::string render_gpus_json(const Catalog& catalog);

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
