#include "cli/cli.hpp"

#include <cstdlib>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool no_color = std::getenv("NO_COLOR") != nullptr;
  return oomplan::cli::run(args, std::cout, std::cerr,
                           isatty(STDOUT_FILENO) == 1, no_color);
}
