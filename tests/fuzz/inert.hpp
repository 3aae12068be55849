#pragma once

// What "inert" means for oomplan's output, checked by the tests
// (tests/test_cli_output.cpp) and the renderer fuzz target (fuzz_render):
// - text: no byte a terminal acts on but newline, and ESC only as an SGR
//   colour when colour is on;
// - Markdown: outside code spans and backslash escapes, nothing GitHub turns
//   into HTML, a mention, a link or a code span.

#include <cstddef>
#include <string>

namespace oomplan::inert {

// The control bytes of `out` ("" when none): C0 but newline, DEL, C1 (UTF-8
// C2 80-9F), the bidi controls (U+061C, U+200E/F, U+202A-E, U+2066-9); with
// `colour`, ESC [ digits/; m is allowed.
inline std::string controls_in(const std::string& out, bool colour) {
  std::string found;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto c = static_cast<unsigned char>(out[i]);
    const auto next = [&](std::size_t k) -> unsigned {
      return i + k < out.size() ? static_cast<unsigned char>(out[i + k]) : 0U;
    };
    if (c == 0x1b && colour && next(1) == '[') {
      std::size_t k = i + 2;
      while (k < out.size() &&
             ((out[k] >= '0' && out[k] <= '9') || out[k] == ';')) {
        ++k;
      }
      if (k < out.size() && out[k] == 'm') {
        i = k;
        continue;
      }
    }
    const bool c0 = (c < 0x20 && c != '\n') || c == 0x7f;
    const bool c1 = c == 0xc2 && next(1) >= 0x80 && next(1) <= 0x9f;
    const bool bidi =
        (c == 0xe2 && next(1) == 0x80 &&
         (next(2) == 0x8e || next(2) == 0x8f ||
          (next(2) >= 0xaa && next(2) <= 0xae))) ||
        (c == 0xe2 && next(1) == 0x81 && next(2) >= 0xa6 && next(2) <= 0xa9) ||
        (c == 0xd8 && next(1) == 0x9c);
    if (c0 || c1 || bidi) {
      found += "byte " + std::to_string(c) + " at " + std::to_string(i) + "; ";
    }
  }
  return found;
}

// `md` as GitHub reads its text: a code span (a run of N backticks to the
// next run of exactly N) becomes one space, as it splits the text around it
// into separate nodes that no autolink joins; a backslash-escaped character
// stays, as it is shown (a space for the brackets and '<' it disarms).
inline std::string markdown_text(const std::string& md) {
  std::string out;
  std::size_t i = 0;
  while (i < md.size()) {
    if (md[i] == '\\' && i + 1 < md.size()) {
      // Escaped, a bracket or '<' opens or closes nothing.
      const char c = md[i + 1];
      out += c == '[' || c == ']' || c == '<' ? ' ' : c;
      i += 2;
      continue;
    }
    if (md[i] != '`') {
      out += md[i++];
      continue;
    }
    std::size_t n = 0;
    while (i + n < md.size() && md[i + n] == '`') {
      ++n;
    }
    std::size_t close = i + n;
    bool found = false;
    while (close < md.size()) {
      if (md[close] != '`') {
        ++close;
        continue;
      }
      std::size_t m = 0;
      while (close + m < md.size() && md[close + m] == '`') {
        ++m;
      }
      if (m == n) {
        found = true;
        break;
      }
      close += m;
    }
    if (!found) {
      out.append(n, '`');  // an unmatched run is literal text
      i += n;
      continue;
    }
    out += ' ';
    i = close + n;
  }
  return out;
}

// What GitHub would act on in Markdown text ("" when nothing): a tag or
// comment, a mention or e-mail link, a URL autolink, an inline link.
inline std::string markdown_hazards(const std::string& md) {
  const std::string text = markdown_text(md);
  std::string found;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '<') {
      found += "'<' at " + std::to_string(i) + "; ";
    } else if (c == '@' && next != '\0' && next != ' ') {
      found += "'@' at " + std::to_string(i) + "; ";
    } else if (text.compare(i, 3, "://") == 0) {
      found += "'://' at " + std::to_string(i) + "; ";
    } else if ((text.compare(i, 4, "www.") == 0 ||
                text.compare(i, 4, "WWW.") == 0)) {
      found += "'www.' at " + std::to_string(i) + "; ";
    } else if (c == ']' && next == '(') {
      found += "'](' at " + std::to_string(i) + "; ";
    }
  }
  return found;
}

}  // namespace oomplan::inert
