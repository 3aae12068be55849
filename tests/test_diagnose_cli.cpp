// `oomplan diagnose` on the command line, in-process: the exit codes, the
// log sources (a file, `-` from standard input, a FIFO, a device, a folder),
// binary input, the renderings and context mode (MODEL --gpus ...), over the
// real messages of tests/data/oom/.

#include "json_schema.hpp"
#include "support.hpp"

#include "oomplan/diagnose/diagnose.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using oomplan::test::CliResult;
using oomplan::test::read_required_file;
using oomplan::test::run_cli;

std::string corpus(const std::string& file) {
  return fmt::format("{}/oom/{}", OOMPLAN_TEST_DATA, file);
}

// Runs the CLI with `input` as its standard input.
CliResult run_with_input(const std::vector<std::string>& args,
                         const std::string& input) {
  std::istringstream in(input);
  oomplan::cli::Environment env;
  env.in = &in;
  std::ostringstream out;
  std::ostringstream err;
  const int code = oomplan::cli::run(args, out, err, env);
  return {code, out.str(), err.str()};
}

// A fresh folder under the temp directory, removed with the object.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("{}_{}", name, getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

// An error: exit 2, nothing on stdout, exactly one line on stderr.
void check_one_line_error(const CliResult& r, const std::string& message) {
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == fmt::format("oomplan: error: {}\n", message));
}

void check_schema(const json& doc) {
  const json schema = json::parse(read_required_file(
      fs::path(OOMPLAN_SOURCE_DIR) / "src/schema/diagnosis-1.schema.json"));
  const oomplan::test::SchemaValidator validator(schema, /*closed=*/true);
  for (const std::string& error : validator.validate(doc)) {
    FAIL_CHECK(error);
  }
}

json run_json(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  INFO(r.err);
  REQUIRE((r.code == 0 || r.code == 1));
  return json::parse(r.out);
}

std::vector<std::string> with(std::vector<std::string> args,
                              const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

bool contains(const json& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

const std::string k_lerf = "pytorch2.1-lerf-73.log";  // fragmentation
const std::string k_vllm_v0 = "vllm-v0-profile-10517.log";

}  // namespace

TEST_CASE(
    "diagnose-cli: every corpus log exits 0 with its cause and a JSON "
    "document the schema accepts",
    "[diagnose-cli]") {
  const json index = json::parse(read_required_file(corpus("index.json")));
  for (const json& entry : index.at("messages")) {
    const std::string file = entry.at("file").get<std::string>();
    INFO(file);
    const auto text = run_cli({"diagnose", corpus(file)});
    CHECK(text.code == 0);
    CHECK(text.err.empty());
    const json doc = run_json({"diagnose", corpus(file), "--json"});
    CHECK(doc.at("count") == entry.at("count"));
    CHECK(doc.at("cause") == entry.at("cause"));
    check_schema(doc);
  }
}

TEST_CASE(
    "diagnose-cli: a log without an out-of-memory message exits 1 with one "
    "line, or a JSON document with count 0",
    "[diagnose-cli]") {
  const TempDir dir("oomplan_diag_none");
  const std::string log =
      dir.file("train.log",
               "{'loss': 1.2345, 'epoch': 0.42}\n"
               " 42%|####      | 4200/10000 [1:02:03<1:25:43,  1.13it/s]\n"
               "Saving model checkpoint to out/checkpoint-4200\n");
  const auto text = run_cli({"diagnose", log});
  CHECK(text.code == 1);
  CHECK(text.err.empty());
  CHECK(text.out == "oomplan diagnose: no out-of-memory message in 3 lines\n");

  const auto r = run_cli({"diagnose", log, "--json"});
  CHECK(r.code == 1);
  const json doc = json::parse(r.out);
  CHECK(doc.at("count") == 0);
  CHECK(doc.at("messages").empty());
  CHECK(doc.at("cause").is_null());
  CHECK(doc.at("fixes").empty());
  check_schema(doc);

  // An empty input is a log without a message too.
  CHECK(run_with_input({"diagnose", "-"}, "").out ==
        "oomplan diagnose: no out-of-memory message in 0 lines\n");
}

TEST_CASE("diagnose-cli: - reads standard input like the file it holds",
          "[diagnose-cli]") {
  const std::string path = corpus(k_lerf);
  const auto from_file = run_cli({"diagnose", path});
  const auto from_stdin =
      run_with_input({"diagnose", "-"}, read_required_file(path));
  CHECK(from_stdin.code == 0);
  CHECK(from_stdin.err.empty());
  CHECK(from_stdin.out == from_file.out);
  // Without a standard input (an embedding that gives none): one line.
  check_one_line_error(run_cli({"diagnose", "-"}),
                       "standard input is not available; pipe the log into "
                       "oomplan diagnose - or give the log's path");
}

TEST_CASE("diagnose-cli: a FIFO named as LOG is read as a stream",
          "[diagnose-cli]") {
  const TempDir dir("oomplan_diag_fifo");
  const std::string fifo = (dir.path / "train.fifo").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::string log = read_required_file(corpus(k_lerf));
  // The writer blocks until the CLI opens the FIFO for reading.
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << log; });
  const auto r = run_cli({"diagnose", fifo});
  writer.join();
  CHECK(r.code == 0);
  CHECK(r.out == run_cli({"diagnose", corpus(k_lerf)}).out);
}

TEST_CASE(
    "diagnose-cli: binary input exits 2 with one line, and /dev/zero stops "
    "after its first MiB",
    "[diagnose-cli]") {
  const TempDir dir("oomplan_diag_binary");
  // 1,000 bytes: "CUDA out of memory." then 981 NUL bytes (98 %).
  std::string bytes = "CUDA out of memory.";
  bytes += std::string(1000 - bytes.size(), '\0');
  const std::string path = dir.file("core.bin", bytes);
  check_one_line_error(
      run_cli({"diagnose", path}),
      fmt::format("'{}' is not a text log (981 of 1000 bytes are NUL or "
                  "invalid UTF-8); give the log as UTF-8 text, decompressed",
                  path));
  check_one_line_error(
      run_with_input({"diagnose", "-", "--json"}, bytes),
      "standard input is not a text log (981 of 1000 bytes are NUL or "
      "invalid UTF-8); give the log as UTF-8 text, decompressed");
  // An endless device: reading stops at the first probe, 2^20 bytes.
  check_one_line_error(run_cli({"diagnose", "/dev/zero"}),
                       "'/dev/zero' is not a text log (1048576 of the first "
                       "1048576 bytes are NUL or invalid UTF-8); give the log "
                       "as UTF-8 text, decompressed");
}

TEST_CASE("diagnose-cli: a folder or a missing file is one line of error",
          "[diagnose-cli]") {
  const TempDir dir("oomplan_diag_dir");
  check_one_line_error(run_cli({"diagnose", dir.path.string()}),
                       fmt::format("'{}' is a folder; give the log file, or "
                                   "- to read standard input",
                                   dir.path.string()));
  const std::string missing = (dir.path / "train.log").string();
  check_one_line_error(run_cli({"diagnose", missing}),
                       fmt::format("no such file '{}'; give the log's path, "
                                   "or - to read standard input",
                                   missing));
  const auto none = run_cli({"diagnose"});
  CHECK(none.code == 2);
  CHECK(none.out.empty());
  CHECK(std::count(none.err.begin(), none.err.end(), '\n') == 1);
}

TEST_CASE(
    "diagnose-cli: a setup option needs MODEL, and MODEL needs --gpus (one "
    "line each)",
    "[diagnose-cli]") {
  const std::string log = corpus(k_lerf);
  check_one_line_error(run_cli({"diagnose", log, "llama3-8b"}),
                       fmt::format("MODEL needs --gpus NxNAME: the log does "
                                   "not say how many GPUs of which kind the "
                                   "job ran on; e.g. oomplan diagnose {} "
                                   "llama3-8b --gpus 8xH100",
                                   log));
  check_one_line_error(run_cli({"diagnose", log, "--gpus", "1xRTX4090"}),
                       "--gpus plans the job's setup and needs MODEL: oomplan "
                       "diagnose LOG MODEL --gpus NxNAME");
  check_one_line_error(run_cli({"diagnose", log, "--seq", "2048"}),
                       "--seq plans the job's setup and needs MODEL and "
                       "--gpus: oomplan diagnose LOG MODEL --gpus NxNAME "
                       "--seq ...");
  // The plan's own validation (check()) applies in context mode.
  const auto bad = run_cli(
      {"diagnose", log, "llama3-8b", "--gpus", "1xRTX4090", "--tp", "3"});
  CHECK(bad.code == 2);
  CHECK(bad.out.empty());
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
}

TEST_CASE("diagnose-cli: markdown lists the cause, the evidence and the fixes",
          "[diagnose-cli]") {
  const auto r = run_cli({"diagnose", corpus(k_lerf), "--format", "markdown"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("### oomplan diagnose: fragmentation\n"));
  // The message's own figures: 4.84 GiB cached, 3.00 GiB asked, 1.66 GiB free.
  CHECK_THAT(r.out, Catch::Contains("- 4.84 GiB reserved but unallocated ≥ "
                                    "the 3.00 GiB request while 1.66 GiB is "
                                    "free\n"));
  CHECK_THAT(r.out,
             Catch::Contains("1. **Let the caching allocator grow segments "
                             "instead of splitting them**: "
                             "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
                             "True`"));
  // --json and --format markdown contradict.
  CHECK(run_cli({"diagnose", corpus(k_lerf), "--json", "--format", "markdown"})
            .code == 2);
}

TEST_CASE(
    "diagnose-cli: context mode keeps fragmentation's own fixes first, then "
    "the advisor's, and compares the log with the plan",
    "[diagnose-cli]") {
  // kerrj/lerf#73 on a 23.65 GiB card (an RTX 4090), read as a LoRA job of
  // Llama-3-8B at 4096 tokens, which the plan says does not fit.
  const std::vector<std::string> setup = {
      "llama3-8b", "--gpus", "1xRTX4090", "--mode", "lora", "--seq", "4096"};
  const json doc =
      run_json(with({"diagnose", corpus(k_lerf), "--json"}, setup));
  check_schema(doc);
  const json plan = run_json(with(setup, {"--json"}));
  REQUIRE(plan.at("fits") == false);
  REQUIRE(!plan.at("fixes").empty());

  const json& fixes = doc.at("fixes");
  CHECK(doc.at("cause") == "fragmentation");
  REQUIRE(fixes.size() == 3 + plan.at("fixes").size());
  CHECK(fixes[0].at("id") == "expandable-segments");
  CHECK(fixes[1].at("id") == "empty-cache-between-phases");
  CHECK(fixes[2].at("id") == "max-split-size");
  // Then the plan's fixes in its order, each with its re-run command; the
  // generic batch and sequence fixes are replaced by them.
  for (std::size_t i = 0; i < plan.at("fixes").size(); ++i) {
    const json& mine = fixes[3 + i];
    const json& theirs = plan.at("fixes")[i];
    INFO(theirs.at("id"));
    CHECK(mine.at("rank") == 4 + i);
    CHECK(mine.at("id") == theirs.at("id"));
    CHECK(mine.at("group") == theirs.at("group"));
    CHECK(mine.at("args") ==
          fmt::format("oomplan {}", theirs.at("args").get<std::string>()));
    CHECK(mine.at("total_bytes") == theirs.at("total_bytes"));
    CHECK(mine.at("fits") == theirs.at("fits"));
  }
  CHECK(doc.at("plan").at("total_bytes") == plan.at("total_bytes"));
  CHECK(doc.at("plan").at("peak") == plan.at("peak"));
  CHECK(doc.at("plan").at("args") == "llama3-8b --gpus 1xRTX4090 --mode lora");
  // The log's side of the comparison: 12.09 GiB allocated + the 3.00 GiB
  // request = 15.09 GiB; "this process has 20.81 GiB".
  const json& evidence = doc.at("plan").at("evidence");
  REQUIRE(!evidence.empty());
  CHECK_THAT(evidence[0].get<std::string>(),
             Catch::StartsWith("the job tried to hold 15.09 GiB in tensors "
                               "(12.09 GiB allocated + the 3.00 GiB "
                               "request); the plan's peak is "));
  CHECK_THAT(evidence.dump(),
             Catch::Contains("this process held 20.81 GiB on the device"));

  const auto text = run_cli(with({"diagnose", corpus(k_lerf)}, setup));
  CHECK(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains(
                           "\nplan: llama-3-8b (8.03B params, catalog) on 1 x "
                           "RTX4090: lora, seq 4096"));
  CHECK_THAT(text.out, Catch::Contains(fmt::format(
                           "  4. {}\n     oomplan {}\n",
                           plan.at("fixes")[0].at("title").get<std::string>(),
                           plan.at("fixes")[0].at("args").get<std::string>())));
}

TEST_CASE(
    "diagnose-cli: context mode lists a shortfall's advisor fixes first, and "
    "keeps the generic ones when the plan fits with room",
    "[diagnose-cli]") {
  // awslabs/keys_values#92: 572 MiB asked on a 39.49 GiB card (an A100-40).
  const std::string log = corpus("pytorch2-rank-prefix-keys-values-92.log");
  const json full = run_json({"diagnose", log, "llama3-8b", "--gpus",
                              "1xA100-40", "--mode", "full", "--json"});
  CHECK(full.at("cause") == "shortfall");
  REQUIRE(!full.at("fixes").empty());
  // The advisor's: on the same cards, on HF Trainer or (8B full on one
  // 40 GB card: torchtune's single-device recipe) another framework.
  CHECK((full.at("fixes")[0].at("group") == "same-hardware" ||
         full.at("fixes")[0].at("group") == "switch-framework"));
  for (const json& fix : full.at("fixes")) {
    CHECK(fix.at("id") != "plan-the-setup");
  }
  // Llama-3.2-1B serving fits the card with room: no advisor fix, the
  // generic ones stay, less the hint to run this very mode.
  const json small = run_json(
      {"diagnose", log, "llama3.2-1b", "--gpus", "1xA100-40", "--json"});
  std::vector<std::string> ids;
  for (const json& fix : small.at("fixes")) {
    CHECK(!fix.contains("group"));
    ids.push_back(fix.at("id").get<std::string>());
  }
  CHECK(ids == std::vector<std::string>{"reduce-batch",
                                        "gradient-checkpointing",
                                        "shorter-sequence", "8-bit-optimizer"});
  check_schema(small);
}

TEST_CASE(
    "diagnose-cli: context mode sets the plan's largest model length beside "
    "vLLM's for a KV-cache message",
    "[diagnose-cli]") {
  // vllm-project/vllm#10517: Llama-3.1-8B on a 24 GB card under vLLM 0.6 (V0)
  // with max_model_len 29000; 1478 blocks x 16 = 23648 tokens fit.
  const std::vector<std::string> setup = {
      "llama3.1-8b",     "--gpus", "1xRTX4090",      "--engine", "vllm",
      "--max-model-len", "29000",  "--vllm-version", "0.6"};
  const json doc =
      run_json(with({"diagnose", corpus(k_vllm_v0), "--json"}, setup));
  check_schema(doc);
  const json plan = run_json(with(setup, {"--json"}));
  const auto fit = plan.at("vllm").at("max_model_len_fit").get<std::int64_t>();
  CHECK(doc.at("cause") == "vllm_kv_cache");
  // vLLM's own estimate stays the first fix.
  CHECK(doc.at("fixes")[0].at("id") == "max-model-len");
  CHECK(doc.at("fixes")[0].at("args") == "--max-model-len 23648");
  CHECK(doc.at("fixes")[1].at("group") == "same-hardware");
  const json& evidence = doc.at("plan").at("evidence");
  // 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B per token;
  // x 29000 tokens = 3,801,088,000 B = 3.54 GiB.
  CHECK(contains(evidence,
                 "the plan needs 3.54 GiB for one 29000-token sequence "
                 "(128.00 KiB per token)"));
  CHECK(contains(
      evidence,
      fmt::format("the plan fits {} tokens; vLLM in the log 23648", fit)));
  CHECK_THAT(evidence.dump(),
             Catch::Contains("the log's start-up profile has 2.89 GiB"));
  CHECK(doc.at("plan").at("vllm").at("max_model_len_fit") == fit);

  // Without --max-model-len the plan serves --seq's 4096 tokens: said so.
  const json default_len = run_json(
      {"diagnose", corpus(k_vllm_v0), "llama3.1-8b", "--gpus", "1xRTX4090",
       "--engine", "vllm", "--vllm-version", "0.6", "--json"});
  CHECK(contains(default_len.at("plan").at("evidence"),
                 "the log's max seq len is 29000, the plan's 4096: give "
                 "--max-model-len 29000"));
}

TEST_CASE(
    "diagnose-cli: the scanner stops at the first MiB boundary where the "
    "input is clearly binary, however it is fed",
    "[diagnose-cli]") {
  // 1 MiB of text, then NUL bytes: at 1 MiB nothing is bad; at 2 MiB half of
  // it is (> 1 in 10), so reading stops there.
  const std::string line = "step 12 loss 1.25 lr 2e-05\n";  // 27 bytes
  std::string input;
  while (input.size() + line.size() <= (std::size_t{1} << 20)) {
    input += line;
  }
  input += std::string((std::size_t{1} << 20) - input.size(), '\n');
  input += std::string(std::size_t{3} << 20, '\0');
  for (const std::size_t piece :
       {std::size_t{1000}, std::size_t{1} << 20, std::size_t{3} << 20}) {
    INFO(piece);
    oomplan::LogScanner scanner;
    std::size_t fed = 0;
    while (fed < input.size() && !scanner.done()) {
      scanner.feed(std::string_view(input).substr(fed, piece));
      fed += piece;
    }
    CHECK(scanner.done());
    const oomplan::Diagnosis d = scanner.finish();
    CHECK(d.binary);
    CHECK(d.stopped);
    CHECK(d.bytes == std::int64_t{2} << 20);
    CHECK(d.nul_bytes == std::int64_t{1} << 20);
  }
  // Text with a little binary noise (a NUL per 200 bytes: 0.5 %) reads to
  // its end and is not binary.
  std::string noisy;
  for (int i = 0; i < 20'000; ++i) {
    noisy += std::string(199, 'x') + '\0';
  }
  const oomplan::Diagnosis d = oomplan::diagnose(noisy);
  CHECK(!d.stopped);
  CHECK(!d.binary);
  CHECK(d.bytes == 4'000'000);
}
