#include "support.hpp"

#include "oomplan/launch/launch.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

// FSDP1 (FullyShardedDataParallel) against FSDP2 (fully_shard): --fsdp-version
// in the option table, the launch readers that state it, and the memory
// terms of src/memory/buffers.cpp and train_states.cpp, with byte counts
// derived by hand below.

namespace {

using namespace oomplan;
using test::llama3_70b;

constexpr double k_gib_d = 1024.0 * 1024.0 * 1024.0;

// Llama-3-8B by hand: h 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128,
// I 14336, vocabulary 128,256, untied embeddings.
Model llama3_8b() {
  Model m = llama3_70b();
  m.name = "llama-3-8b";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.intermediate_size = 14336;
  return m;
}

Gpu h100() {
  Gpu g;
  g.name = "H100";
  g.compute_capability = 90;
  g.capacity_bytes = static_cast<Bytes>(79.19 * k_gib_d);
  g.nvlink_gb_s = 900;
  return g;
}

// A full fine-tune whose peak is in backward (no checkpointing, 8k tokens),
// so the peak moment holds the gathered units.
Setup full_8k(int gpus, int version) {
  Setup s{.gpus = gpus,
          .mode = Mode::full,
          .seq = 8192,
          .fsdp = true,
          .fsdp_version = version};
  return s;
}

// One decoder layer of Llama-3-8B, the unit FSDP wraps:
// q, o 4096 x 4096 = 16,777,216 each; k, v 4096 x 1024 = 4,194,304 each;
// gate, up, down 4096 x 14336 = 58,720,256 each; 2 RMSNorms 4,096 each:
// 2 x 16,777,216 + 2 x 4,194,304 + 3 x 58,720,256 + 8,192 = 218,112,000.
constexpr Bytes k_layer = 218'112'000;
// Embedding and lm_head: 128,256 x 4,096 = 525,336,576 each.
constexpr Bytes k_vocab = 525'336'576;

}  // namespace

TEST_CASE("fsdp: FSDP2 gathers two layers or a layer and the vocabulary unit",
          "[fsdp]") {
  const Budget b = test::budget(llama3_8b(), h100(), full_8k(8, 2));
  REQUIRE(b.peak.phase == Phase::backward);
  // max(2 x 436,224,000, 436,224,000 + 1,050,673,152) = 1,486,897,152
  // gathered in bf16, plus one layer's unsharded bf16 gradient 436,224,000.
  CHECK(b.bytes_of("buffers") == 1'486'897'152 + 436'224'000);
}

TEST_CASE(
    "fsdp: FSDP1 on 8 GPUs holds the root unit unsharded and the flat "
    "gradient's shard",
    "[fsdp]") {
  const Budget b = test::budget(llama3_8b(), h100(), full_8k(8, 1));
  REQUIRE(b.peak.phase == Phase::backward);
  // 218,112,000 / 8 = 27,264,000: no padding, so the flat parameter is
  // 436,224,000 B in bf16, and the reduce-scatter needs no padded copy.
  // Two units (computing + BACKWARD_PRE prefetch) 872,448,000
  // + the root unit (embedding + lm_head, 2 x 525,336,576 x 2 B)
  //   2,101,346,304
  // + the unsharded flat gradient 436,224,000
  // + the reduce-scatter output 27,264,000 x 2 B = 54,528,000
  // = 3,464,546,304.
  CHECK(b.bytes_of("buffers") == 3'464'546'304);
  // Held for streams, reserved but not allocated: one all-gather output the
  // rate limiter lets pend (2 in flight - 1 synchronized) 436,224,000 and
  // the gradient block the reduce-scatter still reads 436,224,000.
  const Bytes held = 872'448'000;
  const Bytes cached = std::llround(
      static_cast<double>(b.peak.allocated_bytes) * 0.08);  // k_train_reserve
  CHECK(std::llabs(b.bytes_of("fragmentation") - held - cached) <= 1);
  CHECK(b.peak.reserved_bytes - b.peak.allocated_bytes ==
        b.bytes_of("fragmentation"));
  CHECK(b.peak.device_bytes == b.total_bytes());
  static_assert(2 * k_layer * 2 + 2 * k_vocab * 2 + k_layer * 2 +
                    k_layer / 8 * 2 ==
                3'464'546'304);
}

TEST_CASE(
    "fsdp: FSDP1 pads a unit to a multiple of the world size and copies the "
    "gradient for the reduce-scatter",
    "[fsdp]") {
  const Budget b = test::budget(llama3_8b(), h100(), full_8k(7, 1));
  REQUIRE(b.peak.phase == Phase::backward);
  // 218,112,000 / 7 = 31,158,857.14: chunks of 31,158,858, padded to
  // 218,112,006 elements (6 of padding), 436,224,012 B in bf16.
  // Two units 872,448,024 + root 2,101,346,304 + flat gradient 436,224,000
  // + F.pad's padded copy 436,224,012 + shard 31,158,858 x 2 B = 62,317,716
  // = 3,908,560,056.
  CHECK(b.bytes_of("buffers") == 3'908'560'056);
}

TEST_CASE(
    "fsdp: CPU offload copies a unit's shard to the GPU for its all-gather",
    "[fsdp]") {
  // offload_params: the 27,264,000-element shard (218,112,000 / 8) comes to
  // the GPU for each all-gather, 54,528,000 B in bf16, next to the buffers
  // of the same run without offload (3,464,546,304, above).
  Setup s = full_8k(8, 1);
  s.offload = Offload::params;
  const Budget b = test::budget(llama3_8b(), h100(), s);
  CHECK(b.bytes_of("buffers") == 3'464'546'304 + 54'528'000);
  CHECK(b.bytes_of("weights") == 0);  // the parameters live on the CPU
  // FSDP2 copies the same shard (FSDPParam.all_gather_inputs).
  s.fsdp_version = 2;
  CHECK(test::budget(llama3_8b(), h100(), s).bytes_of("buffers") ==
        test::budget(llama3_8b(), h100(), full_8k(8, 2)).bytes_of("buffers") +
            54'528'000);
}

TEST_CASE("fsdp: FSDP1's peaks are never below FSDP2's for the same setup",
          "[fsdp]") {
  const Gpu g = h100();
  for (const Model& m : {llama3_8b(), llama3_70b()}) {
    for (int gpus : {2, 7, 8}) {
      for (Mode mode : {Mode::full, Mode::lora, Mode::qlora}) {
        for (Checkpointing ckpt : {Checkpointing::none, Checkpointing::full}) {
          Setup s{.gpus = gpus,
                  .mode = mode,
                  .seq = 2048,
                  .fsdp = true,
                  .checkpointing = ckpt};
          s.fsdp_version = 2;
          const Budget two = test::budget(m, g, s);
          s.fsdp_version = 1;
          const Budget one = test::budget(m, g, s);
          INFO(m.name << " gpus " << gpus << " mode " << mode_name(mode));
          CHECK(one.peak.allocated_bytes >= two.peak.allocated_bytes);
          CHECK(one.peak.reserved_bytes >= two.peak.reserved_bytes);
          CHECK(one.total_bytes() >= two.total_bytes());
          // Reserved-only memory: FSDP1's record_stream blocks widen the
          // gap between reserved and allocated.
          CHECK(one.peak.reserved_bytes - one.peak.allocated_bytes >
                two.peak.reserved_bytes - two.peak.allocated_bytes);
        }
      }
    }
  }
}

TEST_CASE("fsdp: a single GPU gathers nothing, whatever the version",
          "[fsdp]") {
  const Budget one = test::budget(llama3_8b(), h100(), full_8k(1, 1));
  const Budget two = test::budget(llama3_8b(), h100(), full_8k(1, 2));
  CHECK(one.peak.reserved_bytes == two.peak.reserved_bytes);
  CHECK(one.total_bytes() == two.total_bytes());
}

TEST_CASE("fsdp: --fsdp-version is one option-table row", "[fsdp]") {
  const OptionRow* row = find_option("--fsdp-version");
  REQUIRE(row != nullptr);
  CHECK(row == find_option("fsdp_version"));
  CHECK(row->default_text == "2");
  Setup s;
  apply_option(s, "--fsdp-version", "1");
  REQUIRE(s.fsdp_version);
  CHECK(*s.fsdp_version == 1);
  try {
    apply_option(s, "--fsdp-version", "3");
    FAIL("no error for version 3");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "--fsdp-version 3 is out of range; use 1 to 2");
  }
}

TEST_CASE(
    "fsdp: the JSON setup, the setup line and the re-run words state "
    "FSDP1",
    "[fsdp]") {
  const auto one =
      test::run_cli({"llama-3-8b", "--gpus", "8xH100", "--mode", "full",
                     "--fsdp", "--fsdp-version", "1", "--json"});
  REQUIRE(one.code <= 1);
  const auto doc = nlohmann::json::parse(one.out);
  CHECK(doc.at("setup").at("fsdp_version") == 1);
  CHECK(doc.at("setup").at("fsdp") == true);
  const auto text = test::run_cli({"llama-3-8b", "--gpus", "8xH100", "--mode",
                                   "full", "--fsdp", "--fsdp-version", "1"});
  CHECK(text.out.find("fsdp1") != std::string::npos);
  // The default stays out of the setup line and re-run words.
  const auto two = test::run_cli(
      {"llama-3-8b", "--gpus", "8xH100", "--mode", "full", "--fsdp", "--json"});
  const auto doc2 = nlohmann::json::parse(two.out);
  CHECK(doc2.at("setup").at("fsdp_version") == 2);
  CHECK(two.out.find("--fsdp-version") == std::string::npos);
}

TEST_CASE("fsdp: --fsdp-version without --fsdp is refused", "[fsdp]") {
  const auto r = test::run_cli({"llama-3-8b", "--gpus", "8xH100", "--mode",
                                "full", "--zero", "2", "--fsdp-version", "1"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--fsdp-version 1 applies to FSDP FULL_SHARD; add --fsdp "
                   "or drop --fsdp-version") != std::string::npos);
}

TEST_CASE("fsdp: --fsdp-frozen-grads outside LoRA under FSDP1 is refused",
          "[fsdp]") {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--mode", "lora", "--fsdp"},
        {"--mode", "full", "--fsdp", "--fsdp-version", "1"},
        {"--mode", "qlora", "--fsdp", "--fsdp-version", "1"}}) {
    std::vector<std::string> args{"llama-3-8b", "--gpus", "8xH100",
                                  "--fsdp-frozen-grads"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_cli(args);
    CHECK(r.code == 2);
    CHECK(r.err ==
          "oomplan: error: --fsdp-frozen-grads applies to --mode lora under "
          "--fsdp --fsdp-version 1 (FSDP1 flat units); add them or drop "
          "--fsdp-frozen-grads\n");
  }
}

TEST_CASE(
    "fsdp: no_sync keeps the unsharded gradients only under FSDP with "
    "accumulation",
    "[fsdp]") {
  // Llama-3-8B full fine-tuning over 8 GPUs in pure bf16: 8,030,261,248
  // parameters x 2 B = 16,060,522,496 B of gradients, 2,007,565,312 B a
  // shard. no_sync adds the other 7/8 before the last micro-batch:
  // 14,052,957,184 B.
  auto gradients = [](bool no_sync, int accum, bool fsdp) {
    Setup s{.gpus = 8, .mode = Mode::full, .seq = 2048, .fsdp = fsdp};
    s.precision = Precision::pure;
    s.checkpointing = Checkpointing::full;
    s.grad_accum = accum;
    s.fsdp_no_sync = no_sync;
    if (!fsdp) {
      s.zero = 2;
    }
    const Budget b = test::budget(llama3_8b(), h100(), s);
    return b.peak.allocated_bytes;
  };
  CHECK(gradients(true, 4, true) - gradients(false, 4, true) ==
        Approx(14052957184.0).epsilon(1e-9));
  CHECK(gradients(true, 1, true) == gradients(false, 1, true));
  CHECK(gradients(true, 4, false) == gradients(false, 4, false));
  // The JSON setup says so only where it applies.
  auto stated = [](std::vector<std::string> extra) {
    std::vector<std::string> args{"llama-3-8b", "--gpus",        "8xH100",
                                  "--mode",     "full",          "--fsdp",
                                  "--json",     "--fsdp-no-sync"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_cli(args);
    REQUIRE(r.code <= 1);
    return nlohmann::json::parse(r.out)
        .at("setup")
        .at("fsdp_no_sync")
        .get<bool>();
  };
  CHECK(stated({"--grad-accum", "4"}));
  CHECK_FALSE(stated({}));
}

namespace {

LaunchPlan read_one(const std::string& origin, const std::string& text) {
  const FileLoader none = [](const std::string&, const std::string&) {
    return std::optional<std::string>();
  };
  auto plans = read_launch_files({{origin, text}}, none);
  REQUIRE(plans.size() == 1);
  return plans.front();
}

// The plan's --fsdp-version: the option the file states, else the
// framework's default, else "(absent)".
std::string version_of(const LaunchPlan& p) {
  for (const auto& o : p.options) {
    if (o.flag == "--fsdp-version") {
      return o.value;
    }
  }
  for (const auto& o : p.framework_defaults) {
    if (o.flag == "--fsdp-version") {
      return "default " + o.value;
    }
  }
  return "(absent)";
}

}  // namespace

TEST_CASE("fsdp: the launch readers map fsdp_version to --fsdp-version",
          "[fsdp]") {
  // accelerate config: fsdp_version absent is FSDP1 (accelerate's default).
  CHECK(version_of(read_one("acc.yaml",
                            "distributed_type: FSDP\nfsdp_config:\n"
                            "  fsdp_sharding_strategy: FULL_SHARD\n")) ==
        "default 1");
  CHECK(version_of(read_one("acc.yaml",
                            "distributed_type: FSDP\nfsdp_config:\n"
                            "  fsdp_version: 2\n"
                            "  fsdp_reshard_after_forward: true\n")) == "2");
  CHECK(version_of(read_one("acc.yaml",
                            "distributed_type: FSDP\nfsdp_config:\n"
                            "  fsdp_version: 1\n"
                            "  fsdp_sharding_strategy: FULL_SHARD\n")) == "1");
  // SHARD_GRAD_OP is --zero 2: no --fsdp, so no version.
  CHECK(version_of(read_one("acc.yaml",
                            "distributed_type: FSDP\nfsdp_config:\n"
                            "  fsdp_sharding_strategy: SHARD_GRAD_OP\n")) ==
        "(absent)");
  // HF TrainingArguments: `fsdp` + fsdp_config {"version": 2}.
  CHECK(version_of(read_one("args.json",
                            R"({"output_dir": "o", "fsdp": "full_shard",
                                "fsdp_config": {"version": 2}})")) == "2");
  CHECK(version_of(read_one("args.json",
                            R"({"output_dir": "o",
                                "fsdp": "full_shard auto_wrap"})")) ==
        "default 1");
  // axolotl: the top-level fsdp_version, or the one inside fsdp_config.
  CHECK(version_of(read_one("ax.yaml",
                            "base_model: m\nfsdp_version: 2\nfsdp_config:\n"
                            "  reshard_after_forward: true\n")) == "2");
  CHECK(version_of(read_one("ax.yaml",
                            "base_model: m\nfsdp_config:\n"
                            "  fsdp_version: 2\n")) == "2");
  CHECK(version_of(read_one("ax.yaml",
                            "base_model: m\nfsdp:\n  - full_shard\n"
                            "fsdp_config:\n  fsdp_offload_params: false\n")) ==
        "default 1");
}

namespace {

// The value a plan gives `flag`: the file's option, else "default V", else
// "(absent)".
std::string option_of(const LaunchPlan& p, std::string_view flag) {
  for (const auto& o : p.options) {
    if (o.flag == flag) {
      return o.value;
    }
  }
  for (const auto& o : p.framework_defaults) {
    if (o.flag == flag) {
      return "default " + o.value;
    }
  }
  return "(absent)";
}

}  // namespace

TEST_CASE(
    "fsdp: readers map FSDP activation checkpointing to --use-cache and "
    "sync_each_batch to --fsdp-no-sync false",
    "[fsdp]") {
  // accelerate's fsdp_activation_checkpointing wraps layers in FSDP's
  // checkpoint_wrapper: the model's use_cache stays on.
  const LaunchPlan acc = read_one("acc.yaml",
                                  "distributed_type: FSDP\nfsdp_config:\n"
                                  "  fsdp_activation_checkpointing: true\n");
  CHECK(option_of(acc, "--checkpointing") == "full");
  CHECK(option_of(acc, "--use-cache") == "true");
  CHECK(option_of(acc, "--fsdp-no-sync") == "default ");
  // The Trainer's no_sync is a framework default; accelerator_config's
  // sync_each_batch turns it off.
  const LaunchPlan args = read_one(
      "args.json", R"({"output_dir": "o", "fsdp": "full_shard auto_wrap",
                       "gradient_accumulation_steps": 4,
                       "accelerator_config": {"gradient_accumulation_kwargs":
                                              {"sync_each_batch": true}}})");
  CHECK(option_of(args, "--fsdp-no-sync") == "false");
  CHECK(std::find(args.unknown_keys.begin(), args.unknown_keys.end(),
                  "accelerator_config.gradient_accumulation_kwargs") ==
        args.unknown_keys.end());
  const LaunchPlan plain = read_one(
      "args.json", R"({"output_dir": "o", "fsdp": "full_shard auto_wrap"})");
  CHECK(option_of(plain, "--fsdp-no-sync") == "default ");
}
