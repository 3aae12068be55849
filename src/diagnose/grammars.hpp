#pragma once

// Private to diagnose: the grammars, one per wording, in one file per log
// format family (pytorch.cpp, cuda.cpp, ggml.cpp, nccl.cpp, xla.cpp, tf.cpp,
// vllm.cpp, other.cpp). Each starts at its message's first word in a normalized
// window and moves the cursor forward over the clauses it recognises, filling
// what they state; a clause that does not match ends the message there. A
// grammar that finds prose rather than a message clears `source` (the scanner
// then drops the candidate).

#include "diagnose/cursor.hpp"

#include "oomplan/diagnose/diagnose.hpp"

#include <optional>
#include <string_view>

namespace oomplan::diag {

// --- pytorch.cpp

// PyTorch's caching allocator, from "CUDA out of memory" (or a pasted
// fragment starting at "Tried to allocate"); `raised_as_runtime_error` when
// the message follows "RuntimeError: " (PyTorch 1.x).
void parse_caching_allocator(Cursor& c, OomMessage& m,
                             bool raised_as_runtime_error);
// "MPS backend out of memory (MPS allocated: X, other allocations: Y, max
// allowed: Z). Tried to allocate W on private pool."
void parse_mps(Cursor& c, OomMessage& m);

// --- cuda.cpp

// "CUDA error: out of memory" and its boilerplate, PyTorch 0.x's "cuda
// runtime error (2)", the driver's CUDA_ERROR_OUT_OF_MEMORY; `device` is
// "cuda" or "hip".
void parse_cuda_error(Cursor& c, OomMessage& m, std::string_view device);
// CUBLAS_STATUS_ALLOC_FAILED (HIPBLAS_...), when calling cublasCreate or
// another cuBLAS function.
void parse_cublas(Cursor& c, OomMessage& m);

// cuDNN's handle: "CUDNN_STATUS_ALLOC_FAILED", TensorFlow's "Could not
// create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR" (cuda_dnn.cc), which is
// how a handle that found no memory reports (tensorflow/tensorflow#24496).
void parse_cudnn(Cursor& c, OomMessage& m);

// --- ggml.cpp

// llama.cpp's ggml backends: "allocating X MiB on device N: cudaMalloc
// failed: out of memory", "failed to allocate X of pinned memory", Vulkan's
// "Device memory allocation of size N failed." / ErrorOutOfDeviceMemory,
// Metal's kIOGPUCommandBufferCallbackErrorOutOfMemory.
void parse_ggml(Cursor& c, OomMessage& m);

// --- nccl.cpp

// "Cuda failure 'out of memory'" merged with a "Failed to CUDA calloc N
// bytes" on the next lines, or a calloc line alone; `t` is the window text.
void parse_nccl(std::string_view t, Cursor& c, OomMessage& m);

// --- xla.cpp

// XLA / JAX / TensorFlow, from the phrase after RESOURCE_EXHAUSTED (or the
// phrase itself); `prefix` is the raw prefix removed from the message's line
// (a glog source path under tensorflow/ names TensorFlow).
void parse_xla(std::string_view t, Cursor& c, OomMessage& m,
               std::string_view prefix);
// After RESOURCE_EXHAUSTED / ResourceExhaustedError: ":", TensorFlow 1's
// " (see above for traceback):", or the coordinator's "<class '...
// ResourceExhaustedError'>,".
void skip_exhausted_tail(Cursor& c);
// The exact byte count XLA and TensorFlow print after a human-readable size:
// "2.99GiB (3206250496B)", "890.06M (933298432 bytes)", "16.00GiB (rounded
// to 17179869184)"; the cursor stays when there is none.
std::optional<Bytes> exact_bytes_after(Cursor& c);

// --- tf.cpp: the phrases parse_xla tries last. Each returns whether its
// phrase was there (the message is then parsed).

// "OOM when allocating tensor with shape[...] and type T on ...".
bool tf_tensor_shape(Cursor& c, OomMessage& m);
// The BFC allocator's "ran out of memory trying to allocate X"; `line` is
// the message's line in the window text `t`.
bool tf_bfc(std::string_view t, std::string_view line, Cursor& c,
            OomMessage& m);
// The stream executor's "failed to allocate X (N bytes) from device: ...".
void tf_stream_executor(Cursor& c, OomMessage& m);

// --- vllm.cpp

// V0 and V1: "No available memory for the cache blocks."
void parse_vllm_no_blocks(Cursor& c, OomMessage& m);
// V0: "The model's max seq len (N) is larger than the maximum number of
// tokens that can be stored in KV cache (M)."
void parse_vllm_v0(Cursor& c, OomMessage& m);
// V1: "To serve at least one request with the models's max seq len (N), (X
// GiB KV cache is needed, which is larger than the available KV cache memory
// (Y GiB). Based on the available memory, the estimated maximum model length
// is E."
void parse_vllm_v1(Cursor& c, OomMessage& m);
// "Free memory on device [cuda:0 ](F/C GiB) on startup is less than desired
// GPU memory utilization (U, R GiB). ..."
void parse_vllm_startup(Cursor& c, OomMessage& m);

// --- other.cpp

// bitsandbytes' "Error out of memory at line N in file F".
void parse_bitsandbytes(Cursor& c, OomMessage& m);
// DeepSpeed inference's "Workspace can't be allocated, no enough memory."
void parse_deepspeed_workspace(Cursor& c, OomMessage& m);
// "out of memory" near a GPU word, in no grammar above.
void parse_generic(Cursor& c, OomMessage& m);

}  // namespace oomplan::diag
