#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace oomplan {
namespace {

// The length of the UTF-8 sequence starting at `s[i]` and its code point, or
// 0 when the bytes there are not well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i,
                          std::uint32_t& code) {
  const auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(s[k]));
  };
  const std::uint32_t lead = byte(i);
  std::size_t length = 0;
  std::uint32_t min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code = lead & 0x1fU;
    min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code = lead & 0x0fU;
    min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code = lead & 0x07U;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > s.size()) {
    return 0;
  }
  for (std::size_t k = 1; k < length; ++k) {
    const std::uint32_t next = byte(i + k);
    if ((next & 0xc0U) != 0x80U) {
      return 0;
    }
    code = (code << 6U) | (next & 0x3fU);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
    return 0;
  }
  return length;
}

}  // namespace

std::string escape_for_message(std::string_view text) {
  return escape_for_message(text, k_max_echo_bytes);
}

namespace {

// Bidirectional controls (Unicode UAX #9: ALM, LRM, RLM, the embeddings and
// overrides, the isolates): they reorder what a terminal or a browser shows
// (CVE-2021-42574, "Trojan Source").
bool is_bidi_control(std::uint32_t code) {
  return code == 0x061c || code == 0x200e || code == 0x200f ||
         (code >= 0x202a && code <= 0x202e) ||
         (code >= 0x2066 && code <= 0x2069);
}

// The length of the SGR sequence (ESC [ digits and ; m) at `text[i]`, or 0.
std::size_t sgr_length(std::string_view text, std::size_t i) {
  if (i + 2 >= text.size() || text[i + 1] != '[') {
    return 0;
  }
  for (std::size_t k = i + 2; k < text.size(); ++k) {
    const char c = text[k];
    if (c == 'm') {
      return k - i + 1;
    }
    if ((c < '0' || c > '9') && c != ';') {
      return 0;
    }
  }
  return 0;
}

struct EscapeRule {
  std::size_t max_bytes = std::string_view::npos;
  bool keep_newline = false;  // a report's lines
  bool keep_sgr = false;      // the colours the text renderer writes
};

std::string escape_controls(std::string_view text, const EscapeRule& rule) {
  std::string out;
  out.reserve(std::min(text.size(), rule.max_bytes) + 16);
  std::size_t i = 0;
  while (i < text.size()) {
    if (i >= rule.max_bytes) {
      fmt::format_to(std::back_inserter(out), "...({} more bytes)",
                     text.size() - i);
      break;
    }
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x80) {
      const std::size_t sgr =
          rule.keep_sgr && ch == 0x1b ? sgr_length(text, i) : 0;
      if (sgr > 0) {
        out.append(text.substr(i, sgr));
        i += sgr;
        continue;
      }
      if (ch == '\n') {
        out += rule.keep_newline ? "\n" : "\\n";
      } else if (ch == '\t') {
        out += "\\t";
      } else if (ch == '\r') {
        out += "\\r";
      } else if (ch < 0x20 || ch == 0x7f) {
        fmt::format_to(std::back_inserter(out), "\\x{:02x}", ch);
      } else {
        out += static_cast<char>(ch);
      }
      ++i;
      continue;
    }
    std::uint32_t code = 0;
    const std::size_t length = utf8_sequence(text, i, code);
    if (length == 0) {
      fmt::format_to(std::back_inserter(out), "\\x{:02x}", ch);
      ++i;
      continue;
    }
    // C1 controls (U+0080-U+009F, e.g. NEL) and the Unicode line and
    // paragraph separators break lines in some terminals and viewers.
    if (code <= 0x9f || code == 0x2028 || code == 0x2029 ||
        is_bidi_control(code)) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", code);
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace

std::string escape_for_message(std::string_view text, std::size_t max_bytes) {
  return escape_controls(text, {.max_bytes = max_bytes});
}

std::string inert_text(std::string_view text, bool keep_colour) {
  return escape_controls(text, {.keep_newline = true, .keep_sgr = keep_colour});
}

std::string shell_word(const std::string& word) {
  const bool safe =
      !word.empty() && word.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                           "XYZ0123456789-_./:@+,=") == std::string::npos;
  if (safe) {
    return word;
  }
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lo = [](char c) {
             return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
           };
           return lo(x) == lo(y);
         });
}

}  // namespace oomplan
