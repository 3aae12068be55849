#include "oomplan/advice/search.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

// `oomplan fit`: the searches of search.cpp on every card and count, ranked.
// Invariants: every plan is a setup a search found and priced; plans with CPU
// offload rank after every plan without it; the ranking is deterministic
// (a stable sort over the cards' order).

namespace oomplan {
namespace {

// Seconds per token of the whole job (fit's cost per token).
double seconds_per_token(const StepTime& t) {
  return t.tokens_per_step > 0 ? t.step_s / t.tokens_per_step : 0;
}

// Lower is better. Serving: the cost of one request of max-model-len tokens
// the KV cache holds at once (GPUs, or dollars an hour, per concurrent
// request); else the GPU-seconds (or dollars) per token. `dollars`: every
// plan has a price (else GPUs and dollars would be compared).
double rank_key(const FitPlan& p, bool dollars) {
  const double gpus = p.setup.total_gpus();
  const double price = dollars ? p.usd_per_gpu_hour.value_or(1.0) : 1.0;
  if (p.setup.engine == Engine::vllm && !p.setup.training()) {
    return p.max_concurrency > 0 ? gpus * price / p.max_concurrency : 1e30;
  }
  return seconds_per_token(p.time) * gpus * price;
}

// Whether a plan keeps anything in CPU memory (fit ranks those last).
bool offloads(const FitPlan& p) {
  return p.setup.offload != Offload::none || p.setup.activation_offload;
}

// Fit's order (docs/fit.md): CPU offload last, then the least accuracy risk,
// then the cost per token in 5 % buckets, then the fewest GPUs.
bool ranks_before(const FitPlan& a, const FitPlan& b, bool dollars) {
  const bool oa = offloads(a);
  const bool ob = offloads(b);
  if (oa != ob) {
    return ob;
  }
  if (a.risk != b.risk) {
    return a.risk < b.risk;
  }
  const auto bucket = [dollars](const FitPlan& p) {
    const double k = rank_key(p, dollars);
    return k > 0 ? std::floor(std::log(k) / std::log(1.05)) : 0.0;
  };
  if (bucket(a) != bucket(b)) {
    return bucket(a) < bucket(b);
  }
  return a.setup.total_gpus() < b.setup.total_gpus();
}

// The plan of what a search found on `card`.
FitPlan fit_plan(const Model& model, const FitCard& card, Found found) {
  FitPlan p;
  p.gpu = card.gpu;
  p.request = found.request;
  p.setup = found.setup;
  if (card.usd_per_gpu_hour != p.setup.price) {
    // The card's own price for its cost per token, never another card's;
    // the command line keeps only the user's --price.
    if (p.request.price != card.usd_per_gpu_hour) {
      p.request.price.reset();
    }
    p.setup.price = card.usd_per_gpu_hour;
    found.time = estimate_time(model, *card.gpu, p.setup, found.budget);
  }
  p.total_bytes = found.budget.total_bytes();
  p.headroom_bytes = found.budget.headroom_bytes();
  p.host_bytes = found.budget.host_bytes;
  p.host_capacity_bytes = found.budget.host_capacity_bytes;
  p.fits = true;
  p.time = found.time;
  p.moves = found.moves;
  p.risk = found.risk;
  p.usd_per_gpu_hour = card.usd_per_gpu_hour;
  if (found.budget.vllm) {
    p.kv_tokens = found.budget.vllm->kv_tokens;
    p.max_concurrency = found.budget.vllm->max_concurrency;
  }
  return p;
}

std::vector<int> below(const std::vector<int>& counts, int limit) {
  std::vector<int> out;
  for (const int n : counts) {
    if (n < limit) {
      out.push_back(n);
    }
  }
  return out;
}

// Three searches, from the plain to the frugal: the knobs that cost only
// time; then also the formats with an accuracy risk; then also CPU offload.
// The later ones matter only where they need fewer GPUs: each runs only on
// counts where the plainer ones found nothing, so a setup of the plainer
// scope alone is known not to fit there (whether any setup fits is monotone
// in the count: fewest()), and is not priced.
class FitSearches {
 public:
  FitSearches(const Model& model, const Setup& base,
              const FitConstraints& constraints)
      : m_model(model),
        m_base(base),
        m_constraints(constraints),
        m_plain(model, base,
                {.layouts = true,
                 .quantize = false,
                 .offload = false,
                 .exact_global_batch = constraints.exact_global_batch}),
        m_quantized(model, base,
                    {.layouts = true,
                     .quantize = true,
                     .offload = false,
                     .exact_global_batch = constraints.exact_global_batch},
                    KnobScope::quantize),
        m_offloaded(model, base,
                    {.layouts = true,
                     .quantize = !constraints.no_quant,
                     .offload = true,
                     .exact_global_batch = constraints.exact_global_batch},
                    KnobScope::offload) {}

  // The plain and the quantized searches on `card`; returns the counts the
  // offload search may still try there (below the fewest GPUs found).
  std::vector<int> plain_and_quantized(const FitCard& card) {
    std::vector<int> counts = card.count > 0
                                  ? std::vector<int>{card.count}
                                  : gpu_counts(m_constraints.max_gpus);
    if (m_constraints.exact_global_batch) {
      // Only the counts some layout keeps the global batch on: among those,
      // whether a setup fits is monotone again (fewest() bisects them).
      std::erase_if(counts, [&](int n) {
        return !with_global_batch(m_base, n, m_model);
      });
    }
    int limit = m_constraints.max_gpus + 1;
    if (auto found = m_plain.fewest(*card.gpu, counts, Objective::balanced)) {
      limit = found->setup.total_gpus();
      keep_with_next(card, counts, std::move(*found));
    }
    if (!m_constraints.no_quant) {
      if (auto found = m_quantized.fewest(*card.gpu, below(counts, limit),
                                          Objective::balanced)) {
        limit = found->setup.total_gpus();
        keep(card, std::move(*found));
      }
    }
    return below(counts, limit);
  }

  void offloaded(const FitCard& card, const std::vector<int>& counts) {
    if (auto found =
            m_offloaded.fewest(*card.gpu, counts, Objective::balanced)) {
      keep(card, std::move(*found));
    }
  }

  std::int64_t priced() const {
    return m_plain.priced() + m_quantized.priced() + m_offloaded.priced();
  }

  std::vector<FitPlan> plans;

 private:
  void keep(const FitCard& card, Found found) {
    plans.push_back(fit_plan(m_model, card, std::move(found)));
  }

  // Keeps `fewest` and, when 5 % cheaper per token, the next count: a larger
  // count can be cheaper once memory is no longer tight (fewer
  // recomputations).
  void keep_with_next(const FitCard& card, const std::vector<int>& counts,
                      Found fewest) {
    const auto cost = [](const Found& f) {
      return seconds_per_token(f.time) * f.setup.total_gpus();
    };
    const int limit = fewest.setup.total_gpus();
    const double fewest_cost = cost(fewest);
    keep(card, std::move(fewest));
    for (const int n : counts) {
      if (n > limit) {
        auto next = m_plain.best(*card.gpu, n, Objective::balanced);
        if (next && cost(*next) < fewest_cost * 0.95) {
          keep(card, std::move(*next));
        }
        break;
      }
    }
  }

  const Model& m_model;
  const Setup& m_base;
  const FitConstraints& m_constraints;
  Searcher m_plain;
  Searcher m_quantized;
  Searcher m_offloaded;
};

// Plans with CPU offload rank after every plan without it: they are
// searched only when fewer than --top plans without it were found (in card
// order, as they would have been appended).
bool search_offload(const std::vector<FitPlan>& plans,
                    const FitConstraints& constraints) {
  const auto without_offload =
      std::count_if(plans.begin(), plans.end(),
                    [](const FitPlan& p) { return !offloads(p); });
  const bool offload_shown = without_offload < constraints.top;
  return !constraints.no_offload && offload_shown;
}

}  // namespace

FitResult fit(const Model& model, const std::vector<FitCard>& cards,
              const Setup& base, const FitConstraints& constraints) {
  FitSearches searches(model, base, constraints);
  std::vector<std::vector<int>> offload_counts(cards.size());
  for (std::size_t c = 0; c < cards.size(); ++c) {
    if (cards[c].gpu != nullptr) {
      offload_counts[c] = searches.plain_and_quantized(cards[c]);
    }
  }
  if (search_offload(searches.plans, constraints)) {
    for (std::size_t c = 0; c < cards.size(); ++c) {
      if (cards[c].gpu != nullptr) {
        searches.offloaded(cards[c], offload_counts[c]);
      }
    }
  }
  std::vector<FitPlan> plans = std::move(searches.plans);
  FitResult result;
  result.base = base;
  result.max_gpus = constraints.max_gpus;
  result.evaluated = searches.priced();
  result.front = static_cast<std::int64_t>(plans.size());
  const bool dollars =
      std::all_of(plans.begin(), plans.end(),
                  [](const FitPlan& p) { return p.usd_per_gpu_hour; });
  std::stable_sort(plans.begin(), plans.end(),
                   [dollars](const FitPlan& a, const FitPlan& b) {
                     return ranks_before(a, b, dollars);
                   });
  const auto top = static_cast<std::size_t>(std::max(constraints.top, 0));
  if (plans.size() > top) {
    plans.resize(top);
  }
  result.plans = std::move(plans);
  return result;
}

}  // namespace oomplan
