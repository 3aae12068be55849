#include "diagnose/grammars.hpp"

// llama.cpp's ggml backends, which ollama, LM Studio and llama-server run.
// Where the wordings come from (ggml-org/llama.cpp):
// - ggml/src/ggml-cuda/ggml-cuda.cu ggml_backend_cuda_buffer_type_alloc_buffer:
//   "allocating %.2f MiB on device %d: cudaMalloc failed: %s" (MiB = 2^20);
//   ggml_cuda_host_malloc: "failed to allocate %.2f MiB of pinned memory:
//   %s"; a failed CUDA call inside the pools (ggml_cuda_pool_malloc_vmm's
//   cuMemCreate) prints "CUDA error: out of memory" and "current device: %d,
//   in function %s at %s:%d" (parse_cuda_error reads that form).
// - ggml/src/ggml-vulkan/ggml-vulkan.cpp ggml_vk_create_buffer: "Device memory
//   allocation of size %zu failed." before the vk::Device::allocateMemory
//   exception's "ErrorOutOfDeviceMemory".
// - ggml/src/ggml-metal: "command buffer %d failed with status %d" and Metal's
//   "Insufficient Memory
//   (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)".

namespace oomplan::diag {

void parse_ggml(Cursor& c, OomMessage& m) {
  m.kind = OomKind::ggml_buffer;
  m.format = OomFormat::other;
  m.source = "llama.cpp";
  // The function name ("ggml_backend_cuda_buffer_type_alloc_buffer:",
  // "ggml_vulkan:").
  if (c.word().starts_with("ggml_")) {
    c.skip_word();
  }
  if (c.lit("allocating")) {
    m.requested_bytes = c.size();
    if (c.lit("on device")) {
      if (const auto idx = c.integer(); idx && *idx < 4096) {
        m.gpu_index = static_cast<int>(*idx);
      }
      c.lit(":");
    }
    // ROCm builds print CUDA's names (ggml-cuda/vendors/hip.h maps them)
    // and call their buffers "ROCm0", "ROCm_Host".
    const bool rocm = find_in(c.text(), "ROCm", 0, c.text().size()) != k_npos;
    if (c.lit("cudaMalloc failed:")) {
      m.device = rocm ? "hip" : "cuda";
    } else if (c.lit("hipMalloc failed:")) {
      m.device = "hip";
    }
    c.lit("out of memory");
    // The caller's next line states the exact bytes the MiB figure rounds
    // (ggml-alloc.c ggml_gallocr_reserve_n, alloc_tensor_range: "failed to
    // allocate CUDA0 buffer of size N").
    const std::size_t next = line_finish(c.text(), c.pos());
    const std::size_t stop = line_finish(c.text(), next + 1);
    const std::size_t of = find_in(c.text(), "buffer of size", next, stop);
    if (of != k_npos) {
      Cursor exact(c.text(), of + 14);
      if (const auto n = exact.integer(); n && *n > 0) {
        m.requested_bytes = std::min<Bytes>(k_max_size, *n);
        c.set(exact.pos());
      }
    }
    return;
  }
  // ggml_vk_host_malloc: "Failed to allocate pinned memory." (host RAM
  // the GPU can map).
  if (c.lit("Failed to allocate pinned memory.")) {
    m.device = "host";
    c.skip_past("ErrorOutOfDeviceMemory", 200);
    return;
  }
  if (c.lit("failed to allocate")) {
    m.requested_bytes = c.size();
    if (c.lit("of pinned memory")) {
      m.device = "host";
      c.lit(":");
      c.lit("out of memory");
    }
    return;
  }
  if (c.lit("Device memory allocation of size")) {
    if (const auto n = c.integer()) {
      m.requested_bytes = std::min<Bytes>(k_max_size, *n);
    }
    c.lit("failed.");
    m.device = "vulkan";
    c.skip_past("ErrorOutOfDeviceMemory", 200);
    return;
  }
  if (c.skip_past("ErrorOutOfDeviceMemory", 200)) {
    m.device = "vulkan";
    return;
  }
  if (c.skip_past("kIOGPUCommandBufferCallbackErrorOutOfMemory", 200)) {
    m.device = "metal";
    c.lit(")");
  }
}

}  // namespace oomplan::diag
