// The search's knobs (src/advice/knobs.hpp): the moves a row makes around a
// start, against lists worked out by hand from the knob's contract, and the
// properties every row keeps (a move keeps the job, a scope adds only its
// own knobs, each move id belongs to one knob).

#include "advice/knobs.hpp"
#include "support.hpp"

#include "oomplan/advice/search.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace oomplan;

std::vector<Knob> knobs_of(const Model& model, const std::string& gpu_name,
                           const Setup& setup, const SearchScope& scope = {}) {
  const Gpu& gpu = find_gpu(test::catalog(), gpu_name);
  return knobs_for(gpu, setup, resolve(model, gpu, setup), scope);
}

// A copy: the knobs may be a temporary.
Knob knob_named(const std::vector<Knob>& knobs, std::string_view name) {
  for (const Knob& k : knobs) {
    if (k.name == name) {
      return k;
    }
  }
  FAIL("no knob " << name);
  return {};
}

bool has_knob(const std::vector<Knob>& knobs, std::string_view name) {
  return std::any_of(knobs.begin(), knobs.end(),
                     [&](const Knob& k) { return k.name == name; });
}

// The moves' titles (levels 1..n).
std::vector<std::string> titles(const Knob& k) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i < k.levels.size(); ++i) {
    out.push_back(k.levels[i].move.title);
  }
  return out;
}

// `gpus` GPUs in one node, and the options `flags` as the command line
// gives them.
Setup with(int gpus,
           std::vector<std::pair<std::string_view, std::string_view>> flags) {
  Setup s;
  s.gpus = gpus;
  for (const auto& [name, value] : flags) {
    apply_option(s, name, value);
  }
  return s;
}

}  // namespace

TEST_CASE("knobs: vLLM's gpu-util moves go nearest first, 0.95 most frugal",
          "[knobs]") {
  // From 0.9, the other values 0.95 0.92 0.85 0.8 0.75 0.7 0.6 0.5 are
  // 0.05, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3 and 0.4 away; of the two at 0.05,
  // 0.95 is listed first. The highest share leaves the KV cache the most.
  const auto knobs =
      knobs_of(test::llama3_70b(), "H100", with(8, {{"engine", "vllm"}}));
  const Knob util = knob_named(knobs, "gpu-util");
  CHECK(titles(util) ==
        std::vector<std::string>{"gpu-util 0.9 -> 0.92", "gpu-util 0.9 -> 0.95",
                                 "gpu-util 0.9 -> 0.85", "gpu-util 0.9 -> 0.8",
                                 "gpu-util 0.9 -> 0.75", "gpu-util 0.9 -> 0.7",
                                 "gpu-util 0.9 -> 0.6", "gpu-util 0.9 -> 0.5"});
  CHECK(util.frugal == 2);
}

TEST_CASE("knobs: a smaller micro-batch keeps the global batch by grad-accum",
          "[knobs]") {
  // Micro-batch 8 x grad-accum 2 = 16 sequences per step: the divisors 4, 2
  // and 1 of 8 need grad-accum 4, 8 and 16; micro-batch 1 saves the most.
  const auto knobs = knobs_of(
      test::llama2_7b(), "H100",
      with(1, {{"mode", "full"}, {"batch", "8"}, {"--grad-accum", "2"}}));
  const Knob micro = knob_named(knobs, "micro-batch");
  CHECK(titles(micro) ==
        std::vector<std::string>{"micro-batch 8 -> 4, grad-accum 2 -> 4",
                                 "micro-batch 8 -> 2, grad-accum 2 -> 8",
                                 "micro-batch 8 -> 1, grad-accum 2 -> 16"});
  CHECK(micro.frugal == 3);
}

TEST_CASE("knobs: ZeRO moves up from the start's stage; FSDP has none",
          "[knobs]") {
  const Model model = test::llama2_7b();
  const auto zero1 =
      knobs_of(model, "H100", with(8, {{"mode", "full"}, {"zero", "1"}}));
  const Knob zero = knob_named(zero1, "ZeRO stage");
  CHECK(titles(zero) ==
        std::vector<std::string>{"ZeRO stage 1 -> 2", "ZeRO stage 1 -> 3"});
  CHECK(zero.frugal == 2);  // stage 3 shards the most
  const auto fsdp =
      knobs_of(model, "H100", with(8, {{"mode", "full"}, {"fsdp", ""}}));
  CHECK_FALSE(has_knob(fsdp, "ZeRO stage"));
}

TEST_CASE("knobs: 4-bit weights are a moderate accuracy risk, 8-bit low",
          "[knobs]") {
  // fix.hpp's Risk: low for 8-bit weights, moderate for 4-bit. transformers
  // quantizes to int8, fp8 (FBGEMM, fp8 tensor cores: H100) or NF4; vLLM
  // has no on-the-fly int8 and serves AWQ checkpoints for 4 bits.
  const Model model = test::llama2_7b();
  const Knob hf =
      knob_named(knobs_of(model, "H100", with(1, {})), "weight format");
  REQUIRE(hf.levels.size() == 4);
  CHECK(hf.levels[1].move.id == "quantize-int8");
  CHECK(hf.levels[1].move.risk == Risk::low);
  CHECK(hf.levels[2].move.id == "quantize-fp8");
  CHECK(hf.levels[2].move.risk == Risk::low);
  CHECK(hf.levels[3].move.title == "4-bit NF4 weights");
  CHECK(hf.levels[3].move.risk == Risk::moderate);
  const Knob vllm =
      knob_named(knobs_of(model, "A100-80", with(1, {{"engine", "vllm"}})),
                 "weight format");
  CHECK(titles(vllm) ==
        std::vector<std::string>{"fp8 weights", "4-bit AWQ weights"});
  CHECK(vllm.frugal == 2);
}

TEST_CASE("knobs: tp x pp layouts on the same 8 GPUs, then whole layers",
          "[knobs]") {
  // 70B inference on 8 GPUs starts at tp 8: the other tp (<= 8 in a node)
  // x pp that divide 8 are tp 1 with pp 1, 2, 4, 8; tp 2 with pp 1, 2, 4;
  // tp 4 with pp 1, 2; then --split layers.
  const Knob layout =
      knob_named(knobs_of(test::llama3_70b(), "H100", with(8, {})), "layout");
  CHECK(titles(layout) ==
        std::vector<std::string>{"tp 1 x pp 1 x dp 8 on the same 8 GPUs",
                                 "tp 1 x pp 2 x dp 4 on the same 8 GPUs",
                                 "tp 1 x pp 4 x dp 2 on the same 8 GPUs",
                                 "tp 1 x pp 8 x dp 1 on the same 8 GPUs",
                                 "tp 2 x pp 1 x dp 4 on the same 8 GPUs",
                                 "tp 2 x pp 2 x dp 2 on the same 8 GPUs",
                                 "tp 2 x pp 4 x dp 1 on the same 8 GPUs",
                                 "tp 4 x pp 1 x dp 2 on the same 8 GPUs",
                                 "tp 4 x pp 2 x dp 1 on the same 8 GPUs",
                                 "whole layers per GPU (device_map=\"auto\")"});
  CHECK(layout.role == KnobRole::layout);
}

TEST_CASE("knobs: every move keeps the job, and each scope adds its own",
          "[knobs]") {
  const Model model = test::llama3_70b();
  const std::vector<Setup> starts = {
      with(8, {}),
      with(4, {{"engine", "vllm"}, {"seq", "32768"}}),
      with(8, {{"mode", "full"}, {"batch", "4"}}),
      with(2, {{"mode", "lora"}, {"dtype", "fp32"}}),
      with(8, {{"mode", "qlora"}, {"attn", "eager"}}),
  };
  const SearchScope plain{
      .layouts = false, .quantize = false, .offload = false};
  for (const Setup& start : starts) {
    INFO(plan_args(model.name, model, find_gpu(test::catalog(), "A100-80"),
                   start));
    std::map<std::string, std::string_view> knob_of_move;
    for (const Knob& k : knobs_of(model, "A100-80", start)) {
      INFO(k.name);
      REQUIRE(k.levels.size() >= 2);
      CHECK(k.levels[0].move.id.empty());
      CHECK(k.frugal >= 1);
      CHECK(k.frugal < k.levels.size());
      CHECK((k.role != KnobRole::side || start.training()));
      for (std::size_t i = 1; i < k.levels.size(); ++i) {
        Setup moved = start;
        k.levels[i].apply(moved);
        CHECK(moved.mode == start.mode);
        CHECK(moved.engine == start.engine);
        CHECK(moved.seq == start.seq);
        CHECK(moved.max_model_len == start.max_model_len);
        const auto [it, added] =
            knob_of_move.emplace(k.levels[i].move.id, k.name);
        CHECK(it->second == k.name);  // one knob per move id
      }
    }
    for (const Knob& k : knobs_of(model, "A100-80", start, plain)) {
      CHECK(k.scope == KnobScope::plain);
      CHECK(k.role != KnobRole::layout);
    }
  }
}
