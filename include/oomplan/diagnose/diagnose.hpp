#pragma once

// `oomplan diagnose`: out-of-memory messages in a log -> facts -> a cause.
//
// A LogScanner reads a log of any size in chunks (the CLI reads the file or
// standard input; the core never does I/O) in constant memory: it keeps a
// bounded window around each candidate message, at most k_max_messages
// messages in full (`count` still counts all of them), and a few facts from
// the surrounding log. Scanning is linear: a memchr prefilter for a few rare
// bytes, a fixed-string check around each, then a hand parser on the
// candidate's window. Messages are found anywhere in a line and across
// wrapped lines, behind prefixes (`[rank0]:`, timestamps, hostnames, Ray and
// vLLM worker tags, log-level headers, ANSI colours), HTML escapes and the
// typos real engines print (PyTorch 2.1's "capacty").
//
// finish() explains the first message with DESIGN §2's cause rules (first
// match wins) and lists evidence lines (numbers) and generic fixes for the
// cause. The JSON rendering is DESIGN §2's `oomplan.diagnosis/1`.
//
// Exit semantics for the CLI (DESIGN exit codes): `binary` -> 2 (bad input);
// else `count == 0` -> 1 (no out-of-memory message); else 0.
//
// Context mode (`oomplan diagnose LOG MODEL --gpus ...`): add_plan_context()
// sets the plan of the job's setup beside the diagnosis: the comparisons of
// compare_with_plan() and the advisor's fixes merged with the cause's own.

#include "oomplan/memory/memory.hpp"
#include "oomplan/util/units.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// DESIGN §2 `format`.
enum class OomFormat {
  pytorch2,      // PyTorch >= 2.1 caching allocator ("GPU 0 has a total ...")
  pytorch1,      // PyTorch 1.0-2.0 ("(GPU 0; X total capacity; ...)")
  vllm,          // vLLM's KV-cache and start-up checks
  cuda_runtime,  // "CUDA error: out of memory" and driver errors
  cublas,        // CUBLAS_STATUS_ALLOC_FAILED
  nccl,          // NCCL "Cuda failure 'out of memory'", "Failed to CUDA calloc"
  xla,           // XLA / JAX / TensorFlow RESOURCE_EXHAUSTED and allocators
  other,         // DeepSpeed, bitsandbytes, PyTorch on MPS, anything else
};
std::string_view oom_format_name(OomFormat format);

// What printed the message, finer than the format: the cause rules and the
// fixes depend on it.
enum class OomKind {
  caching_allocator,         // PyTorch's CUDA/HIP/XPU caching allocator
  mps_allocator,             // PyTorch's MPS allocator (Apple GPUs)
  cuda_error,                // a CUDA/HIP runtime or driver call outside it
  cublas_create,             // cuBLAS (hipBLAS) handle creation
  cublas,                    // another cuBLAS allocation
  cudnn_create,              // cuDNN handle creation
  nccl,                      // NCCL's own buffers
  xla_allocation,            // XLA/JAX/TF allocator or executable
  xla_compile,               // XLA:TPU compile: the program exceeds HBM
  vllm_no_cache_blocks,      // "No available memory for the cache blocks"
  vllm_max_seq_len,          // max seq len vs KV cache (V0 and V1 wordings)
  vllm_startup_free_memory,  // "Free memory on device ... on startup"
  deepspeed_workspace,       // DeepSpeed inference workspace
  bitsandbytes,              // bitsandbytes' CUDA_CHECK_RETURN
  ggml_buffer,               // llama.cpp/ggml: a weights, KV-cache, compute
                             // or pool buffer (CUDA, HIP, Vulkan, Metal)
  generic,                   // "out of memory" near a GPU word, no grammar
};

struct ProcessMemory {
  std::int64_t pid = 0;
  Bytes bytes = 0;
};

// One message. A field the message does not state is empty (JSON null).
// Sizes are as printed (GiB = 2^30, MiB = 2^20, KiB = 2^10; "GB"/"MB"/"G"
// are 2^30/2^20 in every tool that prints them here, see diagnose.cpp),
// rounded to the byte.
struct OomMessage {
  std::int64_t line = 0;  // 1-based line of the message's first character
  OomFormat format = OomFormat::other;
  OomKind kind = OomKind::generic;
  std::string_view source;       // "pytorch", "vllm", "cuda", "nccl", "xla",
                                 // "tensorflow", "deepspeed", "bitsandbytes"
  std::string_view device;       // "cuda", "hip", "xpu", "mps", "tpu", "host";
                                 // empty when not stated
  std::optional<int> gpu_index;  // "GPU N", "cuda:N", NCCL "[N]", ordinal
  std::optional<Bytes> requested_bytes;  // "Tried to allocate X", vLLM
                                         // "(util, X GiB)" / "X GiB KV cache
                                         // is needed", NCCL/XLA "N bytes"
  std::optional<Bytes> capacity_bytes;   // "total capacity of X", "(F/C GiB)"
  std::optional<Bytes> free_bytes;       // "of which X is free", "X free",
                                         // vLLM available KV cache memory
  std::optional<Bytes> process_bytes;    // "this process has X memory in use"
  std::optional<Bytes> allocated_bytes;  // "X is allocated by PyTorch" (2.x),
                                         // "X already allocated" (1.x)
  std::optional<Bytes> reserved_unallocated_bytes;  // 2.x "reserved by
                                                    // PyTorch but unallocated";
                                                    // 1.0-1.3 "X cached"
  std::optional<Bytes> other_processes_bytes;       // sum of "Process N has X"
  std::optional<Bytes> reserved_total_bytes;        // 1.x "X reserved in total"
  std::optional<Bytes> allowed_bytes;  // "X allowed" (per-process fraction)
  std::optional<std::int64_t> max_seq_len;              // vLLM
  std::optional<std::int64_t> kv_tokens;                // vLLM V0
  std::optional<double> gpu_util;                       // vLLM start-up
  std::optional<std::int64_t> estimated_max_model_len;  // vLLM V1
  // The "Process N has X memory in use" clauses in order (at most 32).
  std::vector<ProcessMemory> processes;
  // The allocator variable the message suggests (PYTORCH_CUDA_ALLOC_CONF,
  // PYTORCH_HIP_ALLOC_CONF, PYTORCH_ALLOC_CONF); empty when none.
  std::string_view alloc_conf_env;
  // The traceback above the message runs the model (forward, backward, a
  // torch.nn op): the job's own work had begun.
  bool in_model_code = false;
  // An earlier line reports a CUDA fault (illegal memory access, a
  // device-side assert): the context is broken, allocations fail anyway.
  bool after_fault = false;
  // The first 300 characters of the message, prefixes removed, whitespace
  // collapsed, valid UTF-8.
  std::string text;
};

// Facts from the surrounding log, as they stood at the first message.
struct LogContext {
  // The first line showing the job's own work: a progress bar (tqdm's it/s,
  // s/it) or DeepSpeed's see_memory_usage with memory allocated.
  std::optional<std::int64_t> first_activity_line;
  // vLLM's start-up profile lines.
  std::optional<Bytes> vllm_total_bytes;     // total_gpu_memory
  std::optional<double> vllm_gpu_util;       // gpu_memory_utilization
  std::optional<Bytes> vllm_kv_cache_bytes;  // KV cache size / available
  // DeepSpeed see_memory_usage "MA x GB ... CA y GB" (last seen).
  std::optional<Bytes> deepspeed_allocated_bytes;
  std::optional<Bytes> deepspeed_reserved_bytes;
};

// A generic fix for the cause (DESIGN §2 diagnosis `fixes`). `args` is the
// variable, flag or oomplan command to use; `cost` what it costs.
struct OomFix {
  int rank = 0;
  std::string id;
  std::string title;
  std::string args;
  std::string cost;
  // Context mode, the advisor's fixes (Plan::fixes): `args` is then the
  // oomplan command that plans the fixed setup, and these say its DESIGN
  // group ("same-hardware", ...; empty for the cause's own fixes), the fixed
  // plan's per-GPU total, whether it fits, and the settings each framework
  // needs ("vLLM: --kv-cache-dtype fp8").
  std::string group;
  std::optional<Bytes> total_bytes;
  std::optional<bool> fits;
  std::vector<std::string> launch;
};

enum class OomCause {
  vllm_startup_free_memory,
  vllm_kv_cache,
  context_creation,
  fragmentation,
  unknown,
  large_allocation,
  other_processes,
  shortfall,
};
std::string_view oom_cause_name(OomCause cause);

inline constexpr std::size_t k_max_messages = 100;

// Reading stops early once the input is clearly binary (/dev/zero, a
// compressed or UTF-16 file): at every whole k_binary_probe_bytes of the
// stream, more than 1 byte in k_binary_stop_ratio so far was NUL or invalid
// UTF-8. Checked at fixed stream offsets, so any split of the input into
// chunks stops at the same byte.
inline constexpr std::int64_t k_binary_probe_bytes = std::int64_t{1} << 20;
inline constexpr std::int64_t k_binary_stop_ratio = 10;

struct Plan;  // plan.hpp

struct Diagnosis {
  std::vector<OomMessage> messages;      // the first k_max_messages, log order
  std::int64_t count = 0;                // every message found
  OomCause cause = OomCause::shortfall;  // meaningful when count > 0
  std::vector<std::string> evidence;     // the numbers behind the cause
  std::vector<OomFix> fixes;             // ranked from 1
  LogContext context;
  // Input that is not text: NUL bytes and invalid UTF-8 together above
  // 1 % of the bytes (the CLI exits 2).
  bool binary = false;
  // Reading stopped early because the input is clearly binary (see
  // k_binary_probe_bytes); `bytes` counts what was read.
  bool stopped = false;
  std::int64_t bytes = 0;  // bytes scanned
  std::int64_t lines = 0;  // lines scanned (a last line without '\n' counts)
  std::int64_t nul_bytes = 0;
  std::int64_t invalid_utf8_bytes = 0;
  // Context mode (add_plan_context): the plan of the job's setup, and the
  // lines comparing it with the first message (compare_with_plan and the
  // log's vLLM profile). Null without context; REQUIRES the Plan to outlive
  // the Diagnosis.
  const Plan* plan = nullptr;
  std::vector<std::string> plan_evidence;
};

class LogScanner {
 public:
  LogScanner();
  ~LogScanner();
  LogScanner(const LogScanner&) = delete;
  LogScanner& operator=(const LogScanner&) = delete;
  LogScanner(LogScanner&&) noexcept;
  LogScanner& operator=(LogScanner&&) noexcept;

  // Any split of the log into chunks gives the same result. Ignored once
  // done().
  void feed(std::string_view chunk);
  // True once the input is clearly binary (k_binary_probe_bytes): the caller
  // stops reading; finish() reports `binary` and `stopped`.
  bool done() const;
  // The diagnosis of everything fed. Call once; the scanner is spent.
  Diagnosis finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// One-shot: the diagnosis of a whole log held in memory.
Diagnosis diagnose(std::string_view log);

// Applies DESIGN's cause rules to `diagnosis.messages[0]` and fills cause,
// evidence and fixes (finish() calls it; exposed for callers that edit the
// messages). No-op when there is no message.
void explain(Diagnosis& diagnosis);

// Context mode (`oomplan diagnose LOG MODEL --gpus ...`): evidence lines
// comparing a message with the plan of the setup that produced it: the
// card's capacity, the plan's peak (allocated / reserved / device, DESIGN §2
// "peak") against what the log shows (allocated + the failed request,
// reserved, this process), and the component that explains the gap; for vLLM
// messages, the plan's start-up profile (requested memory, KV-cache pool,
// largest model length that fits) against the message. `plan` is the
// Budget of the most loaded GPU, as memory() returns it. Pure; at most a
// handful of lines, empty when the message states nothing comparable.
std::vector<std::string> compare_with_plan(const OomMessage& message,
                                           const Budget& plan);

// Context mode: sets `diagnosis.plan` to `plan` (the whole pipeline's plan
// of the job's setup, make_plan) and, when the log holds a message, its
// comparison lines (compare_with_plan, plus the log's vLLM start-up profile
// and max seq len against the plan's) and the fixes merged and re-ranked:
//   - the advisor's fixes (plan.fixes, each priced by the pipeline) replace
//     the generic fixes for the knobs the planner prices (batch,
//     checkpointing, sequence length, 8-bit optimizer, attention, vLLM
//     utilization, KV dtype, tensor parallelism, quantization) and the "plan
//     the setup" hint; without advisor fixes (the plan fits with room) the
//     generic ones stay;
//   - shortfall and large_allocation list the advisor's fixes first; every
//     other cause keeps its own first (expandable segments and empty_cache
//     for fragmentation, finding the other process, vLLM's own estimate of
//     the max model length).
// REQUIRES: `plan` outlives `diagnosis`.
void add_plan_context(Diagnosis& diagnosis, const Plan& plan);

}  // namespace oomplan
