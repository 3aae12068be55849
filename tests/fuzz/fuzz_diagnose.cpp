// libFuzzer target for the OOM-log scanner (`oomplan diagnose`).
//
// Any input must scan without a crash, a sanitizer report or unbounded
// memory, and these invariants must hold:
// - feeding the input in chunks gives exactly the one-shot result;
// - the JSON is valid (every string valid UTF-8) and parses back;
// - count >= kept messages, kept <= k_max_messages, lines are in range and
//   increasing;
// - text, JSON and Markdown render.
// Seeds: tests/fuzz/corpus/diagnose/ (real messages from tests/data/oom).

#include "oomplan/diagnose/diagnose.hpp"
#include "oomplan/render/diagnose.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view log(reinterpret_cast<const char*>(data), size);
  const oomplan::Diagnosis whole = oomplan::diagnose(log);

  // The same bytes in chunks whose size the input picks.
  oomplan::LogScanner scanner;
  const std::size_t step = size > 0 ? 1 + data[0] % 97 : 1;
  for (std::size_t i = 0; i < size; i += step) {
    scanner.feed(log.substr(i, step));
  }
  const oomplan::Diagnosis chunked = scanner.finish();

  const std::string json = oomplan::render_diagnosis_json(whole);
  if (json != oomplan::render_diagnosis_json(chunked)) {
    __builtin_trap();
  }
  if (!nlohmann::json::accept(json)) {
    __builtin_trap();
  }
  if (whole.count < static_cast<std::int64_t>(whole.messages.size()) ||
      whole.messages.size() > oomplan::k_max_messages) {
    __builtin_trap();
  }
  std::int64_t previous = 0;
  for (const oomplan::OomMessage& m : whole.messages) {
    if (m.line < 1 || m.line > whole.lines || m.line < previous) {
      __builtin_trap();
    }
    previous = m.line;
  }
  (void)oomplan::render_diagnosis_text(whole, true);
  (void)oomplan::render_diagnosis_markdown(whole);
  return 0;
}
