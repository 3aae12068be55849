#include "diagnose/grammars.hpp"

#include <algorithm>

// XLA, JAX and TensorFlow's RESOURCE_EXHAUSTED. Where the wordings come
// from: XLA/TSL "Out of memory while trying to allocate %d bytes.", "Out of
// memory allocating %d bytes.", "Failed to allocate request for %s (%dB) on
// device ordinal %d"; tsl HumanReadableNumBytes prints KiB/MiB/GiB (2^10..).
// The XLA:TPU compiler (closed source) prints "Used 21.95G of 15.48G hbm":
// its "G" is 2^30 (a v3 core's 16 GiB HBM shows as 15.48G beside 0.52G
// reserved; in 10^9 units it would read 17.18G). TensorFlow's own runtime
// and the allocators XLA shares with it are in tf.cpp.

namespace oomplan::diag {
namespace {

void parse_xla_device(Cursor& c, OomMessage& m) {
  if (c.lit("on device ordinal")) {
    if (const auto idx = c.integer(); idx && *idx < 4096) {
      m.gpu_index = static_cast<int>(*idx);
    }
  }
}

// TensorFlow's own runtime, named by the glog prefix's source path or the
// exception (jaxlib's paths also say tensorflow/, under compiler/xla).
bool from_tensorflow(std::string_view line, std::string_view prefix) {
  const auto tf_path = [](std::string_view s) {
    return s.find("tensorflow/") != k_npos && s.find("/xla/") == k_npos;
  };
  return tf_path(line) || tf_path(prefix) ||
         line.find("ResourceExhaustedError") != k_npos ||
         line.find("OOM when allocating") != k_npos;
}

// "Out of memory while trying to allocate N bytes." and "Out of memory
// allocating N bytes."
bool xla_out_of_memory(Cursor& c, OomMessage& m) {
  if (!c.lit("Out of memory while trying to allocate") &&
      !c.lit("Out of memory allocating")) {
    return false;
  }
  if (const auto n = c.integer()) {
    m.requested_bytes = std::min<Bytes>(k_max_size, *n);
    c.lit("bytes");
    c.lit(".");
  }
  return true;
}

// "Failed to allocate request for 2.99GiB (3206250496B) on device ordinal
// 0".
bool xla_failed_request(Cursor& c, OomMessage& m) {
  if (!c.lit("Failed to allocate request for")) {
    return false;
  }
  m.requested_bytes = c.size();
  if (const auto exact = exact_bytes_after(c)) {
    m.requested_bytes = exact;
  }
  parse_xla_device(c, m);
  return true;
}

// The TPU compiler: "Ran out of memory in memory space hbm. Used 21.95G of
// 15.48G hbm. Exceeded hbm capacity by 6.47G."
bool xla_memory_space(Cursor& c, OomMessage& m) {
  if (!c.lit("Ran out of memory in memory space")) {
    return false;
  }
  const std::string_view space = c.word();
  c.skip_word();
  c.lit(".");
  if (m.device.empty()) {
    m.device = "tpu";
  }
  if (c.lit("Used")) {
    m.requested_bytes = c.size();
    if (c.lit("of")) {
      m.capacity_bytes = c.size();
      if (!space.empty()) {
        c.lit(space);
      }
      c.lit(".");
    }
  }
  if (c.lit("Exceeded")) {
    c.skip_past("by", 16);
    c.size();
    c.lit(".");
  }
  return true;
}

// XLA's asynchronous allocator (stream_executor/gpu/
// gpu_cudamallocasync_allocator.cc): "cuMemAllocAsync failed to allocate N
// bytes: CUDA error: out of memory (CUDA_ERROR_OUT_OF_MEMORY)" and, on the
// next line, "Reported by CUDA: Free memory/Total memory: F/T" in bytes.
bool xla_async(Cursor& c, OomMessage& m) {
  if (!c.lit("cuMemAllocAsync failed to allocate")) {
    return false;
  }
  m.device = "cuda";
  if (const auto n = c.integer()) {
    m.requested_bytes = std::min<Bytes>(k_max_size, *n);
    c.lit("bytes");
  }
  c.lit(":");
  // "CUDA error: out of memory (CUDA_ERROR_OUT_OF_MEMORY)" or
  // "RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory".
  if (c.skip_past("out of memory", 120)) {
    c.lit("(CUDA_ERROR_OUT_OF_MEMORY)");
  }
  if (c.lit("Reported by CUDA:") && c.lit("Free memory/Total memory:")) {
    const auto free = c.integer();
    const auto total = c.lit("/") ? c.integer() : std::nullopt;
    if (free && total && *free <= *total) {
      m.free_bytes = std::min<Bytes>(k_max_size, *free);
      m.capacity_bytes = std::min<Bytes>(k_max_size, *total);
    }
  }
  return true;
}

// The BFC allocator's "Stats:" block (tsl/framework/bfc_allocator.cc
// DumpMemoryLog; TF 1.x core/common_runtime/bfc_allocator.cc): "Limit: N"
// and "InUse: N" in bytes, in the window.
void bfc_stats(std::string_view t, OomMessage& m) {
  const std::size_t stats = find_in(t, "Stats:", 0, t.size());
  if (stats == k_npos) {
    return;
  }
  Cursor c(t, stats + 6);
  if (c.lit("Limit:")) {
    if (const auto limit = c.integer(); limit && *limit > 0) {
      m.allowed_bytes = std::min<Bytes>(k_max_size, *limit);
    }
    if (c.lit("InUse:")) {
      if (const auto in_use = c.integer()) {
        m.allocated_bytes = std::min<Bytes>(k_max_size, *in_use);
      }
    }
  }
}

// The allocator's limit, anywhere in the window: the BFC summary's
// "memory_limit_: N" (tsl/framework/bfc_allocator.cc, bytes or a
// human-readable size), or XLA's scheduler "exceeds the base limit (N)"
// (service/gpu/gpu_hlo_schedule.cc).
void xla_limit(std::string_view t, OomMessage& m) {
  bfc_stats(t, m);
  if (m.allowed_bytes) {
    return;
  }
  for (const std::string_view phrase :
       {std::string_view("memory_limit_:"),
        std::string_view("exceeds the base limit (")}) {
    const std::size_t at = find_in(t, phrase, 0, t.size());
    if (at == k_npos) {
      continue;
    }
    Cursor c(t, at + phrase.size());
    std::optional<Bytes> limit = c.size();
    if (!limit) {
      limit = c.integer();
    }
    if (limit && *limit > 0) {
      m.allowed_bytes = std::min<Bytes>(k_max_size, *limit);
      return;
    }
  }
}

}  // namespace

// The exact byte count XLA prints after a human-readable size:
// "2.99GiB (3206250496B)", "890.06M (933298432 bytes)", "16.00GiB (rounded
// to 17179869184)".
std::optional<Bytes> exact_bytes_after(Cursor& c) {
  const std::size_t save = c.pos();
  if (c.lit("(")) {
    c.lit("rounded to");
    const auto d = c.number(false);
    const std::optional<std::int64_t> n =
        d && d->decimals == 0 && !d->huge
            ? std::optional<std::int64_t>(d->mantissa)
            : std::nullopt;
    if (n) {
      if (!c.lit("bytes")) {
        c.lit("B");
      }
      if (c.lit(")")) {
        return std::min<Bytes>(k_max_size, *n);
      }
    }
  }
  c.set(save);
  return std::nullopt;
}

void skip_exhausted_tail(Cursor& c) {
  c.lit("(see above for traceback)");
  if (!c.lit(":") && c.lit("'>")) {
    c.lit(",");
  }
}

void parse_xla(std::string_view t, Cursor& c, OomMessage& m,
               std::string_view prefix) {
  m.kind = OomKind::xla_allocation;
  m.format = OomFormat::xla;
  m.source = "xla";
  const std::string_view line = t.substr(
      line_begin(t, c.pos()), line_finish(t, c.pos()) - line_begin(t, c.pos()));
  if (from_tensorflow(line, prefix)) {
    m.source = "tensorflow";
  }
  if (c.lit("RESOURCE_EXHAUSTED") || c.lit("ResourceExhaustedError") ||
      c.lit("Resource exhausted")) {
    skip_exhausted_tail(c);
  }
  if (c.lit("XLA:TPU compile permanent error.")) {
    m.kind = OomKind::xla_compile;
    m.device = "tpu";
  }
  xla_limit(t, m);
  if (xla_async(c, m) || xla_out_of_memory(c, m) || xla_failed_request(c, m) ||
      xla_memory_space(c, m) || tf_tensor_shape(c, m) ||
      tf_bfc(t, line, c, m)) {
    return;
  }
  tf_stream_executor(c, m);
}

}  // namespace oomplan::diag
