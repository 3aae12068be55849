#include "diagnose/internal.hpp"

#include "oomplan/diagnose/diagnose.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

// DESIGN §2's cause rules for the first message, first match wins (R
// request, C capacity, F free, P this process, A allocated, U reserved but
// unallocated; in 1.x U = reserved total - A):
//   vllm_startup_free_memory, vllm_kv_cache, context_creation,
//   fragmentation: U >= R and U >= 5 % of C and F < R,
//   unknown: F >= R + max(5 % of C, 256 MiB),
//   large_allocation: R >= 25 % of C,
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

struct Verdict {
  OomCause cause = OomCause::shortfall;
  std::vector<std::string> evidence;
};

// The numeric rules (fragmentation .. shortfall) on one message.
Verdict numeric_rules(const OomMessage& m) {
  const Numbers n = numbers_of(m);
  Verdict v;
  auto& ev = v.evidence;
  if (n.p_ignored) {
    ev.push_back(fmt::format(
        "\"this process has {}\" is less than PyTorch's own {} allocated + {} "
        "reserved: NVML could not see the process (a container?), so it is "
        "not used",
        size(*m.process_bytes), size(*n.a), size(*n.u)));
  }
  if (n.u && n.r && n.c && n.f && *n.u >= *n.r &&
      *n.u >= share_of(k_frag_share, *n.c) && *n.f < *n.r) {
    v.cause = OomCause::fragmentation;
    ev.insert(ev.begin(),
              fmt::format("{} reserved but unallocated ≥ the {} request while "
                          "{} is free",
                          size(*n.u), size(*n.r), size(*n.f)));
    ev.push_back(fmt::format(
        "the cached {} is {} of the {} card (≥ 5 %), but no free block in it "
        "is large enough for {}",
        size(*n.u), pct(*n.u, *n.c), size(*n.c), size(*n.r)));
    return v;
  }
  if (n.f && n.r && n.c) {
    const Bytes margin =
        std::max(share_of(k_unknown_share, *n.c), k_margin_floor);
    if (*n.f >= *n.r + margin) {
      v.cause = OomCause::unknown;
      ev.insert(ev.begin(),
                fmt::format("{} free ≥ the {} request + {}: the numbers do not "
                            "explain the failure",
                            size(*n.f), size(*n.r), size(margin)));
      if (m.allowed_bytes) {
        ev.push_back(fmt::format(
            "the process is capped at {} (torch.cuda."
            "set_per_process_memory_fraction): {} allocated + {} requested "
            "against that cap",
            size(*m.allowed_bytes), size(n.a.value_or(0)), size(*n.r)));
      }
      if (n.a && *n.a > *n.c) {
        ev.push_back(fmt::format(
            "{} allocated on a {} card: the driver pages GPU memory to system "
            "memory (Windows/WSL shared memory or unified memory)",
            size(*n.a), size(*n.c)));
      }
      return v;
    }
  }
  if (n.r && n.c && *n.r >= share_of(k_large_share, *n.c)) {
    v.cause = OomCause::large_allocation;
    ev.insert(ev.begin(),
              *n.r > *n.c
                  ? fmt::format("the {} request is larger than the whole {} "
                                "card ({})",
                                size(*n.r), size(*n.c), pct(*n.r, *n.c))
                  : fmt::format("the {} request is {} of the {} card (≥ 25 %)",
                                size(*n.r), pct(*n.r, *n.c), size(*n.c)));
    if (m.kind == OomKind::xla_compile) {
      ev.push_back(
          fmt::format("the compiled program needs {} of HBM; the device has {}",
                      size(*n.r), size(*n.c)));
    }
    return v;
  }
  if (n.c && n.f && n.p) {
    const Bytes others = *n.c - *n.f - *n.p;
    if (others >= share_of(k_other_share, *n.c)) {
      v.cause = OomCause::other_processes;
      ev.insert(ev.begin(),
                fmt::format("{} of the {} card is neither free ({}) nor this "
                            "process's ({}): {} held by other processes",
                            size(others), size(*n.c), size(*n.f), size(*n.p),
                            pct(others, *n.c)));
      if (!m.processes.empty()) {
        ev.push_back(fmt::format("{} other processes listed, {} together",
                                 m.processes.size(), size(*n.listed)));
      }
      return v;
    }
  } else if (n.c && n.listed) {
    if (*n.listed >= share_of(k_other_share, *n.c)) {
      v.cause = OomCause::other_processes;
      ev.insert(ev.begin(),
                fmt::format("the listed processes hold {} ({} of the {} card)",
                            size(*n.listed), pct(*n.listed, *n.c), size(*n.c)));
      if (n.self_listed) {
        ev.push_back(fmt::format(
            "not counting the {} process taken as this job (it holds its {} "
            "allocated + {} reserved; inside a container NVML shows host PIDs)",
            size(*n.self_listed), size(*n.a), size(*n.u)));
      }
      return v;
    }
  } else if (n.c && n.f && n.a && n.u) {
    const Bytes others = *n.c - *n.f - *n.a - *n.u;
    if (others >= share_of(k_other_share, *n.c) && others >= k_other_floor) {
      v.cause = OomCause::other_processes;
      ev.insert(ev.begin(),
                fmt::format("{} − {} free − {} allocated − {} cached = {} ({}) "
                            "is held outside PyTorch's allocator: other "
                            "processes (or this process's non-PyTorch memory)",
                            size(*n.c), size(*n.f), size(*n.a), size(*n.u),
                            size(others), pct(others, *n.c)));
      return v;
    }
  }
  v.cause = OomCause::shortfall;
  if (n.r && n.f && n.c) {
    ev.insert(ev.begin(),
              fmt::format("the {} request does not fit in the {} free of the "
                          "{} card",
                          size(*n.r), size(*n.f), size(*n.c)));
  } else if (n.r && n.f) {
    ev.insert(ev.begin(), fmt::format("the {} request does not fit in the {} "
                                      "free",
                                      size(*n.r), size(*n.f)));
  } else if (n.r && n.c && (n.p || n.a)) {
    const Bytes used = n.p ? *n.p : *n.a;
    ev.insert(ev.begin(),
              fmt::format("the {} request on top of the {} in use {} the {} {}",
                          size(*n.r), size(used),
                          used + *n.r > *n.c ? "exceeds" : "nears", size(*n.c),
                          m.kind == OomKind::mps_allocator ? "limit" : "card"));
  } else if (n.r) {
    ev.insert(ev.begin(),
              fmt::format("a {} allocation failed; the message states no "
                          "capacity or free figure",
                          size(*n.r)));
  }
  if (n.p && n.c) {
    ev.push_back(fmt::format("this process holds {} ({}) of the card{}",
                             size(*n.p), pct(*n.p, *n.c),
                             n.a ? fmt::format(", {} of it allocated by "
                                               "PyTorch",
                                               size(*n.a))
                                 : std::string()));
  } else if (n.a && n.c) {
    ev.push_back(fmt::format("PyTorch holds {} allocated ({}) of the card",
                             size(*n.a), pct(*n.a, *n.c)));
  }
  if (n.u && n.r && *n.u > 0) {
    ev.push_back(fmt::format("{} is reserved but unallocated ({} the request)",
                             size(*n.u), *n.u >= *n.r ? "≥" : "<"));
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

bool activity_before(const LogContext& ctx, const OomMessage& m) {
  return ctx.first_activity_line && *ctx.first_activity_line < m.line;
}

Verdict classify(const Diagnosis& d) {
  const OomMessage& m = d.messages.front();
  if (m.format == OomFormat::vllm) {
    return vllm_rules(m, d.context);
  }
  if (m.kind == OomKind::cublas_create) {
    Verdict v{OomCause::context_creation, {}};
    v.evidence.push_back(
        "cuBLAS could not allocate the workspace for its handle "
        "(cublasCreate): the first matrix multiply on this GPU found no room");
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
  if (m.kind == OomKind::bitsandbytes) {
    v.evidence.push_back(
        "bitsandbytes' own CUDA call ran out of memory (its paged optimizers "
        "allocate managed memory, which host RAM backs too)");
  }
  if (activity_before(d.context, m)) {
    v.evidence.push_back(fmt::format(
        "the message states no numbers; the job had been working since line "
        "{}, so its own memory filled the GPU",
        *d.context.first_activity_line));
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
};

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

void add_find_process(FixList& l) {
  l.add("find-other-process", "Find what else holds the GPU",
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory "
        "--format=csv",
        "none");
}

void add_batch_fixes(FixList& l) {
  l.add("reduce-batch",
        "Halve the micro-batch and double gradient accumulation",
        "per_device_train_batch_size ÷ 2, gradient_accumulation_steps × 2",
        "same global batch; smaller matrix multiplies run a little slower");
  l.add("gradient-checkpointing",
        "Recompute activations in the backward pass instead of storing them",
        "gradient_checkpointing=True",
        "about one extra forward pass per step (~30 % more compute)");
  l.add("shorter-sequence",
        "Train on shorter sequences (or serve a shorter --max-model-len)",
        "max_seq_length ÷ 2", "long inputs are truncated or rejected");
}

void add_plan_fix(FixList& l) {
  l.add("plan-the-setup", "Price every fix for this model and these GPUs",
        "oomplan diagnose LOG MODEL --gpus NxGPU [plan options]", "none");
}

std::string util_text(double u) {
  return fmt::format("{:.2f}", u);
}

FixList fixes_for(OomCause cause, const OomMessage& m, const LogContext& ctx) {
  FixList l;
  switch (cause) {
    case OomCause::fragmentation: {
      // Expandable segments exist from PyTorch 2.1 (c10 Note [Expandable
      // Segments]); a 1.x-format message comes from 2.0 or older.
      const bool old = m.format == OomFormat::pytorch1;
      auto expandable = [&] {
        l.add("expandable-segments",
              "Let the caching allocator grow segments instead of splitting "
              "them",
              alloc_env(m) + "=expandable_segments:True",
              old ? "needs PyTorch 2.1 or later"
                  : "none on Linux; first allocations slightly slower, and "
                    "CUDA IPC of these tensors is unsupported");
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
      l.add("empty-cache-between-phases",
            "Release cached blocks between phases (after evaluation, "
            "generation or loading)",
            "torch.cuda.empty_cache()",
            "the next allocations go back to cudaMalloc (milliseconds)");
      if (old) {
        expandable();
      } else {
        max_split();
      }
      add_batch_fixes(l);
      break;
    }
    case OomCause::other_processes:
    case OomCause::context_creation:
      if (m.kind == OomKind::nccl) {
        l.add("leave-room-for-nccl",
              "Leave room on each GPU for NCCL's buffers",
              "NCCL_BUFFSIZE=2097152",
              "half NCCL's default 4 MiB per channel; large collectives may "
              "run slower");
        add_find_process(l);
        l.add("lower-framework-memory",
              "Lower the framework's own memory target on these GPUs",
              "--gpu-memory-utilization 0.85 (vLLM)",
              "less KV cache (vLLM) or a smaller batch (training)");
        break;
      }
      add_find_process(l);
      l.add("stop-or-move", "Stop the other process, or run on an idle GPU",
            "CUDA_VISIBLE_DEVICES=<an idle GPU>", "none");
      if (cause == OomCause::context_creation) {
        l.add("one-process-per-gpu",
              "Check that each rank uses its own GPU (LOCAL_RANK → "
              "torch.cuda.set_device)",
              "torch.cuda.set_device(local_rank)", "none");
      } else {
        add_batch_fixes(l);
      }
      break;
    case OomCause::vllm_startup_free_memory: {
      add_find_process(l);
      if (m.free_bytes && m.capacity_bytes && *m.capacity_bytes > 0) {
        // vLLM starts when gpu_util x total <= free (request_memory).
        const double fit =
            std::floor(100.0 * static_cast<double>(*m.free_bytes) /
                       static_cast<double>(*m.capacity_bytes)) /
            100.0;
        if (fit >= 0.05) {
          l.add("lower-gpu-memory-utilization",
                "Ask vLLM for no more than what is free",
                "--gpu-memory-utilization " + util_text(fit),
                "a smaller KV cache: fewer concurrent sequences");
        }
      }
      l.add("stop-or-move", "Stop the other process, or run on an idle GPU",
            "CUDA_VISIBLE_DEVICES=<an idle GPU>", "none");
      break;
    }
    case OomCause::vllm_kv_cache: {
      const bool max_len = m.kind == OomKind::vllm_max_seq_len;
      if (max_len && m.estimated_max_model_len) {
        l.add("max-model-len", "Cap the context at what the KV cache holds",
              fmt::format("--max-model-len {}", *m.estimated_max_model_len),
              "longer requests are rejected");
      } else if (max_len && m.kv_tokens) {
        l.add("max-model-len", "Cap the context at what the KV cache holds",
              fmt::format("--max-model-len {}", *m.kv_tokens),
              "longer requests are rejected");
      }
      const std::optional<double> util =
          m.gpu_util ? m.gpu_util : ctx.vllm_gpu_util;
      if (max_len && m.requested_bytes && m.free_bytes && util &&
          ctx.vllm_total_bytes && *ctx.vllm_total_bytes > 0) {
        const double need =
            *util + static_cast<double>(*m.requested_bytes - *m.free_bytes) /
                        static_cast<double>(*ctx.vllm_total_bytes);
        const double rounded = std::ceil(need * 100.0) / 100.0;
        if (rounded <= 0.98) {
          l.add("raise-gpu-memory-utilization",
                "Give vLLM enough of the card for one full-length sequence",
                "--gpu-memory-utilization " + util_text(rounded),
                "less room for other processes on the GPU");
        }
      } else {
        l.add("raise-gpu-memory-utilization",
              "Give vLLM more of the card (the default is 0.9)",
              "--gpu-memory-utilization 0.95",
              "less room for other processes on the GPU");
      }
      l.add("kv-cache-fp8", "Store the KV cache in FP8", "--kv-cache-dtype fp8",
            "half the KV bytes per token; a small accuracy cost");
      if (!max_len) {
        l.add("smaller-profile", "Shrink the profiled activation peak",
              "--max-num-batched-tokens 2048 --max-num-seqs 64",
              "lower peak throughput");
        l.add("quantize-weights", "Serve a quantized checkpoint",
              "--quantization fp8 (or an AWQ/GPTQ checkpoint)",
              "a small accuracy cost");
      }
      l.add("tensor-parallel", "Split the model and its KV cache over GPUs",
            "--tensor-parallel-size 2", "twice the GPUs");
      break;
    }
    case OomCause::large_allocation:
      l.add("reduce-batch", "Halve the micro-batch (the request grows with it)",
            "per_device_train_batch_size ÷ 2, gradient_accumulation_steps × 2",
            "same global batch; slightly slower steps");
      l.add("efficient-attention",
            "Use fused attention instead of materializing batch × heads × "
            "seq² scores",
            "attn_implementation=\"sdpa\" (or \"flash_attention_2\")",
            "none on supported GPUs");
      l.add("shorter-sequence", "Process shorter sequences or smaller chunks",
            "max_seq_length ÷ 2", "long inputs are split or truncated");
      add_plan_fix(l);
      break;
    case OomCause::unknown:
      l.add("memory-snapshot", "Record where the memory went",
            "torch.cuda.memory._record_memory_history(); "
            "torch.cuda.memory._dump_snapshot(\"oom.pickle\")",
            "slower steps while recording");
      if (m.allowed_bytes) {
        l.add("raise-memory-fraction",
              "Raise or remove the per-process memory cap",
              "torch.cuda.set_per_process_memory_fraction(0.95)",
              "less room for other processes");
      } else {
        l.add("check-limits",
              "Check for a memory cap: a per-process fraction, a MIG slice or "
              "CUDA_VISIBLE_DEVICES pointing elsewhere",
              "nvidia-smi -q -d MEMORY", "none");
      }
      l.add("expandable-segments",
            "Let the caching allocator grow segments instead of splitting them",
            alloc_env(m) + "=expandable_segments:True", "none on Linux");
      break;
    case OomCause::shortfall:
      if (m.source == "xla") {
        l.add("xla-memory-fraction",
              "Let XLA use more than its default 75 % of GPU memory",
              "XLA_PYTHON_CLIENT_MEM_FRACTION=.95",
              "less room for other processes");
      }
      if (m.kind == OomKind::deepspeed_workspace) {
        l.add("smaller-workspace",
              "Size DeepSpeed's inference workspace for shorter outputs",
              "deepspeed.init_inference(..., max_out_tokens=<lower>)",
              "shorter generations");
      }
      add_batch_fixes(l);
      l.add("8-bit-optimizer", "Keep AdamW's states in 8 bits",
            "optim=\"adamw_bnb_8bit\"",
            "6 bytes per parameter less; rarely an accuracy cost");
      add_plan_fix(l);
      break;
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
