#include "oomplan/plan/plan.hpp"

#include "diagnose/internal.hpp"

#include "oomplan/diagnose/diagnose.hpp"
#include "oomplan/setup/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

// Context mode: what the plan of the job's setup says against what its log
// shows. Only comparisons: the plan comes from memory(), the log's numbers
// from the scanner.

namespace oomplan {
namespace {

using diag::size;

// Two capacities differ when they are more than 2 % apart: the same card
// reads a little differently across drivers (a 24 GB card shows 23.58 to
// 23.69 GiB), another card is further off.
bool capacities_differ(Bytes log, Bytes plan) {
  return std::llabs(log - plan) * 50 > plan;
}

// The generic fixes (diagnose/explain.cpp) for knobs the planner prices: in
// context mode the advisor's priced fixes replace them.
constexpr std::array<std::string_view, 10> k_priced_ids = {
    "reduce-batch",    "gradient-checkpointing", "shorter-sequence",
    "8-bit-optimizer", "efficient-attention",    "raise-gpu-memory-utilization",
    "kv-cache-fp8",    "tensor-parallel",        "smaller-profile",
    "quantize-weights"};
// The hint to run context mode, which is what is running.
constexpr std::string_view k_plan_hint_id = "plan-the-setup";

bool priced_by_advisor(const OomFix& fix) {
  return std::find(k_priced_ids.begin(), k_priced_ids.end(), fix.id) !=
         k_priced_ids.end();
}

// The log's vLLM settings and start-up profile against the plan's (the
// message alone is compare_with_plan's).
std::vector<std::string> compare_vllm_context(const OomMessage& m,
                                              const LogContext& ctx,
                                              const Plan& plan) {
  std::vector<std::string> out;
  const VllmProfile& v = *plan.budget.vllm;
  if (!m.capacity_bytes && ctx.vllm_total_bytes &&
      capacities_differ(*ctx.vllm_total_bytes, plan.budget.capacity_bytes)) {
    out.push_back(fmt::format(
        "the log's GPU has {}, the plan's card {}: check --gpus",
        size(*ctx.vllm_total_bytes), size(plan.budget.capacity_bytes)));
  }
  if (m.max_seq_len && *m.max_seq_len != plan.setup.max_model_len) {
    out.push_back(fmt::format(
        "the log's max seq len is {}, the plan's {}: give --max-model-len {}",
        *m.max_seq_len, plan.setup.max_model_len, *m.max_seq_len));
  }
  const std::optional<double> util =
      m.gpu_util ? m.gpu_util : ctx.vllm_gpu_util;
  if (util && std::fabs(*util - plan.setup.gpu_util) > 0.005) {
    out.push_back(fmt::format(
        "the log's gpu_memory_utilization is {}, the plan's {}: give "
        "--gpu-util {}",
        *util, plan.setup.gpu_util, *util));
  }
  if (!m.free_bytes && ctx.vllm_kv_cache_bytes &&
      m.kind != OomKind::vllm_startup_free_memory) {
    out.push_back(fmt::format(
        "the plan's KV-cache pool is {}; the log's start-up profile has {}",
        size(v.kv_cache_bytes), size(*ctx.vllm_kv_cache_bytes)));
  }
  return out;
}

OomFix from_advisor(const Plan& plan, const Fix& fix) {
  OomFix f;
  f.id = fix.id;
  f.title = fix.title;
  const Gpu& gpu = fix.gpu != nullptr ? *fix.gpu : *plan.gpu;
  f.args =
      "oomplan " + plan_args(plan.model_arg, *plan.model, gpu, fix.request);
  f.cost = fix.cost;
  f.group = fix_group_name(fix.group);
  f.total_bytes = fix.total_bytes;
  f.fits = fix.fits;
  for (const LaunchBlock& block : fix.launch) {
    f.launch.push_back((block.file.empty()
                            ? block.framework
                            : block.framework + " " + block.file) +
                       ": " + block.text);
  }
  return f;
}

// vLLM: the plan's start-up profile against the message.
void compare_vllm_message(const OomMessage& m, const VllmProfile& v,
                          std::vector<std::string>& out) {
  if (m.kind == OomKind::vllm_startup_free_memory && m.requested_bytes) {
    out.push_back(fmt::format(
        "the plan requests {} at start-up; the log {} (with {} free)",
        size(v.requested_bytes), size(*m.requested_bytes),
        m.free_bytes ? size(*m.free_bytes) : std::string("?")));
    return;
  }
  if (m.free_bytes) {
    out.push_back(
        fmt::format("the plan's KV-cache pool is {}; the log has {} available",
                    size(v.kv_cache_bytes), size(*m.free_bytes)));
  }
  if (m.max_seq_len && v.kv_bytes_per_token > 0) {
    out.push_back(fmt::format(
        "the plan needs {} for one {}-token sequence ({} per token)",
        size(v.kv_bytes_per_token * *m.max_seq_len), *m.max_seq_len,
        size(v.kv_bytes_per_token)));
  }
  if (v.max_model_len_fit > 0 && (m.estimated_max_model_len || m.kv_tokens)) {
    out.push_back(fmt::format(
        "the plan fits {} tokens; vLLM in the log {}", v.max_model_len_fit,
        m.estimated_max_model_len ? *m.estimated_max_model_len : *m.kv_tokens));
  }
}

// The component closest in size to `gap`: the likeliest to be
// underestimated (or a setting that differs from the plan's).
// REQUIRES: plan.count > 0.
const Component& nearest_component(const Budget& plan, Bytes gap) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < plan.count; ++i) {
    if (std::llabs(plan.components[i].bytes - gap) <
        std::llabs(plan.components[best].bytes - gap)) {
      best = i;
    }
  }
  return plan.components[best];
}

// What the job tried to hold in tensors (allocated + the request) against
// the plan's peak, and where a gap comes from. `total`: the plan's sum.
void compare_allocated(const OomMessage& m, const Budget& plan, Bytes total,
                       std::vector<std::string>& out) {
  const Bytes request = m.requested_bytes.value_or(0);
  const Bytes wanted = *m.allocated_bytes + request;
  out.push_back(fmt::format(
      "the job tried to hold {} in tensors ({} allocated + the {} request); "
      "the plan's peak is {} allocated ({}, {} reserved, {} on the device)",
      size(wanted), size(*m.allocated_bytes), size(request),
      size(plan.peak.allocated_bytes), phase_name(plan.peak.phase),
      size(plan.peak.reserved_bytes), size(plan.peak.device_bytes)));
  const Bytes gap = wanted - plan.peak.allocated_bytes;
  if (gap > 0 && plan.count > 0) {
    const Component& c = nearest_component(plan, gap);
    out.push_back(fmt::format(
        "the log needs {} more than the plan; the nearest component is {} "
        "({}): check the setting behind it",
        size(gap), c.name, size(c.bytes)));
  } else if (gap <= 0) {
    out.push_back(fmt::format(
        "the job failed {} below the plan's peak: the plan expects this OOM{}",
        size(-gap), total > plan.usable_bytes ? "" : " only near its peak"));
  }
}

// The plan's component within 10 % of the failed request's size, if any.
void compare_request(const OomMessage& m, const Budget& plan,
                     std::vector<std::string>& out) {
  const Bytes request = m.requested_bytes.value_or(0);
  if (request <= 0) {
    return;
  }
  for (std::size_t i = 0; i < plan.count; ++i) {
    const Component& c = plan.components[i];
    if (c.bytes > 0 && std::llabs(c.bytes - request) * 10 <= c.bytes) {
      out.push_back(
          fmt::format("the {} request is the size of the plan's {} ({})",
                      size(request), c.name, size(c.bytes)));
      return;
    }
  }
}

}  // namespace

std::vector<std::string> compare_with_plan(const OomMessage& m,
                                           const Budget& plan) {
  std::vector<std::string> out;
  Bytes total = 0;
  for (std::size_t i = 0; i < plan.count; ++i) {
    total += plan.components[i].bytes;
  }
  if (m.capacity_bytes && plan.capacity_bytes > 0 &&
      capacities_differ(*m.capacity_bytes, plan.capacity_bytes)) {
    out.push_back(
        fmt::format("the log's GPU has {}, the plan's card {}: check --gpus",
                    size(*m.capacity_bytes), size(plan.capacity_bytes)));
  }
  if (plan.vllm && m.format == OomFormat::vllm) {
    compare_vllm_message(m, *plan.vllm, out);
    return out;
  }
  if (!m.allocated_bytes && !m.process_bytes) {
    return out;
  }
  if (m.allocated_bytes) {
    compare_allocated(m, plan, total, out);
  }
  if (m.process_bytes) {
    out.push_back(fmt::format(
        "this process held {} on the device; the plan's device peak is {}",
        size(*m.process_bytes), size(plan.peak.device_bytes)));
  }
  compare_request(m, plan, out);
  if (total > plan.usable_bytes) {
    out.push_back(fmt::format("the plan does not fit either: {} > {} usable",
                              size(total), size(plan.usable_bytes)));
  }
  return out;
}

void add_plan_context(Diagnosis& d, const Plan& plan) {
  d.plan = &plan;
  d.plan_evidence.clear();
  if (d.messages.empty()) {
    return;
  }
  const OomMessage& m = d.messages.front();
  d.plan_evidence = compare_with_plan(m, plan.budget);
  if (plan.budget.vllm && m.format == OomFormat::vllm) {
    for (std::string& line : compare_vllm_context(m, d.context, plan)) {
      d.plan_evidence.push_back(std::move(line));
    }
  }

  const bool advised = !plan.fixes.empty();
  std::vector<OomFix> own;
  for (OomFix& fix : d.fixes) {
    if (fix.id != k_plan_hint_id && !(advised && priced_by_advisor(fix))) {
      own.push_back(std::move(fix));
    }
  }
  std::vector<OomFix> advisor;
  advisor.reserve(plan.fixes.size());
  for (const Fix& fix : plan.fixes) {
    advisor.push_back(from_advisor(plan, fix));
  }
  const bool advisor_first =
      d.cause == OomCause::shortfall || d.cause == OomCause::large_allocation;
  std::vector<OomFix>& first = advisor_first ? advisor : own;
  std::vector<OomFix>& second = advisor_first ? own : advisor;
  d.fixes.clear();
  for (auto* list : {&first, &second}) {
    for (OomFix& fix : *list) {
      fix.rank = static_cast<int>(d.fixes.size()) + 1;
      d.fixes.push_back(std::move(fix));
    }
  }
}

}  // namespace oomplan
