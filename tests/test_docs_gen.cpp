#include "cli/cli.hpp"
#include "support.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/render/docs.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace oomplan {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// A hand-made command line: two commands sharing an output option.
std::vector<CommandDoc> toy_commands() {
  const OptionDoc format{"--format", "NAME",           "text or json",
                         "text",     {"text", "json"}, "Output"};
  return {
      {"run",
       "run the thing (the default)",
       {{"--seq", "INT", "tokens per sequence", "4096", {}, "Workload"},
        {"--fast", "", "skip the slow path", "", {}, "Workload"},
        {"--dir", "DIR", "where .files live", "", {}, "Output"},
        {"--gpus", "NxNAME", "cards", "", {}, "Hardware"},
        format},
       {{"MODEL", "the model", true, false}}},
      {"list", "list the things", {format}, {}},
      {"check",
       "check files",
       {format},
       {{"FILE", "files to check", true, true}}},
      {"explain",
       "explain a log",
       {},
       {{"LOG", "the log", true, false}, {"MODEL", "its model", false, false}}},
  };
}

ManPage toy_page() {
  ManPage page;
  page.program = "toy";
  page.version = "1.2.3";
  page.date = "2025-01-31";
  page.summary = "a toy";
  page.description = {".starts with a dot", "a \\ backslash and --seq"};
  page.global_options = {{"--version", "", "print it", "", {}, "General"}};
  page.exit_status = {{"0", "ok"}};
  page.examples = {{"toy run m --seq 8", "eight tokens"}};
  page.see_also = {"nvidia-smi(1)"};
  return page;
}

const CompletionWords k_words = {
    {"llama-3-70b", "llama-3-8b"}, {"A100-80", "H100-80"}, {"p4d.24xlarge"}};

// Runs `command` through the shell; its output (with stderr unless
// `stdout_only`) and the exit status.
struct Shell {
  int code = -1;
  std::string out;
};
Shell shell(const std::string& command, bool stdout_only = false) {
  Shell result;
  FILE* pipe =
      popen((command + (stdout_only ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool have(const std::string& program) {
  return shell("command -v " + program + " >/dev/null").code == 0;
}

// Writes `text` to a file in the temp folder; its path.
std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path path =
      fs::path(OOMPLAN_TEST_OUTPUT) / ("oomplan_docs_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// The real command line, with the shipped catalog's names.
CompletionWords catalog_words() {
  CompletionWords words;
  const Catalog& c = test::catalog();
  for (const auto& m : c.models) {
    words.models.push_back(m.name);
  }
  for (const auto& g : c.gpus) {
    words.gpus.push_back(g.name);
  }
  for (const auto& i : c.instances) {
    words.instances.push_back(i.name);
  }
  return words;
}

TEST_CASE(
    "docs: the man page lists each command's options by group, escaped "
    "for roff",
    "[docs]") {
  const std::string man = render_man_page(toy_commands(), toy_page());
  CHECK_THAT(man, Catch::StartsWith(".\\\" Generated from the option table"));
  CHECK_THAT(man,
             Catch::Contains(
                 ".TH TOY 1 \"2025-01-31\" \"toy 1.2.3\" \"User Commands\""));
  CHECK_THAT(man, Catch::Contains(".SH NAME\ntoy \\- a toy\n"));
  // The default command's synopsis, then each command's.
  CHECK_THAT(man, Catch::Contains(".SH SYNOPSIS\n\\fBtoy\\fR \\fIMODEL\\fR "
                                  "[\\fIoptions\\fR]\n.br\n\\fBtoy\\fR "
                                  "\\fBrun\\fR \\fIMODEL\\fR"));
  // One or more FILEs; an optional MODEL; no [options] without options.
  CHECK_THAT(man, Catch::Contains("\\fBtoy\\fR \\fBcheck\\fR \\fIFILE\\fR... "
                                  "[\\fIoptions\\fR]\n.br\n"));
  CHECK_THAT(man, Catch::Contains("\\fBtoy\\fR \\fBexplain\\fR \\fILOG\\fR "
                                  "[\\fIMODEL\\fR]\n.br\n"));
  // Groups in first-appearance order; a value name in italics, choices in
  // braces, the default after the help, hyphens of flags as minus signs.
  CHECK_THAT(man,
             Catch::Contains(".SS \"Workload\"\n.TP\n\\fB\\-\\-seq\\fR "
                             "\\fIINT\\fR\ntokens per sequence; default: "
                             "4096\n.TP\n\\fB\\-\\-fast\\fR\nskip the slow "
                             "path\n.SS \"Output\"\n"));
  CHECK_THAT(man, Catch::Contains("\\fB\\-\\-format\\fR {text,json}\ntext or "
                                  "json; default: text\n"));
  // The second command shares --format: it says so instead of repeating it.
  CHECK_THAT(man, Catch::Contains(".SS \"toy list\"\n.PP\nTakes the Output "
                                  "options above.\n"));
  CHECK(man.find("\\fB\\-\\-format\\fR") == man.rfind("\\fB\\-\\-format\\fR"));
  // roff: a leading dot is protected, a backslash printed, "--" in prose
  // kept as two minus signs.
  CHECK_THAT(man, Catch::Contains(".PP\n\\&.starts with a dot\n"));
  CHECK_THAT(man, Catch::Contains(".PP\na \\e backslash and \\-\\-seq\n"));
  CHECK_THAT(man, Catch::Contains(".SH EXAMPLES\n.TP\n\\fBtoy run m "
                                  "\\-\\-seq 8\\fR\neight tokens\n"));
  CHECK_THAT(man,
             Catch::EndsWith(".SH \"SEE ALSO\"\n\\fBnvidia\\-smi\\fR(1)\n"));
}

TEST_CASE("docs: oomplan's man page passes groff and man without a warning",
          "[docs]") {
  const std::string man = render_man_page(
      cli::command_docs(), oomplan_man_page("0.1.0", "2025-01-31"));
  const std::string path = temp_file("oomplan.1", man);
  if (!have("groff")) {
    WARN(
        "groff is not installed (apt-get install groff-base): the man page "
        "is not checked");
  } else {
    const Shell groff = shell("groff -man -z -ww " + path);
    INFO(groff.out);
    CHECK(groff.code == 0);
    CHECK(groff.out.empty());
  }
  if (have("man")) {
    // Only the warnings (stderr); then the page as man renders it.
    const Shell warnings =
        shell("{ MANWIDTH=80 man --warnings -l " + path + " >/dev/null; }");
    CHECK(warnings.code == 0);
    CHECK(warnings.out.empty());
    const Shell page = shell("MANWIDTH=80 man -l " + path);
    CHECK_THAT(page.out, Catch::Contains("--max-model-len INT"));
    // The synopsis as `oomplan check --help` and `diagnose --help` take
    // them: one or more FILEs; a LOG and an optional MODEL.
    CHECK_THAT(page.out,
               Catch::Contains("       oomplan check FILE... [options]\n"));
    CHECK_THAT(
        page.out,
        Catch::Contains("       oomplan diagnose LOG [MODEL] [options]\n"));
  }
  fs::remove(path);
}

TEST_CASE("docs: a synopsis marks repeated and optional positionals",
          "[docs]") {
  const auto toy = toy_commands();
  CHECK(synopsis_text(toy[0], false) == "MODEL [options]");
  CHECK(synopsis_text(toy[0], true) == "run MODEL [options]");
  CHECK(synopsis_text(toy[2], true) == "check FILE... [options]");
  CHECK(synopsis_text(toy[3], true) == "explain LOG [MODEL]");
  // oomplan's own, read from the CLI11 wiring.
  for (const CommandDoc& c : cli::command_docs()) {
    if (c.name == "check") {
      CHECK(synopsis_text(c, true) == "check FILE... [options]");
    } else if (c.name == "diagnose") {
      CHECK(synopsis_text(c, true) == "diagnose LOG [MODEL] [options]");
    } else if (c.name == "plan" || c.name == "fit") {
      CHECK(synopsis_text(c, true) == c.name + " MODEL [options]");
    }
  }
}

TEST_CASE(
    "docs: the Markdown reference lists a command's positionals and "
    "options by group",
    "[docs]") {
  const auto toy = toy_commands();
  const std::string run = render_markdown_reference("toy", toy, toy[0]);
  // The default command shows both forms of its synopsis, then its summary.
  CHECK_THAT(run, Catch::Contains("\n    toy MODEL [options]\n    toy run "
                                  "MODEL [options]\n\nrun the thing (the "
                                  "default).\n"));
  CHECK_THAT(run, Catch::Contains("| `MODEL` | the model |\n"));
  // Groups in first-appearance order (Workload, Output, Hardware), a table
  // each: the flag, its value (choices as --help lists them), its default.
  const auto workload = run.find("**Workload**");
  const auto output = run.find("**Output**");
  const auto hardware = run.find("**Hardware**");
  CHECK(workload < output);
  CHECK(output < hardware);
  CHECK(hardware != std::string::npos);
  CHECK_THAT(run, Catch::Contains("| option | value | default | meaning |\n"
                                  "|---|---|---|---|\n| `--seq` | `INT` | "
                                  "`4096` | tokens per sequence |\n| "
                                  "`--fast` |  |  | skip the slow path |\n"));
  CHECK_THAT(run,
             Catch::Contains(
                 "| `--format` | `{text,json}` | `text` | text or json |"));
  CHECK_THAT(run, Catch::EndsWith("`toy run --help` prints the same list.\n"));
  // A later command: its own synopsis only; FILE... and [MODEL].
  const std::string check = render_markdown_reference("toy", toy, toy[2]);
  CHECK_THAT(check, Catch::Contains("\n    toy check FILE... [options]\n\n"));
  CHECK(check.find("    toy FILE") == std::string::npos);
  CHECK_THAT(check, Catch::Contains("| `FILE...` | files to check |"));
  CHECK_THAT(render_markdown_reference("toy", toy, toy[3]),
             Catch::Contains("| `[MODEL]` | its model |"));
  // A '|' would end the cell: escaped, in code spans too; '<' is HTML.
  const CommandDoc odd{
      "odd",
      "odd texts",
      {{"--min", "GIB|PCT%", "keep a | b <free>", "", {}, "Overrides"}},
      {}};
  CHECK_THAT(render_markdown_reference("toy", {odd}, odd),
             Catch::Contains("| `--min` | `GIB\\|PCT%` |  | keep a \\| b "
                             "&lt;free> |"));
}

TEST_CASE(
    "docs: a page's generated sections are rewritten, the rest kept as "
    "written",
    "[docs]") {
  const auto toy = toy_commands();
  const std::string page =
      "# toy check\n\nprose\n<!-- oomplan-options:begin check -->\nstale\n"
      "<!-- oomplan-options:end check -->\nmore prose\n";
  const FilledPage filled = fill_reference_sections(page, "toy", toy);
  CHECK(filled.problems.empty());
  CHECK(filled.commands == std::vector<std::string>{"check"});
  CHECK(filled.text ==
        "# toy check\n\nprose\n<!-- oomplan-options:begin check -->\n" +
            render_markdown_reference("toy", toy, toy[2]) +
            "<!-- oomplan-options:end check -->\nmore prose\n");
  // Filling again changes nothing.
  CHECK(fill_reference_sections(filled.text, "toy", toy).text == filled.text);
  // A section of no command, or without its end, is reported and kept.
  const std::string unknown =
      "<!-- oomplan-options:begin nope -->\nx\n<!-- oomplan-options:end nope "
      "-->\n";
  const FilledPage bad = fill_reference_sections(unknown, "toy", toy);
  CHECK(bad.text == unknown);
  CHECK(bad.problems == std::vector<std::string>{"no command 'nope'"});
  const std::string open = "<!-- oomplan-options:begin run -->\nx\n";
  const FilledPage unended = fill_reference_sections(open, "toy", toy);
  CHECK(unended.text == open);
  CHECK(unended.problems ==
        std::vector<std::string>{"no line '<!-- oomplan-options:end run -->'"});
}

// Completes `words` (the last one being typed) with the bash script loaded;
// the candidates, one per line.
std::string bash_complete(const std::string& script, const std::string& words) {
  // One driver per script: tests that complete with different scripts run
  // at once under ctest -j.
  const std::string driver = temp_file(
      fs::path(script).filename().string() + ".complete",
      "source '" + script + "'\nCOMP_WORDS=(" + words +
          ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_oomplan\nprintf '%s\\n' "
          "\"${COMPREPLY[@]}\"\n");
  return shell("bash " + driver, true).out;
}

TEST_CASE(
    "docs: the bash completion completes commands, options, choices "
    "and cards",
    "[docs]") {
  const std::string script =
      temp_file("oomplan.bash",
                render_bash_completion("oomplan", cli::command_docs(),
                                       oomplan_global_options(), k_words));
  REQUIRE(shell("bash -n " + script).code == 0);
  // oomplan <TAB>: the commands and the catalog's models (and files).
  const std::string first = bash_complete(script, "oomplan ll");
  CHECK(first == "llama-3-70b\nllama-3-8b\n");
  // Every command in registration order (plan fit models gpus, then the
  // others), then the models.
  std::string commands;
  for (const CommandDoc& doc : cli::command_docs()) {
    commands.append(doc.name).append("\n");
  }
  CHECK_THAT(commands, Catch::StartsWith("plan\nfit\nmodels\ngpus\n"));
  commands.append("llama-3-70b\n");
  CHECK_THAT(bash_complete(script, "oomplan ''"), Catch::StartsWith(commands));
  // Options of the default command after a model, and their values.
  CHECK(bash_complete(script, "oomplan llama3-70b --mo") == "--mode\n");
  CHECK(bash_complete(script, "oomplan llama3-70b --mode ''") ==
        "infer\nfull\nlora\nqlora\n");
  CHECK(bash_complete(script, "oomplan llama3-70b --seq ''") == "\n");
  // --gpus: NxNAME with the count typed, or an instance.
  CHECK(bash_complete(script, "oomplan m --gpus 4xH") == "4xH100-80\n");
  CHECK(bash_complete(script, "oomplan m --gpus p4") == "p4d.24xlarge\n");
  // fit: its own options, and a comma list of cards.
  CHECK(bash_complete(script, "oomplan fit m --min") == "--min-headroom\n");
  CHECK(bash_complete(script, "oomplan fit m --gpus A100-80,H") ==
        "A100-80,H100-80\n");
  CHECK(bash_complete(script, "oomplan models --f") == "--format\n");
  // After MODEL, plain words are not completed as models again.
  CHECK(bash_complete(script, "oomplan plan llama-3-70b ll") == "\n");
  // Global flags first on the line.
  CHECK(bash_complete(script, "oomplan --ver") == "--version\n");
  // check FILE...: files after the first file too; diagnose LOG [MODEL]:
  // files, then nothing after the second positional.
  const fs::path dir = fs::path(OOMPLAN_TEST_OUTPUT) / "oomplan_docs_files";
  fs::create_directories(dir);
  std::ofstream(dir / "train.yaml") << "x";
  const std::string typed = "'" + (dir / "tr").string() + "'";
  const std::string expected = (dir / "train.yaml").string() + "\n";
  CHECK(bash_complete(script, "oomplan check a.yaml " + typed) == expected);
  CHECK(bash_complete(script, "oomplan diagnose " + typed) == expected);
  CHECK(bash_complete(script, "oomplan diagnose a.log m " + typed) == "\n");
  fs::remove_all(dir);
  fs::remove(script);
}

TEST_CASE("docs: the zsh completion parses", "[docs]") {
  if (!have("zsh")) {
    WARN("zsh is not installed: its completion is not checked");
    return;
  }
  const std::string zsh = render_zsh_completion(
      "oomplan", cli::command_docs(), oomplan_global_options(), k_words);
  CHECK_THAT(zsh, Catch::StartsWith("#compdef oomplan\n"));
  // An _arguments spec: [ ] and : inside descriptions are escaped.
  CHECK_THAT(zsh, Catch::Contains("'--mode[infer, full, lora or qlora]:NAME:"
                                  "(infer full lora qlora)'"));
  const std::string path = temp_file("_oomplan", zsh);
  const Shell check = shell("zsh -n " + path);
  INFO(check.out);
  CHECK(check.code == 0);
  fs::remove(path);
}

TEST_CASE("docs: the fish completion parses and completes", "[docs]") {
  if (!have("fish")) {
    WARN("fish is not installed: its completion is not checked");
    return;
  }
  const std::string path =
      temp_file("oomplan.fish",
                render_fish_completion("oomplan", cli::command_docs(),
                                       oomplan_global_options(), k_words));
  REQUIRE(shell("fish --no-execute " + path).code == 0);
  const auto complete = [&](const std::string& line) {
    return shell("fish --no-config -c \"source " + path + "; complete -C '" +
                     line + "'\"",
                 true)
        .out;
  };
  CHECK(complete("oomplan --mo") == "--mode\tinfer, full, lora or qlora\n");
  CHECK_THAT(complete("oomplan m --mode "),
             Catch::Contains("qlora\t") && Catch::Contains("infer\t"));
  CHECK_THAT(complete("oomplan m --gpus 4xH"),
             Catch::StartsWith("4xH100-80\t"));
  CHECK_THAT(complete("oomplan fit m --gpus A100-80,H"),
             Catch::StartsWith("A100-80,H100-80\t"));
  CHECK_THAT(complete("oomplan "), Catch::Contains("fit\tsearch the setups") &&
                                       Catch::Contains("llama-3-8b\tmodel"));
  fs::remove(path);
}

// The long flags in CLI11's --help text.
std::set<std::string> help_flags(const std::string& help) {
  std::set<std::string> flags;
  const std::regex flag(R"(^  (?:-[a-z],)?(--[a-z0-9-]+))");
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, flag)) {
      flags.insert(m[1].str());
    }
  }
  return flags;
}

TEST_CASE(
    "docs: the documented commands take exactly the flags the CLI "
    "registers",
    "[docs]") {
  for (const CommandDoc& command : cli::command_docs()) {
    INFO(command.name);
    const auto help = run_cli({command.name, "--help"});
    REQUIRE(help.code == 0);
    std::set<std::string> documented = {"--help"};
    for (const OptionDoc& o : command.options) {
      documented.insert(o.flag);
      // Choices as CLI11 lists them ("--mode {infer,...}", "--format
      // TEXT:{text,...}").
      if (!o.choices.empty()) {
        std::string braces = "{";
        for (const auto& c : o.choices) {
          braces += (braces.size() > 1 ? "," : "") + c;
        }
        CHECK_THAT(help.out, Catch::Contains(braces + "}"));
      }
    }
    CHECK(help_flags(help.out) == documented);
  }
  // Every row of the option table with a flag is in plan and fit.
  const auto commands = cli::command_docs();
  for (const OptionRow& row : option_rows()) {
    if (row.flag.empty()) {
      continue;
    }
    for (std::size_t c = 0; c < 2; ++c) {
      const auto& options = commands[c].options;
      CHECK(
          std::any_of(options.begin(), options.end(),
                      [&](const OptionDoc& o) { return o.flag == row.flag; }));
    }
  }
}

TEST_CASE("docs: the completions offer every model and card of the catalog",
          "[docs]") {
  const CompletionWords words = catalog_words();
  const std::string bash = render_bash_completion(
      "oomplan", cli::command_docs(), oomplan_global_options(), words);
  for (const auto& m : words.models) {
    CHECK_THAT(bash, Catch::Contains(" " + m + " ") ||
                         Catch::Contains("'" + m + " ") ||
                         Catch::Contains(" " + m + "'"));
  }
  const std::string script = temp_file("catalog.bash", bash);
  CHECK(bash_complete(script, "oomplan m --gpus 8xH20") == "8xH200\n");
  fs::remove(script);
}

}  // namespace
}  // namespace oomplan
