#pragma once

// vLLM's memory by release, card and topology (which engine runs and its
// scheduler defaults are in setup/vllm_engine.hpp): what its start-up profiler
// counts, the non-torch memory of tensor parallelism (custom all-reduce, NCCL),
// the CUDA-graph capture list and the hybrid (attention + state-space) KV pool.
// Pure functions of plain values; memory/vllm_profile.cpp and infer.cpp
// compose them. Each rule names the vLLM source and the releases it holds for
// (summarised in docs/vllm.md, measured against in docs/accuracy.md).

#include "oomplan/model/dtype.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/setup/vllm_engine.hpp"
#include "oomplan/util/units.hpp"

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// How the start-up profiler turns memory into the KV pool.
enum class VllmProfiler {
  free_diff,        // V0 <= 0.6.3: peak = free at init - free after the profile
  with_context,     // V0 0.6.4, V1 0.7 - 0.9.0: non-torch = used - torch
                    // allocated, the CUDA context included
  allocated_delta,  // V0 0.6.5 - 0.6.6: the allocator's free blocks counted
                    // as non-torch (#10511, fixed by #11809)
  snapshot,         // V0 >= 0.7, V1 >= 0.9.1: MemorySnapshot at init_device
};
VllmProfiler vllm_profiler(VllmVersion version, VllmEngine engine);
std::string_view vllm_profiler_name(VllmProfiler profiler);

// From 0.21 the profile estimates the CUDA-graph pool and keeps it inside
// gpu_util (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default).
bool vllm_graphs_in_budget(VllmVersion version);

// The CUDA context the with_context profilers count as non-torch: 0.51 GiB,
// the memory in use at start-up in the v0.19 H100 logs ("Free memory on
// device (78.68/79.19 GiB) on startup").
inline constexpr double k_vllm_cuda_context_gib = 0.51;

// What tensor and pipeline parallelism put on one worker's GPU outside
// torch: buffers allocated while the distributed environment starts
// (init_worker_distributed_environment: NCCL communicators, their warm-up,
// custom all-reduce) and buffers NCCL connects during the profile run.
struct VllmComm {
  bool custom_all_reduce = false;
  Bytes custom_all_reduce_bytes = 0;
  int nccl_channels = 0;         // NCCL channels whose buffers sit on the GPU
  Bytes nccl_init_bytes = 0;     // at communicator init and warm-up
  Bytes nccl_profile_bytes = 0;  // connected by the profile's collectives
  Bytes init_bytes() const { return custom_all_reduce_bytes + nccl_init_bytes; }
};
// `tp` x `pp` workers, `gpus_per_node` per node, `p2p` resolved.
VllmComm vllm_comm(const Gpu& gpu, VllmVersion version, int tp, int pp,
                   int gpus_per_node, bool p2p);

// From 0.11 (#25359) V1 takes its baseline snapshot after the distributed
// environment is up: what it allocated is no longer non-torch memory, and
// the start-up free-memory check sees less free memory instead.
bool vllm_snapshot_after_distributed_init(VllmVersion version,
                                          VllmEngine engine);

// The non-torch memory one worker reports (the base part: modules and
// handles loaded after the baseline; plus the CUDA context for the
// with_context profilers), without vllm_comm().
Bytes vllm_non_torch_base(VllmVersion version, VllmEngine engine, bool samples);

// CUDA-graph capture: the mode and the batch sizes captured.
enum class VllmGraphMode { none, full, piecewise, full_and_piecewise };
std::string_view vllm_graph_mode_name(VllmGraphMode mode);  // "PIECEWISE", ...
VllmGraphMode vllm_graph_mode(VllmVersion version, VllmEngine engine,
                              bool enforce_eager);
// Ascending capture sizes (vllm/config.py _set_cudagraph_sizes,
// config/compilation.py; V0 worker/model_runner.py _BATCH_SIZES_TO_CAPTURE).
std::vector<std::int64_t> vllm_capture_sizes(
    VllmVersion version, VllmEngine engine, std::int64_t max_num_seqs,
    std::int64_t max_num_batched_tokens);
// Graphs captured: one per size, twice under FULL_AND_PIECEWISE (uniform
// decode batches up to max_num_seqs get a full graph as well).
std::int64_t vllm_graph_count(VllmGraphMode mode,
                              const std::vector<std::int64_t>& sizes,
                              std::int64_t max_num_seqs);

// The multimodal part of the start-up profile: dummy images of the model's
// largest size run through the vision tower before the text dummy batch
// (V1 gpu_model_runner.py profile_run, V0 worker/model_runner.py
// _dummy_run). All zero for a model without a described vision tower.
struct VllmVisionProfile {
  std::int64_t items = 0;            // dummy items profiled (V0: sequences)
  bool video = false;                // V1 profiles a video (else images)
  std::int64_t frames = 0;           // frames of the dummy video (0: none)
  std::int64_t tokens_per_item = 0;  // decoder tokens of one item (V0: one
                                     // sequence's image + video)
  std::int64_t patches_per_item = 0;
  std::int64_t encoder_budget = 0;  // V1 encoder cache budget, tokens (V0: 0)
  std::int64_t encoder_rows = 0;    // V1: rows kept per item (its tokens, or
                                    // the budget where outputs are padded)
  Bytes pixel_bytes = 0;     // fp32 pixel_values, held for the whole profile
  Bytes tower_bytes = 0;     // the tower's forward peak (its largest call)
  Bytes encoder_cache = 0;   // encoder outputs held during the text dummy
                             // run (V1's encoder_cache, mllama's
                             // cross-attention states)
  Bytes cross_kv_bytes = 0;  // mllama: one cross-attention layer's K and V
                             // over every dummy image
};
// Decoder tokens of one image of the largest size: (image / patch)² /
// merge² (0 without a vision tower).
std::int64_t vision_tokens_per_image(const Model& model);
VllmVisionProfile vllm_vision_profile(const Model& model, VllmVersion version,
                                      VllmEngine engine, Dtype dtype, int tp,
                                      std::int64_t max_num_seqs,
                                      std::int64_t max_num_batched_tokens,
                                      std::int64_t max_model_len);

// V1's pool for a model that mixes attention layers with state-space
// (mamba, gated delta net) layers, on one worker
// (model_executor/models/config.py HybridAttentionMambaModelConfig,
// v1/core/kv_cache_utils.py). Inputs per worker.
struct VllmHybridLayers {
  std::int64_t attention_layers = 0;
  std::int64_t state_layers = 0;
  Bytes attention_bytes_per_token = 0;  // one attention layer, K and V
  Bytes state_bytes = 0;  // one state layer, one sequence (conv + ssm state)
};
struct VllmHybridPool {
  std::int64_t block_size = 16;  // attention tokens per block
  Bytes page_bytes = 0;          // one layer's page (state padded to it)
  std::int64_t group_size = 0;   // layers per KV cache group
  std::int64_t groups = 0;
  std::int64_t blocks = 0;              // blocks per group
  std::int64_t tokens = 0;              // "GPU KV cache size" tokens
  std::int64_t blocks_per_request = 0;  // one request of max_model_len
  double max_concurrency = 0;
};
VllmHybridPool vllm_hybrid_pool(const VllmHybridLayers& layers, Bytes available,
                                std::int64_t max_model_len);

// vLLM's refusal of a --max-model-len beyond the model's context, word for
// word, or "" when the length is accepted (config.py
// _get_and_verify_max_len). No card or layout changes it.
std::string vllm_max_model_len_error(const Model& model,
                                     std::int64_t max_model_len);

}  // namespace oomplan
