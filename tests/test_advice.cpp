#include "support.hpp"

#include "oomplan/advice.hpp"
#include "oomplan/catalog.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/report.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace oomplan;

struct Case {
  std::string model;
  std::string gpus;  // NxNAME
  Setup setup;
};

Setup resolved(const Model& model, Setup s) {
  return resolve_setup(model, s);
}

// The setups the fix tests loop over: inference (hf and vLLM), full
// fine-tuning, LoRA and QLoRA, fitting and not.
std::vector<Case> cases() {
  return {
      {"llama3-70b", "1xA100-80", Setup{.seq = 8192}},
      {"llama3-70b", "1xA100-80",
       Setup{.engine = Engine::vllm, .seq = 8192, .batch = 4}},
      {"llama3-70b", "4xA100-80", Setup{.mode = Mode::full}},
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 512}},
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 8192}},
      {"llama3-8b", "1xH100", Setup{.mode = Mode::full, .batch = 8}},
      {"llama3-8b", "1xRTX4090",
       Setup{.mode = Mode::lora, .batch = 4, .attn = Attn::eager}},
      {"llama-3.2-1b", "1xA100-40",
       Setup{.mode = Mode::full, .seq = 2048, .batch = 4}},
      {"mixtral-8x7b", "2xL40S", Setup{.seq = 16384, .batch = 8}},
  };
}

struct Planned {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Setup setup;
  Budget budget;
};

Planned plan_case(const Case& c) {
  const auto& cat = test::catalog();
  Planned p;
  p.model = &find_model(cat, c.model);
  const auto spec = parse_gpu_spec(cat, c.gpus);
  p.gpu = spec.gpu;
  Setup s = c.setup;
  s.gpus = spec.count;
  p.setup = resolved(*p.model, s);
  validate_setup(*p.model, *p.gpu, p.setup);
  p.budget = memory(*p.model, *p.gpu, p.setup);
  return p;
}

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  std::string word;
  while (in >> word) {
    words.push_back(word);
  }
  return words;
}

}  // namespace

TEST_CASE("advice: every fix is re-priced by memory() and lowers the peak",
          "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    const Bytes base_total = p.budget.total_bytes();
    const auto fixes = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
    INFO(c.model << " on " << c.gpus << ": "
                 << plan_args(c.model, *p.gpu, p.setup));
    for (std::size_t i = 0; i < fixes.size(); ++i) {
      const Fix& f = fixes[i];
      INFO("fix " << f.id << ": " << f.title);
      REQUIRE(f.gpu != nullptr);
      CHECK(f.rank == static_cast<int>(i + 1));
      // The fixed setup is resolved and valid; memory() reproduces the fix.
      CHECK_NOTHROW(validate_setup(*p.model, *f.gpu, f.setup));
      const Budget b = memory(*p.model, *f.gpu, f.setup);
      CHECK(b.total_bytes() == f.total_bytes);
      CHECK(b.fits() == f.fits);
      CHECK(f.saves_bytes == base_total - f.total_bytes);
      // Either it lowers the peak, or it turns a plan that does not fit into
      // one that does (a bigger card, vLLM's gpu-util or max-model-len).
      const bool lowers = f.total_bytes < base_total;
      const bool rescues = f.fits && !p.budget.fits();
      CHECK((lowers || rescues));
      CHECK(f.setup.total_gpus() >= 1);
      CHECK(!f.cost.empty());
    }
  }
}

TEST_CASE("advice: fixes that fit come first, then by cost class", "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    const auto fixes = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
    INFO(c.model << " on " << c.gpus);
    for (std::size_t i = 1; i < fixes.size(); ++i) {
      const Fix& a = fixes[i - 1];
      const Fix& b = fixes[i];
      INFO(a.id << " before " << b.id);
      CHECK((a.fits || !b.fits));
      if (a.fits == b.fits) {
        CHECK(a.cost_class <= b.cost_class);
      }
    }
    // Deterministic: the same input gives the same list.
    const auto again = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
    REQUIRE(again.size() == fixes.size());
    for (std::size_t i = 0; i < fixes.size(); ++i) {
      CHECK(again[i].id == fixes[i].id);
      CHECK(again[i].total_bytes == fixes[i].total_bytes);
    }
  }
}

TEST_CASE("advice: a free fix beats offload when both fit", "[advice]") {
  // Llama 3.2 1B full fine-tuning on one A100-40: find a micro-batch at which
  // both a smaller micro-batch and CPU offload make it fit.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama-3.2-1b");
  const Gpu& gpu = find_gpu(cat, "A100-40");
  bool found = false;
  for (const std::int64_t batch : {2, 4, 8, 16}) {
    const Setup s = resolve_setup(
        model, Setup{.mode = Mode::full, .seq = 2048, .batch = batch});
    const auto fixes = advise(model, gpu, s, cat.gpus);
    const auto free_fix = std::find_if(
        fixes.begin(), fixes.end(),
        [](const Fix& f) { return f.id == "reduce-batch" && f.fits; });
    const auto offload_fix =
        std::find_if(fixes.begin(), fixes.end(), [](const Fix& f) {
          return f.cost_class == CostClass::offload && f.fits;
        });
    if (free_fix == fixes.end() || offload_fix == fixes.end()) {
      continue;
    }
    found = true;
    INFO("batch " << batch);
    CHECK(free_fix->rank < offload_fix->rank);
    CHECK(free_fix->cost_class == CostClass::free);
    // The micro-batch fix keeps the global batch with gradient accumulation.
    CHECK(free_fix->setup.batch * free_fix->setup.grad_accum == batch);
    // Offload is priced in time: slower than the free fix.
    CHECK(offload_fix->step_factor > free_fix->step_factor);
  }
  CHECK(found);
}

TEST_CASE(
    "advice: 70B inference on one 80 GB card: quantization before more GPUs "
    "(seed checklist)",
    "[advice]") {
  // Seed 000's checklist: free knobs first (batch, sequence length), then
  // quantization, then more GPUs; CPU offload last. 141 GB of bf16 weights do
  // not fit 80 GB, so no free knob fits and both quantization and a second
  // card do.
  const Planned p = plan_case({"llama3-70b", "1xA100-80", Setup{.seq = 8192}});
  REQUIRE_FALSE(p.budget.fits());
  const auto fixes = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
  auto rank_of = [&fixes](std::string_view id) {
    const auto it = std::find_if(fixes.begin(), fixes.end(),
                                 [id](const Fix& f) { return f.id == id; });
    return it == fixes.end() ? 0 : it->rank;
  };
  for (const Fix& f : fixes) {
    if (f.cost_class == CostClass::free) {
      CHECK_FALSE(f.fits);
    }
  }
  REQUIRE(rank_of("quantize-int8") > 0);
  REQUIRE(rank_of("more-gpus") > 0);
  CHECK(rank_of("quantize-int8") < rank_of("more-gpus"));
  // 8-bit weights carry less accuracy risk than 4-bit: listed first.
  CHECK(rank_of("quantize-int8") < rank_of("quantize-4bit"));
  CHECK(fixes.front().fits);
  // Two A100-80s hold the bf16 model with tensor parallelism (141 GB / 2).
  const auto more = std::find_if(fixes.begin(), fixes.end(), [](const Fix& f) {
    return f.id == "more-gpus";
  });
  CHECK(more->fits);
  CHECK(more->setup.total_gpus() == 2);
  CHECK(more->setup.tp == 2);
}

TEST_CASE(
    "advice: 70B QLoRA on two 24 GB cards: 512 tokens fit on the same cards, "
    "8k tokens need more hardware or shorter sequences (seed)",
    "[advice]") {
  // Seed 003: "2x24GB can run QLoRA 70B" holds for short sequences; at 4k-8k
  // aim for 4x24GB, 2x48GB or an 80 GB card.
  const Planned short_seq = plan_case(
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 512}});
  const Planned long_seq = plan_case(
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 8192}});
  const auto& gpus = test::catalog().gpus;
  const auto short_fixes =
      advise(*short_seq.model, *short_seq.gpu, short_seq.setup, gpus);
  const auto long_fixes =
      advise(*long_seq.model, *long_seq.gpu, long_seq.setup, gpus);
  REQUIRE_FALSE(short_fixes.empty());
  REQUIRE_FALSE(long_fixes.empty());
  auto same_hardware = [](const Fix& f, const Planned& p) {
    return f.gpu == p.gpu && f.setup.total_gpus() == p.setup.total_gpus();
  };
  // 512 tokens: the best fix fits on the same two cards.
  CHECK(short_fixes.front().fits);
  CHECK(same_hardware(short_fixes.front(), short_seq));
  // 8k tokens: every fix that fits either adds hardware or cuts the sequence.
  for (const Fix& f : long_fixes) {
    if (f.fits) {
      INFO(f.id << ": " << f.title);
      CHECK((!same_hardware(f, long_seq) || f.setup.seq < 8192));
    }
  }
}

TEST_CASE("advice: a combination is offered when no single fix fits",
          "[advice]") {
  // Llama 3 70B full fine-tuning on 4 x A100-80: 1.13 TB of mixed-precision
  // AdamW states cannot fit 320 GB, so one change is never enough.
  const Planned p =
      plan_case({"llama3-70b", "4xA100-80", Setup{.mode = Mode::full}});
  const auto fixes = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
  const auto combo = std::find_if(fixes.begin(), fixes.end(), [](const Fix& f) {
    return f.id == "combination";
  });
  REQUIRE(combo != fixes.end());
  CHECK(combo->fits);
  CHECK(combo->rank == 1);
  CHECK_THAT(combo->title, Catch::Contains(" + "));
  const Budget b = memory(*p.model, *combo->gpu, combo->setup);
  CHECK(b.total_bytes() == combo->total_bytes);
  CHECK(b.fits());
}

TEST_CASE("advice: no fix is offered for what the setup already does",
          "[advice]") {
  // Flash attention, chunked loss and full checkpointing already on: none of
  // them is proposed again.
  const Planned p = plan_case({"llama3-8b", "1xRTX4090",
                               Setup{.mode = Mode::full,
                                     .checkpointing = Checkpointing::full,
                                     .loss = Loss::chunked}});
  const auto fixes = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
  for (const Fix& f : fixes) {
    CHECK(f.id != "flash-attention");
    CHECK(f.id != "chunked-loss");
    CHECK(f.id != "checkpointing-full");
    CHECK(f.id != "checkpointing-selective");
  }
}

TEST_CASE("plan_args: writes the GPUs and only the options that differ",
          "[advice]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const Gpu& a100 = find_gpu(cat, "A100-80");
  CHECK(plan_args("llama3-70b", a100,
                  resolve_setup(model, Setup{.gpus = 4, .seq = 8192})) ==
        "llama3-70b --gpus 4xA100-80 --seq 8192");
  CHECK(plan_args("llama3-70b", a100,
                  resolve_setup(model,
                                Setup{.gpus = 8,
                                      .mode = Mode::full,
                                      .zero = 3,
                                      .checkpointing = Checkpointing::full})) ==
        "llama3-70b --gpus 8xA100-80 --mode full --zero 3 --checkpointing "
        "full");
  // tp other than the default, vLLM options, QLoRA's default nf4 left out.
  CHECK(plan_args("llama3-70b", a100,
                  resolve_setup(model, Setup{.gpus = 4,
                                             .engine = Engine::vllm,
                                             .tp = 2,
                                             .gpu_util = 0.85,
                                             .max_model_len = 2048})) ==
        "llama3-70b --gpus 4xA100-80 --engine vllm --tp 2 --gpu-util 0.85 "
        "--max-model-len 2048");
  CHECK(plan_args(
            "llama3-70b", a100,
            resolve_setup(model,
                          Setup{.gpus = 2, .mode = Mode::qlora, .seq = 512})) ==
        "llama3-70b --gpus 2xA100-80 --mode qlora --seq 512");
  // A path with a space is quoted for the shell.
  CHECK(plan_args("my models/config.json", a100, Setup{}) ==
        "'my models/config.json' --gpus 1xA100-80");
}

TEST_CASE("plan_args: every fix's command line reproduces its total and fit",
          "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    const auto fixes = advise(*p.model, *p.gpu, p.setup, test::catalog().gpus);
    for (const Fix& f : fixes) {
      const std::string args = plan_args(c.model, *f.gpu, f.setup);
      INFO(args);
      auto words = split(args);
      words.emplace_back("--json");
      const auto run = test::run_cli(words);
      REQUIRE(run.code != 2);
      const auto doc = nlohmann::json::parse(run.out);
      CHECK(doc.at("total_bytes").get<Bytes>() == f.total_bytes);
      CHECK(doc.at("fits").get<bool>() == f.fits);
      CHECK((run.code == 0) == f.fits);
    }
  }
}
