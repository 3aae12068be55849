#include "oomplan/advice/search.hpp"

#include "advice/knobs.hpp"

#include "oomplan/advice/capability.hpp"
#include "oomplan/model/capability.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/options.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <functional>
#include <queue>
#include <string>
#include <tuple>

// The search. Invariants:
// - every setup it returns was priced by the plan pipeline (price()) on the
//   card and count it names, and fits with the required headroom; nothing is
//   estimated or scaled from a neighbour;
// - a search keeps the job: mode, engine, model, sequence length and global
//   batch stay; its moves are the knobs of DESIGN §2 that do not change what
//   the job computes (they may change how exactly, which is their accuracy
//   risk), one row each in knobs.cpp;
// - candidates are visited cheapest first (a best-first walk over the lattice
//   of knob levels, ordered by each level's time factor and risk), so the
//   first that fits is the cheapest found; its moves are then made minimal:
//   undoing any of them no longer fits;
// - the result is deterministic: ties go to fewer moves, then to the knob
//   table's order.

namespace oomplan {
namespace {

// Accuracy-risk weights of the balanced objective: a low-risk move (8-bit
// AdamW, fp8 KV, 8-bit weights, pure bf16) is worth a 10 % slower step, 4-bit
// weights a 30 % slower one.
double risk_weight(Risk risk) {
  switch (risk) {
    case Risk::none:
      return 0;
    case Risk::low:
      return 0.1;
    case Risk::moderate:
      return 0.3;
  }
  return 0;
}

// What a move costs in time: the training step over the same global batch,
// or the time per output token of one sequence (a layout that trades
// replicas for pipeline stages keeps the latency a user sees).
double step_seconds(const StepTime& t) {
  return t.step_s;
}

// A search's walk gives up after this many candidates on one card and count,
// priced or ruled out by their relaxation (a 70B training search finds its
// answer within a few hundred).
constexpr std::int64_t k_max_evaluated = 600;
// The fitting setups a search's walk compares on their exact time, and the
// frugal seeds (the cheapest layouts) it descends first.
constexpr int k_candidates = 4;
constexpr std::size_t k_seeds = 2;

}  // namespace

double balanced_cost(double time_factor, const std::vector<Move>& moves) {
  double risk = 0;
  for (const Move& m : moves) {
    risk += risk_weight(m.risk) + m.effort;
  }
  // A speed-up is welcome but does not buy accuracy risk or effort.
  return std::max(time_factor, 1.0) * (1 + risk);
}

std::vector<int> gpu_counts(int max_gpus) {
  std::vector<int> counts;
  for (int n = 1; n <= std::min(k_gpus_per_node, max_gpus); n *= 2) {
    counts.push_back(n);
  }
  for (int n = 2 * k_gpus_per_node; n <= max_gpus; n += k_gpus_per_node) {
    counts.push_back(n);
  }
  return counts;
}

std::vector<Quant> quantization_options(const Gpu& gpu, Engine engine) {
  const bool vllm = engine == Engine::vllm;
  std::vector<Quant> options;
  if (!vllm) {
    options.push_back(Quant::int8);
  }
  // vLLM runs fp8 checkpoints weight-only (Marlin) from Ampere on;
  // transformers' fp8 kernels (FBGEMM) need fp8 tensor cores.
  if (gpu.compute_capability >= k_cc_ampere && (vllm || gpu.fp8_tflops > 0)) {
    options.push_back(Quant::fp8);
  }
  options.push_back(vllm ? Quant::awq : Quant::nf4);
  return options;
}

Setup with_gpu_count(const Setup& base, int count, const Model& model) {
  if (count == base.total_gpus()) {
    return base;  // the user's own layout of nodes
  }
  Setup s = base;
  s.gpus = std::min(count, k_gpus_per_node);
  s.nodes = std::max(1, count / s.gpus);
  if (s.training()) {
    // Data parallelism grows with the GPUs; grad-accum shrinks when that
    // keeps the global batch exact.
    const Resolved before = resolve(model, Gpu{}, base);
    const Resolved after = resolve(model, Gpu{}, s);
    const std::int64_t global =
        std::int64_t{before.grad_accum} * std::max(1, before.dp());
    const int dp = std::max(1, after.dp());
    if (global % dp == 0 && global / dp >= 1) {
      s.grad_accum = static_cast<int>(global / dp);
    }
  }
  return s;
}

std::optional<Setup> with_global_batch(const Setup& base, int count,
                                       const Model& model) {
  Setup s = with_gpu_count(base, count, model);
  if (!s.training()) {
    return s;
  }
  const Resolved before = resolve(model, Gpu{}, base);
  const std::int64_t global =
      std::int64_t{before.grad_accum} * std::max(1, before.dp());
  const Resolved after = resolve(model, Gpu{}, s);
  if (global % std::max(1, after.dp()) == 0) {
    return s;
  }
  for (const int pp : k_pp_sizes) {
    for (const int tp : k_tp_sizes) {
      if (tp < after.tp || tp > s.gpus || count % (tp * pp) != 0) {
        continue;
      }
      const int dp = count / (tp * pp);
      if (global % dp == 0 && global / dp <= k_max_grad_accum) {
        s.tp = tp;
        s.pp = pp;
        s.grad_accum = static_cast<int>(global / dp);
        return s;
      }
    }
  }
  return std::nullopt;
}

namespace {

// A point of the search's lattice: one level per knob (a search has at most
// k_max_knobs knobs, each with at most 255 levels).
constexpr std::size_t k_max_knobs = 24;
using Levels = std::array<std::uint8_t, k_max_knobs>;

// A table keyed by Levels: open addressing with linear probing in a
// power-of-two array (the walk inserts hundreds of thousands of points; a
// node per entry would cost more than the lookups).
template <typename Value>
class LevelsTable {
 public:
  // The value at `key`, or nullptr.
  const Value* find(const Levels& key) const {
    if (m_slots.empty()) {
      return nullptr;
    }
    for (std::size_t i = hash(key) & mask();; i = (i + 1) & mask()) {
      const Slot& slot = m_slots[i];
      if (!slot.used) {
        return nullptr;
      }
      if (same(slot.key, key)) {
        return &slot.value;
      }
    }
  }

  // Inserts `value` at `key` unless the key is there; true when inserted.
  bool insert(const Levels& key, const Value& value) {
    if ((m_size + 1) * 2 > m_slots.size()) {
      grow();
    }
    for (std::size_t i = hash(key) & mask();; i = (i + 1) & mask()) {
      Slot& slot = m_slots[i];
      if (!slot.used) {
        slot = Slot{key, value, true};
        ++m_size;
        return true;
      }
      if (same(slot.key, key)) {
        return false;
      }
    }
  }

  void clear() {
    m_slots.clear();
    m_size = 0;
  }

 private:
  struct Slot {
    Levels key{};
    Value value{};
    bool used = false;
  };

  static bool same(const Levels& a, const Levels& b) {
    std::uint64_t x[3];
    std::uint64_t y[3];
    std::memcpy(x, a.data(), sizeof(x));
    std::memcpy(y, b.data(), sizeof(y));
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2])) == 0;
  }
  static std::size_t hash(const Levels& key) {
    // The 24 levels as three words, mixed (splitmix64's finaliser).
    std::uint64_t w[3];
    static_assert(sizeof(w) == sizeof(Levels));
    std::memcpy(w, key.data(), sizeof(w));
    std::uint64_t h =
        w[0] ^ (w[1] * 0x9E3779B97F4A7C15ULL) ^ (w[2] * 0xC2B2AE3D27D4EB4FULL);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBULL;
    h ^= h >> 31;
    return static_cast<std::size_t>(h);
  }
  std::size_t mask() const { return m_slots.size() - 1; }
  void grow() {
    std::vector<Slot> old = std::move(m_slots);
    m_slots.assign(old.empty() ? k_first_slots : old.size() * 2, Slot{});
    m_size = 0;
    for (const Slot& slot : old) {
      if (slot.used) {
        insert(slot.key, slot.value);
      }
    }
  }

  // A walk visits a few thousand points: start there, not at 64 and
  // rehashing six times.
  static constexpr std::size_t k_first_slots = 4096;
  std::vector<Slot> m_slots;
  std::size_t m_size = 0;
};

// What a setup's walk priority is made of: sums over the knobs (and the
// worst risk).
struct Terms {
  double time = 1;  // one plus each knob's time factor less one
  double risk = 0;  // risk weights and effort of the moves
  int worst = 0;    // the worst risk of a move
  int moves = 0;    // knobs moved
};

struct State {
  double priority = 0;
  Terms terms;
  std::int64_t order = 0;
  Levels levels{};
  // The knob whose move led here, and what was missing before it (nullopt:
  // the start, or not known).
  std::size_t moved = 0;
  std::optional<Bytes> parent_short;
  bool operator>(const State& o) const {
    return std::tie(priority, terms.moves, order) >
           std::tie(o.priority, o.terms.moves, o.order);
  }
};

}  // namespace

struct Searcher::Space {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  int count = 0;
  Bytes need = -1;  // headroom a fit keeps; -1: the plan's margin
  Setup start;
  // Moves made before the walk, on every setup of the space: training in
  // bf16 on a card without it becomes fp16 (transformers'
  // TrainingArguments refuses --bf16 below compute capability 8.0).
  std::vector<Move> forced;
  std::vector<Knob> knobs;
  bool ranked = false;
  // A setup without a move of this scope is known not to fit (the caller's
  // plainer search found none on this card and count).
  std::optional<KnobScope> required;
  // What pricing found: whether it fits, and for the engines whose verdict
  // is total against usable memory (not vLLM, whose KV pool fills the
  // budget) the bytes it misses by, margin included.
  struct Outcome {
    bool fits = false;
    std::optional<Bytes> short_bytes;
    bool relaxed = false;  // ruled out by its relaxation (relax())
  };
  LevelsTable<Outcome> known;
  Counts* counts = nullptr;  // the searcher's

  // Sequences per optimizer step of the start (training), which every setup
  // of the space keeps.
  std::int64_t global_batch = 0;

  // The setup of `levels`; nullopt when it cannot keep the start's global
  // batch. The moves change the micro-batch and the data-parallel size; the
  // gradient accumulation follows from both here, once, so that moves
  // combine (each setting it for itself undid the others').
  std::optional<Setup> setup_of(const Levels& levels) const {
    Setup s = start;
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      if (levels[d] > 0) {
        knobs[d].levels[levels[d]].apply(s);
      }
    }
    if (!keep_global_batch(s)) {
      return std::nullopt;
    }
    return s;
  }

  // Sets the gradient accumulation that keeps the start's global batch;
  // false when none does (or it is beyond --grad-accum's bound).
  bool keep_global_batch(Setup& s) const {
    if (global_batch == 0) {
      return true;
    }
    const std::int64_t per_step =
        std::int64_t{s.batch} * std::max(1, resolved_dp(s));
    if (global_batch % per_step != 0 ||
        global_batch / per_step > k_max_grad_accum) {
      return false;
    }
    s.grad_accum = static_cast<int>(global_batch / per_step);
    return true;
  }

  // Whether `levels` fits with the headroom asked for (each priced once).
  bool fits(const Levels& levels) {
    if (const Outcome* o = known.find(levels)) {
      return o->fits;
    }
    if (required && !has_scope(levels, *required)) {
      known.insert(levels, Outcome{});
      return false;
    }
    // Its relaxation priced and missing: it misses too.
    if (const auto relaxed = relax(levels);
        relaxed && !fits(*relaxed) && short_bytes(*relaxed)) {
      ++counts->inferred;
      // The test builds price it anyway: a relaxation that rules out a
      // setup that fits is a bug in the side knobs' list.
      assert(!evaluate(levels).value_or(Outcome{}).fits);
      known.insert(
          levels,
          Outcome{.fits = false, .short_bytes = std::nullopt, .relaxed = true});
      return false;
    }
    const std::optional<Outcome> out = evaluate(levels);
    if (out) {
      ++counts->priced;
    }
    known.insert(levels, out.value_or(Outcome{}));
    return out && out->fits;
  }

  // What pricing `levels` finds; nullopt when it is not priced (the global
  // batch cannot be kept, or torchtune would not offload it).
  std::optional<Outcome> evaluate(const Levels& levels) const {
    const std::optional<Setup> setup = setup_of(levels);
    // torchtune offloads the checkpointed inputs only, and refuses gradient
    // accumulation with optimizer_in_bwd (recipes/full_finetune_single_device
    // .py _setup_optimizer: "Gradient accumulation is not supported").
    if (!setup ||
        (setup->activation_offload && !start.activation_offload &&
         setup->checkpointing != Checkpointing::full) ||
        (setup->optimizer_in_bwd && !start.optimizer_in_bwd &&
         setup->grad_accum > 1) ||
        (!expresses(*setup) && expresses(start))) {
      return std::nullopt;
    }
    Outcome out;
    const Pricing p = price(*model, *gpu, *setup);
    if (p.priced) {
      const Budget& b = p.priced->budget;
      out.fits = need < 0 ? b.fits_with_margin()
                          : b.fits() && b.headroom_bytes() >= need;
      if (!b.vllm) {
        out.short_bytes =
            (need < 0 ? b.margin_bytes : need) - b.headroom_bytes();
      }
    }
    return out;
  }

  // `levels` with every side knob at its frugal level: a lower bound of its
  // memory, shared by every setup that differs only there; nullopt when it
  // is `levels` itself. The side knobs (training's checkpointing and
  // expandable-segments reserve) change what the step keeps for backward and
  // the allocator's slack, never the weights or the optimizer states; at
  // their frugal level they never need more memory (test_properties.cpp
  // frugal_side_knobs).
  std::optional<Levels> relax(const Levels& levels) const {
    Levels out = levels;
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      if (knobs[d].role == KnobRole::side) {
        out[d] = static_cast<std::uint8_t>(knobs[d].frugal);
      }
    }
    if (out == levels) {
      return std::nullopt;
    }
    return out;
  }

  // The bytes `levels` missed by, when priced and comparable.
  std::optional<Bytes> short_bytes(const Levels& levels) const {
    const Outcome* o = known.find(levels);
    return o != nullptr ? o->short_bytes : std::nullopt;
  }

  bool has_scope(const Levels& levels, KnobScope scope) const {
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      if (levels[d] > 0 && knobs[d].scope == scope) {
        return true;
      }
    }
    return false;
  }

  // Every knob at its most frugal level, on each layout: the setups that
  // bound what this card and count can hold.
  std::vector<Levels> frugal_setups() const {
    Levels frugal{};
    std::optional<std::size_t> layout;
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      frugal[d] = static_cast<std::uint8_t>(knobs[d].frugal);
      if (knobs[d].role == KnobRole::layout) {
        layout = d;
      }
    }
    const std::size_t layouts = layout ? knobs[*layout].levels.size() : 1;
    std::vector<Levels> out(layouts, frugal);
    for (std::size_t l = 0; layout && l < layouts; ++l) {
      out[l][*layout] = static_cast<std::uint8_t>(l);
    }
    // With the exclusive knobs at their start too (KnobRole::exclusive).
    std::vector<Levels> without = out;
    bool exclusive = false;
    for (Levels& l : without) {
      for (std::size_t d = 0; d < knobs.size(); ++d) {
        if (knobs[d].role == KnobRole::exclusive) {
          l[d] = 0;
          exclusive = true;
        }
      }
    }
    if (exclusive) {
      out.insert(out.end(), without.begin(), without.end());
    }
    // A frugal setup the framework cannot express (a ZeRO stage under the
    // start's pure bf16: expresses()) bounds nothing, since evaluate() never
    // prices it: its variant with that knob back at the start goes in too,
    // with, when that leaves a move without what it needs (an offload
    // without ZeRO), that move back as well.
    if (expresses(start)) {
      const std::size_t frugal_count = out.size();
      for (std::size_t i = 0; i < frugal_count; ++i) {
        if (const auto valid = expressible(out[i])) {
          out.push_back(*valid);
        }
      }
    }
    return out;
  }

  // `levels` with the first knob put back at its start that makes it
  // expressible, then, if it cannot be priced, the first that makes it
  // priceable too; nullopt when `levels` is expressible already or no such
  // knob is found.
  std::optional<Levels> expressible(const Levels& levels) const {
    const auto reset_first = [&](const Levels& from,
                                 const auto& ok) -> std::optional<Levels> {
      for (std::size_t d = 0; d < knobs.size(); ++d) {
        Levels back = from;
        back[d] = 0;
        if (from[d] > 0 && ok(back)) {
          return back;
        }
      }
      return std::nullopt;
    };
    const auto expressed = [&](const Levels& l) {
      const std::optional<Setup> setup = setup_of(l);
      return setup && expresses(*setup);
    };
    const auto priceable = [&](const Levels& l) {
      const std::optional<Setup> setup = setup_of(l);
      return setup && price(*model, *gpu, *setup).priced.has_value();
    };
    if (expressed(levels)) {
      return std::nullopt;
    }
    const std::optional<Levels> back = reset_first(levels, expressed);
    if (!back || priceable(*back)) {
      return back;
    }
    return reset_first(
        *back, [&](const Levels& l) { return expressed(l) && priceable(l); });
  }

  // The frugal setups that fit: where the walks start.
  std::vector<Levels> seeds() {
    std::vector<Levels> out = frugal_setups();
    std::erase_if(out, [&](const Levels& l) { return !fits(l); });
    return out;
  }

  // Some setup fits here (cheap: the start, then the frugal setups until one
  // fits).
  bool possible() {
    const std::vector<Levels> frugal = frugal_setups();
    return fits(Levels{}) ||
           std::any_of(frugal.begin(), frugal.end(),
                       [&](const Levels& l) { return fits(l); });
  }
};

void Searcher::rank(Space& space) const {
  const Model& m = m_model;
  const Gpu& gpu = *space.gpu;
  const Setup& start = space.start;
  // Each level's time factor against the start, for the walk's order.
  const double base =
      step_seconds(estimate_time(m, gpu, resolve(m, gpu, start)));
  for (Knob& k : space.knobs) {
    for (std::size_t i = 1; i < k.levels.size(); ++i) {
      Setup s = start;
      k.levels[i].apply(s);
      // With the global batch kept, as the space prices it (a layout that
      // cannot keep it is never priced: its factor does not matter).
      space.keep_global_batch(s);
      const double t = step_seconds(estimate_time(m, gpu, resolve(m, gpu, s)));
      k.levels[i].factor = base > 0 && t > 0 ? t / base : 1.0;
    }
    // A walk steps through a knob's levels in order: layouts are not
    // nested, so they go cheapest first.
    if (k.levels.size() > 2 && k.role == KnobRole::layout) {
      std::stable_sort(k.levels.begin() + 1, k.levels.end(),
                       [](const KnobLevel& a, const KnobLevel& b) {
                         return a.factor < b.factor;
                       });
    }
  }
}

Searcher::Space& Searcher::space(const Gpu& gpu, int count,
                                 std::optional<double> headroom_share) {
  const Bytes need = headroom_share
                         ? round_bytes(*headroom_share *
                                       static_cast<double>(gpu.capacity_bytes))
                         : -1;
  for (auto& kept : m_spaces) {
    if (kept->gpu == &gpu && kept->count == count && kept->need == need) {
      return *kept;
    }
  }
  // The last few cards and counts stay (a bisection comes back to them).
  if (m_spaces.size() >= 4) {
    m_spaces.erase(m_spaces.begin());
  }
  m_spaces.push_back(std::make_shared<Space>());
  Space& s = *m_spaces.back();
  s.model = &m_model;
  s.counts = &m_counts;
  s.gpu = &gpu;
  s.count = count;
  s.need = need;
  s.required = m_required;
  const auto exact = m_scope.exact_global_batch
                         ? with_global_batch(m_base, count, m_model)
                         : std::nullopt;
  s.start = exact ? *exact : with_gpu_count(m_base, count, m_model);
  if (s.start.training() && s.start.dtype == Dtype::bf16 && !runs_bf16(gpu) &&
      capability_of(s.start).fp16) {
    s.start.dtype = Dtype::fp16;
    s.forced.push_back(
        {"fp16", "fp16 instead of bf16 (the card has no bf16)", Risk::low});
  }
  const Resolved r = resolve(m_model, gpu, s.start);
  s.knobs = knobs_for(gpu, s.start, r, m_scope);
  if (s.start.training()) {
    // With the exact global batch, a count that cannot keep the base's
    // keeps nothing: every setup of its space is ruled out.
    const Resolved& kept = m_scope.exact_global_batch && !exact
                               ? resolve(m_model, gpu, m_base)
                               : r;
    s.global_batch =
        std::int64_t{kept.batch} * kept.grad_accum * std::max(1, kept.dp());
  }
  if (s.knobs.size() > k_max_knobs) {
    s.knobs.resize(k_max_knobs);
  }
  return s;
}

Searcher::Searcher(const Model& model, const Setup& base,
                   const SearchScope& scope, std::optional<KnobScope> required)
    : m_model(model), m_base(base), m_scope(scope), m_required(required) {}

std::optional<Found> Searcher::best(const Gpu& gpu, int count,
                                    Objective objective,
                                    std::optional<double> headroom_share) {
  return search(space(gpu, count, headroom_share), objective);
}

// One search's walk over a space (Searcher::search): the objective's
// priorities, the minimal form of a setup that fits, and the best found.
class Searcher::Walk {
 public:
  Walk(Space& space, Objective objective);

  // The fitting setup of `levels` as a result: priced, timed, its moves.
  Found found_of(const Levels& levels) const;
  // The cheapest `seeds` by their priority, made minimal and compared.
  void descend(std::vector<Levels> seeds);
  // A best-first walk from the start over setups cheaper than the best
  // found: the first few that fit are made minimal and compared on their
  // exact cost.
  void best_first();
  std::optional<Found> take_best() { return std::move(m_best); }

 private:
  const KnobLevel& level_of(std::size_t d, std::size_t l) const {
    return m_space.knobs[d].levels[l];
  }
  double time_term(std::size_t d, std::size_t l) const;
  double risk_term(std::size_t d, std::size_t l) const;
  Terms terms_of(const Levels& levels) const;
  double priority_of(const Terms& t) const;
  double priority(const Levels& levels) const {
    return priority_of(terms_of(levels));
  }
  double exact_cost(const Found& f) const;
  Levels minimal(Levels levels);
  void consider(const Levels& fitting);
  void push(const Levels& levels, const Terms& terms, std::size_t moved,
            std::optional<Bytes> parent_short);
  void expand(const State& s);

  Space& m_space;
  Objective m_objective;
  // Knobs in the order minimal() undoes them: the dearest first.
  std::vector<std::size_t> m_dearest;
  double m_base_seconds = 0;  // the start's step time
  std::optional<Found> m_best;
  double m_best_cost = 0;
  double m_bound = 0;  // the walk's priority above which nothing is cheaper
  // best_first()'s frontier.
  std::priority_queue<State, std::vector<State>, std::greater<>> m_open;
  LevelsTable<bool> m_seen;
  std::int64_t m_order = 0;
  std::array<bool, k_max_knobs> m_monotone{};
};

namespace {

// The knobs by their dearest level (time factor plus risk weight), dearest
// first.
std::vector<std::size_t> dearest_first(const std::vector<Knob>& knobs) {
  std::vector<std::size_t> order(knobs.size());
  for (std::size_t d = 0; d < knobs.size(); ++d) {
    order[d] = d;
  }
  const auto top = [&](std::size_t d) {
    double f = 1;
    for (const auto& l : knobs[d].levels) {
      f = std::max(f, l.factor + risk_weight(l.move.risk));
    }
    return f;
  };
  std::stable_sort(
      order.begin(), order.end(),
      [&](std::size_t a, std::size_t b) { return top(a) > top(b); });
  return order;
}

// Per knob, whether its levels only get dearer: the walk then steps through
// them one at a time.
std::array<bool, k_max_knobs> monotone_knobs(const std::vector<Knob>& knobs) {
  std::array<bool, k_max_knobs> monotone{};
  monotone.fill(true);
  for (std::size_t d = 0; d < knobs.size(); ++d) {
    const auto cost = [&](std::size_t i) {
      const KnobLevel& v = knobs[d].levels[i];
      return std::max(1.0, v.factor) + risk_weight(v.move.risk) + v.move.effort;
    };
    for (std::size_t l = 2; l < knobs[d].levels.size(); ++l) {
      if (cost(l) < cost(l - 1)) {
        monotone[d] = false;
      }
    }
  }
  return monotone;
}

}  // namespace

// The order of undoing is taken from the time factors as they stand: the
// first search of a space runs before rank() (all factors 1, so the riskiest
// knobs go first), later ones on the ranked factors.
Searcher::Walk::Walk(Space& space, Objective objective)
    : m_space(space),
      m_objective(objective),
      m_dearest(dearest_first(space.knobs)),
      m_base_seconds(step_seconds(
          estimate_time(*space.model, *space.gpu,
                        resolve(*space.model, *space.gpu, space.start)))) {}

// Time deltas add: each move lengthens one term of the step (compute,
// communication, offload traffic), and a term that dominates is not
// multiplied by the others. The terms are sums over the knobs, so the walk
// updates them one knob at a time.
double Searcher::Walk::time_term(std::size_t d, std::size_t l) const {
  return std::max(1.0, level_of(d, l).factor) - 1;
}

double Searcher::Walk::risk_term(std::size_t d, std::size_t l) const {
  const Move& m = level_of(d, l).move;
  return l > 0 ? risk_weight(m.risk) + m.effort : 0.0;
}

Terms Searcher::Walk::terms_of(const Levels& levels) const {
  Terms t;
  for (std::size_t d = 0; d < m_space.knobs.size(); ++d) {
    const auto l = static_cast<std::size_t>(levels[d]);
    t.time += time_term(d, l);
    t.risk += risk_term(d, l);
    t.worst = std::max(t.worst,
                       l > 0 ? static_cast<int>(level_of(d, l).move.risk) : 0);
    t.moves += l > 0 ? 1 : 0;
  }
  return t;
}

double Searcher::Walk::priority_of(const Terms& t) const {
  switch (m_objective) {
    case Objective::fastest:
      return t.time;
    case Objective::safest:
      return 1000.0 * t.worst + t.time;
    case Objective::balanced:
      break;
  }
  return t.time * (1 + t.risk);
}

// The objective on a found setup's exact time.
double Searcher::Walk::exact_cost(const Found& f) const {
  const double seconds = step_seconds(f.time);
  const double time =
      m_base_seconds > 0 && seconds > 0 ? seconds / m_base_seconds : 1.0;
  switch (m_objective) {
    case Objective::fastest:
      return time;
    case Objective::safest:
      return 1000.0 * static_cast<double>(f.risk) + time;
    case Objective::balanced:
      break;
  }
  return balanced_cost(time, f.moves);
}

// Undoes each move (or lowers it) while the rest still fits, the dearest
// moves first.
Levels Searcher::Walk::minimal(Levels levels) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const std::size_t d : m_dearest) {
      for (std::uint8_t lower = 0; lower < levels[d]; ++lower) {
        auto trial = levels;
        trial[d] = lower;
        if (m_space.fits(trial)) {
          levels = trial;
          changed = true;
          break;
        }
      }
    }
  }
  return levels;
}

Found Searcher::Walk::found_of(const Levels& levels) const {
  const Gpu& gpu = *m_space.gpu;
  const Model& model = *m_space.model;
  Pricing p = price(model, gpu, *m_space.setup_of(levels));
  Found out;
  out.gpu = &gpu;
  out.request = p.priced->request;
  out.setup = p.priced->setup;
  out.budget = std::move(p.priced->budget);
  out.time = estimate_time(model, gpu, out.setup, out.budget);
  for (const Move& move : m_space.forced) {
    out.moves.push_back(move);
    out.risk = std::max(out.risk, move.risk);
  }
  for (std::size_t d = 0; d < m_space.knobs.size(); ++d) {
    if (levels[d] > 0) {
      const Move& move = level_of(d, levels[d]).move;
      out.moves.push_back(move);
      out.risk = std::max(out.risk, move.risk);
    }
  }
  return out;
}

void Searcher::Walk::consider(const Levels& fitting) {
  const Levels levels = minimal(fitting);
  Found f = found_of(levels);
  // Within 2 % the fewer moves win: an expert keeps a setup simple.
  const double cost = exact_cost(f);
  const bool fewer = m_best && f.moves.size() < m_best->moves.size();
  if (!m_best || cost < m_best_cost * (fewer ? 1.02 : 0.98)) {
    m_best = std::move(f);
    m_best_cost = cost;
    m_bound = priority(levels);
  }
}

void Searcher::Walk::descend(std::vector<Levels> seeds) {
  std::stable_sort(
      seeds.begin(), seeds.end(),
      [&](const auto& a, const auto& b) { return priority(a) < priority(b); });
  for (std::size_t i = 0; i < seeds.size() && i < k_seeds; ++i) {
    consider(seeds[i]);
  }
}

void Searcher::Walk::push(const Levels& levels, const Terms& terms,
                          std::size_t moved,
                          std::optional<Bytes> parent_short) {
  const double p = priority_of(terms);
  if (p >= m_bound || !m_seen.insert(levels, true)) {
    return;  // no cheaper than what the seeds found, or seen
  }
  m_open.push(State{p, terms, m_order++, levels, moved, parent_short});
}

void Searcher::Walk::best_first() {
  m_monotone = monotone_knobs(m_space.knobs);
  const Levels start{};
  push(start, terms_of(start), 0, std::nullopt);
  int candidates = 0;
  const Counts& counts = *m_space.counts;
  const std::int64_t first_evaluated = counts.evaluated();
  while (!m_open.empty() &&
         counts.evaluated() - first_evaluated < k_max_evaluated &&
         candidates < k_candidates) {
    const State s = m_open.top();
    m_open.pop();
    if (s.priority >= m_bound) {
      continue;
    }
    if (m_space.fits(s.levels)) {
      ++candidates;
      consider(s.levels);
      continue;  // setups above one that fits only add moves
    }
    expand(s);
  }
}

// Pushes the setups one knob further than `s`, which does not fit.
void Searcher::Walk::expand(const State& s) {
  const std::vector<Knob>& knobs = m_space.knobs;
  // A move that saved nothing here is walked no further than its own
  // knob's next levels: the setups it leads to with other moves are
  // reached, cheaper, without it (the walk is over sets of moves).
  const std::optional<Bytes> missing = m_space.short_bytes(s.levels);
  const bool saved_nothing =
      missing && s.parent_short && *missing >= *s.parent_short;
  // Ruled out by its relaxation: a side knob moved further leads to
  // setups of the same relaxation, which miss too. (fits() has just judged
  // `s`: it is known.)
  const Space::Outcome* outcome = m_space.known.find(s.levels);
  const bool relaxed = outcome != nullptr && outcome->relaxed;
  // Each knob may jump to any of its further levels: a level dearer than
  // the bound must not hide a cheaper one behind it (a faster 4-bit
  // format behind a slower 8-bit one).
  for (std::size_t d = 0; d < knobs.size(); ++d) {
    if ((saved_nothing && d != s.moved) ||
        (relaxed && knobs[d].role == KnobRole::side)) {
      continue;
    }
    const std::size_t last =
        m_monotone[d]
            ? std::min<std::size_t>(s.levels[d] + 2u, knobs[d].levels.size())
            : knobs[d].levels.size();
    const auto from = static_cast<std::size_t>(s.levels[d]);
    for (std::size_t l = from + 1; l < last; ++l) {
      Levels next = s.levels;
      next[d] = static_cast<std::uint8_t>(l);
      Terms t = s.terms;
      t.time += time_term(d, l) - time_term(d, from);
      t.risk += risk_term(d, l) - risk_term(d, from);
      t.moves += from == 0 ? 1 : 0;
      t.worst = m_objective == Objective::safest
                    ? terms_of(next).worst  // a maximum: recomputed
                    : 0;
      push(next, t, d, missing);
    }
  }
}

std::optional<Found> Searcher::search(Space& space, Objective objective) {
  Walk walk(space, objective);
  // 1. The start itself.
  const Levels start{};
  if (space.fits(start)) {
    return walk.found_of(start);
  }
  // 2. Seeds: every knob at its most frugal level, on each layout. None
  // fits: nothing does. Each that fits, made minimal, bounds the walk.
  if (!space.possible()) {
    return std::nullopt;
  }
  // The time factors order the rest (computed only now: most counts a
  // search tries cannot fit at all).
  if (!space.ranked) {
    rank(space);
    space.known.clear();  // the levels were renumbered
    space.ranked = true;
  }
  std::vector<Levels> seeds = space.seeds();
  if (seeds.empty()) {
    return std::nullopt;
  }
  walk.descend(std::move(seeds));
  // 3. The walk from the start, bounded by what the seeds found.
  walk.best_first();
  return walk.take_best();
}

std::optional<Found> Searcher::fewest(const Gpu& gpu,
                                      const std::vector<int>& counts,
                                      Objective objective) {
  if (counts.empty()) {
    return std::nullopt;
  }
  // Whether some setup fits is monotone along a chain of counts, bisected
  // for the first where one may; then the counts between it and the link
  // below are bisected too: the fewest GPUs, any number of nodes. Training:
  // every count is a link, more GPUs shard ZeRO's states and FSDP's
  // parameters wider. Inference: a count that divides a larger one can lay
  // out any of its setups there, so the links are the powers of two (and
  // the largest count); a count between two of them holds only the layouts
  // of a power of two below (40 GPUs: tp 8 x dp 5 but no tp 8 x pp 2, which
  // 16 and 32 hold), plus replicas or layer splits.
  auto possible = [&](std::size_t i) {
    return space(gpu, counts[i], std::nullopt).possible();
  };
  std::vector<std::size_t> chain;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (m_base.training() || (counts[i] & (counts[i] - 1)) == 0 ||
        i + 1 == counts.size()) {
      chain.push_back(i);
    }
  }
  if (!possible(chain.back())) {
    return std::nullopt;
  }
  // The first index in [lo, hi] where possible() holds, given it holds at hi.
  auto first_possible = [&](std::size_t lo, std::size_t hi, auto index) {
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (possible(index(mid))) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  };
  const std::size_t link = first_possible(
      0, chain.size() - 1, [&](std::size_t k) { return chain[k]; });
  const std::size_t first =
      first_possible(link == 0 ? 0 : chain[link - 1] + 1, chain[link],
                     [](std::size_t i) { return i; });
  for (std::size_t i = first; i < counts.size(); ++i) {
    if (auto found = best(gpu, counts[i], objective)) {
      return found;
    }
  }
  return std::nullopt;
}

}  // namespace oomplan
