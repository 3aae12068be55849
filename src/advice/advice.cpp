#include "oomplan/advice/advice.hpp"

#include "oomplan/advice/capability.hpp"
#include "oomplan/launch/launch.hpp"
#include "oomplan/model/capability.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

// The advisor. Invariants:
// - every fix is a setup the search (or a change of the job) found and the
//   plan pipeline priced; no budget is edited by hand;
// - a same-hardware fix keeps the cards and the job; its moves are minimal;
// - groups come in DESIGN's order (same-hardware, more-gpus, other-gpus,
//   change-job) with a switch of framework or engine after the same-hardware
//   fixes (or first: place_switch), and within a group the cheapest first;
// - each cost clause (time, host RAM, accuracy, hardware, job) appears once,
//   each framework's launch block once; deterministic.

namespace oomplan {
namespace {

// The other cards proposed, at most.
constexpr std::size_t k_other_cards = 3;

// A fix's time: the training step over the same global batch, or the time
// per output token of one sequence.
double step_seconds(const StepTime& t) {
  return t.step_s;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& part : parts) {
    if (part.empty()) {
      continue;
    }
    if (!out.empty()) {
      out += sep;
    }
    out += part;
  }
  return out;
}

std::string gib_text(Bytes bytes) {
  return fmt::format("{:.0f} GiB", to_gib(bytes));
}

// --- Launch blocks: the user's framework's files for the fixed setup,
// written from the resolved setup by the launch writers (launch.hpp).

bool has(const std::vector<Move>& moves, std::string_view id) {
  return std::any_of(moves.begin(), moves.end(),
                     [id](const Move& m) { return m.id == id; });
}

// The blocks, or none with the reason in `cost` when the framework cannot
// express a setting of the fix (pasting them would plan another setup).
std::vector<LaunchBlock> launch_blocks(Framework framework, const Model& model,
                                       const Resolved& s,
                                       const std::vector<Move>& moves,
                                       std::vector<std::string>& cost) {
  LaunchWriting w = write_launch(framework, s, model);
  if (!w.unwritten.empty()) {
    cost.push_back(fmt::format("no {} launch: {}", framework_name(framework),
                               join(w.unwritten, "; ")));
    return {};
  }
  if (has(moves, "upgrade-transformers")) {
    w.blocks.push_back(
        {"environment", "pip install --upgrade 'transformers>=4.45'", ""});
  }
  if (has(moves, "expandable-segments")) {
    // PyTorch's caching allocator (c10/cuda/CUDAAllocatorConfig.h).
    w.blocks.push_back({"environment",
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                        ""});
  }
  return std::move(w.blocks);
}

// --- Fixes.

struct Ctx {
  const Model& model;
  const Gpu& gpu;
  const Setup& base;
  const Priced& priced;  // the plan as asked
  StepTime time;         // and its time
  const std::vector<Gpu>& cards;
  const std::vector<std::optional<double>>& prices;  // per card, USD/GPU-h

  // USD per GPU-hour of `card`: the user's --price on the user's card, else
  // the catalog's on-demand price; nullopt when neither is known.
  std::optional<double> price_of(const Gpu& card) const {
    if (&card == &gpu && base.price) {
      return base.price;
    }
    for (std::size_t i = 0; i < cards.size() && i < prices.size(); ++i) {
      if (cards[i].name == card.name) {
        return prices[i];
      }
    }
    return std::nullopt;
  }
};

// Sequences per optimizer step (training): batch x grad-accum x dp.
std::int64_t global_batch(const Resolved& s) {
  return std::int64_t{s.batch} * s.grad_accum * std::max(1, s.dp());
}

// Seconds per token of the whole job: what a layout with another global
// batch is compared on.
double seconds_per_token(const StepTime& t) {
  return t.tokens_per_step > 0 ? t.step_s / t.tokens_per_step : 0;
}

// The hardware clause of a more-gpus or other-gpus fix: the cards, and the
// GPU-hours and dollars per token against the plan's (`per_token`: time per
// token relative to the plan's, so a grown global batch is not counted as
// a slower step).
std::string hardware_clause(const Ctx& c, const Gpu& gpu, int new_gpus,
                            double per_token) {
  const int old_gpus = c.priced.setup.total_gpus();
  const double gpu_hours = per_token * new_gpus / old_gpus;
  std::string text =
      fmt::format("{} x {} instead of {} x {}, {:.2f}x the GPU-hours per token",
                  new_gpus, gpu.name, old_gpus, c.gpu.name, gpu_hours);
  const auto old_price = c.price_of(c.gpu);
  const auto new_price = c.price_of(gpu);
  if (old_price && new_price) {
    text += fmt::format(
        ", ${:.2f}/h instead of ${:.2f}/h, {:.2f}x the cost per token",
        *new_price * new_gpus, *old_price * old_gpus,
        gpu_hours * *new_price / *old_price);
  }
  return text;
}

// `same_batch`: a training factor is per step of the same global batch, else
// per token.
std::string time_clause(double factor, bool training, bool same_batch) {
  const char* unit = !training    ? "per output token"
                     : same_batch ? "per step"
                                  : "per token";
  if (std::abs(factor - 1) < 0.02) {
    return "same speed";
  }
  if (factor < 1) {
    return fmt::format("{:.0f} % faster {}", (1 - factor) * 100, unit);
  }
  return fmt::format("+{:.0f} % time {}", (factor - 1) * 100, unit);
}

std::string risk_clause(const std::vector<Move>& moves) {
  Risk worst = Risk::none;
  std::vector<std::string> which;
  for (const Move& m : moves) {
    if (m.risk != Risk::none) {
      worst = std::max(worst, m.risk);
      which.push_back(m.title);
    }
  }
  if (worst == Risk::none) {
    return {};
  }
  return fmt::format("{} accuracy risk ({})", risk_name(worst),
                     join(which, ", "));
}

// vLLM: the requests of max-model-len the KV pool holds at once after the
// fix, against the plan's (vLLM's "Maximum concurrency" log line).
std::string concurrency_clause(const Ctx& c, const Budget& budget) {
  if (!budget.vllm || budget.vllm->max_concurrency <= 0) {
    return {};
  }
  const double before =
      c.priced.budget.vllm ? c.priced.budget.vllm->max_concurrency : 0.0;
  if (before <= 0) {
    return fmt::format("{:.2f}x concurrency", budget.vllm->max_concurrency);
  }
  return fmt::format("{:.2f}x concurrency instead of {:.2f}x",
                     budget.vllm->max_concurrency, before);
}

Fix make_fix(const Ctx& c, FixGroup group, std::string id, std::string title,
             const Gpu& gpu, const Setup& request, const Resolved& setup,
             const Budget& budget, const StepTime& time,
             const std::vector<Move>& moves, const std::string& job_change) {
  Fix fix;
  fix.group = group;
  fix.id = std::move(id);
  fix.title = std::move(title);
  fix.request = request;
  fix.setup = setup;
  fix.gpu = &gpu;
  fix.total_bytes = budget.total_bytes();
  fix.fits = budget.fits_with_margin();
  fix.saves_bytes = c.priced.budget.total_bytes() - fix.total_bytes;
  fix.host_bytes = budget.host_bytes;
  fix.host_capacity_bytes = budget.host_capacity_bytes;
  const double before = step_seconds(c.time);
  const double after = step_seconds(time);
  fix.step_factor = before > 0 && after > 0 ? after / before : 1.0;
  // A layout whose global batch differs is compared per token, never per
  // step of a different batch.
  const bool same_batch =
      !setup.training() || global_batch(setup) == global_batch(c.priced.setup);
  const double token_before = seconds_per_token(c.time);
  const double token_after = seconds_per_token(time);
  const double per_token =
      setup.training() && token_before > 0 && token_after > 0
          ? token_after / token_before
          : fix.step_factor;
  if (!same_batch) {
    fix.step_factor = per_token;
  }
  for (const Move& m : moves) {
    fix.risk = std::max(fix.risk, m.risk);
  }
  std::vector<std::string> cost = {
      time_clause(fix.step_factor, setup.training(), same_batch)};
  if (budget.host_bytes > 0) {
    cost.push_back(
        budget.host_capacity_bytes
            ? fmt::format("{} host RAM per node (of {})",
                          gib_text(budget.host_bytes),
                          gib_text(*budget.host_capacity_bytes))
            : fmt::format("{} host RAM per node", gib_text(budget.host_bytes)));
  }
  cost.push_back(risk_clause(moves));
  cost.push_back(concurrency_clause(c, budget));
  const int new_gpus = setup.total_gpus();
  if (group == FixGroup::more_gpus || group == FixGroup::other_gpus) {
    cost.push_back(hardware_clause(c, gpu, new_gpus, per_token));
  }
  if (!job_change.empty()) {
    cost.push_back("changes the job: " + job_change);
  }
  fix.launch = launch_blocks(
      request.framework.value_or(default_framework(setup.mode, setup.engine)),
      c.model, setup, moves, cost);
  fix.cost = join(cost, "; ");
  return fix;
}

std::string moves_id(const std::vector<Move>& moves) {
  std::vector<std::string> ids;
  for (const Move& m : moves) {
    ids.push_back(m.id);
  }
  return join(ids, "+");
}

std::string moves_title(const std::vector<Move>& moves) {
  std::vector<std::string> titles;
  for (const Move& m : moves) {
    titles.push_back(m.title);
  }
  return join(titles, " + ");
}

Fix from_found(const Ctx& c, FixGroup group, const Found& f, std::string id,
               std::string title, const std::string& job_change) {
  return make_fix(c, group, std::move(id), std::move(title), *f.gpu, f.request,
                  f.setup, f.budget, f.time, f.moves, job_change);
}

bool same_request(const Ctx& c, const Fix& a, const Found& b) {
  return a.gpu == b.gpu && plan_argv("", c.model, *a.gpu, a.request) ==
                               plan_argv("", c.model, *b.gpu, b.request);
}

// The largest value in [lo, hi) on a `grain` grid for which `make(value)`
// fits with the margin, by bisection (memory grows with the value); nullopt
// when even `lo` does not fit.
template <typename Make>
std::optional<std::int64_t> largest_fitting(const Ctx& c, std::int64_t lo,
                                            std::int64_t hi, std::int64_t grain,
                                            Make make) {
  auto ok = [&](std::int64_t v) {
    const Pricing p = price(c.model, c.gpu, make(v));
    return p.priced && p.priced->budget.fits_with_margin();
  };
  std::int64_t a = lo / grain;
  std::int64_t b = (hi - 1) / grain;
  if (b < a || !ok(a * grain)) {
    return std::nullopt;
  }
  while (a < b) {
    const std::int64_t mid = (a + b + 1) / 2;
    if (ok(mid * grain)) {
      a = mid;
    } else {
      b = mid - 1;
    }
  }
  return a * grain;
}

// A change of the job priced on the same cards without other moves.
std::optional<Fix> job_fix(const Ctx& c, std::string id, std::string title,
                           Setup request, const std::string& job_change,
                           std::vector<Move> moves = {}) {
  // A card without bf16 runs the job in fp16, as the search's fixes do
  // (knobs.cpp fp16_without_bf16).
  if (request.dtype == Dtype::bf16 && !runs_bf16(c.gpu) &&
      capability_of(request).fp16) {
    request.dtype = Dtype::fp16;
    moves.push_back(
        {"fp16", "fp16 instead of bf16 (the card has no bf16)", Risk::low});
  }
  Pricing p = price(c.model, c.gpu, request);
  if (!p.priced || !p.priced->budget.fits_with_margin()) {
    return std::nullopt;
  }
  const StepTime t =
      estimate_time(c.model, c.gpu, p.priced->setup, p.priced->budget);
  return make_fix(c, FixGroup::change_job, std::move(id), std::move(title),
                  c.gpu, p.priced->request, p.priced->setup, p.priced->budget,
                  t, moves, job_change);
}

// A fix's moves by title (a title names the knob and its level), sorted.
using MoveSet = std::vector<std::string>;
MoveSet move_set(const std::vector<Move>& moves) {
  MoveSet set;
  for (const Move& m : moves) {
    set.push_back(m.title);
  }
  std::sort(set.begin(), set.end());
  return set;
}

// Pushes the same-hardware fixes and returns each one's moves.
std::vector<MoveSet> same_hardware(const Ctx& c, std::optional<double> headroom,
                                   std::vector<Fix>& out) {
  Searcher searcher(c.model, c.base, SearchScope{});
  const int count = c.priced.setup.total_gpus();
  // Each objective's walk orders setups by estimated times; the fixes are
  // ranked on their priced ones (the fastest objective's fix can be the
  // cheaper one).
  struct Ranked {
    double cost;
    Fix fix;
    MoveSet moves;
  };
  std::vector<Ranked> found_fixes;
  for (const Objective objective :
       {Objective::balanced, Objective::fastest, Objective::safest}) {
    const auto found = searcher.best(c.gpu, count, objective, headroom);
    if (!found || found->moves.empty() ||
        std::any_of(
            found_fixes.begin(), found_fixes.end(),
            [&](const Ranked& r) { return same_request(c, r.fix, *found); })) {
      continue;
    }
    Fix fix = from_found(c, FixGroup::same_hardware, *found,
                         moves_id(found->moves), moves_title(found->moves), "");
    const double cost = balanced_cost(fix.step_factor, found->moves);
    found_fixes.push_back({cost, std::move(fix), move_set(found->moves)});
  }
  std::stable_sort(
      found_fixes.begin(), found_fixes.end(),
      [](const Ranked& a, const Ranked& b) { return a.cost < b.cost; });
  std::vector<MoveSet> sets;
  for (Ranked& r : found_fixes) {
    out.push_back(std::move(r.fix));
    sets.push_back(std::move(r.moves));
  }
  return sets;
}

// `same`: the moves of the same-hardware fixes.
void more_gpus(const Ctx& c, const std::vector<MoveSet>& same,
               std::vector<Fix>& out) {
  const int now = c.priced.setup.total_gpus();
  std::vector<int> counts;
  for (const int n : gpu_counts(k_sizing_max_gpus)) {
    if (n > now) {
      counts.push_back(n);
    }
  }
  // More cards instead of quantization or CPU offload.
  const SearchScope scope{.layouts = true, .quantize = false, .offload = false};
  Searcher searcher(c.model, c.base, scope);
  const auto found = searcher.fewest(c.gpu, counts, Objective::balanced);
  if (!found) {
    return;
  }
  // More cards carrying every move of a fix that already fits on the user's
  // cards replace none of them: they add GPU-hours and nothing else.
  const MoveSet moves = move_set(found->moves);
  if (std::any_of(same.begin(), same.end(), [&](const MoveSet& fix) {
        return std::includes(moves.begin(), moves.end(), fix.begin(),
                             fix.end());
      })) {
    return;
  }
  std::string title =
      fmt::format("{} -> {} GPUs", now, found->setup.total_gpus());
  if (!found->moves.empty()) {
    title += " + " + moves_title(found->moves);
  }
  out.push_back(
      from_found(c, FixGroup::more_gpus, *found, "more-gpus", title, ""));
}

void other_gpus(const Ctx& c, std::vector<Fix>& out) {
  const SearchScope scope{.layouts = true, .quantize = false, .offload = false};
  // The --price of the user's card is not another card's (hardware_clause()
  // prices those from the catalog); the node's host RAM still bounds offload.
  Setup base = c.base;
  base.price.reset();
  Searcher searcher(c.model, base, scope);
  std::vector<Fix> options;
  for (const Gpu& card : c.cards) {
    if (&card == &c.gpu || card.name == c.gpu.name || !card.common ||
        card.vendor != c.gpu.vendor) {
      continue;
    }
    const auto found = searcher.fewest(card, gpu_counts(k_sizing_max_gpus),
                                       Objective::balanced);
    if (!found) {
      continue;
    }
    std::string title =
        fmt::format("{} x {} -> {} x {}", c.priced.setup.total_gpus(),
                    c.gpu.name, found->setup.total_gpus(), card.name);
    if (!found->moves.empty()) {
      title += " + " + moves_title(found->moves);
    }
    options.push_back(
        from_found(c, FixGroup::other_gpus, *found, "other-gpus", title, ""));
  }
  // The fewest GPU-hours per token first, then the fewest cards, then name.
  std::stable_sort(options.begin(), options.end(),
                   [](const Fix& a, const Fix& b) {
                     const double ha = a.step_factor * a.setup.total_gpus();
                     const double hb = b.step_factor * b.setup.total_gpus();
                     if (std::abs(ha - hb) > 1e-9) {
                       return ha < hb;
                     }
                     return a.gpu->name < b.gpu->name;
                   });
  for (std::size_t i = 0; i < options.size() && i < k_other_cards; ++i) {
    out.push_back(std::move(options[i]));
  }
}

// A job moved from full fine-tuning to adapters takes what its framework
// does per mode (launch.cpp framework_defaults): LitGPT's finetune_lora
// splits the head in 128-token calls and quantizes under bf16-true with bnb
// PagedAdamW; axolotl's PEFT adapters are fp32. PEFT keeps adapters in fp32
// (peft tuners_utils.py _cast_adapter_dtype) for the HF-based frameworks;
// torchtune and LitGPT build them in the model's dtype.
void adapter_defaults(Setup& t, Mode from) {
  const Framework fw = framework_of(t);
  for (const LaunchOption& o : framework_mode_changes(
           framework_name(fw), mode_name(from), mode_name(t.mode))) {
    apply_option(t, o.flag, o.value);
  }
  if (fw != Framework::torchtune && fw != Framework::litgpt) {
    t.precision = Precision::mixed;
  }
}

// LoRA or QLoRA instead of full fine-tuning, with the cheapest moves
// (QLoRA only when LoRA does not fit); QLoRA instead of LoRA over a 16-bit
// base (the same adapters, the frozen base in NF4).
std::optional<Fix> adapter_fix(const Ctx& c) {
  const Resolved& r = c.priced.setup;
  const bool from_lora = r.mode == Mode::lora;
  for (const Mode mode : {Mode::lora, Mode::qlora}) {
    // Megatron and torchtitan load no NF4 base; a LoRA job is LoRA already.
    if ((mode == Mode::qlora && !capability_of(c.base).qlora) ||
        (from_lora && mode == Mode::lora)) {
      continue;
    }
    Setup t = c.base;
    t.mode = mode;
    t.quant = Quant::automatic;
    if (!from_lora) {
      adapter_defaults(t, r.mode);
    }
    Searcher searcher(c.model, t, SearchScope{});
    const auto found =
        searcher.best(c.gpu, r.total_gpus(), Objective::balanced);
    if (!found) {
      continue;
    }
    const bool q = mode == Mode::qlora;
    std::string title =
        from_lora ? "QLoRA (4-bit NF4 base) instead of LoRA over a 16-bit base"
        : q       ? "QLoRA (4-bit NF4 base + LoRA adapters) instead of "
                    "full fine-tuning"
                  : fmt::format("LoRA (rank {}) instead of full fine-tuning",
                                t.lora_rank);
    if (!found->moves.empty()) {
      title += " + " + moves_title(found->moves);
    }
    return from_found(c, FixGroup::change_job, *found, q ? "qlora" : "lora",
                      title,
                      q ? "trains adapters over a 4-bit frozen base"
                        : "trains adapters only");
  }
  return std::nullopt;
}

// vLLM: the longest --max-model-len that fits (on a 256-token grid).
std::optional<Fix> max_model_len_fix(const Ctx& c) {
  const Setup& s = c.base;
  const Resolved& r = c.priced.setup;
  const auto with_length = [&](std::int64_t n) {
    Setup t = s;
    t.max_model_len = n;
    t.seq = std::min(s.seq, n);
    return t;
  };
  const auto best = largest_fitting(c, 256, r.max_model_len, 256, with_length);
  if (!best) {
    return std::nullopt;
  }
  return job_fix(
      c, "max-model-len",
      fmt::format("max-model-len {} -> {}", r.max_model_len, *best),
      with_length(*best),
      fmt::format("longest request {} -> {} tokens", r.max_model_len, *best),
      {{"max-model-len", "", Risk::none}});
}

// The longest --seq that fits (on a 256-token grid).
std::optional<Fix> shorter_seq_fix(const Ctx& c) {
  const Resolved& r = c.priced.setup;
  const auto with_length = [&](std::int64_t n) {
    Setup t = c.base;
    t.seq = n;
    t.max_model_len.reset();
    return t;
  };
  const auto best = largest_fitting(c, 256, r.seq, 256, with_length);
  if (!best) {
    return std::nullopt;
  }
  return job_fix(
      c, "shorter-seq",
      fmt::format("sequence length {} -> {} tokens", r.seq, *best),
      with_length(*best),
      fmt::format("sequences of {} tokens instead of {}", *best, r.seq));
}

// Fewer sequences per step: a smaller global batch in training, fewer
// concurrent sequences in inference; the largest halving that fits.
std::optional<Fix> fewer_sequences_fix(const Ctx& c) {
  const Resolved& r = c.priced.setup;
  for (std::int64_t b = r.batch / 2; b >= 1; b /= 2) {
    Setup t = c.base;
    t.batch = b;
    const std::string change =
        r.training() ? fmt::format("global batch {} -> {} sequences",
                                   r.batch * r.grad_accum * r.dp(),
                                   b * r.grad_accum * r.dp())
                     : fmt::format("{} -> {} sequences at once", r.batch, b);
    if (auto fix = job_fix(
            c, r.training() ? "smaller-batch" : "fewer-sequences",
            r.training()
                ? fmt::format("micro-batch {} -> {} (same grad-accum)", r.batch,
                              b)
                : fmt::format("{} -> {} concurrent sequences", r.batch, b),
            t, change, {{"smaller-batch", "", Risk::none}})) {
      return fix;
    }
  }
  return std::nullopt;
}

void change_job(const Ctx& c, std::vector<Fix>& out) {
  const Resolved& r = c.priced.setup;
  const auto keep = [&out](std::optional<Fix> fix) {
    if (fix) {
      out.push_back(std::move(*fix));
    }
  };
  if (r.training() && (r.mode == Mode::full ||
                       (r.mode == Mode::lora && r.quant == Quant::none))) {
    keep(adapter_fix(c));
  }
  if (r.engine == Engine::vllm && !r.training()) {
    keep(max_model_len_fix(c));
  } else if (r.seq > 512) {
    keep(shorter_seq_fix(c));
  }
  if (r.batch > 1) {
    keep(fewer_sequences_fix(c));
  }
}

// The user's job on `to` instead of its own framework or engine: torchtune
// trains in pure bf16 only (training/precision.py) and shards with FSDP2;
// Megatron's distributed optimizer shards the states as ZeRO-1 does
// (arguments.py --use-distributed-optimizer); vLLM serves what transformers
// generated. The forced changes are moves of their own, listed first.
Setup switched(const Setup& base, const Resolved& r, Framework to,
               std::vector<Move>& forced) {
  Setup s = base;
  s.framework = to;
  if (to == Framework::vllm) {
    s.engine = Engine::vllm;
    s.split_layers = false;
    s.offload = Offload::none;
    return s;
  }
  s.zero = std::min(r.zero, to == Framework::megatron ? 1 : 0);
  // Neither reduces under no_sync (torchtune's recipes reduce-scatter every
  // micro-batch, Megatron's DDP every step), and torchtune's QLoRA runs
  // torchao's linear_nf4.
  s.fsdp_no_sync = false;
  if (to == Framework::torchtune) {
    s.nf4_backend = Nf4Backend::torchao;
  }
  if (to == Framework::megatron) {
    // Megatron's optimizer keeps fp32 main parameters, and bitsandbytes'
    // optimizers do not run under it (docs/advice.md).
    s.precision = Precision::mixed;
    if (s.optimizer == Optimizer::adamw_8bit ||
        s.optimizer == Optimizer::paged_adamw_8bit ||
        s.optimizer == Optimizer::paged_adamw) {
      s.optimizer = Optimizer::adamw;
    }
  }
  if (to == Framework::torchtune) {
    // Its attention calls F.scaled_dot_product_attention
    // (modules/attention_utils.py) and its recipes ship a chunked loss
    // (modules/loss): what a torchtune launch runs, not moves.
    // Its DPO recipes take log-probs from the full logits (rlhf/loss).
    s.attn = Attn::sdpa;
    if (s.loss == Loss::full && s.objective == TrainObjective::sft) {
      s.loss = Loss::chunked;
    }
  }
  s.fsdp = to == Framework::torchtune && r.total_gpus() > 1;
  if (s.offload == Offload::optimizer && to == Framework::torchtune && s.fsdp) {
    s.offload = Offload::all;  // FSDP2 has no optimizer-only offload
  }
  if (to == Framework::torchtune && r.precision == Precision::mixed &&
      r.dtype != Dtype::fp32) {
    s.precision = Precision::pure;
    forced.push_back(
        {"pure-bf16",
         fmt::format("pure {} training (no fp32 master weights: small "
                     "updates round away)",
                     dtype_name(r.dtype)),
         Risk::low});
  }
  return s;
}

// The frameworks a job may switch to, in the order tried.
std::vector<Framework> switch_targets(const Ctx& c) {
  const Resolved& r = c.priced.setup;
  const Framework own = framework_of(c.base);
  std::vector<Framework> out;
  if (!r.training()) {
    if (r.engine == Engine::hf) {
      out.push_back(Framework::vllm);
    }
  } else {
    // A fix keeps the objective: torchtune's preference recipes are DPO's
    // (rlhf/loss DPOLoss, SimPOLoss; the reference runs every step), and
    // Megatron-LM's pretrain script has none.
    const bool sft = r.objective == TrainObjective::sft;
    const bool torchtune_objective =
        sft || ((r.objective == TrainObjective::dpo ||
                 r.objective == TrainObjective::simpo) &&
                !r.precompute_ref);
    // torchtune trains in bf16 or fp32 only (training/precision.py).
    if (runs_bf16(c.gpu) && torchtune_has_builder(c.model.model_type) &&
        torchtune_objective) {
      out.push_back(Framework::torchtune);
    }
    // Megatron-LM trains full models (adapters are NeMo's, and no NF4 runs
    // under its tensor-parallel layers).
    if (r.total_gpus() > 1 && r.mode == Mode::full && sft) {
      out.push_back(Framework::megatron);
    }
  }
  std::erase(out, own);
  return out;
}

// The cheapest fix on another framework or engine, when it beats `best`
// (the balanced cost of the best same-stack fix; nullopt: none fits).
struct Switch {
  Fix fix;
  double cost = 0;  // balanced_cost
};
std::optional<Switch> switch_fix(const Ctx& c, std::optional<double> best,
                                 std::optional<double> headroom) {
  std::optional<Switch> out;
  for (const Framework to : switch_targets(c)) {
    std::vector<Move> moves;
    const Setup base = switched(c.base, c.priced.setup, to, moves);
    if (!price(c.model, c.gpu, base).priced) {
      continue;  // the other stack cannot run this job here
    }
    Searcher searcher(c.model, base, SearchScope{});
    const auto found = searcher.best(c.gpu, c.priced.setup.total_gpus(),
                                     Objective::balanced, headroom);
    if (!found) {
      continue;
    }
    Found f = *found;
    moves.insert(moves.end(), f.moves.begin(), f.moves.end());
    f.moves = moves;  // the forced moves count in the cost clause too
    std::string title(switch_title(to));
    std::string id = "switch-" + std::string(framework_name(to));
    if (!moves.empty()) {
      title += ": " + moves_title(moves);
      id += "+" + moves_id(moves);
    }
    Fix fix = from_found(c, FixGroup::switch_framework, f, std::move(id),
                         std::move(title), "");
    const double cost = balanced_cost(fix.step_factor, moves);
    if ((!best || cost < *best) && (!out || cost < out->cost)) {
      out = Switch{std::move(fix), cost};
    }
  }
  return out;
}

// vLLM: the cheapest fix with a weight or KV format move, when the
// same-hardware fixes have none (fp8 weights buy far more concurrency than
// gpu-util; the row shows both).
void vllm_format_fix(const Ctx& c, std::vector<Fix>& out) {
  const Resolved& r = c.priced.setup;
  if (r.engine != Engine::vllm || r.training() ||
      std::any_of(out.begin(), out.end(),
                  [](const Fix& f) { return f.risk != Risk::none; })) {
    return;
  }
  Searcher searcher(c.model, c.base, SearchScope{}, KnobScope::quantize);
  const auto found = searcher.best(c.gpu, r.total_gpus(), Objective::balanced);
  if (!found || found->moves.empty()) {
    return;
  }
  out.push_back(from_found(c, FixGroup::same_hardware, *found,
                           moves_id(found->moves), moves_title(found->moves),
                           ""));
}

// A switch of framework goes after the same-stack fixes, or first when
// the best of them costs more than k_switch_worth times the switch
// (balanced_cost): nobody keeps a stack to run many times slower.
constexpr double k_switch_worth = 2.0;

void place_switch(const Ctx& c, std::optional<double> headroom,
                  std::vector<Fix>& fixes) {
  std::optional<double> best;
  for (const Fix& f : fixes) {
    // The fix's worst risk stands for its moves' (Fix keeps no moves).
    const double cost = balanced_cost(f.step_factor, {{"", "", f.risk}});
    best = best ? std::min(*best, cost) : cost;
  }
  std::optional<Switch> sw = switch_fix(c, best, headroom);
  if (!sw) {
    return;
  }
  const bool first = best && *best > k_switch_worth * sw->cost;
  fixes.insert(first ? fixes.begin() : fixes.end(), std::move(sw->fix));
}

}  // namespace

std::vector<Fix> advise(const Model& model, const Gpu& gpu, const Setup& setup,
                        const std::vector<Gpu>& cards,
                        const std::vector<std::optional<double>>& prices) {
  Pricing pricing = price(model, gpu, setup);
  if (!pricing.priced) {
    return {};
  }
  const Priced& base = *pricing.priced;
  const Budget& b = base.budget;
  const bool vllm = base.setup.engine == Engine::vllm && !base.setup.training();
  if (vllm && b.fits()) {
    // vLLM sizes its KV pool to gpu-util x capacity by design: a plan that
    // starts has nothing to fix.
    return {};
  }
  const Ctx c{model,
              gpu,
              setup,
              base,
              estimate_time(model, gpu, base.setup, base.budget),
              cards,
              prices};
  std::vector<Fix> fixes;
  const std::optional<double> headroom =
      b.fits_with_margin() ? std::optional(k_advise_headroom_share)
                           : std::nullopt;
  const std::vector<MoveSet> same = same_hardware(c, headroom, fixes);
  vllm_format_fix(c, fixes);
  place_switch(c, headroom, fixes);
  if (!headroom) {
    more_gpus(c, same, fixes);
    other_gpus(c, fixes);
    change_job(c, fixes);
  }
  for (std::size_t i = 0; i < fixes.size(); ++i) {
    fixes[i].rank = static_cast<int>(i + 1);
  }
  return fixes;
}

Advisor advisor(const std::vector<Gpu>& cards,
                std::vector<std::optional<double>> prices) {
  return [&cards, prices = std::move(prices)](
             const Model& model, const Gpu& gpu, const Setup& setup) {
    return advise(model, gpu, setup, cards, prices);
  };
}

}  // namespace oomplan
