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
    c.lit(":");
  }
  if (c.lit("XLA:TPU compile permanent error.")) {
    m.kind = OomKind::xla_compile;
    m.device = "tpu";
  }
  if (xla_out_of_memory(c, m) || xla_failed_request(c, m) ||
      xla_memory_space(c, m) || tf_tensor_shape(c, m) ||
      tf_bfc(t, line, c, m)) {
    return;
  }
  tf_stream_executor(c, m);
}

}  // namespace oomplan::diag
