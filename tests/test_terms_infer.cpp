// The inference memory terms one by one (src/memory/hf_activations.cpp,
// vllm_profile.cpp, vllm_checks.cpp, vllm_vision.cpp), each against a hand
// calculation in its comment.

#include "memory/internal.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace {

using namespace oomplan;
using namespace oomplan::memory_terms;
using test::llama2_7b;

// Llama-2-7B prefill: one sequence of 4,096 tokens in bf16.
Resolved hf_setup() {
  Resolved s;
  s.seq = 4096;
  return s;
}

// vLLM 0.19 (V1) with 8,192 batched tokens and 256 sequences, half of the
// card requested.
Resolved vllm_setup() {
  Resolved s;
  s.engine = Engine::vllm;
  s.max_num_batched_tokens = 8192;
  s.max_num_seqs = 256;
  s.max_model_len = 4096;
  s.gpu_util = 0.5;
  return s;
}

// An 80 GiB Hopper card: 85,899,345,920 B.
Gpu h100() {
  Gpu g;
  g.full_name = "NVIDIA H100 80GB HBM3";
  g.compute_capability = 90;
  g.capacity_bytes = 80 * k_gib;
  g.nvlink_gb_s = 900;
  return g;
}

// A Qwen2-VL style vision tower: 448-pixel images of 14-pixel patches (32 x
// 32 = 1,024 patches), 2 x 2 merged into 256 tokens, 2 frames per patch,
// videos too.
Model vision_model() {
  Model m = llama2_7b();
  m.vision_layers = 32;
  m.vision_image_size = 448;
  m.vision_patch_size = 14;
  m.vision_merge_size = 2;
  m.vision_temporal_patch_size = 2;
  m.vision_hidden_size = 1280;
  m.vision_intermediate_size = 3420;
  m.vision_gated_mlp = true;
  m.vision_video = true;
  return m;
}

}  // namespace

// --- hf_activations.cpp

TEST_CASE("terms: hf_hidden_buffers holds three hidden states", "[terms]") {
  // 3 x 4,096 tokens x 4,096 x 2 B = 100,663,296 B.
  CHECK(hf_hidden_buffers(llama2_7b(), hf_setup()) == 100663296.0);
}

TEST_CASE("terms: hf_attention_transient adds eager's s^2 scores", "[terms]") {
  Resolved s = hf_setup();
  // flash: 4,096 tokens x (2 x 32 + 2 x 32 heads) x 128 x 2 B = 134,217,728.
  CHECK(hf_attention_transient(llama2_7b(), s) == 134217728.0);
  // eager: + expanded K/V 2 x 4,096 x 32 x 128 x 2 B = 67,108,864 + scores
  // 32 x 4,096^2 x (2 x 2 + 4) B = 4,294,967,296 + the mask 4,096^2 x 2 B =
  // 33,554,432: 4,529,848,320 B.
  s.attn = Attn::eager;
  CHECK(hf_attention_transient(llama2_7b(), s) == 4529848320.0);
}

TEST_CASE("terms: hf_mlp_transient takes the MLP or an MoE block", "[terms]") {
  // SwiGLU: 3 x 4,096 tokens x 11,008 x 2 B = 270,532,608 B.
  CHECK(hf_mlp_transient(llama2_7b(), hf_setup()) == 270532608.0);
  // MoE, 8 experts of 1,024 (dense I 1,024 too): fp32 router 4,096 x 8 x 4
  // = 131,072 + output 4,096 x 4,096 x 2 = 33,554,432 + one expert 3 x 4,096
  // x 1,024 x 2 = 25,165,824: 58,851,328 B beats the dense 25,165,824.
  Model moe = llama2_7b();
  moe.intermediate_size = 1024;
  moe.num_experts = 8;
  moe.experts_per_tok = 2;
  moe.moe_intermediate_size = 1024;
  CHECK(hf_mlp_transient(moe, hf_setup()) == 58851328.0);
}

TEST_CASE("terms: nf4_dequant_transient is one MLP matrix in dtype",
          "[terms]") {
  Resolved s = hf_setup();
  CHECK(nf4_dequant_transient(llama2_7b(), s) == 0.0);
  // 4,096 x 11,008 x 2 B = 90,177,536 B.
  s.quant = Quant::nf4;
  CHECK(nf4_dequant_transient(llama2_7b(), s) == 90177536.0);
}

TEST_CASE("terms: hf_prefill_activations of Llama-2-7B at 4k", "[terms]") {
  // 100,663,296 hidden + max(134,217,728 attention, 270,532,608 MLP) =
  // 371,195,904 B.
  CHECK(hf_prefill_activations(llama2_7b(), hf_setup()) == 371195904);
}

TEST_CASE("terms: hf_logits keeps the last position in dtype and fp32",
          "[terms]") {
  Resolved s = hf_setup();
  s.batch = 4;
  // 4 sequences x 32,000 x (2 + 4) B = 768,000 B.
  CHECK(hf_logits(llama2_7b(), s) == 768000);
  // transformers 4.45 (num_logits_to_keep=1, still .float()): the same.
  s.transformers_release = Release{4, 45, 0};
  CHECK(hf_logits(llama2_7b(), s) == 768000);
  // 4.44: every position, bf16 and its fp32 upcast: 4 x 4,096 x 32,000 x
  // (2 + 4) = 3,145,728,000 B; an fp32 model's .float() copies nothing:
  // x 4 B = 2,097,152,000 B.
  s.transformers_release = Release{4, 44, 2};
  CHECK(hf_logits(llama2_7b(), s) == 3145728000);
  s.dtype = Dtype::fp32;
  CHECK(hf_logits(llama2_7b(), s) == 2097152000);
}

TEST_CASE(
    "terms: transformers before 4.42 decodes with two KV caches and the "
    "prefill's logits",
    "[terms]") {
  Resolved s = hf_setup();
  s.batch = 8;
  CHECK_FALSE(hf_tuple_cache(s));
  s.transformers_release = Release{4, 42, 0};
  CHECK_FALSE(hf_tuple_cache(s));
  s.transformers_release = Release{4, 41, 3};
  CHECK(hf_tuple_cache(s));
  // Step 2 holds the prefill's fp32 logits: 8 x 4,096 x 32,000 x 4 B =
  // 4,194,304,000 B.
  CHECK(hf_decode_logits(llama2_7b(), s) == 4194304000);
}

TEST_CASE(
    "terms: AutoAWQ fused layers preallocate their cache and run fp32-softmax "
    "attention",
    "[terms]") {
  Resolved s = hf_setup();
  s.batch = 8;
  s.quant = Quant::awq;
  s.awq_fused_len = 2048;
  // Per layer: K and V 2 x 8 x 2,048 x 32 heads x 128 x 2 B = 268,435,456
  // B, RoPE table 2 x 2,048 x 64 x 8 B = 2,097,152 B; x 32 layers =
  // 8,657,043,456 B, whatever --seq.
  CHECK(awq_fused_cache_bytes(llama2_7b(), s, 0, 32) == 8657043456);
  s.seq = 16;
  CHECK(awq_fused_cache_bytes(llama2_7b(), s, 0, 32) == 8657043456);
  // Half the layers (a device_map split): half the bytes.
  CHECK(awq_fused_cache_bytes(llama2_7b(), s, 0, 16) == 4328521728);
  // Prefill over 2,048 tokens, --attn flash ignored: q,k,v,o 16,384 tokens x
  // (64 + 64) x 128 x 2 B = 536,870,912; K/V repeated 2 x 16,384 x 32 x 128
  // x 2 = 268,435,456; scores 8 x 32 x 2,048^2 x (2 + 8) B =
  // 10,737,418,240; mask 2,048^2 x 2 = 8,388,608: 11,551,113,216 B.
  s.seq = 2048;
  s.attn = Attn::flash;
  CHECK(hf_attention_transient(llama2_7b(), s) == 11551113216.0);
}

TEST_CASE(
    "terms: GPTQ kernels' scratch at load and dequantized layers per call",
    "[terms]") {
  // Llama-2-7B's largest GPTQ linears are gate/up (4,096 in, 11,008 out).
  Resolved s = hf_setup();
  s.quant = Quant::gptq;
  s.gptq_kernel = GptqKernel::exllama;
  // AutoGPTQ exllama temp_dq: 2 x 4,096 x 11,008 = 90,177,536 B.
  CHECK(gptq_kernel_scratch(llama2_7b(), s) == 90177536);
  // exllamav2 scratch_space_fixed(2048, 8): 90,177,536 + 128 + 11,008 x
  // 2,048 x 8 x 4 (721,420,288) + 128 = 811,598,080 B.
  s.gptq_kernel = GptqKernel::exllamav2;
  CHECK(gptq_kernel_scratch(llama2_7b(), s) == 811598080);
  for (const GptqKernel k :
       {GptqKernel::marlin, GptqKernel::cuda_old, GptqKernel::torch,
        GptqKernel::triton, GptqKernel::none}) {
    s.gptq_kernel = k;
    CHECK(gptq_kernel_scratch(llama2_7b(), s) == 0);
  }
  // cuda-old unpacks a layer to int32 from 128 rows: 4 x 4,096 x 11,008 =
  // 180,355,072 B; below, its vecquant kernel runs on the packed weight.
  s.gptq_kernel = GptqKernel::cuda_old;
  CHECK(int4_dequant_transient(llama2_7b(), s, 128) == 180355072.0);
  CHECK(int4_dequant_transient(llama2_7b(), s, 127) == 0.0);
  // GPTQModel's torch kernel on every call, a decode step's one row too.
  s.gptq_kernel = GptqKernel::torch;
  CHECK(int4_dequant_transient(llama2_7b(), s, 1) == 180355072.0);
  s.gptq_kernel = GptqKernel::marlin;
  CHECK(int4_dequant_transient(llama2_7b(), s, 4096) == 0.0);
  // The prefill at 4k adds it to the 371,195,904 B of activations.
  s.gptq_kernel = GptqKernel::cuda_old;
  CHECK(hf_prefill_activations(llama2_7b(), s) == 371195904 + 180355072);
  // AutoAWQ's GEMM layers dequantize to fp16 from 1,024 rows (batch x
  // tokens): 2 x 4,096 x 11,008 = 90,177,536 B, in its fused layers too;
  // transformers v5 loads unfused AWQ with GPTQModel instead.
  s.gptq_kernel = GptqKernel::none;
  s.quant = Quant::awq;
  CHECK(int4_dequant_transient(llama2_7b(), s, 1024) == 0.0);
  s.awq_fused_len = 2048;
  CHECK(int4_dequant_transient(llama2_7b(), s, 1024) == 90177536.0);
  s.awq_fused_len = 0;
  s.transformers_release = Release{4, 57, 0};
  CHECK(int4_dequant_transient(llama2_7b(), s, 1024) == 90177536.0);
  CHECK(int4_dequant_transient(llama2_7b(), s, 1023) == 0.0);
}

// --- vllm_profile.cpp

TEST_CASE("terms: vllm_requested_bytes is gpu_util x capacity", "[terms]") {
  // 0.5 x 85,899,345,920 B = 42,949,672,960 B.
  CHECK(vllm_requested_bytes(h100(), vllm_setup()) == 42949672960);
}

TEST_CASE("terms: vllm_dense_forward is the larger of MLP and q, k, v",
          "[terms]") {
  // MLP: 3 x 8,192 x 11,008 x 2 B = 541,065,216; q, k, v: 8,192 x (64 + 64)
  // x 128 x 2 B = 268,435,456.
  CHECK(vllm_dense_forward(llama2_7b(), vllm_setup()) == 541065216.0);
  // Every layer MoE: no dense MLP, q, k, v remain.
  Model moe = llama2_7b();
  moe.num_experts = 8;
  CHECK(vllm_dense_forward(moe, vllm_setup()) == 268435456.0);
}

TEST_CASE("terms: vllm_moe_activation is fused_moe's workspace", "[terms]") {
  Model m = llama2_7b();
  m.num_experts = 8;
  m.experts_per_tok = 2;
  m.moe_intermediate_size = 1024;
  // 8,192 tokens x top-2 x (2,048 + 1,024 + 4,096) x 2 B = 234,881,024 B,
  // kept past the forward.
  const VllmMoeActivation fused = vllm_moe_activation(m, h100(), vllm_setup());
  CHECK(fused.workspace == 234881024.0);
  CHECK(fused.forward == 234881024.0);
  // gpt-oss MXFP4 on Hopper (Triton): 8,192 x top-4 x 2,880 x 2 B +
  // 8,192 x 2,880 x 2 B = 188,743,680 + 47,185,920 = 235,929,600 B, nothing
  // kept.
  m.hidden_size = 2880;
  m.moe_intermediate_size = 2880;
  m.experts_per_tok = 4;
  Resolved s = vllm_setup();
  s.quant = Quant::mxfp4;
  const VllmMoeActivation triton = vllm_moe_activation(m, h100(), s);
  CHECK(triton.forward == 235929600.0);
  CHECK(triton.workspace == 0.0);
  // Ampere (Marlin): 8,192 x 4 x (max(2 x 2,944, 3,072) + 2,944) x 2 B =
  // 578,813,952 B.
  Gpu a100 = h100();
  a100.compute_capability = 80;
  CHECK(vllm_moe_activation(m, a100, s).forward == 578813952.0);
}

TEST_CASE("terms: vllm_text_sampler is hidden states and sampler temporaries",
          "[terms]") {
  Resolved s = vllm_setup();
  // V1: 8,192 x 4,096 x 2 B = 67,108,864 + 256 rows x 32,000 x (2 + 13) B =
  // 122,880,000: 189,988,864 B.
  CHECK(vllm_text_sampler(llama2_7b(), s, 0) == 189988864.0);
  // V0: 256 x 32,000 x (2 + 37) B = 319,488,000: 386,596,864 B.
  s.vllm_engine = VllmEngine::v0;
  CHECK(vllm_text_sampler(llama2_7b(), s, 0) == 386596864.0);
}

TEST_CASE("terms: vllm_activation takes the forward or the sampler's peak",
          "[terms]") {
  Resolved s = vllm_setup();
  s.max_num_seqs = 4096;
  // Forward: 5 x 8,192 x 4,096 x 2 B = 335,544,320 + 541,065,216 =
  // 876,609,536 B; the sampler over 4,096 rows: 67,108,864 + 4,096 x 32,000
  // x 15 B = 2,033,188,864 B, on the last stage only.
  CHECK(vllm_activation(llama2_7b(), h100(), s, Range{0, 32, true, true}) ==
        2033188864);
  CHECK(vllm_activation(llama2_7b(), h100(), s, Range{0, 16, true, false}) ==
        876609536);
}

TEST_CASE("terms: vllm_non_torch by profiler", "[terms]") {
  // 0.19 V1 at TP1: 0.25 GiB = 268,435,456 B.
  CHECK(vllm_non_torch(h100(), vllm_setup()) == 268435456);
  // 0.6.5 V0 counted the allocator's free blocks: 1.79 GiB =
  // 1,921,997,864.96 -> 1,921,997,865 B.
  Resolved s = vllm_setup();
  s.vllm_release = vllm_release(0, 6, 5);
  s.vllm_engine = VllmEngine::v0;
  CHECK(vllm_non_torch(h100(), s) == 1921997865);
}

TEST_CASE("terms: vllm_graphs captures 51 sizes, twice up to max_num_seqs",
          "[terms]") {
  // 0.19: [1, 2, 4], 8..256 by 8 (32 sizes), 272..512 by 16 (16 sizes) = 51;
  // FULL_AND_PIECEWISE adds a full graph for the 35 sizes <= 256: 86.
  const VllmGraphs g = vllm_graphs(vllm_setup());
  CHECK(g.mode == VllmGraphMode::full_and_piecewise);
  CHECK(g.sizes.size() == 51);
  CHECK(g.count == 86);
  Resolved eager = vllm_setup();
  eager.enforce_eager = true;
  CHECK(vllm_graphs(eager).count == 0);
}

TEST_CASE("terms: vllm_cuda_graphs grows per layer and graph", "[terms]") {
  Resolved s = vllm_setup();
  s.max_num_seqs = 1024;  // 102 graphs, the logs' setting
  // 0.33 + 32 layers x 0.018 GiB = 0.906 GiB = 972,810,092.54 ->
  // 972,810,093 B.
  CHECK(vllm_cuda_graphs(llama2_7b(), s, Range{0, 32, true, true},
                         vllm_graphs(s)) == 972810093);
  s.enforce_eager = true;
  CHECK(vllm_cuda_graphs(llama2_7b(), s, Range{0, 32, true, true},
                         vllm_graphs(s)) == 0);
}

TEST_CASE("terms: vllm_kv_groups groups layers by the smaller type",
          "[terms]") {
  // One attention type: one group of all 32 layers.
  CHECK(vllm_kv_groups(32, 0).size == 32);
  CHECK(vllm_kv_groups(32, 0).count == 1);
  // Gemma 3 style, 5 full and 25 sliding: groups of 5, 1 + 5 = 6 groups.
  CHECK(vllm_kv_groups(5, 25).size == 5);
  CHECK(vllm_kv_groups(5, 25).count == 6);
  // 8 and 10 (within 1.5x): groups of 10, 1 + 1 = 2.
  CHECK(vllm_kv_groups(8, 10).size == 10);
  CHECK(vllm_kv_groups(8, 10).count == 2);
}

TEST_CASE("terms: vllm_stage leaves the rest of the request to the KV pool",
          "[terms]") {
  // 42,949,672,960 requested - 13,477,879,808 weights (with the RoPE cache)
  // - 876,609,536 activation peak - 268,435,456 non-torch = 28,326,748,160 B;
  // blocks of 32 layers x 16 tokens x 16,384 B = 8,388,608 B: 3,376 blocks.
  const VllmStage st =
      vllm_stage(llama2_7b(), h100(), vllm_setup(), Range{0, 32, true, true},
                 vllm_requested_bytes(h100(), vllm_setup()));
  CHECK(st.weights == 13477879808);
  CHECK(st.available == 28326748160);
  CHECK(st.layer_token == 16384);  // 2 x 32 heads x 128 x 2 B
  CHECK(st.per_token == 524288);   // x 32 layers
  CHECK(st.full_layers == 32);
  CHECK(st.group_size == 32);
  CHECK(st.blocks == 3376);
}

TEST_CASE("terms: vllm_needed counts whole blocks, sliding ones capped",
          "[terms]") {
  VllmStage st;
  st.full_layers = 32;
  st.layer_token = 16384;
  // 32 layers x 4,096 / 16 blocks x (16 x 16,384 B) = 2,147,483,648 B.
  CHECK(vllm_needed(llama2_7b(), vllm_setup(), st, 4096) == 2147483648.0);
  // 1 full and 5 sliding layers (window 4,096), 1,000 B per token, 32,768
  // tokens: 1 x 2,048 x 16,000 = 32,768,000 + 5 x (ceil(min(4,095 + 8,192,
  // 32,768) / 16) + 1 = 769) x 16,000 = 61,520,000: 94,288,000 B.
  Model m = llama2_7b();
  m.sliding_window = 4096;
  st.full_layers = 1;
  st.local_layers = 5;
  st.layer_token = 1000;
  CHECK(vllm_needed(m, vllm_setup(), st, 32768) == 94288000.0);
}

TEST_CASE("terms: vllm_max_len is the longest request the pool holds",
          "[terms]") {
  Model m = llama2_7b();
  m.max_position_embeddings = 8192;
  VllmStage st;
  st.full_layers = 32;
  st.layer_token = 16384;
  // 2,147,483,648 B hold 256 blocks per layer: 256 x 16 = 4,096 tokens.
  st.available = 2147483648;
  CHECK(vllm_max_len(m, vllm_setup(), st) == 4096);
  st.available = 0;
  CHECK(vllm_max_len(m, vllm_setup(), st) == 0);
}

TEST_CASE("terms: vllm_max_concurrency is blocks over one request's",
          "[terms]") {
  VllmStage st;
  st.full_layers = 32;
  st.group_size = 32;
  st.layer_token = 16384;
  st.blocks = 3376;
  // One 4,096-token request: 2,147,483,648 / 8,388,608 = 256 blocks;
  // 3,376 / 256 = 13.1875.
  CHECK(vllm_max_concurrency(llama2_7b(), vllm_setup(), st) == 13.1875);
}

TEST_CASE("terms: vllm_limiting_worker lists each pipeline stage", "[terms]") {
  // pp 2: each worker holds 16 layers (6,476,005,376 B) + half the norms
  // (266,240 B) + the embedding or the lm_head (262,144,000 B) + the RoPE
  // cache (1,048,576 B) = 6,739,464,192 B; 876,609,536 B activation peak;
  // 0.07 GiB = 75,161,928 B non-torch (no sampler on the first stage, no
  // P2P). 42,949,672,960 - those = 35,258,437,304 B, in blocks of 16 x 16 x
  // 16,384 = 4,194,304 B: 8,406 blocks x 16 = 134,496 tokens.
  Resolved s = vllm_setup();
  s.pp = 2;
  s.gpus = 2;
  std::vector<Stage> stages;
  const VllmWorker w = vllm_limiting_worker(
      llama2_7b(), h100(), s, vllm_requested_bytes(h100(), s), stages);
  CHECK(w.tokens == 134496);
  CHECK(w.max_len == 4096);  // the model's context fits
  REQUIRE(stages.size() == 2);
  CHECK(stages[0].layers == 16);
  CHECK(stages[0].weights_bytes == 6739464192);
  CHECK(stages[1].kv_cache_bytes == 35258437304);
}

// --- vllm_checks.cpp

TEST_CASE("terms: vllm_min_capability and vllm_quant_method", "[terms]") {
  CHECK(vllm_min_capability(Quant::fp8) == 80);
  CHECK(vllm_min_capability(Quant::mxfp4) == 80);
  CHECK(vllm_min_capability(Quant::awq) == 75);
  CHECK(vllm_min_capability(Quant::gptq) == 60);
  CHECK(vllm_min_capability(Quant::nf4) == 70);
  CHECK(vllm_min_capability(Quant::none) == 0);
  CHECK(vllm_quant_method(Quant::nf4) == "bitsandbytes");
  CHECK(vllm_quant_method(Quant::awq) == "awq");
}

TEST_CASE("terms: vllm_free_at_start is the card less the CUDA context",
          "[terms]") {
  // 85,899,345,920 - 0.51 x 2^30 (547,608,330.24) = 85,351,737,589.76 B.
  CHECK(static_cast<Bytes>(vllm_free_at_start(h100(), vllm_setup())) ==
        85351737589);
}

TEST_CASE("terms: vllm_config_error in vLLM's words", "[terms]") {
  Resolved s = vllm_setup();
  CHECK(vllm_config_error(llama2_7b(), h100(), s).empty());
  s.max_model_len = 8192;
  CHECK(vllm_config_error(llama2_7b(), h100(), s) ==
        "User-specified max_model_len (8192) is greater than the derived "
        "max_model_len (max_position_embeddings=4096 in model's "
        "config.json).");
  s.max_model_len = 4096;
  s.quant = Quant::fp8;
  Gpu t4 = h100();
  t4.compute_capability = 75;
  CHECK(vllm_config_error(llama2_7b(), t4, s) ==
        "The quantization method fp8 is not supported for the current GPU. "
        "Minimum capability: 80. Current capability: 75.");
  s.quant = Quant::none;
  t4.full_name = "Tesla T4";
  CHECK(vllm_config_error(llama2_7b(), t4, s) ==
        "Bfloat16 is only supported on GPUs with compute capability of at "
        "least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use "
        "float16 instead by explicitly setting the `dtype` flag in CLI, for "
        "example: --dtype=half.");
}

TEST_CASE("terms: vllm_max_len_kv_error by engine", "[terms]") {
  Resolved s = vllm_setup();
  s.max_model_len = 8192;
  // V1: 2^31 B = 2.00 GiB needed, 2^30 B = 1.00 GiB available.
  CHECK(vllm_max_len_kv_error(s, 2147483648.0, 1073741824, 65536, 4096) ==
        "To serve at least one request with the models's max seq len (8192), "
        "(2.00 GiB KV cache is needed, which is larger than the available KV "
        "cache memory (1.00 GiB). Based on the available memory, the "
        "estimated maximum model length is 4096. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.");
  s.vllm_engine = VllmEngine::v0;
  CHECK(vllm_max_len_kv_error(s, 2147483648.0, 1073741824, 4000, 4096) ==
        "The model's max seq len (8192) is larger than the maximum number of "
        "tokens that can be stored in KV cache (4000). Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.");
}

TEST_CASE("terms: vllm_memory_error runs vLLM's memory checks in order",
          "[terms]") {
  Resolved s = vllm_setup();
  VllmStage st;
  st.weights = 100 * k_gib;
  // 80 - 0.51 = 79.49 GiB free at start.
  CHECK(vllm_memory_error(llama2_7b(), h100(), s, st, 0, 0) ==
        "torch.OutOfMemoryError: CUDA out of memory while loading the model "
        "weights (100.00 GiB per GPU, 79.49 GiB free)");
  st.weights = 10 * k_gib;
  s.gpu_util = 1.0;  // 80 GiB requested, 79.49 free
  CHECK(vllm_memory_error(llama2_7b(), h100(), s, st, 0, 0) ==
        "Free memory on device (79.49/80.00 GiB) on startup is less than "
        "desired GPU memory utilization (1.00, 80.00 GiB). Decrease GPU "
        "memory utilization or reduce GPU memory used by other processes.");
  s.gpu_util = 0.5;
  CHECK(vllm_memory_error(llama2_7b(), h100(), s, st, 0, 0) ==
        "No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.");
  st.available = 8 * k_gib;
  st.full_layers = 32;
  st.layer_token = 16384;
  CHECK(vllm_memory_error(llama2_7b(), h100(), s, st, 1000, 4096).empty());
}

TEST_CASE("terms: vllm_startup_error puts configuration before memory",
          "[terms]") {
  Resolved s = vllm_setup();
  s.max_model_len = 8192;
  VllmStage st;
  st.weights = 100 * k_gib;  // would not load either
  CHECK(vllm_startup_error(llama2_7b(), h100(), s, st, 0, 0)
            .rfind("User-specified max_model_len (8192)", 0) == 0);
}

// --- vllm_vision.cpp

TEST_CASE("terms: video_groups pads frames to the temporal patch", "[terms]") {
  const Model m = vision_model();  // 2 frames per patch
  CHECK(video_groups(m, 5) == 3);  // (5 + 1) / 2
  CHECK(video_groups(m, 4) == 2);
  CHECK(video_groups(m, 0) == 1);  // at least one
}

TEST_CASE("terms: video_frames fits the most frames under a limit", "[terms]") {
  const Model m = vision_model();
  // 256 tokens per group of 2 frames: 6 frames are 3 groups, 768 <= 1,000;
  // 7 would be 4 groups, 1,024.
  CHECK(video_frames(m, 256, 1000, 0, 16) == 6);
  CHECK(video_frames(m, 256, 100000, 0, 16) == 16);  // the cap
  CHECK(video_frames(m, 256, 100, 0, 16) == 1);      // at least one
}

TEST_CASE("terms: dummy_video_frames by release", "[terms]") {
  const Model m = vision_model();
  // 0.11 on: all of max_model_len 1,000, from 1 frame, cap 14: 6 frames.
  CHECK(dummy_video_frames(m, vllm_release(0, 19), 256, 1000) == 6);
  // Up to 0.10: the 744 tokens left after the image: 4 frames (2 groups,
  // 512; 5 frames would be 768).
  CHECK(dummy_video_frames(m, vllm_release(0, 8, 5), 256, 1000) == 4);
  Model still = m;
  still.vision_video = false;
  CHECK(dummy_video_frames(still, vllm_release(0, 19), 256, 1000) == 0);
}

TEST_CASE("terms: tiled_profile runs mllama's 4-tile images", "[terms]") {
  // Llama 3.2 11B Vision: 560-pixel tiles of 14-pixel patches, 40^2 + 1 =
  // 1,601 tokens per tile (1,608 padded to 8), 4 tiles; tower 1,280 wide,
  // MLP 5,120, 5 kept layers; two sequences in bf16.
  Model m = llama2_7b();
  m.num_kv_heads = 8;
  m.vision_image_size = 560;
  m.vision_patch_size = 14;
  m.vision_max_tiles = 4;
  m.vision_hidden_size = 1280;
  m.vision_intermediate_size = 5120;
  m.vision_intermediate_layers = 5;
  const VllmVisionProfile p = tiled_profile(m, Dtype::bf16, 1, 2);
  CHECK(p.items == 2);
  CHECK(p.tokens_per_item == 6404);   // 4 x 1,601
  CHECK(p.patches_per_item == 6432);  // 4 x 1,608
  // 2 x 4 tiles x 3 x 560^2 x 4 B = 30,105,600 B.
  CHECK(p.pixel_bytes == 30105600);
  // 2 x 2 B x (6,432^2 mask + 5 x 6,432 x 1,280 kept + 6,432 x (3 x 1,280 +
  // max(4 x 1,280, 2 x 5,120))) = 4 x 173,097,984 = 692,391,936 B.
  CHECK(p.tower_bytes == 692391936);
  // 2 x 6,404 x 4,096 x 2 B = 104,923,136 B.
  CHECK(p.encoder_cache == 104923136);
  // 2 x 6,404 x 2 (K, V) x 8 heads x 128 x 2 B = 52,461,568 B.
  CHECK(p.cross_kv_bytes == 52461568);
}

TEST_CASE("terms: v0_vision_items fits image + video in the token budget",
          "[terms]") {
  VllmVisionProfile p;
  // One image (256 tokens, 1,024 patches) and a video (768 tokens, 3,072
  // patches) per sequence: 8,192 / 1,024 = 8 sequences.
  const VisionPatches v = v0_vision_items(p, 256, 768, 1024, 3072, 8192, 256);
  CHECK(p.tokens_per_item == 1024);
  CHECK(p.items == 8);
  CHECK(v.pixels == 32768);  // 8 x 4,096 patches
  CHECK(v.tower == 24576);   // 8 x the video's 3,072, the larger call
}

TEST_CASE("terms: v1_vision_items profiles the modality with most tokens",
          "[terms]") {
  VllmVisionProfile p;
  // The video (768 tokens) wins; budget max(8,192, 768) = 8,192; 0.19 takes
  // 8,192 // 768 = 10 items (at most 256 x 4,096 // 768 = 1,280).
  const VisionPatches v = v1_vision_items(p, vllm_release(0, 19), 256, 768,
                                          1024, 3072, 8192, 256, 4096);
  CHECK(p.video);
  CHECK(p.encoder_budget == 8192);
  CHECK(p.items == 10);
  CHECK(v.pixels == 30720);  // 10 x 3,072
  CHECK(v.tower == 30720);
  // Up to 0.10: ceil(8,192 / 768) = 11.
  VllmVisionProfile old;
  v1_vision_items(old, vllm_release(0, 10), 256, 768, 1024, 3072, 8192, 256,
                  4096);
  CHECK(old.items == 11);
}

TEST_CASE("terms: vision_pixel_bytes and vision_tower_bytes", "[terms]") {
  const Model m = vision_model();
  // fp32 pixels: 3 x 2 frames x 14 x 14 = 1,176 values x 4 B x 1,000
  // patches = 4,704,000 B.
  CHECK(vision_pixel_bytes(m, 1000) == 4704000);
  // (3 x 1,280 + max(3 x 3,420 gated MLP, 4 x 1,280)) x 2 B x 1,000 patches
  // = 14,100 x 2,000 = 28,200,000 B; at tp 2 the MLP is 5,130 wide:
  // 8,970 x 2,000 = 17,940,000 B.
  CHECK(vision_tower_bytes(m, Dtype::bf16, 1, 1000) == 28200000);
  CHECK(vision_tower_bytes(m, Dtype::bf16, 2, 1000) == 17940000);
}

TEST_CASE("terms: v1_encoder_rows pads to the budget in 0.10.0 - 0.11.0",
          "[terms]") {
  VllmVisionProfile p;
  p.encoder_budget = 8192;
  p.tokens_per_item = 768;
  CHECK(v1_encoder_rows(p, vllm_release(0, 10, 0)) == 8192);
  CHECK(v1_encoder_rows(p, vllm_release(0, 11, 0)) == 8192);
  CHECK(v1_encoder_rows(p, vllm_release(0, 11, 1)) == 768);
  CHECK(v1_encoder_rows(p, vllm_release(0, 9)) == 768);
}
