#pragma once

// The command line: CLI11 wiring, the default subcommand, file reading, colour
// and exit codes. The whole program minus the process: main() only calls run().

#include <iosfwd>
#include <string>
#include <vector>

namespace oomplan::cli {

inline constexpr int k_exit_fits = 0;
inline constexpr int k_exit_does_not_fit = 1;
inline constexpr int k_exit_bad_input = 2;

// Runs oomplan with `args` (without the program name), writing to `out` and
// `err`. `out_is_terminal` enables colour unless NO_COLOR is set (checked by
// the caller, `no_color`).
int run(const std::vector<std::string>& args, std::ostream& out,
        std::ostream& err, bool out_is_terminal = false, bool no_color = false);

}  // namespace oomplan::cli
