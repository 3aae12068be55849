// Launch-config readers (launch.hpp): the real configs indexed in
// tests/data/configs/index.json, vLLM's flag spellings, grouping of files
// given together, framework defaults and hostile input.

#include "support.hpp"

#include "oomplan/launch/launch.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/setup/resolve.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace {

using oomplan::Error;
using oomplan::LaunchFile;
using oomplan::LaunchOption;
using oomplan::LaunchPlan;

const std::string k_configs = std::string(OOMPLAN_TEST_DATA) + "/configs";

std::optional<std::string> slurp(const std::filesystem::path& p) {
  return oomplan::test::read_file_text(p);
}

// Serves the files a config names: first from `root` (where the config's
// repository root is), then beside the naming file, as the CLI does.
oomplan::FileLoader corpus_loader(const std::string& root) {
  return [root](const std::string& path, const std::string& from) {
    if (auto t = slurp(std::filesystem::path(k_configs) / root / path)) {
      return t;
    }
    return slurp(std::filesystem::path(k_configs) / from).has_value()
               ? slurp((std::filesystem::path(k_configs) / from).parent_path() /
                       path)
               : std::nullopt;
  };
}

// Serves files from a map (for hand-written inputs).
oomplan::FileLoader map_loader(std::map<std::string, std::string> files) {
  return [files](const std::string& path,
                 const std::string&) -> std::optional<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

std::vector<LaunchPlan> read(std::string origin, std::string text,
                             std::map<std::string, std::string> others = {}) {
  return oomplan::read_launch_files({{std::move(origin), std::move(text)}},
                                    map_loader(std::move(others)));
}

LaunchPlan read_one(std::string origin, std::string text,
                    std::map<std::string, std::string> others = {}) {
  auto plans = read(std::move(origin), std::move(text), std::move(others));
  REQUIRE(plans.size() == 1);
  return plans.front();
}

std::map<std::string, std::string> options_of(const LaunchPlan& p) {
  std::map<std::string, std::string> out;
  for (const auto& o : p.options) {
    out[o.flag] = o.value;
  }
  return out;
}

std::string option(const LaunchPlan& p, std::string_view flag) {
  for (const auto& o : p.options) {
    if (o.flag == flag) {
      return o.value;
    }
  }
  return "(absent)";
}

std::string default_of(const LaunchPlan& p, std::string_view flag) {
  for (const auto& o : p.framework_defaults) {
    if (o.flag == flag) {
      return o.value;
    }
  }
  return "(absent)";
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The message of the Error `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("launch: every indexed real config maps to the plan its index states",
          "[launch]") {
  const auto text = slurp(k_configs + "/index.json");
  REQUIRE(text);
  const auto index = nlohmann::json::parse(*text);
  REQUIRE(index.at("configs").size() >= 20);
  for (const auto& e : index.at("configs")) {
    const std::string file = e.at("file");
    INFO(file);
    const auto& src = e.at("source");
    CHECK(!src.at("repo").get<std::string>().empty());
    CHECK(src.at("commit").get<std::string>().size() == 40);
    std::vector<LaunchFile> files{{file, *slurp(k_configs + "/" + file)}};
    const auto with = e.value("with", nlohmann::json::array());
    const auto defaults = e.value("defaults", nlohmann::json::object());
    const auto unknown = e.value("unknown_keys", nlohmann::json::array());
    for (const auto& w : with) {
      files.push_back({w.get<std::string>(),
                       *slurp(k_configs + "/" + w.get<std::string>())});
    }
    const auto load = corpus_loader(e.at("root"));
    if (e.contains("error")) {
      CHECK(error_of([&] { oomplan::read_launch_files(files, load); }) ==
            e.at("error").get<std::string>());
      continue;
    }
    const auto plans = oomplan::read_launch_files(files, load);
    REQUIRE(plans.size() == 1);
    const LaunchPlan& p = plans.front();
    CHECK(p.reader == e.at("reader").get<std::string>());
    CHECK(p.framework == e.at("framework").get<std::string>());
    CHECK(p.model == e.at("model").get<std::string>());
    if (e.at("gpus").is_null()) {
      CHECK_FALSE(p.gpus.has_value());
    } else {
      CHECK(p.gpus == e.at("gpus").get<int>());
    }
    if (e.at("nodes").is_null()) {
      CHECK_FALSE(p.nodes.has_value());
    } else {
      CHECK(p.nodes == e.at("nodes").get<int>());
    }
    CHECK(options_of(p) ==
          e.at("options").get<std::map<std::string, std::string>>());
    for (const auto& [flag, value] : defaults.items()) {
      INFO(flag);
      CHECK(default_of(p, flag) == value.get<std::string>());
    }
    if (e.contains("model_aliases")) {
      CHECK(p.model_aliases ==
            e.at("model_aliases").get<std::vector<std::string>>());
    }
    if (e.contains("included_files")) {
      CHECK(p.included_files ==
            e.at("included_files").get<std::vector<std::string>>());
    }
    for (const auto& k : unknown) {
      CHECK(contains(p.unknown_keys, k.get<std::string>()));
    }
    // A key is read, unused or unknown: never two of them.
    for (const auto& k : p.unused_keys) {
      INFO(k);
      CHECK_FALSE(contains(p.unknown_keys, k));
    }
    // Every option names the key it came from.
    for (const auto& o : p.options) {
      CHECK(!o.key.empty());
    }
  }
}

TEST_CASE("launch: vLLM's flag spellings translate to oomplan's options",
          "[launch]") {
  using oomplan::translate_vllm_flag;
  const auto t = [](std::string_view f, std::string_view v) {
    const auto o = translate_vllm_flag(f, v);
    return o ? o->flag + " " + o->value : std::string("(none)");
  };
  CHECK(t("--tensor-parallel-size", "4") == "--tp 4");
  CHECK(t("-tp", "2") == "--tp 2");
  CHECK(t("--tensor_parallel_size", "8") == "--tp 8");
  CHECK(t("--pipeline-parallel-size=2", "") == "--pp 2");
  CHECK(t("--gpu-memory-utilization", "0.8") == "--gpu-util 0.8");
  // vLLM's human_readable_int: lowercase k = 1000, uppercase K = 1024.
  CHECK(t("--max-model-len", "32k") == "--max-model-len 32000");
  CHECK(t("--max-model-len", "32K") == "--max-model-len 32768");
  CHECK(t("--max-model-len", "25.6k") == "--max-model-len 25600");
  CHECK(t("--max-num-batched-tokens", "8192") ==
        "--max-num-batched-tokens 8192");
  CHECK(t("--max-num-seqs", "64") == "--max-num-seqs 64");
  CHECK(t("--kv-cache-dtype", "fp8_e5m2") == "--kv-dtype fp8");
  CHECK(t("--kv-cache-dtype", "auto") == "--kv-dtype auto");
  CHECK(t("--enforce-eager", "") == "--enforce-eager ");
  CHECK(t("--quantization", "awq_marlin") == "--quant awq");
  CHECK(t("-q", "gptq") == "--quant gptq");
  CHECK(t("--quantization", "bitsandbytes") == "--quant nf4-nodq");
  CHECK(t("--quantization", "compressed-tensors") == "--quant auto");
  CHECK(t("--dtype", "half") == "--dtype fp16");
  CHECK(t("--dtype", "bfloat16") == "--dtype bf16");
  CHECK(t("--dtype", "float32") == "--dtype fp32");
  CHECK(t("--dtype", "auto") == "(none)");
  CHECK(t("--port", "8000") == "(none)");
  CHECK(t("--cpu-offload-gb", "0") == "(none)");
  CHECK(oomplan::vllm_flag_takes_value("--tensor-parallel-size"));
  CHECK_FALSE(oomplan::vllm_flag_takes_value("--enforce-eager"));
}

TEST_CASE("launch: a vLLM value oomplan cannot express is one error line",
          "[launch]") {
  using oomplan::translate_vllm_flag;
  CHECK(error_of([] { translate_vllm_flag("--quantization", "gguf"); }) ==
        "--quantization \"gguf\" is not valid; oomplan models awq, awq_marlin, "
        "gptq, gptq_marlin, fp8, fbgemm_fp8, ptpc_fp8, mxfp4, bitsandbytes, "
        "compressed-tensors and modelopt");
  CHECK(error_of([] {
          translate_vllm_flag("--kv-cache-dtype", "fp8_ds_mla");
        }).rfind("--kv-cache-dtype \"fp8_ds_mla\" is not valid;", 0) == 0);
  CHECK(error_of([] {
          translate_vllm_flag("--max-model-len", "auto");
        }).rfind("--max-model-len \"auto\" is not valid;", 0) == 0);
  CHECK(error_of(
            [] { translate_vllm_flag("--gpu-memory-utilization", "1.5"); }) ==
        "--gpu-memory-utilization \"1.5\" is not valid; use a fraction above 0 "
        "and at most 1, e.g. 0.9");
  CHECK(error_of([] { translate_vllm_flag("--tensor-parallel-size", "0"); }) ==
        "--tensor-parallel-size \"0\" is not valid; use a whole number from 1 "
        "to 100000");
  CHECK(error_of([] { translate_vllm_flag("--cpu-offload-gb", "8"); }) ==
        "--cpu-offload-gb: offloading weights to CPU RAM is not modelled; "
        "remove it or set it to 0");
}

TEST_CASE("launch: shell words follow quotes, escapes and continuations",
          "[launch]") {
  const auto words = oomplan::split_shell_words(
      "vllm serve 'my model' \\\n  --served-model-name \"a \\\"b\\\"\" "
      "--x=1 # comment\nsecond command",
      "t.sh");
  CHECK(words == std::vector<std::string>{"vllm", "serve", "my model",
                                          "--served-model-name", "a \"b\"",
                                          "--x=1"});
  CHECK(error_of([] { oomplan::split_shell_words("vllm serve 'x", "t.sh"); }) ==
        "t.sh: line 1: a single quote is not closed; close it or remove it");
}

TEST_CASE("launch: a vllm serve file gives the model, GPUs and engine options",
          "[launch]") {
  const auto p = read_one(
      "serve.sh",
      "#!/bin/bash\nexport HF_HOME=/data\nvllm serve meta-llama/Llama-3.1-70B "
      "\\\n  -tp 4 --pipeline-parallel-size=2 --data-parallel-size 2 \\\n  "
      "--max-model-len 32k --kv-cache-dtype fp8 --enforce-eager --port 8000 "
      "--some-new-flag 3 > log.txt 2>&1 &\n");
  CHECK(p.reader == "vllm");
  CHECK(p.model == "meta-llama/Llama-3.1-70B");
  // tp 4 x pp 2 x dp 2 = 16 GPUs; each replica's GPU holds the same. A
  // node holds 8: 2 nodes x 8 GPUs.
  CHECK(p.gpus == 8);
  CHECK(p.nodes == 2);
  CHECK(options_of(p) ==
        std::map<std::string, std::string>{{"--tp", "4"},
                                           {"--pp", "2"},
                                           {"--max-model-len", "32000"},
                                           {"--kv-dtype", "fp8"},
                                           {"--enforce-eager", ""}});
  CHECK(p.unused_keys == std::vector<std::string>{"--port"});
  CHECK(p.unknown_keys == std::vector<std::string>{"--some-new-flag"});
  CHECK(default_of(p, "--engine") == "vllm");
  CHECK(default_of(p, "--gpu-util") == "0.9");
}

TEST_CASE("launch: the vllm-openai docker image takes the server's flags",
          "[launch]") {
  const auto p =
      read_one("run.sh",
               "docker run --runtime nvidia --gpus all -p 8000:8000 --ipc=host "
               "vllm/vllm-openai:latest --model mistralai/Mistral-7B-v0.1 "
               "--gpu_memory_utilization 0.95 --max_model_len 1024\n");
  CHECK(p.model == "mistralai/Mistral-7B-v0.1");
  CHECK(option(p, "--gpu-util") == "0.95");
  CHECK(option(p, "--max-model-len") == "1024");
}

TEST_CASE("launch: a vllm file that cannot be planned says why in one line",
          "[launch]") {
  CHECK(error_of([] {
          read("a.sh", "echo hello\n");
        }).rfind("a.sh: holds no `vllm serve` command;", 0) == 0);
  CHECK(error_of([] { read("a.sh", "vllm serve m -tp $TP\n"); }) ==
        "a.sh: -tp: \"$TP\" is a shell variable; oomplan reads the file as "
        "written, so write the value");
  CHECK(error_of([] {
          read("a.sh", "vllm serve m --quantization gguf\n");
        }).rfind("a.sh: --quantization \"gguf\" is not valid;", 0) == 0);
  CHECK(error_of([] { read("a.sh", "vllm serve --port 1\n"); }) ==
        "a.sh: names no model; give it after `vllm serve` or with --model");
}

TEST_CASE("launch: DeepSpeed auto values take the training file's values",
          "[launch]") {
  const std::string ds = R"({"train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu",
    "pin_memory": true}}})";
  const auto p = read_one("args.json",
                          R"({"per_device_train_batch_size": 4,
      "gradient_accumulation_steps": 16, "bf16": true, "deepspeed": "ds.json",
      "learning_rate": 2e-5})",
                          {{"ds.json", ds}});
  CHECK(p.reader == "hf-trainer");
  CHECK(options_of(p) ==
        std::map<std::string, std::string>{{"--batch", "4"},
                                           {"--grad-accum", "16"},
                                           {"--dtype", "bf16"},
                                           {"--zero", "2"},
                                           {"--offload", "optimizer"}});
  CHECK(p.included_files == std::vector<std::string>{"ds.json"});
  CHECK(contains(p.unused_keys,
                 "ds.json: zero_optimization.offload_optimizer.pin_memory"));
  CHECK(contains(p.unused_keys, "learning_rate"));
}

TEST_CASE(
    "launch: a DeepSpeed value that contradicts the Trainer's is an error",
    "[launch]") {
  CHECK(error_of([] {
          read("args.json",
               R"({"per_device_train_batch_size": 4, "deepspeed": "ds.json"})",
               {{"ds.json", R"({"train_micro_batch_size_per_gpu": 2})"}});
        }) ==
        "ds.json: train_micro_batch_size_per_gpu: 2 contradicts "
        "per_device_train_batch_size 4 in args.json; the HF Trainer "
        "refuses the mismatch, set it to \"auto\"");
  CHECK(
      error_of([] { read("args.json", R"({"deepspeed": "missing.json"})"); }) ==
      "args.json: deepspeed: names \"missing.json\", which cannot be "
      "read; give the file next to this one or fix the path");
}

TEST_CASE("launch: files given together fold into one plan", "[launch]") {
  const std::string args = "per_device_train_batch_size: 2\nbf16: true\n";
  const std::string ds = R"({"zero_optimization": {"stage": 3},
      "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}})";
  // "args.yaml ds.json": the DeepSpeed file joins the training file before it.
  auto plans = oomplan::read_launch_files(
      {{"args.yaml", args}, {"ds.json", ds}}, map_loader({}));
  REQUIRE(plans.size() == 1);
  CHECK(option(plans[0], "--zero") == "3");
  CHECK(option(plans[0], "--batch") == "2");
  CHECK(plans[0].included_files == std::vector<std::string>{"ds.json"});
  // A listed file that another listed file names is not a plan of its own.
  plans = oomplan::read_launch_files(
      {{"ds.json", ds}, {"train/args.yaml", args + "deepspeed: ./ds.json\n"}},
      map_loader({{"./ds.json", ds}}));
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].file == "train/args.yaml");
  // A DeepSpeed file with no training file before it is its own plan.
  plans = oomplan::read_launch_files({{"ds.json", ds}, {"args.yaml", args}},
                                     map_loader({}));
  REQUIRE(plans.size() == 2);
  CHECK(plans[0].reader == "deepspeed");
}

TEST_CASE("launch: offload_param below ZeRO-3 is a note, not an offload",
          "[launch]") {
  // Issue 10: `--offload params` at ZeRO-0 silently does nothing; DeepSpeed
  // offloads parameters only at stage 3 (deepspeed/runtime/zero/stage3.py).
  const auto p = read_one("ds.json",
                          R"({"zero_optimization": {"stage": 2,
      "offload_param": {"device": "cpu"}}})");
  CHECK(option(p, "--offload") == "(absent)");
  CHECK(contains(p.notes,
                 "offload_param applies only at ZeRO stage 3; at stage "
                 "2 DeepSpeed keeps the parameters on the GPU"));
  CHECK(error_of([] {
          read("ds.json", R"({"zero_optimization": {"stage": 3,
              "offload_optimizer": {"device": "nvme"}}})");
        }) ==
        "ds.json: zero_optimization.offload_optimizer.device: NVMe offload "
        "is not modelled; use cpu or none");
  CHECK(error_of([] {
          read("ds.json",
               R"({"train_batch_size": 8, "optimizer": {"type": "Lamb"}})");
        }).rfind("ds.json: optimizer.type: \"Lamb\" is not modelled;", 0) == 0);
}

TEST_CASE("launch: DeepSpeed's train_batch_size implies the GPU count",
          "[launch]") {
  // 64 = 2 per GPU x 4 accumulation steps x 8 GPUs.
  const auto p = read_one("ds.json",
                          R"({"train_batch_size": 64,
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
  CHECK(p.gpus == 8);
  CHECK(options_of(p) == std::map<std::string, std::string>{
                             {"--batch", "2"}, {"--grad-accum", "4"}});
}

TEST_CASE(
    "launch: a model loaded in bf16 trains in pure bf16 under the HF "
    "Trainer",
    "[launch]") {
  // torch AdamW keeps its states in the parameters' dtype: no fp32 copy.
  const auto p = read_one("sft.yaml",
                          "model_name_or_path: Qwen/Qwen2.5-7B\ndtype: "
                          "bfloat16\nbf16: true\nmax_length: 2048\n");
  CHECK(p.framework == "trl");
  CHECK(option(p, "--precision") == "pure");
  CHECK(option(p, "--dtype") == "bf16");
  CHECK(option(p, "--seq") == "2048");
  // TRL's defaults, not TrainingArguments': gradient checkpointing on,
  // chunked loss.
  CHECK(default_of(p, "--checkpointing") == "full");
  CHECK(default_of(p, "--loss") == "chunked");
}

TEST_CASE("launch: TRL's PEFT and bitsandbytes keys give the training mode",
          "[launch]") {
  const auto p = read_one(
      "sft.yaml",
      "model_name_or_path: m\nuse_peft: true\nload_in_4bit: true\nlora_r: 64\n"
      "lora_target_modules: [q_proj, v_proj]\ngradient_checkpointing_kwargs:\n"
      "  use_reentrant: false\n");
  // TRL's use_bnb_nested_quant defaults to False: NF4 without double quant.
  CHECK(options_of(p) ==
        std::map<std::string, std::string>{{"--mode", "qlora"},
                                           {"--quant", "nf4-nodq"},
                                           {"--lora-rank", "64"},
                                           {"--lora-targets", "q,v"}});
  CHECK(contains(p.unused_keys, "gradient_checkpointing_kwargs.use_reentrant"));
}

TEST_CASE("launch: a memory-relevant value oomplan cannot express is an error",
          "[launch]") {
  CHECK(error_of([] {
          read("a.json", R"({"output_dir": "o", "optim": "lion_32bit"})");
        })
            .rfind("a.json: optim: optimizer \"lion_32bit\" is not modelled; "
                   "oomplan models AdamW",
                   0) == 0);
  CHECK(error_of([] {
          read("t.yaml",
               "model:\n  _component_: x.llama3_8b\n"
               "context_parallel_dim: 2\n");
        }) ==
        "t.yaml: context_parallel_dim: context parallelism is not modelled; "
        "set it to 1");
  CHECK(error_of([] {
          read("acc.yaml",
               "distributed_type: FSDP\nfsdp_config:\n"
               "  fsdp_sharding_strategy: HYBRID_SHARD\n");
        })
            .rfind("acc.yaml: fsdp_config.fsdp_sharding_strategy: HYBRID_SHARD "
                   "shards within a node",
                   0) == 0);
  CHECK(error_of([] {
          read("lf.yaml",
               "model_name_or_path: m\nstage: ppo\nfinetuning_type: lora\n");
        }).rfind("lf.yaml: stage: \"PPO\" training is not modelled", 0) == 0);
}

TEST_CASE("launch: wrong value types name the file and key", "[launch]") {
  CHECK(error_of([] {
          read("a.json", R"({"per_device_train_batch_size": "eight"})");
        }) ==
        "a.json: per_device_train_batch_size: expected a whole number from 1 "
        "to 1048576, got \"eight\"");
  CHECK(error_of(
            [] { read("a.yaml", "base_model: m\nmicro_batch_size: [1]\n"); }) ==
        "a.yaml: micro_batch_size: expected a whole number from 1 to 1048576, "
        "got a list");
  CHECK(
      error_of(
          [] { read("ds.json", R"({"zero_optimization": {"stage": 4}})"); }) ==
      "ds.json: zero_optimization.stage: expected a whole number from 0 to 3, "
      "got 4");
  CHECK(error_of([] {
          read("a.yaml", "base_model: m\ngradient_checkpointing: sometimes\n");
        }) ==
        "a.yaml: gradient_checkpointing: \"sometimes\" is not modelled; use "
        "true, false or offload (offload_disk is not modelled)");
}

TEST_CASE("launch: keys a reader does not know are reported, not dropped",
          "[launch]") {
  const auto p = read_one("a.yaml",
                          "base_model: m\nsequence_len: 1024\nlearning_rate: "
                          "1e-5\nmy_new_flag: 3\nfsdp_config:\n  "
                          "offload_params: true\n  brand_new: 1\n");
  CHECK(p.unknown_keys ==
        std::vector<std::string>{"my_new_flag", "fsdp_config.brand_new"});
  CHECK(contains(p.unused_keys, "learning_rate"));
  CHECK(option(p, "--offload") == "all");
}

TEST_CASE("launch: a plans file gives one plan per entry", "[launch]") {
  const auto plans = read(
      "plans.json",
      R"([{"model": "llama3-70b", "gpus": "8xH100", "mode": "full", "zero": 3,
           "sequence_parallel": false, "compile": true, "max_model_len": 8192,
           "typo_key": 1},
          {"model": "llama3-8b", "gpus": "1xH100", "framework": "torchtune"}])");
  REQUIRE(plans.size() == 2);
  CHECK(plans[0].reader == "plans");
  CHECK(plans[0].model == "llama3-70b");
  CHECK(plans[0].gpus == 8);
  CHECK(options_of(plans[0]) ==
        std::map<std::string, std::string>{{"--gpus", "8xH100"},
                                           {"--mode", "full"},
                                           {"--zero", "3"},
                                           {"--compile", ""},
                                           {"--max-model-len", "8192"}});
  CHECK(plans[0].unknown_keys == std::vector<std::string>{"typo_key"});
  CHECK(plans[0].framework_defaults.empty());
  CHECK(plans[1].framework == "torchtune");
  CHECK(default_of(plans[1], "--precision") == "pure");
  CHECK(error_of([] { read("p.json", R"([{"model": "m", "zero": [3]}])"); }) ==
        "p.json: plans[0]: zero: expected a single value, got a list");
  // Every option of the table is a key, the later ones too (a hand list of
  // keys once missed --cp, --float8, --prepare-kbit and --p2p).
  const auto newer = read("p.json", R"([{"model": "m", "cp": 2, "float8": true,
                                          "prepare_kbit": true, "p2p": "off"}])");
  CHECK(options_of(newer[0]) ==
        std::map<std::string, std::string>{{"--cp", "2"},
                                           {"--float8", ""},
                                           {"--prepare-kbit", ""},
                                           {"--p2p", "off"}});
  CHECK(newer[0].unknown_keys.empty());
  CHECK(error_of([] {
          read("p.json", "[]");
        }).rfind("p.json: holds no plans;", 0) == 0);
}

TEST_CASE("launch: framework defaults carry their reason and source",
          "[launch]") {
  const auto names = oomplan::framework_names();
  CHECK(names ==
        std::vector<std::string_view>{"vllm", "deepspeed", "hf-trainer", "trl",
                                      "accelerate", "axolotl", "torchtune",
                                      "llama-factory", "torchtitan", "litgpt"});
  for (const auto name : names) {
    INFO(name);
    const auto defaults = oomplan::framework_defaults(name);
    CHECK(!defaults.empty());
    std::vector<std::string> flags;
    for (const auto& d : defaults) {
      INFO(d.flag);
      CHECK(d.flag.rfind("--", 0) == 0);
      CHECK(!d.key.empty());
      CHECK(!contains(flags, d.flag));
      flags.push_back(d.flag);
    }
  }
  // Issue 10 point 2: torchtune is pure bf16 with a chunked loss; the HF
  // Trainer is mixed precision with fp32 master weights and a full loss.
  const auto tt = oomplan::framework_defaults("torchtune");
  CHECK(std::find(tt.begin(), tt.end(),
                  LaunchOption{"--precision", "pure", tt[2].key}) != tt.end());
  CHECK(error_of([] { oomplan::framework_defaults("megatron"); }) ==
        "--framework \"megatron\" is not a framework oomplan knows; use vllm, "
        "deepspeed, hf-trainer, trl, accelerate, axolotl, torchtune, "
        "llama-factory, torchtitan, litgpt");
  // LitGPT: finetune_lora trains bf16-mixed by default, but --quantize
  // refuses mixed precision and builds bnb's PagedAdamW; finetune_full
  // calls lm_head once.
  const auto has = [](const std::vector<LaunchOption>& d, std::string_view flag,
                      std::string_view value) {
    return std::any_of(d.begin(), d.end(), [&](const LaunchOption& o) {
      return o.flag == flag && o.value == value;
    });
  };
  const auto lora = oomplan::framework_defaults("litgpt");
  CHECK(has(lora, "--precision", "amp"));
  CHECK(has(lora, "--lm-head-chunk", "128"));
  const auto qlora = oomplan::framework_defaults("litgpt", "qlora");
  CHECK(has(qlora, "--precision", "pure"));
  CHECK(has(qlora, "--optimizer", "paged-adamw"));
  CHECK_FALSE(has(qlora, "--precision", "amp"));
  const auto full = oomplan::framework_defaults("litgpt", "full");
  CHECK(has(full, "--lm-head-chunk", "0"));
  CHECK_FALSE(has(full, "--lm-head-chunk", "128"));
}

TEST_CASE("launch: hostile files get one error line", "[launch]") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    bomb += fmt::format(
        "{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", c, c,
        static_cast<char>(c - 1), static_cast<char>(c - 1),
        static_cast<char>(c - 1), static_cast<char>(c - 1),
        static_cast<char>(c - 1), static_cast<char>(c - 1),
        static_cast<char>(c - 1), static_cast<char>(c - 1),
        static_cast<char>(c - 1), static_cast<char>(c - 1));
  }
  bomb += "base_model: m\n";
  const std::map<std::string, std::string> expected = {
      {bomb,
       "bomb.yaml: holds more than 100000 values (YAML aliases expand to that "
       "many); a launch config holds a few hundred"},
      {std::string(11 << 20, 'a'),
       "big.yaml: is 11534336 bytes; a launch config is at most 1048576 bytes "
       "(1 MiB)"},
      {std::string("\x7f"
                   "ELF\x02\x01\x01\0\0\0",
                   10),
       "bin.yaml: is binary data, not a text launch config (JSON, YAML or a "
       "command line)"},
      {"\xff\xfe{}",
       "utf.yaml: is binary data, not a text launch config (JSON, YAML or a "
       "command line)"},
      {std::string(5000, '[') + std::string(5000, ']'),
       "deep.yaml: nests mappings and lists deeper than 64 levels; a launch "
       "config is a few levels deep"},
      {"42\n",
       "num.yaml: cannot tell which framework this file configures; oomplan "
       "reads `vllm serve` command lines, DeepSpeed JSON, Hugging Face "
       "TrainingArguments / TRL configs, accelerate configs, axolotl, "
       "torchtune and LLaMA-Factory recipes, LitGPT finetune configs and "
       "commands, and plan lists (a JSON array of option objects)"},
      {"base_model: m\n---\nbase_model: n\n",
       "docs.yaml: holds 2 YAML documents; give one launch config per file"},
      // fuzz_launch: yaml-cpp 0.7's LoadAll looped on this byte, allocating
      // until the process was killed.
      {",",
       "comma.yaml: is not valid YAML: the parser finds more than 64 "
       "documents (a stray ',' outside a list?); a launch config is one "
       "document"},
      {"base_model: !!python/object:os.system m\n",
       "tag.yaml: line 1: YAML tag "
       "\"tag:yaml.org,2002:python/object:os.system\" "
       "is not supported; launch configs hold plain values"},
      {"base_model: [m\n", ""},
      {"{\"zero_optimization\": {\"stage\": 3,}}", ""},
  };
  // Build in a fixed order (the map above is keyed by text).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bomb.yaml", bomb},
      {"big.yaml", std::string(11 << 20, 'a')},
      {"bin.yaml", std::string("\x7f"
                               "ELF\x02\x01\x01\0\0\0",
                               10)},
      {"utf.yaml", "\xff\xfe{}"},
      {"deep.yaml", std::string(5000, '[') + std::string(5000, ']')},
      {"num.yaml", "42\n"},
      {"docs.yaml", "base_model: m\n---\nbase_model: n\n"},
      {"comma.yaml", ","},
      {"tag.yaml", "base_model: !!python/object:os.system m\n"},
      {"syntax.yaml", "base_model: [m\n"},
      {"syntax.json", "{\"zero_optimization\": {\"stage\": 3,}}"},
      {"textbomb.yaml", "a: &a " + std::string(60'000, 'x') + "\nb: [" +
                            [] {
                              std::string s;
                              for (int k = 0; k < 2000; ++k) {
                                s += "*a, ";
                              }
                              return s;
                            }() +
                            "*a]\nbase_model: m\n"},
      {"blockdeep.yaml",
       [] {
         std::string s;
         for (int d = 0; d < 200; ++d) {
           s += std::string(static_cast<std::size_t>(d), ' ') + "k:\n";
         }
         return s;
       }()},
  };
  for (const auto& [name, text] : cases) {
    INFO(name);
    const std::string e = error_of([&] { read(name, text); });
    CHECK(e.rfind(name + ": ", 0) == 0);
    CHECK(e.find('\n') == std::string::npos);
    const auto it = expected.find(text);
    if (it != expected.end() && !it->second.empty()) {
      CHECK(e == it->second);
    }
  }
  CHECK(error_of([&] {
          read("syntax.json", "{\"zero_optimization\": {\"stage\": 3,}}");
        }).rfind("syntax.json: is not valid JSON: ", 0) == 0);
  CHECK(error_of([&] {
          read("syntax.yaml", "base_model: [m\n");
        }).rfind("syntax.yaml: line ", 0) == 0);
}

TEST_CASE("launch: every --framework name is a Framework the advisor knows") {
  // The advisor keys its capability table by Framework; a reader whose name
  // has no Framework would plan with the stack unstated.
  for (const std::string_view name : oomplan::framework_names()) {
    const auto framework = oomplan::framework_from_name(name);
    REQUIRE(framework.has_value());
    CHECK(oomplan::framework_name(*framework) == name);
  }
  CHECK_FALSE(oomplan::framework_from_name("plans").has_value());
}

// ---- issue 25: readers ----

TEST_CASE("launch: accelerate's ParallelismConfig cp_size is --cp",
          "[launch]") {
  // accelerate config file: parallelism_config.parallelism_config_cp_size
  // (utils/dataclasses.py ParallelismConfig; TRL's context-parallelism doc
  // writes it so).
  const auto p = read_one("acc.yaml",
                          "distributed_type: FSDP\nnum_processes: 4\n"
                          "fsdp_config:\n  fsdp_version: 2\n"
                          "parallelism_config:\n"
                          "  parallelism_config_dp_shard_size: 2\n"
                          "  parallelism_config_cp_size: 2\n");
  CHECK(option(p, "--cp") == "2");
  CHECK(p.unknown_keys.empty());
}

TEST_CASE("launch: accelerate's fsdp_reshard_after_forward, FSDP1 and FSDP2",
          "[launch]") {
  // accelerate >= 1.6: FSDP1 takes a ShardingStrategy name, FSDP2 a bool
  // (FullyShardedDataParallelPlugin.reshard_after_forward).
  const auto full = read_one("a.yaml",
                             "distributed_type: FSDP\nfsdp_config:\n"
                             "  fsdp_reshard_after_forward: FULL_SHARD\n");
  CHECK(option(full, "--fsdp").empty());
  CHECK(full.unknown_keys.empty());
  const auto grad_op =
      read_one("a.yaml",
               "distributed_type: FSDP\nfsdp_config:\n"
               "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n");
  CHECK(option(grad_op, "--zero") == "2");
  CHECK(option(grad_op, "--fsdp") == "(absent)");
  // FSDP2 false: parameters stay gathered from forward to backward, as
  // ZeRO-2 keeps them.
  const auto v2 = read_one("a.yaml",
                           "distributed_type: FSDP\nfsdp_config:\n"
                           "  fsdp_version: 2\n"
                           "  fsdp_reshard_after_forward: false\n");
  CHECK(option(v2, "--zero") == "2");
  CHECK(error_of([] {
          read("a.yaml",
               "distributed_type: FSDP\nfsdp_config:\n"
               "  fsdp_reshard_after_forward: HYBRID_SHARD\n");
        })
            .rfind("a.yaml: fsdp_config.fsdp_reshard_after_forward: "
                   "HYBRID_SHARD shards within a node",
                   0) == 0);
}

TEST_CASE("launch: LLaMA-Factory bitsandbytes spellings and torchao fp8",
          "[launch]") {
  // examples/train_qlora/llama3_lora_sft_otfq.yaml spells it bitsandbytes;
  // extras/constants.py QuantizationMethod.BNB is "bnb".
  for (const char* method : {"bitsandbytes", "bnb"}) {
    const auto p = read_one(
        "lf.yaml",
        fmt::format("model_name_or_path: m\nstage: sft\nfinetuning_type: lora\n"
                    "quantization_bit: 4\nquantization_method: {}\n",
                    method));
    CHECK(option(p, "--mode") == "qlora");
    CHECK(option(p, "--quant") == "nf4");
  }
  CHECK(error_of([] {
          read("lf.yaml",
               "model_name_or_path: m\nfinetuning_type: lora\n"
               "quantization_bit: 4\nquantization_method: hqq\n");
        }) ==
        "lf.yaml: quantization_method: \"hqq\" quantization is not "
        "modelled; use quantization_method bitsandbytes (bnb)");
  const auto f8 =
      read_one("lf.yaml",
               "model_name_or_path: m\nfinetuning_type: full\nfp8: true\n"
               "fp8_backend: torchao\n");
  CHECK(option(f8, "--float8").empty());
  CHECK(error_of([] {
          read("lf.yaml",
               "model_name_or_path: m\nfinetuning_type: full\nfp8: true\n"
               "fp8_backend: te\n");
        }) ==
        "lf.yaml: fp8_backend: \"te\" FP8 is not modelled; use "
        "fp8_backend torchao");
}

TEST_CASE("launch: every server command of a file is a plan, named by line",
          "[launch]") {
  const auto plans = read(
      "serve.sh",
      "#!/bin/bash\n"
      "vllm serve meta-llama/Llama-3.1-8B --port 8001 &\n"
      "vllm serve Qwen/Qwen2.5-7B-Instruct \\\n  --tensor-parallel-size 2 &\n"
      "python -m vllm.entrypoints.openai.api_server --model "
      "mistralai/Mistral-7B-v0.1 &\n"
      "docker run --gpus all vllm/vllm-openai:latest --model "
      "google/gemma-2-9b --max-model-len 4096\n"
      "wait\n");
  REQUIRE(plans.size() == 4);
  CHECK(plans[0].file == "serve.sh:2");
  CHECK(plans[0].model == "meta-llama/Llama-3.1-8B");
  CHECK(plans[1].file == "serve.sh:3");
  CHECK(plans[1].model == "Qwen/Qwen2.5-7B-Instruct");
  CHECK(option(plans[1], "--tp") == "2");
  CHECK(plans[2].file == "serve.sh:5");
  CHECK(plans[2].model == "mistralai/Mistral-7B-v0.1");
  CHECK(plans[3].file == "serve.sh:6");
  CHECK(plans[3].model == "google/gemma-2-9b");
  CHECK(option(plans[3], "--max-model-len") == "4096");
  // One command: the plan keeps the file's name.
  CHECK(read_one("one.sh", "vllm serve m\n").file == "one.sh");
}

TEST_CASE("launch: an engine larger than a node spans nodes of 8", "[launch]") {
  // tp 8 x pp 4 = 32 GPUs: vLLM keeps tensor parallelism within a node and
  // runs the 4 pipeline stages on 4 nodes of 8.
  const auto p = read_one("big.sh",
                          "vllm serve deepseek-ai/DeepSeek-V3 "
                          "--tensor-parallel-size 8 --pipeline-parallel-size "
                          "4\n");
  CHECK(p.gpus == 8);
  CHECK(p.nodes == 4);
  CHECK(contains(p.notes,
                 "tensor x pipeline x data parallel = 32 GPUs: 4 nodes x 8 "
                 "GPUs (a node holds at most 8; vLLM runs pipeline stages "
                 "across nodes)"));
}

TEST_CASE("launch: preference training in every reader", "[launch]") {
  // TRL: keys only DPOConfig has, KTOConfig's, CPOConfig's SimPO loss.
  const auto dpo = read_one("args.yaml",
                            "model_name_or_path: m\nbeta: 0.1\n"
                            "precompute_ref_log_probs: true\n"
                            "max_prompt_length: 512\nmax_length: 1024\n");
  CHECK(dpo.framework == "trl");
  CHECK(option(dpo, "--objective") == "dpo");
  CHECK(option(dpo, "--precompute-ref").empty());
  CHECK(default_of(dpo, "--loss") == "full");
  CHECK(dpo.unknown_keys.empty());
  CHECK(option(read_one("a.yaml",
                        "model_name_or_path: m\n"
                        "desirable_weight: 1.0\n"),
               "--objective") == "kto");
  CHECK(option(read_one("a.yaml",
                        "model_name_or_path: m\nloss_type: simpo\n"
                        "simpo_gamma: 0.5\n"),
               "--objective") == "simpo");
  // ORPOConfig has no key of its own: the trainer named in the file name.
  CHECK(
      option(read_one("orpo_llama.yaml", "model_name_or_path: m\nbeta: 0.1\n"),
             "--objective") == "orpo");
  // LLaMA-Factory: stage dpo with pref_loss, stage kto.
  CHECK(option(read_one("lf.yaml",
                        "model_name_or_path: m\nstage: dpo\n"
                        "finetuning_type: full\npref_beta: 0.1\n"),
               "--objective") == "dpo");
  CHECK(option(read_one("lf.yaml",
                        "model_name_or_path: m\nstage: dpo\npref_loss: orpo\n"
                        "finetuning_type: lora\n"),
               "--objective") == "orpo");
  CHECK(option(read_one("lf.yaml",
                        "model_name_or_path: m\nstage: kto\n"
                        "finetuning_type: lora\n"),
               "--objective") == "kto");
  // axolotl rl:, torchtune's DPO loss.
  CHECK(option(read_one("ax.yaml", "base_model: m\nrl: dpo\nrl_beta: 0.1\n"),
               "--objective") == "dpo");
  CHECK(option(read_one("ax.yaml", "base_model: m\nrl: simpo\n"),
               "--objective") == "simpo");
  const auto tt = read_one("tt.yaml",
                           "model:\n  _component_: "
                           "torchtune.models.llama3_1.lora_llama3_1_8b\n"
                           "loss:\n  _component_: torchtune.rlhf.loss.DPOLoss\n"
                           "  beta: 0.1\n");
  CHECK(option(tt, "--objective") == "dpo");
  CHECK(option(tt, "--loss") == "full");
}

TEST_CASE("launch: a method oomplan does not model: one message, every reader",
          "[launch]") {
  const std::string tail =
      " training is not modelled (it generates during training or holds "
      "reward and value models); oomplan plans sft and the preference "
      "objectives dpo, orpo, kto and simpo";
  CHECK(error_of([] {
          read("grpo.yaml", "model_name_or_path: m\nnum_generations: 8\n");
        }) == "grpo.yaml: num_generations: \"GRPO/RLOO\"" + tail);
  CHECK(error_of([] {
          read("lf.yaml",
               "model_name_or_path: m\nstage: rm\n"
               "finetuning_type: lora\n");
        }) == "lf.yaml: stage: \"reward-model\"" + tail);
  CHECK(error_of([] { read("ax.yaml", "base_model: m\nrl: grpo\n"); }) ==
        "ax.yaml: rl: \"grpo\"" + tail);
  CHECK(error_of([] {
          read("tt.yaml",
               "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\n"
               "loss:\n  _component_: torchtune.rlhf.loss.PPOLoss\n");
        }) == "tt.yaml: loss._component_: \"PPO\"" + tail);
  // torchtune's GRPO recipe (recipes/configs/llama3_1/8B_full_grpo.yaml).
  CHECK(error_of([] {
          read("tt.yaml",
               "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\n"
               "loss:\n  _component_: "
               "torchtune.rlhf.loss.grpo.GRPOSimpleLoss\n");
        }) == "tt.yaml: loss._component_: \"GRPO\"" + tail);
}

TEST_CASE("launch: a YAML merge key carries its values in every YAML reader",
          "[launch]") {
  // PyYAML's flatten_mapping: the merged mapping's keys, then the
  // document's own win.
  const auto ax = read_one("ax.yaml",
                           "defaults: &d\n  micro_batch_size: 4\n"
                           "  sequence_len: 2048\n"
                           "base_model: m\n<<: *d\n");
  CHECK(option(ax, "--batch") == "4");
  CHECK(option(ax, "--seq") == "2048");
  const auto lf = read_one("lf.yaml",
                           "x: &d\n  cutoff_len: 1024\n"
                           "  per_device_train_batch_size: 2\n"
                           "model_name_or_path: m\nfinetuning_type: lora\n"
                           "<<: *d\n");
  CHECK(option(lf, "--seq") == "1024");
  CHECK(option(lf, "--batch") == "2");
  const auto acc = read_one("acc.yaml",
                            "base: &b\n  num_processes: 4\n"
                            "distributed_type: MULTI_GPU\n<<: *b\n");
  CHECK(acc.gpus == 4);
  const auto tt = read_one("tt.yaml",
                           "common: &c\n  batch_size: 3\n"
                           "model:\n  _component_: "
                           "torchtune.models.llama3_1.llama3_1_8b\n<<: *c\n");
  CHECK(option(tt, "--batch") == "3");
}

TEST_CASE("launch: a docker compose file plans every vLLM service",
          "[launch]") {
  // compose `command:` as a string and as a list; the vllm/vllm-openai
  // image's entrypoint is the server, so its command is the arguments.
  const auto plans = read("compose.yaml",
                          "services:\n"
                          "  chat:\n"
                          "    image: vllm/vllm-openai:v0.10.1\n"
                          "    command: --model Qwen/Qwen2.5-7B-Instruct "
                          "--max-model-len 8192\n"
                          "  big:\n"
                          "    image: vllm/vllm-openai:latest\n"
                          "    command: [\"meta-llama/Llama-3.1-70B\", "
                          "\"--tensor-parallel-size\", \"4\"]\n"
                          "  web:\n"
                          "    image: nginx\n"
                          "    command: nginx -g 'daemon off;'\n");
  REQUIRE(plans.size() == 2);
  CHECK(plans[0].file == "compose.yaml: services.chat");
  CHECK(plans[0].model == "Qwen/Qwen2.5-7B-Instruct");
  CHECK(option(plans[0], "--max-model-len") == "8192");
  CHECK(plans[1].file == "compose.yaml: services.big");
  CHECK(plans[1].model == "meta-llama/Llama-3.1-70B");
  CHECK(option(plans[1], "--tp") == "4");
  CHECK(error_of([] {
          read("c.yaml", "services:\n  web:\n    image: nginx\n");
        }).rfind("c.yaml: no compose service runs vLLM", 0) == 0);
}

TEST_CASE("launch: a compose service runs its entrypoint with its command",
          "[launch]") {
  // A published compose file: `entrypoint: ["vllm"]` with `command: [serve,
  // MODEL, ...]` runs `vllm serve MODEL ...` (an entrypoint replaces the
  // image's own, so the vllm/vllm-openai default no longer applies).
  const auto plans = read("compose.yml",
                          "services:\n"
                          "  llm:\n"
                          "    image: vllm/vllm-openai:latest\n"
                          "    entrypoint: [\"vllm\"]\n"
                          "    command: [\"serve\", \"Qwen/Qwen3-8B\", "
                          "\"--max-model-len\", \"16384\"]\n"
                          "  other:\n"
                          "    image: vllm/vllm-openai:latest\n"
                          "    entrypoint: /bin/sh\n"
                          "    command: -c 'sleep infinity'\n");
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].model == "Qwen/Qwen3-8B");
  CHECK(option(plans[0], "--max-model-len") == "16384");
}

TEST_CASE(
    "launch: transformers tensor parallelism is spelt as the release spells "
    "it",
    "[launch]") {
  using oomplan::Framework;
  using oomplan::Release;
  const oomplan::Model model = oomplan::test::llama3_70b();
  oomplan::Resolved s;
  s.gpus = 4;
  s.tp = 4;
  auto line = [&](Release release) {
    s.transformers_release = release;
    const oomplan::LaunchWriting w =
        oomplan::write_launch(Framework::generate, s, model);
    return w.unwritten.empty() ? w.blocks.front().text
                               : "unwritten: " + w.unwritten.front();
  };
  // 5.17 documents distributed_config only (#47352 removed tp_plan).
  CHECK_THAT(
      line(Release{5, 17, 0}),
      Catch::Contains("distributed_config=DistributedConfig(tp_size=4)"));
  CHECK_THAT(line(Release{4, 50, 0}), Catch::Contains(R"(tp_plan="auto")"));
  // Before 4.47 from_pretrained has no tensor parallelism: no line.
  CHECK(line(Release{4, 46, 0}) ==
        "unwritten: tensor parallelism: transformers 4.46 has no tp_plan "
        "(4.47+)");
}

TEST_CASE(
    "launch: a checkpoint with its own modeling code loads with "
    "trust_remote_code",
    "[launch]") {
  using oomplan::Framework;
  // InternLM2's config.json maps AutoModelForCausalLM to
  // modeling_internlm2.py: without trust_remote_code, from_pretrained and
  // vLLM refuse to load it.
  const oomplan::Model& internlm = oomplan::find_model(
      oomplan::test::catalog(), "internlm/internlm2_5-7b-chat");
  const oomplan::Model llama = oomplan::test::llama3_70b();
  oomplan::Resolved s;
  auto text = [&](Framework f, const oomplan::Model& m) {
    const oomplan::LaunchWriting w = oomplan::write_launch(f, s, m);
    std::string all;
    for (const auto& b : w.blocks) {
      all += b.text + "\n";
    }
    for (const auto& u : w.unwritten) {
      all += "unwritten: " + u + "\n";
    }
    return all;
  };
  CHECK_THAT(text(Framework::vllm, internlm),
             Catch::Contains("vllm serve internlm/internlm2_5-7b "
                             "--trust-remote-code"));
  CHECK_THAT(text(Framework::generate, internlm),
             Catch::Contains("trust_remote_code=True"));
  // Kimi K2's config.json maps to its own modeling_deepseek.py too.
  CHECK_THAT(text(Framework::vllm,
                  oomplan::find_model(oomplan::test::catalog(), "kimi-k2")),
             Catch::Contains("--trust-remote-code"));
  CHECK_THAT(text(Framework::vllm, llama),
             !Catch::Contains("--trust-remote-code"));
  // Tensor parallelism needs the class's tp_plan; remote code has none.
  s.gpus = 2;
  s.tp = 2;
  CHECK_THAT(text(Framework::generate, internlm),
             Catch::Contains("unwritten: tensor parallelism: internlm2's own "
                             "modeling code (trust_remote_code) has no "
                             "tp_plan"));
  s.gpus = 1;
  s.tp = 1;
  s.mode = oomplan::Mode::lora;
  for (const Framework f :
       {Framework::trl, Framework::axolotl, Framework::llama_factory}) {
    CHECK_THAT(text(f, internlm),
               Catch::Contains(R"("trust_remote_code":true)"));
    // A model transformers ships is loaded without it.
    CHECK_THAT(text(f, llama), !Catch::Contains("trust_remote_code"));
  }
}

TEST_CASE("launch: LoRA targets are written in the model family's names",
          "[launch]") {
  using oomplan::Framework;
  const auto& catalog = oomplan::test::catalog();
  oomplan::Resolved s;
  s.mode = oomplan::Mode::lora;
  auto modules = [&](std::string_view model) {
    const oomplan::LaunchWriting w = oomplan::write_launch(
        Framework::trl, s, oomplan::find_model(catalog, model));
    const auto doc = nlohmann::json::parse(w.blocks.front().text);
    std::string names;
    for (const auto& n : doc.at("lora_target_modules")) {
      if (!names.empty()) {
        names += ',';
      }
      names += n.get<std::string>();
    }
    for (const auto& u : w.unwritten) {
      names += " | " + u;
    }
    return names;
  };
  // Every projection (the default): each family's modeling file's names.
  CHECK(modules("llama-3.1-8b") ==
        "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj");
  CHECK(modules("phi-3-mini-4k") == "qkv_proj,o_proj,gate_up_proj,down_proj");
  CHECK(modules("phi-2") == "q_proj,k_proj,v_proj,dense,fc1,fc2");
  CHECK(modules("internlm2.5-7b") == "wqkv,wo,w1,w3,w2");
  CHECK(modules("pythia-1b") ==
        "query_key_value,dense,dense_h_to_4h,dense_4h_to_h");
  CHECK(modules("falcon-7b") ==
        "query_key_value,dense,dense_h_to_4h,dense_4h_to_h");
  CHECK(modules("gpt-j-6b") == "q_proj,k_proj,v_proj,out_proj,fc_in,fc_out");
  CHECK(modules("starcoder2-3b") == "q_proj,k_proj,v_proj,o_proj,c_fc,c_proj");
  CHECK(modules("gpt2") == "c_attn,c_proj,c_fc");
  // q and v alone: Phi-3 holds them in qkv_proj with k, which PEFT adapts
  // whole: no file does exactly that, and the fix says why.
  s.lora_targets = oomplan::k_lora_q | oomplan::k_lora_v;
  CHECK(modules("phi-3-mini-4k") ==
        "qkv_proj | LoRA on part of qkv_proj: phi3 fuses those projections "
        "in one module, which PEFT adapts whole");
  CHECK(modules("llama-3.1-8b") == "q_proj,v_proj");
}

TEST_CASE("launch: LoRA module names of every family read as their targets",
          "[launch]") {
  auto targets = [](std::string_view modules) {
    return option(
        read_one("train.yaml",
                 fmt::format("model_name_or_path: microsoft/Phi-3-mini-4k-"
                             "instruct\nuse_peft: true\n"
                             "lora_target_modules: [{}]\n",
                             modules)),
        "--lora-targets");
  };
  CHECK(targets("qkv_proj, gate_up_proj") == "q,k,v,gate,up");
  CHECK(targets("wqkv, wo, w1, w3, w2") == "q,k,v,o,gate,up,down");
  CHECK(targets("query_key_value, dense") == "q,k,v,o");
  CHECK(targets("dense_h_to_4h, dense_4h_to_h, fc1, fc2") == "up,down");
  // GPT-2's c_proj is both the attention output and the MLP's.
  CHECK(targets("c_attn, c_proj") == "q,k,v,o,down");
  CHECK(targets("out_proj, fc_in, fc_out") == "o,up,down");
}

TEST_CASE("launch: LitGPT's command line runs what the plan prices",
          "[launch][litgpt]") {
  using namespace oomplan;
  const Catalog& cat = test::catalog();
  const Model& model = find_model(cat, "llama3.1-8b");
  const Gpu& gpu = find_gpu(cat, "A100-40");
  const auto litgpt = [&](std::string_view mode) {
    Setup s;
    s.framework = Framework::litgpt;
    for (const LaunchOption& o : framework_defaults("litgpt", mode)) {
      apply_option(s, o.flag, o.value);
    }
    return s;
  };
  const auto line = [&](const Setup& s) {
    const LaunchWriting w =
        write_launch(Framework::litgpt, resolve(model, gpu, s), model);
    return w.unwritten.empty() ? w.blocks.front().text
                               : "unwritten: " + w.unwritten.front();
  };
  // LoRA in bf16-true on two GPUs, micro-batch 2 accumulated 4 times: the
  // global batch is 2 x 4 x 2 devices = 16; LitGPT's own r 8 on q and v.
  Setup s = litgpt("lora");
  s.gpus = 2;
  s.seq = 4096;
  s.batch = 2;
  s.grad_accum = 4;
  s.precision = Precision::pure;
  CHECK(line(s) ==
        "litgpt finetune_lora meta-llama/Llama-3.1-8B --devices 2 --precision "
        "bf16-true --train.micro_batch_size 2 --train.global_batch_size 16 "
        "--train.max_seq_length 4096 --lora_r 8 --lora_dropout 0.05 "
        "--lora_query true --lora_key false --lora_value true "
        "--lora_projection false --lora_mlp false --lora_head false");
  // QLoRA without double quantization is --quantize bnb.nf4, with bnb's
  // PagedAdamW chosen by LitGPT itself.
  Setup q = litgpt("qlora");
  q.mode = Mode::qlora;
  q.quant = Quant::nf4_nodq;
  q.seq = 512;
  CHECK(line(q) ==
        "litgpt finetune_lora meta-llama/Llama-3.1-8B --devices 1 --precision "
        "bf16-true --quantize bnb.nf4 --train.micro_batch_size 1 "
        "--train.global_batch_size 1 --train.max_seq_length 512 --lora_r 8 "
        "--lora_dropout 0.05 --lora_query true --lora_key false --lora_value "
        "true --lora_projection false --lora_mlp false --lora_head false");
  // Its default bf16-mixed, the 8-bit AdamW through a class path.
  Setup m = litgpt("lora");
  m.optimizer = Optimizer::adamw_8bit;
  CHECK_THAT(line(m),
             Catch::Contains("--precision bf16-mixed") &&
                 Catch::Contains(
                     "--optimizer.class_path bitsandbytes.optim.AdamW8bit"));
  // What its scripts cannot run is refused: checkpointing on one device.
  m.checkpointing = Checkpointing::full;
  CHECK(line(m) ==
        "unwritten: activation checkpointing other than LitGPT's (none on one "
        "device, every Block on several)");
}

TEST_CASE("launch: a litgpt finetune command line reads as its config",
          "[launch][litgpt]") {
  // jsonargparse applies --config and flags in order: the flag after the
  // config wins (max_seq_length 4096), the config wins over a flag before
  // it (--devices 4 -> the file's 2).
  const std::string cfg =
      "checkpoint_dir: checkpoints/meta-llama/Llama-3.2-3B\n"
      "precision: bf16-true\ndevices: 2\ntrain:\n  micro_batch_size: 2\n"
      "  global_batch_size: 16\n  max_seq_length: 512\n  epochs: 1\n";
  const LaunchPlan p = read_one(
      "ft.sh",
      "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 litgpt finetune_lora --devices 4 "
      "\\\n  --config cfg.yaml --train.max_seq_length=4096 \\\n"
      "  --optimizer.class_path bitsandbytes.optim.PagedAdamW8bit "
      "--optimizer.init_args.lr 2e-4\n",
      {{"cfg.yaml", cfg}});
  CHECK(p.reader == "litgpt");
  CHECK(p.framework == "litgpt");
  CHECK(p.model == "checkpoints/meta-llama/Llama-3.2-3B");
  CHECK(p.model_aliases == std::vector<std::string>{"meta-llama/Llama-3.2-3B"});
  CHECK(p.included_files == std::vector<std::string>{"cfg.yaml"});
  CHECK(p.gpus == 2);
  // 16 / 2 devices / micro-batch 2 = 4 (TrainArgs.gradient_accumulation_iters).
  CHECK(options_of(p) ==
        std::map<std::string, std::string>{{"--dtype", "bf16"},
                                           {"--precision", "pure"},
                                           {"--batch", "2"},
                                           {"--grad-accum", "4"},
                                           {"--seq", "4096"},
                                           {"--optimizer", "paged-adamw-8bit"},
                                           {"--mode", "lora"}});
  CHECK(p.unknown_keys.empty());
  CHECK(contains(p.unused_keys, "train.epochs"));

  // The module and script spellings; the positional CHECKPOINT_DIR, a Hub id
  // LitGPT downloads; the setup() default TrainArgs(global_batch_size=16,
  // micro_batch_size=1): 16 micro-batches per step on one device.
  const LaunchPlan full = read_one(
      "run.sh",
      "python -m litgpt finetune_full meta-llama/Llama-3.2-1B --precision "
      "32-true\n");
  CHECK(full.model == "meta-llama/Llama-3.2-1B");
  CHECK(full.model_aliases.empty());
  CHECK(options_of(full) ==
        std::map<std::string, std::string>{{"--dtype", "fp32"},
                                           {"--precision", "pure"},
                                           {"--grad-accum", "16"},
                                           {"--mode", "full"}});
  CHECK(contains(full.notes,
                 "train.max_seq_length is not set: LitGPT trains up to the "
                 "longest sample's length; give --seq"));
  // The global batch spans every node: 64 / (4 devices x 2 nodes) / micro
  // 2 = 4.
  const LaunchPlan nodes =
      read_one("run.sh",
               "litgpt finetune_full a/b --devices 4 --num_nodes 2 "
               "--train.global_batch_size 64 --train.micro_batch_size 2\n");
  CHECK(nodes.nodes == 2);
  CHECK(nodes.gpus == 4);
  CHECK(option(nodes, "--grad-accum") == "4");
  const LaunchPlan script = read_one(
      "run.sh",
      "python -u litgpt/finetune/lora.py --checkpoint_dir x/y --precision "
      "bf16-mixed --lora_mlp true --lora_key true\n");
  CHECK(option(script, "--mode") == "lora");
  CHECK(option(script, "--precision") == "amp");
  CHECK(option(script, "--lora-targets") == "q,k,v,gate,up,down");
  // Two commands are two plans, named by line.
  const auto two = read("two.sh",
                        "litgpt finetune a/b --train.max_seq_length 512\n"
                        "litgpt finetune_full a/b --devices 8\n");
  REQUIRE(two.size() == 2);
  CHECK(two[0].file == "two.sh:1");
  CHECK(two[1].file == "two.sh:2");
  CHECK(two[1].gpus == 8);
  // devices: auto leaves the count to --gpus.
  const LaunchPlan any =
      read_one("auto.yaml", "checkpoint_dir: a/b\ndevices: auto\ntrain: {}\n");
  CHECK_FALSE(any.gpus.has_value());
  CHECK(contains(any.notes,
                 "devices: auto takes every visible GPU; give --gpus NxCARD"));
  // No lora_* key and no name: `litgpt finetune`'s script, said in a note; a
  // file named like config_hub's full.yaml is finetune_full's.
  CHECK(option(any, "--mode") == "lora");
  CHECK(contains(any.notes,
                 "the file has no lora_* key and does not say its script: "
                 "read as `litgpt finetune` runs it (finetune_lora); --mode "
                 "full plans finetune_full"));
  const LaunchPlan named =
      read_one("cfg/full.yaml", "checkpoint_dir: a/b\ndevices: 2\ntrain: {}\n");
  CHECK(option(named, "--mode") == "full");
  CHECK(named.notes == std::vector<std::string>{
                           "train.max_seq_length is not set: LitGPT trains up "
                           "to the longest sample's length; give --seq"});
}

TEST_CASE("launch: a LitGPT file refuses what LitGPT itself refuses",
          "[launch][litgpt]") {
  const auto err = [](std::string text) {
    return error_of([&] { read("job.sh", std::move(text)); });
  };
  // lora.py setup: "mixed" in precision is refused under --quantize, and
  // the default precision is bf16-mixed.
  CHECK(err("litgpt finetune a/b --quantize bnb.nf4") ==
        "job.sh: quantize: LitGPT refuses bnb.nf4 under bf16-mixed, its "
        "default (\"Quantization and mixed precision is not supported\"); "
        "set precision: bf16-true");
  CHECK(err("litgpt finetune a/b --precision bf16 --quantize bnb.nf4-dq") ==
        "job.sh: precision: \"bf16\" with quantize: LitGPT takes 16-true, "
        "bf16-true or 32-true (lora.py setup's dtype table); write bf16-true");
  CHECK(err("litgpt finetune a/b --precision bf16-true --quantize "
            "bnb.int8-training") ==
        "job.sh: quantize: \"bnb.int8-training\" is not modelled; use "
        "bnb.nf4, bnb.nf4-dq, bnb.fp4 or bnb.fp4-dq");
  // instantiate_bnb_optimizer: AdamW only.
  CHECK(err("litgpt finetune a/b --precision bf16-true --quantize bnb.nf4 "
            "--optimizer SGD") ==
        "job.sh: optimizer: LitGPT quantizes with AdamW only (\"The chosen "
        "quantization format only supports the AdamW optimizer\"); use AdamW");
  CHECK(err("litgpt finetune a/b --optimizer RMSprop") ==
        "job.sh: optimizer: \"RMSprop\" is not modelled; oomplan models "
        "torch.optim.AdamW / Adam / SGD / Adafactor and bitsandbytes.optim "
        "AdamW8bit, PagedAdamW, PagedAdamW8bit");
  // finetune_full's setup() has no LoRA argument; validate_args refuses
  // max_norm; gradient_accumulation_iters asserts a positive count.
  CHECK(err("litgpt finetune_full a/b --lora_r 4") ==
        "job.sh: lora_r: finetune_full takes no LoRA or quantize argument; "
        "remove it or run finetune_lora");
  CHECK(err("litgpt finetune a/b --train.max_norm 1.0") ==
        "job.sh: train.max_norm: finetune_lora refuses it (validate_args); "
        "remove it");
  CHECK(err("litgpt finetune a/b --devices 4 --train.global_batch_size 2") ==
        "job.sh: train.global_batch_size: 2 over 4 GPUs leaves 0 per GPU, "
        "fewer than micro_batch_size 1: LitGPT's gradient_accumulation_iters "
        "asserts; raise global_batch_size");
  CHECK(err("litgpt finetune_adapter a/b") ==
        "job.sh: litgpt finetune_adapter: LLaMA-Adapter is not modelled; plan "
        "finetune_lora or finetune_full");
  CHECK(err("litgpt pretrain --model_name pythia-14m") ==
        "job.sh: litgpt \"pretrain\" is not modelled; oomplan reads "
        "finetune_lora and finetune_full");
  CHECK(err("litgpt finetune a/b --config missing.yaml") ==
        "job.sh: --config \"missing.yaml\": no such file");
  CHECK(err("litgpt finetune a/b c/d") ==
        "job.sh: unexpected argument \"c/d\"; LitGPT takes CHECKPOINT_DIR and "
        "--key value flags");
  CHECK(err("litgpt finetune a/b --lora_query false --lora_value false") ==
        "job.sh: lora_query: every lora_* target is false: no linear gets an "
        "adapter; set lora_query and lora_value to true");
  // A pretrain config (litgpt/pretrain.py setup) is not a finetune one.
  CHECK(error_of([] {
          read("pretrain.yaml",
               "model_name: pythia-14m\ndevices: 8\ntrain:\n  "
               "micro_batch_size: 4\n");
        }) ==
        "pretrain.yaml: model_name: a litgpt pretrain config is not "
        "modelled; oomplan reads finetune_lora and finetune_full "
        "configs");
}
