#pragma once

// What the commands share: the option-table binding, the output options,
// catalog and model loading, and the Command seam each subcommand registers
// through (cmd_*.cpp). Nothing here computes a number: the commands call the
// plan pipeline (oomplan/plan.hpp) and the renderers.

#include "cli/cli.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/setup/setup.hpp"
#include "oomplan/util/text.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomplan::cli {

// The setup options as typed, one text per option-table row (a flag's is
// "true" or its given value); the rows parse them once CLI11 has matched the
// command line.
struct SetupOptions {
  std::vector<std::string> texts =
      std::vector<std::string>(option_rows().size());
  std::vector<CLI::Option*> bound =
      std::vector<CLI::Option*>(option_rows().size(), nullptr);
};

enum class Format { text, json, markdown, svg, prometheus };

struct OutputOptions {
  bool json = false;
  std::string format = "text";
  std::string color = "auto";
  std::string catalog_dir;
  std::string svg_file;  // --svg FILE (plan and fit)
};

// What a command leaves for run() to do once it has succeeded: stdout, the
// warning lines for stderr, and files to write (--svg) or append to
// ($GITHUB_STEP_SUMMARY). Nothing is written when the command fails.
struct Runtime {
  const Environment& env;
  std::string out;
  std::vector<std::string> warnings;
  struct FileOut {
    std::filesystem::path path;
    std::string text;
    bool append = false;
  };
  std::vector<FileOut> files;
};

// One registered subcommand: its CLI11 app and what runs when it was parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int(Runtime&)> run;
};
// The registered subcommands. Building every option of every subcommand
// costs more than planning (CLI11 checks each new option against the
// others), so only the command that runs is built in full; the others get
// their name and summary, for --help and for telling a command from a
// MODEL.
class Commands {
 public:
  // `only`: the subcommand to build in full; nullopt: all of them; "": none.
  // `given`: the option names on the command line; the setup options
  // (option_rows(), most of a command's options) are registered only when
  // named there. nullopt: every option (help, docs, did-you-mean).
  explicit Commands(
      std::optional<std::string> only,
      std::optional<std::vector<std::string>> given = std::nullopt)
      : m_only(std::move(only)), m_given(std::move(given)) {}

  // The subcommand `name`; nullptr when it is not built in full (the caller
  // registers nothing more).
  CLI::App* add(CLI::App& root, const std::string& name,
                const std::string& summary) {
    CLI::App* app = root.add_subcommand(name, summary);
    return !m_only || *m_only == name ? app : nullptr;
  }
  // Whether the setup option `flag` is registered.
  bool wants(std::string_view flag) const {
    return !m_given ||
           std::find(m_given->begin(), m_given->end(), flag) != m_given->end();
  }
  bool complete() const { return !m_given; }
  void push_back(Command command) { m_list.push_back(std::move(command)); }
  auto begin() const { return m_list.begin(); }
  auto end() const { return m_list.end(); }

 private:
  std::optional<std::string> m_only;
  std::optional<std::vector<std::string>> m_given;
  std::vector<Command> m_list;
};

// Each file registers its subcommands (the options live in the closure).
void add_plan_commands(CLI::App& root, Commands& commands);  // plan fit models
                                                             // gpus
void add_check_command(CLI::App& root, Commands& commands);
void add_diagnose_command(CLI::App& root, Commands& commands);

// vLLM's own flag spellings for plan and fit (`--tensor-parallel-size 4`,
// `--gpu-memory-utilization=0.8`, `--dtype bfloat16`) rewritten to oomplan's
// before CLI11 parses `args` (args[0] is the subcommand; other subcommands
// pass unchanged). Without --engine vllm a vLLM-only spelling is an Error
// that says to add it.
std::vector<std::string> vllm_spellings(CLI::App& root,
                                        std::vector<std::string> args);

// Judges the option words of `args` from `first` on against `command`'s
// options before CLI11 reads them: an unknown option is an Error naming each,
// in the order given, with the nearest known name; `--opt=` or `--opt ""`
// with nothing in it is an Error naming the option (CLI11 would take the
// next word as its value, or an empty file name).
void check_words(const CLI::App& command, const std::vector<std::string>& args,
                 std::size_t first);
// The subcommand (or "help") `word` is a near miss of, if any.
std::optional<std::string> command_typo(const CLI::App& root,
                                        std::string_view word);

// --- Options.

// A flag that is on or off: its value, if given, is judged by parse_flag
// before CLI11 reads it into `on` (CLI11 2.1.2 takes --json=256 as on,
// --json=-1 as off and --json=abc as "Could not convert").
CLI::Option* add_switch(CLI::App& app, const std::string& flag, bool& on,
                        const std::string& help);

// One CLI11 option per row of the option table, in its help group.
void add_setup_options(CLI::App& app, SetupOptions& o,
                       const Commands& commands);
// The setup the command line asks for: each given option parsed by its row.
Setup read_setup(const SetupOptions& o);
// The setup options given on the command line, as (flag, value) in table
// order ("" for a flag), for callers that layer them over a file's options.
std::vector<std::pair<std::string, std::string>> given_setup_options(
    const SetupOptions& o);

struct OutputChoices {
  bool svg = false;         // --format svg and --svg FILE
  bool catalog = true;      // --catalog DIR
  bool prometheus = false;  // --format prometheus (plan and check)
};
// --json, --format, --color, --catalog (and --svg).
void add_output_options(CLI::App& app, OutputOptions& o,
                        OutputChoices choices = {});
Format output_format(const OutputOptions& o, const CLI::App& app);
// --color auto|always|never; auto: standard output is a terminal, NO_COLOR
// is unset or empty (no-color.org) and TERM is not "dumb".
bool use_color(const OutputOptions& o, const Environment& env);

// Renders one result in the --format asked for; only that one is built.
// `svg` is used for Format::svg and for --svg FILE.
template <typename Text, typename Json, typename Markdown, typename Svg>
void render_into(Runtime& rt, const OutputOptions& o, Format format, Text text,
                 Json json, Markdown markdown, Svg svg) {
  switch (format) {
    case Format::json:
      rt.out = json();
      break;
    case Format::markdown:
      rt.out = inert_text(markdown(), false);
      break;
    case Format::svg:
      rt.out = svg();
      break;
    case Format::prometheus:  // plan and check render it themselves
    case Format::text:
      // Controls escaped at the edge, for a terminal or a PR comment
      // (util/text.hpp); the text report keeps its colours.
      rt.out = inert_text(text(), use_color(o, rt.env));
      break;
  }
  if (!o.svg_file.empty()) {
    rt.files.push_back({o.svg_file, format == Format::svg ? rt.out : svg()});
  }
}

// --- Files: the CLI is the only place that reads them.

// The built-in catalog merged with --catalog DIR's *.json files (sorted).
Catalog load_catalog(const std::string& dir, Runtime& rt);

// MODEL resolved offline (models.cpp; docs/models.md, "How a name is
// resolved"): a path to a config.json or to a folder holding one (a local path
// wins), the catalog by name, alias or HF id, the Hugging Face cache, then a
// single catalog model the name mirrors under another org. Throws Error with
// the closest catalog names when nothing resolves it.
struct LoadedModel {
  Model imported;
  const Model* model = nullptr;
  ModelOrigin origin;
};
void load_model(const Catalog& catalog, const std::string& arg,
                const Environment& env, LoadedModel& loaded);

// The Hugging Face hub cache folder `env` names (Environment's order), or
// nullopt when it names none.
std::optional<std::filesystem::path> hub_cache_folder(const Environment& env);

// --gpus NxNAME or an instance: the card and its count (Error otherwise).
GpuSpec counted_gpus(const Catalog& catalog, const std::string& text);

// An instance's host RAM and on-demand price per GPU-hour
// (models/instances.json cites each figure) fill `setup`'s --host-ram and
// --price when the user states neither; NxNAME states none.
void apply_instance(const GpuSpec& spec, Setup& setup);

// The catalog's cheapest on-demand price of one GPU-hour of each of
// `catalog.gpus`, in order (nullopt where no instance lists one).
std::vector<std::optional<double>> card_prices(const Catalog& catalog);

}  // namespace oomplan::cli
