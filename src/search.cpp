#include "oomplan/search.hpp"

#include "oomplan/advice.hpp"
#include "oomplan/capability.hpp"
#include "oomplan/plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <tuple>

// `oomplan fit`. Invariants:
// - every plan kept was priced by memory() on its resolved setup (never
//   estimated, never scaled from a neighbour), and fits with at least the
//   requested headroom;
// - the kept plans form, for each GPU type, the Pareto front on (total GPUs
//   fewer, seconds per token lower, headroom larger): a plan is dropped only
//   when another plan of the same card is at least as good on all three and
//   better on one. Cards are not compared with each other (their prices
//   differ and the catalog has none);
// - quantized inference plans carry a precision loss (8-bit 1, 4-bit 2, fp8
//   KV +1) and dominate only plans that lose no less;
// - the output order is deterministic: no offload first, then GPUs, then
//   precision loss, then GPU-seconds per token (5 % buckets), then headroom,
//   then card name, then enumeration order; the top N holds one plan per
//   (card, GPUs, offload).
// Pruning relies on monotonicity the memory model guarantees: a larger
// micro-batch never lowers the peak, and the most frugal variant of a layout
// (ZeRO-3, full checkpointing, micro-batch 1) fitting is necessary for any
// other variant to fit.

namespace oomplan {
namespace {

constexpr std::array k_micro_batches = {1, 2, 4, 8, 16, 32};
constexpr std::array k_tp_sizes = {1, 2, 4, 8};
constexpr std::array k_pp_sizes = {1, 2, 4, 8, 16};

struct Candidate {
  FitPlan plan;
  double seconds_per_token = 0;
  int precision_loss = 0;  // 0: the user's weights and KV; 1: 8-bit; 2: 4-bit
  std::size_t order = 0;   // enumeration order, the final tie-break
};

// Quantization trades accuracy for memory and speed, which the three
// objectives do not see: a plan only dominates plans that lose no less
// precision.
bool dominates(const Candidate& a, const Candidate& b) {
  const int ga = a.plan.setup.total_gpus();
  const int gb = b.plan.setup.total_gpus();
  const bool no_worse = ga <= gb &&
                        a.seconds_per_token <= b.seconds_per_token &&
                        a.plan.headroom_bytes >= b.plan.headroom_bytes &&
                        a.precision_loss <= b.precision_loss;
  const bool better = ga < gb || a.seconds_per_token < b.seconds_per_token ||
                      a.plan.headroom_bytes > b.plan.headroom_bytes ||
                      a.precision_loss < b.precision_loss;
  return no_worse && better;
}

class Search {
 public:
  Search(const Model& model, const Setup& base, const FitConstraints& limits)
      : m_model(model),
        m_base(base),
        m_base_resolved(resolve(model, Gpu{}, base)),
        m_limits(limits) {}

  void run(const Gpu& gpu) {
    m_front.clear();
    for (const int count : gpu_counts(m_limits.max_gpus)) {
      const int per_node = std::min(count, k_gpus_per_node);
      const int nodes = count / per_node;
      for (const int tp : k_tp_sizes) {
        for (const int pp : k_pp_sizes) {
          layout(gpu, per_node, nodes, tp, pp);
        }
      }
    }
    for (auto& c : m_front) {
      m_kept.push_back(std::move(c));
    }
  }

  FitResult result() {
    // Best first: plans without CPU offload (the last resort), then fewest
    // GPUs, then GPU-seconds per token (what the job costs at one price per
    // GPU-hour) in 5 % buckets, then more headroom.
    auto bucket = [](const Candidate& c) {
      const double gpu_s = c.seconds_per_token * c.plan.setup.total_gpus();
      return gpu_s > 0 ? static_cast<long>(
                             std::floor(std::log(gpu_s) / std::log(1.05)))
                       : 0L;
    };
    std::sort(m_kept.begin(), m_kept.end(),
              [&bucket](const Candidate& a, const Candidate& b) {
                const bool oa = a.plan.setup.offload != Offload::none;
                const bool ob = b.plan.setup.offload != Offload::none;
                if (oa != ob) {
                  return ob;
                }
                const int ga = a.plan.setup.total_gpus();
                const int gb = b.plan.setup.total_gpus();
                if (ga != gb) {
                  return ga < gb;
                }
                if (a.precision_loss != b.precision_loss) {
                  return a.precision_loss < b.precision_loss;
                }
                const long ca = bucket(a);
                const long cb = bucket(b);
                if (ca != cb) {
                  return ca < cb;
                }
                if (a.plan.headroom_bytes != b.plan.headroom_bytes) {
                  return a.plan.headroom_bytes > b.plan.headroom_bytes;
                }
                if (a.plan.gpu->name != b.plan.gpu->name) {
                  return a.plan.gpu->name < b.plan.gpu->name;
                }
                return a.order < b.order;
              });
    FitResult out;
    out.evaluated = m_evaluated;
    out.front = static_cast<std::int64_t>(m_kept.size());
    out.base = m_base;
    out.max_gpus = m_limits.max_gpus;
    // The top N shows one plan per (card, GPU count, offload): the rest of
    // that group are its trade-offs of speed for headroom.
    const auto top = static_cast<std::size_t>(std::max(m_limits.top, 0));
    std::vector<std::tuple<const Gpu*, int, Offload>> shown;
    for (const Candidate& c : m_kept) {
      if (out.plans.size() >= top) {
        break;
      }
      const auto key = std::make_tuple(c.plan.gpu, c.plan.setup.total_gpus(),
                                       c.plan.setup.offload);
      if (std::find(shown.begin(), shown.end(), key) != shown.end()) {
        continue;
      }
      shown.push_back(key);
      out.plans.push_back(c.plan);
    }
    return out;
  }

 private:
  // One (card, GPUs, tp, pp) layout: the knobs that do not change the model's
  // split.
  void layout(const Gpu& gpu, int per_node, int nodes, int tp, int pp) {
    const int count = per_node * nodes;
    if (tp > per_node || tp * pp > count || count % (tp * pp) != 0) {
      return;
    }
    Setup s = m_base;
    s.gpus = per_node;
    s.nodes = nodes;
    s.tp = tp;
    s.pp = pp;
    s.split_layers = false;
    if (!s.training()) {
      // Inference: replicas only when one replica already spans whole
      // nodes or the node is split evenly; pipelines cross nodes.
      if (pp > nodes) {
        return;
      }
      s.zero.reset();
      s.fsdp = false;
    }
    if (check(m_model, gpu, s)) {
      return;
    }
    const int dp = count / (tp * pp);
    if (s.training()) {
      training(gpu, s, dp);
    } else {
      inference(gpu, s, resolve(m_model, gpu, s).quant);
    }
  }

  void training(const Gpu& gpu, const Setup& layout, int dp) {
    const std::int64_t global = m_limits.global_batch;
    if (global > 0 && global % dp != 0) {
      return;
    }
    std::vector<int> stages = {0};
    if (dp > 1) {
      stages = {3, 2, 1, 0};
    }
    std::vector<Offload> offloads = {Offload::none};
    if (!m_limits.no_offload) {
      offloads.push_back(Offload::optimizer);
      offloads.push_back(Offload::all);
    }
    // The most frugal variant without offload decides whether offload is
    // worth trying at all.
    bool need_offload = true;
    for (const Offload offload : offloads) {
      if (offload != Offload::none && !need_offload) {
        break;
      }
      for (const int stage : stages) {
        bool frugal_fits = false;
        for (const Checkpointing ckpt :
             {Checkpointing::full, Checkpointing::selective,
              Checkpointing::none}) {
          Setup s = layout;
          s.zero = stage;
          s.fsdp = false;
          s.offload = offload;
          s.checkpointing = ckpt;
          const bool any = batches(gpu, s, dp, global);
          if (!any) {
            break;  // less checkpointing only needs more memory
          }
          frugal_fits = true;
          if (offload == Offload::none) {
            need_offload = false;
          }
        }
        if (!frugal_fits) {
          break;  // a lower ZeRO stage only needs more memory
        }
      }
    }
  }

  // Micro-batches 1, 2, 4, ... while they fit; true when batch 1 fits.
  bool batches(const Gpu& gpu, Setup s, int dp, std::int64_t global) {
    bool any = false;
    for (const int b : k_micro_batches) {
      s.batch = b;
      if (global > 0) {
        const std::int64_t per_rank = global / dp;
        if (per_rank % b != 0) {
          continue;
        }
        s.grad_accum = static_cast<int>(per_rank / b);
      }
      if (!consider(gpu, s)) {
        break;
      }
      any = true;
    }
    return any;
  }

  // `weights`: the layout's weight format, resolved.
  void inference(const Gpu& gpu, const Setup& layout, Quant weights) {
    std::vector<Quant> quants = {weights};
    std::vector<std::optional<Dtype>> kv_dtypes = {layout.kv_dtype};
    const bool vllm = layout.engine == Engine::vllm;
    if (!m_limits.no_quant && weights == Quant::none) {
      const auto options = quantization_options(gpu, layout.engine);
      quants.insert(quants.end(), options.begin(), options.end());
    }
    if (!m_limits.no_quant && vllm && gpu.compute_capability >= k_cc_ampere &&
        layout.kv_dtype != std::optional<Dtype>{Dtype::fp8}) {
      kv_dtypes.emplace_back(Dtype::fp8);
    }
    for (const Quant quant : quants) {
      for (const auto& kv : kv_dtypes) {
        Setup s = layout;
        s.quant = quant;
        s.kv_dtype = kv;
        s.offload = Offload::none;
        if (!consider(gpu, s) && !m_limits.no_offload && !vllm) {
          s.offload = Offload::params;
          consider(gpu, s);
        }
      }
    }
  }

  // Prices `s` with memory(); keeps it on the front when it fits with the
  // required headroom. True when it fits.
  bool consider(const Gpu& gpu, const Setup& s) {
    const Resolved r = resolve(m_model, gpu, s);
    const Budget budget = memory(m_model, gpu, r);
    ++m_evaluated;
    const auto min_headroom = static_cast<Bytes>(m_limits.min_headroom_gib *
                                                 static_cast<double>(k_gib));
    if (!budget.fits() || budget.headroom_bytes() < min_headroom) {
      return false;
    }
    Candidate c;
    c.plan.gpu = &gpu;
    c.plan.request = s;
    c.plan.setup = r;
    c.plan.total_bytes = budget.total_bytes();
    c.plan.headroom_bytes = budget.headroom_bytes();
    c.plan.fits = true;
    c.plan.time = estimate_time(m_model, gpu, r, budget);
    c.seconds_per_token =
        c.plan.time.tokens_per_s > 0 ? 1.0 / c.plan.time.tokens_per_s : 0;
    c.order = m_order++;
    // Inference only: training modes fix the weights' format.
    if (!r.training()) {
      if (r.quant != m_base_resolved.quant) {
        c.precision_loss += quant_bits(r.quant) == 4 ? 2 : 1;
      }
      if (r.kv_dtype != m_base_resolved.kv_dtype) {
        c.precision_loss += 1;
      }
    }
    for (const auto& kept : m_front) {
      if (dominates(kept, c) ||
          (kept.plan.setup.total_gpus() == r.total_gpus() &&
           kept.seconds_per_token == c.seconds_per_token &&
           kept.plan.headroom_bytes == c.plan.headroom_bytes)) {
        return true;
      }
    }
    std::erase_if(m_front,
                  [&c](const Candidate& kept) { return dominates(c, kept); });
    m_front.push_back(std::move(c));
    return true;
  }

  const Model& m_model;
  Setup m_base;
  Resolved m_base_resolved;  // the user's weights and KV dtype, resolved
  FitConstraints m_limits;
  std::vector<Candidate> m_front;  // the current card's Pareto front
  std::vector<Candidate> m_kept;   // every card's front
  std::int64_t m_evaluated = 0;
  std::size_t m_order = 0;
};

}  // namespace

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

FitResult fit(const Model& model, const std::vector<const Gpu*>& gpus,
              const Setup& base, const FitConstraints& constraints) {
  Search search(model, base, constraints);
  for (const Gpu* gpu : gpus) {
    if (gpu != nullptr) {
      search.run(*gpu);
    }
  }
  return search.result();
}

}  // namespace oomplan
