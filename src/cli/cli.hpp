#pragma once

// The command line: CLI11 wiring, the default subcommand, file reading, colour
// and exit codes. The whole program minus the process: main() only calls run().
//
//   oomplan MODEL [options]        = oomplan plan MODEL [options]
//   oomplan plan MODEL [options]   one plan (--gpus NxNAME) or, without --gpus,
//                                  the fewest GPUs of each common type
//   oomplan fit MODEL [options]    search for the cheapest setups that fit
//   oomplan models | oomplan gpus  the catalog
//
// Output is assembled in memory and written only on success, so an error
// leaves stdout empty and puts exactly one line on stderr.

#include <iosfwd>
#include <string>
#include <vector>

namespace oomplan::cli {

inline constexpr int k_exit_fits = 0;
inline constexpr int k_exit_does_not_fit = 1;
inline constexpr int k_exit_bad_input = 2;
inline constexpr int k_exit_internal_error = 3;  // a bug: no input reaches it

// Runs oomplan with `args` (without the program name), writing to `out` and
// `err`. `out_is_terminal` enables colour unless NO_COLOR is set (checked by
// the caller, `no_color`). Returns the exit code (k_exit_*).
int run(const std::vector<std::string>& args, std::ostream& out,
        std::ostream& err, bool out_is_terminal = false, bool no_color = false);

}  // namespace oomplan::cli
