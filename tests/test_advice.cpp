// The advisor (advice.hpp): grouped fixes found by the search, each re-priced
// by the plan pipeline; the scenarios of issue 8 as a new user tried them.

#include "support.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/launch/launch.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace oomplan;

struct Case {
  std::string model;
  std::string gpus;  // NxNAME
  Setup setup;
};

// Inference (hf and vLLM), full fine-tuning, LoRA and QLoRA, fitting and
// not.
std::vector<Case> cases() {
  return {
      {"llama3-70b", "1xA100-80", Setup{.seq = 8192}},
      {"llama3-70b", "1xA100-80",
       Setup{.engine = Engine::vllm, .seq = 8192, .batch = 4}},
      {"llama3-70b", "4xA100-80", Setup{.mode = Mode::full}},
      {"llama3-70b", "8xH100",
       Setup{.mode = Mode::full, .seq = 4096, .zero = 3}},
      {"llama3-70b", "1xRTX4090", Setup{.mode = Mode::qlora, .seq = 2048}},
      {"llama3-8b", "1xH100", Setup{.mode = Mode::full, .batch = 8}},
      {"llama3-8b", "1xRTX4090",
       Setup{.mode = Mode::lora, .batch = 4, .attn = Attn::eager}},
      {"mixtral-8x7b", "2xL40S", Setup{.seq = 16384, .batch = 8}},
      // A layout and a smaller micro-batch together (once each set
      // grad-accum for itself, and the later one undid the other's).
      {"llama3-70b", "8xH100",
       Setup{.mode = Mode::full, .seq = 8192, .batch = 4, .zero = 3}},
      // At --grad-accum's bound: a smaller micro-batch would need more
      // accumulation than the option takes (the property test found the
      // advisor proposing --grad-accum 1111490560).
      {"llama3-8b", "8xH100",
       Setup{.mode = Mode::full,
             .batch = 64,
             .zero = 2,
             .grad_accum = 1'000'000}},
      // Checkpointing and chunked loss fit on the one card: two cards with
      // the same moves were offered too (plain data parallelism does not
      // lower per-GPU memory).
      {"qwen2.5-7b", "1xL4", Setup{.mode = Mode::lora, .seq = 4096}},
      {"llama3-8b", "1xL40S",
       Setup{.mode = Mode::lora, .seq = 8192, .batch = 2}},
  };
}

struct Planned {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Setup request;
  Resolved setup;
  Budget budget;
  std::vector<Fix> fixes;
};

Planned plan_case(const Case& c) {
  const auto& cat = test::catalog();
  Planned p;
  p.model = &find_model(cat, c.model);
  const auto spec = parse_gpu_spec(cat, c.gpus);
  p.gpu = spec.gpu;
  p.request = c.setup;
  p.request.gpus = spec.count;
  p.setup = resolve(*p.model, *p.gpu, p.request);
  p.budget = test::budget(*p.model, *p.gpu, p.request);
  p.fixes = advise(*p.model, *p.gpu, p.request, cat.gpus);
  return p;
}

std::vector<std::string> argv_of(const Planned& p, const Fix& f) {
  return plan_argv("m", *p.model, *f.gpu, f.request);
}

bool has_words(const std::vector<std::string>& argv,
               std::vector<std::string> words) {
  for (std::size_t i = 0; i + words.size() <= argv.size(); ++i) {
    if (std::equal(words.begin(), words.end(),
                   argv.begin() + static_cast<long>(i))) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("advice: every fix is re-priced and its command line reproduces it",
          "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    INFO(c.model << " on " << c.gpus << ": "
                 << plan_args(c.model, *p.model, *p.gpu, p.request));
    for (std::size_t i = 0; i < p.fixes.size(); ++i) {
      const Fix& f = p.fixes[i];
      INFO("fix " << f.id << ": " << f.title);
      REQUIRE(f.gpu != nullptr);
      CHECK(f.rank == static_cast<int>(i + 1));
      CHECK_FALSE(check(*p.model, *f.gpu, f.request));
      const Budget b = test::budget(*p.model, *f.gpu, f.request);
      CHECK(b.total_bytes() == f.total_bytes);
      CHECK(b.fits_with_margin() == f.fits);
      CHECK(f.saves_bytes == p.budget.total_bytes() - f.total_bytes);
      CHECK(f.fits);  // the advisor proposes only what fits
      if (f.group == FixGroup::same_hardware && p.setup.training()) {
        // On the same GPUs the job stays: sequences per optimizer step =
        // micro-batch x grad-accum x data parallel, whatever moves combine.
        const Resolved r = resolve(*p.model, *f.gpu, f.request);
        CHECK(std::int64_t{r.batch} * r.grad_accum * r.dp() ==
              std::int64_t{p.setup.batch} * p.setup.grad_accum * p.setup.dp());
      }
      // The same bytes and verdict through the command line it prints.
      auto words = plan_argv(c.model, *p.model, *f.gpu, f.request);
      words.erase(words.begin());
      words.insert(words.begin(), c.model);
      words.emplace_back("--json");
      const auto run = test::run_cli(words);
      REQUIRE(run.code == 0);
      const auto doc = nlohmann::json::parse(run.out);
      CHECK(doc.at("total_bytes").get<Bytes>() == f.total_bytes);
      CHECK(doc.at("fits").get<bool>());
    }
  }
}

TEST_CASE("advice: groups come in DESIGN's order, each fix once", "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    INFO(c.model << " on " << c.gpus);
    std::set<std::vector<std::string>> seen;
    for (std::size_t i = 0; i < p.fixes.size(); ++i) {
      const Fix& f = p.fixes[i];
      // A switch of framework may lead (when the same-stack fixes cost
      // more than twice as much: docs/advice.md).
      if (i > 0 &&
          !(i == 1 && p.fixes[0].group == FixGroup::switch_framework)) {
        CHECK(p.fixes[i - 1].group <= f.group);
      }
      CHECK(seen.insert(argv_of(p, f)).second);
      if (f.group == FixGroup::same_hardware) {
        // The same cards and the same job.
        CHECK(f.gpu == p.gpu);
        CHECK(f.setup.total_gpus() == p.setup.total_gpus());
        CHECK(f.setup.mode == p.setup.mode);
        CHECK(f.setup.seq == p.setup.seq);
      }
      if (f.group == FixGroup::more_gpus) {
        CHECK(f.gpu == p.gpu);
        CHECK(f.setup.total_gpus() > p.setup.total_gpus());
      }
      if (f.group == FixGroup::other_gpus) {
        CHECK(f.gpu->name != p.gpu->name);
      }
      if (f.group == FixGroup::change_job) {
        CHECK_THAT(f.cost, Catch::Contains("changes the job"));
      }
    }
    // Deterministic.
    const Planned again = plan_case(c);
    REQUIRE(again.fixes.size() == p.fixes.size());
    for (std::size_t i = 0; i < p.fixes.size(); ++i) {
      CHECK(argv_of(again, again.fixes[i]) == argv_of(p, p.fixes[i]));
    }
  }
}

// The moves of a fix, read from its title ("1 -> 2 GPUs + a + b": a, b).
std::set<std::string> title_moves(const Fix& f) {
  std::set<std::string> moves;
  std::string_view rest = f.title;
  bool first = true;
  while (!rest.empty()) {
    const std::size_t plus = rest.find(" + ");
    const std::string_view part = rest.substr(0, plus);
    if (!(first && f.group != FixGroup::same_hardware)) {
      moves.insert(std::string(part));
    }
    first = false;
    rest = plus == std::string_view::npos ? "" : rest.substr(plus + 3);
  }
  return moves;
}

TEST_CASE("advice: more GPUs are offered only when they replace a move",
          "[advice]") {
  // A more-gpus fix that carries every move of a same-hardware fix adds
  // GPU-hours and nothing else: the user's cards already fit with those moves.
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    INFO(c.model << " on " << c.gpus);
    for (const Fix& more : p.fixes) {
      if (more.group != FixGroup::more_gpus) {
        continue;
      }
      const std::set<std::string> extra = title_moves(more);
      for (const Fix& same : p.fixes) {
        if (same.group != FixGroup::same_hardware) {
          continue;
        }
        const std::set<std::string> moves = title_moves(same);
        INFO(more.title << " vs " << same.title);
        CHECK_FALSE(std::includes(extra.begin(), extra.end(), moves.begin(),
                                  moves.end()));
      }
    }
  }
}

TEST_CASE("advice: no same-hardware fix is listed above one that beats it",
          "[advice]") {
  // A fix that is faster, no riskier, needs no more host RAM and no other
  // training stack (a layout: Megatron or torchtitan) comes first (llama3-8b
  // LoRA at 8k on an L40S listed ZeRO-3 + offload, +71 % and 15 GiB of host
  // RAM, above checkpointing + micro-batch 1, +47 %).
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    INFO(c.model << " on " << c.gpus);
    for (std::size_t i = 0; i < p.fixes.size(); ++i) {
      for (std::size_t j = i + 1; j < p.fixes.size(); ++j) {
        const Fix& above = p.fixes[i];
        const Fix& below = p.fixes[j];
        if (above.group != FixGroup::same_hardware ||
            below.group != FixGroup::same_hardware) {
          continue;
        }
        INFO(above.title << " above " << below.title);
        const auto layout = [](const Fix& f) {
          return f.id.find("layout") != std::string::npos;
        };
        CHECK_FALSE((below.step_factor < above.step_factor * 0.99 &&
                     below.risk <= above.risk &&
                     below.host_bytes <= above.host_bytes &&
                     (!layout(below) || layout(above))));
      }
    }
  }
}

TEST_CASE("advice: a DeepSpeed block says what changes", "[advice]") {
  // {"zero_optimization": {"stage": 0}} is DeepSpeed's default: other-gpus
  // fixes of a plain data-parallel job printed it.
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    for (const Fix& f : p.fixes) {
      for (const LaunchBlock& block : f.launch) {
        INFO(c.model << " on " << c.gpus << ": " << f.title);
        CHECK(block.text != R"({"zero_optimization": {"stage": 0}})");
      }
    }
  }
}

TEST_CASE("advice: no clause of a cost and no framework block repeats",
          "[advice]") {
  const std::vector<std::string> frameworks = {
      "DeepSpeed", "HF Trainer", "TRL",  "accelerate", "transformers",
      "Megatron",  "torchrun",   "vLLM", "environment"};
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    for (const Fix& f : p.fixes) {
      INFO(f.id << ": " << f.cost);
      std::set<std::string> clauses;
      std::istringstream in(f.cost);
      std::string clause;
      while (std::getline(in, clause, ';')) {
        CHECK(clauses.insert(clause).second);
      }
      std::set<std::string> blocks;
      for (const LaunchBlock& b : f.launch) {
        CHECK(blocks.insert(b.framework).second);
        // One framework per block: no block names another's settings.
        CHECK(std::find(frameworks.begin(), frameworks.end(), b.framework) !=
              frameworks.end());
        CHECK_THAT(b.text, !Catch::Contains("; "));
      }
      // A speed-up reads as a gain.
      if (f.step_factor < 0.98) {
        CHECK_THAT(f.cost, Catch::Contains("faster"));
        CHECK_THAT(f.cost, !Catch::Contains("+-"));
      }
    }
  }
}

TEST_CASE(
    "advice: 70B QLoRA on one RTX 4090 fits on that card with ZeRO-3 "
    "parameter offload and checkpointing",
    "[advice]") {
  // Issue 8: the only fitting fix used to be "RTX4090 -> H200", though the
  // same card holds the job with its weights in CPU RAM.
  const Planned p = plan_case(
      {"llama3-70b", "1xRTX4090", Setup{.mode = Mode::qlora, .seq = 2048}});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  CHECK(first.gpu == p.gpu);
  CHECK(first.setup.total_gpus() == 1);
  CHECK(first.setup.mode == Mode::qlora);
  CHECK(first.setup.seq == 2048);
  CHECK(argv_of(p, first) ==
        std::vector<std::string>{
            "m", "--gpus", "1xRTX4090", "--mode", "qlora", "--seq", "2048",
            "--zero", "3", "--checkpointing", "full", "--offload", "params"});
  CHECK(first.host_bytes > 0);
  CHECK_THAT(first.cost, Catch::Contains("host RAM per node"));
}

TEST_CASE(
    "advice: 70B full fine-tuning on 8 H100s under ZeRO-3 keeps the cards "
    "with optimizer offload, never pure bf16 under ZeRO",
    "[advice]") {
  // DeepSpeed's ZeRO optimizers keep fp32 master weights (docs/advice.md):
  // 8-bit AdamW still needs (2 + 2 + 4 + 2) B x 70.6B / 8 = 88 GB per card,
  // more than an H100's 79 GiB; the optimizer states go to the host, within
  // a p5 node's 2 TiB.
  const Planned p =
      plan_case({"llama3-70b", "8xH100",
                 Setup{.mode = Mode::full, .seq = 4096, .zero = 3}});
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  const auto argv = argv_of(p, first);
  CHECK(has_words(argv, {"--checkpointing", "full"}));
  CHECK(first.setup.offload != Offload::none);
  CHECK(first.host_bytes < Bytes{2048} * k_gib);
  CHECK(first.risk == Risk::none);
  for (const Fix& f : p.fixes) {
    if (f.group == FixGroup::same_hardware) {
      CHECK(f.setup.precision != Precision::pure);
    }
  }
}

TEST_CASE("advice: 405B on 16 H100s with vLLM pipelines over the two nodes",
          "[advice]") {
  // Issue 8: tp 8 x dp 2 does not fit; tp 8 x pp 2 does, on the same cards
  // and in bf16, before fp8 weights.
  const Planned p = plan_case(
      {"llama3.1-405b", "8xH100", Setup{.nodes = 2, .engine = Engine::vllm}});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  CHECK(first.setup.tp == 8);
  CHECK(first.setup.pp == 2);
  CHECK(first.setup.quant == Quant::none);
  CHECK(first.risk == Risk::none);
  REQUIRE_FALSE(first.launch.empty());
  CHECK(first.launch.front().framework == "vLLM");
  // The complete `vllm serve` line (launch.hpp write_launch), with the
  // layout vLLM needs across the two nodes.
  CHECK_THAT(first.launch.front().text,
             Catch::StartsWith("vllm serve meta-llama/Llama-3.1-405B "
                               "--tensor-parallel-size 8 "
                               "--pipeline-parallel-size 2 "));
}

TEST_CASE(
    "advice: 70B inference on one 80 GB card quantizes before it adds GPUs "
    "(seed checklist)",
    "[advice]") {
  // Seed 000's checklist: the same card first (quantization), more GPUs
  // after; 141 GB of bf16 weights do not fit 80 GB.
  const Planned p = plan_case({"llama3-70b", "1xA100-80", Setup{.seq = 8192}});
  REQUIRE_FALSE(p.fixes.empty());
  CHECK(p.fixes.front().group == FixGroup::same_hardware);
  CHECK(quant_bits(p.fixes.front().setup.quant) > 0);
  const auto more =
      std::find_if(p.fixes.begin(), p.fixes.end(),
                   [](const Fix& f) { return f.group == FixGroup::more_gpus; });
  REQUIRE(more != p.fixes.end());
  // Two A100-80s hold the bf16 model with tensor parallelism (141 GB / 2).
  CHECK(more->setup.total_gpus() == 2);
  CHECK(more->setup.tp == 2);
  CHECK(more->setup.quant == Quant::none);
}

TEST_CASE(
    "advice: on transformers before 4.45 the first fix is the upgrade, with "
    "its install line",
    "[advice]") {
  // Llama-2-7B, 8 x 4,096 tokens on an A100-40 with transformers 4.40: two
  // 16 GiB caches and 3.9 GiB of fp32 logits while decoding (51.3 GiB); the
  // current release holds one cache and one position's logits (33.3 GiB).
  Setup s{.seq = 4096, .batch = 8};
  s.transformers_release = Release{4, 40, 0};
  const Planned p = plan_case({"llama-2-7b", "1xA100-40", s});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.id == "upgrade-transformers");
  CHECK(first.fits);
  CHECK(first.setup.transformers_release == k_transformers_default);
  const auto install = std::find_if(
      first.launch.begin(), first.launch.end(),
      [](const LaunchBlock& b) { return b.framework == "environment"; });
  REQUIRE(install != first.launch.end());
  CHECK(install->text == "pip install --upgrade 'transformers>=4.45'");
  // The other fixes keep the user's release.
  for (std::size_t i = 1; i < p.fixes.size(); ++i) {
    CHECK(p.fixes[i].setup.transformers_release == Release{4, 40, 0});
  }
}

TEST_CASE(
    "advice: AutoAWQ's fused cache sized to the model's context is sized to "
    "the job first",
    "[advice]") {
  // Mistral-7B AWQ, 8 x 2,048 tokens on an RTX 4090, fused with AutoAWQ's
  // default max_seq_len (32,768 positions): 8 x 32,768 x 2 x 8 KV heads x 128
  // x 2 B x 32 layers = 32 GiB of cache before a token. Sized to 2,048 it is
  // 2 GiB and the job fits (AutoAWQ's README measured 16.82 GiB).
  Setup s{.seq = 2048, .batch = 8, .dtype = Dtype::fp16, .quant = Quant::awq};
  s.awq_fused_len = 32768;
  const Planned p = plan_case({"mistral-7b-v0.1", "1xRTX4090", s});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.id == "awq-fused-len");
  CHECK(first.fits);
  CHECK(first.setup.awq_fused_len == 2048);
  CHECK(first.setup.batch == 8);
}

TEST_CASE("advice: a shorter sequence is a change of the job, listed last",
          "[advice]") {
  const Planned p =
      plan_case({"llama3-8b", "1xL40S",
                 Setup{.mode = Mode::lora, .seq = 8192, .batch = 2}});
  REQUIRE_FALSE(p.budget.fits_with_margin());
  REQUIRE_FALSE(p.fixes.empty());
  // The first fix keeps the 8k tokens.
  CHECK(p.fixes.front().setup.seq == 8192);
  for (const Fix& f : p.fixes) {
    if (f.setup.seq < 8192) {
      CHECK(f.group == FixGroup::change_job);
      CHECK_THAT(f.cost, Catch::Contains("changes the job"));
    }
  }
}

TEST_CASE("advice: host RAM beyond the node's is not a fit", "[advice]") {
  // 256 GiB per node cannot hold 70B's optimizer states; every fix keeps
  // within it.
  const Planned p = plan_case(
      {"llama3-70b", "8xH100",
       Setup{.mode = Mode::full, .seq = 4096, .zero = 3, .host_ram_gib = 256}});
  for (const Fix& f : p.fixes) {
    INFO(f.id);
    CHECK(f.host_bytes <= Bytes{256} * k_gib);
    REQUIRE(f.host_capacity_bytes.has_value());
    CHECK(*f.host_capacity_bytes == Bytes{256} * k_gib);
  }
  // The plan itself: optimizer offload needs ~1.1 TiB, so it does not fit.
  const Budget b = test::budget(*p.model, *p.gpu,
                                Setup{.gpus = 8,
                                      .mode = Mode::full,
                                      .seq = 4096,
                                      .zero = 3,
                                      .offload = Offload::optimizer,
                                      .checkpointing = Checkpointing::full,
                                      .host_ram_gib = 256});
  CHECK(b.total_bytes() <= b.usable_bytes);
  CHECK(b.host_bytes > Bytes{256} * k_gib);
  CHECK_FALSE(b.fits());
}

TEST_CASE("advice: a vLLM plan that starts gets no fixes", "[advice]") {
  const Planned p =
      plan_case({"llama3-8b", "1xH100", Setup{.engine = Engine::vllm}});
  REQUIRE(p.budget.fits());
  CHECK(p.fixes.empty());
}

TEST_CASE("advice: a tight plan gets the cheapest way to 10 % headroom",
          "[advice]") {
  // Llama 3 70B on 2 A100-80 at 8k tokens: 72.12 of 79.15 GiB, 8.9 % free.
  const Planned p = plan_case({"llama3-70b", "2xA100-80", Setup{.seq = 8192}});
  REQUIRE(p.budget.fits_with_margin());
  // 8.9 % < 10 %: the plan gets at least one fix (a loop over none passed
  // with the threshold mutated to 0, tests/mutate.sh mutant 20).
  REQUIRE(!p.fixes.empty());
  for (const Fix& f : p.fixes) {
    CHECK(f.group == FixGroup::same_hardware);
    const Budget b = test::budget(*p.model, *f.gpu, f.request);
    CHECK(static_cast<double>(b.headroom_bytes()) >=
          k_advise_headroom_share * static_cast<double>(b.capacity_bytes) - 1);
  }
}

TEST_CASE("advice: each move of a same-hardware fix is needed", "[advice]") {
  // Minimal: with any one of its options back at the plan's value, the fix
  // no longer fits with the margin.
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    for (const Fix& f : p.fixes) {
      if (f.group != FixGroup::same_hardware) {
        continue;
      }
      INFO(c.model << " " << c.gpus << ": " << f.id);
      const auto base = plan_argv("m", *p.model, *p.gpu, p.request);
      const auto fixed = argv_of(p, f);
      // Each option (with its value) the fix adds, dropped in turn.
      for (std::size_t i = 3; i < fixed.size(); ++i) {
        if (fixed[i].rfind("--", 0) != 0 || fixed[i] == "--grad-accum") {
          continue;
        }
        const bool switch_ =
            i + 1 >= fixed.size() || fixed[i + 1].rfind("--", 0) == 0;
        std::vector<std::string> words(fixed.begin(),
                                       fixed.begin() + static_cast<long>(i));
        words.insert(words.end(),
                     fixed.begin() + static_cast<long>(i + (switch_ ? 1 : 2)),
                     fixed.end());
        if (has_words(base, {fixed[i]}) || words == base) {
          continue;  // the plan's own option
        }
        Setup s;
        s.gpus = f.request.gpus;
        for (std::size_t j = 3; j < words.size(); ++j) {
          const bool sw =
              j + 1 >= words.size() || words[j + 1].rfind("--", 0) == 0;
          apply_option(s, words[j], sw ? "" : words[j + 1]);
          j += sw ? 0 : 1;
        }
        INFO("without " << fixed[i]);
        const Pricing pr = price(*p.model, *f.gpu, s);
        CHECK((!pr.priced || !pr.priced->budget.fits_with_margin()));
      }
    }
  }
}

TEST_CASE("plan_args: every option survives the round trip through the CLI",
          "[advice]") {
  // One setup per group of options; each is planned in-process and through
  // `oomplan <plan_args>`: the totals must agree.
  const std::vector<Case> setups = {
      {"llama3-8b", "2xA100-80",
       Setup{.nodes = 2,
             .mode = Mode::full,
             .seq = 2048,
             .batch = 2,
             .dtype = Dtype::fp16,
             .tp = 2,
             .pp = 2,
             .sequence_parallel = true,
             .zero = 1,
             .checkpointing = Checkpointing::selective,
             .attn = Attn::sdpa,
             .grad_accum = 4}},
      {"llama3-8b", "4xH100",
       Setup{.mode = Mode::full,
             .fsdp = true,
             .offload = Offload::optimizer,
             .precision = Precision::pure,
             .optimizer = Optimizer::adamw_8bit,
             .compile = true,
             .loss = Loss::chunked,
             .activation_offload = true}},
      {"llama3-8b", "1xRTX4090",
       Setup{.mode = Mode::lora,
             .seq = 1024,
             .quant = Quant::int8,
             .optimizer = Optimizer::paged_adamw_8bit,
             .lora_rank = 64,
             .lora_targets = k_lora_q | k_lora_v,
             .optimizer_in_bwd = true,
             .overhead_gib = 0.75,
             .reserve = 0.1}},
      {"llama3-70b", "2xRTX4090",
       Setup{.mode = Mode::qlora,
             .seq = 512,
             .quant = Quant::nf4_nodq,
             .lora_targets = k_lora_attn}},
      {"llama3-70b", "4xL40S",
       Setup{.engine = Engine::vllm,
             .seq = 2048,
             .batch = 16,
             .kv_dtype = Dtype::fp8,
             .gpu_util = 0.85,
             .max_num_batched_tokens = 4096,
             .enforce_eager = true,
             .max_model_len = 16384,
             .max_num_seqs = 64}},
      {"llama3-70b", "8xA100-80",
       Setup{.engine = Engine::vllm,
             .tp = 4,
             .pp = 2,
             .vllm_version = VllmEra::v0}},
      {"llama3-70b", "3xA100-80",
       Setup{.seq = 1024, .split_layers = true, .price = 2.5}},
      {"mixtral-8x7b", "2xA100-80",
       Setup{.seq = 8192, .quant = Quant::awq, .kv_dtype = Dtype::bf16}},
  };
  for (const Case& c : setups) {
    const Planned p = plan_case(c);
    const std::string args = plan_args(c.model, *p.model, *p.gpu, p.request);
    INFO(args);
    auto words = test::words(args);
    words.emplace_back("--json");
    const auto run = test::run_cli(words);
    REQUIRE(run.code != 2);
    const auto doc = nlohmann::json::parse(run.out);
    CHECK(doc.at("total_bytes").get<Bytes>() == p.budget.total_bytes());
    CHECK(doc.at("fits").get<bool>() == p.budget.fits());
  }
}

// Issue 24's examples: the first fix keeps the user's framework, or is a
// labelled switch when that framework cannot express what an expert does.
namespace {

Case example(std::string model, std::string gpus, Mode mode, std::int64_t seq) {
  Case c{std::move(model), std::move(gpus), Setup{}};
  c.setup.mode = mode;
  c.setup.seq = seq;
  return c;
}

bool id_has(const Fix& f, std::string_view move) {
  return f.id.find(move) != std::string::npos;
}

}  // namespace

TEST_CASE(
    "advice: a DeepSpeed job keeps DeepSpeed (no Megatron TP, no pure "
    "bf16)",
    "[advice][capability]") {
  // mistral-7b on 2 RTX4090s, full, ZeRO-3, --framework deepspeed: DeepSpeed
  // cannot run tensor parallelism or drop its fp32 master weights
  // (runtime/bf16_optimizer.py); the fixes on the same stack say so.
  Case c = example("mistral-7b", "2xRTX4090", Mode::full, 2048);
  c.setup.zero = 3;
  c.setup.framework = Framework::deepspeed;
  const Planned p = plan_case(c);
  REQUIRE_FALSE(p.fixes.empty());
  CHECK(p.fixes.front().group == FixGroup::same_hardware);
  for (const Fix& f : p.fixes) {
    if (f.group == FixGroup::same_hardware) {
      INFO(f.id);
      CHECK_FALSE(id_has(f, "layout"));
      CHECK_FALSE(id_has(f, "pure-bf16"));
    }
  }
}

TEST_CASE("advice: an FSDP job on 16 H100s keeps FSDP",
          "[advice][capability]") {
  // llama3-70b, full, --fsdp, 2 nodes: no tp x pp layout (HF Trainer has
  // none), no ZeRO stage, no optimizer-only offload (FSDP's CPUOffload).
  Case c = example("llama3-70b", "8xH100", Mode::full, 4096);
  c.setup.nodes = 2;
  c.setup.fsdp = true;
  const Planned p = plan_case(c);
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  for (const Fix& f : p.fixes) {
    if (f.group == FixGroup::same_hardware) {
      INFO(f.id);
      CHECK_FALSE(id_has(f, "layout"));
      CHECK_FALSE(id_has(f, "zero-stage"));
      CHECK_FALSE(id_has(f, "offload-optimizer"));
    }
  }
}

TEST_CASE("advice: Llama 3.1 8B full on one L40S switches to torchtune first",
          "[advice][capability]") {
  // 8.03B parameters on 48 GB: HF Trainer's leanest same-stack setup (pure
  // bf16 weights 16.1 GB + bf16 gradients 16.1 GB + 8-bit AdamW states
  // 16.1 GB = 48.2 GB before activations) does not fit, so its only fit
  // offloads the states (ZeRO-Offload, several times slower). torchtune's
  // optimizer step in backward frees each gradient as it is made (no 16 GB
  // buffer): 16.1 + 16.1 GB plus checkpointed activations fits, at the cost
  // of recomputation (well under twice the step).
  const Planned p =
      plan_case(example("llama3.1-8b", "1xL40S", Mode::full, 4096));
  REQUIRE(p.fixes.size() >= 2);
  const Fix& first = p.fixes.front();
  INFO(first.title);
  CHECK(first.group == FixGroup::switch_framework);
  CHECK(first.request.framework == Framework::torchtune);
  CHECK(id_has(first, "optimizer-in-bwd"));
  CHECK(first.setup.precision == Precision::pure);
  CHECK(first.step_factor < 2.0);
  CHECK_THAT(first.cost, Catch::Contains("no fp32 master weights"));
  // Its launch block is torchtune's recipe config with the real builder
  // (torchtune/models/llama3_1/_model_builders.py llama3_1_8b).
  REQUIRE_FALSE(first.launch.empty());
  CHECK_THAT(first.launch.front().text,
             Catch::Contains("torchtune.models.llama3_1.llama3_1_8b"));
}

TEST_CASE("advice: no switch to torchtune for a model it has no builder for",
          "[advice][capability]") {
  // torchtune/models has no DeepSeek family: a switch there could not run.
  const Planned p =
      plan_case(example("deepseek-v2-lite", "1xA100-80", Mode::full, 4096));
  for (const Fix& f : p.fixes) {
    INFO(f.title);
    CHECK(f.request.framework != Framework::torchtune);
  }
}

TEST_CASE(
    "advice: vLLM on 2 H100s at 32k offers fp8 weights with the "
    "concurrency",
    "[advice][capability]") {
  Case c = example("llama3.1-70b", "2xH100", Mode::infer, 32768);
  c.setup.engine = Engine::vllm;
  const Planned p = plan_case(c);
  const auto fp8 = std::find_if(p.fixes.begin(), p.fixes.end(), [](auto& f) {
    return f.group == FixGroup::same_hardware && f.id == "quantize-fp8";
  });
  REQUIRE(fp8 != p.fixes.end());
  // fp8 halves 141 GB of weights over 2 cards: far more KV room, so more
  // requests of 32k at once than gpu-util's.
  CHECK_THAT(fp8->cost, Catch::Contains("concurrency instead of"));
}

TEST_CASE("advice: transformers generate of 64 sequences offers vLLM",
          "[advice][capability]") {
  Case c = example("llama3.1-8b", "1xL40S", Mode::infer, 4096);
  c.setup.batch = 64;
  const Planned p = plan_case(c);
  const auto sw = std::find_if(p.fixes.begin(), p.fixes.end(), [](auto& f) {
    return f.group == FixGroup::switch_framework;
  });
  REQUIRE(sw != p.fixes.end());
  CHECK(sw->setup.engine == Engine::vllm);
  CHECK_THAT(sw->title, Catch::StartsWith("switch to vLLM"));
}

TEST_CASE("advice: a T4 (no bf16) runs vLLM in fp16 with AWQ",
          "[advice][capability]") {
  // T4 is sm75: vLLM refuses bf16 below 8.0 (platforms/cuda.py); 16 GB hold
  // an 8B model's 4-bit weights (~5.7 GB) and its KV cache, not 16 GB of
  // fp16 weights.
  Case c = example("llama3.1-8b", "1xT4", Mode::infer, 8192);
  c.setup.engine = Engine::vllm;
  const Planned p = plan_case(c);
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  CHECK(first.setup.dtype == Dtype::fp16);
  CHECK(first.setup.quant == Quant::awq);
}

TEST_CASE("advice: training in bf16 on a T4 gets fp16 in every fix",
          "[advice][capability]") {
  // T4 is sm75: transformers' TrainingArguments refuses --bf16 there, and
  // torchtune trains in bf16 or fp32 only, so no switch to it either.
  Case c = example("llama3.1-8b", "1xT4", Mode::qlora, 2048);
  const Planned p = plan_case(c);
  REQUIRE_FALSE(p.fixes.empty());
  for (const Fix& f : p.fixes) {
    INFO(f.title);
    if (f.gpu->name == "T4") {
      CHECK(f.setup.dtype == Dtype::fp16);
    }
    CHECK(f.group != FixGroup::switch_framework);
  }
  const Fix& first = p.fixes.front();
  const auto hf = std::find_if(
      first.launch.begin(), first.launch.end(),
      [](const LaunchBlock& b) { return b.framework == "HF Trainer"; });
  REQUIRE(hf != first.launch.end());
  CHECK_THAT(hf->text, Catch::Contains(R"("fp16":true)"));
  CHECK_THAT(hf->text, Catch::Contains(R"("bf16":false)"));
}

TEST_CASE("advice: a fix keeps the preference objective",
          "[advice][preference]") {
  // A DPO job that does not fit: every fix stays DPO (its re-run words say
  // --objective dpo), none switches to Megatron-LM (no preference trainer),
  // and none chunks the loss (TRL takes log-probs from the full logits).
  const Planned p = plan_case({"llama3-8b", "8xA100-80",
                               Setup{.mode = Mode::full,
                                     .seq = 4096,
                                     .batch = 4,
                                     .objective = TrainObjective::dpo}});
  REQUIRE_FALSE(p.budget.fits_with_margin());
  REQUIRE_FALSE(p.fixes.empty());
  for (const Fix& f : p.fixes) {
    INFO(f.id);
    CHECK(f.request.objective == TrainObjective::dpo);
    CHECK(f.request.framework != Framework::megatron);
    CHECK(f.request.loss != Loss::chunked);
    CHECK(has_words(argv_of(p, f), {"--objective", "dpo"}));
  }
}

TEST_CASE(
    "advice: a pure-bf16 framework gets its own fixes (no ZeRO to bound "
    "the search)",
    "[advice]") {
  // axolotl trains as loaded in bf16, so no DeepSpeed stage is expressible
  // (DeepSpeed keeps fp32 master weights). The search's most frugal setup
  // had a ZeRO stage in it, priced nothing and hid every axolotl fix: the
  // first fix for its own full fine-tune example was "switch to Megatron".
  // Llama-3-8B LoRA at 8,192 tokens on a 24 GiB RTX 4090: 16 GiB of bf16
  // weights plus 8k tokens of activations and logits do not fit, and
  // gradient checkpointing with offloaded layer inputs in axolotl does.
  Setup s{.mode = Mode::lora,
          .seq = 8192,
          .dtype = Dtype::bf16,
          .precision = Precision::pure};
  s.framework = Framework::axolotl;
  const Planned p = plan_case({"llama3-8b", "1xRTX4090", s});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  CHECK(resolve(*p.model, *first.gpu, first.request).checkpointing ==
        Checkpointing::full);
  // QLoRA over the same adapters is offered as a change of job.
  CHECK(std::any_of(p.fixes.begin(), p.fixes.end(), [](const Fix& f) {
    return f.id == "qlora" && f.group == FixGroup::change_job &&
           f.request.mode == Mode::qlora;
  }));
}

TEST_CASE(
    "advice: LLaMA-Factory's first fix offloads the layer inputs "
    "(use_unsloth_gc), not the weights",
    "[advice]") {
  // LLaMA-Factory's LoRA defaults (rank 8, batch 8, checkpointing, the full
  // loss) at 8,192 tokens on a 24 GiB RTX 4090: the fp32 logits of 8 x 8,192
  // x 128,256 tokens alone are far over. LLaMA-Factory expresses the chunked
  // loss (enable_liger_kernel), micro-batch 1 and offloaded layer inputs
  // (use_unsloth_gc) at the same speed; without use_unsloth_gc in its
  // capability row the first fix was ZeRO-3 with the weights in CPU RAM.
  Setup s{.mode = Mode::lora,
          .seq = 8192,
          .batch = 8,
          .dtype = Dtype::bf16,
          .checkpointing = Checkpointing::full,
          .attn = Attn::sdpa,
          .lora_rank = 8};
  s.framework = Framework::llama_factory;
  const Planned p = plan_case({"llama3.1-8b", "1xRTX4090", s});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  const Resolved r = resolve(*p.model, *first.gpu, first.request);
  CHECK(r.activation_offload);
  CHECK(r.zero == 0);
  CHECK(r.offload == Offload::none);
}

TEST_CASE(
    "advice: FSDP with gradient accumulation under the HF Trainer first "
    "reduce-scatters every micro-batch",
    "[advice]") {
  // Llama-3.1-8B full fine-tuning over 8 x A100-40 with FSDP, 8 micro-batches
  // of 4,096 tokens. The Trainer runs the first 7 under no_sync, so every GPU
  // holds the unsharded bf16 gradients: 8,030,261,248 x 2 B = 16.06 GB, not
  // a 2.01 GB shard. sync_each_batch drops the other 7/8 (14.05 GB), which
  // an engineer sets before buying GPUs; its block must carry it.
  Setup s{.gpus = 8,
          .mode = Mode::full,
          .seq = 4096,
          .dtype = Dtype::bf16,
          .fsdp = true,
          .checkpointing = Checkpointing::full,
          .attn = Attn::sdpa,
          .grad_accum = 8};
  s.framework = Framework::hf_trainer;
  s.fsdp_no_sync = true;
  const Planned p = plan_case({"llama3.1-8b", "8xA100-40", s});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  CHECK_FALSE(first.setup.fsdp_no_sync);
  CHECK(first.setup.grad_accum == 8);
  CHECK(p.budget.total_bytes() - first.total_bytes >= 14052957184);
  bool sync_key = false;
  for (const auto& block : first.launch) {
    sync_key = sync_key ||
               block.text.find("\"sync_each_batch\":true") != std::string::npos;
  }
  CHECK(sync_key);
}

TEST_CASE(
    "advice: LitGPT's default bf16-mixed LoRA is fixed first with "
    "bf16-true, never with checkpointing it cannot set",
    "[advice][litgpt]") {
  // Llama-3.1-8B LoRA at 2,048 tokens on one A100-40 under LitGPT's
  // defaults: fp32 weights (32 GB) and, under autocast, a bf16 copy of the
  // frozen head per 128-token lm_head call (16 x 1.05 GB). An engineer
  // passes --precision bf16-true first: 16-bit weights, no casts, same speed.
  // finetune_lora has no checkpointing setting on one device.
  Setup s{.mode = Mode::lora,
          .seq = 2048,
          .attn = Attn::sdpa,
          .precision = Precision::amp,
          .lora_rank = 8,
          .lora_targets = k_lora_q | k_lora_v,
          .lora_dropout = 0.05,
          .untied_head = true,
          .loss = Loss::chunked};
  s.lm_head_chunk = 128;
  s.framework = Framework::litgpt;
  const Planned p = plan_case({"llama3.1-8b", "1xA100-40", s});
  REQUIRE_FALSE(p.budget.fits());
  REQUIRE_FALSE(p.fixes.empty());
  const Fix& first = p.fixes.front();
  CHECK(first.group == FixGroup::same_hardware);
  CHECK(first.setup.precision == Precision::pure);
  CHECK(first.setup.checkpointing == Checkpointing::none);
  CHECK(first.risk == Risk::low);
  // At 8,192 tokens in bf16-true the activations are what is left: on one
  // A100-40 only another framework (torchtune) or a second GPU (where
  // LitGPT checkpoints every Block) brings checkpointing.
  s.precision = Precision::pure;
  s.seq = 8192;
  const Planned longer = plan_case({"llama3.1-8b", "1xA100-40", s});
  REQUIRE_FALSE(longer.budget.fits());
  for (const Planned* q : {&p, &longer}) {
    for (const Fix& f : q->fixes) {
      INFO(f.title);
      CHECK((f.gpu != q->gpu || f.setup.total_gpus() > 1 ||
             f.group == FixGroup::switch_framework ||
             f.setup.checkpointing == Checkpointing::none));
    }
  }
}

TEST_CASE(
    "advice: LoRA instead of full fine-tuning builds the adapters as the "
    "framework does and prints the launch line that runs them",
    "[advice][litgpt]") {
  // Llama-3.1-8B full fine-tuning at 2,048 tokens on 2 x RTX 4090 does not
  // fit under any framework. The "LoRA instead" fix must keep each
  // framework's adapters: torchtune builds them in `dtype` (bf16, no fp32
  // copy: training.set_default_dtype in the recipes); PEFT upcasts them to
  // fp32 (peft tuners_utils.py _cast_adapter_dtype); LitGPT's finetune_lora
  // splits the head in 128-token calls. Before, every framework got fp32
  // adapters, and torchtune's fix printed no launch ("fp32 master
  // weights").
  const auto lora_fix = [](Framework fw) -> std::optional<Fix> {
    Setup s{.mode = Mode::full, .seq = 2048};
    s.framework = fw;
    for (const LaunchOption& o :
         framework_defaults(framework_name(fw), "full")) {
      apply_option(s, o.flag, o.value);
    }
    s.mode = Mode::full;  // LitGPT's table starts `litgpt finetune` (LoRA)
    const Planned p = plan_case({"llama3.1-8b", "2xRTX4090", s});
    REQUIRE_FALSE(p.budget.fits());
    for (const Fix& f : p.fixes) {
      if (f.id.rfind("lora", 0) == 0) {
        return f;
      }
    }
    return std::nullopt;
  };
  const auto tune = lora_fix(Framework::torchtune);
  REQUIRE(tune);
  CHECK(tune->setup.precision == Precision::pure);
  REQUIRE_FALSE(tune->launch.empty());
  CHECK(tune->launch.front().framework == "torchtune");
  const auto hf = lora_fix(Framework::hf_trainer);
  REQUIRE(hf);
  CHECK(hf->setup.precision == Precision::mixed);
  const auto lit = lora_fix(Framework::litgpt);
  REQUIRE(lit);
  CHECK(lit->setup.lm_head_chunk == 128);
  REQUIRE_FALSE(lit->launch.empty());
  CHECK_THAT(lit->launch.front().text,
             Catch::StartsWith("litgpt finetune_lora "));
}

TEST_CASE(
    "advice: a GPTQ plan on exllamav2 goes to the kernel without its scratch "
    "first",
    "[advice]") {
  // Llama-2-13B GPTQ at 3 x 4,864 tokens on one A10G: 21.82 of 22.06 GiB
  // usable, 1.1 % headroom, of which exllamav2's scratch (2 x 5,120 x
  // 13,824 + 13,824 x 2,048 x 8 x 4 + 256 = 1,047,527,680 B) is the part an
  // engineer drops first. On Ampere with GPTQModel (transformers 4.49+)
  // Marlin keeps none and runs faster; before 4.49 AutoGPTQ's exllama (v1)
  // keeps one dequantized layer (141,557,760 B); on a T4 (sm75, no Marlin)
  // GPTQModel's Triton kernel.
  Setup s{.seq = 4864, .batch = 3};
  s.quant = Quant::gptq;
  s.gptq_kernel = GptqKernel::exllamav2;
  const auto first = [](const char* gpus, const Setup& t) {
    const Planned p = plan_case({"llama-2-13b", gpus, t});
    REQUIRE_FALSE(p.budget.fits_with_margin());
    REQUIRE_FALSE(p.fixes.empty());
    CHECK(p.fixes.front().group == FixGroup::same_hardware);
    return p.fixes.front().setup.gptq_kernel;
  };
  CHECK(first("1xA10G", s) == GptqKernel::marlin);
  Setup old = s;
  old.transformers_release = Release{4, 46, 0};
  CHECK(first("1xA10G", old) == GptqKernel::exllama);
  // A T4 holds 14.75 GiB usable: 3 x 2,304 tokens need 14.82.
  Setup t4 = s;
  t4.seq = 2304;
  CHECK(first("1xT4", t4) == GptqKernel::triton);
}
