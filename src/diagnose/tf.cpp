#include "diagnose/grammars.hpp"

#include <algorithm>
#include <array>

// TensorFlow's runtime and the allocators TensorFlow and XLA share (TSL's
// BFC allocator, the stream executor), after RESOURCE_EXHAUSTED. Where the
// wordings come from: BFC "ran out of memory trying to allocate %s (rounded
// to %d)"; TF "OOM when allocating tensor with shape[...] and type T on
// /job:.../device:GPU:N by allocator GPU_N_bfc"; the TF/XLA stream executor
// prints "failed to allocate 890.06M (933298432 bytes)": "M" is 2^20 and
// the exact bytes follow, which we use.

namespace oomplan::diag {
namespace {

// Bits per element of the type names TensorFlow prints (DataTypeString,
// tensorflow/core/framework/types.cc); 0: not a fixed-size type (string,
// resource, variant).
int dtype_bits(std::string_view type) {
  struct Row {
    std::string_view name;
    int bits;
  };
  static constexpr std::array<Row, 27> k_types{{
      {"float", 32},
      {"double", 64},
      {"half", 16},
      {"bfloat16", 16},
      {"int8", 8},
      {"uint8", 8},
      {"int16", 16},
      {"uint16", 16},
      {"int32", 32},
      {"uint32", 32},
      {"int64", 64},
      {"uint64", 64},
      {"bool", 8},
      {"complex64", 64},
      {"complex128", 128},
      {"qint8", 8},
      {"quint8", 8},
      {"qint16", 16},
      {"quint16", 16},
      {"qint32", 32},
      {"float8_e5m2", 8},
      {"float8_e4m3fn", 8},
      {"float8_e4m3fnuz", 8},
      {"float8_e5m2fnuz", 8},
      {"float8_e4m3b11fnuz", 8},
      {"int4", 4},
      {"uint4", 4},
  }};
  for (const Row& row : k_types) {
    if (row.name == type) {
      return row.bits;
    }
  }
  return 0;
}

// elements × bits / 8, rounded up to the byte (int4 packs two per byte),
// saturating.
Bytes tensor_bytes(Bytes elements, int bits) {
  if (elements > k_max_size / bits) {
    return k_max_size;
  }
  return std::min(k_max_size, (elements * bits + 7) / 8);
}

}  // namespace

// shape[d0,d1,...] and type T on /job:.../device:GPU:N by allocator ...
bool tf_tensor_shape(Cursor& c, OomMessage& m) {
  // TF 1.x up to 1.10 also printed "tensor of shape [512]"
  // (core/framework/op_kernel.cc).
  if (!c.lit("OOM when allocating tensor with shape[") &&
      !c.lit("OOM when allocating tensor of shape [") &&
      !c.lit("OOM when allocating tensor with shape [")) {
    return false;
  }
  Bytes elements = 1;
  bool ok = true;
  // Dimensions are plain digits: "shape[128,128,109,109]" is four numbers,
  // not 128,128,109,109 read with thousands separators.
  for (int dim = 0; dim < 64; ++dim) {
    const auto n = c.digits();
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
    const int bits = dtype_bits(c.word());
    c.skip_word();
    if (bits > 0) {
      m.requested_bytes = tensor_bytes(elements, bits);
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
