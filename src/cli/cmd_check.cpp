// `oomplan check FILE...`: the launch configs a team runs, each planned
// through the plan pipeline (issue 10). Registered in a later change.

#include "cli/cli_internal.hpp"

namespace oomplan::cli {

void add_check_command(CLI::App& root, Commands& commands) {
  (void)root;
  (void)commands;
}

}  // namespace oomplan::cli
