// `oomplan diagnose LOG [MODEL --gpus ...]`: an out-of-memory log explained
// (issue 11). Registered in a later change.

#include "cli/cli_internal.hpp"

namespace oomplan::cli {

void add_diagnose_command(CLI::App& root, Commands& commands) {
  (void)root;
  (void)commands;
}

}  // namespace oomplan::cli
