#include "oomplan/memory/vllm.hpp"

#include "oomplan/memory/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

// vLLM releases and what changes between them. Releases are compared as
// (major, minor, patch); the boundaries are the first release carrying a
// commit of vllm-project/vllm's main branch (its date against the release
// dates), written next to each rule.

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

std::int64_t vision_tokens_per_image(const Model& model) {
  if (model.vision_layers <= 0 || model.vision_patch_size <= 0) {
    return 0;
  }
  const std::int64_t side = model.vision_image_size / model.vision_patch_size;
  const std::int64_t merge = std::max<std::int64_t>(1, model.vision_merge_size);
  return std::max<std::int64_t>(1, (side / merge) * (side / merge));
}

namespace {

// Decoder tokens of a dummy video of `frames` frames at the largest image
// size: frames are padded to a multiple of temporal_patch_size by adding
// frames % temporal (qwen2_vl.py _get_vision_info), grid_t at least 1.
std::int64_t video_groups(const Model& m, std::int64_t frames) {
  const std::int64_t t =
      std::max<std::int64_t>(1, m.vision_temporal_patch_size);
  return std::max<std::int64_t>(1, (frames + frames % t) / t);
}

// Frames of vLLM's dummy video (Qwen2VLProcessingInfo
// get_num_frames_with_most_features, one video per prompt): the most frames
// whose tokens fit in `limit`, counted up from `start`, at most `cap`, at
// least 1. The loop stops at the cap (16 frames at most).
std::int64_t video_frames(const Model& m, std::int64_t tokens_per_group,
                          std::int64_t limit, std::int64_t start,
                          std::int64_t cap) {
  std::int64_t frames = start;
  while (frames < cap &&
         video_groups(m, frames + 1) * tokens_per_group <= limit) {
    ++frames;
  }
  return std::max<std::int64_t>(1, std::min(frames, cap));
}

// mllama, which only V0's EncoderDecoderModelRunner ran (profile_run):
// max_num_seqs sequences, each with one image of the most features
// (max_num_tiles tiles, MllamaProcessingInfo
// get_image_size_with_most_features), all through the tower in one call.
VllmVisionProfile tiled_profile(const Model& m, Dtype dtype, int tp,
                                std::int64_t seqs) {
  VllmVisionProfile p;
  const std::int64_t side = m.vision_image_size / m.vision_patch_size;
  // Each tile is side² patches and a class token (calc_token_per_chunk),
  // padded to a multiple of 8 inside the tower (MllamaVisionModel.forward).
  const std::int64_t chunk = side * side + 1;
  p.items = seqs;
  p.tokens_per_item = m.vision_max_tiles * chunk;
  p.patches_per_item = m.vision_max_tiles * ceil_div(chunk, 8) * 8;
  const double d = dtype_bytes(dtype);
  const double n = dbl(p.items);
  const double len = dbl(p.patches_per_item);
  const double hv = dbl(m.vision_hidden_size);
  p.pixel_bytes = saturated_bytes(n * dbl(m.vision_max_tiles) * 3.0 *
                                  dbl(m.vision_image_size) *
                                  dbl(m.vision_image_size) * 4.0);
  // _prepare_aspect_ratio_attention_mask: one (L x L) additive mask per
  // image, in the model dtype, for every layer (SDPA with attn_mask); the
  // outputs of intermediate_layers_indices stacked for the output; and one
  // layer at its peak (residual, normed input and output, next to qkv +
  // output or fc1 + GELU, split by TP).
  const double layer =
      3.0 * hv +
      std::max(4.0 * hv, 2.0 * dbl(m.vision_intermediate_size)) / dbl(tp);
  p.tower_bytes = saturated_bytes(
      n * d *
      (len * len + dbl(m.vision_intermediate_layers) * len * hv + len * layer));
  // The projected cross_attention_states (tokens x text hidden) stay through
  // the text dummy run, where each cross-attention layer projects them to
  // its K and V (kv heads split by TP, replicated below one per rank).
  p.encoder_cache =
      saturated_bytes(n * dbl(p.tokens_per_item) * dbl(m.hidden_size) * d);
  const double kv_heads =
      std::max(1.0, dbl(m.num_kv_heads) / static_cast<double>(tp));
  p.cross_kv_bytes = saturated_bytes(n * dbl(p.tokens_per_item) * 2.0 *
                                     kv_heads * dbl(m.head_dim) * d);
  return p;
}

}  // namespace

VllmVisionProfile vllm_vision_profile(const Model& model, VllmVersion version,
                                      VllmEngine engine, Dtype dtype, int tp,
                                      std::int64_t max_num_seqs,
                                      std::int64_t max_num_batched_tokens,
                                      std::int64_t max_model_len) {
  VllmVisionProfile p;
  const std::int64_t tpi = vision_tokens_per_image(model);
  if (tpi == 0) {
    return p;
  }
  const std::int64_t seqs = std::max<std::int64_t>(1, max_num_seqs);
  if (model.vision_max_tiles > 0) {
    // V1 never ran mllama (vllm_removed_error says why it would not start).
    return engine == VllmEngine::v0 ? tiled_profile(model, dtype, tp, seqs) : p;
  }
  const std::int64_t side = model.vision_image_size / model.vision_patch_size;
  const std::int64_t batched =
      std::max<std::int64_t>(1, max_num_batched_tokens);
  const std::int64_t len = std::max<std::int64_t>(0, max_model_len);
  // Video models get one dummy video per prompt next to one image, its
  // frames at the largest image size: up to 0.8.5 (V0 and V1) from the
  // max_model_len left after the image, counted from 0 frames, at most 16
  // (_MAX_FRAMES_PER_VIDEO); 0.11 (#25557's era) from all of max_model_len,
  // counted from 1, at most 14. Releases in between are not pinned: the
  // older rule up to 0.10 here.
  const bool newer_video = version >= vllm_release(0, 11);
  p.frames = model.vision_video
                 ? video_frames(model, tpi, newer_video ? len : len - tpi,
                                newer_video ? 1 : 0, newer_video ? 14 : 16)
                 : 0;
  const std::int64_t video_tokens =
      model.vision_video ? video_groups(model, p.frames) * tpi : 0;
  const std::int64_t image_patches = side * side;
  const std::int64_t video_patches =
      model.vision_video ? video_groups(model, p.frames) * side * side : 0;
  std::int64_t pixel_patches = 0;  // patches whose pixel values are held
  std::int64_t tower_patches = 0;  // patches of the tower's largest call
  if (engine == VllmEngine::v0) {
    // worker/model_runner.py _dummy_run: max_num_seqs = min(max_num_seqs,
    // max_num_batched_tokens // get_max_multimodal_tokens()), at least 1,
    // the tokens being every modality's largest item x its limit (1 in V0,
    // config.py get_limit_per_prompt): an image, and a video where the
    // model takes one. The tower runs images and videos in separate calls
    // (Qwen2VLForConditionalGeneration: _process_image_input, then
    // _process_video_input).
    p.tokens_per_item = tpi + video_tokens;
    p.items = std::clamp<std::int64_t>(batched / p.tokens_per_item, 1, seqs);
    p.patches_per_item = image_patches + video_patches;
    pixel_patches = p.items * p.patches_per_item;
    tower_patches = p.items * std::max(image_patches, video_patches);
  } else {
    // V1 profiles one modality, the one with the most tokens per item
    // (MultiModalBudget.get_modality_with_max_tokens; the image on a tie,
    // being first).
    p.video = video_tokens > tpi;
    p.tokens_per_item = p.video ? video_tokens : tpi;
    p.patches_per_item = p.video ? video_patches : image_patches;
    // v1/core/encoder_cache_manager.py compute_mm_encoder_budget: both
    // budgets are max(max_num_batched_tokens, max tokens per item)
    // (SchedulerConfig sets max_num_encoder_input_tokens = encoder_cache_size
    // = max_num_batched_tokens).
    p.encoder_budget = std::max(batched, p.tokens_per_item);
    // MultiModalBudget.get_max_items (v1/worker/utils.py 0.11,
    // multimodal/encoder_budget.py later): budget // tokens, at most
    // max_num_seqs x max(1, min(limit 999, max_model_len // tokens)) (V1's
    // default limit, config/multimodal.py); 0.8.5's profile_run took
    // cdiv(budget, tokens) instead (the release it changed in is not pinned:
    // ceil up to 0.10, floor from 0.11 here).
    const std::int64_t by_budget =
        version < vllm_release(0, 11)
            ? ceil_div(p.encoder_budget, p.tokens_per_item)
            : p.encoder_budget / p.tokens_per_item;
    const std::int64_t per_prompt =
        std::clamp<std::int64_t>(len / p.tokens_per_item, 1, 999);
    p.items = std::max<std::int64_t>(1, std::min(by_budget, seqs * per_prompt));
    pixel_patches = p.items * p.patches_per_item;
    tower_patches = pixel_patches;
  }
  const double d = dtype_bytes(dtype);
  const double hv = dbl(model.vision_hidden_size);
  const double iv = dbl(model.vision_intermediate_size);
  // pixel_values as the HF image processor returns them (float32), moved to
  // the GPU by _get_mm_dummy_batch and referenced by profile_run until it
  // returns: C x temporal x patch² values per patch.
  const double pixel_values = 3.0 * dbl(model.vision_temporal_patch_size) *
                              dbl(model.vision_patch_size) *
                              dbl(model.vision_patch_size);
  p.pixel_bytes = saturated_bytes(dbl(pixel_patches) * pixel_values * 4.0);
  // One encoder layer at its peak, the towers in vLLM being tensor-parallel
  // (siglip.py SiglipAttention/SiglipMLP, qwen2_5_vl.py Qwen2_5_VisionBlock:
  // QKVParallelLinear, ColumnParallelLinear): the residual, the normed input
  // and the layer output (3 x hidden), next to the larger of attention (qkv
  // 3h/tp + output h/tp; flash / SDPA kernels keep no patches² scores) and
  // the MLP (fc1 + GELU 2I/tp, or Qwen2.5-VL's gate_up + SiLU 3I/tp).
  const double mlp = (model.vision_gated_mlp ? 3.0 : 2.0) * iv / tp;
  const double attention = 4.0 * hv / tp;
  p.tower_bytes = saturated_bytes(dbl(tower_patches) *
                                  (3.0 * hv + std::max(mlp, attention)) * d);
  if (engine == VllmEngine::v1) {
    // profile_run keeps every item's output (tokens x text hidden) in
    // self.encoder_cache until the text dummy run and sampler are done.
    // 0.10.0 to 0.11.0 first padded each output to encoder_budget rows
    // ("embeddings that encoder outputs are scattered onto", new_zeros((
    // encoder_budget, hidden))); #25810 pads to the item's own maximum.
    const bool padded =
        vllm_release(0, 10, 0) <= version && version <= vllm_release(0, 11, 0);
    p.encoder_rows = padded ? p.encoder_budget : p.tokens_per_item;
    p.encoder_cache = saturated_bytes(dbl(p.items) * dbl(p.encoder_rows) *
                                      dbl(model.hidden_size) * d);
  }
  return p;
}

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
