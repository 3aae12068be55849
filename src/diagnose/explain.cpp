#include "diagnose/internal.hpp"

#include "oomplan/diagnose/diagnose.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// DESIGN §2's cause rules for the first message, first match wins (R
// request, C capacity, F free, P this process, A allocated, U reserved but
// unallocated; in 1.x U = reserved total - A):
//   vllm_startup_free_memory, vllm_kv_cache, context_creation,
//   fragmentation: U >= R and U >= 5 % of C and F < R,
//   unknown: R < 1 MiB unless F < 2 MiB (far too small to be a lack of
//     memory); F >= R + max(5 % of C, 256 MiB),
//   large_allocation: R >= 25 % of C; R above the allocator's stated limit;
//     R > F + P (more than freeing the whole process would give),
//   other_processes: C - F - P >= 20 % of C when P is printed; else the
//     listed processes sum to >= 20 % of C; else C - F - A - U >= 20 % of C
//     and >= 2 GiB,
//   shortfall otherwise.
// A rule applies only when the message states every number it uses. Two
// readings of the text, both forced by real messages (tests/data/oom):
// - "this process has 0 bytes memory in use" beside 10.47 GiB allocated by
//   PyTorch (huggingface/trl#3172) is NVML failing to see the process inside
//   a container: a P below A + U is not a measurement, so it counts as not
//   printed.
// - Inside a container NVML reports host PIDs, so PyTorch lists the job
//   itself as "Process N has X" (no "this process" clause). The listed sum
//   then excludes the smallest listed process that holds at least A + U:
//   the job itself.
// Messages without numbers are classified from the surrounding log: another
// message's numbers, or whether the job had done any work before a bare
// "CUDA error: out of memory" (then context_creation).

namespace oomplan {
namespace {

constexpr Bytes k_margin_floor = 256 * k_mib;  // unknown: the 256 MiB floor
constexpr Bytes k_other_floor = 2 * k_gib;     // other_processes, last clause
constexpr double k_frag_share = 0.05;
constexpr double k_unknown_share = 0.05;
constexpr double k_large_share = 0.25;
constexpr double k_other_share = 0.20;
// unknown, too: a request below 1 MiB cannot fail for lack of memory while
// one 2 MiB segment is free (PyTorch serves requests <= kSmallSize = 1 MiB
// from kSmallBuffer = 2 MiB segments, c10/cuda/CUDACachingAllocator.cpp).
constexpr Bytes k_tiny_request = k_mib;
constexpr Bytes k_small_segment = 2 * k_mib;

using diag::size;

std::string pct(Bytes part, Bytes whole) {
  return whole > 0 ? fmt::format("{:.0f} %", 100.0 * static_cast<double>(part) /
                                                 static_cast<double>(whole))
                   : std::string("?");
}

Bytes share_of(double share, Bytes whole) {
  return static_cast<Bytes>(std::llround(share * static_cast<double>(whole)));
}

// The numbers the rules use, with the readings above applied.
struct Numbers {
  std::optional<Bytes> r, c, f, p, a, u;
  std::optional<Bytes> listed;       // other processes after removing self
  std::optional<Bytes> self_listed;  // the listed process taken as the job
  bool p_ignored = false;            // P printed but below A + U
};

Numbers numbers_of(const OomMessage& m) {
  Numbers n;
  n.r = m.requested_bytes;
  n.c = m.capacity_bytes;
  n.f = m.free_bytes;
  n.a = m.allocated_bytes;
  n.u = m.reserved_unallocated_bytes;
  if (!n.u && m.reserved_total_bytes && m.allocated_bytes) {
    n.u = std::max<Bytes>(0, *m.reserved_total_bytes - *m.allocated_bytes);
  }
  n.p = m.process_bytes;
  if (n.p && n.a && n.u && *n.p < *n.a + *n.u) {
    n.p.reset();
    n.p_ignored = true;
  }
  // NVML that cannot see processes reports 0 bytes for each: not a listing.
  if (!m.processes.empty() && m.other_processes_bytes.value_or(0) > 0) {
    Bytes sum = m.other_processes_bytes.value_or(0);
    if (!m.process_bytes && n.a && n.u) {
      std::optional<Bytes> self;
      for (const ProcessMemory& proc : m.processes) {
        if (proc.bytes >= *n.a + *n.u && (!self || proc.bytes < *self)) {
          self = proc.bytes;
        }
      }
      if (self) {
        n.self_listed = self;
        sum -= *self;
      }
    }
    n.listed = sum;
  }
  return n;
}

bool has_numbers(const OomMessage& m) {
  return m.requested_bytes || m.capacity_bytes || m.free_bytes ||
         m.allocated_bytes;
}

// The job's own work had begun before message `m`: a progress line earlier
// in the log, or a traceback above it that runs the model.
bool activity_before(const LogContext& ctx, const OomMessage& m) {
  return m.in_model_code ||
         (ctx.first_activity_line && *ctx.first_activity_line < m.line);
}

// Why the work had begun, citing the line that shows it.
std::string activity_text(const LogContext& ctx, const OomMessage& m) {
  if (ctx.first_activity_line && *ctx.first_activity_line < m.line) {
    return fmt::format("the job had been working since line {}",
                       *ctx.first_activity_line);
  }
  return fmt::format(
      "the traceback above line {} runs the model (forward, backward or a "
      "torch.nn op)",
      m.line);
}

struct Verdict {
  OomCause cause = OomCause::shortfall;
  std::vector<std::string> evidence;
};

// What a numeric rule found: its cause, the line that says why (first in
// the evidence) and the lines that add to it.
struct Finding {
  OomCause cause = OomCause::shortfall;
  std::optional<std::string> headline;
  std::vector<std::string> details;
};

// fragmentation: U ≥ R and U ≥ 5 % of C and F < R.
std::optional<Finding> fragmentation(const OomMessage& /*m*/,
                                     const Numbers& n) {
  if (!(n.u && n.r && n.c && n.f && *n.u >= *n.r &&
        *n.u >= share_of(k_frag_share, *n.c) && *n.f < *n.r)) {
    return std::nullopt;
  }
  return Finding{
      OomCause::fragmentation,
      fmt::format("{} reserved but unallocated ≥ the {} request while {} is "
                  "free",
                  size(*n.u), size(*n.r), size(*n.f)),
      {fmt::format("the cached {} is {} of the {} card (≥ 5 %), but no free "
                   "block in it is large enough for {}",
                   size(*n.u), pct(*n.u, *n.c), size(*n.c), size(*n.r))}};
}

// unknown: R < 1 MiB while F ≥ 2 MiB (or F not stated), outside a fixed
// arena: no lack of memory makes a request that small fail; an earlier
// error does.
std::optional<Finding> tiny_request(const OomMessage& m, const Numbers& n) {
  // TensorFlow's and XLA's BFC arenas are fixed at start-up: a tiny request
  // fails there once the arena is full.
  if (m.format == OomFormat::xla || !n.r || *n.r >= k_tiny_request ||
      (n.f && *n.f < k_small_segment)) {
    return std::nullopt;
  }
  return Finding{
      OomCause::unknown,
      fmt::format(
          "a {} request{} is far too small to fail for lack of memory",
          size(*n.r),
          n.f ? fmt::format(" with {} free", size(*n.f)) : std::string()),
      {"such a failure comes from an earlier error that left the CUDA "
       "context unusable (a device-side assert, an illegal memory access), "
       "a driver or MIG limit, or an allocator cap"}};
}

// unknown: F ≥ R + max(5 % of C, 256 MiB): the numbers do not explain the
// failure (a per-process cap, or memory paged to the host, may).
std::optional<Finding> unknown(const OomMessage& m, const Numbers& n) {
  if (!(n.f && n.r && n.c)) {
    return std::nullopt;
  }
  const Bytes margin =
      std::max(share_of(k_unknown_share, *n.c), k_margin_floor);
  if (*n.f < *n.r + margin) {
    return std::nullopt;
  }
  Finding found{OomCause::unknown,
                fmt::format("{} free ≥ the {} request + {}: the numbers do not "
                            "explain the failure",
                            size(*n.f), size(*n.r), size(margin)),
                {}};
  if (m.allowed_bytes) {
    found.details.push_back(fmt::format(
        "the process is capped at {} (torch.cuda."
        "set_per_process_memory_fraction): {} allocated + {} requested "
        "against that cap",
        size(*m.allowed_bytes), size(n.a.value_or(0)), size(*n.r)));
  }
  if (n.a && *n.a > *n.c) {
    found.details.push_back(fmt::format(
        "{} allocated on a {} card: the driver pages GPU memory to system "
        "memory (Windows/WSL shared memory or unified memory)",
        size(*n.a), size(*n.c)));
  }
  return found;
}

// large_allocation without R ≥ 25 % of C: R above F + P (freeing all the
// process holds would not make room).
std::optional<Finding> beyond_what_could_be_free(const OomMessage& /*m*/,
                                                 const Numbers& n) {
  if (n.f && n.p && *n.r > *n.f + *n.p) {
    return Finding{
        OomCause::large_allocation,
        fmt::format("the {} request is more than the {} free plus the {} this "
                    "process holds",
                    size(*n.r), size(*n.f), size(*n.p)),
        {}};
  }
  return std::nullopt;
}

// large_allocation: R above the allocator's stated limit; R ≥ 25 % of C;
// else R beyond what could ever be free.
std::optional<Finding> large_allocation(const OomMessage& m, const Numbers& n) {
  if (!n.r) {
    return std::nullopt;
  }
  if (m.allowed_bytes && *n.r > *m.allowed_bytes) {
    return Finding{OomCause::large_allocation,
                   fmt::format("the {} request is larger than the allocator's "
                               "whole {} limit",
                               size(*n.r), size(*m.allowed_bytes)),
                   {}};
  }
  if (!(n.c && *n.r >= share_of(k_large_share, *n.c))) {
    return beyond_what_could_be_free(m, n);
  }
  Finding found{
      OomCause::large_allocation,
      *n.r > *n.c
          ? fmt::format("the {} request is larger than the whole {} card ({})",
                        size(*n.r), size(*n.c), pct(*n.r, *n.c))
          : fmt::format("the {} request is {} of the {} card (≥ 25 %)",
                        size(*n.r), pct(*n.r, *n.c), size(*n.c)),
      {}};
  if (m.kind == OomKind::xla_compile) {
    found.details.push_back(
        fmt::format("the compiled program needs {} of HBM; the device has {}",
                    size(*n.r), size(*n.c)));
  }
  return found;
}

// other_processes, when P is printed: C − F − P ≥ 20 % of C.
std::optional<Finding> others_beside_this_process(const OomMessage& m,
                                                  const Numbers& n) {
  const Bytes others = *n.c - *n.f - *n.p;
  if (others < share_of(k_other_share, *n.c)) {
    return std::nullopt;
  }
  Finding found{OomCause::other_processes,
                fmt::format("{} of the {} card is neither free ({}) nor this "
                            "process's ({}): {} held by other processes",
                            size(others), size(*n.c), size(*n.f), size(*n.p),
                            pct(others, *n.c)),
                {}};
  // Processes listed at 0 bytes each are no listing (numbers_of).
  if (n.listed) {
    found.details.push_back(
        fmt::format("{} other processes listed, {} together",
                    m.processes.size(), size(*n.listed)));
  }
  return found;
}

// other_processes, else: the listed processes sum to ≥ 20 % of C.
std::optional<Finding> listed_processes(const Numbers& n) {
  if (*n.listed < share_of(k_other_share, *n.c)) {
    return std::nullopt;
  }
  Finding found{OomCause::other_processes,
                fmt::format("the listed processes hold {} ({} of the {} card)",
                            size(*n.listed), pct(*n.listed, *n.c), size(*n.c)),
                {}};
  if (n.self_listed) {
    found.details.push_back(fmt::format(
        "not counting the {} process taken as this job (it holds its {} "
        "allocated + {} reserved; inside a container NVML shows host PIDs)",
        size(*n.self_listed), size(*n.a), size(*n.u)));
  }
  return found;
}

// other_processes, else: C − F − A − U ≥ 20 % of C and ≥ 2 GiB.
std::optional<Finding> outside_the_allocator(const Numbers& n) {
  const Bytes others = *n.c - *n.f - *n.a - *n.u;
  if (others < share_of(k_other_share, *n.c) || others < k_other_floor) {
    return std::nullopt;
  }
  return Finding{
      OomCause::other_processes,
      fmt::format("{} − {} free − {} allocated − {} cached = {} ({}) is held "
                  "outside PyTorch's allocator: other processes (or this "
                  "process's non-PyTorch memory)",
                  size(*n.c), size(*n.f), size(*n.a), size(*n.u), size(others),
                  pct(others, *n.c)),
      {}};
}

// other_processes: C − F − P ≥ 20 % of C when P is printed; else the listed
// processes sum to ≥ 20 % of C; else C − F − A − U ≥ 20 % of C and ≥ 2 GiB.
// The first clause whose numbers the message states decides.
std::optional<Finding> other_processes(const OomMessage& m, const Numbers& n) {
  if (n.c && n.f && n.p) {
    return others_beside_this_process(m, n);
  }
  if (n.c && n.listed) {
    return listed_processes(n);
  }
  if (n.c && n.f && n.a && n.u) {
    return outside_the_allocator(n);
  }
  return std::nullopt;
}

// The headline of a shortfall: what the message says about the request.
std::optional<std::string> shortfall_headline(const OomMessage& m,
                                              const Numbers& n) {
  if (n.r && n.f && n.c) {
    return fmt::format(
        "the {} request does not fit in the {} free of the {} card", size(*n.r),
        size(*n.f), size(*n.c));
  }
  if (n.r && n.f) {
    return fmt::format("the {} request does not fit in the {} free", size(*n.r),
                       size(*n.f));
  }
  if (n.r && n.c && (n.p || n.a)) {
    const Bytes used = n.p ? *n.p : *n.a;
    return fmt::format("the {} request on top of the {} in use {} the {} {}",
                       size(*n.r), size(used),
                       used + *n.r > *n.c ? "exceeds" : "nears", size(*n.c),
                       m.kind == OomKind::mps_allocator ? "limit" : "card");
  }
  if (n.r && n.a && m.allowed_bytes) {
    return fmt::format(
        "the {} request on top of the {} in use {} the allocator's {} limit",
        size(*n.r), size(*n.a),
        *n.a + *n.r > *m.allowed_bytes ? "exceeds" : "nears",
        size(*m.allowed_bytes));
  }
  if (n.r) {
    return fmt::format(
        "a {} allocation failed; the message states no capacity or free "
        "figure",
        size(*n.r));
  }
  return std::nullopt;
}

// shortfall, otherwise: the request does not fit in what is left.
Finding shortfall(const OomMessage& m, const Numbers& n) {
  Finding found{OomCause::shortfall, shortfall_headline(m, n), {}};
  if (n.p && n.c) {
    found.details.push_back(fmt::format(
        "this process holds {} ({}) of the card{}", size(*n.p), pct(*n.p, *n.c),
        n.a ? fmt::format(", {} of it allocated by PyTorch", size(*n.a))
            : std::string()));
  } else if (n.a && n.c) {
    found.details.push_back(
        fmt::format("PyTorch holds {} allocated ({}) of the card", size(*n.a),
                    pct(*n.a, *n.c)));
  }
  if (n.u && n.r && *n.u > 0) {
    found.details.push_back(
        fmt::format("{} is reserved but unallocated ({} the request)",
                    size(*n.u), *n.u >= *n.r ? "≥" : "<"));
  }
  return found;
}

// DESIGN §2's numeric rules in their order; the first that matches wins,
// else shortfall.
using Rule = std::optional<Finding> (*)(const OomMessage&, const Numbers&);
constexpr std::array<Rule, 5> k_numeric_rules = {
    fragmentation, tiny_request, unknown, large_allocation, other_processes};

// The numeric rules (fragmentation .. shortfall) on one message. The
// evidence: the rule's headline, the note on an ignored P, its details.
Verdict numeric_rules(const OomMessage& m) {
  const Numbers n = numbers_of(m);
  std::optional<Finding> found;
  for (const Rule rule : k_numeric_rules) {
    found = rule(m, n);
    if (found) {
      break;
    }
  }
  if (!found) {
    found = shortfall(m, n);
  }
  Verdict v{found->cause, {}};
  if (found->headline) {
    v.evidence.push_back(std::move(*found->headline));
  }
  if (n.p_ignored) {
    v.evidence.push_back(fmt::format(
        "\"this process has {}\" is less than PyTorch's own {} allocated + {} "
        "reserved: NVML could not see the process (a container?), so it is "
        "not used",
        size(*m.process_bytes), size(*n.a), size(*n.u)));
  }
  for (std::string& line : found->details) {
    v.evidence.push_back(std::move(line));
  }
  return v;
}

Verdict vllm_rules(const OomMessage& m, const LogContext& ctx) {
  Verdict v;
  auto& ev = v.evidence;
  if (m.kind == OomKind::vllm_startup_free_memory) {
    v.cause = OomCause::vllm_startup_free_memory;
    if (m.free_bytes && m.capacity_bytes && m.requested_bytes && m.gpu_util) {
      ev.push_back(fmt::format(
          "vLLM wants gpu_memory_utilization {} × {} = {}, but only {} of the "
          "card is free at start-up",
          *m.gpu_util, size(*m.capacity_bytes), size(*m.requested_bytes),
          size(*m.free_bytes)));
      ev.push_back(fmt::format(
          "{} ({}) is already in use by other processes (another vLLM, a "
          "training job, a leftover EngineCore)",
          size(*m.capacity_bytes - *m.free_bytes),
          pct(*m.capacity_bytes - *m.free_bytes, *m.capacity_bytes)));
    }
    return v;
  }
  v.cause = OomCause::vllm_kv_cache;
  if (m.kind == OomKind::vllm_no_cache_blocks) {
    ev.push_back(
        "after the weights and the profiled activation peak, nothing of "
        "gpu_memory_utilization × capacity is left for the KV cache");
  } else if (m.requested_bytes && m.free_bytes && m.max_seq_len) {
    ev.push_back(fmt::format(
        "one {}-token sequence needs {} of KV cache; {} is available",
        *m.max_seq_len, size(*m.requested_bytes), size(*m.free_bytes)));
    if (m.estimated_max_model_len) {
      ev.push_back(fmt::format("vLLM estimates that {} tokens fit",
                               *m.estimated_max_model_len));
    }
  } else if (m.max_seq_len && m.kv_tokens) {
    ev.push_back(
        fmt::format("max_model_len {} > the {} tokens the KV cache holds",
                    *m.max_seq_len, *m.kv_tokens));
  }
  if (ctx.vllm_total_bytes || ctx.vllm_kv_cache_bytes) {
    std::vector<std::string> parts;
    if (ctx.vllm_total_bytes) {
      parts.push_back(fmt::format("total {}", size(*ctx.vllm_total_bytes)));
    }
    if (ctx.vllm_gpu_util) {
      parts.push_back(
          fmt::format("gpu_memory_utilization {}", *ctx.vllm_gpu_util));
    }
    if (ctx.vllm_kv_cache_bytes) {
      parts.push_back(
          fmt::format("KV cache {}", size(*ctx.vllm_kv_cache_bytes)));
    }
    ev.push_back(fmt::format("vLLM's start-up profile in the log: {}",
                             fmt::join(parts, ", ")));
  }
  return v;
}

// The causes a message's kind decides before any number: a CUDA fault
// earlier in the log, a library handle or NCCL's buffers.
std::optional<Verdict> kind_verdict(const OomMessage& m) {
  if (m.after_fault) {
    Verdict v{OomCause::unknown, {}};
    v.evidence.push_back(fmt::format(
        "a CUDA fault (illegal memory access or a device-side assert) was "
        "reported before line {}: the context is broken, and every later "
        "allocation fails whatever memory is free",
        m.line));
    return v;
  }
  if (m.kind == OomKind::cublas_create || m.kind == OomKind::cudnn_create) {
    Verdict v{OomCause::context_creation, {}};
    v.evidence.push_back(
        m.kind == OomKind::cublas_create
            ? "cuBLAS could not allocate the workspace for its handle "
              "(cublasCreate): the first matrix multiply on this GPU found no "
              "room"
            : "cuDNN could not create its handle (cudnnCreate): the first "
              "convolution on this GPU found no room for its workspace");
    if (m.source == "tensorflow") {
      // tensorflow/core/common_runtime/gpu/gpu_device.cc: without
      // allow_growth the BFC allocator reserves nearly all free memory at
      // start-up, before cuBLAS asks for its own.
      v.evidence.push_back(
          "TensorFlow reserves nearly all free GPU memory at start-up unless "
          "memory growth is on, so cuBLAS and cuDNN find none left; or "
          "another process holds the GPU");
    }
    return v;
  }
  if (m.kind == OomKind::nccl) {
    Verdict v{OomCause::context_creation, {}};
    v.evidence.push_back(fmt::format(
        "NCCL could not allocate {}{} while setting up its communication "
        "buffers",
        m.requested_bytes ? size(*m.requested_bytes) : std::string("memory"),
        m.gpu_index ? fmt::format(" on GPU {}", *m.gpu_index) : std::string()));
    v.evidence.push_back(
        "NCCL allocates its channel buffers at the first collective with each "
        "peer, on top of what the framework already holds");
    return v;
  }
  return std::nullopt;
}

Verdict classify(const Diagnosis& d) {
  const OomMessage& m = d.messages.front();
  if (m.format == OomFormat::vllm) {
    return vllm_rules(m, d.context);
  }
  if (auto v = kind_verdict(m)) {
    return *v;
  }
  if (has_numbers(m)) {
    return numeric_rules(m);
  }
  // No numbers in the message: the surrounding log decides.
  for (const OomMessage& other : d.messages) {
    if (&other != &m && has_numbers(other) && other.format != OomFormat::vllm &&
        (!m.gpu_index || !other.gpu_index ||
         *m.gpu_index == *other.gpu_index)) {
      Verdict v = numeric_rules(other);
      v.evidence.insert(
          v.evidence.begin(),
          fmt::format("the message states no numbers; the one at line {} does",
                      other.line));
      return v;
    }
  }
  if ((m.kind == OomKind::cuda_error || m.kind == OomKind::generic) &&
      !activity_before(d.context, m)) {
    Verdict v{OomCause::context_creation, {}};
    v.evidence.push_back(fmt::format(
        "\"{}\" came before any sign of the job's own work (no progress bar, "
        "no memory allocated): the CUDA context itself did not fit",
        m.kind == OomKind::cuda_error ? "CUDA error: out of memory"
                                      : "out of memory"));
    v.evidence.push_back(
        "the GPU is most likely held by another process, or the job picked a "
        "GPU that is already full");
    return v;
  }
  Verdict v{OomCause::shortfall, {}};
  if (m.kind == OomKind::ggml_buffer) {
    v.evidence.push_back(
        "llama.cpp could not allocate one of its buffers (weights, KV cache, "
        "compute or pool): the offloaded layers and the context do not fit "
        "beside what the GPU already holds");
  }
  if (m.kind == OomKind::bitsandbytes) {
    v.evidence.push_back(
        "bitsandbytes' own CUDA call ran out of memory (its paged optimizers "
        "allocate managed memory, which host RAM backs too)");
  }
  if (activity_before(d.context, m)) {
    v.evidence.push_back(fmt::format(
        "the message states no numbers; {}, so its own memory filled the GPU",
        activity_text(d.context, m)));
  } else {
    v.evidence.push_back("the message states no numbers");
  }
  if (d.context.deepspeed_allocated_bytes) {
    v.evidence.push_back(fmt::format(
        "DeepSpeed's last see_memory_usage: {} allocated, {} cached",
        size(*d.context.deepspeed_allocated_bytes),
        size(d.context.deepspeed_reserved_bytes.value_or(0))));
  }
  return v;
}

// --- fixes ------------------------------------------------------------------

// A fix's words (DESIGN §2 diagnosis `fixes`): id, title, args, cost.
struct FixText {
  std::string_view id;
  std::string_view title;
  std::string_view args;
  std::string_view cost;
};

struct FixList {
  std::vector<OomFix> fixes;
  void add(std::string id, std::string title, std::string args,
           std::string cost) {
    OomFix fix;
    fix.rank = static_cast<int>(fixes.size()) + 1;
    fix.id = std::move(id);
    fix.title = std::move(title);
    fix.args = std::move(args);
    fix.cost = std::move(cost);
    fixes.push_back(std::move(fix));
  }
  void add(const FixText& f) {
    add(std::string(f.id), std::string(f.title), std::string(f.args),
        std::string(f.cost));
  }
};

// The fixes whose words do not depend on the message.
constexpr FixText k_find_other_process{
    "find-other-process", "Find what else holds the GPU",
    "nvidia-smi --query-compute-apps=pid,process_name,used_memory "
    "--format=csv",
    "none"};
constexpr FixText k_stop_or_move{
    "stop-or-move", "Stop the other process, or run on an idle GPU",
    "CUDA_VISIBLE_DEVICES=<an idle GPU>", "none"};
constexpr FixText k_reduce_batch{
    "reduce-batch", "Halve the micro-batch and double gradient accumulation",
    "per_device_train_batch_size ÷ 2, gradient_accumulation_steps × 2",
    "same global batch; smaller matrix multiplies run a little slower"};
constexpr FixText k_gradient_checkpointing{
    "gradient-checkpointing",
    "Recompute activations in the backward pass instead of storing them",
    "gradient_checkpointing=True",
    "about one extra forward pass per step (~30 % more compute)"};
constexpr FixText k_shorter_sequence{
    "shorter-sequence",
    "Train on shorter sequences (or serve a shorter --max-model-len)",
    "max_seq_length ÷ 2", "long inputs are truncated or rejected"};
constexpr FixText k_plan_the_setup{
    "plan-the-setup", "Price every fix for this model and these GPUs",
    "oomplan diagnose LOG MODEL --gpus NxGPU [plan options]", "none"};
constexpr FixText k_empty_cache{
    "empty-cache-between-phases",
    "Release cached blocks between phases (after evaluation, generation or "
    "loading)",
    "torch.cuda.empty_cache()",
    "the next allocations go back to cudaMalloc (milliseconds)"};
constexpr FixText k_leave_room_for_nccl{
    "leave-room-for-nccl", "Leave room on each GPU for NCCL's buffers",
    "NCCL_BUFFSIZE=2097152",
    "half NCCL's default 4 MiB per channel; large collectives may run "
    "slower"};
constexpr FixText k_lower_framework_memory{
    "lower-framework-memory",
    "Lower the framework's own memory target on these GPUs",
    "--gpu-memory-utilization 0.85 (vLLM)",
    "less KV cache (vLLM) or a smaller batch (training)"};
constexpr FixText k_one_process_per_gpu{
    "one-process-per-gpu",
    "Check that each rank uses its own GPU (LOCAL_RANK → "
    "torch.cuda.set_device)",
    "torch.cuda.set_device(local_rank)", "none"};
constexpr FixText k_kv_cache_fp8{
    "kv-cache-fp8", "Store the KV cache in FP8", "--kv-cache-dtype fp8",
    "half the KV bytes per token; a small accuracy cost"};
constexpr FixText k_smaller_profile{
    "smaller-profile", "Shrink the profiled activation peak",
    "--max-num-batched-tokens 2048 --max-num-seqs 64", "lower peak throughput"};
constexpr FixText k_quantize_weights{
    "quantize-weights", "Serve a quantized checkpoint",
    "--quantization fp8 (or an AWQ/GPTQ checkpoint)", "a small accuracy cost"};
constexpr FixText k_tensor_parallel{
    "tensor-parallel", "Split the model and its KV cache over GPUs",
    "--tensor-parallel-size 2", "twice the GPUs"};
constexpr FixText k_halve_batch{
    "reduce-batch", "Halve the micro-batch (the request grows with it)",
    "per_device_train_batch_size ÷ 2, gradient_accumulation_steps × 2",
    "same global batch; slightly slower steps"};
constexpr FixText k_efficient_attention{
    "efficient-attention",
    "Use fused attention instead of materializing batch × heads × seq² "
    "scores",
    "attn_implementation=\"sdpa\" (or \"flash_attention_2\")",
    "none on supported GPUs"};
constexpr FixText k_shorter_chunks{
    "shorter-sequence", "Process shorter sequences or smaller chunks",
    "max_seq_length ÷ 2", "long inputs are split or truncated"};
constexpr FixText k_memory_snapshot{
    "memory-snapshot", "Record where the memory went",
    "torch.cuda.memory._record_memory_history(); "
    "torch.cuda.memory._dump_snapshot(\"oom.pickle\")",
    "slower steps while recording"};
constexpr FixText k_raise_memory_fraction{
    "raise-memory-fraction", "Raise or remove the per-process memory cap",
    "torch.cuda.set_per_process_memory_fraction(0.95)",
    "less room for other processes"};
constexpr FixText k_check_limits{
    "check-limits",
    "Check for a memory cap: a per-process fraction, a MIG slice or "
    "CUDA_VISIBLE_DEVICES pointing elsewhere",
    "nvidia-smi -q -d MEMORY", "none"};
constexpr FixText k_xla_memory_fraction{
    "xla-memory-fraction",
    "Let XLA use more than its default 75 % of GPU memory",
    "XLA_PYTHON_CLIENT_MEM_FRACTION=.95", "less room for other processes"};
constexpr FixText k_smaller_workspace{
    "smaller-workspace",
    "Size DeepSpeed's inference workspace for shorter outputs",
    "deepspeed.init_inference(..., max_out_tokens=<lower>)",
    "shorter generations"};
constexpr FixText k_8bit_optimizer{
    "8-bit-optimizer", "Keep AdamW's states in 8 bits",
    "optim=\"adamw_bnb_8bit\"",
    "6 bytes per parameter less; rarely an accuracy cost"};

// TensorFlow: memory growth instead of reserving nearly all free memory at
// start-up. TF_FORCE_GPU_ALLOW_GROWTH is read by TF 1.14+ and 2.x
// (tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc
// GetAllowGrowthValue); set_memory_growth is TF 2's API, allow_growth and
// per_process_gpu_memory_fraction TF 1's GPUOptions (config.proto).
constexpr FixText k_tf_memory_growth{
    "tf-memory-growth",
    "Let TensorFlow allocate as it goes instead of reserving the whole GPU",
    "TF_FORCE_GPU_ALLOW_GROWTH=true (TF 2: tf.config.experimental."
    "set_memory_growth(gpu, True); TF 1: config.gpu_options.allow_growth = "
    "True)",
    "none; memory can fragment over a long run"};
constexpr FixText k_tf_memory_fraction{
    "tf-memory-fraction",
    "Cap TensorFlow's share and leave room for cuBLAS, cuDNN and other "
    "processes",
    "TF 1: config.gpu_options.per_process_gpu_memory_fraction = 0.8 (TF 2: "
    "tf.config.set_logical_device_configuration(gpu, [tf.config."
    "LogicalDeviceConfiguration(memory_limit=MiB)]))",
    "TensorFlow's tensors get that much less"};
// JAX preallocates 75 % of the GPU at the first op (jax docs, "GPU memory
// allocation"); with preallocation off it allocates on demand.
constexpr FixText k_xla_no_preallocate{
    "xla-no-preallocate",
    "Stop JAX from reserving 75 % of every GPU at start-up",
    "XLA_PYTHON_CLIENT_PREALLOCATE=false",
    "allocations on demand: a little slower, may fragment"};

// llama.cpp (tools/server/README.md, common/arg.cpp) and ollama
// (docs/faq.md, envconfig/config.go): the knobs that size ggml's buffers.
constexpr FixText k_ggml_fewer_layers{
    "fewer-gpu-layers", "Offload fewer layers to the GPU",
    "llama.cpp: -ngl <fewer>; ollama: num_gpu <fewer> (PARAMETER num_gpu, or "
    "\"options\": {\"num_gpu\": N})",
    "the layers left on the CPU run there: fewer tokens per second"};
constexpr FixText k_ggml_smaller_context{
    "smaller-context", "Use a smaller context: the KV cache grows with it",
    "llama.cpp: -c 4096; ollama: num_ctx 4096 (OLLAMA_CONTEXT_LENGTH=4096)",
    "longer prompts are truncated"};
constexpr FixText k_ggml_flash_attention{
    "flash-attention",
    "Turn on flash attention: a smaller compute buffer per token",
    "llama.cpp: -fa on (older builds: -fa); ollama: OLLAMA_FLASH_ATTENTION=1",
    "none on GPUs that support it"};
constexpr FixText k_ggml_kv_q8{
    "kv-cache-q8", "Store the KV cache in 8 bits (needs flash attention)",
    "llama.cpp: -ctk q8_0 -ctv q8_0; ollama: OLLAMA_KV_CACHE_TYPE=q8_0",
    "half the KV cache; a small accuracy cost"};
constexpr FixText k_ollama_overhead{
    "ollama-gpu-overhead",
    "Reserve VRAM that ollama's estimate leaves out (display, other apps)",
    "OLLAMA_GPU_OVERHEAD=1073741824 (bytes per GPU)",
    "ollama offloads fewer layers"};
constexpr FixText k_ollama_one_model{
    "ollama-one-model", "Keep one model loaded at a time",
    "OLLAMA_MAX_LOADED_MODELS=1", "switching models reloads them"};
constexpr FixText k_launch_blocking{
    "find-first-error", "Find the first error: the failed call may not be it",
    "CUDA_LAUNCH_BLOCKING=1 (then the earliest error in the log)",
    "slower, for one run"};

// The allocator variable to set. PyTorch 2.9 renamed it PYTORCH_ALLOC_CONF
// and prints that name, but 2.9.1 ignores expandable_segments there on CUDA
// (pytorch/pytorch#183387); the old name still works everywhere.
std::string alloc_env(const OomMessage& m) {
  if (m.alloc_conf_env == "PYTORCH_HIP_ALLOC_CONF" ||
      (m.alloc_conf_env.empty() && m.device == "hip")) {
    return "PYTORCH_HIP_ALLOC_CONF";
  }
  return "PYTORCH_CUDA_ALLOC_CONF";
}

void add_batch_fixes(FixList& l) {
  l.add(k_reduce_batch);
  l.add(k_gradient_checkpointing);
  l.add(k_shorter_sequence);
}

std::string util_text(double u) {
  return fmt::format("{:.2f}", u);
}

// Expandable segments exist from PyTorch 2.1 (c10 Note [Expandable
// Segments]); a 1.x-format message comes from 2.0 or older, which gets
// max_split_size_mb first.
void fragmentation_fixes(FixList& l, const OomMessage& m,
                         const LogContext& /*ctx*/) {
  const bool old = m.format == OomFormat::pytorch1;
  auto expandable = [&] {
    l.add("expandable-segments",
          "Let the caching allocator grow segments instead of splitting them",
          alloc_env(m) + "=expandable_segments:True",
          old ? "needs PyTorch 2.1 or later"
              : "none on Linux; first allocations slightly slower, and CUDA "
                "IPC of these tensors is unsupported");
  };
  auto max_split = [&] {
    l.add("max-split-size",
          "Keep the allocator from splitting large cached blocks",
          alloc_env(m) + "=max_split_size_mb:512",
          "more cudaMalloc calls for large tensors");
  };
  if (old) {
    max_split();
  } else {
    expandable();
  }
  l.add(k_empty_cache);
  if (old) {
    expandable();
  } else {
    max_split();
  }
  add_batch_fixes(l);
}

void nccl_fixes(FixList& l) {
  l.add(k_leave_room_for_nccl);
  l.add(k_find_other_process);
  l.add(k_lower_framework_memory);
}

void other_process_fixes(FixList& l, const OomMessage& m,
                         const LogContext& /*ctx*/) {
  if (m.kind == OomKind::nccl) {
    nccl_fixes(l);
    return;
  }
  l.add(k_find_other_process);
  l.add(k_stop_or_move);
  add_batch_fixes(l);
}

void context_creation_fixes(FixList& l, const OomMessage& m,
                            const LogContext& /*ctx*/) {
  if (m.kind == OomKind::nccl) {
    nccl_fixes(l);
    return;
  }
  l.add(k_find_other_process);
  l.add(k_stop_or_move);
  l.add(k_one_process_per_gpu);
}

void vllm_startup_fixes(FixList& l, const OomMessage& m,
                        const LogContext& /*ctx*/) {
  l.add(k_find_other_process);
  if (m.free_bytes && m.capacity_bytes && *m.capacity_bytes > 0) {
    // vLLM starts when gpu_util x total <= free (request_memory).
    const double fit = std::floor(100.0 * static_cast<double>(*m.free_bytes) /
                                  static_cast<double>(*m.capacity_bytes)) /
                       100.0;
    if (fit >= 0.05) {
      l.add("lower-gpu-memory-utilization",
            "Ask vLLM for no more than what is free",
            "--gpu-memory-utilization " + util_text(fit),
            "a smaller KV cache: fewer concurrent sequences");
    }
  }
  l.add(k_stop_or_move);
}

// The utilization that leaves room for one full-length sequence, from the
// message's shortfall and the log's start-up profile; nullopt when either
// is missing.
std::optional<double> utilization_for_one_sequence(const OomMessage& m,
                                                   const LogContext& ctx) {
  const std::optional<double> util =
      m.gpu_util ? m.gpu_util : ctx.vllm_gpu_util;
  if (!(m.requested_bytes && m.free_bytes && util && ctx.vllm_total_bytes &&
        *ctx.vllm_total_bytes > 0)) {
    return std::nullopt;
  }
  const double need =
      *util + static_cast<double>(*m.requested_bytes - *m.free_bytes) /
                  static_cast<double>(*ctx.vllm_total_bytes);
  return std::ceil(need * 100.0) / 100.0;
}

void vllm_kv_cache_fixes(FixList& l, const OomMessage& m,
                         const LogContext& ctx) {
  const bool max_len = m.kind == OomKind::vllm_max_seq_len;
  if (max_len && (m.estimated_max_model_len || m.kv_tokens)) {
    l.add("max-model-len", "Cap the context at what the KV cache holds",
          fmt::format("--max-model-len {}", m.estimated_max_model_len
                                                ? *m.estimated_max_model_len
                                                : *m.kv_tokens),
          "longer requests are rejected");
  }
  const std::optional<double> needed =
      max_len ? utilization_for_one_sequence(m, ctx) : std::nullopt;
  if (needed) {
    if (*needed <= 0.98) {
      l.add("raise-gpu-memory-utilization",
            "Give vLLM enough of the card for one full-length sequence",
            "--gpu-memory-utilization " + util_text(*needed),
            "less room for other processes on the GPU");
    }
  } else {
    l.add("raise-gpu-memory-utilization",
          "Give vLLM more of the card (the default is 0.9)",
          "--gpu-memory-utilization 0.95",
          "less room for other processes on the GPU");
  }
  l.add(k_kv_cache_fp8);
  if (!max_len) {
    l.add(k_smaller_profile);
    l.add(k_quantize_weights);
  }
  l.add(k_tensor_parallel);
}

void large_allocation_fixes(FixList& l, const OomMessage& /*m*/,
                            const LogContext& /*ctx*/) {
  l.add(k_halve_batch);
  l.add(k_efficient_attention);
  l.add(k_shorter_chunks);
  l.add(k_plan_the_setup);
}

void unknown_fixes(FixList& l, const OomMessage& m, const LogContext& /*ctx*/) {
  if (m.after_fault ||
      (m.requested_bytes && *m.requested_bytes < k_tiny_request)) {
    l.add(k_launch_blocking);
  }
  l.add(k_memory_snapshot);
  l.add(m.allowed_bytes ? k_raise_memory_fraction : k_check_limits);
  l.add("expandable-segments",
        "Let the caching allocator grow segments instead of splitting them",
        alloc_env(m) + "=expandable_segments:True", "none on Linux");
}

void shortfall_fixes(FixList& l, const OomMessage& m,
                     const LogContext& /*ctx*/) {
  if (m.source == "xla") {
    l.add(k_xla_memory_fraction);
  }
  if (m.kind == OomKind::deepspeed_workspace) {
    l.add(k_smaller_workspace);
  }
  add_batch_fixes(l);
  l.add(k_8bit_optimizer);
  l.add(k_plan_the_setup);
}

// Each cause's fixes, best first.
struct CauseFixes {
  OomCause cause;
  void (*add)(FixList&, const OomMessage&, const LogContext&);
};
constexpr std::array k_cause_fixes = {
    CauseFixes{OomCause::fragmentation, fragmentation_fixes},
    CauseFixes{OomCause::other_processes, other_process_fixes},
    CauseFixes{OomCause::context_creation, context_creation_fixes},
    CauseFixes{OomCause::vllm_startup_free_memory, vllm_startup_fixes},
    CauseFixes{OomCause::vllm_kv_cache, vllm_kv_cache_fixes},
    CauseFixes{OomCause::large_allocation, large_allocation_fixes},
    CauseFixes{OomCause::unknown, unknown_fixes},
    CauseFixes{OomCause::shortfall, shortfall_fixes},
};

// llama.cpp and ollama: their own knobs, whatever the cause. A buffer
// that failed at load (it states its size) asks for fewer offloaded layers
// first; a pool or KV cache that grew while serving, for a smaller context.
void ggml_fixes(FixList& l, const OomMessage& m) {
  if (m.requested_bytes) {
    l.add(k_ggml_fewer_layers);
    l.add(k_ggml_smaller_context);
  } else {
    l.add(k_ggml_smaller_context);
    l.add(k_ggml_fewer_layers);
  }
  l.add(k_ggml_flash_attention);
  l.add(k_ggml_kv_q8);
  l.add(k_ollama_overhead);
  l.add(k_ollama_one_model);
}

// The stack's own first fixes where it reserves memory up front: TensorFlow
// and JAX, when something else needed room (cuBLAS, another process).
void stack_fixes(FixList& l, OomCause cause, const OomMessage& m) {
  const bool room =
      cause == OomCause::context_creation || cause == OomCause::other_processes;
  if (m.source == "tensorflow" && room) {
    l.add(k_tf_memory_growth);
    l.add(k_tf_memory_fraction);
  }
  if (m.source == "xla" && room) {
    l.add(k_xla_no_preallocate);
  }
}

FixList fixes_for(OomCause cause, const OomMessage& m, const LogContext& ctx) {
  FixList l;
  if (m.source == "llama.cpp") {
    ggml_fixes(l, m);
    return l;
  }
  stack_fixes(l, cause, m);
  for (const CauseFixes& row : k_cause_fixes) {
    if (row.cause == cause) {
      row.add(l, m, ctx);
    }
  }
  return l;
}

}  // namespace

void explain(Diagnosis& d) {
  d.evidence.clear();
  d.fixes.clear();
  if (d.messages.empty()) {
    return;
  }
  Verdict v = classify(d);
  d.cause = v.cause;
  d.evidence = std::move(v.evidence);
  d.fixes = fixes_for(d.cause, d.messages.front(), d.context).fixes;
}

}  // namespace oomplan
