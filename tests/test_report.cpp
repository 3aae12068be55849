// Rendering a hand-built Plan: exact text, JSON keys and types, Markdown.
// The Plan is built by hand (not by memory()) so these tests pin the report
// alone; the numbers are whole GiB so each rendered figure is checkable.

#include "support.hpp"

#include "oomplan/render/report.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

namespace {

using namespace oomplan;
using nlohmann::json;

Model toy_model() {
  Model m;
  m.name = "toy-7b";
  m.hf_id = "example/toy-7b";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 14336;
  m.vocab_size = 32000;
  m.max_position_embeddings = 8192;
  return m;
}

Gpu toy_gpu() {
  Gpu g;
  g.name = "G80";
  g.capacity_bytes = 80 * k_gib;
  g.common = true;
  return g;
}

const Model k_model = toy_model();
const Gpu k_gpu = toy_gpu();

// 2 x G80, tp 2, seq 8192: weights 7 GiB + KV 2 GiB + overhead 0.5 GiB =
// 9.5 GiB of 80 GiB (11.9 %), 70.5 GiB headroom (88.1 %).
Plan fitting_plan() {
  Plan plan;
  plan.model = &k_model;
  plan.gpu = &k_gpu;
  plan.model_arg = "toy";
  plan.setup.gpus = 2;
  plan.setup.tp = 2;
  plan.setup.seq = 8192;
  plan.setup.max_model_len = 8192;
  Budget& b = plan.budget;
  b.capacity_bytes = 80 * k_gib;
  b.usable_bytes = 80 * k_gib;
  b.add("weights", 7 * k_gib, "params / tp x 2 B");
  b.add("kv_cache", 2 * k_gib, "2 x layers x kv_heads x head_dim x 2 B x seq");
  b.add("overhead", k_gib / 2, "CUDA context + cuBLAS + NCCL");
  b.peak = {.allocated_bytes = 9 * k_gib,
            .reserved_bytes = 9 * k_gib,
            .device_bytes = 9 * k_gib + k_gib / 2,
            .phase = Phase::prefill};
  return plan;
}

// The same card, 100 GiB of weights: 20 GiB over.
Plan failing_plan() {
  Plan plan = fitting_plan();
  plan.budget = Budget{};
  Budget& b = plan.budget;
  b.capacity_bytes = 80 * k_gib;
  b.usable_bytes = 80 * k_gib;
  b.add("weights", 100 * k_gib, "params / tp x 2 B");
  b.peak = {.allocated_bytes = 100 * k_gib,
            .reserved_bytes = 100 * k_gib,
            .device_bytes = 100 * k_gib,
            .phase = Phase::load};
  Fix fix;
  fix.rank = 1;
  fix.id = "quantize-4bit";
  fix.group = FixGroup::same_hardware;
  fix.title = "Quantize the weights to 4 bits (AWQ)";
  fix.request = plan.request;
  fix.request.quant = Quant::awq;
  fix.setup = plan.setup;
  fix.setup.quant = Quant::awq;
  fix.total_bytes = 30 * k_gib;
  fix.fits = true;
  fix.saves_bytes = 70 * k_gib;
  fix.risk = Risk::moderate;
  fix.cost = "moderate accuracy risk (4-bit AWQ weights)";
  fix.launch = {{"vLLM", "--quantization awq", ""}};
  plan.fixes.push_back(fix);
  return plan;
}

}  // namespace

TEST_CASE("report: text shows the setup, the per-GPU table and the verdict",
          "[report]") {
  const std::string expected =
      // 32 x (4 x 4096^2 x 10/16 [q,o full; k,v at 8/32 heads] +
      // 3 x 4096 x 14336 + 2 x 4096 [norms]) + 2 x 32000 x 4096 + 4096
      // = 7,241,732,096 parameters.
      "toy-7b (7.24B params, catalog) on 2 x G80: infer (hf), seq 8192, batch "
      "1, "
      "bf16, weights bf16, kv bf16, tp 2, pp 1, dp 1, attn flash\n"
      "\n"
      "per GPU               GiB   of card\n"
      "  weights            7.00     8.8 %  ██░░░░░░░░░░░░░░░░░░\n"
      "  kv_cache           2.00     2.5 %  █░░░░░░░░░░░░░░░░░░░\n"
      "  overhead           0.50     0.6 %  ░░░░░░░░░░░░░░░░░░░░\n"
      "  total              9.50    11.9 %  ██░░░░░░░░░░░░░░░░░░\n"
      "  capacity          80.00   100.0 %\n"
      "\n"
      "FITS: 9.50 GiB of 80.00 GiB per GPU, 70.50 GiB headroom (88.1 % of "
      "usable)\n"
      "peak at prefill: 9.00 GiB allocated (torch max_memory_allocated), "
      "9.00 GiB reserved (max_memory_reserved), 9.50 GiB on the device "
      "(nvidia-smi)\n";
  CHECK(render_text(fitting_plan(), {}) == expected);
}

TEST_CASE("report: a plan that does not fit shows the shortfall and the fixes",
          "[report]") {
  const std::string text = render_text(failing_plan(), {});
  // 100 GiB needed - 80 GiB usable = 20 GiB over.
  CHECK_THAT(text,
             Catch::Contains("DOES NOT FIT: needs 100.00 GiB per GPU, 20.00 "
                             "GiB over the 80.00 GiB usable\n"));
  CHECK_THAT(text, Catch::Contains("fixes, best first"));
  CHECK_THAT(text, Catch::Contains("   #       new peak  fits  fix\n"
                                   "  on the same GPUs, the same job:\n"
                                   "   1      30.00 GiB  yes   Quantize the "
                                   "weights to 4 bits (AWQ)\n"
                                   "                           cost: moderate "
                                   "accuracy risk (4-bit AWQ weights)\n"
                                   "                           oomplan toy"));
  CHECK_THAT(text, Catch::Contains("\n                           vLLM: "
                                   "--quantization awq\n"));
}

TEST_CASE("report: colour codes appear only when asked for", "[report]") {
  const Plan plan = failing_plan();
  CHECK(render_text(plan, {.color = false}).find('\x1b') == std::string::npos);
  const std::string coloured = render_text(plan, {.color = true});
  CHECK_THAT(coloured, Catch::Contains("\x1b[1;31mDOES NOT FIT:\x1b[0m"));
  CHECK_THAT(coloured, Catch::Contains("\x1b[1;32myes\x1b[0m"));
  CHECK(render_json(plan).find('\x1b') == std::string::npos);
  CHECK(render_markdown(plan).find('\x1b') == std::string::npos);
}

TEST_CASE("report: JSON carries every oomplan.plan/1 key with integer bytes",
          "[report]") {
  const json doc = json::parse(render_json(failing_plan()));
  for (const char* key :
       {"schema", "model", "gpu", "setup", "components", "total_bytes",
        "usable_bytes", "fits", "headroom_bytes", "host_bytes", "warnings",
        "fixes", "peak"}) {
    INFO(key);
    CHECK(doc.contains(key));
  }
  CHECK(doc["schema"] == "oomplan.plan/1");
  CHECK(doc["model"]["name"] == "toy-7b");
  CHECK(doc["model"]["params"] == 7'241'732'096);
  CHECK(doc["gpu"]["name"] == "G80");
  CHECK(doc["gpu"]["count"] == 2);
  CHECK(doc["gpu"]["capacity_bytes"] == 80 * k_gib);
  for (const char* key : {"mode", "engine", "seq", "batch", "dtype", "quant",
                          "kv_dtype", "tp", "pp", "dp", "zero"}) {
    INFO(key);
    CHECK(doc["setup"].contains(key));
  }
  CHECK(doc["setup"]["tp"] == 2);
  CHECK(doc["setup"]["dp"] == 1);
  CHECK(doc["setup"]["quant"] == "none");
  CHECK(doc["components"][0]["name"] == "weights");
  CHECK(doc["components"][0]["bytes"].is_number_integer());
  CHECK(doc["components"][0]["bytes"] == 100 * k_gib);
  CHECK(doc["total_bytes"].is_number_integer());
  CHECK(doc["headroom_bytes"] == -20 * k_gib);
  CHECK(doc["fits"] == false);
  const json& fix = doc["fixes"][0];
  for (const char* key : {"rank", "id", "title", "group", "args", "argv",
                          "total_bytes", "fits", "saves_bytes", "step_factor",
                          "host_bytes", "host_capacity_bytes", "cost"}) {
    INFO(key);
    CHECK(fix.contains(key));
  }
  CHECK(fix["id"] == "quantize-4bit");
  CHECK(fix["group"] == "same-hardware");
  CHECK(fix["argv"].front() == "toy");
  CHECK(fix["saves_bytes"] == 70 * k_gib);
  CHECK(doc["peak"]["allocated_bytes"] == 100 * k_gib);
  CHECK(doc["peak"]["phase"] == "load");
  // Neither pipeline stages nor a vLLM profile in this plan.
  CHECK_FALSE(doc.contains("stages"));
  CHECK_FALSE(doc.contains("vllm"));
}

TEST_CASE("report: stages and the vLLM profile appear when the setup has them",
          "[report]") {
  Plan plan = fitting_plan();
  plan.setup.engine = Engine::vllm;
  plan.setup.tp = 1;
  plan.setup.pp = 2;
  plan.budget.stages = {
      {.stage = 0,
       .layers = 16,
       .weights_bytes = 4 * k_gib,
       .total_bytes = 5 * k_gib},
      {.stage = 1,
       .layers = 16,
       .weights_bytes = 3 * k_gib,
       .total_bytes = 4 * k_gib},
  };
  VllmProfile v;
  v.requested_bytes = 72 * k_gib;  // 0.9 x 80 GiB
  v.weights_bytes = 4 * k_gib;
  v.kv_cache_bytes = 60 * k_gib;
  v.kv_bytes_per_token = 65'536;  // 32 layers x 2 x 4 kv heads x 128 x 2 B
  v.kv_tokens = 983'040;          // 60 GiB / 64 KiB
  v.max_concurrency = 120.0;      // 983,040 / 8,192
  v.max_model_len_fit = 8192;
  plan.budget.vllm = v;

  const json doc = json::parse(render_json(plan));
  REQUIRE(doc.contains("stages"));
  CHECK(doc["stages"].size() == 2);
  CHECK(doc["stages"][1]["layers"] == 16);
  CHECK(doc["stages"][1]["weights_bytes"] == 3 * k_gib);
  REQUIRE(doc.contains("vllm"));
  CHECK(doc["vllm"]["kv_tokens"] == 983'040);
  CHECK(doc["vllm"]["max_concurrency"] == Approx(120.0));
  CHECK(doc["vllm"]["error"].is_null());

  const std::string text = render_text(plan, {});
  CHECK_THAT(text, Catch::Contains("vLLM start-up profile"));
  CHECK_THAT(text, Catch::Contains("  KV tokens                          "
                                   "983040 (at 65536 B per token per GPU)"));
  CHECK_THAT(text, Catch::Contains("stage"));

  plan.budget.vllm->error = "No available memory for the cache blocks";
  const json failed = json::parse(render_json(plan));
  CHECK(failed["vllm"]["error"] == "No available memory for the cache blocks");
  // Within the card (9.5 of 80 GiB) yet vLLM refuses to start: not a fit.
  CHECK_FALSE(plan.budget.fits());
  CHECK_THAT(render_text(plan, {}),
             Catch::Contains("DOES NOT FIT: 9.50 GiB of 80.00 GiB per GPU, but "
                             "vLLM would not start: No available memory for "
                             "the cache blocks\n"));
}

TEST_CASE("report: each warning bit becomes one sentence", "[report]") {
  Plan plan = fitting_plan();
  CHECK(warning_texts(plan).empty());
  plan.budget.warnings = static_cast<unsigned>(Warning::no_nvlink) |
                         static_cast<unsigned>(Warning::seq_beyond_context);
  plan.setup.seq = 16384;
  const auto texts = warning_texts(plan);
  REQUIRE(texts.size() == 2);
  CHECK_THAT(texts[0], Catch::StartsWith("G80 cards have no NVLink"));
  CHECK(texts[1] ==
        "--seq 16384 is beyond the model's 8192-token context "
        "(max_position_embeddings)");
  CHECK_THAT(render_text(plan, {}), Catch::Contains("warnings:\n  - G80"));

  // vLLM sizes for --max-model-len, so the warning names that option.
  plan.setup.engine = Engine::vllm;
  plan.setup.max_model_len = 32768;
  CHECK(warning_texts(plan)[1] ==
        "--max-model-len 32768 is beyond the model's 8192-token context "
        "(max_position_embeddings)");
  plan.setup.engine = Engine::hf;

  // Every bit yields its own sentence.
  plan.budget.warnings = ~0U;
  CHECK(warning_texts(plan).size() == 11);  // Warning has eleven bits
}

TEST_CASE("report: markdown renders the budget as a table for PR comments",
          "[report]") {
  const std::string md = render_markdown(fitting_plan());
  CHECK_THAT(md, Catch::StartsWith("### oomplan: toy-7b on 2 x G80\n"));
  CHECK_THAT(md, Catch::Contains("| component (per GPU) | GiB | of card | "
                                 "formula |\n|---|---:|---:|---|\n"));
  CHECK_THAT(md,
             Catch::Contains("| weights | 7.00 | 8.8 % | `params / tp x 2 B` "
                             "|\n"));
  CHECK_THAT(md, Catch::Contains("| **total** | **9.50** | **11.9 %** | |\n"));
  CHECK_THAT(md, Catch::Contains("**Fits:** 9.50 GiB of 80.00 GiB per GPU"));
  Plan piped = fitting_plan();
  piped.budget.components[0].formula = "a | b";
  CHECK_THAT(render_markdown(piped), Catch::Contains("| `a \\| b` |"));
  const std::string failing = render_markdown(failing_plan());
  CHECK_THAT(failing,
             Catch::Contains("| 1 | same-hardware | Quantize the weights to 4 "
                             "bits (AWQ) | 30.00 | yes | moderate accuracy "
                             "risk (4-bit AWQ weights) |"));
}

TEST_CASE("report: the catalog lists render as tables and JSON", "[report]") {
  Catalog catalog;
  catalog.models.push_back(k_model);
  catalog.gpus.push_back(k_gpu);
  catalog.instances.push_back({.name = "box.8x", .gpu = "G80", .count = 8});
  CHECK_THAT(render_models_text(catalog), Catch::Contains("toy-7b"));
  const json models = json::parse(render_models_json(catalog));
  CHECK(models["schema"] == "oomplan.models/1");
  CHECK(models["models"][0]["params"] == 7'241'732'096);
  const json gpus = json::parse(render_gpus_json(catalog));
  CHECK(gpus["gpus"][0]["capacity_bytes"] == 80 * k_gib);
  CHECK(gpus["instances"][0]["count"] == 8);
  CHECK_THAT(render_gpus_text(catalog), Catch::Contains("box.8x"));
}

TEST_CASE(
    "report: a plan within the card but over the node's CPU RAM says so, with "
    "no negative figure",
    "[report]") {
  // 9.5 GiB of 80 GiB on the GPU (70.5 GiB headroom), while the offload needs
  // 100 GiB of CPU RAM on a 64 GiB node: 36 GiB over.
  Plan plan = fitting_plan();
  plan.budget.host_bytes = 100 * k_gib;
  plan.budget.host_capacity_bytes = 64 * k_gib;
  plan.budget.warnings = static_cast<unsigned>(Warning::host_memory);
  REQUIRE_FALSE(plan.budget.fits());
  const std::string verdict =
      "9.50 GiB of 80.00 GiB per GPU, but offloading needs 100.00 GiB of CPU "
      "RAM per node, 36.00 GiB over the node's 64.00 GiB";
  const std::string text = render_text(plan, {});
  CHECK_THAT(text, Catch::Contains("DOES NOT FIT: " + verdict + "\n"));
  CHECK_THAT(text, !Catch::Contains("-70.50"));
  CHECK_THAT(render_markdown(plan),
             Catch::Contains("**Does not fit:** " + verdict + "\n"));

  // Over the card as well: the GPU shortfall first, then the host's.
  plan.budget.usable_bytes = 8 * k_gib;
  CHECK_THAT(render_text(plan, {}),
             Catch::Contains("DOES NOT FIT: needs 9.50 GiB per GPU, 1.50 GiB "
                             "over the 8.00 GiB usable; offloading needs "
                             "100.00 GiB of CPU RAM per node, 36.00 GiB over "
                             "the node's 64.00 GiB\n"));
}
