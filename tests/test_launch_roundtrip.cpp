// The launch writers' contract (launch.hpp write_launch): every fix's launch
// blocks, pasted as they are, plan what oomplan priced. Over a generated
// corpus of plans that do not fit (models x cards x modes x engines x
// sequence lengths x batches x sharding x every framework), each fix's
// blocks are read back by oomplan's own readers as `oomplan check` reads
// them and re-priced on the fix's card: the total must be within 0.5 %.

#include "launch_roundtrip.hpp"
#include "support.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/launch/launch.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace oomplan;

struct Corpus {
  std::vector<std::string> commands;  // each plan as `oomplan ...` args
  std::size_t plans = 0;              // that do not fit
  std::size_t fixes = 0;              // with blocks read back
  std::vector<std::string> failures;
};

// The sharding of a training plan.
void shard(Setup& s, int which) {
  switch (which) {
    case 1:
      s.zero = 3;
      break;
    case 2:
      s.fsdp = true;
      break;
    case 3:
      s.zero = 2;
      s.offload = Offload::optimizer;
      break;
    default:
      break;
  }
}

// A setup as `--framework NAME` starts it: the framework's defaults (for
// the frameworks that have a reader), then the corpus's own settings.
Setup start(Framework fw, int gpus, Mode mode, Engine engine, std::int64_t seq,
            std::int64_t batch) {
  Setup s;
  const auto names = framework_names();
  const std::string_view name = framework_name(fw);
  if (std::find(names.begin(), names.end(), name) != names.end()) {
    for (const LaunchOption& o : framework_defaults(name, mode_name(mode))) {
      apply_option(s, o.flag, o.value);
    }
  }
  s.framework = fw;
  s.gpus = gpus;
  s.mode = mode;
  s.engine = engine;
  s.seq = seq;
  s.batch = batch;
  return s;
}

// A preference objective the framework's files express (issue 25): every
// objective in TRL's, accelerate's, DeepSpeed's and axolotl's files;
// LLaMA-Factory has no precomputed reference; torchtune ships DPO and SimPO
// losses; Megatron none.
std::optional<TrainObjective> objective_for(Framework fw, std::size_t n) {
  constexpr std::array k_all = {TrainObjective::dpo, TrainObjective::orpo,
                                TrainObjective::kto, TrainObjective::simpo};
  switch (fw) {
    case Framework::megatron:
    case Framework::litgpt:  // its finetune scripts have no preference loss
      return std::nullopt;
    case Framework::torchtune:
      return n % 2 == 0 ? TrainObjective::dpo : TrainObjective::simpo;
    default:
      return k_all[n % k_all.size()];
  }
}

void advise_one(const Model& model, const Gpu& gpu, const Setup& s, Corpus& c) {
  const Pricing p = price(model, gpu, s);
  if (!p.priced || p.priced->budget.fits_with_margin()) {
    return;
  }
  ++c.plans;
  const std::string command = plan_args(model.name, model, gpu, s);
  for (const Fix& fix : advise(model, gpu, s, oomplan::test::catalog().gpus)) {
    if (oomplan::test::roundtrip_files(fix).empty()) {
      continue;
    }
    ++c.fixes;
    if (const auto problem = oomplan::test::roundtrip_problem(model, fix)) {
      c.failures.push_back(fmt::format("oomplan {} --framework {}\n  {}",
                                       command, framework_name(*s.framework),
                                       *problem));
    }
  }
}

Corpus corpus() {
  const Catalog& cat = oomplan::test::catalog();
  constexpr std::array k_models = {"llama3-8b",   "llama3-70b", "qwen2.5-32b",
                                   "mistral-7b",  "gemma-2-9b", "qwen2.5-7b",
                                   "mixtral-8x7b"};
  constexpr std::array k_cards = {"RTX4090", "A100-80", "L40S", "H100", "T4"};
  constexpr std::array k_counts = {1, 8};
  constexpr std::array k_train = {
      Framework::hf_trainer,    Framework::trl,       Framework::deepspeed,
      Framework::accelerate,    Framework::torchtune, Framework::axolotl,
      Framework::llama_factory, Framework::megatron,  Framework::litgpt};
  Corpus c;
  std::size_t n = 0;
  for (const char* m : k_models) {
    const Model& model = find_model(cat, m);
    for (const char* card : k_cards) {
      const Gpu& gpu = find_gpu(cat, card);
      for (const int count : k_counts) {
        for (const std::int64_t seq : {2048, 8192}) {
          for (const std::int64_t batch : {1, 4}) {
            for (const Engine engine : {Engine::hf, Engine::vllm}) {
              const Setup s =
                  start(engine == Engine::vllm ? Framework::vllm
                                               : Framework::generate,
                        count, Mode::infer, engine, seq, batch);
              advise_one(model, gpu, s, c);
            }
            for (const Mode mode : {Mode::full, Mode::lora, Mode::qlora}) {
              for (int sharding = 0; sharding < 4; ++sharding) {
                Setup s = start(k_train[n++ % k_train.size()], count, mode,
                                Engine::hf, seq, batch);
                shard(s, sharding);
                advise_one(model, gpu, s, c);
                if (const auto o = objective_for(*s.framework, n / 3);
                    o && n % 3 == 0) {
                  // Every reader plans a preference loss on the full
                  // logits.
                  s.objective = *o;
                  s.loss = Loss::full;
                  advise_one(model, gpu, s, c);
                }
              }
            }
          }
        }
      }
    }
  }
  return c;
}

}  // namespace

TEST_CASE("launch round trip: every fix's blocks plan the fix (0.5 %)",
          "[launch][roundtrip]") {
  const Corpus c = corpus();
  INFO(c.plans << " plans that do not fit, " << c.fixes << " fixes read back");
  CHECK(c.plans >= 2000);
  CHECK(c.fixes >= 2000);
  for (std::size_t i = 0; i < c.failures.size() && i < 10; ++i) {
    UNSCOPED_INFO(c.failures[i]);
  }
  CHECK(c.failures.empty());
  if (!c.failures.empty()) {
    WARN(c.failures.size() << " fixes do not round-trip");
  }
}
