#pragma once

// Test helpers: the shipped catalog, in-process CLI runs and runs of the built
// binary.

#include "cli/cli.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/plan/plan.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace oomplan::test {

// The bytes of a file; nullopt when it cannot be opened.
inline std::optional<std::string> read_file_text(
    const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The same for a file the test needs: fails the test when it is missing.
inline std::string read_required_file(const std::filesystem::path& path) {
  auto text = read_file_text(path);
  INFO(path.string());
  REQUIRE(text.has_value());
  return *text;
}

// The shipped catalog, parsed once for the whole test run.
inline const Catalog& catalog() {
  static const Catalog k_catalog = builtin_catalog();
  return k_catalog;
}

// Llama-3-70B by hand (catalog_facts.md §1a): h 8192, 80 layers, 64 heads,
// 8 KV heads, head_dim 128, I 28672, vocab 128256, untied embeddings:
// 70,553,706,496 parameters.
inline Model llama3_70b() {
  Model m;
  m.name = "llama-3-70b";
  m.model_type = "llama";
  m.hidden_size = 8192;
  m.num_layers = 80;
  m.num_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 28672;
  m.vocab_size = 128256;
  m.max_position_embeddings = 8192;
  return m;
}

// Llama-2-7B by hand: h 4096, 32 layers, 32 heads (MHA), I 11008, vocab 32000:
// 6,738,415,616 parameters.
inline Model llama2_7b() {
  Model m = llama3_70b();
  m.name = "llama-2-7b";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 32;
  m.intermediate_size = 11008;
  m.vocab_size = 32000;
  m.max_position_embeddings = 4096;
  return m;
}

// The budget of `setup` through the plan pipeline; REQUIRES that check()
// finds no problem.
inline Budget budget(const Model& model, const Gpu& gpu, const Setup& setup) {
  const Pricing pricing = price(model, gpu, setup);
  INFO(pricing.problem);
  REQUIRE(pricing.priced.has_value());
  return pricing.priced->budget;
}

struct CliResult {
  int code = 0;
  std::string out;
  std::string err;
};

// The whitespace-separated words of `line` (a fix's args, unquoted).
inline std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string word;
  while (in >> word) {
    out.push_back(word);
  }
  return out;
}

// Runs the CLI in-process, as `oomplan ARGS...` would.
inline CliResult run_cli(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

// Runs the built binary through the shell: `command` is appended to its path
// (quote arguments yourself). stdout and the exit code are captured; stderr is
// folded into `err` via a temp file.
inline CliResult run_binary(const std::string& command) {
  std::string err_path = "/tmp/oomplan_test_XXXXXX";
  const int fd = mkstemp(err_path.data());
  if (fd >= 0) {
    close(fd);
  }
  // No Hugging Face cache: MODEL resolves as in-process (Environment{}),
  // whatever the machine's HOME holds.
  const std::string line =
      "HF_HUB_CACHE= HUGGINGFACE_HUB_CACHE= HF_HOME= XDG_CACHE_HOME= HOME= " +
      std::string(OOMPLAN_BINARY) + " " + command + " 2>" + err_path;
  CliResult result;
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) {
    result.code = -1;
    return result;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* f = std::fopen(err_path.c_str(), "r")) {
    while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) {
      result.err.append(buffer.data(), n);
    }
    std::fclose(f);
  }
  std::remove(err_path.c_str());
  return result;
}

}  // namespace oomplan::test
