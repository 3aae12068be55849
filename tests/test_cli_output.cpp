// The command line's edges: help, echoes, and every write checked.

#include "fuzz/inert.hpp"
#include "support.hpp"

#include "oomplan/util/text.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <streambuf>
#include <string>
#include <unistd.h>
#include <vector>

using oomplan::test::CliResult;
using oomplan::test::run_binary;
using oomplan::test::run_cli;

namespace {

// A stream that refuses every byte, as a full disk or a closed descriptor.
class FailingBuf : public std::streambuf {
 protected:
  int_type overflow(int_type /*ch*/) override { return traits_type::eof(); }
  std::streamsize xsputn(const char* /*s*/, std::streamsize /*n*/) override {
    return 0;
  }
};

std::size_t files_in(const std::filesystem::path& folder) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator(folder)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("cli: oomplan help [COMMAND] is --help", "[cli]") {
  const CliResult top = run_cli({"help"});
  CHECK(top.code == 0);
  CHECK(top.out == run_cli({"--help"}).out);
  const CliResult fit = run_cli({"help", "fit"});
  CHECK(fit.code == 0);
  CHECK(fit.out == run_cli({"fit", "--help"}).out);
  CHECK(fit.out != top.out);
}

TEST_CASE("cli: every echoed word of the command line is cut at 200 bytes",
          "[cli]") {
  const std::string long_word(300, 'x');
  // Messages from each source: ours (--gpus, --catalog, a file), CLI11's
  // (--mode's choices, --framework's), an unknown option and an extra word.
  const std::vector<std::vector<std::string>> commands = {
      {"llama3-70b", "--gpus", long_word},
      {"llama3-70b", "--gpus", "1xH100", "--seq", long_word},
      {"llama3-70b", "--gpus", "1xH100", "--mode", long_word},
      {"llama3-70b", "--gpus", "1xH100", "--framework=" + long_word},
      {"llama3-70b", "--gpus", "1xH100", "--catalog", long_word},
      {long_word + ".json", "--gpus", "1xH100"},
      {"check", long_word, "--gpus", "1xH100"},
      {"llama3-70b", "--gpus", "1xH100", "--" + long_word},
      {"llama3-70b", "--gpus", "1xH100", "extra" + long_word},
  };
  for (const auto& args : commands) {
    INFO(args.at(args.size() > 3 ? 3 : 0).substr(0, 20));
    const CliResult r = run_cli(args);
    CHECK(r.code == 2);
    // 200 bytes of the word, "...(N more bytes)" and the message around it.
    CHECK(r.err.size() < 200 + 180);
    CHECK(r.err.find(long_word) == std::string::npos);
    CHECK_THAT(r.err, Catch::Contains("more bytes)"));
  }
}

TEST_CASE("cli: a report that cannot be written is exit 2, not a verdict",
          "[cli]") {
  FailingBuf buf;
  std::ostream out(&buf);
  std::ostringstream err;
  const int code = oomplan::cli::run(
      {"llama3-70b", "--gpus", "4xA100-80", "--seq", "8192"}, out, err);
  CHECK(code == 2);
  CHECK_THAT(err.str(),
             Catch::StartsWith("oomplan: error: cannot write the report to "
                               "standard output: "));
  // The binary on a full device and on a closed descriptor: the reason is
  // errno's.
  const CliResult full = run_binary("llama3-70b --gpus 1xH100 >/dev/full");
  CHECK(full.code == 2);
  CHECK(full.err ==
        "oomplan: error: cannot write the report to standard output: No "
        "space left on device\n");
  const CliResult closed = run_binary("llama3-70b --gpus 1xH100 >&-");
  CHECK(closed.code == 2);
  CHECK_THAT(closed.err, Catch::Contains("Bad file descriptor"));
}

TEST_CASE("cli: --svg replaces the file whole or leaves it as it was",
          "[cli]") {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(OOMPLAN_TEST_OUTPUT) / "cli-svg-atomic";
  fs::remove_all(folder);
  fs::create_directories(folder);
  const fs::path svg = folder / "plan.svg";
  { std::ofstream(svg) << "old"; }
  const CliResult ok =
      run_cli({"llama3-70b", "--gpus", "4xA100-80", "--svg", svg.string()});
  CHECK(ok.code == 0);
  CHECK_THAT(oomplan::test::read_required_file(svg.string()),
             Catch::StartsWith("<?xml"));
  CHECK(files_in(folder) == 1);  // no temporary file left beside it
  // A target that cannot be replaced (a folder that holds a file): the
  // error names the reason, and nothing is left behind.
  const fs::path blocked = folder / "blocked.svg";
  fs::create_directories(blocked / "inside");
  const CliResult bad =
      run_cli({"llama3-70b", "--gpus", "4xA100-80", "--svg", blocked.string()});
  CHECK(bad.code == 2);
  CHECK(bad.out.empty());
  CHECK_THAT(bad.err, Catch::Contains("cannot write '" + blocked.string() +
                                      "': Is a directory"));
  CHECK(fs::is_directory(blocked / "inside"));
  CHECK(files_in(folder) == 2);
  // A folder that does not exist: errno's reason.
  const CliResult missing = run_cli(
      {"llama3-70b", "--gpus", "4xA100-80", "--svg", "/nonexistent/x.svg"});
  CHECK(missing.err ==
        "oomplan: error: cannot write '/nonexistent/x.svg': No such file or "
        "directory\n");
}

TEST_CASE("cli: diagnose - on a closed or unreadable stdin is bad input",
          "[cli]") {
  const CliResult closed = run_binary("diagnose - <&-");
  CHECK(closed.code == 2);
  CHECK_THAT(closed.err,
             Catch::StartsWith("oomplan: error: standard input is closed"));
  const CliResult folder = run_binary("diagnose - </");
  CHECK(folder.code == 2);
  CHECK(folder.err ==
        "oomplan: error: standard input is a folder; pipe the log into "
        "oomplan diagnose - or give the log's path\n");
}

using oomplan::inert::controls_in;

TEST_CASE("cli: text and Markdown reports hold no control a name brought",
          "[cli]") {
  namespace fs = std::filesystem;
  // A config.json whose _name_or_path clears the screen, opens an OSC 8
  // link, rings the bell, writes right to left (U+202E) and ends a line
  // (NEL, U+0085): the report names the model by it.
  const fs::path folder = fs::path(OOMPLAN_TEST_OUTPUT) / "cli-hostile-model";
  fs::create_directories(folder);
  auto config = nlohmann::json::parse(oomplan::test::read_required_file(
      std::string(OOMPLAN_TEST_DATA) + "/hf/llama-7b/config.json"));
  config["_name_or_path"] =
      "evil\x1b[2J\x1b]8;;http://x\x07link\x1b]8;;\x07\u202egnp.exe\u0085";
  std::ofstream(folder / "config.json", std::ios::binary) << config.dump();
  for (const std::string format : {"text", "markdown"}) {
    for (const std::string colour : {"never", "always"}) {
      INFO(format << " " << colour);
      const CliResult r = run_cli({folder.string(), "--gpus", "1xH100",
                                   "--format", format, "--color", colour});
      REQUIRE(r.code <= 1);
      CHECK_THAT(r.out, Catch::Contains("evil\\x1b[2J"));  // shown, inert
      CHECK(controls_in(r.out, format == "text" && colour == "always") == "");
    }
  }
  // The colours the text report writes stay (SGR: ESC [ ... m).
  CHECK(oomplan::inert_text("\x1b[1mbold\x1b[0m\n", true) ==
        "\x1b[1mbold\x1b[0m\n");
  CHECK(oomplan::inert_text("\x1b[1mbold\x1b[0m\n", false) ==
        "\\x1b[1mbold\\x1b[0m\n");
  CHECK(oomplan::inert_text("\x1b]8;;http://x\x07", true) ==
        "\\x1b]8;;http://x\\x07");
}

TEST_CASE("cli: an error line shows a bidi control, it does not obey it",
          "[cli]") {
  // U+202E in a model name would print the rest of the line reversed.
  const CliResult r = run_cli({"llama\u202e3", "--gpus", "1xH100"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("llama\\u202e3"));
  CHECK(controls_in(r.err, false) == "");
}

TEST_CASE(
    "cli: Markdown holds no HTML, mention, link or code break-out "
    "that a name brought",
    "[cli]") {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(OOMPLAN_TEST_OUTPUT) / "cli-hostile-md";
  fs::create_directories(folder);
  auto config = nlohmann::json::parse(oomplan::test::read_required_file(
      std::string(OOMPLAN_TEST_DATA) + "/hf/llama-7b/config.json"));
  // An unclosed comment would hide the verdict and every row after it; the
  // rest would ping a user, link out, break out of a code span, a table.
  config["_name_or_path"] =
      "<!-- @octocat [x](http://e.com) www.evil.com a@b.io ``x` **b** | p";
  std::ofstream(folder / "config.json", std::ios::binary) << config.dump();
  const std::vector<std::vector<std::string>> commands = {
      {folder.string(), "--gpus", "1xRTX4090", "--format", "markdown"},
      {folder.string(), "--format", "markdown"},
      {"fit", folder.string(), "--gpus", "A100-80", "--format", "markdown"},
  };
  for (const auto& args : commands) {
    INFO(args.front());
    const CliResult r = run_cli(args);
    REQUIRE(r.code <= 1);
    CHECK(oomplan::inert::markdown_hazards(r.out) == "");
    // Every table row keeps its column count: no '|' of the name split a
    // cell (an escaped one is literal).
    std::istringstream lines(r.out);
    std::string line;
    std::size_t cells = 0;
    while (std::getline(lines, line)) {
      if (line.starts_with("|")) {
        std::size_t bars = 0;
        for (std::size_t k = 0; k < line.size(); ++k) {
          bars += line[k] == '|' && (k == 0 || line[k - 1] != '\\');
        }
        if (line.starts_with("|---") || cells == 0) {
          cells = bars;
        }
        CHECK(bars == cells);
      } else {
        cells = 0;
      }
    }
  }
}

TEST_CASE("cli: a model folder that cannot be entered says so", "[cli]") {
  if (geteuid() == 0) {
    WARN("skipped: root enters every folder");
    return;
  }
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(OOMPLAN_TEST_OUTPUT) / "cli-locked-model";
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::none);
  const CliResult r = run_cli({folder.string(), "--gpus", "1xH100"});
  fs::permissions(folder, fs::perms::owner_all);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("Permission denied"));
}
