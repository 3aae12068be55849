// The command line: most behaviour in-process (run_cli), the contract checks
// (exit codes, JSON keys, error messages, README's example) through the built
// binary (run_binary), as scripts in CI pipelines see it.

#include "support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

using nlohmann::json;
using oomplan::test::run_binary;
using oomplan::test::run_cli;
using oomplan::test::words;

const std::string k_readme_args = "llama3-70b --gpus 4xA100-80 --seq 8192";

// Reruns an entry's "args" (a fix or a fit plan) and checks that the plan it
// prints has the entry's total_bytes and verdict.
void check_rerun(const json& entry) {
  INFO(entry["args"].get<std::string>());
  auto args = words(entry["args"].get<std::string>());
  args.emplace_back("--json");
  const auto rerun = run_cli(args);
  REQUIRE(rerun.code != 2);
  const json again = json::parse(rerun.out);
  CHECK(again["total_bytes"] == entry["total_bytes"]);
  CHECK(again["fits"] == entry["fits"]);
}

}  // namespace

TEST_CASE("cli: MODEL alone means the plan subcommand", "[cli]") {
  const auto implicit = run_cli({"llama3-70b", "--gpus", "4xA100-80"});
  const auto explicit_plan =
      run_cli({"plan", "llama3-70b", "--gpus", "4xA100-80"});
  CHECK(implicit.code == 0);
  CHECK(implicit.err.empty());
  CHECK(implicit.out == explicit_plan.out);
  CHECK(implicit.code == explicit_plan.code);
  // An option first also means plan (oomplan --gpus 4xA100-80 llama3-70b).
  CHECK(run_cli({"--gpus", "4xA100-80", "llama3-70b"}).out == implicit.out);
}

TEST_CASE("cli: the text report has the setup line, the table and the verdict",
          "[cli]") {
  const auto r = run_cli(words(k_readme_args));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Catch::StartsWith("llama-3-70b (70.55B params, catalog) on 4 x "
                               "A100-80: infer (hf), seq 8192"));
  CHECK_THAT(r.out, Catch::Contains("\n  weights "));
  CHECK_THAT(r.out, Catch::Contains("\n  kv_cache "));
  CHECK_THAT(r.out, Catch::Contains("\n  total "));
  CHECK_THAT(r.out, Catch::Contains("\nFITS: "));
  CHECK_THAT(r.out, Catch::Contains("\npeak at "));
  // No colour when the output is not a terminal.
  CHECK(r.out.find('\x1b') == std::string::npos);
}

// no-color.org: "when present and not an empty string"; TERM=dumb has no
// escape codes; --color always/never override the terminal test.
TEST_CASE("cli: colour follows --color, NO_COLOR, TERM and the terminal",
          "[cli]") {
  auto colours = [](std::vector<std::string> extra,
                    const oomplan::cli::Environment& env) {
    std::vector<std::string> args = words(k_readme_args);
    args.insert(args.end(), extra.begin(), extra.end());
    std::ostringstream out;
    std::ostringstream err;
    REQUIRE(oomplan::cli::run(args, out, err, env) == 0);
    return out.str().find("\x1b[") != std::string::npos;
  };
  oomplan::cli::Environment tty;
  tty.out_is_terminal = true;
  CHECK(colours({}, tty));
  CHECK_FALSE(colours({}, {}));  // a pipe
  oomplan::cli::Environment no_color = tty;
  no_color.no_color = "1";
  CHECK_FALSE(colours({}, no_color));
  oomplan::cli::Environment empty_no_color = tty;
  empty_no_color.no_color = "";
  CHECK(colours({}, empty_no_color));
  oomplan::cli::Environment dumb = tty;
  dumb.term = "dumb";
  CHECK_FALSE(colours({}, dumb));
  oomplan::cli::Environment xterm = tty;
  xterm.term = "xterm-256color";
  CHECK(colours({}, xterm));
  CHECK(colours({"--color", "always"}, {}));
  CHECK(colours({"--color", "always"}, no_color));
  CHECK_FALSE(colours({"--color", "never"}, tty));
  const auto bad = run_cli(words(std::string(k_readme_args) + " --color 1"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--color"));
}

TEST_CASE("cli: a plan that does not fit exits 1 and lists fixes", "[cli]") {
  // 70.55e9 x 2 B = 131.4 GiB of bf16 weights on one 79 GiB card.
  const auto r = run_cli({"llama3-70b", "--gpus", "1xA100-80"});
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("DOES NOT FIT: needs "));
}

TEST_CASE("cli: --json is --format json and follows oomplan.plan/1", "[cli]") {
  const auto a = run_cli({"llama3-70b", "--gpus", "4xA100-80", "--json"});
  const auto b =
      run_cli({"llama3-70b", "--gpus", "4xA100-80", "--format", "json"});
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  const json doc = json::parse(a.out);
  CHECK(doc["schema"] == "oomplan.plan/1");
  CHECK(doc["model"]["params"] == 70'553'706'496);
  CHECK(doc["gpu"]["name"] == "A100-80");
  CHECK(doc["gpu"]["count"] == 4);
  CHECK(doc["setup"]["tp"] == 4);
  CHECK(doc["setup"]["dp"] == 1);
  CHECK(doc["setup"]["seq"] == 4096);
  // total_bytes is the sum of the components; headroom = usable - total.
  std::int64_t sum = 0;
  for (const auto& c : doc["components"]) {
    CHECK(c["bytes"].is_number_integer());
    sum += c["bytes"].get<std::int64_t>();
  }
  CHECK(doc["total_bytes"] == sum);
  CHECK(doc["headroom_bytes"] == doc["usable_bytes"].get<std::int64_t>() - sum);
  CHECK(doc["peak"]["device_bytes"] == sum);
}

TEST_CASE("cli: markdown output is a table for pull requests", "[cli]") {
  const auto r =
      run_cli({"llama3-70b", "--gpus", "4xA100-80", "--format", "markdown"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("### oomplan: llama-3-70b on 4 x "
                                      "A100-80\n"));
  CHECK_THAT(r.out, Catch::Contains("| **total** |"));
}

TEST_CASE("cli: each fix's args reproduce its total_bytes and verdict",
          "[cli]") {
  const auto r = run_cli({"llama3-70b", "--gpus", "2xA100-80", "--seq", "32768",
                          "--batch", "4", "--json"});
  REQUIRE(r.code == 1);
  const json doc = json::parse(r.out);
  REQUIRE(!doc["fixes"].empty());
  for (const auto& fix : doc["fixes"]) {
    check_rerun(fix);
  }
}

TEST_CASE("cli: without --gpus each common GPU gets the fewest that fit",
          "[cli]") {
  const auto r = run_cli({"llama3-70b", "--seq", "8192", "--json"});
  REQUIRE(r.code == 0);
  const json doc = json::parse(r.out);
  CHECK(doc["schema"] == "oomplan.sizing/1");
  REQUIRE(!doc["options"].empty());
  for (const auto& row : doc["options"]) {
    INFO(row["gpu"].get<std::string>());
    if (!row["fits"].get<bool>()) {
      continue;
    }
    // The suggested command fits ...
    auto args = words(row["args"].get<std::string>());
    CHECK(run_cli(args).code == 0);
    // ... and half as many GPUs (same tp rule) does not.
    const int count = row["count"].get<int>();
    if (count > 1 && count <= 8) {
      const auto fewer = run_cli(
          {"llama3-70b", "--seq", "8192", "--gpus",
           std::to_string(count / 2) + "x" + row["gpu"].get<std::string>()});
      CHECK(fewer.code == 1);
    }
  }
  const auto text = run_cli({"llama3-70b", "--seq", "8192"});
  CHECK_THAT(text.out, Catch::Contains("the fewest GPUs that fit"));
}

TEST_CASE("cli: models and gpus list the catalog", "[cli]") {
  const auto models = run_cli({"models"});
  CHECK(models.code == 0);
  CHECK_THAT(models.out, Catch::Contains("llama-3-70b"));
  const json models_doc = json::parse(run_cli({"models", "--json"}).out);
  CHECK(models_doc["schema"] == "oomplan.models/1");
  CHECK(models_doc["models"].size() >= 40);

  const auto gpus = run_cli({"gpus"});
  CHECK(gpus.code == 0);
  CHECK_THAT(gpus.out, Catch::Contains("A100-80"));
  CHECK_THAT(gpus.out, Catch::Contains("p4de.24xlarge"));
  const json gpus_doc = json::parse(run_cli({"gpus", "--json"}).out);
  CHECK(gpus_doc["schema"] == "oomplan.gpus/1");
  CHECK(gpus_doc["gpus"].size() >= 20);
}

// Issue 13: "oomplan gpus misaligns long instance names". Every row of a
// table starts its second column at the same character, whatever the names.
TEST_CASE("cli: the catalog tables align whatever the name lengths", "[cli]") {
  // The first table of each: a name (no spaces), then a right-aligned
  // number (GiB, params) whose last digit sits in one column on every line.
  auto second_end = [](const std::string& line) {
    const auto gap = line.find(' ');
    const auto start = line.find_first_not_of(' ', gap);
    return line.find(' ', start);
  };
  for (const char* command : {"gpus", "models"}) {
    const auto r = run_cli({command});
    REQUIRE(r.code == 0);
    std::istringstream lines(r.out.substr(0, r.out.find("\n\n")));
    std::string line;
    std::set<std::size_t> ends;
    while (std::getline(lines, line)) {
      ends.insert(second_end(line));
    }
    INFO(command);
    CHECK(ends.size() == 1);
  }
  // The instance table: "NAME<pad>NxGPU" with the count column aligned.
  const auto gpus = run_cli({"gpus"});
  const auto table = gpus.out.substr(gpus.out.find("\ninstance") + 1);
  std::istringstream lines(table);
  std::string line;
  std::set<std::size_t> starts;
  while (std::getline(lines, line)) {
    starts.insert(line.find_first_not_of(' ', line.find(' ')));
  }
  CHECK(starts.size() == 1);
}

TEST_CASE("cli: models and gpus print Markdown tables", "[cli]") {
  for (const char* command : {"models", "gpus"}) {
    const auto r = run_cli({command, "--format", "markdown"});
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::StartsWith("### oomplan: the catalog's "));
    CHECK_THAT(r.out, Catch::Contains("\n|---|"));
    CHECK(r.out.find('\x1b') == std::string::npos);
  }
  CHECK_THAT(run_cli({"gpus", "--format", "markdown"}).out,
             Catch::Contains("| p4de.24xlarge | 8xA100-80 |"));
  // SVG is a picture of a plan; the catalog has none.
  CHECK(run_cli({"gpus", "--format", "svg"}).code == 2);
}

TEST_CASE("cli: --svg FILE writes the picture next to the text report",
          "[cli]") {
  const std::string path =
      std::string(OOMPLAN_TEST_OUTPUT) + "/cli-plan-picture.svg";
  std::filesystem::remove(path);
  const auto r = run_cli(words(k_readme_args + " --svg " + path));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("FITS: "));  // the text report as usual
  const auto svg = run_cli(words(k_readme_args + " --format svg"));
  CHECK_THAT(svg.out, Catch::StartsWith("<?xml"));
  CHECK(oomplan::test::read_required_file(path) == svg.out);
  // A folder that does not exist: exit 2, one line, nothing on stdout.
  const auto bad = run_cli(words(k_readme_args + " --svg /nonexistent/x.svg"));
  CHECK(bad.code == 2);
  CHECK(bad.out.empty());
  CHECK_THAT(bad.err, Catch::Contains("cannot write '/nonexistent/x.svg'"));
}

TEST_CASE("cli: a config.json path or its folder is a MODEL", "[cli]") {
  const std::string folder =
      std::string(OOMPLAN_TEST_DATA) + "/validation/configs/llama-7b";
  const auto by_folder = run_cli({folder, "--gpus", "1xA100-80", "--json"});
  const auto by_file =
      run_cli({folder + "/config.json", "--gpus", "1xA100-80", "--json"});
  INFO(by_folder.err);
  REQUIRE(by_folder.code == 0);
  CHECK(by_file.out == by_folder.out);
  // LLaMA-7B: 6,738,415,616 parameters (32 layers of 4096, vocab 32000).
  CHECK(json::parse(by_folder.out)["model"]["params"] == 6'738'415'616);
}

TEST_CASE("cli: --catalog adds models from a folder of JSON", "[cli]") {
  const std::string text = oomplan::test::read_required_file(
      std::string(OOMPLAN_SOURCE_DIR) + "/models/llama.json");
  json doc = json::parse(text);
  REQUIRE(!doc["models"].empty());
  json entry = doc["models"][0];
  entry["id"] = "my-private-7b";
  entry["aliases"] = json::array();
  entry["hf_id"] = "example/my-private-7b";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("oomplan-cli-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir / "extra.json");
    out << json{{"models", json::array({entry})}}.dump();
  }
  CHECK(run_cli({"my-private-7b", "--gpus", "1xA100-80"}).code == 2);
  const auto r = run_cli(
      {"my-private-7b", "--gpus", "1xA100-80", "--catalog", dir.string()});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("my-private-7b"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: --help and --version print to stdout and exit 0", "[cli]") {
  const auto help = run_cli({"--help"});
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("Exit codes: 0 fits"));
  const auto plan_help = run_cli({"llama3-70b", "--help"});
  CHECK(plan_help.code == 0);
  CHECK_THAT(plan_help.out, Catch::Contains("--max-model-len"));
  const auto version = run_cli({"--version"});
  CHECK(version.code == 0);
  CHECK(version.out == "oomplan 0.1.0\n");
  // Its value is judged like every flag's ("missing MODEL" before).
  CHECK(run_cli({"--version=true"}).out == version.out);
  CHECK(run_cli({"--version=false", "llama3-70b", "--gpus", "4xA100-80",
                 "--seq", "8192"})
            .out == run_cli(words(k_readme_args)).out);
  // As many as a command line holds (about 2 MB of them) end in the same
  // error as none, not in a deep recursion.
  const std::vector<std::string> many(130'000, "--version=false");
  CHECK(run_cli(many).err == run_cli({}).err);
}

TEST_CASE("cli: the built binary exits 0, 1 and 2 as the contract says",
          "[cli]") {
  CHECK(run_binary(k_readme_args).code == 0);
  CHECK(run_binary("llama3-70b --gpus 1xRTX4090").code == 1);
  CHECK(run_binary("llama3-70b --gpus 1xRTX4090 --seq 0").code == 2);
  CHECK(run_binary("").code == 2);
  CHECK(run_binary("--help").code == 0);
}

TEST_CASE("cli: the binary's JSON carries every oomplan.plan/1 key", "[cli]") {
  const auto r = run_binary(k_readme_args + " --json");
  REQUIRE(r.code == 0);
  const json doc = json::parse(r.out);
  for (const char* key :
       {"schema", "model", "gpu", "setup", "components", "total_bytes",
        "usable_bytes", "fits", "headroom_bytes", "host_bytes", "warnings",
        "fixes", "peak"}) {
    INFO(key);
    CHECK(doc.contains(key));
  }
  for (const char* key : {"name", "params"}) {
    CHECK(doc["model"].contains(key));
  }
  for (const char* key : {"name", "count", "capacity_bytes"}) {
    CHECK(doc["gpu"].contains(key));
  }
  for (const char* key : {"mode",
                          "engine",
                          "seq",
                          "batch",
                          "dtype",
                          "quant",
                          "kv_dtype",
                          "tp",
                          "pp",
                          "dp",
                          "zero",
                          "nodes",
                          "offload",
                          "checkpointing",
                          "attn",
                          "precision",
                          "optimizer",
                          "lora_rank",
                          "lora_targets",
                          "gpu_util",
                          "max_model_len",
                          "max_num_seqs"}) {
    INFO(key);
    CHECK(doc["setup"].contains(key));
  }
  for (const char* key :
       {"allocated_bytes", "reserved_bytes", "device_bytes", "phase"}) {
    CHECK(doc["peak"].contains(key));
  }
  for (const auto& c : doc["components"]) {
    CHECK(c.contains("name"));
    CHECK(c["bytes"].is_number_integer());
    CHECK(c["formula"].is_string());
  }
  CHECK_FALSE(doc.contains("stages"));
  CHECK_FALSE(doc.contains("vllm"));

  const json vllm =
      json::parse(run_binary(k_readme_args + " --engine vllm --json").out);
  REQUIRE(vllm.contains("vllm"));
  for (const char* key :
       {"requested_bytes", "weights_bytes", "activation_peak_bytes",
        "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes",
        "kv_bytes_per_token", "kv_tokens", "max_concurrency",
        "max_model_len_fit", "error"}) {
    INFO(key);
    CHECK(vllm["vllm"].contains(key));
  }
  const json staged = json::parse(
      run_binary("llama3-70b --gpus 4xA100-80 --tp 1 --pp 4 --json").out);
  REQUIRE(staged.contains("stages"));
  CHECK(staged["stages"].size() == 4);
}

TEST_CASE("cli: bad input gets one line on stderr, nothing on stdout, exit 2",
          "[cli]") {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"lama3-70b --gpus 4xA100-80",
       "unknown model 'lama3-70b' (not in the catalog); did you mean "
       "llama-3-70b or llama-2-70b? Otherwise pass a config.json path or a "
       "model folder"},
      {"llama3-70b --gpus 4xA100-90",
       "unknown GPU 'A100-90'; did you mean A100-80?"},
      {"llama3-70b --gpus 4xA100-80 --seq 0",
       "--seq 0 is out of range; use 1 to 10000000 tokens"},
      {"llama3-70b --gpus 4xA100-80 --seq -5",
       "--seq -5 is out of range; use 1 to 10000000 tokens"},
      {"llama3-70b --gpus 4xA100-80 --seq abc",
       "--seq 'abc' is not a whole number"},
      {"llama3-70b --gpus 4xA100-80 --seq 20000000",
       "--seq 20000000 is out of range; use 1 to 10000000 tokens"},
      {"llama3-70b --gpus 4xA100-80 --batch 2000000",
       "--batch 2000000 is out of range; use 1 to 1000000 sequences"},
      {"llama3-70b --gpus 4xA100-80 --batch 1.5",
       "--batch '1.5' is not a whole number"},
      {"llama3-70b --gpus 8xA100-80 --nodes 20000",
       "8 GPUs per node x 20000 nodes = 160000 GPUs is above the 100000 "
       "limit"},
      {"llama3-70b --gpus 4xA100-80 --gpu-util 1.5",
       "--gpu-util 1.5 is out of range; use a fraction above 0 and at most "
       "1, e.g. 0.9"},
      {"llama3-70b --gpus 4xA100-80 --mode lora --lora-rank 0",
       "--lora-rank 0 is out of range; use 1 to 65536"},
      {"llama3-70b --gpus 4xA100-80 --mode full --fsdp --zero 2",
       "--fsdp shards like ZeRO stage 3 and contradicts --zero 2; drop "
       "--zero or use --zero 3"},
      {"llama3-70b --gpus 4xA100-80 --split layers --tp 2",
       "--split layers puts whole layers on each GPU and contradicts --tp 2; "
       "drop one of them"},
      {"llama3-70b --gpus 4xA100-80 --engine vllm --mode full",
       "--engine vllm serves models and cannot train (--mode full); use "
       "--engine hf for training or --mode infer with vllm"},
      {"llama3-70b --gpus 4xA100-80 --tp 3",
       "--tp 3 x --pp 1 = 3 GPUs per replica does not divide the 4 GPUs; "
       "choose tp x pp that divides 4"},
      {"llama3-70b --gpus 4xA100-80 --pp 3",
       "--pp 3 does not divide the 4 GPUs; use a --pp that divides 4"},
      {"llama3-70b --gpus 8xA100-80 --mode full --quant nf4",
       "--mode full updates every weight and cannot train --quant nf4 "
       "weights; drop --quant or use --mode qlora (or lora) over the "
       "quantized base"},
      {"llama3-70b --gpus 8xA100-80 --mode qlora --quant none",
       "--mode qlora trains adapters over a quantized base and contradicts "
       "--quant none; use --mode lora for a 16-bit base"},
      {"llama3-70b --gpus 8xA100-80 --mode full --sequence-parallel",
       "--sequence-parallel splits activations over the tensor-parallel "
       "group and needs --tp 2 or more"},
      {"llama3-70b --gpus 4xA100-80 --dtype fp12",
       "--dtype: fp12 not in {bf16,fp16,fp32}"},
      {"llama3-70b --gpus 4xA100-80 --lora-targets q,x",
       "--lora-targets 'q,x' is not a target list; use qv, attn, all or a "
       "comma list of q,k,v,o,gate,up,down"},
      {"llama3-70b --gpus 4xA100-80 --vllm-version abc",
       "--vllm-version 'abc' is not a version; use X.Y such as 0.6 or 0.11"},
      {"llama3-70b --gpus 4xA100-80 --transformers-version 4",
       "--transformers-version '4' is not a version; use X.Y such as 4.41 or "
       "4.46"},
      {"mistral-7b --gpus 1xL4 --awq-fused-len 2048",
       "--awq-fused-len sizes AutoAWQ's fused-layer cache, which only AWQ "
       "weights served with --engine hf (--mode infer) allocate; drop it, or "
       "add --quant awq"},
      {"./no-such-dir/config.json --gpus 1xH100",
       "no such file './no-such-dir/config.json'"},
      {"llama3-70b --gpus 4xA100-80 --catalog /no-such-dir",
       "--catalog '/no-such-dir' is not a folder; give a folder of *.json "
       "files"},
      {"llama3-70b --gpus 4xA100-80 --json --format markdown",
       "--json and --format markdown contradict; keep one of them"},
      // A flag's value is true or false: CLI11 2.1.2 would sum a number
      // into a char (256 wraps to off) or throw std::out_of_range from
      // std::stoll past 2^63 (a fuzz finding: "internal error: stoll").
      {"llama3-70b --gpus 8xH100 --mode full --fsdp=99999999999999999999",
       "--fsdp takes no value, got '99999999999999999999'"},
      {"llama3-70b --gpus 8xH100 --mode full --fsdp=256",
       "--fsdp takes no value, got '256'"},
      // The output and search flags follow the same rule: CLI11 would read
      // --json=256 as on and --json=-1 as off, and --json=abc as "Could not
      // convert", which names no fix.
      {"llama3-70b --gpus 4xA100-80 --json=256",
       "--json takes no value, got '256'"},
      {"llama3-70b --gpus 4xA100-80 --json=abc",
       "--json takes no value, got 'abc'"},
      {"fit llama3-8b --gpus A100-80 --no-offload=1",
       "--no-offload takes no value, got '1'"},
      {"fit llama3-8b --gpus A100-80 --no-quant=yes",
       "--no-quant takes no value, got 'yes'"},
      {"fit llama3-8b --all-gpus=-1", "--all-gpus takes no value, got '-1'"},
      {"--version=3", "--version takes no value, got '3'"},
      {"llama3-70b extra --gpus 1xH100",
       "unexpected argument 'extra'; see oomplan --help"},
      // Extra words in the order given (CLI11 2.1.2 lists them last first).
      {"llama3-70b --gpus 1xH100 a b c",
       "unexpected arguments 'a b c'; see oomplan --help"},
      // An unknown option is named as typed, with the nearest known name
      // (one transposition from --seq), before CLI11 reads its value as an
      // extra word ("'8192 --sqe'").
      {"llama3-70b --gpus 1xH100 --sqe 8192",
       "unknown option '--sqe' (did you mean --seq?); see oomplan plan "
       "--help"},
      {"llama3-70b --sqe 8192 --gpu 1xH100 --zzzzzzzz",
       "unknown options '--sqe' (did you mean --seq?), '--gpu' (did you mean "
       "--gpus?), '--zzzzzzzz'; see oomplan plan --help"},
      {"check train.yaml --gpu 8xH100",
       "unknown option '--gpu' (did you mean --gpus?); see oomplan check "
       "--help"},
      // An unknown option alone is not a missing MODEL.
      {"-x", "unknown option '-x'; see oomplan plan --help"},
      // An empty --opt= would take the next word as its value.
      {"llama3-70b --gpus= --seq 1", "--gpus is empty; give --gpus NxNAME"},
      {"llama3-70b --gpus 1xH100 --seq=", "--seq is empty; give --seq INT"},
      {"llama3-70b --gpus 1xH100 --json=",
       "--json= is empty; give --json, --json=true or --json=false"},
      {"llama3-70b --gpus 1xH100 --svg ''", "--svg is empty; give --svg FILE"},
      {"llama3-70b --gpus 1xH100 --catalog=",
       "--catalog is empty; give --catalog DIR"},
      // A command misspelt by one edit is not a MODEL; a model id two edits
      // from a command ("gpt3", "gpus") stays a model (and gets the
      // catalog's nearest name).
      {"chek train.yaml",
       "unknown command 'chek'; did you mean oomplan check? (a MODEL is a "
       "catalog name, see oomplan models, a Hugging Face id or a config.json "
       "path)"},
      {"gpt3 --gpus 1xH100",
       "unknown model 'gpt3' (not in the catalog); did you mean gpt2 or "
       "gpt-j-6b? Otherwise pass a config.json path or a model folder"},
      {"help me",
       "oomplan help takes one command: plan, fit, models, gpus, check, "
       "diagnose"},
      {"",
       "missing MODEL; usage: oomplan MODEL [--gpus NxNAME] [options], or "
       "oomplan --help"},
  };
  for (const auto& c : cases) {
    INFO("oomplan " << c.args);
    const auto r = run_binary(c.args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "oomplan: error: " + c.message + "\n");
  }
}

TEST_CASE("cli: bad input never crashes or hangs on odd arguments", "[cli]") {
  const std::vector<std::vector<std::string>> odd = {
      {"--gpus"},
      {"llama3-70b", "--gpus"},
      {"llama3-70b", "--gpus", ""},
      {"llama3-70b", "--gpus", "x"},
      {"llama3-70b", "--gpus", "99999999999999999999xH100"},
      {"llama3-70b", "--seq", "99999999999999999999999"},
      {"llama3-70b", "--gpu-util", "nan"},
      {"llama3-70b", "--gpu-util", "inf"},
      {"llama3-70b", "--reserve", "1"},
      {"llama3-70b", "--overhead-gib", "-1"},
      {"", "--gpus", "1xH100"},
      {"llama3-70b", "--gpus", "4xA100-80", "--tp", "0"},
      {"llama3-70b", "--gpus", "4xA100-80", "--nodes", "0"},
      {"llama3-70b", "--gpus", "4xA100-80", "--max-num-seqs", "0"},
      {"llama3-70b", "--gpus", "4xA100-80", "--grad-accum", "-1"},
      {"llama3-70b", "--gpus", "4xA100-80", "--price", "-3"},
      {"fit", "llama3-70b", "--max-gpus", "0"},
      {"fit", "llama3-70b", "--gpus", "A100-90"},
      {"models", "extra"},
      {"fit"},
  };
  for (const auto& args : odd) {
    std::string line;
    for (const auto& a : args) {
      line += "'" + a + "' ";
    }
    INFO(line);
    const auto r = run_cli(args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("oomplan: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

// README's examples: every ```text block that starts with "$ oomplan " holds
// commands and, after each, exactly what it prints (stdout, then stderr).
struct ReadmeExample {
  std::string command;  // after "$ oomplan "
  std::string expected;
};

std::vector<ReadmeExample> readme_examples(const std::string& readme) {
  std::vector<ReadmeExample> examples;
  std::istringstream in(readme);
  std::string line;
  bool in_block = false;
  bool example_block = false;
  while (std::getline(in, line)) {
    if (!in_block && line == "```text") {
      in_block = true;
      example_block = false;
      continue;
    }
    if (in_block && line == "```") {
      in_block = false;
      continue;
    }
    if (!in_block) {
      continue;
    }
    if (line.rfind("$ oomplan ", 0) == 0) {
      example_block = true;
      examples.push_back({line.substr(10), ""});
    } else if (example_block) {
      examples.back().expected += line + "\n";
    }
  }
  return examples;
}

// The working directory for the scope of one object, restored after.
struct WorkingDirectory {
  std::filesystem::path saved = std::filesystem::current_path();
  explicit WorkingDirectory(const std::filesystem::path& dir) {
    std::filesystem::current_path(dir);
  }
  ~WorkingDirectory() { std::filesystem::current_path(saved); }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;
};

// README.md, then docs/*.md in name order.
std::vector<std::filesystem::path> example_pages() {
  namespace fs = std::filesystem;
  const fs::path root(OOMPLAN_SOURCE_DIR);
  std::vector<fs::path> docs;
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") {
      docs.push_back(entry.path());
    }
  }
  std::sort(docs.begin(), docs.end());
  std::vector<fs::path> pages = {root / "README.md"};
  pages.insert(pages.end(), docs.begin(), docs.end());
  return pages;
}

TEST_CASE("cli: every README example prints what the binary prints", "[cli]") {
  // The examples name files by their path in the repository (tests/data/...),
  // as a reader runs them from a clone's root.
  const WorkingDirectory cwd(OOMPLAN_SOURCE_DIR);
  std::size_t count = 0;
  for (const auto& page : example_pages()) {
    const std::string name = page.filename().string() == "README.md"
                                 ? "README.md"
                                 : "docs/" + page.filename().string();
    const auto examples =
        readme_examples(oomplan::test::read_required_file(page));
    for (const ReadmeExample& example : examples) {
      INFO(name << ": $ oomplan " << example.command);
      const auto r = run_cli(words(example.command));
      const std::string actual = r.out + r.err;
      if (actual != example.expected) {
        // Raw, unwrapped, so it can be pasted into the page as is (or run
        // python3 tests/regen_readme.py build/oomplan).
        std::cerr << name << "'s example is stale; it prints:\n$ oomplan "
                  << example.command << "\n"
                  << actual;
      }
      CHECK(actual == example.expected);
    }
    if (name == "README.md") {
      // The opening example, the fix checklist, sizing, fit, check,
      // diagnose, the errors: half a dozen and more.
      CHECK(examples.size() >= 6);
      // The first is the one README's first command runs.
      REQUIRE_FALSE(examples.empty());
      CHECK(examples.front().command == k_readme_args);
    }
    count += examples.size();
  }
  // With the manual's: every error of plan, check's and diagnose's examples.
  CHECK(count >= 25);
}

TEST_CASE("cli: a repeated option takes its last value", "[cli]") {
  const auto twice = run_cli({"llama3-70b", "--gpus", "1xA100-80", "--seq",
                              "1024", "--gpus", "4xA100-80", "--seq", "8192"});
  const auto once = run_cli(words(k_readme_args));
  CHECK(twice.code == 0);
  CHECK(twice.out == once.out);
}

TEST_CASE("cli: a flag given true or false is on or off, the last one wins",
          "[cli]") {
  const std::string base = "llama3-70b --gpus 8xH100 --mode full --json";
  const auto off = run_cli(words(base));
  const auto on = run_cli(words(base + " --fsdp"));
  REQUIRE(off.out != on.out);  // FSDP shards the 70B model's states
  CHECK(run_cli(words(base + " --fsdp=false")).out == off.out);
  CHECK(run_cli(words(base + " --fsdp=true")).out == on.out);
  CHECK(run_cli(words(base + " --fsdp --fsdp=false")).out == off.out);
  CHECK(run_cli(words(base + " --fsdp=false --fsdp")).out == on.out);

  // --json, an output flag, reads its value the same way.
  const std::string plan = "llama3-70b --gpus 8xH100 --mode full";
  const auto text = run_cli(words(plan));
  REQUIRE(text.out != off.out);
  CHECK(run_cli(words(plan + " --json=false")).out == text.out);
  CHECK(run_cli(words(plan + " --json=true")).out == off.out);
  CHECK(run_cli(words(plan + " --json --json=false")).out == text.out);
}

TEST_CASE("cli: fit's search flags take true or false", "[cli]") {
  // {command, flag}: without --gpus fit tries the common GPUs, --all-gpus
  // every catalog GPU; full training of 8B on one 24 GiB card needs offload
  // or quantized states, and each of the other flags rules one out.
  const std::string small = "fit llama3-8b --gpus 1xRTX4090 --mode full --json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fit llama3-8b --mode full --top 50 --json", "--all-gpus"},
      {small, "--no-quant"},
      {small, "--no-offload"},
  };
  for (const auto& [base, flag] : cases) {
    INFO("oomplan " << base << " " << flag);
    const auto without = run_cli(words(base));
    const auto with = run_cli(words(base + " " + flag));
    REQUIRE(without.out != with.out);
    CHECK(run_cli(words(base + " " + flag + "=false")).out == without.out);
    CHECK(run_cli(words(base + " " + flag + "=true")).out == with.out);
  }
}

TEST_CASE("cli: fit prints oomplan.fit/1 plans whose args reproduce them",
          "[cli]") {
  const auto r =
      run_cli({"fit", "llama3-8b", "--gpus", "A100-80,RTX4090", "--mode",
               "full", "--seq", "2048", "--top", "3", "--json"});
  REQUIRE(r.code == 0);
  const json doc = json::parse(r.out);
  CHECK(doc["schema"] == "oomplan.fit/1");
  REQUIRE(!doc["plans"].empty());
  CHECK(doc["plans"].size() <= 3);
  for (const auto& plan : doc["plans"]) {
    INFO(plan["args"].get<std::string>());
    const std::string gpu = plan["gpu"]["name"].get<std::string>();
    CHECK((gpu == "A100-80" || gpu == "RTX4090"));
    check_rerun(plan);
  }
  const auto text = run_cli({"fit", "llama3-8b", "--gpus", "A100-80", "--mode",
                             "full", "--seq", "2048", "--top", "3"});
  CHECK(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("oomplan llama3-8b --gpus "));
}

TEST_CASE(
    "cli: a default tensor-parallel size that does not divide the heads "
    "says where it came from",
    "[cli]") {
  // --gpus 3xA100-80 without --tp means tp 3; Llama 3 70B has 64 heads.
  const auto r = run_cli({"llama3-70b", "--gpus", "3xA100-80"});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "oomplan: error: 3 GPUs per node mean tensor parallel 3 by default, "
        "which does not divide the 64 attention heads of llama-3-70b; pass "
        "--tp with a divisor of 64 (and --pp so that tp x pp divides the "
        "GPUs), or --split layers\n");
  CHECK(run_cli({"llama3-70b", "--gpus", "3xA100-80", "--split", "layers"})
            .code == 0);
}

TEST_CASE("cli: only regular files are read, and none beyond 16 MiB", "[cli]") {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("oomplan_files_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto refused = [](const std::string& path, const std::string& why) {
    INFO(path);
    const auto r = run_cli({path, "--gpus", "1xH100"});
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("oomplan: error: '" + path) &&
                          Catch::Contains(why));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  // A FIFO would block the read forever; /dev/zero (here behind a
  // config.json link) would never end.
  const fs::path fifo = dir / "fifo.json";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  refused(fifo.string(), "is not a regular file");
  const fs::path folder = dir / "zero";
  fs::create_directories(folder);
  fs::create_symlink("/dev/zero", folder / "config.json");
  refused((folder / "config.json").string(), "is not a regular file");
  // A 17 MiB config.json (sparse: nothing is written).
  const fs::path big = dir / "big.json";
  { std::ofstream(big.string()) << "{"; }
  fs::resize_file(big, std::uintmax_t{17} << 20);
  refused(big.string(), "larger than the 16 MiB limit");
  fs::remove_all(dir);
}

TEST_CASE("cli: control characters in echoed input stay on one line", "[cli]") {
  const auto r = run_cli({"lama\n3-70b\x1b[31m", "--gpus", "1xH100"});
  CHECK(r.code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains("'lama\\n3-70b\\x1b[31m'"));
}

TEST_CASE("cli: --objective and --precompute-ref", "[cli][preference]") {
  // DPO full fine-tuning prints its frozen reference copy; the re-run
  // words keep the objective.
  const auto dpo = run_cli({"llama3.1-8b", "--gpus", "8xH100", "--mode", "full",
                            "--zero", "3", "--objective", "dpo", "--json"});
  CHECK(dpo.code <= 1);
  const auto j = nlohmann::json::parse(dpo.out);
  CHECK(j["setup"]["objective"] == "dpo");
  bool reference = false;
  for (const auto& c : j["components"]) {
    reference = reference || c["name"] == "reference_weights";
  }
  CHECK(reference);
  // Serving has no objective; --precompute-ref needs a reference.
  const auto infer = run_cli({"llama3.1-8b", "--objective", "dpo"});
  CHECK(infer.code == 2);
  CHECK_THAT(infer.err, Catch::Contains("--objective trains on chosen and "
                                        "rejected sequences"));
  const auto pre = run_cli({"llama3.1-8b", "--mode", "full", "--objective",
                            "orpo", "--precompute-ref"});
  CHECK(pre.code == 2);
  CHECK(run_cli({"llama3.1-8b", "--mode", "full", "--objective", "ppo"}).code ==
        2);
}

TEST_CASE("cli: --framework litgpt plans what its options spell out",
          "[cli][litgpt]") {
  // The development set's Lit-GPT 8641822 FSDP LoRA row (Llama-2-7B on two
  // A100-40s, bf16-true) spelled out: FSDP1 units per Block that flatten
  // the adapters with the frozen weights, every Block checkpointed,
  // no_backward_sync over 128 micro-batches, r 8 on q and v with dropout
  // 0.05, the chunked loss. --framework litgpt at that release derives the
  // same plan from three options.
  const auto spelled = run_cli({"llama-2-7b",
                                "--gpus",
                                "2xA100-40",
                                "--mode",
                                "lora",
                                "--lora-rank",
                                "8",
                                "--lora-targets",
                                "qv",
                                "--lora-dropout",
                                "0.05",
                                "--precision",
                                "pure",
                                "--loss",
                                "chunked",
                                "--attn",
                                "sdpa",
                                "--checkpointing",
                                "full",
                                "--fsdp",
                                "--fsdp-version",
                                "1",
                                "--fsdp-frozen-grads",
                                "--fsdp-no-sync",
                                "--grad-accum",
                                "128",
                                "--seq",
                                "1304",
                                "--batch",
                                "1",
                                "--json"});
  const auto framework =
      run_cli({"llama-2-7b", "--gpus", "2xA100-40", "--framework", "litgpt",
               "--litgpt-version", "0.0.0", "--precision", "pure",
               "--grad-accum", "128", "--seq", "1304", "--json"});
  REQUIRE(spelled.code == 0);
  REQUIRE(framework.code == 0);
  const json a = json::parse(spelled.out);
  const json b = json::parse(framework.out);
  CHECK(a.at("total_bytes") == b.at("total_bytes"));
  CHECK(a.at("peak") == b.at("peak"));
  CHECK(b.at("setup").at("fsdp_version") == 1);
  CHECK(b.at("setup").at("fsdp_frozen_grads") == true);
  CHECK(b.at("setup").at("checkpointing") == "full");
}

TEST_CASE("cli: --framework litgpt refuses QLoRA on several devices",
          "[cli][litgpt]") {
  const auto r = run_cli({"llama3-8b", "--gpus", "2xA10G", "--framework",
                          "litgpt", "--mode", "qlora"});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "oomplan: error: --framework litgpt quantizes on one device only "
        "(finetune_lora raises NotImplementedError for --quantize on 2 "
        "devices); use --gpus 1xNAME or --mode lora\n");
}
