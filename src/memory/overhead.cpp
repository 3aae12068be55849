// What a process holds beyond its tensors: the caching allocator's reserve
// (fragmentation) and the runtime's fixed overhead (CUDA context, cuBLAS
// workspace, NCCL communicators).

#include "memory/internal.hpp"

#include "oomplan/model/capability.hpp"

namespace oomplan::memory_terms {
namespace {

// Default caching-allocator reserve for training: reserved exceeds allocated
// by block rounding and freed-but-cached segments of varied sizes (PyTorch
// CUDACachingAllocator rounds to 512 B / 2 MiB blocks and keeps 20 MiB
// segments). torchtune's LoRA tutorial reports reserved 7-9 % above what
// its allocations add up to.
constexpr double k_train_reserve = 0.08;

}  // namespace

double inference_reserve(const Resolved& setup) {
  // PyTorch caching allocator: reserved-but-unallocated share of the tensors
  // (catalog_facts.md Part 3: 2-5 % for inference).
  return setup.reserve.value_or(0.05);
}

// See k_train_reserve (torchtune's LoRA tutorial, 7-9 %).
double training_reserve(const Resolved& setup) {
  return setup.reserve.value_or(k_train_reserve);
}

// Reserved beyond allocated (torch.cuda.max_memory_reserved minus
// max_memory_allocated), as a share of the tensors.
Bytes allocator_reserve_bytes(double reserve, Bytes allocated) {
  return saturated_bytes(reserve * static_cast<double>(allocated));
}

Bytes cublas_workspace_bytes(const Gpu& gpu) {
  // cuBLAS workspace: 32 MiB on Hopper and newer, :4096:2:16:8 = 8.125 MiB
  // before (aten/src/ATen/cuda/CublasHandlePool.cpp, pytorch#89027).
  return gpu.compute_capability >= k_cc_hopper ? 32 * k_mib
                                               : 8 * k_mib + 128 * k_kib;
}

int communicating_gpus(const Resolved& setup) {
  // Inference talks only within a tp x pp group (data-parallel replicas and
  // device_map splits are independent); training all-reduces over all GPUs.
  return setup.training()     ? setup.total_gpus()
         : setup.split_layers ? 1
                              : setup.tp * setup.pp;
}

Bytes nccl_buffer_bytes(int gpus) {
  // NCCL communicator buffers when GPUs talk: 342 MiB for 2 GPUs, 392 MiB for
  // 4 and more (aiconfigurator systems/h100_sxm.yaml misc.nccl_mem).
  if (gpus == 2) {
    return 342 * k_mib;
  }
  return gpus > 2 ? 392 * k_mib : 0;
}

}  // namespace oomplan::memory_terms

namespace oomplan {

using namespace memory_terms;

Bytes runtime_overhead_bytes(const Gpu& gpu, const Resolved& setup) {
  if (setup.overhead_gib) {
    return saturated_bytes(*setup.overhead_gib * static_cast<double>(k_gib));
  }
  // CUDA context with lazy module loading (CUDA >= 11.7): ~400 MB per process
  // (pytorch/pytorch#109888, ptrblck; catalog_facts.md Part 3 cuda_context).
  Bytes bytes = 400 * k_mib;
  bytes += cublas_workspace_bytes(gpu);
  bytes += nccl_buffer_bytes(communicating_gpus(setup));
  return bytes;
}

}  // namespace oomplan
