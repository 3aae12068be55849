#include "diagnose/grammars.hpp"

// CUDA (and HIP) runtime and driver errors, and cuBLAS's allocation failure:
// c10's CUDA check prints "CUDA error: " and cudaGetErrorString ("out of
// memory"), ATen's cuBLAS check the status name and the call.

namespace oomplan::diag {

// "CUDA error: out of memory" and its boilerplate; "cuda runtime error (2) :
// out of memory at file:line" (PyTorch 0.x); driver "CUDA_ERROR_OUT_OF_MEMORY:
// out of memory".
// Frames of a Python traceback that run the model: the job's own work had
// begun, so the CUDA context was made long before.
bool traceback_runs_model(std::string_view before) {
  for (const std::string_view frame :
       {"in forward\n", "in backward\n", "in _call_impl\n",
        "torch/nn/functional.py", "torch/nn/modules/",
        "torch/autograd/__init__.py"}) {
    if (before.find(frame) != k_npos) {
      return true;
    }
  }
  return false;
}

void parse_cuda_error(Cursor& c, OomMessage& m, std::string_view device) {
  m.kind = OomKind::cuda_error;
  m.format = OomFormat::cuda_runtime;
  m.source = "cuda";
  m.device = device;
  m.in_model_code = traceback_runs_model(c.text().substr(0, c.pos()));
  c.skip_past("out of memory", 64);
  // ggml's CUDA check (llama.cpp, ollama): "current device: N, in function
  // ggml_cuda_pool_malloc_vmm at FILE:LINE" and the failed call.
  if (c.lit("current device:")) {
    if (const auto idx = c.integer(); idx && *idx < 4096) {
      m.gpu_index = static_cast<int>(*idx);
    }
    c.lit(",");
    if (c.lit("in function")) {
      // The function ("ggml_cuda_pool_malloc_vmm", the legacy pool's
      // "alloc") or its file (".../ggml/src/ggml-cuda.cu") names ggml.
      const std::string_view t = c.text();
      const std::size_t end = line_finish(t, c.pos());
      if (find_in(t, "ggml", c.pos(), end) != k_npos) {
        m.kind = OomKind::ggml_buffer;
        m.format = OomFormat::other;
        m.source = "llama.cpp";
        if (find_in(t, "ROCm", 0, t.size()) != k_npos) {
          m.device = "hip";
        }
      }
      c.set(end);
    }
    return;
  }
  c.lit("Search for `cudaErrorMemoryAllocation' in");
  if (c.lit("at")) {
    c.skip_word();
  }
  c.skip_past("for more information.", 120);
  if (c.lit("CUDA kernel errors might be asynchronously reported at some other "
            "API call")) {
    c.skip_past("might be incorrect.", 80);
  }
  if (c.lit("For debugging consider passing CUDA_LAUNCH_BLOCKING=1")) {
    c.lit(".");
  }
  if (c.lit("Compile with `TORCH_USE_CUDA_DSA` to enable device-side "
            "assertions.")) {
  }
}

void parse_cublas(Cursor& c, OomMessage& m) {
  m.format = OomFormat::cublas;
  m.kind = OomKind::cublas;
  m.source = "cublas";
  if (c.lit("failed to create cublas handle:")) {
    m.kind = OomKind::cublas_create;
    m.source = "tensorflow";
  }
  if (c.lit("CUBLAS_STATUS_ALLOC_FAILED")) {
    m.device = "cuda";
  } else if (c.lit("HIPBLAS_STATUS_ALLOC_FAILED")) {
    m.device = "hip";
  }
  if (c.lit("when calling")) {
    c.lit("`");
    if (c.lit("cublasCreate") || c.lit("hipblasCreate")) {
      m.kind = OomKind::cublas_create;
    }
    c.skip_past(")", 40);
    c.lit("`");
  }
}

void parse_cudnn(Cursor& c, OomMessage& m) {
  m.format = OomFormat::cuda_runtime;
  m.kind = OomKind::cudnn_create;
  m.source = "cudnn";
  m.device = "cuda";
  if (c.lit("Could not create cudnn handle:")) {
    m.source = "tensorflow";
  }
  if (!c.lit("CUDNN_STATUS_ALLOC_FAILED")) {
    c.lit("CUDNN_STATUS_INTERNAL_ERROR");
  }
}

}  // namespace oomplan::diag
