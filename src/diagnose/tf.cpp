#include "diagnose/grammars.hpp"

#include <algorithm>

// TensorFlow's runtime and the allocators TensorFlow and XLA share (TSL's
// BFC allocator, the stream executor), after RESOURCE_EXHAUSTED. Where the
// wordings come from: BFC "ran out of memory trying to allocate %s (rounded
// to %d)"; TF "OOM when allocating tensor with shape[...] and type T on
// /job:.../device:GPU:N by allocator GPU_N_bfc"; the TF/XLA stream executor
// prints "failed to allocate 890.06M (933298432 bytes)": "M" is 2^20 and
// the exact bytes follow, which we use.

namespace oomplan::diag {
namespace {

Bytes dtype_size(std::string_view type) {
  if (type == "float" || type == "int32" || type == "uint32") {
    return 4;
  }
  if (type == "half" || type == "bfloat16" || type == "int16") {
    return 2;
  }
  if (type == "double" || type == "int64" || type == "uint64") {
    return 8;
  }
  if (type == "int8" || type == "uint8" || type == "bool") {
    return 1;
  }
  return 0;
}

}  // namespace

// shape[d0,d1,...] and type T on /job:.../device:GPU:N by allocator ...
bool tf_tensor_shape(Cursor& c, OomMessage& m) {
  if (!c.lit("OOM when allocating tensor with shape[")) {
    return false;
  }
  Bytes elements = 1;
  bool ok = true;
  for (int dim = 0; dim < 16; ++dim) {
    const auto n = c.integer();
    if (!n) {
      ok = false;
      break;
    }
    elements =
        *n > 0 && elements > k_max_size / *n ? k_max_size : elements * *n;
    if (!c.lit(",")) {
      break;
    }
  }
  if (ok && c.lit("]") && c.lit("and type")) {
    const Bytes per = dtype_size(c.word());
    c.skip_word();
    if (per > 0) {
      m.requested_bytes = std::min(k_max_size, elements * per);
    }
  }
  if (c.skip_past("device:GPU:", 80)) {
    if (const auto idx = c.integer(); idx && *idx < 4096) {
      m.gpu_index = static_cast<int>(*idx);
    }
  }
  c.skip_past("bfc", 40);
  return true;
}

// "Allocator (GPU_0_bfc) ran out of memory trying to allocate 16.00GiB
// (rounded to 17179869184)requested by op ..."
bool tf_bfc(std::string_view t, std::string_view line, Cursor& c,
            OomMessage& m) {
  const std::size_t bfc =
      find_in(t, "GPU_", line_begin(t, c.pos()), line_finish(t, c.pos()));
  if (!c.lit("ran out of memory trying to allocate")) {
    return false;
  }
  // TF/XLA's BFC also logs this as a warning it recovers from.
  if (line.find("this is not a failure") != k_npos) {
    m.source = {};
    return true;
  }
  m.requested_bytes = c.size();
  if (const auto exact = exact_bytes_after(c)) {
    m.requested_bytes = exact;
  }
  if (bfc != k_npos) {
    Cursor g(t, bfc + 4);
    if (const auto idx = g.integer(); idx && *idx < 4096) {
      m.gpu_index = static_cast<int>(*idx);
    }
  }
  return true;
}

// Stream executor: "failed to allocate 890.06M (933298432 bytes) from
// device: CUDA_ERROR_OUT_OF_MEMORY: out of memory" / "failed to alloc N
// bytes on host: ..." (pinned host memory).
void tf_stream_executor(Cursor& c, OomMessage& m) {
  if (!c.lit("failed to allocate") && !c.lit("failed to alloc")) {
    return;
  }
  m.requested_bytes = c.size();
  if (const auto exact = exact_bytes_after(c)) {
    m.requested_bytes = exact;
  }
  if (c.lit("on host")) {
    m.device = "host";
  } else if (c.lit("from device")) {
    c.lit(":");
  }
  if (c.lit("CUDA_ERROR_OUT_OF_MEMORY")) {
    if (m.device.empty()) {
      m.device = "cuda";
    }
    c.lit(": out of memory");
  } else if (c.lit("HIP_ERROR_OutOfMemory")) {
    if (m.device.empty()) {
      m.device = "hip";
    }
  }
}

}  // namespace oomplan::diag
