#include "memory/internal.hpp"

#include "oomplan/memory/vllm.hpp"
#include "oomplan/model/capability.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

// Inference memory: engine hf (transformers generate, PyTorch eager) and
// engine vllm (vLLM's start-up memory profile). Every term names its source.

namespace oomplan {
namespace {

constexpr std::int64_t k_block = 16;  // vLLM KV block size in tokens

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// One GPU's share of the model: decoder layers [begin, end), and whether it
// holds the embedding (first stage) and the final norm + lm_head (last).
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  bool first = true;
  bool last = true;
};

WeightShare share_of(const Range& r) {
  return WeightShare{r.begin, r.end, r.first, r.last};
}

// vLLM's pipeline split (vllm/distributed/utils.py get_pp_indices): L / pp
// layers per stage; the remainder goes one each to the stages before the last,
// counting back from the second to last.
Range pp_range(std::int64_t layers, int pp, int stage) {
  std::int64_t begin = 0;
  std::int64_t count = 0;
  const std::int64_t base = layers / pp;
  const std::int64_t rest = layers % pp;
  for (int i = 0; i <= stage; ++i) {
    begin += count;
    count = base;
    // partitions[-k] += 1 for k in 2 .. rest + 1
    const int from_end = pp - i;
    if (from_end >= 2 && from_end <= rest + 1) {
      ++count;
    }
  }
  return Range{begin, begin + count, stage == 0, stage == pp - 1};
}

// transformers device_map="auto" (accelerate get_balanced_memory +
// infer_auto_device_map): each GPU but the last gets a budget of
// model bytes / n plus the largest layer, filled with whole layers in order;
// the last GPU takes the rest and the lm_head.
std::vector<Range> split_ranges(const Model& m, const Resolved& s) {
  const int n = std::max(1, s.gpus);
  const std::int64_t layers = m.num_layers;
  const Bytes total = weight_bytes(m, s, WeightShare{0, layers, true, true});
  // The buffer is the largest layer: the last one is MoE when the first
  // layers are dense (DeepSeek first_k_dense, Llama 4 interleaving).
  const Bytes layer = std::max(
      weight_bytes(m, s, WeightShare{0, 1, false, false}),
      weight_bytes(m, s, WeightShare{layers - 1, layers, false, false}));
  const Bytes first_extra = weight_bytes(m, s, WeightShare{0, 0, true, false});
  const Bytes budget = total / n + layer;
  std::vector<Range> ranges;
  std::int64_t next = 0;
  for (int g = 0; g < n; ++g) {
    Range r{next, next, g == 0, g == n - 1};
    if (g == n - 1) {
      r.end = layers;
    } else {
      Bytes used = g == 0 ? first_extra : 0;
      // Leave at least one layer for each later GPU.
      const std::int64_t limit = layers - (n - 1 - g);
      while (r.end < limit &&
             (r.end == r.begin ||
              used + weight_bytes(
                         m, s, WeightShare{r.end, r.end + 1, false, false}) <=
                  budget)) {
        used += weight_bytes(m, s, WeightShare{r.end, r.end + 1, false, false});
        ++r.end;
      }
    }
    next = r.end;
    ranges.push_back(r);
  }
  return ranges;
}

double dbl(std::int64_t v) {
  return static_cast<double>(v);
}

std::int64_t kv_heads_per_gpu(const Model& m, int tp) {
  return std::max<std::int64_t>(1, ceil_div(m.num_kv_heads, tp));
}

// ---------------------------------------------------------------------------
// engine hf

struct HfStage {
  Bytes weights = 0;
  Bytes kv = 0;
  Bytes activations = 0;
  Bytes logits = 0;
};

// Largest transient of one decoder layer during prefill of `batch` sequences
// of `seq` tokens (PyTorch eager, transformers modeling code), plus the
// hidden-state buffers that live across layers.
Bytes hf_prefill_activations(const Model& m, const Resolved& s) {
  const double d = dtype_bytes(s.dtype);
  const int tp = s.tp;
  const double b = dbl(s.batch);
  const double seq = dbl(s.seq);
  const double t = b * seq;
  const double h = dbl(m.hidden_size);
  const double heads = dbl(m.num_heads) / tp;
  const double qk_dim = m.kv_lora_rank > 0
                            ? dbl(m.qk_nope_head_dim + m.qk_rope_head_dim)
                            : dbl(m.head_dim);
  const double kvh = m.kv_lora_rank > 0 ? heads : dbl(kv_heads_per_gpu(m, tp));

  // Residual stream, normed input and the layer output (LlamaDecoderLayer).
  const double hidden = 3.0 * t * h * d;

  // q, k, v projections and the attention output; eager expands K/V to every
  // query head (repeat_kv in modeling_llama). sdpa passes enable_gqa instead
  // when no padding mask is needed (sdpa_attention.py use_gqa_in_sdpa) and
  // flash reads the KV heads directly.
  double attention = t * (2.0 * heads + 2.0 * kvh) * qk_dim * d;
  if (s.attn == Attn::eager) {
    attention += 2.0 * t * heads * qk_dim * d;
    // eager_attention_forward: q.k^T scores b x heads x s^2 in dtype; the
    // masked copy, the fp32 softmax and its cast back each allocate while the
    // previous tensor is still referenced, so the peak holds 2 x dtype + 4 B
    // per score, plus the 4D causal mask b x s^2 in dtype.
    attention += b * heads * seq * seq * (2.0 * d + 4.0) + b * seq * seq * d;
  }

  // MLP: down(act(gate(x)) * up(x)) holds act(gate), up and their product
  // (gated, 3 x I); GELU MLPs hold fc1 and its activation (2 x I).
  const double matrices = m.mlp == MlpKind::gated ? 3.0 : 2.0;
  double mlp = matrices * t * dbl(m.intermediate_size) / tp * d;
  if (m.num_experts > 0) {
    // HF MoE blocks loop over experts: the fp32 router logits, the output
    // accumulator and one expert's MLP over its tokens (taken as all tokens,
    // a bound), plus shared experts over every token.
    const double shared_i =
        dbl(m.num_shared_experts) * dbl(m.shared_expert_intermediate_size > 0
                                            ? m.shared_expert_intermediate_size
                                            : m.moe_intermediate_size);
    const double moe = t * dbl(m.num_experts) * 4.0 + t * h * d +
                       matrices * t * dbl(m.moe_intermediate_size) / tp * d +
                       matrices * t * shared_i / tp * d;
    mlp = std::max(mlp, moe);
  }
  // bitsandbytes 4-bit layers dequantize their weight to dtype before the
  // matmul when more than one token goes through (bnb matmul_4bit ->
  // dequantize_4bit + F.linear): one MLP matrix at a time.
  double dequant = 0;
  if (s.quant == Quant::nf4 || s.quant == Quant::nf4_nodq) {
    const double widest =
        dbl(std::max(m.intermediate_size, m.moe_intermediate_size));
    dequant = h * widest / tp * d;
  }
  return saturated_bytes(hidden + std::max(attention, mlp) + dequant);
}

// GenerationMixin keeps only the last position's logits in prefill
// (logits_to_keep=1 since transformers 4.45): b x vocab in dtype from
// lm_head, plus the fp32 copy _sample() takes.
Bytes hf_logits(const Model& m, const Resolved& s) {
  return saturated_bytes(dbl(s.batch) * dbl(m.vocab_size) *
                         (dtype_bytes(s.dtype) + 4.0));
}

HfStage hf_stage(const Model& m, const Resolved& s, const Range& r) {
  HfStage st;
  st.weights = weight_bytes(m, s, share_of(r));
  if (m.num_decoder_layers > 0) {
    // Encoder-decoder (T5): each decoder layer caches self-attention K/V and
    // cross-attention K/V over the encoder output (taken as seq tokens).
    st.kv = r.last ? kv_cache_bytes(m, s, 0, 2 * m.num_decoder_layers, s.batch,
                                    s.seq)
                   : 0;
  } else {
    st.kv = kv_cache_bytes(m, s, r.begin, r.end, s.batch, s.seq);
  }
  st.activations = r.end > r.begin ? hf_prefill_activations(m, s) : 0;
  st.logits = r.last ? hf_logits(m, s) : 0;
  return st;
}

void add_hf(const Model& m, const Gpu& gpu, const Resolved& s, Budget& budget) {
  const Bytes overhead = runtime_overhead_bytes(gpu, s);
  // PyTorch caching allocator: reserved-but-unallocated share of the tensors
  // (catalog_facts.md Part 3: 2-5 % for inference).
  const double reserve = s.reserve.value_or(0.05);
  auto stage_total = [&](const HfStage& st) {
    const Bytes alloc = st.weights + st.kv + st.activations + st.logits;
    return alloc + saturated_bytes(reserve * dbl(alloc)) + overhead;
  };

  HfStage worst;
  if (s.pp <= 1 && !s.split_layers) {
    worst = hf_stage(m, s, Range{0, m.num_layers, true, true});
  } else {
    std::vector<Range> ranges;
    if (s.split_layers) {
      ranges = split_ranges(m, s);
    } else {
      for (int i = 0; i < s.pp; ++i) {
        ranges.push_back(pp_range(m.num_layers, s.pp, i));
      }
    }
    Bytes worst_total = -1;
    budget.stages.reserve(ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const HfStage st = hf_stage(m, s, ranges[i]);
      const Bytes total = stage_total(st);
      budget.stages.push_back(Stage{static_cast<int>(i),
                                    ranges[i].end - ranges[i].begin, st.weights,
                                    st.kv, st.activations + st.logits, total});
      if (total > worst_total) {
        worst_total = total;
        worst = st;
      }
    }
  }

  const Bytes allocated =
      worst.weights + worst.kv + worst.activations + worst.logits;
  const Bytes fragmentation = saturated_bytes(reserve * dbl(allocated));
  budget.add("weights", worst.weights,
             "params per GPU (heads and MLP columns / tp, KV heads "
             "max(1, kv/tp), norms replicated) x bytes of dtype/quant");
  budget.add("kv_cache", worst.kv,
             "batch x seq x 2 (K,V) x layers x kv_heads/tp x head_dim x "
             "kv bytes (MLA: latent; sliding layers capped at the window)");
  budget.add("activations", worst.activations,
             s.attn == Attn::eager
                 ? "prefill: 3 hidden buffers + max(attention incl. b x "
                   "heads x s^2 scores (2 x dtype + fp32 softmax), MLP "
                   "3 x b x s x I/tp)"
                 : "prefill: 3 hidden buffers + max(q,k,v,o projections "
                   "(linear in s), MLP 3 x b x s x I/tp) x dtype");
  budget.add("logits", worst.logits,
             "last position only (logits_to_keep=1): batch x vocab x "
             "(dtype + fp32 copy)");
  budget.add("overhead", overhead,
             "CUDA context 400 MiB + cuBLAS workspace (+ NCCL when GPUs "
             "talk)");
  budget.add("fragmentation", fragmentation,
             "caching-allocator reserve x allocated tensors");
  budget.peak.allocated_bytes = allocated;
  budget.peak.reserved_bytes = allocated + fragmentation;
  budget.peak.device_bytes = allocated + fragmentation + overhead;
  budget.peak.phase = Phase::prefill;
}

// ---------------------------------------------------------------------------
// engine vllm

struct VllmStage {
  Bytes weights = 0;
  Bytes activation = 0;
  Bytes non_torch = 0;
  Bytes graphs = 0;
  Bytes available = 0;
  Bytes per_token = 0;
  std::int64_t blocks = 0;       // KV blocks this worker can hold
  std::int64_t groups = 1;       // KV cache groups (hybrid allocator)
  std::int64_t full_layers = 0;  // full-attention layers on this worker
  std::int64_t local_layers = 0;
  std::int64_t group_size = 0;
  Bytes layer_token = 0;  // KV bytes per token of one layer
};

// The last stage's sampler run of the profile (below), 0 elsewhere.
double vllm_text_sampler(const Model& m, const Resolved& s, double t, double h,
                         double d, double moe_workspace) {
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
  const double rows = dbl(std::min(s.max_num_seqs, s.max_num_batched_tokens));
  const double per_element = s.vllm_engine == VllmEngine::v0 ? 37.0 : 13.0;
  const double sampler =
      t * h * d + moe_workspace + rows * dbl(m.vocab_size) * (d + per_element);
  return sampler;
}

// Peak torch memory of vLLM's profile run (gpu_model_runner.profile_run):
// a forward pass over a dummy batch of max_num_batched_tokens tokens, then,
// on the last pipeline stage, the dummy sampler run over max_num_seqs rows
// while the forward's hidden states are still referenced.
Bytes vllm_activation(const Model& m, const Gpu& gpu, const Resolved& s,
                      const Range& r) {
  const double d = dtype_bytes(s.dtype);
  const int tp = s.tp;
  const double t = dbl(s.max_num_batched_tokens);
  const double h = dbl(m.hidden_size);
  const double matrices = m.mlp == MlpKind::gated ? 3.0 : 2.0;

  // Forward: MergedColumnParallelLinear gate_up output (2I/tp) and the
  // SiluAndMul output (I/tp), next to ~5 hidden-sized buffers (residual,
  // hidden, normed input, attention output, pipeline send/receive); fit to
  // the v0.19 PP=4 first-stage peak.
  const double dense = matrices * t * dbl(m.intermediate_size) / tp * d;
  const double heads = dbl(m.num_heads) / tp;
  const double qkv =
      t * (2.0 * heads + 2.0 * dbl(kv_heads_per_gpu(m, tp))) *
      dbl(m.kv_lora_rank > 0 ? m.qk_nope_head_dim + m.qk_rope_head_dim
                             : m.head_dim) *
      d;
  double moe_workspace = 0;  // outlives the forward
  double moe_forward = 0;    // the MoE layer's peak during the forward
  if (m.num_experts > 0) {
    const double k = dbl(m.experts_per_tok);
    if (s.quant == Quant::mxfp4) {
      // MXFP4 (gpt-oss) calls its kernels directly (quantization/mxfp4.py
      // Mxfp4MoEMethod.apply), not through the modular kernel's shared
      // workspace, so nothing outlives the layer. Triton (Hopper,
      // gpt_oss_triton_kernels_moe.py triton_kernel_fused_experts): the
      // fused-SwiGLU cache T x topk x I_pad and the T x h output; Marlin
      // (fused_marlin_moe): T x topk x max(2 I_pad, h_pad) and
      // T x topk x I_pad.
      const std::int64_t part = m.moe_intermediate_size / tp;
      const Mxfp4Padding pad =
          mxfp4_padding(part, m.hidden_size, gpu.compute_capability);
      const int cc = gpu.compute_capability;
      const bool marlin = cc != 0 && (cc < 90 || cc >= 110);
      moe_forward = marlin ? t * k *
                                 (dbl(std::max(2 * pad.inter, pad.hidden)) +
                                  dbl(pad.inter)) *
                                 d
                           : t * k * dbl(pad.inter) * d + t * h * d;
    } else {
      // fused_moe intermediate caches (vllm/model_executor/layers/
      // fused_moe): T x topk x 2I/tp, T x topk x I/tp and T x topk x h; the
      // modular kernel keeps them as a persistent workspace, so they
      // outlive the forward.
      const double mi = dbl(m.moe_intermediate_size) / tp;
      moe_workspace = t * k * (2.0 * mi + mi + h) * d;
      moe_forward = moe_workspace;
    }
  }
  const bool has_dense =
      m.num_experts == 0 || m.first_k_dense > 0 || m.moe_every > 1;
  const double forward =
      5.0 * t * h * d + std::max({has_dense ? dense : 0.0, qkv, moe_forward});
  const double text =
      r.last ? vllm_text_sampler(m, s, t, h, d, moe_workspace) : 0.0;
  // Multimodal models run their dummy images through the vision tower
  // first, on every pipeline stage (profile_run before _dummy_run); the
  // pixel values stay referenced, and the encoder outputs (V1's
  // encoder_cache, mllama's cross-attention states and one cross layer's K
  // and V) stay through the text dummy run (vllm.hpp
  // vllm_vision_profile). The peak is the larger of the tower's forward and
  // the text profile on top of what the images left.
  const VllmVisionProfile vision = vllm_vision_profile(
      m, s.vllm_release, s.vllm_engine, s.dtype, tp, s.max_num_seqs,
      s.max_num_batched_tokens, s.max_model_len);
  const double held = dbl(vision.pixel_bytes) + dbl(vision.encoder_cache) +
                      dbl(vision.cross_kv_bytes);
  const double tower = dbl(vision.pixel_bytes) + dbl(vision.tower_bytes);
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
    return round_bytes((s.tp > 1 ? 3.58 : 1.79) * dbl(k_gib));
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

// The capture list and graph count of this setup (vllm.hpp).
struct VllmGraphs {
  VllmGraphMode mode = VllmGraphMode::none;
  std::vector<std::int64_t> sizes;
  std::int64_t count = 0;
};
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
  const double captured = dbl(graphs.count) / 102.0;
  const double per_layer =
      captured * 0.018 / std::pow(static_cast<double>(s.tp), 0.35);
  const double gib = 0.33 + dbl(r.end - r.begin) * per_layer +
                     captured * dbl(moe_layers) * 0.005;
  return round_bytes(gib * dbl(k_gib));
}

// KV bytes one request of `len` tokens needs on this worker
// (kv_cache_interface.py FullAttentionSpec / SlidingWindowSpec
// max_memory_usage_bytes).
double vllm_needed(const Model& m, const Resolved& s, const VllmStage& st,
                   std::int64_t len) {
  const double block = dbl(k_block * st.layer_token);
  double need = dbl(st.full_layers) * dbl(ceil_div(len, k_block)) * block;
  if (st.local_layers > 0) {
    const std::int64_t window_tokens =
        std::min(m.sliding_window - 1 + s.max_num_batched_tokens, len);
    need += dbl(st.local_layers) * dbl(ceil_div(window_tokens, k_block) + 1) *
            block;
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
  if (vllm_needed(m, s, st, hi) <= dbl(st.available)) {
    return hi;
  }
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (vllm_needed(m, s, st, mid) <= dbl(st.available)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
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
  // Hybrid allocator (kv_cache_utils.py
  // _get_kv_cache_groups_uniform_page_size): layers of one attention type form
  // groups of the smaller type's size (the larger if within 1.5x); every group
  // shares one block table.
  const std::int64_t n = st.full_layers + st.local_layers;
  if (st.local_layers == 0 || st.full_layers == 0) {
    st.group_size = std::max<std::int64_t>(1, n);
    st.groups = 1;
  } else {
    const std::int64_t lo = std::min(st.full_layers, st.local_layers);
    const std::int64_t hi = std::max(st.full_layers, st.local_layers);
    st.group_size = dbl(hi) < 1.5 * dbl(lo) ? hi : lo;
    st.groups = ceil_div(st.full_layers, st.group_size) +
                ceil_div(st.local_layers, st.group_size);
  }
  const Bytes block_bytes = st.group_size * k_block * st.layer_token;
  st.blocks =
      st.available > 0 && block_bytes > 0 ? st.available / block_bytes : 0;
  return st;
}

// The oldest card a weight format's vLLM kernels run on (each quantization
// config's get_min_capability): fp8 and mxfp4 80 (Marlin weight-only on
// Ampere), awq 75, gptq 60, bitsandbytes 70; 0 when unquantized.
int vllm_min_capability(Quant quant) {
  switch (quant) {
    case Quant::fp8:
    case Quant::mxfp4:
      return 80;
    case Quant::awq:
      return 75;
    case Quant::gptq:
      return 60;
    case Quant::int8:
    case Quant::nf4:
    case Quant::nf4_nodq:
      return 70;
    default:
      return 0;
  }
}

std::string vllm_quant_method(Quant quant) {
  switch (quant) {
    case Quant::int8:
    case Quant::nf4:
    case Quant::nf4_nodq:
      return "bitsandbytes";
    default:
      return std::string(quant_name(quant));
  }
}

std::string fixed2(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

std::string gib_text(double bytes) {
  return fixed2(bytes / dbl(k_gib));
}

void add_vllm(const Model& m, const Gpu& gpu, const Resolved& s,
              Budget& budget) {
  // requested_memory = gpu_memory_utilization x total (gpu_worker.py).
  const Bytes requested =
      static_cast<Bytes>(s.gpu_util * dbl(gpu.capacity_bytes));
  const int pp = std::max(1, s.pp);

  VllmStage worst;
  std::int64_t tokens = -1;
  std::int64_t max_len = -1;
  for (int i = 0; i < pp; ++i) {
    const Range r = pp == 1 ? Range{0, m.num_layers, true, true}
                            : pp_range(m.num_layers, pp, i);
    const VllmStage st = vllm_stage(m, gpu, s, r, requested);
    // The engine takes the smallest block count over its workers.
    const std::int64_t stage_tokens = st.blocks / st.groups * k_block;
    const std::int64_t stage_len = vllm_max_len(m, s, st);
    if (tokens < 0 || stage_tokens < tokens) {
      tokens = stage_tokens;
      worst = st;
    }
    max_len = max_len < 0 ? stage_len : std::min(max_len, stage_len);
    if (pp > 1) {
      budget.stages.push_back(
          Stage{i, r.end - r.begin, st.weights,
                std::max<Bytes>(0, st.available), st.activation,
                st.weights + std::max<Bytes>(0, st.available) + st.activation +
                    st.non_torch + st.graphs});
    }
  }

  VllmProfile p;
  p.requested_bytes = requested;
  p.weights_bytes = worst.weights;
  p.activation_peak_bytes = worst.activation;
  p.non_torch_bytes = worst.non_torch;
  p.cuda_graph_bytes = worst.graphs;
  p.vision = vllm_vision_profile(m, s.vllm_release, s.vllm_engine, s.dtype,
                                 s.tp, s.max_num_seqs, s.max_num_batched_tokens,
                                 s.max_model_len);
  // A pool is never negative: when the rest of the profile takes more than
  // the request, vLLM allocates no cache blocks and refuses to start (the
  // error below says why).
  const Bytes kv = std::max<Bytes>(0, worst.available);
  p.kv_cache_bytes = kv;
  p.kv_bytes_per_token = worst.per_token;
  p.kv_tokens = std::max<std::int64_t>(0, tokens);
  p.max_model_len_fit = std::max<std::int64_t>(0, max_len);

  // Max concurrency (kv_cache_utils.py
  // get_max_concurrency_for_kv_cache_config): all blocks over the blocks one
  // request of max_model_len needs.
  // Each group holds group_size layers (padded), so one request needs
  // group_size x (per-layer need of every group's spec).
  const VllmEngineChoice engine =
      vllm_engine(m, gpu, s.vllm_release, s.dtype, s.kv_dtype, s.quant);
  const VllmGraphs graphs = vllm_graphs(s);
  const VllmComm comm =
      vllm_comm(gpu, s.vllm_release, s.tp, s.pp, s.gpus, s.p2p);
  p.version = vllm_version_text(s.vllm_release);
  p.engine = std::string(vllm_engine_name(s.vllm_engine));
  p.engine_reason = engine.reason;
  p.profiler = std::string(
      vllm_profiler_name(vllm_profiler(s.vllm_release, s.vllm_engine)));
  p.p2p = s.p2p;
  p.custom_all_reduce = comm.custom_all_reduce;
  p.cudagraph_mode = std::string(vllm_graph_mode_name(graphs.mode));
  p.capture_sizes = graphs.sizes;
  p.graphs = graphs.count;
  p.graphs_in_budget = vllm_graphs_in_budget(s.vllm_release);
  p.block_size = k_block;

  const double need = vllm_needed(m, s, worst, s.max_model_len);
  const double block = dbl(worst.group_size * k_block * worst.layer_token);
  if (block > 0 && worst.blocks > 0) {
    VllmStage padded = worst;
    if (worst.local_layers > 0 && worst.full_layers > 0) {
      padded.full_layers =
          ceil_div(worst.full_layers, worst.group_size) * worst.group_size;
      padded.local_layers =
          ceil_div(worst.local_layers, worst.group_size) * worst.group_size;
    }
    const double per_request =
        std::ceil(vllm_needed(m, s, padded, s.max_model_len) / block);
    p.max_concurrency = dbl(worst.blocks) / per_request;
  }

  // Start-up checks, in vLLM's order and words. Free memory at init_device
  // is the card less this process's CUDA context, and from 0.11 less what
  // the distributed environment set up before the snapshot (gpu_worker.py
  // init_device).
  const double free =
      dbl(gpu.capacity_bytes) - k_vllm_cuda_context_gib * dbl(k_gib) -
      (vllm_snapshot_after_distributed_init(s.vllm_release, s.vllm_engine)
           ? dbl(comm.init_bytes())
           : 0.0);
  // The free-memory check exists in V1 from 0.9.1 (#18974); before, V1 and
  // V0 went on and ran out of cache blocks instead.
  const bool free_check =
      s.vllm_engine == VllmEngine::v1 && s.vllm_release >= VllmVersion{0, 9, 1};
  if (std::string removed = vllm_removed_error(m, s.vllm_release);
      !removed.empty()) {
    p.error = std::move(removed);
  } else if (std::string refused = vllm_max_model_len_error(m, s.max_model_len);
             !refused.empty()) {
    p.error = std::move(refused);
  } else if (const int need_cc = vllm_min_capability(s.quant);
             gpu.compute_capability > 0 && gpu.compute_capability < need_cc) {
    // VllmConfig._get_quantization_config: the method's get_min_capability.
    p.error = "The quantization method " + vllm_quant_method(s.quant) +
              " is not supported for the current GPU. Minimum capability: " +
              std::to_string(need_cc) + ". Current capability: " +
              std::to_string(gpu.compute_capability) + ".";
  } else if (!runs_bf16(gpu) && s.dtype == Dtype::bf16) {
    // platforms/cuda.py check_if_supports_dtype, at worker start-up.
    p.error =
        "Bfloat16 is only supported on GPUs with compute capability of at "
        "least 8.0. Your " +
        gpu.full_name + " GPU has compute capability " +
        std::to_string(gpu.compute_capability / 10) + "." +
        std::to_string(gpu.compute_capability % 10) +
        ". You can use float16 instead by explicitly setting the `dtype` "
        "flag in CLI, for example: --dtype=half.";
  } else if (dbl(worst.weights) > free) {
    // The load itself runs out of memory before any profiling.
    p.error =
        "torch.OutOfMemoryError: CUDA out of memory while loading the "
        "model weights (" +
        gib_text(dbl(worst.weights)) + " GiB per GPU, " + gib_text(free) +
        " GiB free)";
  } else if (free_check && dbl(requested) > free) {
    p.error = "Free memory on device (" + gib_text(free) + "/" +
              gib_text(dbl(gpu.capacity_bytes)) +
              " GiB) on startup is less than desired GPU memory utilization (" +
              fixed2(s.gpu_util) + ", " + gib_text(dbl(requested)) +
              " GiB). Decrease GPU memory utilization or reduce GPU memory "
              "used by other processes.";
  } else if (worst.available <= 0 || p.kv_tokens == 0) {
    p.error =
        "No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.";
  } else if (need > dbl(worst.available)) {
    if (s.vllm_engine == VllmEngine::v0) {
      p.error = "The model's max seq len (" + std::to_string(s.max_model_len) +
                ") is larger than the maximum number of tokens that can be "
                "stored in KV cache (" +
                std::to_string(p.kv_tokens) +
                "). Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.";
    } else {
      p.error =
          "To serve at least one request with the models's max seq len (" +
          std::to_string(s.max_model_len) + "), (" + gib_text(need) +
          " GiB KV cache is needed, which is larger than the available "
          "KV cache memory (" +
          gib_text(dbl(worst.available)) +
          " GiB). Based on the available memory, the estimated maximum "
          "model length is " +
          std::to_string(p.max_model_len_fit) +
          ". Try increasing `gpu_memory_utilization` or decreasing "
          "`max_model_len` when initializing the engine.";
    }
  }

  budget.add(
      "weights", worst.weights,
      "weights as loaded per GPU (/tp, vocab padded to a multiple of 64) + "
      "RoPE cos/sin cache (max_position x rotary_dim x dtype)");
  budget.add("kv_cache", kv,
             p.graphs_in_budget
                 ? "gpu_util x capacity - weights - activation peak - "
                   "non-torch - CUDA graphs (vLLM determine_available_memory)"
                 : "gpu_util x capacity - weights - activation peak - "
                   "non-torch (vLLM determine_available_memory)");
  // Component formulas are string literals (Component::formula is a view).
  const bool vision = vision_tokens_per_image(m) > 0;
  budget.add(
      "activations", worst.activation,
      vision ? "profile run: max(vision tower over the dummy images (V0 "
               "max_num_batched_tokens // image tokens, V1 the encoder "
               "budget) + fp32 pixels, pixels + V1 encoder cache + max(text "
               "forward, hidden + sampler))"
             : "profile run: max(forward over max_num_batched_tokens, hidden "
               "+ sampler over max_num_seqs x vocab x (dtype + 13 B))");
  budget.add("overhead", worst.non_torch,
             "non-torch memory after the profiler's baseline: modules and "
             "handles, custom all-reduce and NCCL buffers (with P2P), the "
             "CUDA context where the release counts it");
  budget.add("cuda_graphs", worst.graphs,
             p.graphs_in_budget
                 ? "CUDA-graph pool, profiled inside gpu_util (0 with "
                   "--enforce-eager)"
                 : "CUDA-graph pool captured after the KV cache (0 with "
                   "--enforce-eager)");
  budget.peak.allocated_bytes = worst.weights + kv + worst.activation;
  budget.peak.reserved_bytes = budget.peak.allocated_bytes;
  budget.peak.device_bytes = budget.total_bytes();
  budget.peak.phase = Phase::prefill;
  budget.vllm = std::move(p);
}

}  // namespace

void add_inference(const Model& model, const Gpu& gpu, const Resolved& setup,
                   Budget& budget) {
  const Model& m = model;
  const Resolved& s = setup;
  if (s.engine == Engine::vllm) {
    add_vllm(m, gpu, s, budget);
  } else {
    add_hf(m, gpu, s, budget);
  }

  if (m.kv_lora_rank == 0 && m.num_kv_heads > 0 && m.num_kv_heads < s.tp) {
    budget.warnings |= static_cast<unsigned>(Warning::kv_replicated);
  }
  if (s.engine == Engine::hf && s.attn == Attn::eager) {
    budget.warnings |= static_cast<unsigned>(Warning::eager_attention_s2);
  }
  const std::int64_t len = s.engine == Engine::vllm ? s.max_model_len : s.seq;
  if (m.max_position_embeddings > 0 && len > m.max_position_embeddings) {
    budget.warnings |= static_cast<unsigned>(Warning::seq_beyond_context);
  }
  if ((s.tp > 1 || s.pp > 1) && gpu.nvlink_gb_s <= 0) {
    budget.warnings |= static_cast<unsigned>(Warning::no_nvlink);
  }
  const bool fp8 = s.quant == Quant::fp8 || s.kv_dtype == Dtype::fp8;
  if (fp8 && below(gpu, k_cc_fp8_tensor_cores)) {
    budget.warnings |= static_cast<unsigned>(Warning::fp8_emulated);
  }
  if (s.engine == Engine::hf && s.attn == Attn::flash &&
      !runs_flash_attention(gpu)) {
    budget.warnings |= static_cast<unsigned>(Warning::flash_unsupported);
  }
}

}  // namespace oomplan
