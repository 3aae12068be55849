#pragma once

// Rendering: a Plan (plan.hpp) as text, JSON (oomplan.plan/1) or Markdown;
// sizing, fit and the catalog likewise. No arithmetic beyond bytes -> GiB for
// display; the setup line and the JSON `setup` object come from the option
// table (options.hpp).

#include "oomplan/advice/sizing.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/plan/plan.hpp"

#include <string>
#include <vector>

namespace oomplan {

struct RenderOptions {
  bool color = false;
};

std::string render_text(const Plan& plan, const RenderOptions& options);
std::string render_json(const Plan& plan);
std::string render_markdown(const Plan& plan);

// Warning bits -> sentences.
std::vector<std::string> warning_texts(const Plan& plan);

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
std::string render_models_markdown(const Catalog& catalog);
std::string render_gpus_text(const Catalog& catalog);
std::string render_gpus_json(const Catalog& catalog);
std::string render_gpus_markdown(const Catalog& catalog);

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
