// The advisor's capability table (advice/capability.hpp): its non-obvious
// cells against the frameworks' own sources (cited per check), and the
// property that the search's knobs never offer a move the framework cannot
// express, over a generated set of setups x frameworks.

#include "advice/knobs.hpp"
#include "support.hpp"

#include "oomplan/advice/capability.hpp"
#include "oomplan/advice/search.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/setup/resolve.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace oomplan;

constexpr std::array k_frameworks = {
    Framework::vllm,       Framework::deepspeed,     Framework::hf_trainer,
    Framework::trl,        Framework::accelerate,    Framework::axolotl,
    Framework::torchtune,  Framework::llama_factory, Framework::megatron,
    Framework::torchtitan, Framework::generate,      Framework::litgpt};

// The move ids of every knob around `s` on `gpu_name`.
std::vector<std::string> move_ids(const Model& model,
                                  const std::string& gpu_name, const Setup& s) {
  const Gpu& gpu = find_gpu(test::catalog(), gpu_name);
  std::vector<std::string> out;
  for (const Knob& k : knobs_for(gpu, s, resolve(model, gpu, s), {})) {
    for (std::size_t i = 1; i < k.levels.size(); ++i) {
      out.push_back(k.levels[i].move.id);
    }
  }
  return out;
}

bool contains(const std::vector<std::string>& ids, std::string_view id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

TEST_CASE("capability: FSDP has no optimizer-only offload", "[capability]") {
  // torch/distributed/fsdp/api.py: CPUOffload(offload_params=True) offloads
  // parameters, and with them gradients and optimizer states; there is no
  // flag for the optimizer states alone.
  Setup s;
  s.mode = Mode::full;
  s.fsdp = true;
  s.framework = Framework::accelerate;
  CHECK_FALSE(capability_of(s).optimizer_offload);
  CHECK_FALSE(capability_of(s).zero);
  s.fsdp = false;  // accelerate with a DeepSpeed plugin: ZeRO-Offload
  CHECK(capability_of(s).optimizer_offload);
  Setup fsdp = s;
  fsdp.fsdp = true;
  fsdp.gpus = 4;
  fsdp.framework.reset();
  const auto ids = move_ids(test::llama3_70b(), "A100-80", fsdp);
  CHECK_FALSE(contains(ids, "offload-optimizer"));
  CHECK_FALSE(contains(ids, "zero-stage"));
  CHECK(contains(ids, "offload-all"));
}

TEST_CASE(
    "capability: activation offload is TRL's, axolotl's, LLaMA-Factory's and"
    " torchtune's, not HF Trainer's",
    "[capability]") {
  // transformers' TrainingArguments has no activation offload; TRL's
  // SFTConfig has activation_offloading (trl/trainer/sft_config.py);
  // LLaMA-Factory use_unsloth_gc (hparams/model_args.py: unsloth's
  // checkpointing, which keeps the saved layer inputs in CPU RAM);
  // torchtune enable_activation_offloading (memory_optimizations.rst).
  CHECK(capability(Framework::llama_factory).activation_offload);
  CHECK_FALSE(capability(Framework::hf_trainer).activation_offload);
  CHECK_FALSE(capability(Framework::deepspeed).activation_offload);
  CHECK(capability(Framework::trl).activation_offload);
  CHECK(capability(Framework::axolotl).activation_offload);
  CHECK(capability(Framework::torchtune).activation_offload);
}

TEST_CASE("capability: torchtune's single-device moves", "[capability]") {
  // memory_optimizations.rst: optimizer_in_bwd, PagedAdamW8bit,
  // CEWithChunkedOutputLoss; training/precision.py: bf16 is pure, fp16 is
  // refused.
  const Capability& tt = capability(Framework::torchtune);
  CHECK(tt.optimizer_in_bwd);
  CHECK(tt.optimizer_8bit);
  CHECK(tt.chunked_loss);
  CHECK(tt.pure_bf16);
  CHECK_FALSE(tt.fp16);
  CHECK_FALSE(tt.zero);
  for (const Framework f : {Framework::hf_trainer, Framework::deepspeed,
                            Framework::accelerate, Framework::megatron}) {
    CHECK_FALSE(capability(f).optimizer_in_bwd);
  }
}

TEST_CASE("capability: DeepSpeed always keeps fp32 master weights",
          "[capability]") {
  // runtime/bf16_optimizer.py and ZeRO's optimizers keep fp32 groups.
  CHECK_FALSE(capability(Framework::deepspeed).pure_bf16);
  CHECK_FALSE(capability(Framework::megatron).pure_bf16);
}

TEST_CASE(
    "capability: tensor and pipeline parallel training need Megatron or"
    " torchtitan; no bitsandbytes or NF4 under Megatron",
    "[capability]") {
  for (const Framework f : k_frameworks) {
    INFO(framework_name(f));
    CHECK(capability(f).training_layouts ==
          (f == Framework::megatron || f == Framework::torchtitan));
  }
  CHECK_FALSE(capability(Framework::megatron).optimizer_8bit);
  CHECK_FALSE(capability(Framework::megatron).qlora);
}

TEST_CASE("capability: vLLM's knobs", "[capability]") {
  // vllm/engine/arg_utils.py: --quantization fp8, --kv-cache-dtype fp8,
  // --gpu-memory-utilization, --dtype float16, --tensor-parallel-size.
  const Capability& v = capability(Framework::vllm);
  CHECK(v.fp8_weights);
  CHECK(v.fp8_kv);
  CHECK(v.gpu_util);
  CHECK(v.fp16);
  CHECK(v.inference_layouts);
  CHECK_FALSE(capability(Framework::generate).gpu_util);
}

TEST_CASE("capability: the stated default per mode and engine",
          "[capability]") {
  // docs/advice.md: vLLM for --engine vllm, generate for transformers
  // inference, HF Trainer for training.
  Setup s;
  CHECK(framework_of(s) == Framework::generate);
  s.engine = Engine::vllm;
  CHECK(framework_of(s) == Framework::vllm);
  s.engine = Engine::hf;
  s.mode = Mode::full;
  CHECK(framework_of(s) == Framework::hf_trainer);
  s.framework = Framework::torchtune;
  CHECK(framework_of(s) == Framework::torchtune);
}

TEST_CASE(
    "capability: the knobs never offer a move the framework cannot "
    "express",
    "[capability]") {
  // Generated: training modes x GPU counts x FSDP x frameworks, and
  // inference on each engine; every move id maps to the capability it needs.
  const Model model = test::llama3_70b();
  int checked = 0;
  for (const Framework f : k_frameworks) {
    for (const Mode mode : {Mode::full, Mode::lora, Mode::infer}) {
      for (const int gpus : {1, 8}) {
        for (const bool fsdp : {false, true}) {
          Setup s;
          s.mode = mode;
          s.gpus = gpus;
          s.seq = 4096;
          s.fsdp = fsdp && mode != Mode::infer;
          s.framework = f;
          s.engine = f == Framework::vllm ? Engine::vllm : Engine::hf;
          s.precision = Precision::mixed;
          const Capability cap = capability_of(s);
          const bool training = mode != Mode::infer;
          INFO(framework_name(f) << " " << static_cast<int>(mode) << " " << gpus
                                 << " fsdp " << s.fsdp);
          const auto ids = move_ids(model, "T4", s);
          const auto ids_a = move_ids(model, "A100-80", s);
          for (const auto* list : {&ids, &ids_a}) {
            for (const std::string& id : *list) {
              INFO(id);
              ++checked;
              if (id == "layout") {
                CHECK(
                    (training ? cap.training_layouts : cap.inference_layouts));
              }
              const std::vector<std::pair<std::string_view, bool>> needs = {
                  {"zero-stage", cap.zero},
                  {"offload-optimizer", cap.optimizer_offload},
                  {"offload-params", cap.param_offload},
                  {"offload-all", cap.param_offload},
                  {"activation-offload", cap.activation_offload},
                  {"checkpointing-selective", cap.selective_checkpoint},
                  {"chunked-loss", cap.chunked_loss},
                  {"optimizer-8bit", cap.optimizer_8bit},
                  {"optimizer-in-bwd", cap.optimizer_in_bwd},
                  {"pure-bf16", cap.pure_bf16},
                  {"fp16", cap.fp16},
                  {"sequence-parallel", cap.sequence_parallel},
                  {"quantize-fp8", cap.fp8_weights},
                  {"fp8-kv-cache", cap.fp8_kv},
                  {"gpu-util", cap.gpu_util},
                  {"expandable-segments", cap.expandable_segments},
              };
              for (const auto& [need, can] : needs) {
                if (id == need) {
                  CHECK(can);
                }
              }
            }
          }
        }
      }
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("capability: the search's setups run on the user's framework",
          "[capability]") {
  // A property over setups x frameworks: whatever fits, the framework can
  // launch it (no tp/pp without Megatron or torchtitan, no optimizer in
  // backward outside torchtune and torchtitan, no pure bf16 where fp32
  // master weights stay, no ZeRO stage under FSDP).
  const auto& cat = test::catalog();
  struct Job {
    std::string model;
    std::string gpu;
    int gpus;
    int zero;
    bool fsdp;
  };
  const std::vector<Job> jobs = {{"llama3-8b", "A100-40", 1, 0, false},
                                 {"llama3-70b", "H100", 8, 3, false},
                                 {"llama3-70b", "H100", 8, 0, true}};
  int found_count = 0;
  for (const Framework f :
       {Framework::hf_trainer, Framework::deepspeed, Framework::torchtune,
        Framework::megatron, Framework::trl}) {
    for (const Job& j : jobs) {
      Setup s;
      s.mode = Mode::full;
      s.gpus = j.gpus;
      s.seq = 4096;
      if (j.zero > 0) {
        s.zero = j.zero;
      }
      s.fsdp = j.fsdp;
      s.framework = f;
      const Model& model = find_model(cat, j.model);
      const Gpu& gpu = find_gpu(cat, j.gpu);
      if (check(model, gpu, s)) {
        continue;  // not a valid start
      }
      const Capability cap = capability_of(s);
      Searcher searcher(model, s, SearchScope{});
      const auto found = searcher.best(gpu, j.gpus, Objective::balanced);
      INFO(framework_name(f)
           << " " << j.model << " " << j.gpus << "x" << j.gpu);
      if (!found) {
        continue;
      }
      ++found_count;
      const Resolved& r = found->setup;
      CHECK(expresses(found->request));
      if (!cap.training_layouts) {
        CHECK(r.tp == 1);
        CHECK(r.pp == 1);
      }
      CHECK((!r.optimizer_in_bwd || cap.optimizer_in_bwd));
      CHECK((r.precision != Precision::pure || cap.pure_bf16));
      CHECK((r.zero == resolve(model, gpu, s).zero || cap.zero));
    }
  }
  CHECK(found_count >= 8);
}
