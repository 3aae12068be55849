#include "support.hpp"

#include "oomplan/catalog.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/report.hpp"
#include "oomplan/search.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace {

using namespace oomplan;

std::vector<const Gpu*> gpus_named(const std::vector<std::string>& names) {
  std::vector<const Gpu*> out;
  for (const auto& name : names) {
    out.push_back(&find_gpu(test::catalog(), name));
  }
  return out;
}

std::vector<const Gpu*> all_gpus() {
  std::vector<const Gpu*> out;
  for (const Gpu& gpu : test::catalog().gpus) {
    out.push_back(&gpu);
  }
  return out;
}

// Every plan: re-priced by memory() to the same bytes, fits, respects the
// headroom asked for.
void check_priced(const Model& model, const FitResult& result,
                  double min_headroom_gib) {
  for (const FitPlan& p : result.plans) {
    INFO(plan_args(model.name, model, *p.gpu, p.request));
    REQUIRE(p.gpu != nullptr);
    CHECK_FALSE(check(model, *p.gpu, p.request));
    const Budget b = test::budget(model, *p.gpu, p.request);
    CHECK(b.total_bytes() == p.total_bytes);
    CHECK(b.headroom_bytes() == p.headroom_bytes);
    CHECK(b.fits());
    CHECK(p.fits);
    CHECK(static_cast<double>(p.headroom_bytes) >=
          min_headroom_gib * static_cast<double>(k_gib));
    CHECK(p.time.step_s > 0);
    CHECK(p.time.tokens_per_s > 0);
  }
}

}  // namespace

TEST_CASE("search: every plan was priced by memory() and fits", "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-8b");
  const auto result =
      fit(model, gpus_named({"RTX4090", "A100-80", "H100"}),
          Setup{.mode = Mode::full, .seq = 4096}, FitConstraints{});
  REQUIRE_FALSE(result.plans.empty());
  CHECK(result.plans.size() <= 10);
  CHECK(result.evaluated > static_cast<std::int64_t>(result.plans.size()));
  CHECK(result.front >= static_cast<std::int64_t>(result.plans.size()));
  check_priced(model, result, 0);
}

TEST_CASE("search: no kept plan is dominated by another of the same card",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  FitConstraints limits;
  limits.top = 1000;
  const auto result = fit(model, gpus_named({"A100-80", "L40S"}),
                          Setup{.mode = Mode::qlora, .seq = 2048}, limits);
  REQUIRE(result.plans.size() > 1);
  for (const FitPlan& a : result.plans) {
    for (const FitPlan& b : result.plans) {
      if (&a == &b || a.gpu != b.gpu) {
        continue;
      }
      const bool no_worse = a.setup.total_gpus() <= b.setup.total_gpus() &&
                            a.time.tokens_per_s >= b.time.tokens_per_s &&
                            a.headroom_bytes >= b.headroom_bytes;
      const bool better = a.setup.total_gpus() < b.setup.total_gpus() ||
                          a.time.tokens_per_s > b.time.tokens_per_s ||
                          a.headroom_bytes > b.headroom_bytes;
      CHECK_FALSE((no_worse && better));
    }
  }
}

TEST_CASE("search: constraints bound GPUs, offload, quantization and batch",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");

  SECTION("--max-gpus, --no-offload, --min-headroom, --global-batch") {
    FitConstraints limits;
    limits.max_gpus = 32;
    limits.no_offload = true;
    limits.min_headroom_gib = 4;
    limits.global_batch = 32;
    limits.top = 50;
    const auto result = fit(model, gpus_named({"H100", "A100-80"}),
                            Setup{.mode = Mode::full, .seq = 4096}, limits);
    REQUIRE_FALSE(result.plans.empty());
    check_priced(model, result, 4);
    for (const FitPlan& p : result.plans) {
      CHECK(p.setup.total_gpus() <= 32);
      CHECK(p.setup.offload == Offload::none);
      CHECK(p.setup.batch * p.setup.dp() * p.setup.grad_accum == 32);
    }
  }
  SECTION("--no-quant keeps 16-bit weights and KV cache") {
    FitConstraints limits;
    limits.no_quant = true;
    limits.top = 50;
    const auto result = fit(model, gpus_named({"L40S", "A100-80"}),
                            Setup{.engine = Engine::vllm, .seq = 8192}, limits);
    REQUIRE_FALSE(result.plans.empty());
    for (const FitPlan& p : result.plans) {
      CHECK(p.setup.quant == Quant::none);
      CHECK(p.setup.kv_dtype == p.setup.dtype);
    }
    // With quantization allowed, a smaller deployment becomes possible.
    limits.no_quant = false;
    const auto quantized =
        fit(model, gpus_named({"L40S", "A100-80"}),
            Setup{.engine = Engine::vllm, .seq = 8192}, limits);
    REQUIRE_FALSE(quantized.plans.empty());
    CHECK(quantized.plans.front().setup.total_gpus() <
          result.plans.front().setup.total_gpus());
  }
  SECTION("nothing fits: an empty front") {
    FitConstraints limits;
    limits.max_gpus = 1;
    limits.no_offload = true;
    limits.no_quant = true;
    const auto result =
        fit(model, gpus_named({"RTX4090"}), Setup{.mode = Mode::full}, limits);
    CHECK(result.plans.empty());
    CHECK(result.evaluated > 0);
    CHECK_THAT(render_fit_text(result, model, "llama3-70b"),
               Catch::Contains("no configuration fits within 1 GPUs"));
  }
}

TEST_CASE(
    "search: 70B full fine-tuning over every catalog GPU keeps plans that "
    "hold their model states",
    "[search]") {
  // Speed is measured by oomplan_bench (tests/bench_memory.cpp), not here.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const auto result =
      fit(model, all_gpus(), Setup{.mode = Mode::full, .seq = 8192},
          FitConstraints{});
  REQUIRE_FALSE(result.plans.empty());
  check_priced(model, result, 0);
  // 1.13 TB of mixed AdamW states need at least eight 80 GB-class cards
  // without offload.
  for (const FitPlan& p : result.plans) {
    if (p.setup.offload == Offload::none) {
      CHECK(static_cast<double>(p.setup.total_gpus()) *
                static_cast<double>(p.gpu->capacity_bytes) >
            1.13e12);
    }
  }
}

TEST_CASE("search: the JSON document follows oomplan.fit/1", "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-8b");
  const auto result =
      fit(model, gpus_named({"A100-80"}),
          Setup{.mode = Mode::lora, .seq = 2048}, FitConstraints{});
  REQUIRE_FALSE(result.plans.empty());
  const auto doc =
      nlohmann::json::parse(render_fit_json(result, model, "llama3-8b"));
  CHECK(doc.at("schema") == "oomplan.fit/1");
  REQUIRE(doc.at("plans").size() == result.plans.size());
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    const auto& j = doc.at("plans").at(i);
    const FitPlan& p = result.plans[i];
    CHECK(j.at("rank") == i + 1);
    CHECK(j.at("args") == plan_args("llama3-8b", model, *p.gpu, p.request));
    CHECK(j.at("gpu").at("name") == "A100-80");
    CHECK(j.at("gpu").at("count") == p.setup.total_gpus());
    CHECK(j.at("setup").at("mode") == "lora");
    CHECK(j.at("total_bytes").get<Bytes>() == p.total_bytes);
    CHECK(j.at("fits") == true);
    CHECK(j.at("step_time_s").get<double>() == Approx(p.time.step_s));
    CHECK(j.at("usd_per_mtok").is_null());
  }
  const std::string text = render_fit_text(result, model, "llama3-8b");
  CHECK_THAT(text, Catch::Contains("oomplan llama3-8b --gpus 1xA100-80"));
  const std::string md = render_fit_markdown(result, model, "llama3-8b");
  CHECK_THAT(md, Catch::Contains("| 1 | 1x A100-80 |"));
}

TEST_CASE("search: each plan's command line reproduces it through the CLI",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  for (const Setup& base :
       {Setup{.mode = Mode::full, .seq = 4096},
        Setup{.engine = Engine::vllm, .seq = 8192, .batch = 8},
        Setup{.seq = 4096, .batch = 4}}) {
    FitConstraints limits;
    limits.max_gpus = 16;
    const auto result =
        fit(model, gpus_named({"A100-80", "L40S", "RTX4090"}), base, limits);
    REQUIRE_FALSE(result.plans.empty());
    for (const FitPlan& p : result.plans) {
      const std::string args =
          plan_args("llama3-70b", model, *p.gpu, p.request);
      INFO(args);
      auto words = test::words(args);
      words.emplace_back("--json");
      const auto run = test::run_cli(words);
      REQUIRE(run.code == 0);
      const auto doc = nlohmann::json::parse(run.out);
      CHECK(doc.at("total_bytes").get<Bytes>() == p.total_bytes);
      CHECK(doc.at("fits") == true);
    }
  }
}

TEST_CASE("search: GPU counts are powers of two in a node, then whole nodes",
          "[search]") {
  CHECK(gpu_counts(64) ==
        std::vector<int>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64});
  CHECK(gpu_counts(6) == std::vector<int>{1, 2, 4});
  CHECK(gpu_counts(20) == std::vector<int>{1, 2, 4, 8, 16});
}
