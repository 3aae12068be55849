// The plan pipeline (plan.hpp) and the option table (options.hpp): resolve,
// the one check(), and the rules and constants users depend on, each against
// a value from outside the code (hand arithmetic, a published log, the
// contract's text). tests/mutate.sh flips each of these rules and constants
// and expects a test here (or elsewhere in the suite) to fail.

#include "support.hpp"

#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <string>

namespace {

using namespace oomplan;

const Model& catalog_model(const char* name) {
  return find_model(test::catalog(), name);
}

const Gpu& catalog_gpu(const char* name) {
  return find_gpu(test::catalog(), name);
}

// A two-layer toy and a card sized to leave exactly `headroom_share` of it
// free for `setup`'s total.
Model toy() {
  Model m;
  m.name = "toy";
  m.model_type = "llama";
  m.hidden_size = 1024;
  m.num_layers = 2;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 4096;
  m.vocab_size = 1000;
  m.max_position_embeddings = 4096;
  return m;
}

// The "Free memory on device (F/C GiB)" figure of a vLLM start-up error.
double startup_free_gib(const std::string& error) {
  const std::string key = "Free memory on device (";
  const auto at = error.find(key);
  REQUIRE(at != std::string::npos);
  double free = 0;
  const char* begin = error.data() + at + key.size();
  std::from_chars(begin, error.data() + error.size(), free);
  return free;
}

}  // namespace

TEST_CASE(
    "plan: DeepSeek-V3's FP8 checkpoint carries 128x128 block scales on "
    "every path",
    "[plan]") {
  const Model& m = catalog_model("deepseek-v3");
  const Gpu& g = catalog_gpu("H200");
  // By hand from config.json (h 7168, 61 layers, 3 dense, 256 experts + 1
  // shared of 2048, dense MLP 18432, MLA q_lora 1536, kv_lora 512, rope 64,
  // nope 128, v 128, 128 heads, vocab 129280):
  //   attention per layer 7168 x 1536 + 1536 x 128 x 192 + 7168 x 576
  //     + 512 x 128 x 256 + 128 x 128 x 7168 = 187,105,280; x 61
  //     = 11,413,422,080
  //   dense MLP 3 x 3 x 7168 x 18432 = 1,189,085,184
  //   MoE 58 x 257 x 3 x 7168 x 2048 = 656,463,101,952
  //   fp8 linear L = 669,065,609,216, one fp32 scale per 128 x 128 block:
  //     L x (1 + 4 / 16384) = 669,065,609,216 + 163,346,096
  //   bf16: router 58 x 256 x 7168 = 106,430,464, its bias 58 x 256 = 14,848,
  //     embedding + lm_head 2 x 129280 x 7168 = 1,853,358,080, norms
  //     61 x (2 x 7168 + 1536 + 512) + 7168 = 1,006,592: 1,960,809,984 x 2 B
  //   = 669,228,955,312 + 3,921,619,968 = 673,150,575,280 B
  // (per-row scales instead would give 673,360,591,689 B).
  constexpr Bytes k_weights = 673'150'575'280;
  for (const Quant quant : {Quant::automatic, Quant::fp8}) {
    INFO(quant_name(quant));
    const Budget b = test::budget(m, g, Setup{.quant = quant, .tp = 1});
    CHECK(b.bytes_of("weights") == k_weights);
  }
  // The same bytes through the command line.
  const auto r =
      test::run_cli({"deepseek-v3", "--gpus", "1xH200", "--tp", "1", "--json"});
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("components").at(0).at("name") == "weights");
  CHECK(doc.at("components").at(0).at("bytes").get<Bytes>() == k_weights);
  // fp8 on a checkpoint that is not DeepSeek's is vLLM's online per-tensor
  // quantization: one fp32 scale per output row, not per block.
  const Model& llama = catalog_model("llama-3.1-8b");
  const Budget fp8 = test::budget(llama, g, Setup{.quant = Quant::fp8});
  const Budget bf16 = test::budget(llama, g, Setup{});
  CHECK(fp8.bytes_of("weights") < bf16.bytes_of("weights"));
}

TEST_CASE(
    "options: a --gpu-util above 1 or not above 0 is refused in the contract's "
    "words",
    "[plan]") {
  Setup s;
  CHECK_THROWS_WITH(apply_option(s, "--gpu-util", "1.5"),
                    "--gpu-util 1.5 is out of range; use a fraction above 0 "
                    "and at most 1, e.g. 0.9");
  CHECK_THROWS_WITH(apply_option(s, "gpu_util", "0"),
                    "--gpu-util 0 is out of range; use a fraction above 0 and "
                    "at most 1, e.g. 0.9");
  apply_option(s, "--gpu-util", "1");
  CHECK(s.gpu_util == 1.0);
}

TEST_CASE("options: every row parses what it prints", "[plan]") {
  // Each value a row accepts comes back from plan_argv unchanged, and an
  // unknown option is named with a suggestion.
  const Model& m = catalog_model("llama3-8b");
  const Gpu& g = catalog_gpu("H100");
  Setup asked;
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"--mode", "full"},
           {"--seq", "2048"},
           {"--zero", "2"},
           {"--checkpointing", "full"},
           {"--loss", "chunked"},
           {"--optimizer", "adamw-8bit"}}) {
    apply_option(asked, flag, value);
  }
  asked.gpus = 8;
  const auto argv = plan_argv("llama3-8b", m, g, asked);
  CHECK(argv == std::vector<std::string>{
                    "llama3-8b", "--gpus", "8xH100-80", "--mode", "full",
                    "--seq", "2048", "--zero", "2", "--optimizer", "adamw-8bit",
                    "--checkpointing", "full", "--loss", "chunked"});
  CHECK_THROWS_WITH(apply_option(asked, "--chekpointing", "full"),
                    "unknown option '--chekpointing'; did you mean "
                    "--checkpointing?");
}

TEST_CASE("plan: check() names contradictions in the contract's words",
          "[plan]") {
  const Model& m = catalog_model("llama3-70b");
  const Gpu& g = catalog_gpu("A100-80");
  CHECK(check(m, g,
              Setup{.gpus = 4, .mode = Mode::full, .engine = Engine::vllm}) ==
        "--engine vllm serves models and cannot train (--mode full); use "
        "--engine hf for training or --mode infer with vllm");
  CHECK(check(m, g,
              Setup{.gpus = 4, .engine = Engine::vllm, .split_layers = true}) ==
        "--split layers is transformers' device_map=\"auto\" and does not "
        "apply to --engine vllm; use --tp or --pp");
  // Whole layers per GPU: a 2-layer model cannot spread over 4 GPUs.
  CHECK(check(toy(), g, Setup{.gpus = 4, .split_layers = true}) ==
        "--split layers puts whole layers on each GPU: 4 GPUs exceed the 2 "
        "layers of toy");
  CHECK_FALSE(check(toy(), g, Setup{.gpus = 2, .split_layers = true}));
  CHECK(check(m, g,
              Setup{.gpus = 8, .mode = Mode::full, .zero = 2, .fsdp = true}) ==
        "--fsdp shards like ZeRO stage 3 and contradicts --zero 2; drop --zero "
        "or use --zero 3");
  // Issue 10: "--offload params at ZeRO-0 silently does nothing". DeepSpeed
  // offloads inside its ZeRO optimizer only (offload_optimizer: stages 1-3,
  // offload_param: stage 3), so the setups it would ignore are refused.
  CHECK(
      check(m, g,
            Setup{.gpus = 8, .mode = Mode::full, .offload = Offload::params}) ==
      "--offload params needs ZeRO: DeepSpeed offloads only inside its ZeRO "
      "optimizer (stage 1 or more, parameters at stage 3); add --zero 3 or "
      "--fsdp");
  CHECK(check(m, g,
              Setup{.gpus = 8,
                    .mode = Mode::full,
                    .zero = 2,
                    .offload = Offload::all}) ==
        "--offload all moves the parameters only at ZeRO stage 3 "
        "(offload_param) or with --fsdp; at stage 2 use --offload optimizer, "
        "or add --zero 3");
  CHECK_FALSE(check(m, g,
                    Setup{.gpus = 8,
                          .mode = Mode::full,
                          .zero = 1,
                          .offload = Offload::optimizer}));
  CHECK_FALSE(check(m, g,
                    Setup{.gpus = 8,
                          .mode = Mode::full,
                          .fsdp = true,
                          .offload = Offload::all}));
  // Inference offload is accelerate's device_map, without ZeRO.
  CHECK_FALSE(check(m, g, Setup{.gpus = 1, .offload = Offload::params}));
  // price() says the same instead of a budget.
  const Pricing p =
      price(m, g, Setup{.gpus = 4, .mode = Mode::full, .engine = Engine::vllm});
  CHECK_FALSE(p.priced);
  CHECK_THAT(p.problem, Catch::StartsWith("--engine vllm serves models"));
}

TEST_CASE("plan: the low-headroom warning starts below 5 % of the card",
          "[plan]") {
  // The allocator's fragmentation varies by 2-5 % of the card around the
  // modelled mean (catalog_facts.md Part 3), so a plan within 5 % may still
  // OOM. Cards sized to leave 4 % and 6 % free for the same plan.
  const Model m = toy();
  Gpu g;
  g.name = "toy";
  g.compute_capability = 90;
  g.capacity_bytes = 80 * k_gib;
  const Setup s{.seq = 1024};
  const Bytes total = test::budget(m, g, s).total_bytes();
  for (const auto& [share, warned] : {std::pair{0.04, true}, {0.06, false}}) {
    INFO("headroom " << share);
    g.capacity_bytes =
        static_cast<Bytes>(static_cast<double>(total) / (1 - share));
    const Budget b = test::budget(m, g, s);
    REQUIRE(b.fits());
    CHECK(b.has(Warning::low_headroom) == warned);
  }
}

TEST_CASE("vllm: start-up free memory matches the v0.19 H100 logs", "[plan]") {
  // llm-d-planner's v0.19.0 H100 logs (tests/data/validation/public.json):
  // "Free memory on device (78.68/79.19 GiB) on startup" at TP1, 77.66 at
  // TP2, 77.64 at TP4, 77.71 at PP4: the CUDA context, plus NCCL when the
  // workers talk. gpu-util 0.999 asks for more, so vLLM prints the figure.
  const Model& m = catalog_model("llama-3.1-8b");
  const Gpu& g = catalog_gpu("H100");
  for (const auto& [tp, pp, free] :
       {std::tuple{1, 1, 78.68}, {2, 1, 77.66}, {4, 1, 77.64}, {1, 4, 77.71}}) {
    INFO("tp " << tp << " pp " << pp);
    const Budget b = test::budget(m, g,
                                  Setup{.gpus = tp * pp,
                                        .engine = Engine::vllm,
                                        .tp = tp,
                                        .pp = pp,
                                        .gpu_util = 0.999});
    REQUIRE(b.vllm.has_value());
    CHECK(startup_free_gib(b.vllm->error) == Approx(free).margin(0.06));
  }
}

TEST_CASE(
    "training: the caching-allocator reserve is 8 % of the allocated bytes",
    "[plan]") {
  // Reserved exceeds allocated by the caching allocator's block rounding and
  // cached segments: 8 % for training (torchtune's LoRA tutorial reports
  // reserved 7-9 % above its allocations), 5 % for inference (2-5 %,
  // catalog_facts.md Part 3). --reserve replaces either.
  const Model& m = catalog_model("llama-2-7b");
  const Gpu& g = catalog_gpu("A100-80");
  const Budget lora = test::budget(m, g, Setup{.mode = Mode::lora, .seq = 512});
  CHECK(lora.bytes_of("fragmentation") ==
        round_bytes(0.08 * static_cast<double>(lora.peak.allocated_bytes)));
  const Budget infer = test::budget(m, g, Setup{.seq = 512});
  CHECK(infer.bytes_of("fragmentation") ==
        round_bytes(0.05 * static_cast<double>(infer.peak.allocated_bytes)));
  const Budget set = test::budget(
      m, g, Setup{.mode = Mode::lora, .seq = 512, .reserve = 0.02});
  CHECK(set.bytes_of("fragmentation") ==
        round_bytes(0.02 * static_cast<double>(set.peak.allocated_bytes)));
}

TEST_CASE("plan: resolve derives each default from the model, card and setup",
          "[plan]") {
  const Model& m = catalog_model("llama3-70b");
  const Gpu& h100 = catalog_gpu("H100");
  // Inference spreads over a node's GPUs; training starts at tp 1.
  CHECK(resolve(m, h100, Setup{.gpus = 8}).tp == 8);
  CHECK(resolve(m, h100, Setup{.gpus = 8, .pp = 2}).tp == 4);
  CHECK(resolve(m, h100, Setup{.gpus = 8, .mode = Mode::full}).tp == 1);
  // --fsdp is ZeRO stage 3.
  CHECK(resolve(m, h100, Setup{.gpus = 8, .mode = Mode::full, .fsdp = true})
            .zero == 3);
  // auto: the checkpoint's format (gpt-oss MXFP4), NF4 under QLoRA.
  CHECK(resolve(catalog_model("gpt-oss-20b"), h100, Setup{}).quant ==
        Quant::mxfp4);
  CHECK(resolve(m, h100, Setup{.mode = Mode::qlora}).quant == Quant::nf4);
  CHECK(resolve(m, h100, Setup{}).kv_dtype == Dtype::bf16);
  CHECK(resolve(m, h100, Setup{.dtype = Dtype::fp16}).kv_dtype == Dtype::fp16);
}

TEST_CASE("plan_args: writes the GPUs and only the options that differ",
          "[plan]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const Gpu& a100 = find_gpu(cat, "A100-80");
  CHECK(plan_args("llama3-70b", model, a100, Setup{.gpus = 4, .seq = 8192}) ==
        "llama3-70b --gpus 4xA100-80 --seq 8192");
  CHECK(plan_args("llama3-70b", model, a100,
                  Setup{.gpus = 8,
                        .mode = Mode::full,
                        .zero = 3,
                        .checkpointing = Checkpointing::full}) ==
        "llama3-70b --gpus 8xA100-80 --mode full --zero 3 --checkpointing "
        "full");
  // tp other than the default and the vLLM options are written; a tp equal
  // to its default (4 GPUs: tp 4) and QLoRA's default nf4 are left out.
  CHECK(plan_args("llama3-70b", model, a100,
                  Setup{.gpus = 4,
                        .engine = Engine::vllm,
                        .tp = 2,
                        .gpu_util = 0.85,
                        .max_model_len = 2048}) ==
        "llama3-70b --gpus 4xA100-80 --engine vllm --tp 2 --gpu-util 0.85 "
        "--max-model-len 2048");
  CHECK(plan_args("llama3-70b", model, a100, Setup{.gpus = 4, .tp = 4}) ==
        "llama3-70b --gpus 4xA100-80");
  CHECK(plan_args("llama3-70b", model, a100,
                  Setup{.gpus = 2,
                        .mode = Mode::qlora,
                        .seq = 512,
                        .quant = Quant::nf4}) ==
        "llama3-70b --gpus 2xA100-80 --mode qlora --seq 512");
  // A path with a space is quoted for the shell.
  CHECK(plan_args("my models/config.json", model, a100, Setup{}) ==
        "'my models/config.json' --gpus 1xA100-80");
}

TEST_CASE("plan_args: each vLLM era's written version reads back to that era",
          "[plan]") {
  CHECK(vllm_era_version(VllmEra::v0) == "0.6");
  CHECK(vllm_era_version(VllmEra::v1_early) == "0.10");
  CHECK(vllm_era_version(VllmEra::current).empty());  // the default: unwritten
  for (const VllmEra era : {VllmEra::v0, VllmEra::v1_early}) {
    CHECK(vllm_era_from_text(vllm_era_version(era)) == era);
  }
}

TEST_CASE(
    "plan_args: an explicit max-model-len beyond the model's context is "
    "written, so the re-run line keeps vLLM's refusal",
    "[plan]") {
  // Llama-3-70B's context is 8192 tokens. Asked for 16384 explicitly, vLLM
  // refuses to start; left out, max-model-len derives to min(seq, 8192) and
  // the re-run line would plan a vLLM that starts.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const Gpu& h100 = find_gpu(cat, "H100");
  const Setup s{
      .gpus = 4, .engine = Engine::vllm, .seq = 16384, .max_model_len = 16384};
  CHECK(plan_args("llama3-70b", model, h100, s) ==
        "llama3-70b --gpus 4xH100-80 --engine vllm --seq 16384 "
        "--max-model-len 16384");
  const auto asked = test::run_cli(plan_argv("llama3-70b", model, h100, s));
  CHECK(asked.code == 1);
  CHECK_THAT(asked.out,
             Catch::Contains("User-specified max_model_len (16384) is greater "
                             "than the derived max_model_len"));
  // Equal to --seq within the context, it is what the default derives: left
  // out.
  CHECK(plan_args("llama3-70b", model, h100,
                  Setup{.gpus = 4,
                        .engine = Engine::vllm,
                        .seq = 2048,
                        .max_model_len = 2048}) ==
        "llama3-70b --gpus 4xH100-80 --engine vllm --seq 2048");
}
