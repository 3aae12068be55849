#pragma once

// The command line: CLI11 wiring, the default subcommand, file reading, colour
// and exit codes. The whole program minus the process: main() only calls run().
//
//   oomplan MODEL [options]        = oomplan plan MODEL [options]
//   oomplan plan MODEL [options]   one plan (--gpus NxNAME) or, without --gpus,
//                                  the fewest GPUs of each common type
//   oomplan fit MODEL [options]    search for the cheapest setups that fit
//   oomplan check FILE...          gate launch configs (CI)
//   oomplan diagnose LOG [MODEL]   explain an out-of-memory log
//   oomplan models | oomplan gpus  the catalog
//
// Output is assembled in memory and written only on success, so an error
// leaves stdout empty and puts exactly one line on stderr.

#include "oomplan/render/docs.hpp"

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace oomplan::cli {

inline constexpr int k_exit_fits = 0;
inline constexpr int k_exit_does_not_fit = 1;
inline constexpr int k_exit_bad_input = 2;
inline constexpr int k_exit_internal_error = 3;  // a bug: no input reaches it

// What run() reads from the process besides its arguments (main fills it;
// tests set it).
struct Environment {
  bool out_is_terminal = false;             // colour under --color auto
  std::optional<std::string> no_color;      // NO_COLOR (no-color.org)
  std::optional<std::string> term;          // TERM ("dumb": no colour)
  std::optional<std::string> step_summary;  // GITHUB_STEP_SUMMARY (check)
  std::istream* in = nullptr;               // standard input (diagnose -)
  // Why `in` cannot be read ("standard input is closed"), found before
  // reading: a closed or unreadable stream reads as an empty one.
  std::optional<std::string> in_problem;
  // The Hugging Face cache's variables, as huggingface_hub/constants.py reads
  // them: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else
  // XDG_CACHE_HOME/huggingface/hub, else HOME/.cache/huggingface/hub. All
  // unset (the tests' default): no cache is looked into.
  std::optional<std::string> hf_hub_cache;
  std::optional<std::string> huggingface_hub_cache;
  std::optional<std::string> hf_home;
  std::optional<std::string> xdg_cache_home;
  std::optional<std::string> home;
};

// Runs oomplan with `args` (without the program name), writing to `out` and
// `err`. Returns the exit code (k_exit_*).
int run(const std::vector<std::string>& args, std::ostream& out,
        std::ostream& err, const Environment& env = {});

// Every subcommand with its positionals and options, read from the CLI11
// wiring itself, so `--help`, the man page, the completions and the option
// reference of the docs/ pages print the same texts (oomplan_gen_docs).
std::vector<CommandDoc> command_docs();

}  // namespace oomplan::cli
