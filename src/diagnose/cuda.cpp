#include "diagnose/grammars.hpp"

// CUDA (and HIP) runtime and driver errors, and cuBLAS's allocation failure:
// c10's CUDA check prints "CUDA error: " and cudaGetErrorString ("out of
// memory"), ATen's cuBLAS check the status name and the call.

namespace oomplan::diag {

// "CUDA error: out of memory" and its boilerplate; "cuda runtime error (2) :
// out of memory at file:line" (PyTorch 0.x); driver "CUDA_ERROR_OUT_OF_MEMORY:
// out of memory".
void parse_cuda_error(Cursor& c, OomMessage& m, std::string_view device) {
  m.kind = OomKind::cuda_error;
  m.format = OomFormat::cuda_runtime;
  m.source = "cuda";
  m.device = device;
  c.skip_past("out of memory", 64);
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

}  // namespace oomplan::diag
