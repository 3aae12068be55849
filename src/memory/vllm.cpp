#include "oomplan/memory/vllm.hpp"

#include "oomplan/memory/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

// vLLM releases and what changes between them: the start-up profiler,
// non-torch memory of tensor parallelism, CUDA-graph capture and the hybrid
// KV pool (the multimodal dummies are in vllm_vision.cpp). Releases are
// compared as (major, minor, patch); the boundaries are the first release
// carrying a commit of vllm-project/vllm's main branch (its date against the
// release dates), written next to each rule.

namespace oomplan {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

double dbl(std::int64_t value) {
  return static_cast<double>(value);
}

Bytes gib_bytes(double gib) {
  return static_cast<Bytes>(std::llround(gib * static_cast<double>(k_gib)));
}

}  // namespace

VllmProfiler vllm_profiler(VllmVersion version, VllmEngine engine) {
  if (engine == VllmEngine::v1) {
    // gpu_worker.py determine_available_memory: "total_allocated_bytes =
    // mem_get_info()[1] - mem_get_info()[0]; non_torch = total - torch" until
    // #18974 (2025-06-07) measured from init_gpu_memory and #19312
    // (2025-06-10) reused memory_profiling -> 0.9.1.
    return version < vllm_release(0, 9, 1) ? VllmProfiler::with_context
                                           : VllmProfiler::snapshot;
  }
  if (version < vllm_release(0, 6, 4)) {
    // worker.py: peak_memory = self.init_gpu_memory - free_gpu_memory.
    return VllmProfiler::free_diff;
  }
  if (version < vllm_release(0, 6, 5)) {
    // 0.6.4: non_torch_allocations = total_allocated_bytes -
    // torch_allocated_bytes (the whole device, context included).
    return VllmProfiler::with_context;
  }
  if (version < vllm_release(0, 7)) {
    // #10511 (2024-12-16) memory_profiling with allocated bytes; #11809
    // (2025-01-08) switched to memory_reserved, #12126 to MemorySnapshot.
    return VllmProfiler::allocated_delta;
  }
  return VllmProfiler::snapshot;
}

std::string_view vllm_profiler_name(VllmProfiler profiler) {
  switch (profiler) {
    case VllmProfiler::free_diff:
      return "free-memory difference (V0 <= 0.6.3)";
    case VllmProfiler::with_context:
      return "device used minus torch (CUDA context counted)";
    case VllmProfiler::allocated_delta:
      return "allocated-bytes snapshot (V0 0.6.5-0.6.6)";
    case VllmProfiler::snapshot:
      return "memory snapshot at init_device";
  }
  return "";
}

bool vllm_graphs_in_budget(VllmVersion version) {
  // envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: "Enabled by default as
  // of v0.21.0" (gpu_model_runner.py profile_cudagraph_memory).
  return version >= vllm_release(0, 21);
}

VllmComm vllm_comm(const Gpu& gpu, VllmVersion version, int tp, int pp,
                   int gpus_per_node, bool p2p) {
  VllmComm comm;
  if (tp * pp <= 1) {
    return comm;
  }
  const bool one_node = tp <= gpus_per_node;
  const bool nvlink = gpu.nvlink_gb_s > 0;
  // custom_all_reduce.py CustomAllreduce.__init__: disabled across nodes
  // ("this process group spans across nodes"), for world sizes outside
  // [2, 4, 6, 8], without P2P ("lacks GPU P2P capability"), and on more than
  // two PCIe-only GPUs. Its IPC buffers (cudaMalloc, outside torch):
  // meta_size() + max_size and max_size, max_size = 8192 * 1024.
  const bool world_ok = tp == 2 || tp == 4 || tp == 6 || tp == 8;
  comm.custom_all_reduce = one_node && p2p && world_ok && (nvlink || tp == 2);
  if (comm.custom_all_reduce) {
    comm.custom_all_reduce_bytes = Bytes{2} * 8192 * 1024;
  }
  if (!p2p) {
    // NCCL's SHM (inside a node) and NET (across nodes) transports stage
    // through host memory: no buffers on the GPU.
    return comm;
  }
  // NCCL src/init.cc: per channel and connected peer DEFAULT_BUFFSIZE
  // (4 MiB, Simple) + DEFAULT_LL128_BUFFSIZE (120 x 640 x 8 x 8 B) +
  // DEFAULT_LL_BUFFSIZE (8 x 512 x 8 x 16 B) on the GPU with the P2P
  // transport. Channels: 24 over NVLink (8xH100 NCCL INFO "Channel 22/0 ...
  // via P2P", nccl#1259), 2 over PCIe (one ring found, duplicated).
  constexpr Bytes k_channel_bytes = 4194304 + 4915200 + 524288;
  comm.nccl_channels = nvlink ? 24 : 2;
  const double link_share = comm.nccl_channels / 24.0;
  if (version >= vllm_release(0, 10, 2)) {
    // vLLM 0.4.3 - 0.10.1 set NCCL_CUMEM_ENABLE=0 (env_override.py, removed
    // by #24141 on 2025-09-03) because NCCL with cuMem "will cost 1~2 GiB
    // GPU memory" (nccl#1234). From 0.10.2 NCCL allocates with cuMem. The
    // v0.19 H100 logs measure both parts over NVLink, scaled here by the
    // channels on other links; measured, not derived (what NCCL's cuMem path
    // holds is not a constant of its source):
    // - at start-up, free memory is 78.68 GiB at TP1 and 77.66 / 77.64 /
    //   77.71 GiB at TP2 / TP4 / PP4: ~1.0 GiB for the communicators;
    // - non-torch after the profile is 2.07 GiB at TP2 and 2.13-2.21 GiB at
    //   TP4 over 0.25 GiB at TP1: 1.75 + 0.04 x tp GiB.
    comm.nccl_init_bytes =
        static_cast<Bytes>(static_cast<double>(gib_bytes(1.0)) * link_share);
    if (tp > 1) {
      comm.nccl_profile_bytes = static_cast<Bytes>(
          static_cast<double>(gib_bytes(1.75 + 0.04 * tp)) * link_share);
    }
    return comm;
  }
  if (tp <= 1) {
    // Pipeline stages only send and receive: two P2P channels per peer,
    // connected on first use; small beside the TP rings.
    return comm;
  }
  // Without cuMem the buffers alone, set up by the TP group's warm-up
  // all-reduce: ring and tree at communicator init before NCCL 2.22 (vLLM
  // <= 0.8 ships torch <= 2.6 with NCCL 2.21.5); from 2.22
  // NCCL_RUNTIME_CONNECT=1 connects only the ring (vLLM 0.9+: torch 2.7,
  // NCCL 2.26).
  const int algorithms = version < vllm_release(0, 9) ? 2 : 1;
  comm.nccl_init_bytes =
      Bytes{comm.nccl_channels} * algorithms * k_channel_bytes;
  return comm;
}

bool vllm_snapshot_after_distributed_init(VllmVersion version,
                                          VllmEngine engine) {
  // gpu_worker.py init_device: "Initialize the distributed environment
  // BEFORE taking memory snapshot" (#25359, 2025-09-23).
  return engine == VllmEngine::v1 && version >= vllm_release(0, 11);
}

Bytes vllm_non_torch_base(VllmVersion version, VllmEngine engine,
                          bool samples) {
  const VllmProfiler profiler = vllm_profiler(version, engine);
  Bytes base = 0;
  if (engine == VllmEngine::v1) {
    // v0.19 H100 logs: 0.25-0.27 GiB at TP1 (torch.compile'd kernels,
    // FlashInfer sampling modules, cuBLAS handles loaded after the
    // baseline); 0.07 GiB on the first of 4 pipeline stages (no sampler).
    base = gib_bytes(samples ? 0.25 : 0.07);
  } else {
    // V0 (no torch.compile): #12126's log, "non_torch_memory takes 0.16GiB"
    // at TP1 on an H100.
    base = gib_bytes(0.16);
  }
  if (profiler == VllmProfiler::with_context) {
    base += gib_bytes(k_vllm_cuda_context_gib);
  }
  return base;
}

std::string_view vllm_graph_mode_name(VllmGraphMode mode) {
  switch (mode) {
    case VllmGraphMode::none:
      return "NONE";
    case VllmGraphMode::full:
      return "FULL";
    case VllmGraphMode::piecewise:
      return "PIECEWISE";
    case VllmGraphMode::full_and_piecewise:
      return "FULL_AND_PIECEWISE";
  }
  return "NONE";
}

VllmGraphMode vllm_graph_mode(VllmVersion version, VllmEngine engine,
                              bool enforce_eager) {
  if (enforce_eager) {
    return VllmGraphMode::none;
  }
  if (engine == VllmEngine::v0) {
    // V0 model_runner.py capture_model: one graph of the whole decode step
    // per batch size.
    return VllmGraphMode::full;
  }
  // V1: piecewise (torch.compile splits at attention) until 0.11 made
  // FULL_AND_PIECEWISE the default cudagraph_mode.
  return version < vllm_release(0, 11) ? VllmGraphMode::piecewise
                                       : VllmGraphMode::full_and_piecewise;
}

std::vector<std::int64_t> vllm_capture_sizes(
    VllmVersion version, VllmEngine engine, std::int64_t max_num_seqs,
    std::int64_t max_num_batched_tokens) {
  std::vector<std::int64_t> sizes;
  if (engine == VllmEngine::v0) {
    // worker/model_runner.py: _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + 8 x i
    // (i up to 32 before #7894 of 2024-08-29 -> 0.6.0, up to 1024 after), up
    // to max_num_seqs padded by _get_graph_batch_size (<= 2 as is, <= 4 to
    // 4, else to a multiple of 8).
    const std::int64_t cap = version < vllm_release(0, 6) ? 256 : 8192;
    std::int64_t padded = max_num_seqs;
    if (max_num_seqs > 2) {
      padded = max_num_seqs <= 4 ? 4 : ceil_div(max_num_seqs, 8) * 8;
    }
    const std::int64_t largest = std::min(padded, cap);
    for (std::int64_t b : {1, 2, 4}) {
      if (b <= largest) {
        sizes.push_back(b);
      }
    }
    for (std::int64_t b = 8; b <= largest; b += 8) {
      sizes.push_back(b);
    }
    return sizes;
  }
  std::int64_t largest = 512;
  if (version >= vllm_release(0, 10)) {
    // #20628 (2025-07-09): cuda_graph_sizes = [min(max_num_seqs * 2, 512)].
    largest = std::min<std::int64_t>(2 * max_num_seqs, 512);
  }
  // 0.7 - 0.11: [1, 2, 4] + range(8, largest + 1, 8); from 0.12
  // (config/compilation.py): steps of 16 from 256.
  const std::int64_t step_above_256 = version >= vllm_release(0, 12) ? 16 : 8;
  for (std::int64_t b : {1, 2, 4}) {
    if (b <= largest) {
      sizes.push_back(b);
    }
  }
  for (std::int64_t b = 8; b <= largest; b += b < 256 ? 8 : step_above_256) {
    sizes.push_back(b);
  }
  // Filtered to max_num_batched_tokens.
  std::erase_if(sizes,
                [&](std::int64_t b) { return b > max_num_batched_tokens; });
  return sizes;
}

std::int64_t vllm_graph_count(VllmGraphMode mode,
                              const std::vector<std::int64_t>& sizes,
                              std::int64_t max_num_seqs) {
  const auto n = static_cast<std::int64_t>(sizes.size());
  switch (mode) {
    case VllmGraphMode::none:
      return 0;
    case VllmGraphMode::full:
    case VllmGraphMode::piecewise:
      return n;
    case VllmGraphMode::full_and_piecewise:
      break;
  }
  // Full graphs for uniform decode batches of at most max_num_seqs requests.
  const auto decode = static_cast<std::int64_t>(
      std::count_if(sizes.begin(), sizes.end(),
                    [&](std::int64_t b) { return b <= max_num_seqs; }));
  return n + decode;
}

VllmHybridPool vllm_hybrid_pool(const VllmHybridLayers& layers, Bytes available,
                                std::int64_t max_model_len) {
  VllmHybridPool pool;
  const std::int64_t a = layers.attention_layers;
  const std::int64_t m = layers.state_layers;
  if (a + m <= 0 || (a > 0 && layers.attention_bytes_per_token <= 0) ||
      (m > 0 && layers.state_bytes <= 0)) {
    return pool;
  }
  if (a > 0 && m > 0) {
    // HybridAttentionMambaModelConfig: attn_block_size = 16 x
    // cdiv(mamba_page_size, 16 x attn_page_size_1_token); the mamba page is
    // padded to the attention page (mamba_page_size_padded).
    pool.block_size = 16 * ceil_div(layers.state_bytes,
                                    16 * layers.attention_bytes_per_token);
    pool.page_bytes = pool.block_size * layers.attention_bytes_per_token;
  } else if (a > 0) {
    pool.block_size = 16;
    pool.page_bytes = 16 * layers.attention_bytes_per_token;
  } else {
    // MambaModelConfig: one block holds a sequence's state
    // (mamba_block_size = max_model_len).
    pool.block_size = max_model_len;
    pool.page_bytes = layers.state_bytes;
  }
  // _get_kv_cache_groups_uniform_page_size: group_size = the smaller layer
  // count; each type splits into cdiv(count, group_size) groups.
  pool.group_size = a > 0 && m > 0 ? std::min(a, m) : a + m;
  pool.groups = (a > 0 ? ceil_div(a, pool.group_size) : 0) +
                (m > 0 ? ceil_div(m, pool.group_size) : 0);
  const Bytes block_bytes = pool.page_bytes * pool.group_size;
  pool.blocks = available > 0 ? available / block_bytes : 0;
  // get_kv_cache_config_from_groups: num_blocks // len(groups) x
  // min_block_size.
  pool.tokens = pool.blocks / pool.groups * pool.block_size;
  // get_max_concurrency_for_kv_cache_config: attention groups need
  // cdiv(max_model_len, block_size) blocks, state groups one.
  const std::int64_t attention_groups =
      a > 0 ? ceil_div(a, pool.group_size) : 0;
  const std::int64_t state_groups = m > 0 ? ceil_div(m, pool.group_size) : 0;
  pool.blocks_per_request =
      attention_groups * ceil_div(max_model_len, pool.block_size) +
      state_groups;
  pool.max_concurrency = pool.blocks_per_request > 0
                             ? dbl(pool.blocks) / dbl(pool.blocks_per_request)
                             : 0;
  return pool;
}

std::string vllm_max_model_len_error(const Model& model,
                                     std::int64_t max_model_len) {
  if (model.max_position_embeddings <= 0 ||
      max_model_len <= model.max_position_embeddings) {
    return "";
  }
  return "User-specified max_model_len (" + std::to_string(max_model_len) +
         ") is greater than the derived max_model_len "
         "(max_position_embeddings=" +
         std::to_string(model.max_position_embeddings) +
         " in model's config.json).";
}

}  // namespace oomplan
