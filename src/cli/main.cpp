#include "cli/cli.hpp"

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  oomplan::cli::Environment env;
  env.out_is_terminal = isatty(STDOUT_FILENO) == 1;
  env.no_color = variable("NO_COLOR");
  env.term = variable("TERM");
  env.step_summary = variable("GITHUB_STEP_SUMMARY");
  env.in = &std::cin;
  return oomplan::cli::run(args, std::cout, std::cerr, env);
}
