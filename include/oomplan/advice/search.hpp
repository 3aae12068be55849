#pragma once

// The one search behind the advisor, sizing without --gpus and `oomplan fit`
// (DESIGN §3). Around a setup the user asked for it turns the knobs of
// DESIGN §2 that keep the job (ZeRO stage, checkpointing, chunked loss,
// micro-batch with grad-accum, tp/pp layouts on the same cards, weight and KV
// formats, gpu-util, optimizer, precision, offload, ...) on one card and GPU
// count. Every candidate is priced by the plan pipeline (price()); the
// cheapest that fits with the required headroom wins, "cheapest" weighing
// the time model's step time against the accuracy risk of the moves.

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/plan/fix.hpp"
#include "oomplan/setup/setup.hpp"
#include "oomplan/time/time.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// The largest GPU count sizing without --gpus and the advisor try, and fit's
// default bound (8 nodes of 8 GPUs); `oomplan fit --max-gpus` goes further.
inline constexpr int k_sizing_max_gpus = 64;

// The GPU counts a search tries up to `max_gpus`: 1, 2, 4, 8 inside one node,
// then every whole number of 8-GPU nodes.
std::vector<int> gpu_counts(int max_gpus);

// The weight formats a 16-bit inference plan on `gpu` can move to, 8-bit
// before 4-bit: int8 (transformers only: vLLM has no on-the-fly int8), fp8
// where it runs (vLLM weight-only from Ampere; transformers' FBGEMM needs fp8
// tensor cores), then AWQ (vLLM) or NF4 (transformers).
std::vector<Quant> quantization_options(const Gpu& gpu, Engine engine);

// What a search may change besides the free and compute knobs. Changes of
// the job (sequence length, LoRA instead of full, global batch, fewer
// concurrent sequences) are never made by a search.
struct SearchScope {
  bool layouts = true;   // other tp / pp (and --split layers) on the GPUs
  bool quantize = true;  // weight and KV formats, 8-bit states, pure 16-bit
  bool offload = true;   // CPU offload of states, weights or activations
  // Training: every count keeps the base's global batch exactly (batch x
  // grad-accum x dp), or is not tried (fit --global-batch). Otherwise a count
  // whose data parallelism does not divide it grows it, and its fix is
  // compared per token.
  bool exact_global_batch = false;
};

// The order of preference among setups that fit.
enum class Objective {
  balanced,  // step time weighted by the moves' accuracy risk (the default)
  fastest,   // step time alone
  safest,    // the least accuracy risk, then step time
};

// One move: a knob turned, in words.
struct Move {
  std::string id;     // "zero-stage", "checkpointing-full", ...
  std::string title;  // "ZeRO stage 0 -> 3"
  Risk risk = Risk::none;
  // What the change asks of the user's stack beyond a config value, as a
  // share of a step's time it is worth: tensor or pipeline parallelism in
  // training needs Megatron or torchtitan rather than Trainer + DeepSpeed.
  double effort = 0;
};

// The balanced objective's cost of a setup a search found: its time per step
// (or per token) relative to the start, a speed-up not counted, times one
// plus its moves' accuracy-risk weights and effort.
double balanced_cost(double time_factor, const std::vector<Move>& moves);

// A setup a search found, with the moves that lead to it from the base.
// The moves are minimal: undoing any of them no longer fits.
struct Found {
  const Gpu* gpu = nullptr;
  Setup request;  // as asked: plan_argv() plans it again
  Resolved setup;
  Budget budget;
  StepTime time;
  std::vector<Move> moves;
  Risk risk = Risk::none;  // the largest of the moves'
};

// Which scope of SearchScope adds a knob: the plain ones cost only time.
enum class KnobScope : std::uint8_t { plain, quantize, offload };

// A search around one base setup (its mode, engine, sequence, global batch
// and model stay). Not thread-safe; cheap to construct.
class Searcher {
 public:
  // `base` is valid for the model on some card (check()); its GPU count is
  // replaced by each search's.
  // `required`: only setups with a move of that scope can fit (the caller
  // knows that the others do not, on every card and count it asks).
  Searcher(const Model& model, const Setup& base, const SearchScope& scope,
           std::optional<KnobScope> required = std::nullopt);

  // The best setup on `count` GPUs of `gpu` (whole nodes of k_gpus_per_node
  // beyond one node) that fits with `headroom_share` of the card free
  // (nullopt: the plan's own --min-headroom margin); nullopt when none does.
  std::optional<Found> best(const Gpu& gpu, int count, Objective objective,
                            std::optional<double> headroom_share = {});

  // The fewest GPUs of `gpu` among `counts` with a setup that fits, and that
  // setup.
  std::optional<Found> fewest(const Gpu& gpu, const std::vector<int>& counts,
                              Objective objective);

  // Candidates priced so far.
  std::int64_t priced() const { return m_counts.priced; }

 private:
  // One card and count's knobs and what has been priced there, kept while
  // searches for several objectives run on them.
  struct Space;
  // One search's walk over a Space for one objective.
  class Walk;
  void rank(Space& space) const;
  Space& space(const Gpu& gpu, int count, std::optional<double> headroom_share);
  std::optional<Found> search(Space& space, Objective objective);

  const Model& m_model;
  Setup m_base;
  SearchScope m_scope;
  std::optional<KnobScope> m_required;
  std::vector<std::shared_ptr<Space>> m_spaces;
  struct Counts {
    std::int64_t priced = 0;
    std::int64_t inferred = 0;  // ruled out without pricing (Space::relax)
    std::int64_t evaluated() const { return priced + inferred; }
  };
  Counts m_counts;
};

// The setup `base` with `count` GPUs: up to a node, then whole nodes; the
// tensor-parallel default and a training grad-accum follow the count (the
// global batch stays when it divides).
Setup with_gpu_count(const Setup& base, int count, const Model& model);

// Training: `base` on `count` GPUs with its global batch kept exactly: the
// data parallelism of the layout with the fewest pipeline stages (then
// tensor-parallel ranks) of the search's layouts whose dp divides it;
// nullopt when none does.
std::optional<Setup> with_global_batch(const Setup& base, int count,
                                       const Model& model);

// --- `oomplan fit`.

// The headroom a plan must keep is the setup's own --min-headroom margin.
struct FitConstraints {
  int max_gpus = k_sizing_max_gpus;  // --max-gpus: total GPUs
  bool no_offload = false;           // --no-offload
  bool no_quant = false;  // --no-quant: no format or state quantization
  int top = 10;           // --top: plans returned
  bool exact_global_batch = false;  // --global-batch: every plan keeps it
};

// One card to fit on: all counts up to the bound, or one fixed count (the
// count of --gpus NxNAME or of an instance).
struct FitCard {
  const Gpu* gpu = nullptr;
  int count = 0;                           // 0: any count
  std::optional<double> usd_per_gpu_hour;  // for GPU-hour costs
};

struct FitPlan {
  const Gpu* gpu = nullptr;
  Setup request;   // as asked: plan_args(model_arg, model, *gpu, request)
  Resolved setup;  // resolved
  Bytes total_bytes = 0;
  Bytes headroom_bytes = 0;
  Bytes host_bytes = 0;
  std::optional<Bytes> host_capacity_bytes;  // the node's, when known
  bool fits = false;
  StepTime time;
  std::vector<Move> moves;  // from the user's setup
  Risk risk = Risk::none;
  std::optional<double> usd_per_gpu_hour;
  std::int64_t kv_tokens = 0;  // vLLM: the engine's KV cache, tokens
  double max_concurrency = 0;  // vLLM: requests of max-model-len at once
};

struct FitResult {
  std::vector<FitPlan> plans;  // best first, at most `top`
  std::int64_t evaluated = 0;  // candidates priced
  std::int64_t front = 0;      // plans found before the top-N cut
  Setup base;                  // the user's fixed settings (mode, seq, ...)
  int max_gpus = 0;            // the bound searched
};

// For each card, the fewest GPUs and every larger count that is faster, each
// with the cheapest setup that fits; plans are ranked by what the job needs:
// serving by KV tokens at max-model-len per GPU, training and hf inference by
// GPU-seconds (or USD) per token. REQUIRES `base` valid.
FitResult fit(const Model& model, const std::vector<FitCard>& cards,
              const Setup& base, const FitConstraints& constraints);

}  // namespace oomplan
