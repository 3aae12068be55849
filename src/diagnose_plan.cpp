#include "diagnose_internal.hpp"

#include "oomplan/diagnose.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

// Context mode: what the plan of the job's setup says against what its log
// shows. Only comparisons: the plan comes from memory(), the log's numbers
// from the scanner.

namespace oomplan {

using diag::size;

std::vector<std::string> compare_with_plan(const OomMessage& m,
                                           const Budget& plan) {
  std::vector<std::string> out;
  Bytes total = 0;
  for (std::size_t i = 0; i < plan.count; ++i) {
    total += plan.components[i].bytes;
  }
  if (m.capacity_bytes && plan.capacity_bytes > 0) {
    const Bytes diff = *m.capacity_bytes - plan.capacity_bytes;
    if (std::llabs(diff) * 50 > plan.capacity_bytes) {
      out.push_back(
          fmt::format("the log's GPU has {}, the plan's card {}: check --gpus",
                      size(*m.capacity_bytes), size(plan.capacity_bytes)));
    }
  }
  if (plan.vllm && m.format == OomFormat::vllm) {
    const VllmProfile& v = *plan.vllm;
    if (m.kind == OomKind::vllm_startup_free_memory && m.requested_bytes) {
      out.push_back(fmt::format(
          "the plan requests {} at start-up; the log {} (with {} free)",
          size(v.requested_bytes), size(*m.requested_bytes),
          m.free_bytes ? size(*m.free_bytes) : std::string("?")));
    } else {
      if (m.free_bytes) {
        out.push_back(fmt::format(
            "the plan's KV-cache pool is {}; the log has {} available",
            size(v.kv_cache_bytes), size(*m.free_bytes)));
      }
      if (m.max_seq_len && v.kv_bytes_per_token > 0) {
        out.push_back(fmt::format(
            "the plan needs {} for one {}-token sequence ({} per token)",
            size(v.kv_bytes_per_token * *m.max_seq_len), *m.max_seq_len,
            size(v.kv_bytes_per_token)));
      }
      if (v.max_model_len_fit > 0 &&
          (m.estimated_max_model_len || m.kv_tokens)) {
        out.push_back(fmt::format(
            "the plan fits {} tokens; vLLM in the log {}", v.max_model_len_fit,
            m.estimated_max_model_len ? *m.estimated_max_model_len
                                      : *m.kv_tokens));
      }
    }
    return out;
  }
  if (!m.allocated_bytes && !m.process_bytes) {
    return out;
  }
  const Bytes request = m.requested_bytes.value_or(0);
  std::vector<std::string> shown;
  if (m.allocated_bytes) {
    const Bytes wanted = *m.allocated_bytes + request;
    out.push_back(fmt::format(
        "the job tried to hold {} in tensors ({} allocated + the {} request); "
        "the plan's peak is {} allocated ({}, {} reserved, {} on the device)",
        size(wanted), size(*m.allocated_bytes), size(request),
        size(plan.peak.allocated_bytes), phase_name(plan.peak.phase),
        size(plan.peak.reserved_bytes), size(plan.peak.device_bytes)));
    const Bytes gap = wanted - plan.peak.allocated_bytes;
    if (gap > 0 && plan.count > 0) {
      // The component closest in size to the gap: the likeliest to be
      // underestimated (or a setting that differs from the plan's).
      std::size_t best = 0;
      for (std::size_t i = 1; i < plan.count; ++i) {
        if (std::llabs(plan.components[i].bytes - gap) <
            std::llabs(plan.components[best].bytes - gap)) {
          best = i;
        }
      }
      const Component& c = plan.components[best];
      out.push_back(fmt::format(
          "the log needs {} more than the plan; the nearest component is {} "
          "({}): check the setting behind it",
          size(gap), c.name, size(c.bytes)));
    } else if (gap <= 0) {
      out.push_back(fmt::format(
          "the job failed {} below the plan's peak: the plan expects this "
          "OOM{}",
          size(-gap), total > plan.usable_bytes ? "" : " only near its peak"));
    }
  }
  if (m.process_bytes) {
    out.push_back(fmt::format(
        "this process held {} on the device; the plan's device peak is {}",
        size(*m.process_bytes), size(plan.peak.device_bytes)));
  }
  if (request > 0 && plan.count > 0) {
    for (std::size_t i = 0; i < plan.count; ++i) {
      const Component& c = plan.components[i];
      if (c.bytes > 0 && std::llabs(c.bytes - request) * 10 <= c.bytes) {
        out.push_back(
            fmt::format("the {} request is the size of the plan's {} ({})",
                        size(request), c.name, size(c.bytes)));
        break;
      }
    }
  }
  if (total > plan.usable_bytes) {
    out.push_back(fmt::format("the plan does not fit either: {} > {} usable",
                              size(total), size(plan.usable_bytes)));
  }
  return out;
}

}  // namespace oomplan
