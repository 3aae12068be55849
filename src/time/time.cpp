// The time and cost model (issue 4 §2). Roofline arithmetic, not a simulator:
// compute time from FLOPs at a stated MFU, decode time from the bytes every
// step must read, collectives from ring volumes over the slowest link they
// cross. The constants next to each term are the assumptions; docs/time.md
// states them. This file turns a step's time into throughput and cost.

#include "oomplan/time/time.hpp"

#include "time/internal.hpp"

#include <algorithm>
#include <cstdint>

namespace oomplan {
namespace {

StepTime finish(StepTime t, const Resolved& setup) {
  if (t.step_s > 0) {
    t.tokens_per_s = t.tokens_per_step / t.step_s;
  }
  if (setup.price && t.tokens_per_s > 0) {
    // USD per GPU-hour x GPUs / tokens per hour, per million tokens.
    t.usd_per_mtok =
        *setup.price * setup.total_gpus() / (t.tokens_per_s * 3600.0) * 1e6;
  }
  return t;
}

}  // namespace

StepTime estimate_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup) {
  const ParamCounts params = count_params(model);
  return finish(
      setup.training()
          ? time_terms::training_time(model, gpu, setup, params)
          : time_terms::inference_time(model, gpu, setup, params, setup.batch),
      setup);
}

StepTime estimate_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup, const Budget& budget) {
  if (setup.training()) {
    return estimate_time(model, gpu, setup);
  }
  std::int64_t cap = setup.batch;
  if (budget.vllm && budget.vllm->kv_tokens > 0 && setup.seq > 0) {
    // vLLM schedules only as many sequences as their KV blocks fit.
    cap = std::max<std::int64_t>(1, budget.vllm->kv_tokens / setup.seq);
  }
  return finish(
      time_terms::inference_time(model, gpu, setup, count_params(model), cap),
      setup);
}

}  // namespace oomplan
