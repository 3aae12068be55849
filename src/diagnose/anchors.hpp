#pragma once

// Private to diagnose: what the scanner's prefilter verified at a position
// (an anchor), and the message a grammar parses from there.

#include "diagnose/window.hpp"

#include "oomplan/diagnose/diagnose.hpp"

#include <cstddef>
#include <optional>
#include <string_view>

namespace oomplan::diag {

// What a verified anchor found.
enum class Hit {
  none,
  out_of_memory,      // "out of memory" (any case)
  camel_oom,          // "OutOfMemory", "OUT_OF_MEMORY"
  cache_blocks,       // "available memory"
  startup,            // "GPU memory utilization ("
  enough_memory,      // "enough memory"
  vllm_profile,       // "total_gpu_memory"
  deepspeed_usage,    // "see_memory_usage"
  kv_cache,           // "KV cache" / "KV Cache"
  cuda_calloc,        // "CUDA calloc"
  blas_alloc,         // "BLAS_STATUS_ALLOC_FAILED"
  dnn_handle,         // "CUDNN_STATUS_ALLOC_FAILED", cudnn handle creation
  exhausted,          // "exhausted" / "EXHAUSTED"
  tried_to_allocate,  // "Tried to allocate"
  requested,          // "Requested:" (DeepSpeed)
  progress,           // "it/s", "s/it"
};

// Hits that are context lines (facts from the surrounding log), not
// messages.
inline bool is_context_hit(Hit h) {
  return h == Hit::vllm_profile || h == Hit::deepspeed_usage ||
         h == Hit::requested || h == Hit::progress;
}

// A message a grammar parsed, and where it lies in the window's text.
struct Parsed {
  OomMessage message;
  std::size_t start = 0;
  std::size_t end = 0;
};

// The message at window text offset `np`, where the scanner verified `hit`
// (the 'y' of "memory", the 'V' of "KV", else the anchor's first byte):
// the grammar its surrounding words lead to, run from the message's first
// word. Nullopt when the words around it are not a message (prose, a quoted
// source line, a context phrase). `raw` holds the bytes `window` was
// normalized from (TensorFlow is named by a removed line prefix).
std::optional<Parsed> parse_at_anchor(const Window& window,
                                      std::string_view raw, std::size_t np,
                                      Hit hit);

}  // namespace oomplan::diag
