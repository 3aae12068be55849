#pragma once

// The man page, the bash, zsh and fish completions and the option
// reference of the docs/ pages, generated from a neutral description of the
// command line (CommandDoc) that cli::command_docs() reads from the CLI11
// wiring (src/cli), itself built from the option table
// (oomplan/setup/options.hpp). So `--help`, `man oomplan` and docs/plan.md
// print one text per option and command. The build runs
// src/tools/gen_docs.cpp to write the man page and the completions into the
// build tree for `cmake --install`; `oomplan_gen_docs --pages docs` rewrites
// the generated sections of the docs/ pages. Nobody writes them by hand.
// Pure: descriptions in, text out.

#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// One option of one command.
struct OptionDoc {
  std::string flag;          // "--seq"
  std::string value_name;    // "INT", "NAME", "DIR", "NxNAME"; empty: a flag
  std::string help;          // one line
  std::string default_text;  // as --help shows it; empty: none
  std::vector<std::string> choices;  // the valid values of a NAME option
  std::string group;                 // "Hardware", "Workload", ...
};

// One positional argument of a subcommand. The completions offer the
// catalog's model names (and files) for MODEL, files for the others.
struct PositionalDoc {
  std::string name;       // "MODEL", "FILE", "LOG"
  std::string help;       // one line
  bool required = true;   // diagnose's MODEL is optional: [MODEL]
  bool repeated = false;  // check's FILE takes one or more: FILE...
};

// One subcommand.
struct CommandDoc {
  std::string name;     // "plan"
  std::string summary;  // one line
  std::vector<OptionDoc> options;
  std::vector<PositionalDoc> positionals;
};

// A command's words after the program name as a synopsis shows them:
// "check FILE... [options]", "diagnose LOG [MODEL] [options]"; without the
// command's name when `named` is false (the default command: `oomplan MODEL
// [options]`).
std::string synopsis_text(const CommandDoc& command, bool named);

// The words the completions offer for values that come from the catalog.
struct CompletionWords {
  std::vector<std::string> models;     // MODEL: catalog names
  std::vector<std::string> gpus;       // --gpus NxNAME: card names
  std::vector<std::string> instances;  // --gpus: cloud instance names
};

// The man page's prose around the option lists.
struct ManPage {
  std::string program;  // "oomplan"
  std::string version;  // "0.1.0"
  std::string date;     // "2025-01-31" (given, so the output is reproducible)
  std::string summary;  // the NAME line after "oomplan - "
  std::vector<std::string> synopsis;      // lines after the program name
  std::vector<std::string> description;   // paragraphs
  std::vector<OptionDoc> global_options;  // --help, --version
  std::vector<std::pair<std::string, std::string>> exit_status;  // code, text
  std::vector<std::pair<std::string, std::string>> environment;  // name, text
  std::vector<std::pair<std::string, std::string>> files;        // path, text
  std::vector<std::pair<std::string, std::string>> examples;  // command, text
  std::vector<std::string> see_also;                          // "nvidia-smi(1)"
};

// A man(7) page: NAME, SYNOPSIS, DESCRIPTION, COMMANDS, OPTIONS (the first
// command's options by group; each later command's own options under its
// name), EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES, SEE ALSO. Text is
// escaped for roff (backslashes, leading dots and quotes, hyphens of flags).
std::string render_man_page(const std::vector<CommandDoc>& commands,
                            const ManPage& page);

// A bash completion script (complete -F) for `program`: subcommands, each
// command's options, their choices, directories for DIR, files for FILE,
// models and files for MODEL, NxNAME card specs and instances for --gpus.
// The first command is the default one (`oomplan MODEL` is `oomplan plan
// MODEL`). Needs bash 4 and nothing from the bash-completion package.
std::string render_bash_completion(const std::string& program,
                                   const std::vector<CommandDoc>& commands,
                                   const std::vector<OptionDoc>& globals,
                                   const CompletionWords& words);

// The same as a zsh completion function (#compdef, _arguments).
std::string render_zsh_completion(const std::string& program,
                                  const std::vector<CommandDoc>& commands,
                                  const std::vector<OptionDoc>& globals,
                                  const CompletionWords& words);

// The same as fish `complete` commands.
std::string render_fish_completion(const std::string& program,
                                   const std::vector<CommandDoc>& commands,
                                   const std::vector<OptionDoc>& globals,
                                   const CompletionWords& words);

// A command's reference for its docs/ page, in Markdown: its synopsis
// (both forms for the default command, the first), its summary, its
// positionals and one table of options per help group, in the order --help
// lists them, each with its value, default and help text.
std::string render_markdown_reference(const std::string& program,
                                      const std::vector<CommandDoc>& commands,
                                      const CommandDoc& command);

// The markers of a generated section of a docs/ page: a line
// "<!-- oomplan-options:begin NAME -->", the reference of command NAME, and a
// line "<!-- oomplan-options:end NAME -->".
inline constexpr std::string_view k_reference_begin =
    "<!-- oomplan-options:begin ";
inline constexpr std::string_view k_reference_end = "<!-- oomplan-options:end ";

// A docs/ page with each generated section rewritten from `commands`.
struct FilledPage {
  std::string text;
  std::vector<std::string> commands;  // the commands whose sections it holds
  std::vector<std::string> problems;  // an unknown command, a missing end
};
FilledPage fill_reference_sections(std::string_view page,
                                   const std::string& program,
                                   const std::vector<CommandDoc>& commands);

// --help and --version.
std::vector<OptionDoc> oomplan_global_options();

// oomplan's man page prose; `version` and `date` as given.
ManPage oomplan_man_page(const std::string& version, const std::string& date);

}  // namespace oomplan
