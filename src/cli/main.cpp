#include "cli/cli.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

// Why standard input cannot be read as a log, or nullopt: closed (`<&-`)
// or a folder (`< /`) read as an empty stream through std::cin.
std::optional<std::string> stdin_problem() {
  struct stat st {};
  if (fstat(STDIN_FILENO, &st) != 0) {
    return std::string("standard input is closed (") + std::strerror(errno) +
           ")";
  }
  if (S_ISDIR(st.st_mode)) {
    return std::string("standard input is a folder");
  }
  return std::nullopt;
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
  env.in_problem = stdin_problem();
  env.hf_hub_cache = variable("HF_HUB_CACHE");
  env.huggingface_hub_cache = variable("HUGGINGFACE_HUB_CACHE");
  env.hf_home = variable("HF_HOME");
  env.xdg_cache_home = variable("XDG_CACHE_HOME");
  env.home = variable("HOME");
  return oomplan::cli::run(args, std::cout, std::cerr, env);
}
