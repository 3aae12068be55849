#pragma once

// What a card can run, by compute capability (major x 10 + minor; 0 for
// non-NVIDIA cards, which these rules leave alone), and the node size the
// layouts assume. Each threshold is named once, beside its source.

#include "oomplan/model/gpu.hpp"

namespace oomplan {

// An HGX/DGX baseboard, and the cloud instances built on it (p4d, p5,
// a3-highgpu-8g, ND H100 v5), holds 8 GPUs behind one NVSwitch.
inline constexpr int k_gpus_per_node = 8;

// FlashAttention-2 and bf16 tensor cores need Ampere, sm80
// (Dao-AILab/flash-attention README "Ampere, Ada, or Hopper GPUs"; vLLM
// platforms/cuda.py check_if_supports_dtype refuses bf16 below 8.0).
inline constexpr int k_cc_ampere = 80;
// FP8 tensor cores arrive with Ada (sm89) and Hopper (sm90).
inline constexpr int k_cc_fp8_tensor_cores = 89;
// Hopper (sm90): cuBLAS takes a larger workspace, MXFP4 MoE runs Triton.
inline constexpr int k_cc_hopper = 90;

// True when `gpu` is an NVIDIA card older than `cc`.
inline bool below(const Gpu& gpu, int cc) {
  return gpu.compute_capability > 0 && gpu.compute_capability < cc;
}

// FlashAttention-2 runs (non-NVIDIA cards: their own flash kernels).
inline bool runs_flash_attention(const Gpu& gpu) {
  return !below(gpu, k_cc_ampere);
}
// bf16 computes natively.
inline bool runs_bf16(const Gpu& gpu) {
  return !below(gpu, k_cc_ampere);
}

}  // namespace oomplan
