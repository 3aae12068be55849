// Inference budgets, composed from the terms: engine hf (transformers
// generate, PyTorch eager, peak at the prefill) and engine vllm (vLLM's
// start-up memory profile), and the conditions the report explains.

#include "memory/internal.hpp"

#include "oomplan/model/capability.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace oomplan::memory_terms {
namespace {

// ---------------------------------------------------------------------------
// engine hf

struct HfStage {
  Bytes weights = 0;
  Bytes kv = 0;
  Bytes activations = 0;
  Bytes logits = 0;
  Bytes buffers = 0;  // GPTQ kernel scratch, allocated at load
  Phase phase = Phase::prefill;
  Bytes allocated() const {
    return weights + kv + activations + logits + buffers;
  }
};

HfStage hf_stage(const Model& m, const Resolved& s, const Range& r) {
  HfStage st;
  st.weights = weight_bytes(m, s, share_of(r));
  if (m.num_decoder_layers > 0) {
    // Encoder-decoder (T5): each decoder layer caches self-attention K/V and
    // cross-attention K/V over the encoder output (taken as seq tokens).
    st.kv = r.last ? kv_cache_bytes(m, s, 0, 2 * m.num_decoder_layers, s.batch,
                                    s.seq)
                   : 0;
  } else if (s.awq_fused_len > 0) {
    st.kv = awq_fused_cache_bytes(m, s, r.begin, r.end);
  } else {
    st.kv = kv_cache_bytes(m, s, r.begin, r.end, s.batch, s.seq);
  }
  st.activations = r.end > r.begin ? hf_prefill_activations(m, s) : 0;
  st.buffers = r.end > r.begin ? gptq_kernel_scratch(m, s) : 0;
  st.logits = r.last ? hf_logits(m, s) : 0;
  // AutoAWQ's fused layers keep their own cache and hand generate a dummy
  // one (attn.py past_key_value), so no tuple copies build up.
  if (hf_tuple_cache(s) && s.awq_fused_len == 0) {
    // A decode step holds the old and the new cache (and, at step 2, the
    // prefill's logits); its activations over one token are negligible.
    HfStage decode = st;
    decode.kv = 2 * st.kv;
    decode.activations =
        saturated_bytes(int4_dequant_transient(m, s, as_double(s.batch)));
    decode.logits = r.last ? hf_decode_logits(m, s) : 0;
    decode.phase = Phase::decode;
    if (decode.allocated() > st.allocated()) {
      return decode;
    }
  }
  return st;
}

// The most loaded GPU's stage; every stage is listed when the model is split
// (pp > 1 or --split layers).
HfStage hf_worst_stage(const Model& m, const Resolved& s, Bytes overhead,
                       Budget& budget) {
  if (s.pp <= 1 && !s.split_layers) {
    return hf_stage(m, s, Range{0, m.num_layers, true, true});
  }
  const double reserve = inference_reserve(s);
  const std::vector<Range> ranges = hf_ranges(m, s);
  HfStage worst;
  Bytes worst_total = -1;
  budget.stages.reserve(ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const HfStage st = hf_stage(m, s, ranges[i]);
    const Bytes alloc = st.allocated();
    const Bytes total =
        alloc + allocator_reserve_bytes(reserve, alloc) + overhead;
    budget.stages.push_back(
        Stage{static_cast<int>(i), ranges[i].end - ranges[i].begin, st.weights,
              st.kv, st.activations + st.logits + st.buffers, total});
    if (total > worst_total) {
      worst_total = total;
      worst = st;
    }
  }
  return worst;
}

void add_hf(const Model& m, const Gpu& gpu, const Resolved& s, Budget& budget) {
  const Bytes overhead = runtime_overhead_bytes(gpu, s);
  const HfStage worst = hf_worst_stage(m, s, overhead, budget);
  const Bytes allocated = worst.allocated();
  const Bytes fragmentation =
      allocator_reserve_bytes(inference_reserve(s), allocated);
  budget.add("weights", worst.weights,
             "params per GPU (heads and MLP columns / tp, KV heads "
             "max(1, kv/tp), norms replicated) x bytes of dtype/quant");
  const bool decode = worst.phase == Phase::decode;
  const bool fused = s.awq_fused_len > 0;
  budget.add("kv_cache", worst.kv,
             fused    ? "AutoAWQ fused layers, allocated at load: batch x "
                        "--awq-fused-len x 2 (K,V) x layers x kv_heads x "
                        "head_dim x 2 (fp16) + complex64 RoPE tables"
             : decode ? "2 x (batch x seq x 2 (K,V) x layers x kv_heads/tp x "
                        "head_dim x kv bytes): a decode step's old and new "
                        "tuple caches (transformers < 4.42)"
                      : "batch x seq x 2 (K,V) x layers x kv_heads/tp x "
                        "head_dim x kv bytes (MLA: latent; sliding layers "
                        "capped at the window)");
  budget.add("activations", worst.activations,
             decode  ? "decode step over one token (negligible)"
             : fused ? "prefill: 3 hidden buffers + max(AutoAWQ fused "
                       "attention: q,k,v, K/V repeated to every head, b x "
                       "heads x s^2 scores (fp16 + fp32 copy + fp32 "
                       "softmax), MLP 3 x b x s x I/tp)"
             : s.attn == Attn::eager
                 ? "prefill: 3 hidden buffers + max(attention incl. b x "
                   "heads x s^2 scores (2 x dtype + fp32 softmax), MLP "
                   "3 x b x s x I/tp)"
                 : "prefill: 3 hidden buffers + max(q,k,v,o projections "
                   "(linear in s), MLP 3 x b x s x I/tp) x dtype");
  if (worst.buffers > 0) {
    budget.add("buffers", worst.buffers,
               s.gptq_kernel == GptqKernel::exllama
                   ? "AutoGPTQ exllama temp_dq at load: fp16 in x out of the "
                     "largest quantized linear, one per GPU"
                   : "AutoGPTQ exllamav2 scratch at load: largest linear's "
                     "in x out x 2 + out x 2048 x 8 x 4 (max_input_len x "
                     "max_batch_size fp32 rows), one per GPU");
  }
  budget.add("logits", worst.logits,
             decode ? "the prefill's fp32 logits, batch x seq x vocab x 4, "
                      "kept through decode step 2 (transformers < 4.42)"
             : hf_full_prefill_logits(s)
                 ? "every prompt position (transformers < 4.45): batch x "
                   "seq x vocab x (dtype + fp32 upcast)"
                 : "last position only (logits_to_keep=1): batch x vocab x "
                   "(dtype + fp32 copy)");
  budget.add("overhead", overhead,
             "CUDA context 400 MiB + cuBLAS workspace (+ NCCL when GPUs "
             "talk)");
  budget.add("fragmentation", fragmentation,
             "caching-allocator reserve x allocated tensors");
  budget.peak.allocated_bytes = allocated;
  budget.peak.reserved_bytes = allocated + fragmentation;
  budget.peak.device_bytes = allocated + fragmentation + overhead;
  budget.peak.phase = worst.phase;
}

// ---------------------------------------------------------------------------
// engine vllm

// What the plan assumed about vLLM (vllm.hpp), for the report.
void describe_vllm(const Model& m, const Gpu& gpu, const Resolved& s,
                   VllmProfile& p) {
  const VllmEngineChoice engine =
      vllm_engine(m, gpu, s.vllm_release, s.dtype, s.kv_dtype, s.quant);
  const VllmGraphs graphs = vllm_graphs(s);
  const VllmComm comm =
      vllm_comm(gpu, s.vllm_release, s.tp, s.pp, s.gpus, s.p2p);
  p.version = release_text(s.vllm_release);
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
  p.block_size = k_vllm_block;
}

void add_vllm_components(Budget& budget, const Model& m, const VllmStage& worst,
                         const VllmProfile& p) {
  budget.add(
      "weights", worst.weights,
      "weights as loaded per GPU (/tp, vocab padded to a multiple of 64) + "
      "RoPE cos/sin cache (max_position x rotary_dim x dtype)");
  budget.add("kv_cache", p.kv_cache_bytes,
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
}

void add_vllm(const Model& m, const Gpu& gpu, const Resolved& s,
              Budget& budget) {
  const Bytes requested = vllm_requested_bytes(gpu, s);
  const VllmWorker w =
      vllm_limiting_worker(m, gpu, s, requested, budget.stages);
  const VllmStage& worst = w.stage;
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
  // error says why).
  p.kv_cache_bytes = std::max<Bytes>(0, worst.available);
  p.kv_bytes_per_token = worst.per_token;
  p.kv_tokens = std::max<std::int64_t>(0, w.tokens);
  p.max_model_len_fit = std::max<std::int64_t>(0, w.max_len);
  describe_vllm(m, gpu, s, p);
  p.max_concurrency = vllm_max_concurrency(m, s, worst);
  p.error =
      vllm_startup_error(m, gpu, s, worst, p.kv_tokens, p.max_model_len_fit);
  add_vllm_components(budget, m, worst, p);
  budget.peak.allocated_bytes =
      worst.weights + p.kv_cache_bytes + worst.activation;
  budget.peak.reserved_bytes = budget.peak.allocated_bytes;
  budget.peak.device_bytes = budget.total_bytes();
  budget.peak.phase = Phase::prefill;
  budget.vllm = std::move(p);
}

// Conditions the report explains in words.
unsigned inference_warnings(const Model& m, const Gpu& gpu, const Resolved& s) {
  unsigned warnings = 0;
  auto warn = [&](Warning w) { warnings |= static_cast<unsigned>(w); };
  if (m.kv_lora_rank == 0 && m.num_kv_heads > 0 && m.num_kv_heads < s.tp) {
    warn(Warning::kv_replicated);
  }
  if (s.engine == Engine::hf &&
      (s.attn == Attn::eager || s.awq_fused_len > 0)) {
    warn(Warning::eager_attention_s2);
  }
  if (s.awq_fused_len > 0 && s.seq > s.awq_fused_len) {
    warn(Warning::awq_cache_rolls);
  }
  const std::int64_t len = s.engine == Engine::vllm ? s.max_model_len : s.seq;
  if (m.max_position_embeddings > 0 && len > m.max_position_embeddings) {
    warn(Warning::seq_beyond_context);
  }
  if ((s.tp > 1 || s.pp > 1) && gpu.nvlink_gb_s <= 0) {
    warn(Warning::no_nvlink);
  }
  const bool fp8 = s.quant == Quant::fp8 || s.kv_dtype == Dtype::fp8;
  if (fp8 && below(gpu, k_cc_fp8_tensor_cores)) {
    warn(Warning::fp8_emulated);
  }
  if (s.engine == Engine::hf && s.attn == Attn::flash &&
      !runs_flash_attention(gpu)) {
    warn(Warning::flash_unsupported);
  }
  return warnings;
}

}  // namespace

void add_inference(const Model& model, const Gpu& gpu, const Resolved& setup,
                   Budget& budget) {
  if (setup.engine == Engine::vllm) {
    add_vllm(model, gpu, setup, budget);
  } else {
    add_hf(model, gpu, setup, budget);
  }
  budget.warnings |= inference_warnings(model, gpu, setup);
}

}  // namespace oomplan::memory_terms
