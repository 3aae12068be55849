// `oomplan check` (check/check.hpp, render/check.hpp, src/cli/cmd_check.cpp)
// over the real configs committed under tests/data/configs/, plus `oomplan plan
// --framework NAME` and vLLM's own flag spellings on plan and fit.
//
// Expected setups come from outside the code: tests/data/configs/index.json
// (each file's options, written by hand from reading the file) and the
// framework defaults table (docs/check.md "Framework defaults"), compared
// through an `oomplan plan` run with those flags spelled out.

#include "json_schema.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <system_error>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using oomplan::test::CliResult;
using oomplan::test::run_cli;

const std::string k_configs = std::string(OOMPLAN_TEST_DATA) + "/configs";

std::string config(const std::string& relative) {
  return k_configs + "/" + relative;
}

const std::string k_torchtune_lora =
    config("torchtune/recipes/configs/llama3_1/8B_lora_single_device.yaml");
const std::string k_torchtune_70b_lora =
    config("torchtune/recipes/configs/llama3_1/70B_lora.yaml");
const std::string k_axolotl_fft =
    config("axolotl/examples/llama-3/fft-8b.yaml");
const std::string k_ds_zero3 =
    config("axolotl/deepspeed_configs/zero3_bf16.json");
const std::string k_vllm_tp4_pp2 =
    config("vllm/distributed_serving_tp4_pp2.sh");
const std::string k_vllm_gpt_oss = config("vllm/gpt-oss-alignment_vllm.sh");
const std::string k_trl_example =
    config("trl/examples/cli_configs/example_config.yaml");

// A file under the test build folder holding `text`.
std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path path = fs::path(OOMPLAN_TEST_OUTPUT) / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

json parse_json(const CliResult& r) {
  INFO(r.err);
  REQUIRE((r.code == 0 || r.code == 1));
  return json::parse(r.out);
}

// `oomplan ARGS --json` (a plan): its document.
json plan_json(std::vector<std::string> args) {
  args.emplace_back("--json");
  const auto r = run_cli(args);
  return parse_json(r);
}

// `oomplan check ARGS --json`: its document.
json check_json(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"check"};
  all.reserve(args.size() + 2);
  for (const std::string& arg : args) {
    all.push_back(arg);
  }
  all.emplace_back("--json");
  const auto r = run_cli(all);
  return parse_json(r);
}

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Removes the test's temp files when it ends, whether it passes or not.
struct Cleanup {
  std::vector<std::string> paths;
  explicit Cleanup(std::vector<std::string> files) : paths(std::move(files)) {}
  ~Cleanup() {
    for (const std::string& path : paths) {
      std::error_code ec;
      fs::remove(path, ec);
    }
  }
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;
};

// Runs in `dir` until the end of the scope (a launch config names its
// DeepSpeed file relative to the directory the job starts in).
struct WorkingDirectory {
  fs::path saved = fs::current_path();
  explicit WorkingDirectory(const fs::path& dir) { fs::current_path(dir); }
  ~WorkingDirectory() { fs::current_path(saved); }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;
};

// Validates against src/schema/check-1.schema.json with every printed key
// declared (closed).
void check_schema(const json& doc) {
  std::ifstream in(fs::path(OOMPLAN_SOURCE_DIR) / "src" / "schema" /
                   "check-1.schema.json");
  REQUIRE(in.good());
  const oomplan::test::SchemaValidator validator(json::parse(in),
                                                 /*closed=*/true);
  for (const std::string& error : validator.validate(doc)) {
    FAIL_CHECK("oomplan.check/1 at " << error);
  }
}

}  // namespace

TEST_CASE("check: one row per plan, in the order of the files given",
          "[check]") {
  const json doc = check_json(
      {k_torchtune_lora, k_vllm_gpt_oss, k_trl_example, "--gpus", "8xH100"});
  CHECK(doc["schema"] == "oomplan.check/1");
  REQUIRE(doc["plans"].size() == 3);
  CHECK(doc["plans"][0]["file"] == k_torchtune_lora);
  CHECK(doc["plans"][0]["reader"] == "torchtune");
  CHECK(doc["plans"][0]["model"]["name"] == "llama-3.1-8b");
  CHECK(doc["plans"][1]["file"] == k_vllm_gpt_oss);
  CHECK(doc["plans"][1]["reader"] == "vllm");
  CHECK(doc["plans"][1]["model"]["name"] == "gpt-oss-20b");
  CHECK(doc["plans"][2]["file"] == k_trl_example);
  CHECK(doc["plans"][2]["reader"] == "hf-trainer");
  CHECK(doc["plans"][2]["framework"] == "trl");
  for (const json& plan : doc["plans"]) {
    CHECK(plan["gpu"]["name"] == "H100-80");
    CHECK(plan["gpu"]["count"] == 8);
    CHECK(plan["entry"].is_null());
  }
  check_schema(doc);

  // The text table: a header and one line per plan, in the same order.
  const auto text = run_cli({"check", k_torchtune_lora, k_vllm_gpt_oss,
                             k_trl_example, "--gpus", "8xH100"});
  std::istringstream in(text.out);
  std::string header;
  std::getline(in, header);
  CHECK(header.rfind("file ", 0) == 0);
  for (const std::string& file :
       {k_torchtune_lora, k_vllm_gpt_oss, k_trl_example}) {
    std::string row;
    std::getline(in, row);
    CHECK(row.rfind(file + " ", 0) == 0);
  }
}

TEST_CASE(
    "check: exit 0 when every plan fits, 1 when one does not, 2 for "
    "a bad file",
    "[check]") {
  // Llama-3.1-8B LoRA on 8 H100 fits easily.
  const auto fits = run_cli({"check", k_torchtune_lora, "--gpus", "8xH100"});
  INFO(fits.err);
  CHECK(fits.code == 0);
  CHECK_THAT(fits.out, Catch::EndsWith("PASS: the plan fits with the required "
                                       "headroom\n"));
  // 70B LoRA on one 40 GB card: the bf16 weights alone are 70.55e9 x 2 B =
  // 141 GB.
  const auto over = run_cli(
      {"check", k_torchtune_lora, k_torchtune_70b_lora, "--gpus", "A100-40"});
  CHECK(over.code == 1);
  CHECK_THAT(over.out, Catch::EndsWith("FAIL: 1 of 2 plans does not fit with "
                                       "the required headroom\n"));
  CHECK_THAT(over.out,
             Catch::Contains("first fixes:\n  " + k_torchtune_70b_lora + ": "));
  const auto none = run_cli({"check", "--gpus", "8xH100"});
  CHECK(none.code == 2);
  CHECK(none.err ==
        "oomplan: error: missing FILE; give the launch configs to check, e.g. "
        "oomplan check train.yaml --gpus 8xH100\n");
  const auto missing = run_cli(
      {"check", k_torchtune_lora, config("no-such.yaml"), "--gpus", "8xH100"});
  CHECK(missing.code == 2);
  CHECK(missing.out.empty());
  CHECK(missing.err ==
        "oomplan: error: no such file '" + config("no-such.yaml") + "'\n");
}

TEST_CASE("check: the required headroom decides, and --min-headroom sets it",
          "[check]") {
  // One plan, planned once to learn its numbers, then gated at headroom
  // margins just below and above what it has free.
  const std::string plans = temp_file(
      "check_headroom.json",
      R"([{"model": "llama3-8b", "gpus": "1xA100-80", "seq": 8192}])");
  const Cleanup cleanup{{plans}};
  const json base = check_json({plans});
  const json& p = base["plans"][0];
  const std::int64_t headroom = p["headroom_bytes"];
  REQUIRE(headroom > 0);
  const double free_gib = static_cast<double>(headroom) / (1 << 30);
  const auto below = run_cli(
      {"check", plans, "--min-headroom", std::to_string(free_gib * 0.9)});
  CHECK(below.code == 0);
  const auto above = run_cli({"check", plans, "--min-headroom",
                              std::to_string(free_gib * 1.1), "--json"});
  CHECK(above.code == 1);
  const json doc = json::parse(above.out);
  CHECK(doc["fits"] == false);
  CHECK(doc["plans"][0]["fits"] == false);
  CHECK(doc["plans"][0]["verdict"] == "low headroom");
  CHECK(doc["plans"][0]["headroom_bytes"] == headroom);
  check_schema(doc);
}

TEST_CASE("check: a plans file gives one row per entry with its own GPUs",
          "[check]") {
  const std::string plans = temp_file("check_plans.json", R"([
    {"model": "llama3-8b", "gpus": "1xH100", "mode": "qlora", "seq": 2048,
     "name": "small"},
    {"model": "llama3-70b", "gpus": "2xA100-80", "mode": "full", "zero": 3}
  ])");
  const Cleanup cleanup{{plans}};
  const auto r = run_cli({"check", plans, "--json"});
  // 70B full fine-tune on two cards: 16 B/param / 2 = 564 GB per card.
  CHECK(r.code == 1);
  const json doc = parse_json(r);
  REQUIRE(doc["plans"].size() == 2);
  CHECK(doc["plans"][0]["entry"] == 0);
  CHECK(doc["plans"][1]["entry"] == 1);
  CHECK(doc["plans"][0]["reader"] == "plans");
  CHECK(doc["plans"][0]["unused_keys"] == json::array({"name"}));
  CHECK(doc["plans"][0]["gpu"] ==
        plan_json({"llama3-8b", "--gpus", "1xH100", "--mode", "qlora", "--seq",
                   "2048"})["gpu"]);
  CHECK(doc["plans"][0]["total_bytes"] ==
        plan_json({"llama3-8b", "--gpus", "1xH100", "--mode", "qlora", "--seq",
                   "2048"})["total_bytes"]);
  CHECK(doc["plans"][1]["gpu"]["count"] == 2);
  CHECK(doc["plans"][1]["total_bytes"] ==
        plan_json({"llama3-70b", "--gpus", "2xA100-80", "--mode", "full",
                   "--zero", "3"})["total_bytes"]);
  CHECK(doc["plans"][0]["first_fix"].is_null());
  CHECK(doc["plans"][1]["first_fix"].is_object());
  check_schema(doc);

  const auto text = run_cli({"check", plans});
  CHECK_THAT(text.out, Catch::Contains("\n" + plans + "[0]  plans "));
  CHECK_THAT(text.out, Catch::Contains("\n" + plans + "[1]  plans "));
}

TEST_CASE(
    "check: a vLLM plan that would not start fails the gate and says "
    "why",
    "[check]") {
  // Llama 3 70B's config.json says max_position_embeddings 8192, which vLLM
  // refuses to exceed (vllm/config/model.py _get_and_verify_max_len).
  const std::string plans = temp_file(
      "check_vllm_len.json",
      R"([{"model": "llama3-70b", "gpus": "4xA100-80", "engine": "vllm",
           "max-model-len": 32768}])");
  const Cleanup cleanup{{plans}};
  const auto r = run_cli({"check", plans, "--json"});
  CHECK(r.code == 1);
  const json doc = parse_json(r);
  const json& p = doc["plans"][0];
  CHECK(p["verdict"] == "does not fit");
  const std::vector<std::string> notes = p["notes"];
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::StartsWith("vLLM would not start: "));
  CHECK_THAT(notes[0], Catch::Contains("32768"));
}

TEST_CASE("check: --model and --gpus fill what a DeepSpeed config leaves out",
          "[check]") {
  // DeepSpeed's defaults (--mode full, --precision mixed) under the file's
  // zero_optimization.stage 3 and bf16 (index.json).
  const json doc =
      check_json({k_ds_zero3, "--model", "llama3-8b", "--gpus", "8xH100"});
  REQUIRE(doc["plans"].size() == 1);
  const json& p = doc["plans"][0];
  CHECK(p["reader"] == "deepspeed");
  CHECK(p["setup"]["zero"] == 3);
  CHECK(p["total_bytes"] ==
        plan_json({"llama3-8b", "--gpus", "8xH100", "--mode", "full", "--zero",
                   "3", "--dtype", "bf16", "--precision",
                   "mixed"})["total_bytes"]);

  // Without them: exit 2, one line naming the file and what to pass.
  const auto no_model = run_cli({"check", k_ds_zero3, "--gpus", "8xH100"});
  CHECK(no_model.code == 2);
  CHECK(no_model.err ==
        "oomplan: error: " + k_ds_zero3 +
            ": names no model (deepspeed config); pass --model NAME (a catalog "
            "name, a Hugging Face id or a config.json path)\n");
  const auto no_card = run_cli({"check", k_torchtune_lora});
  CHECK(no_card.code == 2);
  CHECK(no_card.err == "oomplan: error: " + k_torchtune_lora +
                           ": names no GPU card; pass --gpus NxNAME (e.g. "
                           "--gpus 8xH100), or --gpus NAME to plan the file's "
                           "own GPU count\n");
}

TEST_CASE("check: a model nothing resolves is exit 2 unless --model names one",
          "[check]") {
  // A LLaMA-Factory file naming a model no step resolves: not a path, not in
  // the catalog, no cache (run_cli's Environment has none), no mirror.
  const std::string file =
      std::string(OOMPLAN_TEST_OUTPUT) + "/check_unknown_model.yaml";
  std::ofstream(file) << "model_name_or_path: acme/Nothing-Like-It-9B\n"
                         "stage: sft\nfinetuning_type: lora\n";
  const auto r = run_cli({"check", file, "--gpus", "H100"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("oomplan: error: " + file +
                                      ": model_name_or_path: unknown model "
                                      "'acme/Nothing-Like-It-9B'"));
  CHECK_THAT(r.err, Catch::EndsWith("(--model NAME plans another model)\n"));
  CHECK(lines(r.err) == 1);
  const json doc =
      check_json({file, "--model", "llama3.1-8b", "--gpus", "H100"});
  CHECK(doc["plans"][0]["model"]["name"] == "llama-3.1-8b");
  CHECK(doc["plans"][0]["notes"].dump().find(
            "--model llama3.1-8b (command line) wins over the file's "
            "model_name_or_path (acme/Nothing-Like-It-9B)") !=
        std::string::npos);
}

TEST_CASE("check: the file beats the framework's defaults", "[check]") {
  // axolotl's defaults say --seq 512 and --checkpointing none; fft-8b.yaml
  // states sequence_len 8192 and gradient_checkpointing true (index.json).
  const json doc =
      check_json({k_axolotl_fft, "--model", "llama3.1-8b", "--gpus", "1xH100"});
  const json& p = doc["plans"][0];
  CHECK(p["setup"]["seq"] == 8192);
  CHECK(p["setup"]["checkpointing"] == "full");
  // The file's options (index.json) over axolotl's defaults (a full
  // fine-tune in pure bf16 with sdpa and the full loss), spelled out.
  CHECK(p["total_bytes"] == plan_json({"llama3.1-8b",
                                       "--gpus",
                                       "1xH100",
                                       "--mode",
                                       "full",
                                       "--precision",
                                       "pure",
                                       "--loss",
                                       "full",
                                       "--seq",
                                       "8192",
                                       "--batch",
                                       "1",
                                       "--grad-accum",
                                       "8",
                                       "--checkpointing",
                                       "full",
                                       "--attn",
                                       "flash",
                                       "--dtype",
                                       "bf16",
                                       "--optimizer",
                                       "paged-adamw-8bit"})["total_bytes"]);
}

TEST_CASE("check: an option given on the command line beats the file",
          "[check]") {
  // 8B_lora_single_device.yaml states batch_size 2 (index.json); --batch 1
  // wins, and a note says so.
  const json doc =
      check_json({k_torchtune_lora, "--gpus", "1xH100", "--batch", "1"});
  const json& p = doc["plans"][0];
  CHECK(p["setup"]["batch"] == 1);
  const std::vector<std::string> notes = p["notes"];
  CHECK(std::find(notes.begin(), notes.end(),
                  "--batch 1 (command line) wins over the file's batch_size "
                  "(--batch 2)") != notes.end());
  // The file's options (index.json) and torchtune's defaults (launch
  // README: pure bf16, chunked loss, sdpa, FSDP), with --batch 1.
  CHECK(p["total_bytes"] == plan_json({"llama3.1-8b",
                                       "--gpus",
                                       "1xH100",
                                       "--mode",
                                       "lora",
                                       "--lora-rank",
                                       "8",
                                       "--lora-targets",
                                       "q,v,o,gate,up,down",
                                       "--batch",
                                       "1",
                                       "--grad-accum",
                                       "8",
                                       "--optimizer",
                                       "adamw",
                                       "--loss",
                                       "chunked",
                                       "--checkpointing",
                                       "full",
                                       "--dtype",
                                       "bf16",
                                       "--precision",
                                       "pure",
                                       "--attn",
                                       "sdpa",
                                       "--fsdp"})["total_bytes"]);
  // The same file without --batch: the file's 2.
  const json own = check_json({k_torchtune_lora, "--gpus", "1xH100"});
  CHECK(own["plans"][0]["setup"]["batch"] == 2);
}

TEST_CASE("check: each row's args plan the same setup again", "[check]") {
  const json doc =
      check_json({k_torchtune_lora, k_torchtune_70b_lora, k_vllm_gpt_oss,
                  k_trl_example, "--gpus", "H100", "--seq", "2048"});
  for (const json& p : doc["plans"]) {
    const std::string args = p["args"];
    INFO(args);
    const json again = plan_json(oomplan::test::words(args));
    CHECK(again["total_bytes"] == p["total_bytes"]);
    CHECK(again["setup"] == p["setup"]);
    if (p["first_fix"].is_object()) {
      const json fixed = plan_json(
          oomplan::test::words(p["first_fix"]["args"].get<std::string>()));
      CHECK(fixed["total_bytes"] == p["first_fix"]["total_bytes"]);
    }
  }
}

TEST_CASE(
    "check: an explicit --gpus count wins over the file's, a bare card "
    "keeps it",
    "[check]") {
  // vLLM's distributed-serving example: -tp 4 -pp 2 = 8 GPUs (index.json).
  const json own =
      check_json({k_vllm_tp4_pp2, "--model", "llama3-8b", "--gpus", "H100"});
  CHECK(own["plans"][0]["gpu"]["count"] == 8);
  CHECK(own["plans"][0]["setup"]["tp"] == 4);
  CHECK(own["plans"][0]["setup"]["pp"] == 2);
  const json more =
      check_json({k_vllm_tp4_pp2, "--model", "llama3-8b", "--gpus", "16xH100"});
  CHECK(more["plans"][0]["gpu"]["count"] == 16);
  CHECK(more["plans"][0]["setup"]["dp"] == 2);
  const std::vector<std::string> notes = more["plans"][0]["notes"];
  CHECK(std::find(notes.begin(), notes.end(),
                  "the file launches 8 GPUs per node; --gpus 16xH100 (command "
                  "line) wins: planned on 16 GPUs per node") != notes.end());
  // 4 GPUs cannot hold tp 4 x pp 2: the explicit count is planned, and
  // rejected with the pipeline's message.
  const auto fewer = run_cli(
      {"check", k_vllm_tp4_pp2, "--model", "llama3-8b", "--gpus", "4xH100"});
  CHECK(fewer.code == 2);
  CHECK_THAT(fewer.err, Catch::StartsWith("oomplan: error: " + k_vllm_tp4_pp2 +
                                          ": --tp 4 x --pp 2"));
}

TEST_CASE("check: files that state nodes say N nodes x M GPUs", "[check]") {
  // vLLM runs tensor parallelism within a node and the pipeline stages
  // across nodes: 32 GPUs are 4 nodes of 8, not 32 GPUs in one node.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "oomplan-check-nodes";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "serve.sh").string();
  {
    std::ofstream out(file);
    out << "vllm serve meta-llama/Llama-3.1-405B --tensor-parallel-size 8 "
           "--pipeline-parallel-size 4\n";
  }
  const json doc =
      check_json({file, "--model", "llama3-70b", "--gpus", "H100"});
  const json& p = doc["plans"][0];
  CHECK(p["gpu"]["count"] == 32);
  CHECK(p["setup"]["gpus"] == 8);
  CHECK(p["setup"]["nodes"] == 4);
  const json other = check_json(
      {file, "--model", "llama3-70b", "--gpus", "4xH100", "--tp", "4"});
  const std::vector<std::string> notes = other["plans"][0]["notes"];
  CHECK(std::find(notes.begin(), notes.end(),
                  "the file launches 4 nodes x 8 GPUs; --gpus 4xH100 (command "
                  "line) wins: planned on 4 nodes x 4 GPUs") != notes.end());
  // accelerate states nodes too: num_processes 16 over num_machines 2.
  const std::string acc = (dir / "acc.yaml").string();
  {
    std::ofstream out(acc);
    out << "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: "
           "16\nmixed_precision: bf16\n";
  }
  const json two = check_json(
      {acc, "--model", "llama3-8b", "--gpus", "4xH100", "--mode", "lora"});
  const std::vector<std::string> acc_notes = two["plans"][0]["notes"];
  CHECK(std::find(acc_notes.begin(), acc_notes.end(),
                  "the file launches 2 nodes x 8 GPUs; --gpus 4xH100 (command "
                  "line) wins: planned on 2 nodes x 4 GPUs") !=
        acc_notes.end());
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "check: a file's DeepSpeed reference resolves from the working "
    "directory, then beside the file",
    "[check]") {
  {
    // LLaMA-Factory's example names examples/deepspeed/ds_z3_config.json
    // from the repository root, where its README runs it.
    const WorkingDirectory cwd(config("llama-factory"));
    const json doc = check_json({"examples/train_full/qwen3_full_sft.yaml",
                                 "--model", "qwen3-4b", "--gpus", "8xH100"});
    const json& p = doc["plans"][0];
    CHECK(p["included_files"] ==
          json::array({"examples/deepspeed/ds_z3_config.json"}));
    CHECK(p["setup"]["zero"] == 3);
  }
  // accelerate's template names ../deepspeed_config_templates/... relative
  // to its own folder: found from anywhere.
  const json doc = check_json(
      {config("accelerate/examples/config_yaml_templates/deepspeed.yaml"),
       "--model", "llama3-8b", "--gpus", "H100"});
  const json& p = doc["plans"][0];
  CHECK(p["included_files"] ==
        json::array({"../deepspeed_config_templates/zero_stage1_config.json"}));
  CHECK(p["setup"]["zero"] == 1);
  CHECK(p["gpu"]["count"] == 2);  // num_processes: 2
}

TEST_CASE("check: markdown is a heading and one table row per plan",
          "[check]") {
  const auto r = run_cli({"check", k_torchtune_lora, k_torchtune_70b_lora,
                          "--gpus", "A100-40", "--format", "markdown"});
  CHECK(r.code == 1);
  std::istringstream in(r.out);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) {
    all.push_back(line);
  }
  REQUIRE(all.size() >= 6);
  CHECK(all[0] ==
        "### oomplan check: ❌ 1 of 2 plans does not fit with the required "
        "headroom");
  CHECK(all[1].empty());
  CHECK(all[2] ==
        "|  | file | reader | model | GPUs | peak per GPU (GiB) | headroom "
        "(GiB) | verdict | first fix |");
  CHECK(all[3] == "|---|---|---|---|---|---:|---:|---|---|");
  CHECK(all[4].rfind("| ✅ | `" + k_torchtune_lora +
                         "` | torchtune | "
                         "llama-3.1-8b | 1 x A100-40 | ",
                     0) == 0);
  CHECK(all[5].rfind("| ❌ | `" + k_torchtune_70b_lora +
                         "` | torchtune | "
                         "llama-3.1-70b | 1 x A100-40 | ",
                     0) == 0);
  // Each table row has the header's nine cells.
  for (std::size_t i = 2; i < 6; ++i) {
    CHECK(std::count(all[i].begin(), all[i].end(), '|') == 10);
  }
  CHECK_THAT(r.out, Catch::Contains("\n**First fixes**\n\n- `" +
                                    k_torchtune_70b_lora + "`: "));
  CHECK_THAT(r.out, Catch::Contains("\n**Notes**\n\n"));
}

TEST_CASE("check: --summary appends the Markdown to $GITHUB_STEP_SUMMARY",
          "[check]") {
  const std::string summary =
      temp_file("check_step_summary.md", "## earlier step\n");
  const Cleanup cleanup{{summary}};
  oomplan::cli::Environment env;
  env.step_summary = summary;
  std::ostringstream out;
  std::ostringstream err;
  const int code = oomplan::cli::run(
      {"check", k_torchtune_lora, "--gpus", "8xH100", "--summary"}, out, err,
      env);
  CHECK(code == 0);
  CHECK(err.str().empty());
  // stdout keeps the text table; the file gets the Markdown, appended.
  CHECK(out.str().rfind("file ", 0) == 0);
  const auto markdown = run_cli(
      {"check", k_torchtune_lora, "--gpus", "8xH100", "--format", "markdown"});
  CHECK(oomplan::test::read_required_file(summary) ==
        "## earlier step\n" + markdown.out);
  // A second run appends again; a plan that does not fit (exit 1) still
  // writes its summary.
  std::ostringstream out2;
  std::ostringstream err2;
  CHECK(oomplan::cli::run({"check", k_torchtune_70b_lora, "--gpus", "A100-40",
                           "--summary", "--json"},
                          out2, err2, env) == 1);
  const std::string after = oomplan::test::read_required_file(summary);
  CHECK(after.rfind("## earlier step\n" + markdown.out +
                        "### oomplan check: ❌ the plan does not fit",
                    0) == 0);
  CHECK(json::parse(out2.str())["fits"] == false);

  // Outside GitHub Actions: a warning, and the verdict is unchanged.
  const auto unset =
      run_cli({"check", k_torchtune_lora, "--gpus", "8xH100", "--summary"});
  CHECK(unset.code == 0);
  CHECK(unset.err ==
        "oomplan: warning: --summary: GITHUB_STEP_SUMMARY is not set, so no "
        "step summary was written (it is set inside GitHub Actions)\n");
}

TEST_CASE("check: --summary takes true or false", "[check]") {
  // --summary=false writes nothing and warns of nothing; --summary=true is
  // --summary (warned of outside GitHub Actions).
  const auto plain = run_cli({"check", k_torchtune_lora, "--gpus", "8xH100"});
  const auto off = run_cli(
      {"check", k_torchtune_lora, "--gpus", "8xH100", "--summary=false"});
  CHECK(off.code == plain.code);
  CHECK(off.out == plain.out);
  CHECK(off.err.empty());
  const auto on = run_cli(
      {"check", k_torchtune_lora, "--gpus", "8xH100", "--summary=true"});
  CHECK_THAT(on.err, Catch::StartsWith("oomplan: warning: --summary: "));
  const auto bad =
      run_cli({"check", k_torchtune_lora, "--gpus", "8xH100", "--summary=2"});
  CHECK(bad.code == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err == "oomplan: error: --summary takes no value, got '2'\n");
}

TEST_CASE("check: unknown keys are warnings on stderr, not errors", "[check]") {
  const std::string plans = temp_file(
      "check_unknown.json",
      R"([{"model": "llama3-8b", "gpus": "1xH100", "flavour": "vanilla",
           "colour": 3}])");
  const Cleanup cleanup{{plans}};
  const auto r = run_cli({"check", plans});
  CHECK(r.code == 0);
  CHECK(r.err == "oomplan: warning: " + plans +
                     ": unknown key 'flavour' (not read)\n"
                     "oomplan: warning: " +
                     plans + ": unknown key 'colour' (not read)\n");
  // A committed config with a key DeepSpeed does not read ("_comment").
  const std::string autotp =
      config("llama-factory/examples/deepspeed/ds_z2_autotp_config.json");
  const auto ds =
      run_cli({"check", autotp, "--model", "llama3-8b", "--gpus", "2xH100"});
  CHECK(ds.code != 2);
  CHECK(ds.err == "oomplan: warning: " + autotp +
                      ": unknown key '_comment' (not read)\n");
}

TEST_CASE("check: hostile files are exit 2 with one line naming the file",
          "[check]") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const char p = static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + std::string(1, c) + " [";
    for (int i = 0; i < 10; ++i) {
      bomb += std::string(i == 0 ? "*" : ", *") + std::string(1, p);
    }
    bomb += "]\n";
  }
  bomb += "base_model: m\n";
  std::vector<std::string> files = {
      // Wrong types: a number where a model name goes, text for a count.
      temp_file("check_types.json", R"([{"model": 42, "gpus": "1xH100"}])"),
      temp_file("check_seq.json",
                R"([{"model": "llama3-8b", "gpus": "1xH100", "seq": "long"}])"),
      temp_file("check_ds_types.json",
                R"({"zero_optimization": {"stage": "three"}})"),
      temp_file("check_gpus.json",
                R"([{"model": "llama3-8b", "gpus": "lots"}])"),
      temp_file("check_bomb.yaml", bomb),
      temp_file("check_big.yaml", std::string(10 << 20, 'a')),
      temp_file("check_binary.yaml", std::string("\x7f"
                                                 "ELF\x02\x01\x01\0\0\0",
                                                 10)),
      temp_file("check_empty.json", "[]"),
      k_configs,  // a folder
      config("missing.yaml"),
  };
  const std::string fifo =
      (fs::path(OOMPLAN_TEST_OUTPUT) / "check_fifo").string();
  fs::remove(fifo);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  files.push_back(fifo);
  const Cleanup cleanup{{files[0], files[1], files[2], files[3], files[4],
                         files[5], files[6], files[7], fifo}};
  for (const std::string& file : files) {
    INFO(file);
    const auto r =
        run_cli({"check", file, "--model", "llama3-8b", "--gpus", "8xH100"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("oomplan: error: "));
    CHECK_THAT(r.err, Catch::Contains(file));
    CHECK(lines(r.err) == 1);
  }
  // The option table's message, under the file and key it came from.
  const auto seq = run_cli({"check", files[1]});
  CHECK(seq.err == "oomplan: error: " + files[1] +
                       ": plans[0]: seq: --seq 'long' is not a whole number\n");
}

TEST_CASE("check: --json follows the published oomplan.check/1 schema",
          "[check]") {
  const std::string plans = temp_file("check_schema.json", R"([
    {"model": "llama3-8b", "gpus": "2xL40S", "engine": "vllm",
     "max-model-len": 8192, "framework": "vllm"},
    {"model": "llama3-70b", "gpus": "1xA100-80", "mode": "qlora"}
  ])");
  const Cleanup cleanup{{plans}};
  check_schema(check_json({plans}));
  check_schema(check_json({k_ds_zero3, k_torchtune_70b_lora, "--model",
                           "llama3-70b", "--gpus", "A100-40"}));
}

// --- oomplan plan --framework NAME.

TEST_CASE("plan: --framework torchtune plans pure bf16 with the chunked loss",
          "[check]") {
  // torchtune's defaults (launch README): --mode full --dtype bf16
  // --precision pure --loss chunked --checkpointing none --attn sdpa --fsdp
  // --optimizer adamw.
  const json framework =
      plan_json({"llama3-8b", "--gpus", "2xH100", "--framework", "torchtune"});
  const json spelled = plan_json(
      {"llama3-8b", "--gpus", "2xH100", "--mode", "full", "--dtype", "bf16",
       "--precision", "pure", "--loss", "chunked", "--checkpointing", "none",
       "--attn", "sdpa", "--fsdp", "--optimizer", "adamw"});
  CHECK(framework["setup"]["precision"] == "pure");
  CHECK(framework["setup"]["loss"] == "chunked");
  CHECK(framework["total_bytes"] == spelled["total_bytes"]);
  CHECK(framework["setup"] == spelled["setup"]);
  // Pure bf16 keeps 2 + 2 + 4 B per parameter for weights, gradients and
  // AdamW's two states, mixed 16 B: the framework's plan is smaller.
  const json mixed =
      plan_json({"llama3-8b", "--gpus", "2xH100", "--mode", "full", "--fsdp"});
  CHECK(framework["total_bytes"] < mixed["total_bytes"]);
}

TEST_CASE("plan: options given beat --framework's defaults", "[check]") {
  const json both =
      plan_json({"llama3-8b", "--gpus", "2xH100", "--framework", "torchtune",
                 "--loss", "full", "--precision", "mixed"});
  CHECK(both["setup"]["loss"] == "full");
  CHECK(both["setup"]["precision"] == "mixed");
  CHECK(both["total_bytes"] ==
        plan_json({"llama3-8b", "--gpus", "2xH100", "--mode", "full", "--dtype",
                   "bf16", "--precision", "mixed", "--loss", "full", "--attn",
                   "sdpa", "--fsdp"})["total_bytes"]);
  // fit takes it too; its plans are priced with the same defaults.
  const auto fit = run_cli({"fit", "llama3-8b", "--gpus", "H100", "--framework",
                            "torchtune", "--json", "--top", "1"});
  INFO(fit.err);
  CHECK(fit.code == 0);
  const json plans = json::parse(fit.out)["plans"];
  REQUIRE(!plans.empty());
  CHECK(plans[0]["setup"]["precision"] == "pure");
  const auto bad =
      run_cli({"llama3-8b", "--gpus", "1xH100", "--framework", "megatron"});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::StartsWith("oomplan: error: --framework"));
  CHECK(lines(bad.err) == 1);
}

TEST_CASE("plan: --framework axolotl --mode lora plans what its file reads",
          "[check]") {
  // axolotl trains a full fine-tune in pure bf16, but PEFT upcasts LoRA
  // adapters to fp32 (peft autocast_adapter_dtype=True): a LoRA job is
  // mixed precision on the command line as in an axolotl file.
  const std::string file = temp_file("axolotl_lora.yaml",
                                     "base_model: meta-llama/Llama-3.1-8B\n"
                                     "adapter: lora\n"
                                     "sequence_len: 8192\n"
                                     "micro_batch_size: 1\n"
                                     "bf16: true\n");
  const Cleanup cleanup{{file}};
  const json read = check_json({file, "--gpus", "1xRTX4090"})["plans"][0];
  const json plan =
      plan_json({"llama3.1-8b", "--gpus", "1xRTX4090", "--framework", "axolotl",
                 "--mode", "lora", "--seq", "8192"});
  CHECK(read["setup"]["precision"] == "mixed");
  CHECK(plan["setup"]["precision"] == "mixed");
  CHECK(plan_json({"llama3.1-8b", "--gpus", "1xRTX4090", "--framework",
                   "axolotl"})["setup"]["precision"] == "pure");
  // ... and its fixes come with axolotl files: the writer takes PEFT's fp32
  // adapters for what axolotl does (a 16-bit LoRA it cannot express).
  const json tight =
      plan_json({"gemma-7b", "--gpus", "1xA10G", "--framework", "axolotl",
                 "--mode", "lora", "--seq", "2048", "--batch", "2"});
  REQUIRE(!tight["fixes"].empty());
  bool axolotl_block = false;
  for (const auto& block : tight["fixes"][0]["launch"]) {
    axolotl_block = axolotl_block || block["framework"] == "axolotl";
  }
  CHECK(axolotl_block);
  // An explicit --precision still wins.
  CHECK(plan_json({"llama3.1-8b", "--gpus", "1xRTX4090", "--framework",
                   "axolotl", "--mode", "lora", "--precision",
                   "pure"})["setup"]["precision"] == "pure");
}

TEST_CASE("plan: --lora-dropout from the command line and the files",
          "[check]") {
  // TRL's ModelConfig.lora_dropout = 0.05 (trl/trainer/model_config.py).
  const json trl = plan_json({"llama3.1-8b", "--gpus", "1xH100", "--framework",
                              "trl", "--mode", "lora"});
  CHECK(trl["setup"]["lora_dropout"] == 0.05);
  // A full fine-tune has no adapters to drop out.
  CHECK(plan_json({"llama3.1-8b", "--gpus", "1xH100", "--framework",
                   "trl"})["setup"]["lora_dropout"] == 0.0);
  const auto bad = run_cli({"llama3.1-8b", "--gpus", "1xH100", "--mode", "lora",
                            "--lora-dropout", "1"});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::StartsWith("oomplan: error: --lora-dropout 1 is "
                                        "out of range"));
  CHECK(lines(bad.err) == 1);
  const std::string file = temp_file("axolotl_dropout.yaml",
                                     "base_model: meta-llama/Llama-3.1-8B\n"
                                     "adapter: lora\n"
                                     "lora_dropout: 1.0\n");
  const Cleanup cleanup{{file}};
  const auto refused = run_cli({"check", file, "--gpus", "1xH100"});
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains("lora_dropout"));
  CHECK(lines(refused.err) == 1);
}

TEST_CASE("plan: --untied-head plans LitGPT's copy of a tied embedding",
          "[check]") {
  // Llama 3.2 1B ties lm_head to its 128,256 x 2,048 embedding; LitGPT loads
  // the copy convert_hf_checkpoint writes: 128,256 x 2,048 x 2 B =
  // 525,336,576 B more weights in bf16.
  const std::vector<std::string> args = {"llama3.2-1b", "--gpus", "1xA10G",
                                         "--mode",      "lora",   "--precision",
                                         "pure"};
  std::vector<std::string> untied = args;
  untied.emplace_back("--untied-head");
  const json tied = plan_json(args);
  const json copy = plan_json(untied);
  CHECK(copy["setup"]["untied_head"] == true);
  CHECK(copy["components"][0]["bytes"].get<std::int64_t>() -
            tied["components"][0]["bytes"].get<std::int64_t>() ==
        525336576);
  // No framework oomplan writes loads that copy: a fix prints no block.
  std::vector<std::string> trl = untied;
  for (const char* a : {"--framework", "trl", "--seq", "65536"}) {
    trl.emplace_back(a);
  }
  const json fixes = plan_json(trl)["fixes"];
  REQUIRE(!fixes.empty());
  CHECK(fixes[0]["launch"].empty());
  CHECK_THAT(fixes[0]["cost"].get<std::string>(),
             Catch::Contains("a second copy of the tied output head"));
  // Llama 3.1 8B has its own head already: nothing changes.
  CHECK(plan_json({"llama3.1-8b", "--gpus", "1xH100",
                   "--untied-head"})["total_bytes"] ==
        plan_json({"llama3.1-8b", "--gpus", "1xH100"})["total_bytes"]);
}

// --- vLLM's own spellings on plan and fit.

TEST_CASE("plan: --engine vllm takes vLLM's flag spellings", "[check]") {
  const json ours = plan_json({"llama3-70b", "--gpus",
                               "4xA100-80",  "--engine",
                               "vllm",       "--tp",
                               "4",          "--gpu-util",
                               "0.8",        "--max-model-len",
                               "8192",       "--kv-dtype",
                               "fp8",        "--max-num-seqs",
                               "64",         "--max-num-batched-tokens",
                               "4096",       "--enforce-eager",
                               "--dtype",    "bf16"});
  const std::vector<std::vector<std::string>> spellings = {
      {"--tensor-parallel-size", "4", "--gpu-memory-utilization", "0.8",
       "--max-model-len", "8192", "--kv-cache-dtype", "fp8", "--max-num-seqs",
       "64", "--max-num-batched-tokens", "4096", "--enforce-eager", "--dtype",
       "bfloat16"},
      {"--tensor-parallel-size=4", "--gpu-memory-utilization=0.8",
       "--max_model_len=8192", "--kv-cache-dtype=fp8_e4m3", "--max_num_seqs",
       "64", "--max-num-batched-tokens=4096", "--enforce_eager",
       "--dtype=bfloat16"},
      {"-tp", "4", "--gpu_memory_utilization", "0.8", "--max-model-len", "8192",
       "--kv_cache_dtype", "fp8", "--max-num-seqs", "64",
       "--max_num_batched_tokens", "4096", "--enforce-eager", "--dtype",
       "bf16"},
  };
  for (const auto& words : spellings) {
    std::vector<std::string> args = {"llama3-70b", "--gpus", "4xA100-80",
                                     "--engine", "vllm"};
    args.insert(args.end(), words.begin(), words.end());
    const json doc = plan_json(args);
    INFO(doc["setup"].dump());
    CHECK(doc["setup"] == ours["setup"]);
    CHECK(doc["total_bytes"] == ours["total_bytes"]);
  }
  // --dtype float16 / half is fp16; auto is the default.
  CHECK(plan_json({"llama3-8b", "--gpus", "1xH100", "--engine", "vllm",
                   "--dtype", "half"})["setup"]["dtype"] == "fp16");
  CHECK(plan_json({"llama3-8b", "--gpus", "1xH100", "--engine", "vllm",
                   "--dtype", "auto"})["total_bytes"] ==
        plan_json({"llama3-8b", "--gpus", "1xH100", "--engine",
                   "vllm"})["total_bytes"]);
  // --quantization / -q: AWQ weights.
  CHECK(plan_json({"llama3-70b", "--gpus", "2xA100-80", "--engine", "vllm",
                   "-q", "awq"})["setup"]["quant"] == "awq");
  CHECK(plan_json({"llama3-70b", "--gpus", "2xA100-80", "--engine", "vllm",
                   "--quantization", "awq_marlin"})["setup"]["quant"] == "awq");
  // vLLM's human lengths (vllm/engine/arg_utils.py human_readable_int):
  // 32k = 32,000, 32K = 32 x 1024 = 32,768.
  CHECK(plan_json({"llama3.1-8b", "--gpus", "1xH100", "--engine", "vllm",
                   "--max-model-len", "32k"})["setup"]["max_model_len"] ==
        32000);
  CHECK(plan_json({"llama3.1-8b", "--gpus", "1xH100", "--engine", "vllm",
                   "--max-model-len=32K"})["setup"]["max_model_len"] == 32768);
  // --pipeline-parallel-size.
  CHECK(plan_json({"llama3-70b", "--gpus", "4xA100-80", "--engine", "vllm",
                   "--pipeline-parallel-size", "2", "--tensor-parallel-size",
                   "2"})["setup"]["pp"] == 2);
}

TEST_CASE("plan: re-run lines keep oomplan's own spellings", "[check]") {
  // A plan that does not fit, so it lists fixes with their command lines.
  const auto r =
      run_cli({"llama3-70b", "--gpus", "1xA100-80", "--engine", "vllm",
               "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.9",
               "--dtype", "bfloat16", "--json"});
  CHECK(r.code == 1);
  const json doc = json::parse(r.out);
  REQUIRE(!doc["fixes"].empty());
  for (const json& fix : doc["fixes"]) {
    const std::string args = fix["args"];
    INFO(args);
    CHECK(args.find("tensor-parallel") == std::string::npos);
    CHECK(args.find("gpu-memory-utilization") == std::string::npos);
    CHECK(args.find("bfloat16") == std::string::npos);
  }
}

TEST_CASE("plan: a vLLM-only spelling without --engine vllm says to add it",
          "[check]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tensor-parallel-size", "4"},
       "--tensor-parallel-size 4 is vLLM's spelling; add --engine vllm, or "
       "write --tp 4"},
      {{"--gpu-memory-utilization=0.8"},
       "--gpu-memory-utilization 0.8 is vLLM's spelling; add --engine vllm, "
       "or write --gpu-util 0.8"},
      {{"--dtype", "bfloat16"},
       "--dtype bfloat16 is vLLM's spelling; add --engine vllm, or write "
       "--dtype bf16"},
      {{"--max_model_len", "8192"},
       "--max_model_len 8192 is vLLM's spelling; add --engine vllm, or write "
       "--max-model-len 8192"},
  };
  for (const auto& [words, message] : cases) {
    std::vector<std::string> args = {"llama3-70b", "--gpus", "4xA100-80"};
    args.insert(args.end(), words.begin(), words.end());
    const auto r = run_cli(args);
    INFO(message);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "oomplan: error: " + message + "\n");
  }
  // oomplan's own spellings work with any engine.
  CHECK(run_cli({"llama3-8b", "--gpus", "1xH100", "--dtype", "bf16"}).code ==
        0);
  CHECK(run_cli({"llama3-8b", "--gpus", "1xH100", "--engine", "vllm", "--dtype",
                 "fp16"})
            .code == 0);
  // --framework vllm plans the vLLM engine, so its spellings apply.
  const json fw = plan_json({"llama3-8b", "--gpus", "1xH100", "--framework",
                             "vllm", "--gpu-memory-utilization", "0.8"});
  CHECK(fw["setup"]["engine"] == "vllm");
  CHECK(fw["setup"]["gpu_util"] == 0.8);
  // fit too.
  const auto fit = run_cli({"fit", "llama3-8b", "--gpus", "H100", "--engine",
                            "vllm", "--max-model-len", "8192",
                            "--gpu-memory-utilization", "0.8", "--top", "1"});
  INFO(fit.err);
  CHECK(fit.code == 0);
  const auto fit_hf = run_cli({"fit", "llama3-8b", "--gpus", "H100",
                               "--gpu-memory-utilization", "0.8"});
  CHECK(fit_hf.code == 2);
  CHECK_THAT(fit_hf.err, Catch::Contains("add --engine vllm"));
}

TEST_CASE("check: a YAML merge (<<) plans as its keys written out", "[check]") {
  // The values a merge brings are the plan's, not the defaults': 8B full
  // fine-tuning at 16 x 8192 tokens does not fit one A100-80 (the same
  // file without the merge would plan micro_batch_size 1, seq 2048).
  const std::string shared =
      "base_model: meta-llama/Llama-3.1-8B\n"
      "bf16: true\n"
      "datasets:\n  - path: tatsu-lab/alpaca\n    type: alpaca\n";
  const std::string merged =
      temp_file("merge_keys.yaml", shared +
                                       "x-run: &run\n  sequence_len: 8192\n"
                                       "  micro_batch_size: 16\n"
                                       "<<: *run\n");
  const std::string written =
      temp_file("merge_keys_written.yaml",
                shared + "sequence_len: 8192\nmicro_batch_size: 16\n");
  const auto a = run_cli({"check", merged, "--gpus", "1xA100-80", "--json"});
  const auto b = run_cli({"check", written, "--gpus", "1xA100-80", "--json"});
  CHECK(a.code == 1);
  CHECK(b.code == 1);
  const auto ja = json::parse(a.out);
  const auto jb = json::parse(b.out);
  CHECK(ja["plans"][0]["total_bytes"] == jb["plans"][0]["total_bytes"]);
  CHECK(a.err.find("'<<'") == std::string::npos);
  fs::remove(merged);
  fs::remove(written);
}

TEST_CASE("check: a file a config names is never quoted into the error",
          "[check]") {
  // A PR may point `deepspeed:` at any file; when it is not JSON, the error
  // names the file, the line and the column, never its bytes (nlohmann's
  // message carried "last read: '...'").
  const std::string secret =
      temp_file("check_secret.txt", "{\"a\": 1, TOKEN=hunter2-secret }\n");
  const std::string args = temp_file(
      "check_secret_args.json",
      R"({"model_name_or_path": "meta-llama/Llama-3.1-8B", "deepspeed": ")" +
          secret + R"("})");
  const Cleanup cleanup{{secret, args}};
  const auto direct = run_cli({"check", secret, "--gpus", "1xH100"});
  const auto named = run_cli({"check", args, "--gpus", "1xH100"});
  for (const auto& r : {direct, named}) {
    CHECK(r.code == 2);
    CHECK(r.err.find("hunter2") == std::string::npos);
    CHECK(r.err.find("TOKEN") == std::string::npos);
    CHECK_THAT(r.err, Catch::Contains("line 1, column"));
  }
}

TEST_CASE(
    "check: a DeepSpeed JSON that repeats a key is refused, as DeepSpeed "
    "does; YAML keeps the last value with a note",
    "[check]") {
  const std::string ds =
      temp_file("check_dup_ds.json",
                R"({"zero_optimization": {"stage": 3, "stage": 0},
          "train_micro_batch_size_per_gpu": 1})");
  const std::string yaml =
      temp_file("check_dup.yaml",
                "base_model: meta-llama/Llama-3.1-8B\nsequence_len: 32768\n"
                "sequence_len: 1024\nmicro_batch_size: 1\n");
  const Cleanup cleanup{{ds, yaml}};
  const auto refused =
      run_cli({"check", ds, "--model", "llama3-8b", "--gpus", "1xH100"});
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err,
             Catch::Contains("key \"zero_optimization.stage\" appears twice"));
  const json doc = check_json({yaml, "--gpus", "1xH100"});
  const json& plan = doc["plans"][0];
  CHECK(plan["setup"]["seq"] == 1024);  // PyYAML keeps the last value
  CHECK_THAT(plan["notes"].dump(),
             Catch::Contains("sequence_len") && Catch::Contains("twice"));
}

TEST_CASE("check: the report names the files a config brought in", "[check]") {
  const std::string ds = temp_file(
      "check_named_ds.json",
      R"({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})");
  const std::string args = temp_file(
      "check_named_args.json",
      R"({"model_name_or_path": "meta-llama/Llama-3.1-8B", "deepspeed": "check_named_ds.json"})");
  const Cleanup cleanup{{ds, args}};
  const auto r = run_cli({"check", args, "--gpus", "2xH100"});
  CHECK_THAT(r.out, Catch::Contains("read with check_named_ds.json"));
}

TEST_CASE("check: a file name that is not UTF-8 is a verdict, not exit 3",
          "[check]") {
  // nlohmann refuses to write invalid UTF-8 (type_error.316): the JSON shows
  // the byte as U+FFFD, the text report as \xff.
  const std::string ds = temp_file(
      "check_name_\xff.json",
      R"({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})");
  const Cleanup cleanup{{ds}};
  const auto r = run_cli(
      {"check", ds, "--model", "llama3-8b", "--gpus", "1xH100", "--json"});
  CHECK(r.code == 1);
  const json doc = json::parse(r.out);
  CHECK_THAT(doc["plans"][0]["file"].get<std::string>(),
             Catch::EndsWith("check_name_\xef\xbf\xbd.json"));
  const auto text =
      run_cli({"check", ds, "--model", "llama3-8b", "--gpus", "1xH100"});
  CHECK_THAT(text.out, Catch::Contains("check_name_\\xff.json"));
}

TEST_CASE(
    "check: a companion file named from the repository root is found "
    "above the config",
    "[check]") {
  // LLaMA-Factory's example names examples/deepspeed/ds_z3_config.json,
  // relative to the repository root it is launched from: two folders above
  // the YAML (tests/data/configs/llama-factory/).
  const std::string file =
      std::string(OOMPLAN_TEST_DATA) +
      "/configs/llama-factory/examples/train_lora/qwen3_lora_sft_ds3.yaml";
  const json doc = check_json({file, "--gpus", "8xH100"});
  CHECK(doc["plans"][0]["included_files"] ==
        json::array({"examples/deepspeed/ds_z3_config.json"}));
  CHECK(doc["plans"][0]["setup"]["zero"] == 3);
}

TEST_CASE(
    "check: --mode on the command line plans what the framework does "
    "in that mode",
    "[check][litgpt]") {
  // config_hub's llama-3.1-8b/full.yaml is finetune_full: its head runs in
  // one call (lm_head_chunk 0). Planned as LoRA it is finetune_lora, which
  // calls the head on 128-token chunks (litgpt/finetune/lora.py fit); and
  // back: --mode full on a LoRA file drops the split again.
  const std::string full =
      config("litgpt/config_hub/finetune/llama-3.1-8b/full.yaml");
  const std::string lora =
      config("litgpt/config_hub/finetune/mistral-7b-v0.2/lora.yaml");
  CHECK(check_json({full, "--gpus",
                    "4xA100-80"})["plans"][0]["setup"]["lm_head_chunk"] == 0);
  CHECK(check_json({full, "--gpus", "4xA100-80", "--mode",
                    "lora"})["plans"][0]["setup"]["lm_head_chunk"] == 128);
  CHECK(check_json({lora, "--gpus",
                    "1xA100-80"})["plans"][0]["setup"]["lm_head_chunk"] == 128);
  CHECK(check_json({lora, "--gpus", "1xA100-80", "--mode",
                    "full"})["plans"][0]["setup"]["lm_head_chunk"] == 0);
}

TEST_CASE(
    "plan: GPTQ weights run the kernel transformers picks, with its "
    "scratch",
    "[check]") {
  // transformers before 4.49 loads AutoGPTQ's exllama (GPTQConfig.post_init:
  // exllama_config {"version": 1}); from 4.49 GPTQModel's backend="auto":
  // Marlin from compute capability 8.0, ExLlamaV2 on older cards and ROCm.
  const std::string gptq = "TheBloke/Llama-2-13B-chat-GPTQ";
  const auto kernel = [&](const std::string& gpus, const std::string& tf) {
    return plan_json({gptq, "--gpus", gpus, "--transformers-version",
                      tf})["setup"]["gptq_kernel"];
  };
  CHECK(kernel("1xA100-80", "4.48") == "exllama");
  CHECK(kernel("1xA100-80", "4.49") == "marlin");
  CHECK(kernel("1xT4", "4.49") == "exllamav2");
  CHECK(kernel("1xMI300X", "5.0") == "exllamav2");
  CHECK(plan_json({"llama-2-13b", "--gpus",
                   "1xA100-80"})["setup"]["gptq_kernel"] == "none");
  // Llama-2-13B's gate/up (5,120 in, 13,824 out): exllamav2's scratch is
  // 2 x 5,120 x 13,824 + 128 + 13,824 x 2,048 x 8 x 4 + 128 =
  // 1,047,527,680 B, listed as buffers; Marlin keeps none.
  const auto buffers = [](const json& plan) -> std::int64_t {
    for (const json& c : plan["components"]) {
      if (c["name"] == "buffers") {
        return c["bytes"];
      }
    }
    return 0;
  };
  CHECK(buffers(plan_json({gptq, "--gpus", "1xA100-80", "--gptq-kernel",
                           "exllamav2"})) == 1047527680);
  CHECK(buffers(plan_json({gptq, "--gpus", "1xA100-80"})) == 0);
  // A fix loads the repository the user named, with the plan's kernel.
  const json fixes = plan_json({gptq, "--gpus", "1xT4", "--seq", "16384",
                                "--batch", "2", "--gptq-kernel", "exllamav2",
                                "--transformers-version", "4.40"})["fixes"];
  bool written = false;
  for (const json& f : fixes) {
    for (const json& b : f["launch"]) {
      if (b["framework"] == "transformers" &&
          b["text"].get<std::string>().find(
              R"(GPTQConfig(bits=4, exllama_config={"version": 2}))") !=
              std::string::npos) {
        written = true;
        CHECK_THAT(
            b["text"].get<std::string>(),
            Catch::StartsWith(
                R"(AutoModelForCausalLM.from_pretrained("TheBloke/Llama-2-13B-chat-GPTQ")"));
      }
    }
  }
  CHECK(written);
}

TEST_CASE("check: a LitGPT --config that is not YAML is never quoted",
          "[check][litgpt]") {
  // A command line may name any file with --config; the error names it and
  // where YAML failed, never its bytes.
  const std::string secret = temp_file(
      "litgpt_secret.txt", "precision: [bf16-true\nTOKEN=hunter2-secret\n");
  const std::string sh = temp_file(
      "litgpt_secret.sh", "litgpt finetune_lora a/b --config " + secret + "\n");
  const Cleanup cleanup{{secret, sh}};
  const auto r = run_cli({"check", sh, "--gpus", "1xH100"});
  CHECK(r.code == 2);
  CHECK(r.err.find("hunter2") == std::string::npos);
  CHECK(r.err.find("TOKEN") == std::string::npos);
  CHECK_THAT(r.err, Catch::Contains("litgpt_secret.txt"));
}
