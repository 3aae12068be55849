// The search (search.hpp) behind the advisor, sizing and `oomplan fit`:
// every result re-priced by the pipeline, the fewest GPUs, the counts it
// honours and the order it ranks in.

#include "support.hpp"

#include "oomplan/advice/search.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace oomplan;

std::vector<FitCard> cards_named(const std::vector<std::string>& names) {
  std::vector<FitCard> out;
  for (const auto& name : names) {
    out.push_back({&find_gpu(test::catalog(), name), 0, std::nullopt});
  }
  return out;
}

// Every plan: re-priced by the pipeline to the same bytes, fitting with its
// margin.
void check_priced(const Model& model, const FitResult& result) {
  for (const FitPlan& p : result.plans) {
    INFO(plan_args(model.name, model, *p.gpu, p.request));
    REQUIRE(p.gpu != nullptr);
    CHECK_FALSE(check(model, *p.gpu, p.request));
    const Budget b = test::budget(model, *p.gpu, p.request);
    CHECK(b.total_bytes() == p.total_bytes);
    CHECK(b.headroom_bytes() == p.headroom_bytes);
    CHECK(b.fits_with_margin());
    CHECK(p.fits);
    CHECK(p.time.step_s > 0);
    CHECK(p.time.tokens_per_s > 0);
  }
}

}  // namespace

TEST_CASE("search: gpu_counts are 1, 2, 4, 8, then whole nodes", "[search]") {
  CHECK(gpu_counts(64) ==
        std::vector<int>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64});
  CHECK(gpu_counts(3) == std::vector<int>{1, 2});
}

TEST_CASE("search: every fit plan was priced by the pipeline and fits",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-8b");
  for (const Setup& base :
       {Setup{.mode = Mode::full, .seq = 4096}, Setup{.seq = 8192, .batch = 8},
        Setup{.engine = Engine::vllm, .seq = 8192},
        Setup{.mode = Mode::qlora, .seq = 2048}}) {
    const auto result = fit(model, cards_named({"RTX4090", "A100-80", "H100"}),
                            base, FitConstraints{});
    REQUIRE_FALSE(result.plans.empty());
    CHECK(result.evaluated > 0);
    check_priced(model, result);
  }
}

TEST_CASE("search: the fewest GPUs of a card hold the job, one fewer does not",
          "[search]") {
  // Llama 3 70B full fine-tuning at 4k tokens on H100s without quantization
  // or offload: mixed-precision AdamW needs 16 B x 70.6B = 1.13 TB of model
  // states, more than 8 cards' 634 GiB: two nodes at least. On HF Trainer
  // (the stated default: no tensor parallelism, docs/advice.md) ZeRO-3
  // shards them over data parallelism alone: 1051 GiB / 16 = 65.7 GiB per
  // card plus buffers and activations is more than 16 H100s' 79.2 GiB keep
  // with the 5 % margin; / 24 = 43.8 GiB fits: three nodes.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const Gpu& h100 = find_gpu(cat, "H100");
  const Setup base{.mode = Mode::full, .seq = 4096};
  Searcher plain(
      model, base,
      SearchScope{.layouts = true, .quantize = false, .offload = false});
  const auto found = plain.fewest(h100, gpu_counts(64), Objective::balanced);
  REQUIRE(found.has_value());
  CHECK(found->setup.total_gpus() == 24);
  CHECK(found->budget.fits_with_margin());
  CHECK_FALSE(plain.best(h100, 16, Objective::balanced).has_value());
  CHECK_FALSE(plain.best(h100, 8, Objective::balanced).has_value());
  // Allowing 8-bit states and pure bf16, one node is enough under FSDP
  // (HF Trainer --fsdp over a bf16 model; DeepSpeed ZeRO would keep fp32
  // master weights): (2 + 2 + 2) B x 70.6B / 8 = 53 GB per card.
  Setup fsdp = base;
  fsdp.fsdp = true;
  Searcher quantized(
      model, fsdp,
      SearchScope{.layouts = true, .quantize = true, .offload = false});
  const auto one_node = quantized.best(h100, 8, Objective::balanced);
  REQUIRE(one_node.has_value());
  CHECK(one_node->risk == Risk::low);
}

TEST_CASE("search: fit names vLLM's refusal when no card can start it",
          "[search]") {
  // Llama 3 70B's config.json has max_position_embeddings 8192: vLLM refuses
  // --max-model-len 32768 before it looks at memory, so no card or count
  // helps, and fit says so instead of suggesting more GPUs.
  const auto r = test::run_cli(
      {"fit", "llama3-70b", "--engine", "vllm", "--max-model-len", "32768"});
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains(
                        "no configuration fits: vLLM refuses to start on "
                        "any card: User-specified max_model_len (32768) "
                        "is greater than the derived max_model_len "
                        "(max_position_embeddings=8192 in model's "
                        "config.json). Give --max-model-len 8192 or less"));
  CHECK_THAT(r.out, !Catch::Contains("raise --max-gpus"));
}

TEST_CASE("search: fit honours the count of NxNAME and an instance",
          "[search]") {
  const auto r = test::run_cli(
      {"fit", "llama3-8b", "--mode", "lora", "--gpus", "2xA100-80", "--json"});
  REQUIRE(r.code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  REQUIRE_FALSE(doc.at("plans").empty());
  for (const auto& p : doc.at("plans")) {
    CHECK(p.at("gpu").at("count") == 2);
    CHECK(p.at("gpu").at("name") == "A100-80");
  }
  // p4de.24xlarge: 8 x A100-80.
  const auto inst =
      test::run_cli({"fit", "llama3-70b", "--gpus", "p4de.24xlarge", "--json"});
  REQUIRE(inst.code == 0);
  const auto inst_json = nlohmann::json::parse(inst.out);
  for (const auto& p : inst_json.at("plans")) {
    CHECK(p.at("gpu").at("count") == 8);
  }
}

TEST_CASE("search: fit's default cards are the catalog's common ones",
          "[search]") {
  const auto r = test::run_cli(
      {"fit", "llama3-8b", "--mode", "lora", "--top", "100", "--json"});
  REQUIRE(r.code == 0);
  std::vector<std::string> common;
  for (const Gpu& g : test::catalog().gpus) {
    if (g.common) {
      common.push_back(g.name);
    }
  }
  const auto fit_json = nlohmann::json::parse(r.out);
  for (const auto& p : fit_json.at("plans")) {
    const std::string name = p.at("gpu").at("name");
    CHECK(std::find(common.begin(), common.end(), name) != common.end());
  }
  const auto all = test::run_cli({"fit", "llama3-8b", "--mode", "lora", "--top",
                                  "100", "--all-gpus", "--json"});
  CHECK(nlohmann::json::parse(all.out).at("plans").size() >
        nlohmann::json::parse(r.out).at("plans").size());
}

TEST_CASE("search: fit lists CPU offload and accuracy risk after plans without",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const auto result =
      fit(model, cards_named({"H100", "A100-80", "L40S"}),
          Setup{.mode = Mode::full, .seq = 4096}, FitConstraints{.top = 100});
  REQUIRE_FALSE(result.plans.empty());
  bool offloaded = false;
  for (const FitPlan& p : result.plans) {
    const bool off =
        p.setup.offload != Offload::none || p.setup.activation_offload;
    if (offloaded) {
      CHECK(off);  // once offload starts, nothing without it follows
    }
    offloaded = offloaded || off;
  }
  // --no-offload and --no-quant leave only plain plans.
  const auto plain =
      fit(model, cards_named({"H100"}), Setup{.mode = Mode::full, .seq = 4096},
          FitConstraints{.no_offload = true, .no_quant = true, .top = 100});
  for (const FitPlan& p : plain.plans) {
    CHECK(p.setup.offload == Offload::none);
    CHECK(p.risk == Risk::none);
  }
}

TEST_CASE("search: fit's top N are the first N of a longer list", "[search]") {
  // fit searches CPU offload only when fewer than N plans without it were
  // found: the cut must not show what a longer list would not.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const auto cards = cards_named({"H100", "A100-80", "L40S"});
  const Setup base{.mode = Mode::full, .seq = 4096};
  const auto all = fit(model, cards, base, FitConstraints{.top = 100});
  const auto args = [&](const FitResult& r) {
    std::vector<std::string> out;
    for (const FitPlan& p : r.plans) {
      out.push_back(plan_args(model.name, model, *p.gpu, p.request));
    }
    return out;
  };
  const std::vector<std::string> every = args(all);
  const auto plain = static_cast<int>(
      std::count_if(all.plans.begin(), all.plans.end(), [](const FitPlan& p) {
        return p.setup.offload == Offload::none && !p.setup.activation_offload;
      }));
  REQUIRE(plain >= 2);
  REQUIRE(static_cast<std::size_t>(plain) < every.size());  // offload follows
  for (const int top : {1, plain, plain + 1}) {
    INFO("top " << top);
    const auto cut = args(fit(model, cards, base, FitConstraints{.top = top}));
    CHECK(cut == std::vector<std::string>(every.begin(), every.begin() + top));
  }
}

TEST_CASE("search: vLLM plans rank by GPUs per concurrent request",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const auto result = fit(model, cards_named({"H100", "A100-80", "L40S"}),
                          Setup{.engine = Engine::vllm, .seq = 8192},
                          FitConstraints{.no_quant = true, .top = 100});
  REQUIRE(result.plans.size() >= 2);
  for (const FitPlan& p : result.plans) {
    CHECK(p.kv_tokens > 0);
    CHECK(p.max_concurrency >= 1);
  }
  for (std::size_t i = 1; i < result.plans.size(); ++i) {
    const FitPlan& a = result.plans[i - 1];
    const FitPlan& b = result.plans[i];
    // GPUs per concurrent request, in 5 % buckets.
    CHECK(a.setup.total_gpus() / a.max_concurrency <=
          1.06 * b.setup.total_gpus() / b.max_concurrency);
  }
}

TEST_CASE("search: each fit plan's command line reproduces it through the CLI",
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
        fit(model, cards_named({"A100-80", "L40S", "RTX4090"}), base, limits);
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
    }
  }
}

TEST_CASE("search: fit renders oomplan.fit/1 with every plan's command",
          "[search]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-8b");
  const auto result =
      fit(model, cards_named({"A100-80"}),
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
    CHECK(j.at("gpu").at("count") == p.setup.total_gpus());
    CHECK(j.at("total_bytes").get<Bytes>() == p.total_bytes);
    CHECK(j.at("host_bytes").get<Bytes>() == p.host_bytes);
  }
  CHECK_THAT(render_fit_text(result, model, "llama3-8b"),
             Catch::Contains("oomplan llama3-8b --gpus 1xA100-80"));
}
