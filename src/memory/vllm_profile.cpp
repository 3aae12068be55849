// vLLM's start-up memory profile on one worker (gpu_worker.py
// determine_available_memory): the weights as loaded, the profile run's
// activation peak (dummy forward, sampler, multimodal dummies), non-torch
// memory, the CUDA-graph pool, and what is left for the KV cache: its blocks,
// KV cache groups, the longest request it holds and the requests at once.
// The rules that change by release live in vllm.cpp (vllm.hpp).

#include "memory/internal.hpp"

#include <algorithm>
#include <cmath>

namespace oomplan::memory_terms {

Bytes vllm_requested_bytes(const Gpu& gpu, const Resolved& s) {
  // requested_memory = gpu_memory_utilization x total (gpu_worker.py).
  return static_cast<Bytes>(s.gpu_util * as_double(gpu.capacity_bytes));
}

double vllm_dense_forward(const Model& m, const Resolved& s) {
  // Forward: MergedColumnParallelLinear gate_up output (2I/tp) and the
  // SiluAndMul output (I/tp), or the q, k, v projections, next to ~5
  // hidden-sized buffers (residual, hidden, normed input, attention output,
  // pipeline send/receive); fit to the v0.19 PP=4 first-stage peak. The MoE
  // layers' peak is vllm_moe_activation().
  const double d = dtype_bytes(s.dtype);
  const int tp = s.tp;
  const double t = as_double(s.max_num_batched_tokens);
  const double matrices = m.mlp == MlpKind::gated ? 3.0 : 2.0;
  const double dense = matrices * t * as_double(m.intermediate_size) / tp * d;
  const double heads = as_double(m.num_heads) / tp;
  const double qkv =
      t * (2.0 * heads + 2.0 * as_double(kv_heads_per_gpu(m, tp))) *
      as_double(m.kv_lora_rank > 0 ? m.qk_nope_head_dim + m.qk_rope_head_dim
                                   : m.head_dim) *
      d;
  const bool has_dense =
      m.num_experts == 0 || m.first_k_dense > 0 || m.moe_every > 1;
  return std::max(has_dense ? dense : 0.0, qkv);
}

VllmMoeActivation vllm_moe_activation(const Model& m, const Gpu& gpu,
                                      const Resolved& s) {
  VllmMoeActivation moe;
  if (m.num_experts == 0) {
    return moe;
  }
  const double d = dtype_bytes(s.dtype);
  const int tp = s.tp;
  const double t = as_double(s.max_num_batched_tokens);
  const double h = as_double(m.hidden_size);
  const double k = as_double(m.experts_per_tok);
  if (s.quant == Quant::mxfp4) {
    // MXFP4 (gpt-oss) calls its kernels directly (quantization/mxfp4.py
    // Mxfp4MoEMethod.apply), not through the modular kernel's shared
    // workspace, so nothing outlives the layer. Triton (Hopper,
    // gpt_oss_triton_kernels_moe.py triton_kernel_fused_experts): the
    // fused-SwiGLU cache T x topk x I_pad and the T x h output; Marlin
    // (fused_marlin_moe): T x topk x max(2 I_pad, h_pad) and
    // T x topk x I_pad.
    const std::int64_t part = m.moe_intermediate_size / tp;
    const int cc = gpu.compute_capability;
    const Mxfp4Padding pad = mxfp4_padding(part, m.hidden_size, cc);
    const bool marlin = pad.kernel == Mxfp4Kernel::marlin;
    moe.forward = marlin ? t * k *
                               (as_double(std::max(2 * pad.inter, pad.hidden)) +
                                as_double(pad.inter)) *
                               d
                         : t * k * as_double(pad.inter) * d + t * h * d;
    return moe;
  }
  // fused_moe intermediate caches (vllm/model_executor/layers/fused_moe):
  // T x topk x 2I/tp, T x topk x I/tp and T x topk x h; the modular kernel
  // keeps them as a persistent workspace, so they outlive the forward.
  const double mi = as_double(m.moe_intermediate_size) / tp;
  moe.workspace = t * k * (2.0 * mi + mi + h) * d;
  moe.forward = moe.workspace;
  return moe;
}

double vllm_text_sampler(const Model& m, const Resolved& s,
                         double moe_workspace) {
  // Sampler: lm_head logits for min(max_num_seqs, tokens) rows over the full
  // (gathered) vocabulary in dtype, plus ~13 B per element of sampler
  // temporaries (the fp32 logits, and the top-k/top-p sort's values and int64
  // indices, v1/sample/ops/topk_topp_sampler.py), calibrated on the v0.19
  // logs (Llama 3.1 bf16 and fp32, Qwen3, Gemma 3); the forward's hidden
  // states stay referenced meanwhile. The V0 sampler (model_executor/layers/
  // sampler.py) holds far more at its peak in _apply_top_k_top_p: fp32
  // logits, sorted values and int64 indices, softmax, cumsum, the int64
  // inverse permutation and the gathered result, ~37 B per element (1.26 GiB
  // for Llama-3-8B at 256 sequences, vllm-project/vllm#10511).
  const double d = dtype_bytes(s.dtype);
  const double t = as_double(s.max_num_batched_tokens);
  const double h = as_double(m.hidden_size);
  const double rows =
      as_double(std::min(s.max_num_seqs, s.max_num_batched_tokens));
  const double per_element = s.vllm_engine == VllmEngine::v0 ? 37.0 : 13.0;
  return t * h * d + moe_workspace +
         rows * as_double(m.vocab_size) * (d + per_element);
}

// Peak torch memory of vLLM's profile run (gpu_model_runner.profile_run):
// a forward pass over a dummy batch of max_num_batched_tokens tokens, then,
// on the last pipeline stage, the dummy sampler run over max_num_seqs rows
// while the forward's hidden states are still referenced.
Bytes vllm_activation(const Model& m, const Gpu& gpu, const Resolved& s,
                      const Range& r) {
  const double d = dtype_bytes(s.dtype);
  const double t = as_double(s.max_num_batched_tokens);
  const double h = as_double(m.hidden_size);
  const VllmMoeActivation moe = vllm_moe_activation(m, gpu, s);
  const double forward =
      5.0 * t * h * d + std::max(vllm_dense_forward(m, s), moe.forward);
  const double text = r.last ? vllm_text_sampler(m, s, moe.workspace) : 0.0;
  // Multimodal models run their dummy images through the vision tower
  // first, on every pipeline stage (profile_run before _dummy_run); the
  // pixel values stay referenced, and the encoder outputs (V1's
  // encoder_cache, mllama's cross-attention states and one cross layer's K
  // and V) stay through the text dummy run (vllm.hpp
  // vllm_vision_profile). The peak is the larger of the tower's forward and
  // the text profile on top of what the images left.
  const VllmVisionProfile vision = vllm_vision_profile(
      m, s.vllm_release, s.vllm_engine, s.dtype, s.tp, s.max_num_seqs,
      s.max_num_batched_tokens, s.max_model_len);
  const double held = as_double(vision.pixel_bytes) +
                      as_double(vision.encoder_cache) +
                      as_double(vision.cross_kv_bytes);
  const double tower =
      as_double(vision.pixel_bytes) + as_double(vision.tower_bytes);
  return saturated_bytes(std::max(tower, held + std::max(forward, text)));
}

// Memory outside PyTorch's allocator that the profiler counts (vllm.hpp):
// modules and handles loaded after the baseline, the CUDA context where the
// release counts it, and tensor parallelism's custom all-reduce and NCCL
// buffers.
Bytes vllm_non_torch(const Gpu& gpu, const Resolved& s) {
  if (vllm_profiler(s.vllm_release, s.vllm_engine) ==
      VllmProfiler::allocated_delta) {
    // 0.6.5 - 0.6.6 counted the caching allocator's free blocks as well:
    // #10511's own log, 1.79 GiB at TP1 and 3.58 GiB at TP2 (H100,
    // Llama-3-8B); #11809 fixed it in 0.7.
    return round_bytes((s.tp > 1 ? 3.58 : 1.79) * as_double(k_gib));
  }
  // v0.19 logs: 0.25-0.27 GiB at TP1, 0.07 GiB per worker at PP=4.
  const Bytes base =
      vllm_non_torch_base(s.vllm_release, s.vllm_engine, s.pp == 1);
  const VllmComm comm =
      vllm_comm(gpu, s.vllm_release, s.tp, s.pp, s.gpus, s.p2p);
  const Bytes before_baseline =
      vllm_snapshot_after_distributed_init(s.vllm_release, s.vllm_engine)
          ? 0
          : comm.init_bytes();
  return base + before_baseline + comm.nccl_profile_bytes;
}

VllmGraphs vllm_graphs(const Resolved& s) {
  VllmGraphs g;
  g.mode = vllm_graph_mode(s.vllm_release, s.vllm_engine, s.enforce_eager);
  if (g.mode != VllmGraphMode::none) {
    g.sizes = vllm_capture_sizes(s.vllm_release, s.vllm_engine, s.max_num_seqs,
                                 s.max_num_batched_tokens);
  }
  g.count = vllm_graph_count(g.mode, g.sizes, s.max_num_seqs);
  return g;
}

// CUDA-graph pool (0 with --enforce-eager): a fixed part plus a part per
// layer and graph that shrinks with tp. The constants are fit to the v0.19
// H100 logs (0.51 GiB at 8 layers to 1.79 GiB at 80 layers), where
// FULL_AND_PIECEWISE captures 51 sizes twice (102 graphs, max_num_seqs
// 1024); other releases and settings scale the per-layer part by the graphs
// they capture.
Bytes vllm_cuda_graphs(const Model& m, const Resolved& s, const Range& r,
                       const VllmGraphs& graphs) {
  if (graphs.count == 0) {
    return 0;
  }
  std::int64_t moe_layers = 0;
  for (std::int64_t i = r.begin; i < r.end; ++i) {
    moe_layers += is_moe_layer(m, i) ? 1 : 0;
  }
  const double captured = as_double(graphs.count) / 102.0;
  const double per_layer =
      captured * 0.018 / std::pow(static_cast<double>(s.tp), 0.35);
  const double gib = 0.33 + as_double(r.end - r.begin) * per_layer +
                     captured * as_double(moe_layers) * 0.005;
  return round_bytes(gib * as_double(k_gib));
}

// Hybrid allocator (kv_cache_utils.py
// _get_kv_cache_groups_uniform_page_size): layers of one attention type form
// groups of the smaller type's size (the larger if within 1.5x); every group
// shares one block table.
VllmKvGroups vllm_kv_groups(std::int64_t full_layers,
                            std::int64_t local_layers) {
  const std::int64_t n = full_layers + local_layers;
  if (local_layers == 0 || full_layers == 0) {
    return {std::max<std::int64_t>(1, n), 1};
  }
  const std::int64_t lo = std::min(full_layers, local_layers);
  const std::int64_t hi = std::max(full_layers, local_layers);
  const std::int64_t size = as_double(hi) < 1.5 * as_double(lo) ? hi : lo;
  return {size, ceil_div(full_layers, size) + ceil_div(local_layers, size)};
}

VllmStage vllm_stage(const Model& m, const Gpu& gpu, const Resolved& s,
                     const Range& r, Bytes requested) {
  VllmStage st;
  WeightShare share = share_of(r);
  share.compute_capability = gpu.compute_capability;
  st.weights = weight_bytes(m, s, share);
  st.activation = vllm_activation(m, gpu, s, r);
  st.non_torch = vllm_non_torch(gpu, s);
  st.graphs = vllm_cuda_graphs(m, s, r, vllm_graphs(s));
  // determine_available_memory: requested - weights - activation peak -
  // non-torch; before 0.21 the CUDA graphs are captured after the KV cache
  // (outside gpu_util), from 0.21 their profiled estimate is subtracted too.
  st.available = requested - st.weights - st.activation - st.non_torch -
                 (vllm_graphs_in_budget(s.vllm_release) ? st.graphs : 0);
  st.per_token = kv_bytes_per_token(m, s, r.begin, r.end);
  st.layer_token = kv_bytes_per_token(m, s, 0, 1);
  for (std::int64_t i = r.begin; i < r.end; ++i) {
    if (is_local_layer(m, i)) {
      ++st.local_layers;
    } else {
      ++st.full_layers;
    }
  }
  const VllmKvGroups groups = vllm_kv_groups(st.full_layers, st.local_layers);
  st.group_size = groups.size;
  st.groups = groups.count;
  const Bytes block_bytes = st.group_size * k_vllm_block * st.layer_token;
  st.blocks =
      st.available > 0 && block_bytes > 0 ? st.available / block_bytes : 0;
  return st;
}

// KV bytes one request of `len` tokens needs on this worker
// (kv_cache_interface.py FullAttentionSpec / SlidingWindowSpec
// max_memory_usage_bytes).
double vllm_needed(const Model& m, const Resolved& s, const VllmStage& st,
                   std::int64_t len) {
  const double block = as_double(k_vllm_block * st.layer_token);
  double need = as_double(st.full_layers) *
                as_double(ceil_div(len, k_vllm_block)) * block;
  if (st.local_layers > 0) {
    const std::int64_t window_tokens =
        std::min(m.sliding_window - 1 + s.max_num_batched_tokens, len);
    need += as_double(st.local_layers) *
            as_double(ceil_div(window_tokens, k_vllm_block) + 1) * block;
  }
  return need;
}

// Largest max_model_len whose KV fits in this worker's pool (vLLM's
// estimate_max_model_len), capped at the model's context.
std::int64_t vllm_max_len(const Model& m, const Resolved& s,
                          const VllmStage& st) {
  if (st.available <= 0 || st.layer_token <= 0) {
    return 0;
  }
  std::int64_t lo = 0;
  std::int64_t hi = std::max<std::int64_t>(m.max_position_embeddings, 1);
  if (vllm_needed(m, s, st, hi) <= as_double(st.available)) {
    return hi;
  }
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (vllm_needed(m, s, st, mid) <= as_double(st.available)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Max concurrency (kv_cache_utils.py get_max_concurrency_for_kv_cache_config):
// all blocks over the blocks one request of max_model_len needs. Each group
// holds group_size layers (padded), so one request needs group_size x
// (per-layer need of every group's spec).
double vllm_max_concurrency(const Model& m, const Resolved& s,
                            const VllmStage& st) {
  const double block = as_double(st.group_size * k_vllm_block * st.layer_token);
  if (block <= 0 || st.blocks <= 0) {
    return 0;
  }
  VllmStage padded = st;
  if (st.local_layers > 0 && st.full_layers > 0) {
    padded.full_layers =
        ceil_div(st.full_layers, st.group_size) * st.group_size;
    padded.local_layers =
        ceil_div(st.local_layers, st.group_size) * st.group_size;
  }
  const double per_request =
      std::ceil(vllm_needed(m, s, padded, s.max_model_len) / block);
  return as_double(st.blocks) / per_request;
}

VllmWorker vllm_limiting_worker(const Model& m, const Gpu& gpu,
                                const Resolved& s, Bytes requested,
                                std::vector<Stage>& stages) {
  const int pp = std::max(1, s.pp);
  VllmWorker w;
  w.tokens = -1;
  w.max_len = -1;
  for (int i = 0; i < pp; ++i) {
    const Range r = pp == 1 ? Range{0, m.num_layers, true, true}
                            : pp_range(m.num_layers, pp, i);
    const VllmStage st = vllm_stage(m, gpu, s, r, requested);
    // The engine takes the smallest block count over its workers.
    const std::int64_t stage_tokens = st.blocks / st.groups * k_vllm_block;
    const std::int64_t stage_len = vllm_max_len(m, s, st);
    if (w.tokens < 0 || stage_tokens < w.tokens) {
      w.tokens = stage_tokens;
      w.stage = st;
    }
    w.max_len = w.max_len < 0 ? stage_len : std::min(w.max_len, stage_len);
    if (pp > 1) {
      const Bytes kv = std::max<Bytes>(0, st.available);
      stages.push_back(
          Stage{i, r.end - r.begin, st.weights, kv, st.activation,
                st.weights + kv + st.activation + st.non_torch + st.graphs});
    }
  }
  return w;
}

}  // namespace oomplan::memory_terms
