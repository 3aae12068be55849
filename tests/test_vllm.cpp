#include "support.hpp"

#include "oomplan/memory.hpp"

#include <catch2/catch.hpp>

// vLLM's start-up profile against the llm-d-planner v0.19 H100 logs
// (shared/validation/public.json), with each check's published tolerance.

namespace {

using namespace oomplan;

// The llm-d sweep's flags: --max-num-seqs 1024 --max-num-batched-tokens 8192
// --gpu-memory-utilization 0.95 --max-model-len 8192 on H100-80.
Budget serve(const char* model, int tp, int pp = 1,
             std::int64_t max_len = 8192) {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, model);
  const Gpu& g = find_gpu(cat, "H100");
  Setup s;
  s.engine = Engine::vllm;
  s.gpus = tp * pp;
  s.tp = tp;
  s.pp = pp;
  s.gpu_util = 0.95;
  s.max_num_seqs = 1024;
  s.max_num_batched_tokens = 8192;
  s.max_model_len = max_len;
  return test::budget(m, g, s);
}

double gib(double v) {
  return v * static_cast<double>(k_gib);
}

}  // namespace

TEST_CASE("vllm: Llama-3.1-8B weights are the checkpoint plus the RoPE cache",
          "[vllm]") {
  const Budget b = serve("llama-3.1-8b", 1);
  REQUIRE(b.vllm.has_value());
  // 16,060,522,496 B checkpoint + 131072 positions x 128 rotary dims x 2 B
  CHECK(b.vllm->weights_bytes == 16'060'522'496 + 33'554'432);
  // "14.99 GiB for weight", tolerance 3 %
  CHECK(static_cast<double>(b.vllm->weights_bytes) ==
        Approx(16'095'389'942.0).epsilon(0.03));
  CHECK(b.vllm->kv_bytes_per_token == 131'072);  // 2 x 32 x 8 x 128 x 2
}

TEST_CASE("vllm: Llama-3.1-8B TP1 KV pool matches the v0.19 log", "[vllm]") {
  const Budget b = serve("llama-3.1-8b", 1);
  const VllmProfile& p = *b.vllm;
  // requested = 0.95 x capacity ("0.95, 75.23 GiB")
  CHECK(static_cast<double>(p.requested_bytes) ==
        Approx(gib(75.23)).epsilon(0.001));
  // "Available KV cache memory: 58.11 GiB" (10 %)
  CHECK(static_cast<double>(p.kv_cache_bytes) ==
        Approx(62'395'137'393.0).epsilon(0.1));
  // "GPU KV cache size: 476,016 tokens" (10 %), whole blocks of 16
  CHECK(static_cast<double>(p.kv_tokens) == Approx(476'016.0).epsilon(0.1));
  CHECK(p.kv_tokens % 16 == 0);
  // "Maximum concurrency for 8,192 tokens per request: 58.11x"
  CHECK(p.max_concurrency == Approx(58.11).epsilon(0.1));
  // "1.89 GiB for peak activation" (25 %), "0.25 GiB for non-torch"
  CHECK(static_cast<double>(p.activation_peak_bytes) ==
        Approx(2'029'372'047.0).epsilon(0.25));
  CHECK(static_cast<double>(p.non_torch_bytes) ==
        Approx(268'435'456.0).margin(161'061'274.0));
  CHECK(p.error.empty());
  CHECK(b.fits());
  // Steady state: the requested budget plus the CUDA graphs captured after it.
  CHECK(b.total_bytes() == p.requested_bytes + p.cuda_graph_bytes);
}

TEST_CASE("vllm: a 32k max_model_len keeps the pool and cuts concurrency",
          "[vllm]") {
  const Budget b = serve("llama-3.1-8b", 1, 1, 32768);
  CHECK(static_cast<double>(b.vllm->kv_tokens) ==
        Approx(476'016.0).epsilon(0.1));
  // "Maximum concurrency for 32,768 tokens per request: 14.53x"
  CHECK(b.vllm->max_concurrency == Approx(14.53).epsilon(0.1));
}

TEST_CASE("vllm: tensor parallelism splits weights and KV heads", "[vllm]") {
  const Budget tp2 = serve("llama-3.1-8b", 2);
  const Budget tp4 = serve("llama-3.1-8b", 4);
  // "7.51 GiB for weight", "3.77 GiB" (3 %)
  CHECK(static_cast<double>(tp2.vllm->weights_bytes) ==
        Approx(8'063'801'098.0).epsilon(0.03));
  CHECK(static_cast<double>(tp4.vllm->weights_bytes) ==
        Approx(4'048'006'676.0).epsilon(0.03));
  // "2.07 GiB for non-torch memory" at TP2 (custom all-reduce + NCCL)
  CHECK(static_cast<double>(tp2.vllm->non_torch_bytes) ==
        Approx(2'222'645'576.0).margin(0.3 * 2'222'645'576.0));
  // "GPU KV cache size: 1,044,688 tokens" / "2,209,792 tokens" (10 %)
  CHECK(static_cast<double>(tp2.vllm->kv_tokens) ==
        Approx(1'044'688.0).epsilon(0.1));
  CHECK(static_cast<double>(tp4.vllm->kv_tokens) ==
        Approx(2'209'792.0).epsilon(0.1));
}

TEST_CASE(
    "vllm: pipeline stages hold 8 layers each, embedding first and "
    "lm_head last",
    "[vllm]") {
  const Budget b = serve("llama-3.1-8b", 1, 4);
  REQUIRE(b.stages.size() == 4);
  // "4.26 GiB" on PP0 and PP3, "3.28 GiB" on PP1 and PP2 (3 %)
  CHECK(static_cast<double>(b.stages[0].weights_bytes) ==
        Approx(4'574'140'170.0).epsilon(0.03));
  CHECK(static_cast<double>(b.stages[1].weights_bytes) ==
        Approx(3'521'873'183.0).epsilon(0.03));
  CHECK(static_cast<double>(b.stages[3].weights_bytes) ==
        Approx(4'574'140'170.0).epsilon(0.03));
  for (const Stage& st : b.stages) {
    CHECK(st.layers == 8);
  }
  // "GPU KV cache size: 2,257,264 tokens" (the smallest worker, 10 %)
  CHECK(static_cast<double>(b.vllm->kv_tokens) ==
        Approx(2'257'264.0).epsilon(0.1));
}

TEST_CASE("vllm: FP8 weights and FP8 KV cache", "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3.3-70b");
  const Gpu& g = find_gpu(cat, "H100");
  Setup s;
  s.engine = Engine::vllm;
  s.gpus = 2;
  s.gpu_util = 0.95;
  s.max_num_seqs = 1024;
  s.max_model_len = 8192;
  s.quant = Quant::fp8;
  const Budget b = memory(m, g, resolve(m, g, s));
  // "33.88 GiB for weight" (3 %), "GPU KV cache size: 244,304 tokens" (10 %)
  CHECK(static_cast<double>(b.vllm->weights_bytes) ==
        Approx(36'378'372'997.0).epsilon(0.03));
  CHECK(static_cast<double>(b.vllm->kv_tokens) ==
        Approx(244'304.0).epsilon(0.1));

  const Model& small = find_model(cat, "llama-3.1-8b");
  Setup k;
  k.engine = Engine::vllm;
  k.gpu_util = 0.95;
  k.max_num_seqs = 1024;
  k.max_model_len = 8192;
  k.kv_dtype = Dtype::fp8;
  const Budget kv8 = memory(small, g, resolve(small, g, k));
  // 1 B per value: 65,536 B per token, "952,032 tokens" (10 %)
  CHECK(kv8.vllm->kv_bytes_per_token == 65'536);
  CHECK(static_cast<double>(kv8.vllm->kv_tokens) ==
        Approx(952'032.0).epsilon(0.1));
}

TEST_CASE("vllm: MLA caches one latent head per layer", "[vllm]") {
  const Budget b = serve("deepseek-v2-lite", 1);
  // 27 layers x (512 + 64) x 2 B = 31,104 B per token
  CHECK(b.vllm->kv_bytes_per_token == 31'104);
  // "GPU KV cache size: 1,505,552 tokens" (10 %)
  CHECK(static_cast<double>(b.vllm->kv_tokens) ==
        Approx(1'505'552.0).epsilon(0.1));
}

TEST_CASE("vllm: MoE profile keeps the fused-MoE workspace", "[vllm]") {
  const Budget b = serve("qwen3-30b-a3b", 1);
  // "56.88 GiB for weight, 2.68 GiB for peak activation", "168,288 tokens"
  CHECK(static_cast<double>(b.vllm->weights_bytes) ==
        Approx(61'074'434'949.0).epsilon(0.03));
  CHECK(static_cast<double>(b.vllm->activation_peak_bytes) ==
        Approx(2'877'628'088.0).epsilon(0.25));
  CHECK(static_cast<double>(b.vllm->kv_tokens) ==
        Approx(168'288.0).epsilon(0.1));
}

TEST_CASE("vllm: hybrid sliding-window models report tokens per KV group",
          "[vllm]") {
  const Budget b = serve("gemma-3-27b", 1);
  // Gemma 3: 52 sliding + 10 global layers -> 7 groups of 10 layers; tokens =
  // blocks / groups x 16, not the pool over 62 layers' bytes per token.
  // "GPU KV cache size: 36,560 tokens" (10 %)
  CHECK(static_cast<double>(b.vllm->kv_tokens) ==
        Approx(36'560.0).epsilon(0.1));
  const double naive = static_cast<double>(b.vllm->kv_cache_bytes) /
                       static_cast<double>(b.vllm->kv_bytes_per_token);
  CHECK(static_cast<double>(b.vllm->kv_tokens) < 0.9 * naive);
}

TEST_CASE("vllm: errors are vLLM's own words and make the plan not fit",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3.1-8b");
  const Gpu& g = find_gpu(cat, "RTX4090");
  Setup s;
  s.engine = Engine::vllm;
  s.gpu_util = 0.9;
  s.max_model_len = 131072;
  Budget b = memory(m, g, resolve(m, g, s));
  REQUIRE(b.vllm.has_value());
  // 16 GB of weights leave ~3.5 GB: 131072 x 128 KiB = 16 GiB of KV needed.
  CHECK_THAT(b.vllm->error,
             Catch::StartsWith("To serve at least one request with the "
                               "models's max seq len (131072)") &&
                 Catch::Contains("the estimated maximum model length is"));
  CHECK(b.vllm->max_model_len_fit > 0);
  CHECK(b.vllm->max_model_len_fit < 131072);
  CHECK_FALSE(b.fits());

  // At the estimated length vLLM starts.
  s.max_model_len = b.vllm->max_model_len_fit;
  b = memory(m, g, resolve(m, g, s));
  CHECK(b.vllm->error.empty());
  CHECK(b.fits());

  s.gpu_util = 0.5;
  s.max_model_len = 4096;
  b = memory(m, g, resolve(m, g, s));
  CHECK(b.vllm->error ==
        "No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.");
  CHECK_FALSE(b.fits());

  // 70B in bf16 on one 24 GB card: the load fails before profiling.
  const Model& big = find_model(cat, "llama-3-70b");
  b = memory(big, g, resolve(big, g, s));
  CHECK_THAT(b.vllm->error,
             Catch::StartsWith("torch.OutOfMemoryError: CUDA out of memory "
                               "while loading the model weights (131.42 GiB"));
  CHECK_FALSE(b.fits());
}

TEST_CASE(
    "vllm: enforce-eager captures no CUDA graphs; V0 counts more "
    "non-torch memory",
    "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3.1-8b");
  const Gpu& g = find_gpu(cat, "H100");
  Setup s;
  s.engine = Engine::vllm;
  s.max_model_len = 8192;
  const Budget graphs = memory(m, g, resolve(m, g, s));
  CHECK(graphs.vllm->cuda_graph_bytes > 0);
  s.enforce_eager = true;
  const Budget eager = memory(m, g, resolve(m, g, s));
  CHECK(eager.vllm->cuda_graph_bytes == 0);
  CHECK(eager.vllm->kv_cache_bytes == graphs.vllm->kv_cache_bytes);
  s.vllm_version = VllmEra::v0;
  const Budget v0 = memory(m, g, resolve(m, g, s));
  // V0: 1.79 GiB non-torch at TP1 (vllm-project/vllm#10511), one prompt of
  // max_model_len per profile step.
  CHECK(v0.vllm->non_torch_bytes > eager.vllm->non_torch_bytes);
  CHECK(v0.vllm->kv_cache_bytes < eager.vllm->kv_cache_bytes);
}

TEST_CASE("vllm: every catalog model keeps the profile identity", "[vllm]") {
  const Catalog& cat = test::catalog();
  const Gpu& g = find_gpu(cat, "H200");
  for (const Model& m : cat.models) {
    for (int tp : {1, 2, 8}) {
      if (m.num_heads % tp != 0 ||
          (m.kv_lora_rank == 0 && m.num_kv_heads % tp != 0 &&
           tp % m.num_kv_heads != 0)) {
        continue;
      }
      INFO(m.name << " tp " << tp);
      Setup s;
      s.engine = Engine::vllm;
      s.gpus = tp;
      s.max_model_len = 4096;
      const Budget b = test::budget(m, g, s);
      REQUIRE(b.vllm.has_value());
      const VllmProfile& p = *b.vllm;
      CHECK(p.kv_tokens % 16 == 0);
      CHECK(p.kv_tokens >= 0);
      for (std::size_t i = 0; i < b.count; ++i) {
        CHECK(b.components[i].bytes >= 0);
      }
      if (p.error.empty()) {
        CHECK(b.total_bytes() == p.requested_bytes + p.cuda_graph_bytes);
        CHECK(p.max_model_len_fit >= 4096);
        CHECK(p.max_concurrency > 0);
      } else {
        CHECK_FALSE(b.fits());
      }
    }
  }
}

TEST_CASE("vllm: the V0 profile of Llama-3-8B matches vllm-project/vllm#10511",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3-8b");
  const Gpu& g = find_gpu(cat, "H100");
  Setup s;
  s.engine = Engine::vllm;
  s.vllm_version = VllmEra::v0;
  s.max_model_len = 8192;  // the model's context; V0 batches 8192 tokens
  const Budget b = memory(m, g, resolve(m, g, s));
  const VllmProfile& p = *b.vllm;
  // "model weights take 14.96GiB; non_torch_memory 1.79GiB; PyTorch
  // activation peak memory 1.26GiB; available_kv_cache_memory 53.29GiB"
  // at gpu_memory_utilization 0.90 of 79.22 GiB.
  CHECK(static_cast<double>(p.weights_bytes) ==
        Approx(gib(14.96)).epsilon(0.03));
  CHECK(static_cast<double>(p.activation_peak_bytes) ==
        Approx(gib(1.26)).epsilon(0.25));
  CHECK(static_cast<double>(p.non_torch_bytes) ==
        Approx(gib(1.79)).epsilon(0.3));
  CHECK(static_cast<double>(p.kv_cache_bytes) ==
        Approx(gib(53.29)).epsilon(0.1));
}

TEST_CASE("vllm: gpt-oss MXFP4 experts pad each GPU's columns to 64",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "gpt-oss-20b");
  Resolved s;
  s.tp = 2;
  s.quant = Quant::mxfp4;
  s.engine = Engine::hf;
  const WeightShare all{0, m.num_layers, true, true};
  const Bytes hf = weight_bytes(m, s, all);
  s.engine = Engine::vllm;
  const Bytes vllm = weight_bytes(m, s, all);
  // tp 2: 2880 / 2 = 1440 columns per GPU -> 1472 (Triton MXFP4 MoE):
  //   24 layers x 32 experts x 3 x 2880 x 32 extra columns x 0.53125 B
  //   = 112,803,840 B
  // fp32 expert biases: 24 x 32 x ((2 x 1472 + 2880) x 4 - (5760 + 2880) x 2)
  //   = 24 x 32 x 6016 = 4,620,288 B
  // RoPE cache (fp32 in gpt_oss.py): 131072 x 64 x 4 = 33,554,432 B; the
  // vocabulary 201088 is already a multiple of 64 x 2.
  CHECK(vllm - hf == Approx(112'803'840 + 4'620'288 + 33'554'432).margin(2));
  // At tp 1 the width (45 x 64) needs no padding: only biases and RoPE.
  s.tp = 1;
  s.engine = Engine::hf;
  const Bytes hf1 = weight_bytes(m, s, all);
  s.engine = Engine::vllm;
  // 24 x 32 x ((5760 + 2880) x 4 - 8640 x 2) = 13,271,040 B
  CHECK(weight_bytes(m, s, all) - hf1 ==
        Approx(13'271'040 + 33'554'432).margin(2));
}

TEST_CASE("vllm: the default scheduler budget follows the card", "[vllm]") {
  const Catalog& cat = test::catalog();
  // get_batch_defaults: >= 70 GiB and not an A100 -> 8192, else 2048.
  CHECK(vllm_default_batched_tokens(find_gpu(cat, "H100")) == 8192);
  CHECK(vllm_default_batched_tokens(find_gpu(cat, "H200")) == 8192);
  CHECK(vllm_default_batched_tokens(find_gpu(cat, "A100-80")) == 2048);
  CHECK(vllm_default_batched_tokens(find_gpu(cat, "L40S")) == 2048);

  const Model& m = find_model(cat, "llama-3.1-8b");
  const Gpu& l40s = find_gpu(cat, "L40S");
  const Resolved s = resolve(m, l40s, Setup{.engine = Engine::vllm});
  CHECK(s.max_num_batched_tokens == 2048);
  Setup explicit_tokens;
  explicit_tokens.engine = Engine::vllm;
  explicit_tokens.max_num_batched_tokens = 4096;
  CHECK(resolve(m, l40s, explicit_tokens).max_num_batched_tokens == 4096);
  const Budget b = memory(m, l40s, s);
  // The sampler run over min(256 seqs, 2048) rows dominates:
  //   2048 x 4096 x 2 (hidden) + 256 x 128256 x (2 + 13)
  //   = 16,777,216 + 492,503,040 = 509,280,256 B
  // (the forward: 5 x 2048 x 4096 x 2 + 3 x 2048 x 14336 x 2 = 260,046,848).
  CHECK(b.vllm->activation_peak_bytes == 509'280'256);
}

TEST_CASE("vllm: gpt-oss before Hopper pads MXFP4 experts for Marlin",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "gpt-oss-20b");
  Resolved s;
  s.quant = Quant::mxfp4;
  s.engine = Engine::hf;
  WeightShare all{0, m.num_layers, true, true};
  const Bytes hf = weight_bytes(m, s, all);
  s.engine = Engine::vllm;
  all.compute_capability = 89;  // L4: Marlin, columns to 128, hidden to 256
  // gate_up and down: 24 x 32 x 3 x (2944 x 3072 - 2880 x 2880) x 0.53125 B
  //   = 917,471,232 B
  // bf16 biases, padded: 24 x 32 x ((2 x 2944 + 3072) - 8640) x 2 = 491,520
  // RoPE cache (fp32) 131072 x 64 x 4 = 33,554,432
  CHECK(weight_bytes(m, s, all) - hf ==
        Approx(917'471'232 + 491'520 + 33'554'432).margin(2));
  // The plan on an L4 loads what the Marlin kernel holds.
  Setup v;
  v.engine = Engine::vllm;
  const Gpu& l4 = find_gpu(cat, "L4");
  const Budget b = memory(m, l4, resolve(m, l4, v));
  CHECK(b.vllm->weights_bytes == weight_bytes(m, s, all));
  // Blackwell (FlashInfer): both to 256, 2880 -> 3072, fp32 biases.
  all.compute_capability = 100;
  // 24 x 32 x 3 x (3072 x 3072 - 2880 x 2880) x 0.53125 = 1,398,767,616
  // biases 24 x 32 x ((2 x 3072 + 3072) x 4 - 8640 x 2) = 15,040,512
  CHECK(weight_bytes(m, s, all) - hf ==
        Approx(1'398'767'616 + 15'040'512 + 33'554'432).margin(2));
}

TEST_CASE("vllm: cards older than a format's kernels refuse it at start-up",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  auto plan = [&](const char* model, const char* gpu, Setup s) {
    const Model& m = find_model(cat, model);
    const Gpu& g = find_gpu(cat, gpu);
    s.engine = Engine::vllm;
    return memory(m, g, resolve(m, g, s));
  };
  // Mxfp4Config.get_min_capability() = 80; V100 is 7.0.
  Budget b =
      plan("gpt-oss-20b", "V100-32", Setup{.gpus = 2, .dtype = Dtype::fp16});
  REQUIRE_FALSE(b.vllm->error.empty());
  CHECK_THAT(b.vllm->error,
             Catch::Contains("quantization method mxfp4 is not supported") &&
                 Catch::Contains("Minimum capability: 80. Current "
                                 "capability: 70."));
  CHECK_FALSE(b.fits());
  // bf16 needs 8.0 (platforms/cuda.py); fp16 on the same T4 starts.
  b = plan("llama-3.2-1b", "T4", Setup{});
  REQUIRE_FALSE(b.vllm->error.empty());
  CHECK_THAT(b.vllm->error, Catch::Contains("compute capability 7.5") &&
                                Catch::Contains("--dtype=half"));
  b = plan("llama-3.2-1b", "T4", Setup{.dtype = Dtype::fp16});
  CHECK(b.vllm->error.empty());
  // FP8 runs weight-only through Marlin on Ampere (min capability 80).
  b = plan("llama-3.2-1b", "A10G", Setup{.quant = Quant::fp8});
  CHECK(b.vllm->error.empty());
  b = plan("llama-3.2-1b", "T4",
           Setup{.dtype = Dtype::fp16, .quant = Quant::fp8});
  REQUIRE_FALSE(b.vllm->error.empty());
  CHECK_THAT(b.vllm->error, Catch::Contains("method fp8"));
}

TEST_CASE("vllm: Gemma 3's global layers cache 8x the positions", "[vllm]") {
  const Catalog& cat = test::catalog();
  auto rope = [&](const char* id) {
    const Model& m = find_model(cat, id);
    Resolved s;
    const WeightShare all{0, m.num_layers, true, true};
    const Bytes hf = weight_bytes(m, s, all);
    s.engine = Engine::vllm;
    return weight_bytes(m, s, all) - hf;
  };
  // 27B: local 131072 + global (linear x8) 1,048,576 positions x 128 x 2 B
  //   = 301,989,888 B (vocabulary 262208 = 4097 x 64: no padding)
  CHECK(rope("gemma-3-27b") == 301'989'888);
  // 1B (32k, no rope_scaling): two caches of 32768 x 256 x 2 B = 33,554,432
  CHECK(rope("gemma-3-1b") == 33'554'432);
}

TEST_CASE("vllm: gpt-oss's MXFP4 MoE holds no workspace past the forward",
          "[vllm]") {
  const Budget b = serve("gpt-oss-20b", 1);
  // The sampler run over min(1024, 8192) rows with only the hidden states
  // alive (Triton MXFP4 kernels allocate per call):
  //   8192 x 2880 x 2 + 1024 x 201088 x (2 + 13)
  //   = 47,185,920 + 3,088,711,680 = 3,135,897,600 B
  CHECK(b.vllm->activation_peak_bytes == 3'135'897'600);
  // With few sequences the forward dominates: 5 hidden buffers plus the
  // larger of q/k/v/o (8192 x (2 x 64 + 2 x 8) x 64 x 2 = 150,994,944) and
  // the MoE layer (8192 x 4 x 2880 x 2 + 8192 x 2880 x 2 = 235,929,600):
  //   5 x 47,185,920 + 235,929,600 = 471,859,200 B
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "gpt-oss-20b");
  const Gpu& g = find_gpu(cat, "H100");
  Setup s;
  s.engine = Engine::vllm;
  s.max_num_seqs = 1;
  s.max_num_batched_tokens = 8192;
  s.enforce_eager = true;
  const Budget one = test::budget(m, g, s);
  // sampler: 47,185,920 + 1 x 201088 x 15 = 50,202,240 < forward
  CHECK(one.vllm->activation_peak_bytes == 471'859'200);
}
