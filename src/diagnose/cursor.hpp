#pragma once

// Private to diagnose: reading a normalized window of a log. The characters,
// the sizes as printed, and the Cursor every grammar moves forward with.

#include "oomplan/util/units.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace oomplan::diag {

inline constexpr std::size_t k_npos = std::string_view::npos;
// Sizes saturate here (1 EiB, beyond any device) so arithmetic on them
// cannot overflow.
inline constexpr Bytes k_max_size = Bytes{1} << 60;

// --- characters --------------------------------------------------------------

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
inline bool is_break(char c) {
  return c == '\n' || c == '\r';
}
inline char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline bool starts_with_ci(std::string_view text, std::size_t pos,
                           std::string_view lit) {
  if (pos > text.size() || text.size() - pos < lit.size()) {
    return false;
  }
  for (std::size_t i = 0; i < lit.size(); ++i) {
    if (lower(text[pos + i]) != lower(lit[i])) {
      return false;
    }
  }
  return true;
}

inline bool starts_with_at(std::string_view text, std::size_t pos,
                           std::string_view lit) {
  return pos <= text.size() && text.size() - pos >= lit.size() &&
         text.compare(pos, lit.size(), lit) == 0;
}

// `lit` ends exactly before `pos` (case-insensitive).
inline bool ends_before_ci(std::string_view text, std::size_t pos,
                           std::string_view lit) {
  return pos >= lit.size() && starts_with_ci(text, pos - lit.size(), lit);
}

// --- sizes -------------------------------------------------------------------

// Bytes per unit as printed; 0 for an unknown unit. Every tool in scope that
// prints "KB"/"MB"/"GB" or a bare "K"/"M"/"G" means 2^10/2^20/2^30 (see the
// sources in each grammar's file), so they share the binary multipliers.
Bytes unit_bytes(std::string_view unit);

// A decimal as printed: mantissa / 10^decimals.
struct Decimal {
  std::int64_t mantissa = 0;
  int decimals = 0;
  // More than 18 significant integer digits: beyond any size or count a
  // tool prints, read as "too large" (to_bytes saturates), never as its
  // first 18 digits.
  bool huge = false;
  double value() const {
    double scale = 1;
    for (int i = 0; i < decimals; ++i) {
      scale *= 10;
    }
    return static_cast<double>(mantissa) / scale;
  }
};

// mantissa x unit / 10^decimals rounded to the byte, saturating at
// k_max_size: exact integer arithmetic (the printed figure, not a binary
// approximation of it) for up to 6 decimals and units up to TiB, which
// covers every figure the engines print.
Bytes to_bytes(Decimal d, Bytes unit);

// --- the cursor -------------------------------------------------------------

// Moves forward through a window. Literals match whitespace-insensitively
// (a space in the literal is optional, line breaks and spaces in the text are
// skipped anywhere), so wrapped lines, mid-word breaks from a log collector
// and reflowed paragraphs read like the original. A failed match leaves the
// position unchanged.
class Cursor {
 public:
  Cursor(std::string_view text, std::size_t pos) : m_text(text), m_pos(pos) {}

  std::size_t pos() const { return m_pos; }
  std::string_view text() const { return m_text; }
  void set(std::size_t pos) { m_pos = pos; }
  bool at_end() const { return skip_ws(m_pos) >= m_text.size(); }
  // Only spaces, then a line break or the end.
  bool at_line_end() const {
    std::size_t p = m_pos;
    while (p < m_text.size() && (m_text[p] == ' ' || m_text[p] == '\t')) {
      ++p;
    }
    return p >= m_text.size() || is_break(m_text[p]);
  }
  char peek() const {
    const std::size_t p = skip_ws(m_pos);
    return p < m_text.size() ? m_text[p] : '\0';
  }

  bool lit(std::string_view s) {
    const std::size_t end = match(m_pos, s);
    if (end == k_npos) {
      return false;
    }
    m_pos = end;
    return true;
  }
  bool peek_lit(std::string_view s) const { return match(m_pos, s) != k_npos; }

  // Moves past the next occurrence of `s` within `max` characters.
  bool skip_past(std::string_view s, std::size_t max) {
    const std::size_t limit = std::min(m_text.size(), m_pos + max);
    for (std::size_t p = m_pos; p < limit; ++p) {
      const std::size_t end = match(p, s);
      if (end != k_npos) {
        m_pos = end;
        return true;
      }
    }
    return false;
  }

  // Digits with optional thousands commas and decimals. A number broken by a
  // line break ("4.2\n6") is joined when `join`.
  std::optional<Decimal> number(bool join) {
    std::size_t p = skip_ws(m_pos);
    Decimal d;
    bool any = false;
    bool dot = false;
    int int_digits = 0;
    while (p < m_text.size()) {
      const char c = m_text[p];
      if (is_digit(c)) {
        any = true;
        if (!dot && d.mantissa == 0 && c == '0') {
          // A leading zero ("0000012 MiB") is no significant digit.
        } else if (int_digits + d.decimals < 18) {
          d.mantissa = d.mantissa * 10 + (c - '0');
          if (dot) {
            ++d.decimals;
          } else {
            ++int_digits;
          }
        } else if (!dot) {
          d.huge = true;  // further decimals only lose precision
        }
        ++p;
      } else if (c == '.' && !dot && p + 1 < m_text.size() &&
                 (is_digit(m_text[p + 1]) ||
                  (join && is_break(m_text[p + 1]) && p + 2 < m_text.size() &&
                   is_digit(m_text[p + 2])))) {
        dot = true;
        p += is_digit(m_text[p + 1]) ? std::size_t{1} : std::size_t{2};
      } else if ((c == ',' && !dot && any && p + 3 < m_text.size() &&
                  is_digit(m_text[p + 1]) && is_digit(m_text[p + 2]) &&
                  is_digit(m_text[p + 3]) &&
                  (p + 4 >= m_text.size() || !is_digit(m_text[p + 4]))) ||
                 (join && any && is_break(c) && p + 1 < m_text.size() &&
                  (is_digit(m_text[p + 1]) || m_text[p + 1] == '.'))) {
        ++p;  // a thousands separator ("114,432 tokens") or a line break
      } else {
        break;
      }
    }
    if (!any) {
      return std::nullopt;
    }
    m_pos = p;
    return d;
  }

  // Plain digits, no separators or decimals: a dimension of TensorFlow's
  // "shape[128,128,109,109]", where a comma separates numbers. Saturates.
  std::optional<std::int64_t> digits() {
    std::size_t p = skip_ws(m_pos);
    std::int64_t v = 0;
    const std::size_t first = p;
    for (; p < m_text.size() && is_digit(m_text[p]); ++p) {
      const int d = m_text[p] - '0';
      constexpr std::int64_t k_max = std::numeric_limits<std::int64_t>::max();
      v = v > (k_max - d) / 10 ? k_max : v * 10 + d;
    }
    if (p == first) {
      return std::nullopt;
    }
    m_pos = p;
    return v;
  }

  std::optional<std::int64_t> integer() {
    const std::size_t save = m_pos;
    for (const bool join : {true, false}) {
      m_pos = save;
      const auto d = number(join);
      if (d && d->decimals == 0 && !d->huge) {
        const char next = m_pos < m_text.size() ? m_text[m_pos] : '\0';
        if (!is_digit(next) && !is_alpha(next)) {
          return d->mantissa;
        }
      }
    }
    m_pos = save;
    return std::nullopt;
  }

  std::optional<double> decimal() {
    const std::size_t save = m_pos;
    const auto d = number(false);
    if (!d) {
      m_pos = save;
      return std::nullopt;
    }
    return d->value();
  }

  // A size: a number and its unit ("20.00 MiB", "0 bytes", "2.99GiB",
  // "21.95G"). Tries the line-joined number first, then the plain one.
  std::optional<Bytes> size() {
    const std::size_t save = m_pos;
    for (const bool join : {true, false}) {
      m_pos = save;
      const auto d = number(join);
      if (!d) {
        break;
      }
      const Bytes unit = read_unit();
      if (unit > 0) {
        return to_bytes(*d, unit);
      }
    }
    m_pos = save;
    return std::nullopt;
  }

  // Unit letters right after a number ("GiB", "bytes", "G"); 0 if none.
  Bytes unit() { return read_unit(); }

  // The word at the position (letters, digits, '_', ':'), without moving.
  std::string_view word() const {
    const std::size_t p = skip_ws(m_pos);
    std::size_t e = p;
    while (e < m_text.size() && (is_alpha(m_text[e]) || is_digit(m_text[e]) ||
                                 m_text[e] == '_' || m_text[e] == ':')) {
      ++e;
    }
    return m_text.substr(p, e - p);
  }
  void skip_word() {
    const std::size_t p = skip_ws(m_pos);
    m_pos = p + word().size();
  }

 private:
  std::size_t skip_ws(std::size_t p) const {
    while (p < m_text.size() && is_space(m_text[p])) {
      ++p;
    }
    return p;
  }

  std::size_t match(std::size_t p, std::string_view s) const {
    for (const char c : s) {
      if (c == ' ') {
        continue;
      }
      p = skip_ws(p);
      if (p >= m_text.size() || lower(m_text[p]) != lower(c)) {
        return k_npos;
      }
      ++p;
    }
    return p;
  }

  // Unit letters right after a number (spaces allowed, not a line break
  // then a new word: "12.09\nGiB" still reads as one size).
  Bytes read_unit() {
    const std::size_t p = skip_ws(m_pos);
    std::size_t e = p;
    while (e < m_text.size() && is_alpha(m_text[e]) && e - p < 6) {
      ++e;
    }
    if (e == p || (e < m_text.size() && is_alpha(m_text[e]))) {
      return 0;
    }
    // A unit broken by a line wrap ("Gi\nB", "G\niB") reads whole first.
    if (e < m_text.size() && is_break(m_text[e])) {
      std::string joined(m_text.substr(p, e - p));
      std::size_t f = e + 1;
      while (f < m_text.size() && is_alpha(m_text[f]) && joined.size() < 6) {
        joined.push_back(m_text[f]);
        ++f;
      }
      if (f >= m_text.size() || !is_alpha(m_text[f])) {
        if (const Bytes unit = unit_bytes(joined); unit > 0) {
          m_pos = f;
          return unit;
        }
      }
    }
    if (const Bytes unit = unit_bytes(m_text.substr(p, e - p)); unit > 0) {
      m_pos = e;
      return unit;
    }
    return 0;
  }

  std::string_view m_text;
  std::size_t m_pos;
};

// --- finding things in a window ---------------------------------------------

// Start of the line holding `pos` in the window text.
std::size_t line_begin(std::string_view t, std::size_t pos);
// End of the line holding `pos` (its line break, or the end).
std::size_t line_finish(std::string_view t, std::size_t pos);
// Start of the identifier-like word holding `pos`.
std::size_t word_begin(std::string_view t, std::size_t pos);
// Exact (case-sensitive) search for `s` in t[from, to).
std::size_t find_in(std::string_view t, std::string_view s, std::size_t from,
                    std::size_t to);
// Case-insensitive search for `s` in t[from, to).
std::size_t find_ci(std::string_view t, std::string_view s, std::size_t from,
                    std::size_t to);
// Last exact occurrence of `s` starting in [from, to).
std::size_t rfind_in(std::string_view t, std::string_view s, std::size_t from,
                     std::size_t to);
// Whitespace-insensitive, case-insensitive search backwards for the start of
// `s` in [from, to).
std::size_t rfind_ws(std::string_view t, std::string_view s, std::size_t from,
                     std::size_t to);
// Whether `line` names a GPU runtime ("CUDA", "GPU", "device", ...).
bool contains_gpu_word(std::string_view line);

}  // namespace oomplan::diag
