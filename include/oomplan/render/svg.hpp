#pragma once

// Pictures: a plan, a sizing or a fit front as one standalone SVG 1.1
// document (no scripts, no external references, no dependency). Rendering
// only, like report.hpp: every number is formatted as the text report formats
// it (GiB with two decimals, shares with one), so the picture and the text
// agree to the digit. Deterministic: the same input gives the same bytes.

#include "oomplan/advice/search.hpp"
#include "oomplan/advice/sizing.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/plan/plan.hpp"

#include <string>
#include <string_view>

namespace oomplan {

// The most loaded GPU's budget as a stacked bar against the card's capacity:
// one coloured segment per component, the usable line, the headroom (or the
// overshoot), the verdict, the peak statistics and the warnings. With
// training, also the device memory at each moment of one step (forward,
// backward, optimizer step; Budget::moments) with the peak marked.
// REQUIRES: plan.model and plan.gpu set (make_plan does).
std::string render_plan_svg(const Plan& plan);

// `oomplan MODEL` without --gpus: one bar per common GPU type, per-GPU bytes
// against that card's usable memory. REQUIRES: sizing.model set.
std::string render_sizing_svg(const Sizing& sizing);

// `oomplan fit`: the Pareto front as total GPUs (x, powers of two) against
// the estimated time per step or per output token (y, logarithmic), each
// plan coloured by its headroom as a share of the card, then the plans as a
// list. `model_arg` is what the user typed for MODEL (the points' tooltips
// carry each plan's command line).
std::string render_fit_svg(const FitResult& result, const Model& model,
                           const std::string& model_arg);

// `text` as XML character data or attribute value: & < > " ' escaped;
// control characters (other than tab and newline) and bytes that are not
// valid UTF-8 become U+FFFD, so the document stays well-formed whatever a
// config file named its model.
std::string xml_escape(std::string_view text);

}  // namespace oomplan
