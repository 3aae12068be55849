#pragma once

// `--format prometheus` (plan and check): Prometheus alerting rules on the
// DCGM exporter's framebuffer metric (DCGM_FI_DEV_FB_USED, MiB per GPU), with
// thresholds from the plan: the predicted peak per phase and the card's
// usable memory; for vLLM, from the memory it reserves at start-up
// (gpu-memory-utilization x capacity, plus CUDA graphs). docs/plan.md,
// "Alerting rules", says what each rule means. `promtool check rules`
// accepts the output (CI runs it).

#include "oomplan/check/check.hpp"
#include "oomplan/plan/plan.hpp"

#include <string>

namespace oomplan {

std::string render_plan_prometheus(const Plan& plan);
// One rule group per plan, named by its file (and entry).
std::string render_check_prometheus(const CheckResult& result);

}  // namespace oomplan
