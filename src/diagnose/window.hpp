#pragma once

// Private to diagnose: the normalized window a grammar reads, and how it is
// built from the raw log bytes around a candidate.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan::diag {

// A window of the log with prefixes removed at each line start, ANSI colour
// codes and HTML escapes decoded, tabs and control characters made spaces.
// Line breaks stay ('\n' counted as lines, a lone '\r' not), so a message's
// line number is the window's plus the '\n' before it. map[i] is the raw
// offset (from the window start) of the byte that produced text[i].
struct Window {
  std::string text;
  std::vector<std::uint32_t> map;
  std::size_t raw_size = 0;
  // For each line whose prefix was removed: the text offset where the line
  // starts and the raw range of its prefix.
  struct Prefix {
    std::size_t text_line = 0;
    std::size_t raw_begin = 0;
    std::size_t raw_end = 0;
  };
  std::vector<Prefix> prefixes;

  // normalize() sizes text and map to the raw size first (the text never
  // grows: prefixes and escapes only shrink it) and trims them at the end.
  std::size_t length = 0;
  void push(char c, std::size_t raw) {
    text[length] = c;
    map[length] = static_cast<std::uint32_t>(raw);
    ++length;
  }
  // `n` ordinary characters from raw offset `raw` on, at once (local
  // pointers: the byte stores cannot alias `length` or the buffers).
  void push_run(const char* from, std::size_t n, std::size_t raw) {
    char* const out = text.data() + length;
    std::uint32_t* const to = map.data() + length;
    std::memcpy(out, from, n);
    for (std::size_t k = 0; k < n; ++k) {
      to[k] = static_cast<std::uint32_t>(raw + k);
    }
    length += n;
  }
  std::size_t raw_offset(std::size_t i) const {
    return i < length ? map[i] : raw_size;
  }
  std::string_view view() const { return {text.data(), length}; }
};

// Builds the normalized window of raw[0, raw.size()); `at_line_start` when
// raw[0] begins a line (its prefix is then removed too).
void normalize(std::string_view raw, bool at_line_start, Window& w);

// The index after the line prefixes at `i` of `s` (timestamps, log levels,
// "[rank0]:", worker tags, container and host columns, ANSI colours), or `i`
// when there is none.
std::size_t skip_line_prefix(std::string_view s, std::size_t i);

}  // namespace oomplan::diag
