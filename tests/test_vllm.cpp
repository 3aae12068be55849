#include "support.hpp"

#include "oomplan/memory/memory.hpp"
#include "oomplan/memory/vllm.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <regex>
#include <string>

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
    "vllm: enforce-eager captures no CUDA graphs, and V0 counts more "
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
  // The checkpoint's scales Triton keeps before 0.21 (0.19 here): 24 x 32
  // x (2880 x 5760 + 2880 x 2880) / 2 / 32 = 298,598,400 B.
  CHECK(vllm - hf ==
        Approx(112'803'840 + 4'620'288 + 33'554'432 + 298'598'400).margin(2));
  // At tp 1 the width (45 x 64) needs no padding: only biases and RoPE.
  s.tp = 1;
  s.engine = Engine::hf;
  const Bytes hf1 = weight_bytes(m, s, all);
  s.engine = Engine::vllm;
  // 24 x 32 x ((5760 + 2880) x 4 - 8640 x 2) = 13,271,040 B, and the
  // kept scales, 597,196,800 B; none from 0.21 (#46549).
  CHECK(weight_bytes(m, s, all) - hf1 ==
        Approx(13'271'040 + 33'554'432 + 597'196'800).margin(2));
  s.vllm_release = vllm_release(0, 21);
  CHECK(weight_bytes(m, s, all) - hf1 ==
        Approx(13'271'040 + 33'554'432).margin(2));
}

TEST_CASE("vllm: the default scheduler budget follows the card", "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3.1-8b");
  // get_batch_defaults (0.9+ V1): >= 70 GiB and not an A100 -> 8192, else
  // 2048.
  for (const auto& [card, tokens] : {std::pair{"H100", 8192},
                                     {"H200", 8192},
                                     {"A100-80", 2048},
                                     {"L40S", 2048}}) {
    CHECK(vllm_default_batched_tokens(m, find_gpu(cat, card),
                                      VllmVersion{0, 9, 0}, VllmEngine::v1,
                                      8192) == tokens);
  }

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

// --- Releases, cards and topology (include/oomplan/setup/vllm_engine.hpp)
// --------------- Hand values from vLLM's source at each release (docs/vllm.md
// names the files).

namespace {

constexpr VllmVersion release(int minor, int patch = 0) {
  return VllmVersion{0, minor, patch};
}

VllmEngine engine_on(const char* gpu, VllmVersion version,
                     Dtype dtype = Dtype::fp16,
                     std::optional<Dtype> kv = std::nullopt,
                     Quant quant = Quant::none,
                     const char* model = "llama-3.1-8b") {
  const Catalog& cat = test::catalog();
  return vllm_engine(find_model(cat, model), find_gpu(cat, gpu), version, dtype,
                     kv.value_or(dtype), quant)
      .engine;
}

// Llama-3.1-8B on `gpus` x `gpu` with vLLM `version` and the llm-d flags.
Budget serve_release(const char* gpu, int tp, VllmVersion version,
                     P2p p2p = P2p::automatic) {
  const Catalog& cat = test::catalog();
  Setup s;
  s.engine = Engine::vllm;
  s.gpus = tp;
  s.tp = tp;
  s.gpu_util = 0.9;
  s.max_num_seqs = 1024;
  s.max_num_batched_tokens = 8192;
  s.max_model_len = 8192;
  s.vllm_release = version;
  s.p2p = p2p;
  return test::budget(find_model(cat, "llama-3.1-8b"), find_gpu(cat, gpu), s);
}

}  // namespace

TEST_CASE("vllm: releases parse as X.Y or X.Y.Z and print back", "[vllm]") {
  CHECK(release_from_text("0.8.5") == VllmVersion{0, 8, 5});
  CHECK(release_from_text("v0.19") == VllmVersion{0, 19, k_vllm_any_patch});
  CHECK_FALSE(release_from_text("0.8.x").has_value());
  CHECK_FALSE(release_from_text("19").has_value());
  CHECK(release_text(VllmVersion{0, 6, 5}) == "0.6.5");
  CHECK(release_text(VllmVersion{0, 6, k_vllm_any_patch}) == "0.6");
  // "0.6" is the newest 0.6.x: later than 0.6.5.
  CHECK(*release_from_text("0.6") > VllmVersion{0, 6, 5});
  CHECK(vllm_era_of(VllmVersion{0, 6, 6}) == VllmEra::v0);
  CHECK(vllm_era_of(VllmVersion{0, 10, 2}) == VllmEra::v1_early);
  CHECK(vllm_era_of(k_vllm_default_version) == VllmEra::current);
}

TEST_CASE("vllm: the engine follows the release and the card", "[vllm]") {
  // Before 0.8 V0 is the default everywhere.
  CHECK(engine_on("H100", release(7, 3), Dtype::bf16) == VllmEngine::v0);
  CHECK(engine_on("H100", release(8), Dtype::bf16) == VllmEngine::v1);
  // _is_v1_supported_oracle: "Compute Capability < 8.0" until #24022 (0.10.2).
  CHECK(engine_on("T4", release(8, 5)) == VllmEngine::v0);
  CHECK(engine_on("V100-32", release(10, 1)) == VllmEngine::v0);
  CHECK(engine_on("T4", release(10, 2)) == VllmEngine::v1);
  // V0 is gone from 0.11.
  CHECK(engine_on("T4", release(11)) == VllmEngine::v1);
  const Catalog& cat = test::catalog();
  const VllmEngineChoice t4 =
      vllm_engine(find_model(cat, "llama-3.1-8b"), find_gpu(cat, "T4"),
                  release(9, 1), Dtype::fp16, Dtype::fp16, Quant::none);
  CHECK(t4.reason ==
        "V0: compute capability 7.5 < 8.0 falls back to V0 "
        "before 0.10.2");
}

TEST_CASE(
    "vllm: fp32, fp8 KV, bitsandbytes and state-space models fall back "
    "to V0 where V1 lacked them",
    "[vllm]") {
  // V1_SUPPORTED_DTYPES = [bf16, fp16] until #19754 (0.10).
  CHECK(engine_on("H100", release(9, 2), Dtype::fp32) == VllmEngine::v0);
  CHECK(engine_on("H100", release(10), Dtype::fp32) == VllmEngine::v1);
  // fp8 KV: never in 0.8; FlashAttention 3 (Hopper) from 0.9; Blackwell
  // from 0.10; an A100 or L40S stays on V0 until 0.11.
  CHECK(engine_on("H100", release(8, 5), Dtype::bf16, Dtype::fp8) ==
        VllmEngine::v0);
  CHECK(engine_on("H100", release(9, 1), Dtype::bf16, Dtype::fp8) ==
        VllmEngine::v1);
  CHECK(engine_on("A100-80", release(10, 2), Dtype::bf16, Dtype::fp8) ==
        VllmEngine::v0);
  CHECK(engine_on("L40S", release(11), Dtype::bf16, Dtype::fp8) ==
        VllmEngine::v1);
  CHECK(engine_on("B200", release(9, 2), Dtype::bf16, Dtype::fp8) ==
        VllmEngine::v0);
  CHECK(engine_on("B200", release(10), Dtype::bf16, Dtype::fp8) ==
        VllmEngine::v1);
  // V1_UNSUPPORTED_QUANT = ["bitsandbytes", "gguf"] in 0.8.
  CHECK(engine_on("H100", release(8, 5), Dtype::bf16, std::nullopt,
                  Quant::nf4) == VllmEngine::v0);
  CHECK(engine_on("H100", release(9), Dtype::bf16, std::nullopt, Quant::nf4) ==
        VllmEngine::v1);
  // SupportsV0Only architectures: mamba until 0.10.2 (#23650), mllama until
  // V0's removal.
  Model mamba = test::llama2_7b();
  mamba.model_type = "mamba";
  const Gpu& h100 = find_gpu(test::catalog(), "H100");
  CHECK(vllm_engine(mamba, h100, release(10, 1), Dtype::bf16, Dtype::bf16,
                    Quant::none)
            .engine == VllmEngine::v0);
  CHECK(vllm_engine(mamba, h100, release(10, 2), Dtype::bf16, Dtype::bf16,
                    Quant::none)
            .engine == VllmEngine::v1);
  mamba.model_type = "mllama";
  CHECK(vllm_engine(mamba, h100, release(10, 2), Dtype::bf16, Dtype::bf16,
                    Quant::none)
            .engine == VllmEngine::v0);
}

TEST_CASE("vllm: scheduler defaults follow the release and the card",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Gpu& a100 = find_gpu(cat, "A100-80");
  const Gpu& l40s = find_gpu(cat, "L40S");
  const Gpu& h200 = find_gpu(cat, "H200");
  const Model& m = find_model(cat, "llama-3.1-8b");
  const auto v1 = VllmEngine::v1;
  // max_num_seqs: 1024 everywhere in 0.8.0-0.8.4; 0.8.5 by memory (#17073),
  // 0.9 not on an A100 (#17885); V0 256.
  CHECK(vllm_default_max_num_seqs(l40s, release(8, 4), v1) == 1024);
  CHECK(vllm_default_max_num_seqs(l40s, release(8, 5), v1) == 256);
  CHECK(vllm_default_max_num_seqs(a100, release(8, 5), v1) == 1024);
  CHECK(vllm_default_max_num_seqs(a100, release(9), v1) == 256);
  CHECK(vllm_default_max_num_seqs(h200, release(19), v1) == 1024);
  CHECK(vllm_default_max_num_seqs(h200, release(8, 5), VllmEngine::v0) == 256);
  // max_num_batched_tokens: "h100"/"h200" by name in 0.8.0-0.8.4, >= 70 GiB
  // in 0.8.5, and not an A100 from 0.9.
  CHECK(vllm_default_batched_tokens(m, a100, release(8, 4), v1, 8192) == 2048);
  CHECK(vllm_default_batched_tokens(m, a100, release(8, 5), v1, 8192) == 8192);
  CHECK(vllm_default_batched_tokens(m, a100, release(9), v1, 8192) == 2048);
  CHECK(vllm_default_batched_tokens(m, h200, release(8, 4), v1, 8192) == 8192);
  // V0: one prompt of max_model_len (>= 2048); above 32k chunks of 512
  // (<= 0.6.4) or 2048 (#10544, 0.6.5+); MLA models are never chunked.
  const auto v0 = VllmEngine::v0;
  CHECK(vllm_default_batched_tokens(m, a100, release(6, 3), v0, 8192) == 8192);
  CHECK(vllm_default_batched_tokens(m, a100, release(6, 3), v0, 1024) == 2048);
  CHECK(vllm_default_batched_tokens(m, a100, release(6, 4), v0, 40000) == 512);
  CHECK(vllm_default_batched_tokens(m, a100, release(8), v0, 40000) == 2048);
  // "max_model_len > 32768" is strict: 32768 tokens are one prompt, one more
  // token chunks; 20000 is far below it.
  CHECK(vllm_default_batched_tokens(m, a100, release(8), v0, 32768) == 32768);
  CHECK(vllm_default_batched_tokens(m, a100, release(8), v0, 32769) == 2048);
  CHECK(vllm_default_batched_tokens(m, a100, release(8), v0, 20000) == 20000);
  const Model& mla = find_model(cat, "deepseek-v2-lite");
  CHECK(vllm_default_batched_tokens(mla, a100, release(8), v0, 40000) == 40000);

  // Left out, --max-num-seqs resolves to vLLM's default for the card.
  Setup s;
  s.engine = Engine::vllm;
  CHECK(resolve(m, h200, s).max_num_seqs == 1024);
  CHECK(resolve(m, l40s, s).max_num_seqs == 256);
  s.vllm_version = VllmEra::v0;
  CHECK(resolve(m, h200, s).max_num_seqs == 256);
}

TEST_CASE("vllm: 0.7 to 0.9.0 count the CUDA context as non-torch memory",
          "[vllm]") {
  // gpu_worker.py before #18974: non_torch = (total - free) - torch
  // allocated, so the 0.51 GiB context is inside it; from 0.9.1 the
  // baseline snapshot excludes it. Same flags, same defaults otherwise:
  //   0.51 x 2^30 = 547,608,330.24 -> 547,608,330 B less KV in 0.8.5.
  const Budget old_profile = serve_release("H100", 1, release(8, 5));
  const Budget new_profile = serve_release("H100", 1, release(9, 1));
  CHECK(old_profile.vllm->non_torch_bytes - new_profile.vllm->non_torch_bytes ==
        547'608'330);
  CHECK(new_profile.vllm->kv_cache_bytes - old_profile.vllm->kv_cache_bytes ==
        547'608'330);
  // 547,608,330 B / 131,072 B per token = 4,178 tokens; whole blocks of 16.
  const std::int64_t fewer =
      new_profile.vllm->kv_tokens - old_profile.vllm->kv_tokens;
  CHECK(fewer >= 4'176);
  CHECK(fewer <= 4'192);
  CHECK(old_profile.vllm->profiler ==
        "device used minus torch (CUDA context counted)");
}

TEST_CASE("vllm: from 0.21 the CUDA-graph estimate comes out of gpu_util",
          "[vllm]") {
  const Budget before = serve_release("H100", 1, release(20));
  const Budget after = serve_release("H100", 1, release(21));
  REQUIRE(after.vllm->cuda_graph_bytes > 0);
  CHECK(before.vllm->kv_cache_bytes - after.vllm->kv_cache_bytes ==
        after.vllm->cuda_graph_bytes);
  // The process then stays inside the requested budget.
  CHECK(after.total_bytes() == after.vllm->requested_bytes);
  CHECK(before.total_bytes() ==
        before.vllm->requested_bytes + before.vllm->cuda_graph_bytes);
  CHECK(after.vllm->graphs_in_budget);
}

TEST_CASE("vllm: custom all-reduce and NCCL buffers need P2P", "[vllm]") {
  const Catalog& cat = test::catalog();
  const Gpu& h100 = find_gpu(cat, "H100");
  const Gpu& l40s = find_gpu(cat, "L40S");
  // NVLink, one node, vLLM 0.9.1 (NCCL_CUMEM_ENABLE=0, NCCL 2.26 connects the
  // ring only): custom all-reduce 2 x 8 MiB = 16,777,216 B; NCCL 24 channels
  // x (4,194,304 + 4,915,200 + 524,288) B = 24 x 9,633,792 = 231,211,008 B,
  // all at the TP group's warm-up.
  VllmComm c = vllm_comm(h100, release(9, 1), 2, 1, 8, true);
  CHECK(c.custom_all_reduce);
  CHECK(c.custom_all_reduce_bytes == 16'777'216);
  CHECK(c.nccl_init_bytes == 231'211'008);
  CHECK(c.nccl_profile_bytes == 0);
  CHECK(c.init_bytes() == 16'777'216 + 231'211'008);
  // 0.8 (NCCL 2.21: ring and tree connected at init): twice the buffers.
  CHECK(vllm_comm(h100, release(8, 5), 2, 1, 8, true).nccl_init_bytes ==
        462'422'016);
  // From 0.10.2 NCCL uses cuMem: the v0.19 H100 measurements, 1.0 GiB at
  // init (1,073,741,824 B) and (1.75 + 0.04 x 2) GiB = 1.83 x 2^30 =
  // 1,964,947,537.9 -> 1,964,947,538 B during the profile.
  c = vllm_comm(h100, release(19), 2, 1, 8, true);
  CHECK(c.nccl_init_bytes == 1'073'741'824);
  CHECK(c.nccl_profile_bytes == 1'964'947'538);
  // Pipeline stages alone: the communicators' init, no TP rings.
  c = vllm_comm(h100, release(19), 1, 4, 8, true);
  CHECK_FALSE(c.custom_all_reduce);
  CHECK(c.nccl_init_bytes == 1'073'741'824);
  CHECK(c.nccl_profile_bytes == 0);
  // Without P2P: no custom all-reduce, NCCL stages through host memory.
  c = vllm_comm(h100, release(9, 1), 2, 1, 8, false);
  CHECK_FALSE(c.custom_all_reduce);
  CHECK(c.init_bytes() + c.nccl_profile_bytes == 0);
  // PCIe with P2P: custom all-reduce only for two GPUs; 2 NCCL channels:
  // 2 x 9,633,792 = 19,267,584 B.
  c = vllm_comm(l40s, release(9, 1), 2, 1, 8, true);
  CHECK(c.custom_all_reduce);
  CHECK(c.nccl_init_bytes == 19'267'584);
  CHECK_FALSE(vllm_comm(l40s, release(9, 1), 4, 1, 8, true).custom_all_reduce);
  // TP across nodes: "this process group spans across nodes".
  CHECK_FALSE(vllm_comm(h100, release(9, 1), 16, 1, 8, true).custom_all_reduce);
  // Unsupported world size [2, 4, 6, 8].
  CHECK_FALSE(vllm_comm(h100, release(9, 1), 3, 1, 8, true).custom_all_reduce);
  // --p2p auto: NVLink inside one node.
  CHECK(resolve_p2p(P2p::automatic, h100, 8, 8));
  CHECK_FALSE(resolve_p2p(P2p::automatic, h100, 16, 8));
  CHECK_FALSE(resolve_p2p(P2p::automatic, l40s, 2, 8));
  CHECK(resolve_p2p(P2p::on, l40s, 2, 8));
  CHECK_FALSE(resolve_p2p(P2p::off, h100, 2, 8));
  // #25359: from 0.11 the baseline is taken after the distributed init.
  CHECK_FALSE(
      vllm_snapshot_after_distributed_init(release(10, 2), VllmEngine::v1));
  CHECK(vllm_snapshot_after_distributed_init(release(11), VllmEngine::v1));
}

TEST_CASE("vllm: the non-torch memory of a TP worker follows --p2p", "[vllm]") {
  // 2 x H100 NVLink, vLLM 0.9.1 (snapshot before the distributed init):
  // 0.25 GiB + custom all-reduce + NCCL
  //   = 268,435,456 + 16,777,216 + 231,211,008 = 516,423,680 B.
  const Budget nvlink = serve_release("H100", 2, release(9, 1));
  CHECK(nvlink.vllm->non_torch_bytes == 516'423'680);
  CHECK(nvlink.vllm->custom_all_reduce);
  // Same cards in a container without P2P: 0.25 GiB = 268,435,456 B, and
  // the KV pool gains the difference.
  const Budget off = serve_release("H100", 2, release(9, 1), P2p::off);
  CHECK(off.vllm->non_torch_bytes == 268'435'456);
  CHECK(off.vllm->kv_cache_bytes - nvlink.vllm->kv_cache_bytes ==
        516'423'680 - 268'435'456);
  CHECK_FALSE(off.vllm->p2p);
  // 0.10.2 (cuMem, snapshot before init) counts the init in non-torch; 0.11
  // does not: 268,435,456 + 16,777,216 + 1,073,741,824 + 1,964,947,538 =
  // 3,323,902,034 B, and 268,435,456 + 1,964,947,538 = 2,233,382,994 B.
  CHECK(serve_release("H100", 2, release(10, 2)).vllm->non_torch_bytes ==
        3'323'902'034);
  CHECK(serve_release("H100", 2, release(11)).vllm->non_torch_bytes ==
        2'233'382'994);
}

TEST_CASE("vllm: the CUDA-graph capture list follows the release", "[vllm]") {
  const auto v1 = VllmEngine::v1;
  // 0.7 - 0.9: [1, 2, 4] + range(8, 513, 8) <= max_num_batched_tokens:
  // 3 + 64 = 67 sizes; with 256 tokens 3 + 32 = 35.
  auto sizes = vllm_capture_sizes(release(9, 1), v1, 1024, 8192);
  CHECK(sizes.size() == 67);
  CHECK(sizes.back() == 512);
  CHECK(vllm_capture_sizes(release(9, 1), v1, 1024, 256).size() == 35);
  // 0.10 (#20628): up to min(2 x max_num_seqs, 512): 64 seqs -> 128,
  // 3 + 16 = 19 sizes.
  sizes = vllm_capture_sizes(release(10), v1, 64, 8192);
  CHECK(sizes.size() == 19);
  CHECK(sizes.back() == 128);
  // 0.12+: steps of 16 from 256: 3 + 31 (8 .. 248) + 17 (256 .. 512) = 51.
  CHECK(vllm_capture_sizes(release(19), v1, 1024, 8192).size() == 51);
  // V0: up to max_num_seqs padded to a multiple of 8 (3 + 32 = 35 for 256;
  // 1000 -> 3 + 125 = 128), capped at 256 before 0.6 (#7894).
  const auto v0 = VllmEngine::v0;
  CHECK(vllm_capture_sizes(release(8), v0, 256, 8192).size() == 35);
  CHECK(vllm_capture_sizes(release(8), v0, 1000, 8192).size() == 128);
  CHECK(vllm_capture_sizes(release(5), v0, 1000, 8192).size() == 35);
  CHECK(vllm_capture_sizes(release(8), v0, 3, 8192) ==
        std::vector<std::int64_t>{1, 2, 4});
  // Graphs: FULL_AND_PIECEWISE captures the uniform-decode sizes (<=
  // max_num_seqs) a second time: 51 + 51 = 102 at 1024 sequences, 51 + 19 =
  // 70 at 128 (1, 2, 4, 8 .. 128).
  sizes = vllm_capture_sizes(release(19), v1, 1024, 8192);
  CHECK(vllm_graph_count(VllmGraphMode::full_and_piecewise, sizes, 1024) ==
        102);
  CHECK(vllm_graph_count(VllmGraphMode::full_and_piecewise, sizes, 128) == 70);
  CHECK(vllm_graph_mode(release(10), v1, false) == VllmGraphMode::piecewise);
  CHECK(vllm_graph_mode(release(11), v1, false) ==
        VllmGraphMode::full_and_piecewise);
  CHECK(vllm_graph_mode(release(8), v0, false) == VllmGraphMode::full);
  CHECK(vllm_graph_mode(release(19), v1, true) == VllmGraphMode::none);

  // The profile names what it assumed.
  const Budget b = serve_release("H100", 1, release(9, 1));
  CHECK(b.vllm->cudagraph_mode == "PIECEWISE");
  CHECK(b.vllm->capture_sizes.size() == 67);
  CHECK(b.vllm->graphs == 67);
}

TEST_CASE("vllm: V0 releases on a T4 profile with V0's sampler and defaults",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3.2-1b");
  const Gpu& t4 = find_gpu(cat, "T4");
  Setup s;
  s.engine = Engine::vllm;
  s.dtype = Dtype::fp16;
  s.max_model_len = 4096;
  s.vllm_release = release(9, 1);
  const Budget v0 = test::budget(m, t4, s);
  CHECK(v0.vllm->engine == "V0");
  // V0 defaults: 256 sequences, one 4096-token prompt; the V0 sampler's
  // 37 B per element: 4096 x 2048 x 2 + 256 x 128256 x (2 + 37)
  //   = 16,777,216 + 1,280,507,904 = 1,297,285,120 B.
  CHECK(v0.vllm->activation_peak_bytes == 1'297'285'120);
  // V0 non-torch (no torch.compile): 0.16 GiB = 171,798,691.84 -> 171,798,692.
  CHECK(v0.vllm->non_torch_bytes == 171'798'692);
  s.vllm_release = release(10, 2);
  const Budget v1 = test::budget(m, t4, s);
  CHECK(v1.vllm->engine == "V1");
  CHECK(v1.vllm->kv_cache_bytes > v0.vllm->kv_cache_bytes);
}

TEST_CASE("vllm: a hybrid pool pads the state page to the attention page",
          "[vllm]") {
  // A Jamba-like worker: 4 attention layers (8 KV heads x 128 x 2 B x 2 =
  // 4,096 B per token) and 28 mamba layers whose state is conv 8192 x 3 x 2 +
  // ssm 8192 x 16 x 2 = 49,152 + 262,144 = 311,296 B per sequence.
  //   block = 16 x ceil(311,296 / (16 x 4,096)) = 16 x 5 = 80 tokens
  //   page = 80 x 4,096 = 327,680 B; groups of min(4, 28) = 4 layers:
  //   1 attention + 7 state groups = 8; 10 GiB / (327,680 x 4) = 8,192 blocks
  //   tokens = 8,192 / 8 x 80 = 81,920
  //   a request of 8,192 tokens: ceil(8,192 / 80) = 103 + 7 = 110 blocks
  const VllmHybridPool pool = vllm_hybrid_pool(
      VllmHybridLayers{4, 28, 4'096, 311'296}, 10 * k_gib, 8192);
  CHECK(pool.block_size == 80);
  CHECK(pool.page_bytes == 327'680);
  CHECK(pool.group_size == 4);
  CHECK(pool.groups == 8);
  CHECK(pool.blocks == 8'192);
  CHECK(pool.tokens == 81'920);
  CHECK(pool.blocks_per_request == 110);
  CHECK(pool.max_concurrency == Approx(8192.0 / 110.0));
}

TEST_CASE("vllm: a pure state-space pool holds one state per sequence",
          "[vllm]") {
  // 64 mamba layers of 1,000,000 B per sequence: one group of 64; 1 GiB /
  // 64,000,000 B = 16 blocks, one per request whatever its length; the
  // "tokens" vLLM reports are blocks x max_model_len = 16 x 4,096 = 65,536.
  const VllmHybridPool pool =
      vllm_hybrid_pool(VllmHybridLayers{0, 64, 0, 1'000'000}, k_gib, 4096);
  CHECK(pool.block_size == 4096);
  CHECK(pool.blocks == 16);
  CHECK(pool.tokens == 65'536);
  CHECK(pool.blocks_per_request == 1);
  CHECK(pool.max_concurrency == Approx(16.0));
}

TEST_CASE("vllm: the report names the release, engine and capture list",
          "[vllm]") {
  const auto r = test::run_cli({"llama-3.2-1b", "--gpus", "2xT4", "--engine",
                                "vllm", "--dtype", "fp16", "--vllm-version",
                                "0.9.1", "--max-model-len", "4096"});
  CHECK_THAT(r.out,
             Catch::Contains("assumed: vLLM 0.9.1, V0 engine (V0: compute "
                             "capability 7.5 < 8.0 falls back to V0 before "
                             "0.10.2)"));
  CHECK_THAT(r.out, Catch::Contains("CUDA graphs: FULL at 35 batch sizes (1 "
                                    "to 256), 35 graphs, captured after the "
                                    "KV cache"));
  CHECK_THAT(r.out, Catch::Contains("tensor parallel: no P2P (NCCL through "
                                    "host memory), custom all-reduce off"));
  const auto j =
      test::run_cli({"llama-3.2-1b", "--gpus", "2xT4", "--engine", "vllm",
                     "--dtype", "fp16", "--vllm-version", "0.9.1", "--json"});
  CHECK_THAT(j.out, Catch::Contains("\"engine\": \"V0\""));
  CHECK_THAT(j.out, Catch::Contains("\"vllm_release\": \"0.9.1\""));
  CHECK_THAT(j.out, Catch::Contains("\"p2p\": false"));
}

TEST_CASE("vllm: --p2p takes auto, on or off and reaches the re-run line",
          "[vllm]") {
  const auto bad = test::run_cli({"llama-3.1-8b", "--gpus", "2xL40S",
                                  "--engine", "vllm", "--p2p", "maybe"});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--p2p: maybe not in {auto,on,off}"));
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "llama-3.1-8b");
  const Gpu& l40s = find_gpu(cat, "L40S");
  Setup s;
  s.engine = Engine::vllm;
  s.gpus = 2;
  s.p2p = P2p::on;
  CHECK_THAT(plan_args("llama-3.1-8b", m, l40s, s),
             Catch::Contains("--p2p on"));
  // PCIe L40S pair with P2P asserted: custom all-reduce (two GPUs) and two
  // NCCL channels on the GPU.
  const Budget b = test::budget(m, l40s, s);
  CHECK(b.vllm->p2p);
  CHECK(b.vllm->custom_all_reduce);
}

namespace {

// A GiB figure printed with a minus sign ("-60.92 GiB"): a negative byte count
// that reached the page.
bool prints_negative_gib(const std::string& text) {
  static const std::regex k_negative("-[0-9]+\\.[0-9]{2} GiB");
  return std::regex_search(text, k_negative);
}

}  // namespace

TEST_CASE(
    "vllm: when vLLM would refuse to start its KV pool is 0 in every "
    "rendering, with vLLM's reason",
    "[vllm]") {
  // Llama-3-70B in bf16 on one A100-80: 70,553,706,496 x 2 B + RoPE cache
  // 8192 x 128 x 2 B = 141,109,510,144 B of weights, while gpu-util asks for
  // 0.9 x 84,987,740,160 = 76,488,966,144 B. Requested less the weights is
  // -64.6 GB: there is no pool at all (vLLM fails while loading).
  const std::vector<std::string> args = {"llama-3-70b", "--gpus", "1xA100-80",
                                         "--engine", "vllm"};
  auto with = [&args](std::vector<std::string> extra) {
    std::vector<std::string> all = args;
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  };
  const auto j = test::run_cli(with({"--json"}));
  CHECK(j.code == 1);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  CHECK(doc["fits"] == false);
  CHECK(doc["vllm"]["weights_bytes"] == 141'109'510'144);
  CHECK(doc["vllm"]["requested_bytes"] == 76'488'966'144);
  CHECK(doc["vllm"]["kv_cache_bytes"] == 0);
  CHECK(doc["vllm"]["kv_tokens"] == 0);
  CHECK(doc["vllm"]["max_concurrency"] == 0.0);
  CHECK_THAT(doc["vllm"]["error"].get<std::string>(),
             Catch::StartsWith("torch.OutOfMemoryError: CUDA out of memory "
                               "while loading the model weights"));
  Bytes sum = 0;
  for (const auto& c : doc["components"]) {
    CHECK(c["bytes"].get<Bytes>() >= 0);
    if (c["name"] == "kv_cache") {
      CHECK(c["bytes"] == 0);
    }
    sum += c["bytes"].get<Bytes>();
  }
  CHECK(sum == doc["total_bytes"].get<Bytes>());
  // The advisor sees the refusing engine as not fitting and still searches.
  REQUIRE_FALSE(doc["fixes"].empty());
  CHECK(doc["fixes"][0]["fits"] == true);

  const auto text = test::run_cli(args);
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("DOES NOT FIT"));
  CHECK_THAT(text.out,
             Catch::Contains("  KV cache                             0.00 "
                             "GiB\n"));
  CHECK_THAT(text.out,
             Catch::Contains("vLLM would not start: torch.OutOfMemoryError"));
  CHECK_FALSE(prints_negative_gib(text.out));

  const auto md = test::run_cli(with({"--format", "markdown"}));
  CHECK(md.code == 1);
  CHECK_THAT(md.out, Catch::Contains("**Does not fit:**"));
  CHECK_THAT(md.out,
             Catch::Contains("vLLM would not start: torch.OutOfMemoryError"));
  CHECK_FALSE(prints_negative_gib(md.out));

  const auto svg = test::run_cli(with({"--format", "svg"}));
  CHECK(svg.code == 1);
  CHECK_THAT(svg.out, Catch::Contains("DOES NOT FIT"));
  CHECK_THAT(svg.out, Catch::Contains("vLLM would not start: "
                                      "torch.OutOfMemoryError"));
  CHECK_FALSE(prints_negative_gib(svg.out));
}

TEST_CASE(
    "vllm: weights within the card but past gpu-util leave no pool, and the "
    "plan does not fit",
    "[vllm]") {
  // Llama-3.1-8B on one RTX 4090 at gpu-util 0.3: 0.3 x 23.99 GiB = 7.2 GiB
  // requested, under the 14.99 GiB of weights; vLLM loads them (the card has
  // room) and then finds no memory for the cache blocks.
  const std::vector<std::string> args = {"llama-3.1-8b", "--gpus", "1xRTX4090",
                                         "--engine",     "vllm",   "--gpu-util",
                                         "0.3"};
  std::vector<std::string> json_args = args;
  json_args.emplace_back("--json");
  const auto j = test::run_cli(json_args);
  CHECK(j.code == 1);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  CHECK(doc["fits"] == false);
  CHECK(doc["vllm"]["kv_cache_bytes"] == 0);
  CHECK(doc["vllm"]["kv_tokens"] == 0);
  CHECK(doc["vllm"]["error"] ==
        "No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.");
  // Weights, profile peak, non-torch and graphs fit the card: the headroom
  // is positive, and the verdict names vLLM's refusal.
  CHECK(doc["headroom_bytes"].get<Bytes>() > 0);
  const auto text = test::run_cli(args);
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("but vLLM would not start: No available "
                                       "memory for the cache blocks"));
  CHECK_FALSE(prints_negative_gib(text.out));
}

namespace {

// Qwen/Qwen2.5-VL-7B-Instruct config.json (text and vision_config fields
// that matter); max_pixels 12,845,056 is its preprocessor_config.json.
oomplan::Model qwen25_vl_7b() {
  return oomplan::import_hf_config(
      R"({"model_type": "qwen2_5_vl", "hidden_size": 3584,
          "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "intermediate_size": 18944,
          "vocab_size": 152064, "tie_word_embeddings": false,
          "max_position_embeddings": 128000,
          "vision_config": {"depth": 32, "hidden_size": 1280,
            "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
            "out_hidden_size": 3584, "patch_size": 14,
            "spatial_merge_size": 2, "temporal_patch_size": 2}})",
      "qwen2.5-vl-7b/config.json");
}

}  // namespace

TEST_CASE("vllm: Qwen2.5-VL-7B profiles one 3584-pixel image in V1", "[vllm]") {
  Model m = qwen25_vl_7b();
  CHECK(m.vision_video);
  m.vision_video = false;  // images only; the video dummy is tested below
  // smart_resize to max_pixels: floor(sqrt(12,845,056) / 28) x 28 = 3,584
  // px a side -> 256 x 256 = 65,536 patches / 2² = 16,384 tokens.
  CHECK(m.vision_image_size == 3584);
  CHECK(vision_tokens_per_image(m) == 16384);
  // H100 V1 defaults: 1024 sequences, 8192 batched tokens. Encoder budget
  // max(8192, 16384) = 16384 -> 16384 // 16384 = 1 image.
  const VllmVisionProfile p =
      vllm_vision_profile(m, VllmVersion{0, 19, 0}, VllmEngine::v1, Dtype::bf16,
                          1, 1024, 8192, 32768);
  CHECK(p.encoder_budget == 16384);
  CHECK(p.items == 1);
  CHECK_FALSE(p.video);
  CHECK(p.patches_per_item == 65536);
  // Tower: 65,536 patches x (3 x 1280 + max(gate_up + SiLU 3 x 3420, qkv +
  // out 4 x 1280)) x 2 B = 65,536 x 14,100 x 2 = 1,848,115,200 B.
  CHECK(p.tower_bytes == 1'848'115'200);
  // fp32 pixels: 65,536 x (3 x 2 x 14²) x 4 B = 308,281,344 B.
  CHECK(p.pixel_bytes == 308'281'344);
  // Encoder cache: 16,384 tokens x 3,584 x 2 B = 117,440,512 B.
  CHECK(p.encoder_cache == 117'440'512);
  // At TP2 the tower's MLP halves: 65,536 x (3,840 + 5,130) x 2 B.
  CHECK(vllm_vision_profile(m, VllmVersion{0, 19, 0}, VllmEngine::v1,
                            Dtype::bf16, 2, 1024, 8192, 32768)
            .tower_bytes == 65536LL * (3840 + 5130) * 2);
}

TEST_CASE("vllm: Qwen-VL profiles a dummy video when it has more tokens",
          "[vllm]") {
  const Model m = qwen25_vl_7b();
  // A video at 3,584 px: each pair of frames (temporal_patch_size 2, odd
  // counts padded by one) is 65,536 patches, 16,384 tokens.
  // 0.19, max-model-len 32768: frames from 1 while the next fits 32,768
  // tokens: 2 -> 1 pair, 3 and 4 -> 2 pairs (32,768), 5 -> 3 pairs: 4
  // frames, 32,768 tokens > the image's 16,384, so V1 profiles the video.
  const VllmVisionProfile p =
      vllm_vision_profile(m, VllmVersion{0, 19, 0}, VllmEngine::v1, Dtype::bf16,
                          1, 1024, 8192, 32768);
  CHECK(p.video);
  CHECK(p.frames == 4);
  CHECK(p.tokens_per_item == 32768);
  CHECK(p.encoder_budget == 32768);  // max(8192, 32768)
  CHECK(p.items == 1);
  CHECK(p.patches_per_item == 131072);
  // 131,072 patches x 14,100 x 2 B; pixels 131,072 x 1,176 x 4 B; encoder
  // cache 32,768 x 3,584 x 2 B.
  CHECK(p.tower_bytes == 3'696'230'400);
  CHECK(p.pixel_bytes == 616'562'688);
  CHECK(p.encoder_cache == 234'881'024);
  // 0.19 at 128,000 tokens: 14 frames (the cap), 7 pairs = 114,688 tokens,
  // 458,752 patches x 28,200 B.
  const VllmVisionProfile long_ctx =
      vllm_vision_profile(m, VllmVersion{0, 19, 0}, VllmEngine::v1, Dtype::bf16,
                          1, 1024, 8192, 128000);
  CHECK(long_ctx.frames == 14);
  CHECK(long_ctx.tokens_per_item == 114688);
  CHECK(long_ctx.tower_bytes == 12'936'806'400);
  // Where max-model-len would take more, the caps bind: 262,144 tokens hold
  // 16 pairs (32 frames), but 0.19 stops at 14 frames and 0.8.5 at 16.
  CHECK(vllm_vision_profile(m, VllmVersion{0, 19, 0}, VllmEngine::v1,
                            Dtype::bf16, 1, 1024, 8192, 262144)
            .frames == 14);
  CHECK(vllm_vision_profile(m, VllmVersion{0, 8, 5}, VllmEngine::v1,
                            Dtype::bf16, 1, 1024, 8192, 262144)
            .frames == 16);
  // 0.8.5 counted frames from 0 in what the image leaves: at 32,768 that is
  // 16,384 tokens, 2 frames, 16,384 tokens: a tie, and the image wins.
  const VllmVisionProfile old =
      vllm_vision_profile(m, VllmVersion{0, 8, 5}, VllmEngine::v1, Dtype::bf16,
                          1, 1024, 8192, 32768);
  CHECK(old.frames == 2);
  CHECK_FALSE(old.video);
  CHECK(old.tokens_per_item == 16384);
  // 0.8.5 at 128,000: 111,616 tokens left hold 6 pairs (98,304): 12 frames
  // (13 would need 7 pairs), under the cap of 16; 393,216 patches.
  const VllmVisionProfile old_long =
      vllm_vision_profile(m, VllmVersion{0, 8, 5}, VllmEngine::v1, Dtype::bf16,
                          1, 1024, 8192, 128000);
  CHECK(old_long.video);
  CHECK(old_long.frames == 12);
  CHECK(old_long.tower_bytes == 393216LL * 14100 * 2);
  // V0 (0.7.3) puts one image and one 2-frame video in each dummy sequence:
  // 32,768 tokens, so 32,768 batched tokens make 1 sequence; both items'
  // pixels are held, the tower runs the larger (65,536 patches) at a time.
  const VllmVisionProfile v0 =
      vllm_vision_profile(m, VllmVersion{0, 7, 3}, VllmEngine::v0, Dtype::bf16,
                          1, 256, 32768, 32768);
  CHECK(v0.items == 1);
  CHECK(v0.tokens_per_item == 32768);
  CHECK(v0.pixel_bytes == 616'562'688);
  CHECK(v0.tower_bytes == 1'848'115'200);
}

TEST_CASE("vllm: 0.10 to 0.11.0 pad each encoder output to the budget",
          "[vllm]") {
  const Model& m = find_model(test::catalog(), "gemma-3-4b");
  // 8,192 batched tokens // 256 = 32 images of 256 tokens; 0.10.1 keeps
  // each as 8,192 rows of 2,560: 32 x 8,192 x 2,560 x 2 B.
  auto cache = [&m](VllmVersion version) {
    return vllm_vision_profile(m, version, VllmEngine::v1, Dtype::bf16, 1, 256,
                               8192, 32768)
        .encoder_cache;
  };
  CHECK(cache(VllmVersion{0, 10, 1}) == 1'342'177'280);
  CHECK(cache(VllmVersion{0, 11, 0}) == 1'342'177'280);
  // Before and after: 256 rows, 32 x 256 x 2,560 x 2 B.
  CHECK(cache(VllmVersion{0, 9, 2}) == 41'943'040);
  CHECK(cache(VllmVersion{0, 11, 1}) == 41'943'040);
  CHECK(cache(VllmVersion{0, 19, 0}) == 41'943'040);
}

TEST_CASE("vllm: V0 profiles batched // tokens images, V1 its encoder budget",
          "[vllm]") {
  const Model& m = find_model(test::catalog(), "gemma-3-4b");
  // (896 / 14)² = 4096 patches pooled 4 x 4 -> 256 tokens per image.
  CHECK(vision_tokens_per_image(m) == 256);
  // V0 (worker/model_runner.py _dummy_run): min(256 seqs, 32768 // 256 =
  // 128) = 128 sequences of one image each.
  const VllmVisionProfile v0 =
      vllm_vision_profile(m, VllmVersion{0, 7, 3}, VllmEngine::v0, Dtype::bf16,
                          1, 256, 32768, 32768);
  CHECK(v0.items == 128);
  CHECK(v0.encoder_budget == 0);
  CHECK(v0.encoder_cache == 0);
  // 128 x 4096 = 524,288 patches x (3 x 1152 + 2 x 4304) x 2 B.
  CHECK(v0.tower_bytes == 12'650'020'864);
  CHECK(v0.pixel_bytes == 524'288LL * 3 * 14 * 14 * 4);
  // V1 (0.19, 8192 tokens): budget 8192 // 256 = 32 images (per prompt
  // min(999, 32768 // 256) = 128, x 256 sequences: no cap).
  const VllmVisionProfile v1 =
      vllm_vision_profile(m, VllmVersion{0, 19, 0}, VllmEngine::v1, Dtype::bf16,
                          1, 256, 8192, 32768);
  CHECK(v1.items == 32);
  CHECK(v1.tower_bytes == 3'162'505'216);
  CHECK(v1.encoder_cache == 32LL * 256 * 2560 * 2);
  // A text-only model has no vision profile.
  CHECK(vllm_vision_profile(find_model(test::catalog(), "gemma-3-1b"),
                            VllmVersion{0, 19, 0}, VllmEngine::v1, Dtype::bf16,
                            1, 256, 8192, 32768)
            .items == 0);
}

TEST_CASE("vllm: Gemma 3 4B's V0 image profile overflows an L4 text fits on",
          "[vllm]") {
  const Catalog& cat = test::catalog();
  const Model& m = find_model(cat, "gemma-3-4b");
  Model text_only = m;
  text_only.vision_layers = 0;
  const Gpu& g = find_gpu(cat, "L4");
  Setup s;
  s.engine = Engine::vllm;
  s.vllm_release = VllmVersion{0, 7, 3};  // V0: one prompt of 32768 tokens
  s.max_model_len = 32768;
  const Budget text = memory(text_only, g, resolve(text_only, g, s));
  const Budget mm = memory(m, g, resolve(m, g, s));
  CHECK(text.fits());
  CHECK_FALSE(mm.fits());
  // The activation peak is the tower over 128 images (12.65 GB) plus the
  // fp32 pixels (1.23 GB), above the text profile.
  CHECK(mm.vllm->activation_peak_bytes == 12'650'020'864 + 1'233'125'376);
  CHECK(text.vllm->activation_peak_bytes < 4 * k_gib);
}

TEST_CASE("vllm: the report names the multimodal dummies it assumed",
          "[vllm]") {
  // Gemma 3 27B on an H100 with 0.10.1 (V1, 8192 batched tokens): 8192 //
  // 256 = 32 images, each kept as 8192 rows (the 0.10-0.11.0 padding).
  const auto r = test::run_cli({"gemma-3-27b", "--gpus", "1xH100", "--engine",
                                "vllm", "--vllm-version", "0.10.1"});
  CHECK_THAT(r.out, Catch::Contains("  multimodal dummies: 32 images of 256 "
                                    "tokens (4096 patches each), encoder "
                                    "cache 32 x 8192 rows\n"));
  // The same in JSON: 32 x 8192 x 5376 x 2 B of encoder cache.
  const auto j = test::run_cli({"gemma-3-27b", "--gpus", "1xH100", "--engine",
                                "vllm", "--vllm-version", "0.10.1", "--json"});
  const auto mm = nlohmann::json::parse(j.out).at("vllm").at("multimodal");
  CHECK(mm.at("items") == 32);
  CHECK(mm.at("video") == false);
  CHECK(mm.at("encoder_rows") == 8192);
  CHECK(mm.at("encoder_cache_bytes") == 2'818'572'288LL);
  // A text-only model has none.
  const auto text = test::run_cli(
      {"llama3-8b", "--gpus", "1xH100", "--engine", "vllm", "--json"});
  CHECK(nlohmann::json::parse(text.out).at("vllm").at("multimodal").is_null());
}

namespace {

Model llama32_vision_11b() {
  const std::string path =
      std::string(OOMPLAN_TEST_DATA) + "/hf/llama-3.2-11b-vision/config.json";
  return oomplan::import_hf_config(test::read_required_file(path), path);
}

}  // namespace

TEST_CASE("vllm: mllama's V0 profile runs max-num-seqs tiled images at once",
          "[vllm]") {
  const Model m = llama32_vision_11b();
  CHECK(m.vision_max_tiles == 4);
  CHECK(m.vision_layers == 40);  // 32 local + 8 global
  CHECK(m.vision_intermediate_layers == 5);
  // 0.8.5 V0 (EncoderDecoderModelRunner), 256 sequences of one 4-tile image:
  // a tile is (560 / 14)² + 1 = 1,601 patches (6,404 encoder tokens an
  // image), padded to 1,608: L = 6,432.
  const VllmVisionProfile p = vllm_vision_profile(
      m, VllmVersion{0, 8, 5}, VllmEngine::v0, Dtype::bf16, 1, 256, 5120, 4096);
  CHECK(p.items == 256);
  CHECK(p.tokens_per_item == 6404);
  CHECK(p.patches_per_item == 6432);
  // fp32 pixels: 256 x 4 x 3 x 560² x 4 B.
  CHECK(p.pixel_bytes == 3'853'516'800);
  // Per image: the L² mask 41,370,624 + 5 kept layer outputs 5 x 6,432 x
  // 1,280 = 41,164,800 + one layer 6,432 x (3 x 1,280 + 2 x 5,120) =
  // 90,562,560 -> 173,097,984 x 2 B, x 256.
  CHECK(p.tower_bytes == 88'626'167'808);
  // Cross-attention states 256 x 6,404 x 4,096 x 2 B; one cross layer's K
  // and V: 256 x 6,404 x 2 x 8 x 128 x 2 B (1,639,424 tokens x 8,192 B
  // and x 4,096 B).
  CHECK(p.encoder_cache == 13'430'161'408);
  CHECK(p.cross_kv_bytes == 6'715'080'704);
  // TP 2 halves the layer's MLP (5,120) and the KV heads (4), not the mask.
  const VllmVisionProfile tp2 = vllm_vision_profile(
      m, VllmVersion{0, 8, 5}, VllmEngine::v0, Dtype::bf16, 2, 256, 5120, 4096);
  CHECK(tp2.tower_bytes ==
        256LL * 2 * (41'370'624 + 41'164'800 + 6432LL * (3840 + 5120)));
  CHECK(tp2.cross_kv_bytes == p.cross_kv_bytes / 2);
  // V1 never ran it.
  CHECK(vllm_vision_profile(m, VllmVersion{0, 11, 0}, VllmEngine::v1,
                            Dtype::bf16, 1, 256, 8192, 4096)
            .items == 0);
}

TEST_CASE("vllm: Llama 3.2 Vision needs fewer sequences, and no 0.11",
          "[vllm]") {
  // The tower over 256 images (86.13 GiB with the pixels) does not fit an
  // A100-80 on 0.8.5; vLLM's docs serve it with --max-num-seqs 16.
  const auto path =
      std::string(OOMPLAN_TEST_DATA) + "/hf/llama-3.2-11b-vision/config.json";
  const auto full =
      test::run_cli({path, "--gpus", "1xA100-80", "--engine", "vllm",
                     "--vllm-version", "0.8.5", "--json"});
  CHECK(full.code == 1);
  const auto j = nlohmann::json::parse(full.out).at("vllm");
  CHECK(j.at("activation_peak_bytes") == 88'626'167'808LL + 3'853'516'800LL);
  CHECK(j.at("multimodal").at("items") == 256);
  const auto few =
      test::run_cli({path, "--gpus", "1xA100-80", "--engine", "vllm",
                     "--vllm-version", "0.8.5", "--max-num-seqs", "16"});
  CHECK(few.code == 0);
  // From 0.11 vLLM has no mllama.
  const auto now =
      test::run_cli({path, "--gpus", "1xH100", "--engine", "vllm"});
  CHECK(now.code == 1);
  CHECK_THAT(now.out, Catch::Contains("vLLM would not start: vLLM 0.11 removed "
                                      "mllama with V0's encoder-decoder "
                                      "runner (#24907); plan it with "
                                      "--vllm-version 0.10"));
}

TEST_CASE("vllm: the multimodal line names images, videos or V0 sequences",
          "[vllm]") {
  // A Qwen2.5-VL entry (tests/data/catalog-vision): at max-model-len 4096 a
  // 1-frame video ties the image (16,384 tokens) and V1 profiles the image;
  // at 32768 a 4-frame video wins; V0 (0.7.3) puts both in one sequence.
  const std::string dir = std::string(OOMPLAN_TEST_DATA) + "/catalog-vision";
  auto line = [&dir](std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "my-qwen2.5-vl-7b", "--gpus", "1xH100", "--engine", "vllm",
        "--catalog",        dir};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string out = test::run_cli(args).out;
    const auto at = out.find("  multimodal dummies:");
    return at == std::string::npos ? std::string()
                                   : out.substr(at, out.find('\n', at) - at);
  };
  CHECK(line({}) ==
        "  multimodal dummies: 1 image of 16384 tokens (65536 patches each), "
        "encoder cache 1 x 16384 rows");
  CHECK(line({"--max-model-len", "32768"}) ==
        "  multimodal dummies: 1 4-frame video of 32768 tokens (131072 "
        "patches each), encoder cache 1 x 32768 rows");
  CHECK(line({"--max-model-len", "32768", "--vllm-version", "0.7.3"}) ==
        "  multimodal dummies: 1 sequence of an image and a 2-frame video of "
        "32768 tokens (131072 patches each)");
}

TEST_CASE("vllm: the A100 test is a case-blind substring of either name",
          "[vllm]") {
  // get_batch_defaults: "a100" in torch.cuda.get_device_name().lower();
  // 1024 sequences on other cards of 70 GiB and more (0.19, V1).
  auto seqs = [](std::string name, std::string full_name) {
    Gpu g;
    g.name = std::move(name);
    g.full_name = std::move(full_name);
    g.capacity_bytes = 80 * k_gib;
    return vllm_default_max_num_seqs(g, VllmVersion{0, 19, 0}, VllmEngine::v1);
  };
  CHECK(seqs("A100-80", "NVIDIA A100-SXM4-80GB") == 256);
  CHECK(seqs("x", "nvidia a100 80gb") == 256);
  CHECK(seqs("my-a100", "") == 256);
  CHECK(seqs("my-A100", "NVIDIA Custom") == 256);  // the catalog name counts
  CHECK(seqs("AA1", "A A10 A1000") == 256);        // "a1000" holds "a100"
  CHECK(seqs("H100", "NVIDIA H100 80GB HBM3") == 1024);
  CHECK(seqs("A10-big", "NVIDIA A10") == 1024);
  CHECK(seqs("A", "a") == 1024);  // shorter than the word
}
