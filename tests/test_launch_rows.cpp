// The launch readers' table machinery (src/launch/rows.hpp): a key routed to
// its setter, options in table order, unused and unknown keys reported,
// refusals naming the file and key. The tables here are toys written for the
// test; the expected options, lists and messages are written out by hand.

// The launch library is built with JSON_DIAGNOSTICS (nlohmann's ABI tag
// follows it), so the Json this file builds must be the same type.
#define JSON_DIAGNOSTICS 1  // NOLINT(cppcoreguidelines-macro-usage)

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

namespace {

using oomplan::Error;
using oomplan::LaunchOption;
using oomplan::LaunchPlan;
using oomplan::launch::Json;
using oomplan::launch::KeyReader;
using oomplan::launch::Reading;

// A toy reader: a row stores the micro batch, a later row reads it.
struct Toy : Reading {
  std::int64_t micro = 0;
};
using Row = oomplan::launch::KeyRow<Toy>;

void store_micro(Toy& s, const Row& row) {
  s.micro = s.keys.integer(row.key, 1, 64).value_or(1);
}

// batch_size / micro -> --grad-accum, keyed by the later row's key.
void grad_accum_from_total(Toy& s, const Row& row) {
  if (const auto total = s.keys.integer(row.key, 1, 1024)) {
    oomplan::launch::set_option(s.plan, "--grad-accum",
                                std::to_string(*total / s.micro),
                                std::string(row.key));
  }
}

constexpr std::string_view k_src = "toy/config.py";

constexpr std::array k_rows = {
    Row::integer("seq", "--seq", 1, 10'000'000, k_src),
    Row::when_true("flash", "--attn", "flash", k_src),
    Row::parallel("tp", "--tp", k_src),
    Row{"micro", store_micro, k_src},
    Row{"total", grad_accum_from_total, k_src},
    Row::refuse_true("fp8", "FP8 training is not modelled", k_src),
    Row::refuse_degree("cp", -1, "context parallelism is not modelled", k_src),
    Row::refuse_present("ref_model", "a second model is not modelled", k_src),
    Row::unused("logging_steps", k_src),
    Row::unused_children("wandb", k_src),
    Row::integer("zero.stage", "--zero", 0, 3, k_src),
};

// Reads `text` (JSON) through k_rows, then reports the leftover keys.
LaunchPlan walk(const std::string& text) {
  const Json doc = Json::parse(text);
  KeyReader keys(doc, "cfg.yaml");
  LaunchPlan plan;
  Toy toy{{keys, plan}};
  oomplan::launch::walk_rows(toy, k_rows);
  keys.finish(plan);
  return plan;
}

std::string refusal(const std::string& text) {
  try {
    walk(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("launch rows: each key goes to its row's setter", "[launch][rows]") {
  const LaunchPlan plan =
      walk(R"({"seq": 4096, "flash": true, "tp": 4, "zero": {"stage": 3}})");
  CHECK(plan.options ==
        std::vector<LaunchOption>{{"--seq", "4096", "seq"},
                                  {"--attn", "flash", "flash"},
                                  {"--tp", "4", "tp"},
                                  {"--zero", "3", "zero.stage"}});
  CHECK(plan.unused_keys.empty());
  CHECK(plan.unknown_keys.empty());
}

TEST_CASE("launch rows: options come out in table order, not file order",
          "[launch][rows]") {
  const LaunchPlan plan = walk(R"({"flash": true, "seq": 512})");
  CHECK(plan.options ==
        std::vector<LaunchOption>{{"--seq", "512", "seq"},
                                  {"--attn", "flash", "flash"}});
}

TEST_CASE("launch rows: a switch that is off and a degree of 1 set nothing",
          "[launch][rows]") {
  const LaunchPlan plan =
      walk(R"({"flash": false, "tp": 1, "fp8": false, "cp": 1})");
  CHECK(plan.options.empty());
  // Read, so neither unused nor unknown.
  CHECK(plan.unused_keys.empty());
  CHECK(plan.unknown_keys.empty());
}

TEST_CASE("launch rows: a later row reads what an earlier row stored",
          "[launch][rows]") {
  // 32 sequences per step of 4 per GPU: 8 accumulation steps.
  const LaunchPlan plan = walk(R"({"total": 32, "micro": 4})");
  CHECK(plan.options ==
        std::vector<LaunchOption>{{"--grad-accum", "8", "total"}});
}

TEST_CASE("launch rows: unused and unknown keys are reported in file order",
          "[launch][rows]") {
  const LaunchPlan plan = walk(
      R"({"mystery": 1, "logging_steps": 10, "wandb": {"project": "p",
          "entity": "e"}, "seq": 8, "zero": {"stage": 2, "bucket": 5}})");
  CHECK(plan.unused_keys == std::vector<std::string>{"logging_steps",
                                                     "wandb.project",
                                                     "wandb.entity"});
  CHECK(plan.unknown_keys ==
        std::vector<std::string>{"mystery", "zero.bucket"});
}

TEST_CASE("launch rows: a refusing row names the file and the key",
          "[launch][rows]") {
  CHECK(refusal(R"({"fp8": true})") ==
        "cfg.yaml: fp8: FP8 training is not modelled");
  CHECK(refusal(R"({"cp": 2})") ==
        "cfg.yaml: cp: context parallelism is not modelled");
  // Present at all, even false, asks for a second model.
  CHECK(refusal(R"({"ref_model": false})") ==
        "cfg.yaml: ref_model: a second model is not modelled");
}

TEST_CASE("launch rows: of two refused keys the earlier row's is reported",
          "[launch][rows]") {
  CHECK(refusal(R"({"ref_model": "m", "fp8": true})") ==
        "cfg.yaml: fp8: FP8 training is not modelled");
}

TEST_CASE("launch rows: a value out of a row's range is refused",
          "[launch][rows]") {
  CHECK(refusal(R"({"seq": 0})") ==
        "cfg.yaml: seq: expected a whole number from 1 to 10000000, got 0");
  CHECK(refusal(R"({"zero": {"stage": 4}})") ==
        "cfg.yaml: zero.stage: expected a whole number from 0 to 3, got 4");
  CHECK(refusal(R"({"flash": "maybe"})") ==
        "cfg.yaml: flash: expected true or false, got \"maybe\"");
}
