// libFuzzer target for the launch-config readers (launch.hpp).
//
// The first byte picks the file name the readers see (which steers format
// detection: .yaml, .json, .sh, none); the rest is the file. Files the input
// names (deepspeed:, fsdp_config:) are served the same bytes, so nested
// reads are fuzzed too. Any exception but oomplan::Error is a bug.
//
// Build and run (docs/development.md "Fuzzing"):
//   CXX=clang++ cmake -B build-fuzz -DOOMPLAN_FUZZ=ON -DOOMPLAN_TESTS=OFF
//   cmake --build build-fuzz --target oomplan_fuzz
//   build-fuzz/fuzz_launch -max_len=65536 tests/fuzz/corpus/launch

#include "oomplan/launch/launch.hpp"
#include "oomplan/util/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) {
    return 0;
  }
  static const char* const k_names[] = {"config.yaml", "ds_config.json",
                                        "serve.sh", "recipe"};
  const std::string origin = k_names[data[0] % 4];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const oomplan::FileLoader load =
      [&text](const std::string&,
              const std::string&) -> std::optional<std::string> {
    return text;
  };
  try {
    (void)oomplan::read_launch_files({{origin, text}}, load);
  } catch (const oomplan::Error&) {
  }
  try {
    const auto eq = text.find('=');
    (void)oomplan::translate_vllm_flag(
        text.substr(0, eq), eq == std::string::npos ? "" : text.substr(eq + 1));
  } catch (const oomplan::Error&) {
  }
  return 0;
}
