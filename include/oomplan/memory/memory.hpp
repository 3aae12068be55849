#pragma once

// The numeric core: pure functions from (Model, Gpu, Resolved) to a Budget of
// named components for the most loaded GPU. No I/O, no globals, no exceptions:
// inputs were resolved and checked by the plan pipeline (plan/plan.hpp) and
// bounded by the option table, so no byte count overflows.

#include "oomplan/memory/vllm.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/setup/setup.hpp"
#include "oomplan/util/units.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

enum class Phase { load, prefill, decode, forward, backward, optimizer_step };
std::string_view phase_name(Phase phase);

// One row of the budget. `name` is one of DESIGN §2's component names;
// `formula` is static text written next to the arithmetic that produced
// `bytes`.
struct Component {
  std::string_view name;
  Bytes bytes = 0;
  std::string_view formula;
};

// What PyTorch and nvidia-smi would print at the peak (DESIGN §2 "peak").
struct Peak {
  Bytes allocated_bytes = 0;  // torch.cuda.max_memory_allocated(): tensors only
  Bytes reserved_bytes =
      0;  // max_memory_reserved(): + caching-allocator fragmentation
  Bytes device_bytes =
      0;  // nvidia-smi for the process: + CUDA context, NCCL, workspaces
  Phase phase = Phase::load;
};

// One pipeline stage (or one GPU under --split layers).
struct Stage {
  int stage = 0;
  std::int64_t layers = 0;
  Bytes weights_bytes = 0;
  Bytes kv_cache_bytes = 0;
  Bytes activations_bytes = 0;
  Bytes total_bytes = 0;
};

// vLLM's own start-up profile for the GPU that limits the KV cache (DESIGN §2
// "vllm"). With engine vllm the budget's components are weights, kv_cache
// (the pool), activations (profile peak, kept free for the forward pass),
// overhead (non-torch) and cuda_graphs, so total_bytes = requested_bytes +
// cuda_graph_bytes: what the process holds per GPU once serving (the graphs
// are captured after the KV cache, outside gpu_util).
struct VllmProfile {
  Bytes requested_bytes = 0;  // gpu_util x capacity
  Bytes weights_bytes = 0;
  Bytes activation_peak_bytes = 0;
  Bytes non_torch_bytes = 0;
  Bytes cuda_graph_bytes = 0;
  Bytes kv_cache_bytes = 0;
  Bytes kv_bytes_per_token = 0;  // per GPU
  std::int64_t kv_tokens = 0;    // engine-wide
  double max_concurrency = 0;
  std::int64_t max_model_len_fit = 0;
  std::string error;  // empty when vLLM would start
  // What the plan assumed (vllm.hpp), for the report.
  std::string version;        // "0.19"
  std::string engine;         // "V0" or "V1"
  std::string engine_reason;  // why that engine runs
  std::string profiler;       // what the start-up profiler counts
  bool p2p = false;           // GPUs of a node talk peer-to-peer
  bool custom_all_reduce = false;
  std::string cudagraph_mode;               // "FULL_AND_PIECEWISE", "NONE", ...
  std::vector<std::int64_t> capture_sizes;  // CUDA-graph batch sizes
  std::int64_t graphs = 0;                  // graphs captured
  bool graphs_in_budget = false;  // from 0.21 the graphs are inside gpu_util
  std::int64_t block_size = 16;   // tokens per KV block
  VllmVisionProfile vision;       // multimodal dummies (items 0: text only)
};

// Conditions the report explains in words (text is rendered by
// render/report.cpp).
enum class Warning : unsigned {
  no_nvlink = 1U << 0,      // tp/pp/fsdp over PCIe
  kv_replicated = 1U << 1,  // kv_heads < tp: KV heads replicated on each GPU
  eager_attention_s2 =
      1U << 2,  // eager attention materialises b x heads x s^2 scores
  seq_beyond_context = 1U << 3,  // seq > max_position_embeddings
  paged_unified_memory = 1U
                         << 4,  // paged optimizer states live in unified memory
  fp8_emulated = 1U << 5,  // fp8 requested on a card without fp8 tensor cores
  host_memory = 1U << 6,   // offload needs host RAM (host_bytes)
  low_headroom = 1U << 7,  // fits with less than the margin free
  flash_unsupported =
      1U << 8,  // flash attention needs compute capability >= 8.0
  mxfp4_dequantized = 1U << 9,  // training: MXFP4 checkpoint loaded as bf16
  awq_cache_rolls = 1U << 10,   // seq > AutoAWQ's fused cache: it rolls over
};

inline constexpr std::size_t k_max_components = 10;

// One moment of a training step on the most loaded GPU, from
// memory/train.cpp's timeline (for the step picture, render/svg.cpp).
struct Moment {
  std::string_view name;  // static text, e.g. "loss gradients"
  Phase phase = Phase::forward;
  Bytes allocated_bytes = 0;  // tensors alive at this moment
  Bytes device_bytes = 0;     // + fragmentation, runtime overhead, paged states
};
inline constexpr std::size_t k_max_moments = 6;

// Ceiling of any one component (2^56 B = 64 PiB, beyond any cluster): terms
// computed in double saturate here so ten of them still sum within int64 at
// the CLI's input bounds (seq 10M, batch 1M, 100k GPUs).
inline constexpr Bytes k_max_component_bytes = Bytes{1} << 56;

// round_bytes() with the ceiling above; negative inputs give 0.
inline Bytes saturated_bytes(double bytes) {
  if (!(bytes > 0)) {
    return 0;
  }
  if (bytes >= static_cast<double>(k_max_component_bytes)) {
    return k_max_component_bytes;
  }
  return round_bytes(bytes);
}

struct Budget {
  // Components in DESIGN order; only the first `count` are used (no heap
  // allocation).
  std::array<Component, k_max_components> components{};
  std::size_t count = 0;

  Bytes capacity_bytes = 0;  // Gpu::capacity_bytes
  Bytes usable_bytes = 0;    // capacity less the user's reserve
  Bytes margin_bytes = 0;    // headroom the plan must keep (--min-headroom)
  Bytes host_bytes = 0;      // CPU RAM one node needs (offload)
  std::optional<Bytes> host_capacity_bytes;  // CPU RAM of a node, when known
  Peak peak;
  std::vector<Stage> stages;        // pp > 1 or split layers
  std::optional<VllmProfile> vllm;  // engine vllm
  unsigned warnings = 0;            // Warning bits
  // Training: the step's timeline in order (forward, backward, optimizer
  // step); the largest device_bytes equals total_bytes(). Empty otherwise.
  std::array<Moment, k_max_moments> moments{};
  std::size_t moment_count = 0;

  void add(std::string_view name, Bytes bytes, std::string_view formula);
  Bytes bytes_of(std::string_view name) const;  // 0 when absent
  Bytes total_bytes() const;                    // sum of components
  // Fits when the total is within usable memory, the offloaded bytes within
  // the node's CPU RAM (when known) and, with --engine vllm, vLLM would start
  // (no error).
  bool fits() const {
    return total_bytes() <= usable_bytes && (!vllm || vllm->error.empty()) &&
           (!host_capacity_bytes || host_bytes <= *host_capacity_bytes);
  }
  // Fits and keeps the required headroom: what a fix must reach.
  bool fits_with_margin() const {
    return fits() && headroom_bytes() >= margin_bytes;
  }
  Bytes headroom_bytes() const { return usable_bytes - total_bytes(); }
  bool has(Warning w) const {
    return (warnings & static_cast<unsigned>(w)) != 0;
  }
};

// The plan for one resolved setup (setup/resolve.hpp resolve() and check()):
// the most loaded GPU's budget.
Budget memory(const Model& model, const Gpu& gpu, const Resolved& setup);

// --- Terms shared by several modes (memory/weights.cpp, kv_cache.cpp,
// overhead.cpp; the other terms are private: src/memory/internal.hpp)

// Weight bytes per GPU for the resolved quant (embeddings and lm_head
// unquantized where the engine leaves them), split by tp (setup.tp; pass
// tp = 1 for an unsharded copy); decoder layers [layer_begin, layer_end) on
// this GPU, embedding/lm_head flags for pipeline stages. fp8 on DeepSeek's
// own FP8 checkpoint carries its 128x128 block scales. With engine vllm it
// adds vLLM's vocabulary padding (to a multiple of 64) and its RoPE cos/sin
// cache.
struct WeightShare {
  std::int64_t layer_begin = 0;  // decoder layers [layer_begin, layer_end)
  std::int64_t layer_end = 0;
  bool embedding = true;
  bool lm_head = true;
  // Engine vllm: the card's compute capability picks the MXFP4 MoE kernel
  // and so its weight padding (0: the Hopper default).
  int compute_capability = 0;
  // false: only what the kernels read each step (the time model), without
  // what is held but never read (vLLM Triton's leftover MXFP4 scales).
  bool unread = true;
};
Bytes weight_bytes(const Model& model, const Resolved& setup,
                   const WeightShare& share);

// How the safetensors index's metadata.total_size (Model::checkpoint_bytes)
// enters weight_bytes(): it sets the weights only when the run loads the
// checkpoint as stored; the report says why when it does not.
enum class CheckpointSizeUse {
  absent,     // no index was read
  as_stored,  // a quantized checkpoint loaded in its own format: used
  counted,    // 16-bit, loaded in its dtype: the parameters are counted
              // exactly (what the index adds are buffers no engine loads)
  converted,  // the run quantizes, dequantizes or casts the weights on load
  mtp_layer,  // DeepSeek-V3: the index counts the MTP layer, not loaded
};
CheckpointSizeUse checkpoint_size_use(const Model& model,
                                      const Resolved& setup);

// KV-cache bytes per token on one GPU for layers [begin, end) (no window cap),
// in kv dtype.
Bytes kv_bytes_per_token(const Model& model, const Resolved& setup,
                         std::int64_t layer_begin, std::int64_t layer_end);

// KV-cache bytes on one GPU for `batch` sequences of `seq` tokens, sliding
// layers capped at the window.
Bytes kv_cache_bytes(const Model& model, const Resolved& setup,
                     std::int64_t layer_begin, std::int64_t layer_end,
                     std::int64_t batch, std::int64_t seq);

// CUDA context + cuBLAS workspace + NCCL for one process on `gpu`. NCCL counts
// when GPUs talk: training with more than one GPU in total, inference with
// tp x pp > 1 (not data-parallel replicas nor --split layers). Setup's
// overhead_gib >= 0 replaces the whole figure.
Bytes runtime_overhead_bytes(const Gpu& gpu, const Resolved& setup);

}  // namespace oomplan
