#include "oomplan/advice/search.hpp"

#include "oomplan/model/capability.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <tuple>

// The search. Invariants:
// - every setup it returns was priced by the plan pipeline (price()) on the
//   card and count it names, and fits with the required headroom; nothing is
//   estimated or scaled from a neighbour;
// - a search keeps the job: mode, engine, model, sequence length and global
//   batch stay; its moves are the knobs of DESIGN §2 that do not change what
//   the job computes (they may change how exactly, which is their accuracy
//   risk);
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

// Seconds per token of the whole job (fit's cost per token).
double seconds_per_token(const StepTime& t) {
  return t.tokens_per_step > 0 ? t.step_s / t.tokens_per_step : 0;
}

// What a move costs in time: the training step over the same global batch,
// or the time per output token of one sequence (a layout that trades
// replicas for pipeline stages keeps the latency a user sees).
double step_seconds(const StepTime& t) {
  return t.step_s;
}

// vLLM gpu_memory_utilization values a search tries.
constexpr std::array k_gpu_utils = {0.95, 0.92, 0.9, 0.85, 0.8,
                                    0.75, 0.7,  0.6, 0.5};
// The allocator reserve expandable_segments leaves: segments grow in place,
// so a percent or two remains (PyTorch CUDACachingAllocator
// expandable_segments notes).
constexpr double k_expandable_reserve = 0.02;
// A search's walk gives up after this many candidates on one card and count,
// priced or ruled out by their relaxation (a 70B training search finds its
// answer within a few hundred).
constexpr std::int64_t k_max_evaluated = 600;
// The fitting setups a search's walk compares on their exact time, and the
// frugal seeds (the cheapest layouts) it descends first.
constexpr int k_candidates = 4;
constexpr std::size_t k_seeds = 2;

constexpr std::array k_tp_sizes = {1, 2, 4, 8};
constexpr std::array k_pp_sizes = {1, 2, 4, 8, 16};

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

// One knob of a search: its levels, [0] being the setup as the search found
// it. A level's factor is its step time per token relative to the start
// (estimate_time), used only to order the walk.
struct Searcher::Dim {
  struct Level {
    Move move;
    std::function<void(Setup&)> apply;
    double factor = 1;
  };
  // What the search knows of a knob beyond its levels: the layouts are not
  // nested (ranked by time, one per seed); a side knob's frugal level never
  // needs more memory (Space::relax).
  enum class Role { other, layout, side };
  std::vector<Level> levels;
  std::size_t frugal = 0;              // the level that saves the most memory
  KnobScope scope = KnobScope::plain;  // the search scope that adds it
  Role role = Role::other;
};

namespace {

std::string dtype_text(Dtype d) {
  return std::string(dtype_name(d));
}

}  // namespace

Searcher::Searcher(const Model& model, const Setup& base,
                   const SearchScope& scope, std::optional<KnobScope> required)
    : m_model(model), m_base(base), m_scope(scope), m_required(required) {}

std::vector<Searcher::Dim> Searcher::dims(const Gpu& gpu,
                                          const Setup& start) const {
  const Model& m = m_model;
  const Resolved r = resolve(m, gpu, start);
  std::vector<Dim> out;
  // `frugal`: the index of the level the frugal order starts from, or
  // k_last_level (the levels' own count is unknown once they are moved).
  constexpr std::size_t k_last_level = std::numeric_limits<std::size_t>::max();
  using Role = Dim::Role;
  auto add = [&out](std::vector<Dim::Level> levels, std::size_t frugal,
                    KnobScope scope = KnobScope::plain,
                    Role role = Role::other) {
    if (!levels.empty()) {
      Dim d;
      d.scope = scope;
      d.role = role;
      d.levels.push_back({});
      for (auto& l : levels) {
        d.levels.push_back(std::move(l));
      }
      d.frugal = frugal == k_last_level
                     ? d.levels.size() - 1
                     : std::min(frugal + 1, d.levels.size() - 1);
      out.push_back(std::move(d));
    }
  };
  auto one = [](std::string id, std::string title, Risk risk,
                std::function<void(Setup&)> apply, double effort = 0) {
    return Dim::Level{
        {std::move(id), std::move(title), risk, effort}, std::move(apply), 1};
  };
  // Training layouts beyond data parallelism need a Megatron-style stack.
  constexpr double k_layout_effort = 0.25;
  const int total = r.total_gpus();
  const bool vllm = r.engine == Engine::vllm && !r.training();

  // Layouts on the same GPUs: tensor parallel inside a node, pipelines
  // across; --split layers for transformers inference.
  if (m_scope.layouts && total > 1) {
    std::vector<Dim::Level> layouts;
    const std::int64_t global =
        std::int64_t{r.grad_accum} * std::max(1, r.dp());
    for (const int tp : k_tp_sizes) {
      for (const int pp : k_pp_sizes) {
        if (tp > r.gpus || tp * pp > total || total % (tp * pp) != 0 ||
            (tp == r.tp && pp == r.pp && !r.split_layers)) {
          continue;
        }
        const int dp = total / (tp * pp);
        if (r.training() && global % dp != 0) {
          continue;  // would change the global batch
        }
        layouts.push_back(one(
            "layout",
            fmt::format("tp {} x pp {} x dp {} on the same {} GPUs", tp, pp, dp,
                        total),
            Risk::none,
            [tp, pp](Setup& s) {
              s.tp = tp;
              s.pp = pp;
              s.split_layers = false;
            },
            r.training() ? k_layout_effort : 0.0));
      }
    }
    if (!r.training() && !vllm && !r.split_layers && r.nodes == 1) {
      layouts.push_back(one("split-layers",
                            "whole layers per GPU (device_map=\"auto\")",
                            Risk::none, [](Setup& s) {
                              s.split_layers = true;
                              s.tp.reset();
                              s.pp = 1;
                            }));
    }
    add(std::move(layouts), 0, KnobScope::plain, Role::layout);
  }

  if (r.training()) {
    if (!start.fsdp && r.zero < 3) {
      std::vector<Dim::Level> stages;
      for (int stage = r.zero + 1; stage <= 3; ++stage) {
        stages.push_back(
            one("zero-stage", fmt::format("ZeRO stage {} -> {}", r.zero, stage),
                Risk::none, [stage](Setup& s) { s.zero = stage; }));
      }
      add(std::move(stages), k_last_level);
    }
    std::vector<Dim::Level> ckpt;
    if (r.checkpointing < Checkpointing::selective) {
      ckpt.push_back(
          one("checkpointing-selective",
              "selective activation recomputation (attention core)", Risk::none,
              [](Setup& s) { s.checkpointing = Checkpointing::selective; }));
    }
    if (r.checkpointing < Checkpointing::full) {
      ckpt.push_back(
          one("checkpointing-full",
              "full activation checkpointing (layer inputs only)", Risk::none,
              [](Setup& s) { s.checkpointing = Checkpointing::full; }));
    }
    add(std::move(ckpt), 1, KnobScope::plain, Role::side);
    if (r.loss != Loss::chunked) {
      add({one("chunked-loss", "chunked cross-entropy (no full fp32 logits)",
               Risk::none, [](Setup& s) { s.loss = Loss::chunked; })},
          0);
    }
    if (r.batch > 1 && !r.optimizer_in_bwd) {
      // Smaller micro-batches, the global batch kept by gradient
      // accumulation: divisors of the micro-batch, largest first.
      std::vector<Dim::Level> batches;
      for (std::int64_t b = r.batch - 1; b >= 1; --b) {
        if (r.batch % b != 0) {
          continue;
        }
        const std::int64_t more = std::int64_t{r.grad_accum} * (r.batch / b);
        if (more > k_max_grad_accum) {
          continue;  // beyond what --grad-accum takes (options.hpp)
        }
        const int accum = static_cast<int>(more);
        batches.push_back(
            one("micro-batch",
                fmt::format("micro-batch {} -> {}, grad-accum {} -> {}",
                            r.batch, b, r.grad_accum, accum),
                Risk::none, [b](Setup& s) { s.batch = b; }));
      }
      add(std::move(batches), k_last_level);
    }
    if (m_scope.quantize && (r.optimizer == Optimizer::adamw ||
                             r.optimizer == Optimizer::paged_adamw)) {
      const Optimizer to = r.optimizer == Optimizer::adamw
                               ? Optimizer::adamw_8bit
                               : Optimizer::paged_adamw_8bit;
      add({one("optimizer-8bit", "8-bit AdamW states (bitsandbytes)", Risk::low,
               [to](Setup& s) { s.optimizer = to; })},
          0, KnobScope::quantize);
    }
    if (m_scope.quantize && r.precision == Precision::mixed &&
        r.dtype != Dtype::fp32) {
      add({one("pure-bf16",
               fmt::format("pure {} training (no fp32 master weights)",
                           dtype_text(r.dtype)),
               Risk::low, [](Setup& s) { s.precision = Precision::pure; })},
          0, KnobScope::quantize);
    }
    if (m_scope.offload) {
      std::vector<Dim::Level> offload;
      if (r.offload == Offload::none) {
        offload.push_back(one(
            "offload-optimizer", "optimizer states in CPU RAM (ZeRO-Offload)",
            Risk::none, [](Setup& s) { s.offload = Offload::optimizer; }));
        offload.push_back(
            one("offload-params",
                "weights in CPU RAM (ZeRO-Infinity offload_param)", Risk::none,
                [](Setup& s) { s.offload = Offload::params; }));
      }
      if (r.offload != Offload::all) {
        offload.push_back(one("offload-all",
                              "weights, gradients and optimizer states in CPU "
                              "RAM (ZeRO-Infinity / FSDP CPU offload)",
                              Risk::none,
                              [](Setup& s) { s.offload = Offload::all; }));
      }
      add(std::move(offload), k_last_level, KnobScope::offload);
      if (!r.activation_offload) {
        // torchtune offloads the checkpointed layer inputs on a side stream
        // and recommends it only with checkpointing on
        // (docs/source/tutorials/memory_optimizations.rst).
        add({one("activation-offload",
                 "checkpointed layer inputs in CPU RAM (overlapped)",
                 Risk::none, [](Setup& s) { s.activation_offload = true; })},
            0, KnobScope::offload);
      }
    }
    if (!r.sequence_parallel && r.gpus > 1) {
      add({one("sequence-parallel",
               "sequence parallelism over the tensor-parallel group",
               Risk::none, [](Setup& s) { s.sequence_parallel = true; })},
          0);
    }
  }

  if (!vllm) {
    if (r.attn != Attn::flash && runs_flash_attention(gpu)) {
      add({one("flash-attention", "flash attention (no s^2 score matrix)",
               Risk::none, [](Setup& s) { s.attn = Attn::flash; })},
          0);
    } else if (r.attn == Attn::eager) {
      add({one("sdpa-attention", "SDPA memory-efficient attention", Risk::none,
               [](Setup& s) { s.attn = Attn::sdpa; })},
          0);
    }
    if (!r.reserve || *r.reserve > k_expandable_reserve) {
      add({one("expandable-segments",
               "expandable segments (less allocator fragmentation)", Risk::none,
               [](Setup& s) { s.reserve = k_expandable_reserve; })},
          0, KnobScope::plain, r.training() ? Role::side : Role::other);
    }
  }
  if (r.dtype == Dtype::fp32) {
    const Dtype half = runs_bf16(gpu) ? Dtype::bf16 : Dtype::fp16;
    add({one("half-precision",
             fmt::format("{} instead of fp32", dtype_text(half)), Risk::low,
             [half](Setup& s) { s.dtype = half; })},
        0);
  }

  if (!r.training()) {
    if (m_scope.quantize && r.quant == Quant::none) {
      std::vector<Dim::Level> formats;
      for (const Quant q : quantization_options(gpu, r.engine)) {
        const bool four = quant_bits(q) == 4;
        formats.push_back(one(
            four ? "quantize-4bit" : fmt::format("quantize-{}", quant_name(q)),
            four ? (vllm ? "4-bit AWQ weights" : "4-bit NF4 weights")
                 : fmt::format("{} weights", quant_name(q)),
            four ? Risk::moderate : Risk::low, [q](Setup& s) { s.quant = q; }));
      }
      add(std::move(formats), k_last_level, KnobScope::quantize);
    }
    if (vllm) {
      std::vector<double> utils(k_gpu_utils.begin(), k_gpu_utils.end());
      std::erase_if(utils,
                    [&](double u) { return std::abs(u - r.gpu_util) < 1e-9; });
      std::stable_sort(utils.begin(), utils.end(), [&](double a, double b) {
        return std::abs(a - r.gpu_util) < std::abs(b - r.gpu_util);
      });
      std::vector<Dim::Level> levels;
      std::size_t frugal = 0;
      for (const double u : utils) {
        if (u == k_gpu_utils.front()) {
          frugal = levels.size();
        }
        levels.push_back(one("gpu-util",
                             fmt::format("gpu-util {} -> {}", r.gpu_util, u),
                             Risk::none, [u](Setup& s) { s.gpu_util = u; }));
      }
      add(std::move(levels), frugal);
      if (m_scope.quantize && r.kv_dtype != Dtype::fp8 &&
          gpu.compute_capability >= k_cc_ampere) {
        add({one("fp8-kv-cache", "fp8 KV cache (half the bytes per token)",
                 Risk::low, [](Setup& s) { s.kv_dtype = Dtype::fp8; })},
            0, KnobScope::quantize);
      }
      if (!r.enforce_eager) {
        add({one("enforce-eager", "no CUDA graphs (--enforce-eager)",
                 Risk::none, [](Setup& s) { s.enforce_eager = true; })},
            0);
      }
      std::vector<Dim::Level> seqs;
      for (std::int64_t n = r.max_num_seqs / 2; n >= 16; n /= 2) {
        seqs.push_back(
            one("max-num-seqs",
                fmt::format("max-num-seqs {} -> {} (fewer requests at once)",
                            r.max_num_seqs, n),
                Risk::none, [n](Setup& s) { s.max_num_seqs = n; }));
      }
      add(std::move(seqs), k_last_level);
      if (r.vllm_version != VllmEra::v0) {
        std::vector<Dim::Level> tokens;
        for (std::int64_t n = r.max_num_batched_tokens / 2; n >= 1024; n /= 2) {
          tokens.push_back(one(
              "max-num-batched-tokens",
              fmt::format("max-num-batched-tokens {} -> {} (smaller prefill "
                          "chunks)",
                          r.max_num_batched_tokens, n),
              Risk::none, [n](Setup& s) { s.max_num_batched_tokens = n; }));
        }
        add(std::move(tokens), k_last_level);
      }
    } else if (m_scope.offload && r.offload == Offload::none) {
      add({one("cpu-offload",
               "weights in CPU RAM, streamed to the GPU every step", Risk::none,
               [](Setup& s) { s.offload = Offload::params; })},
          0, KnobScope::offload);
    }
  }

  return out;
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
  std::vector<Dim> knobs;
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
    // torchtune offloads the checkpointed inputs only.
    if (!setup || (setup->activation_offload && !start.activation_offload &&
                   setup->checkpointing != Checkpointing::full)) {
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
      if (knobs[d].role == Dim::Role::side) {
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
      if (knobs[d].role == Dim::Role::layout) {
        layout = d;
      }
    }
    const std::size_t layouts = layout ? knobs[*layout].levels.size() : 1;
    std::vector<Levels> out(layouts, frugal);
    for (std::size_t l = 0; layout && l < layouts; ++l) {
      out[l][*layout] = static_cast<std::uint8_t>(l);
    }
    return out;
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
  std::vector<Dim>& knobs = space.knobs;
  // Each level's time factor against the start, for the walk's order.
  const double base =
      step_seconds(estimate_time(m, gpu, resolve(m, gpu, start)));
  for (Dim& d : knobs) {
    for (std::size_t i = 1; i < d.levels.size(); ++i) {
      Setup s = start;
      d.levels[i].apply(s);
      // With the global batch kept, as the space prices it (a layout that
      // cannot keep it is never priced: its factor does not matter).
      space.keep_global_batch(s);
      const double t = step_seconds(estimate_time(m, gpu, resolve(m, gpu, s)));
      d.levels[i].factor = base > 0 && t > 0 ? t / base : 1.0;
    }
    // A walk steps through a knob's levels in order: layouts are not
    // nested, so they go cheapest first.
    if (d.levels.size() > 2 && d.role == Dim::Role::layout) {
      std::stable_sort(d.levels.begin() + 1, d.levels.end(),
                       [](const Dim::Level& a, const Dim::Level& b) {
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
  {
    // The last few cards and counts stay (a bisection comes back to them).
    if (m_spaces.size() >= 4) {
      m_spaces.erase(m_spaces.begin());
    }
    m_spaces.push_back(std::make_shared<Space>());
    auto& m_space = m_spaces.back();
    m_space->model = &m_model;
    m_space->counts = &m_counts;
    m_space->gpu = &gpu;
    m_space->count = count;
    m_space->need = need;
    m_space->required = m_required;
    m_space->start = with_gpu_count(m_base, count, m_model);
    m_space->knobs = dims(gpu, m_space->start);
    if (m_space->start.training()) {
      const Resolved r = resolve(m_model, gpu, m_space->start);
      m_space->global_batch =
          std::int64_t{r.batch} * r.grad_accum * std::max(1, r.dp());
    }
    if (m_space->knobs.size() > k_max_knobs) {
      m_space->knobs.resize(k_max_knobs);
    }
    return *m_space;
  }
}

std::optional<Found> Searcher::best(const Gpu& gpu, int count,
                                    Objective objective,
                                    std::optional<double> headroom_share) {
  return search(space(gpu, count, headroom_share), objective);
}

std::optional<Found> Searcher::search(Space& space, Objective objective) {
  const Gpu& gpu = *space.gpu;
  const Setup& start = space.start;
  std::vector<Dim>& knobs = space.knobs;
  auto setup_of = [&](const Levels& levels) { return space.setup_of(levels); };
  auto fits = [&](const Levels& levels) { return space.fits(levels); };
  auto& known = space.known;
  // Time deltas add: each move lengthens one term of the step (compute,
  // communication, offload traffic), and a term that dominates is not
  // multiplied by the others. The terms are sums over the knobs, so the walk
  // updates them one knob at a time.
  auto level_of = [&](std::size_t d, std::size_t l) -> const Dim::Level& {
    return knobs[d].levels[l];
  };
  auto time_term = [&](std::size_t d, std::size_t l) {
    return std::max(1.0, level_of(d, l).factor) - 1;
  };
  auto risk_term = [&](std::size_t d, std::size_t l) {
    const Move& m = level_of(d, l).move;
    return l > 0 ? risk_weight(m.risk) + m.effort : 0.0;
  };
  auto terms_of = [&](const Levels& levels) {
    Terms t;
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      const auto l = static_cast<std::size_t>(levels[d]);
      t.time += time_term(d, l);
      t.risk += risk_term(d, l);
      t.worst = std::max(
          t.worst, l > 0 ? static_cast<int>(level_of(d, l).move.risk) : 0);
      t.moves += l > 0 ? 1 : 0;
    }
    return t;
  };
  auto priority_of = [&](const Terms& t) {
    switch (objective) {
      case Objective::fastest:
        return t.time;
      case Objective::safest:
        return 1000.0 * t.worst + t.time;
      case Objective::balanced:
        break;
    }
    return t.time * (1 + t.risk);
  };
  auto priority = [&](const Levels& levels) {
    return priority_of(terms_of(levels));
  };

  // Minimal: undo each move (or lower it) while the rest still fits, the
  // dearest moves first.
  std::vector<std::size_t> dearest(knobs.size());
  for (std::size_t d = 0; d < knobs.size(); ++d) {
    dearest[d] = d;
  }
  std::stable_sort(dearest.begin(), dearest.end(),
                   [&](std::size_t a, std::size_t b) {
                     const auto top = [&](std::size_t d) {
                       double f = 1;
                       for (const auto& l : knobs[d].levels) {
                         f = std::max(f, l.factor + risk_weight(l.move.risk));
                       }
                       return f;
                     };
                     return top(a) > top(b);
                   });
  auto minimal = [&](Levels levels) {
    for (bool changed = true; changed;) {
      changed = false;
      for (const std::size_t d : dearest) {
        for (std::uint8_t lower = 0; lower < levels[d]; ++lower) {
          auto trial = levels;
          trial[d] = lower;
          if (fits(trial)) {
            levels = trial;
            changed = true;
            break;
          }
        }
      }
    }
    return levels;
  };
  auto found_of = [&](const Levels& levels) {
    Pricing p = price(m_model, gpu, *setup_of(levels));
    Found out;
    out.gpu = &gpu;
    out.request = p.priced->request;
    out.setup = p.priced->setup;
    out.budget = std::move(p.priced->budget);
    out.time = estimate_time(m_model, gpu, out.setup, out.budget);
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      if (levels[d] > 0) {
        const Move& move =
            knobs[d].levels[static_cast<std::size_t>(levels[d])].move;
        out.moves.push_back(move);
        out.risk = std::max(out.risk, move.risk);
      }
    }
    return out;
  };
  // The objective on a found setup's exact time.
  const double base_spt =
      step_seconds(estimate_time(m_model, gpu, resolve(m_model, gpu, start)));
  auto exact = [&](const Found& f) {
    const double spt = step_seconds(f.time);
    const double time = base_spt > 0 && spt > 0 ? spt / base_spt : 1.0;
    switch (objective) {
      case Objective::fastest:
        return time;
      case Objective::safest:
        return 1000.0 * static_cast<double>(f.risk) + time;
      case Objective::balanced:
        break;
    }
    return balanced_cost(time, f.moves);
  };
  std::optional<Found> best_found;
  double best_cost = 0;
  double bound = 0;  // the walk's priority above which nothing is cheaper
  auto consider = [&](const Levels& fitting) {
    const Levels levels = minimal(fitting);
    Found f = found_of(levels);
    // Within 2 % the fewer moves win: an expert keeps a setup simple.
    const double cost = exact(f);
    const bool fewer = best_found && f.moves.size() < best_found->moves.size();
    if (!best_found || cost < best_cost * (fewer ? 1.02 : 0.98)) {
      best_found = std::move(f);
      best_cost = cost;
      bound = priority(levels);
    }
  };

  // 1. The start itself.
  const Levels zero{};
  if (fits(zero)) {
    return found_of(zero);
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
    known.clear();  // the levels were renumbered
    space.ranked = true;
  }
  std::vector<Levels> seeds = space.seeds();
  if (seeds.empty()) {
    return std::nullopt;
  }
  // The cheapest seeds (their layouts' time factors) are descended.
  std::stable_sort(
      seeds.begin(), seeds.end(),
      [&](const auto& a, const auto& b) { return priority(a) < priority(b); });
  for (std::size_t i = 0; i < seeds.size() && i < k_seeds; ++i) {
    consider(seeds[i]);
  }

  // 3. A best-first walk from the start over cheaper setups: the first few
  // that fit are made minimal and compared on their exact cost.
  std::priority_queue<State, std::vector<State>, std::greater<>> open;
  LevelsTable<bool> seen;
  std::int64_t order = 0;
  auto push = [&](const Levels& levels, const Terms& terms, std::size_t moved,
                  std::optional<Bytes> parent_short) {
    const double p = priority_of(terms);
    if (p >= bound || !seen.insert(levels, true)) {
      return;  // no cheaper than what the seeds found, or seen
    }
    open.push(State{p, terms, order++, levels, moved, parent_short});
  };
  // A knob whose levels only get dearer is walked one level at a time.
  std::array<bool, k_max_knobs> monotone{};
  monotone.fill(true);
  for (std::size_t d = 0; d < knobs.size(); ++d) {
    for (std::size_t l = 2; l < knobs[d].levels.size(); ++l) {
      const auto cost = [&](std::size_t i) {
        const Dim::Level& v = knobs[d].levels[i];
        return std::max(1.0, v.factor) + risk_weight(v.move.risk) +
               v.move.effort;
      };
      if (cost(l) < cost(l - 1)) {
        monotone[d] = false;
      }
    }
  }
  push(zero, terms_of(zero), 0, std::nullopt);
  int candidates = 0;
  const std::int64_t first_evaluated = m_counts.evaluated();
  while (!open.empty() &&
         m_counts.evaluated() - first_evaluated < k_max_evaluated &&
         candidates < k_candidates) {
    const State s = open.top();
    open.pop();
    if (s.priority >= bound) {
      continue;
    }
    if (fits(s.levels)) {
      ++candidates;
      consider(s.levels);
      continue;  // setups above one that fits only add moves
    }
    // A move that saved nothing here is walked no further than its own
    // knob's next levels: the setups it leads to with other moves are
    // reached, cheaper, without it (the walk is over sets of moves).
    const std::optional<Bytes> missing = space.short_bytes(s.levels);
    const bool saved_nothing =
        missing && s.parent_short && *missing >= *s.parent_short;
    // Ruled out by its relaxation: a side knob moved further leads to
    // setups of the same relaxation, which miss too.
    const bool relaxed = space.known.find(s.levels)->relaxed;
    // Each knob may jump to any of its further levels: a level dearer than
    // the bound must not hide a cheaper one behind it (a faster 4-bit
    // format behind a slower 8-bit one).
    for (std::size_t d = 0; d < knobs.size(); ++d) {
      if ((saved_nothing && d != s.moved) ||
          (relaxed && knobs[d].role == Dim::Role::side)) {
        continue;
      }
      const std::size_t last =
          monotone[d]
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
        t.worst = objective == Objective::safest
                      ? terms_of(next).worst  // a maximum: recomputed
                      : 0;
        push(next, t, d, missing);
      }
    }
  }
  return best_found;
}

std::optional<Found> Searcher::fewest(const Gpu& gpu,
                                      const std::vector<int>& counts,
                                      Objective objective) {
  if (counts.empty()) {
    return std::nullopt;
  }
  // More GPUs never need more memory per GPU for the same job, so whether
  // any setup fits is monotone in the count: bisect for the first count
  // where one may, then search from there.
  auto possible = [&](std::size_t i) {
    return space(gpu, counts[i], std::nullopt).possible();
  };
  std::size_t lo = 0;
  std::size_t hi = counts.size() - 1;
  if (!possible(hi)) {
    return std::nullopt;
  }
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (possible(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  for (std::size_t i = lo; i < counts.size(); ++i) {
    if (auto found = best(gpu, counts[i], objective)) {
      return found;
    }
  }
  return std::nullopt;
}

// --- `oomplan fit`.

namespace {

// Lower is better. Serving: the cost of one request of max-model-len tokens
// the KV cache holds at once (GPUs, or dollars an hour, per concurrent
// request); else the GPU-seconds (or dollars) per token.
double rank_key(const FitPlan& p) {
  const double gpus = p.setup.total_gpus();
  const double price = p.usd_per_gpu_hour.value_or(1.0);
  if (p.setup.engine == Engine::vllm && !p.setup.training()) {
    return p.max_concurrency > 0 ? gpus * price / p.max_concurrency : 1e30;
  }
  return seconds_per_token(p.time) * gpus * price;
}

// Whether a plan keeps anything in CPU memory (fit ranks those last).
bool offloads(const FitPlan& p) {
  return p.setup.offload != Offload::none || p.setup.activation_offload;
}

}  // namespace

FitResult fit(const Model& model, const std::vector<FitCard>& cards,
              const Setup& base, const FitConstraints& constraints) {
  // Three searches, from the plain to the frugal: the knobs that cost only
  // time; then also the formats with an accuracy risk; then also CPU offload.
  // The later ones matter only where they need fewer GPUs.
  const SearchScope plain{.layouts = true, .quantize = false, .offload = false};
  const SearchScope quantized{
      .layouts = true, .quantize = true, .offload = false};
  const SearchScope offloaded{
      .layouts = true, .quantize = !constraints.no_quant, .offload = true};
  Searcher plain_search(model, base, plain);
  // Each runs only on counts where the plainer ones found nothing, so a
  // setup of the plainer scope alone is known not to fit there (whether any
  // setup fits is monotone in the count: fewest()), and is not priced.
  Searcher quant_search(model, base, quantized, KnobScope::quantize);
  Searcher offload_search(model, base, offloaded, KnobScope::offload);
  FitResult result;
  result.base = base;
  result.max_gpus = constraints.max_gpus;
  std::vector<FitPlan> plans;
  auto keep = [&](const FitCard& card, Found found) {
    FitPlan p;
    p.gpu = card.gpu;
    p.request = found.request;
    p.setup = found.setup;
    if (card.usd_per_gpu_hour && !p.request.price) {
      // The card's own price for its cost per token.
      p.request.price = card.usd_per_gpu_hour;
      p.setup.price = card.usd_per_gpu_hour;
      found.time = estimate_time(model, *card.gpu, p.setup, found.budget);
    }
    p.total_bytes = found.budget.total_bytes();
    p.headroom_bytes = found.budget.headroom_bytes();
    p.host_bytes = found.budget.host_bytes;
    p.fits = true;
    p.time = found.time;
    p.moves = found.moves;
    p.risk = found.risk;
    p.usd_per_gpu_hour = card.usd_per_gpu_hour;
    if (found.budget.vllm) {
      p.kv_tokens = found.budget.vllm->kv_tokens;
      p.max_concurrency = found.budget.vllm->max_concurrency;
    }
    plans.push_back(std::move(p));
  };
  auto below = [](const std::vector<int>& counts, int limit) {
    std::vector<int> out;
    for (const int n : counts) {
      if (n < limit) {
        out.push_back(n);
      }
    }
    return out;
  };
  // Per card, the counts offload may still search: those below the fewest
  // GPUs the plainer searches found.
  std::vector<std::vector<int>> offload_counts(cards.size());
  for (std::size_t c = 0; c < cards.size(); ++c) {
    const FitCard& card = cards[c];
    if (card.gpu == nullptr) {
      continue;
    }
    const std::vector<int> counts = card.count > 0
                                        ? std::vector<int>{card.count}
                                        : gpu_counts(constraints.max_gpus);
    int limit = constraints.max_gpus + 1;
    if (auto found =
            plain_search.fewest(*card.gpu, counts, Objective::balanced)) {
      limit = found->setup.total_gpus();
      // A larger count can be cheaper per token once memory is no longer
      // tight (fewer recomputations): the next count, when 5 % cheaper.
      const auto cost = [](const Found& f) {
        return seconds_per_token(f.time) * f.setup.total_gpus();
      };
      const double fewest_cost = cost(*found);
      keep(card, std::move(*found));
      for (const int n : counts) {
        if (n > limit) {
          auto next = plain_search.best(*card.gpu, n, Objective::balanced);
          if (next && cost(*next) < fewest_cost * 0.95) {
            keep(card, std::move(*next));
          }
          break;
        }
      }
    }
    if (!constraints.no_quant) {
      if (auto found = quant_search.fewest(*card.gpu, below(counts, limit),
                                           Objective::balanced)) {
        limit = found->setup.total_gpus();
        keep(card, std::move(*found));
      }
    }
    offload_counts[c] = below(counts, limit);
  }
  // Plans with CPU offload rank after every plan without it: they are
  // searched only when fewer than --top plans without it were found (in
  // card order, as they would have been appended).
  const auto without_offload =
      std::count_if(plans.begin(), plans.end(),
                    [](const FitPlan& p) { return !offloads(p); });
  const bool offload_shown = without_offload < constraints.top;
  if (!constraints.no_offload && offload_shown) {
    for (std::size_t c = 0; c < cards.size(); ++c) {
      if (cards[c].gpu == nullptr) {
        continue;
      }
      if (auto found = offload_search.fewest(*cards[c].gpu, offload_counts[c],
                                             Objective::balanced)) {
        keep(cards[c], std::move(*found));
      }
    }
  }
  result.evaluated =
      plain_search.priced() + quant_search.priced() + offload_search.priced();
  result.front = static_cast<std::int64_t>(plans.size());
  std::stable_sort(
      plans.begin(), plans.end(), [](const FitPlan& a, const FitPlan& b) {
        const bool oa = offloads(a);
        const bool ob = offloads(b);
        if (oa != ob) {
          return ob;  // CPU offload last
        }
        if (a.risk != b.risk) {
          return a.risk < b.risk;
        }
        // Cost in 5 % buckets, then the fewest GPUs.
        const auto bucket = [](const FitPlan& p) {
          const double k = rank_key(p);
          return k > 0 ? std::floor(std::log(k) / std::log(1.05)) : 0.0;
        };
        if (bucket(a) != bucket(b)) {
          return bucket(a) < bucket(b);
        }
        return a.setup.total_gpus() < b.setup.total_gpus();
      });
  if (plans.size() > static_cast<std::size_t>(std::max(constraints.top, 0))) {
    plans.resize(static_cast<std::size_t>(std::max(constraints.top, 0)));
  }
  result.plans = std::move(plans);
  return result;
}

}  // namespace oomplan
