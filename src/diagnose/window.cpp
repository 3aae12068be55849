#include "diagnose/window.hpp"

#include "diagnose/cursor.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Normalizing a window. A line's prefixes are removed at every line start,
// up to 12 in a row; each matcher returns the index after the prefix it
// recognises, or k_npos. ANSI colour codes and HTML escapes are decoded
// anywhere, tabs and control characters become spaces; runs of ordinary
// bytes are copied 16 at a time.

namespace oomplan::diag {
namespace {

// Length of an ANSI escape at `i` (ESC [ params final, or the caret form
// "^[[" that copied terminal logs show); 0 when none.
std::size_t ansi_length(std::string_view raw, std::size_t i) {
  std::size_t j = 0;
  if (raw[i] == '\x1b' && i + 1 < raw.size() && raw[i + 1] == '[') {
    j = i + 2;
  } else if (raw[i] == '^' && starts_with_at(raw, i, "^[[")) {
    j = i + 3;
  } else {
    return 0;
  }
  const std::size_t limit = std::min(raw.size(), j + 16);
  while (j < limit && (is_digit(raw[j]) || raw[j] == ';' || raw[j] == '?')) {
    ++j;
  }
  if (j < limit && is_alpha(raw[j])) {
    return j + 1 - i;
  }
  return 0;
}

// A control character read as a space.
char printable(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f ? ' ' : c;
}

// Decodes an HTML character reference at `i` ("&lt;", "&#39;", "&#x27;");
// returns its length and the character, or 0.
std::size_t entity_length(std::string_view raw, std::size_t i, char& out) {
  struct Named {
    std::string_view name;
    char c;
  };
  static constexpr std::array<Named, 6> k_named{{{"&lt;", '<'},
                                                 {"&gt;", '>'},
                                                 {"&amp;", '&'},
                                                 {"&quot;", '"'},
                                                 {"&apos;", '\''},
                                                 {"&nbsp;", ' '}}};
  for (const Named& n : k_named) {
    if (starts_with_at(raw, i, n.name)) {
      out = n.c;
      return n.name.size();
    }
  }
  if (!starts_with_at(raw, i, "&#")) {
    return 0;
  }
  std::size_t j = i + 2;
  const bool hex = j < raw.size() && (raw[j] == 'x' || raw[j] == 'X');
  if (hex) {
    ++j;
  }
  int value = 0;
  const std::size_t start = j;
  while (j < raw.size() && j - start < 4) {
    const char c = raw[j];
    int digit = -1;
    if (is_digit(c)) {
      digit = c - '0';
    } else if (hex && lower(c) >= 'a' && lower(c) <= 'f') {
      digit = lower(c) - 'a' + 10;
    }
    if (digit < 0) {
      break;
    }
    value = value * (hex ? 16 : 10) + digit;
    ++j;
  }
  if (j == start || j >= raw.size() || raw[j] != ';' || value <= 0 ||
      value >= 128) {
    return 0;
  }
  out = static_cast<char>(value);
  return j + 1 - i;
}

// --- line prefixes -----------------------------------------------------------
// Each matcher returns the index after the prefix it recognises at `i`, or
// k_npos. They run repeatedly at every line start of a window.

std::size_t digits(std::string_view s, std::size_t i, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) {
    if (i + k >= s.size() || !is_digit(s[i + k])) {
      return k_npos;
    }
  }
  return i + n;
}

std::size_t skip_digits(std::string_view s, std::size_t i) {
  while (i < s.size() && is_digit(s[i])) {
    ++i;
  }
  return i;
}

// HH:MM[:SS][.fff][Z|+hh:mm]
std::size_t clock_time(std::string_view s, std::size_t i) {
  std::size_t j = digits(s, i, 2);
  if (j == k_npos || j >= s.size() || s[j] != ':') {
    return k_npos;
  }
  j = digits(s, j + 1, 2);
  if (j == k_npos) {
    return k_npos;
  }
  if (j < s.size() && s[j] == ':' && digits(s, j + 1, 2) != k_npos) {
    j += 3;
  }
  if (j + 1 < s.size() && (s[j] == '.' || s[j] == ',') && is_digit(s[j + 1])) {
    j = skip_digits(s, j + 1);
  }
  if (j < s.size() && s[j] == 'Z') {
    ++j;
  } else if (j < s.size() && (s[j] == '+' || s[j] == '-') &&
             digits(s, j + 1, 2) != k_npos) {
    j += 3;
    if (j < s.size() && s[j] == ':') {
      ++j;
    }
    j = skip_digits(s, j);
  }
  return j;
}

// [YYYY-MM-DD(T| )HH:MM:SS...][]][:]
std::size_t timestamp_prefix(std::string_view s, std::size_t i) {
  std::size_t j = i;
  const bool bracket = j < s.size() && s[j] == '[';
  if (bracket) {
    ++j;
  }
  j = digits(s, j, 4);
  if (j == k_npos || j >= s.size() || (s[j] != '-' && s[j] != '/')) {
    return k_npos;
  }
  j = digits(s, j + 1, 2);
  if (j == k_npos || j >= s.size() || (s[j] != '-' && s[j] != '/')) {
    return k_npos;
  }
  j = digits(s, j + 1, 2);
  if (j == k_npos || j >= s.size() || (s[j] != 'T' && s[j] != ' ')) {
    return k_npos;
  }
  j = clock_time(s, j + 1);
  if (j == k_npos) {
    return k_npos;
  }
  if (bracket) {
    if (j >= s.size() || s[j] != ']') {
      return k_npos;
    }
    ++j;
  }
  if (j < s.size() && s[j] == ':') {
    ++j;
  }
  return j;
}

bool word_is_level(std::string_view w) {
  static constexpr std::array<std::string_view, 7> k_levels{
      "INFO", "WARNING", "WARN", "ERROR", "DEBUG", "CRITICAL", "FATAL"};
  return std::find(k_levels.begin(), k_levels.end(), w) != k_levels.end();
}

std::size_t word_end(std::string_view s, std::size_t i) {
  while (i < s.size() && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '_' ||
                          s[i] == '.' || s[i] == '-' || s[i] == '/')) {
    ++i;
  }
  return i;
}

// "file.py:123] " or "[file.py:123] " (vLLM, glog, TF).
std::size_t source_location(std::string_view s, std::size_t i) {
  std::size_t j = i;
  const bool bracket = j < s.size() && s[j] == '[';
  if (bracket) {
    ++j;
  }
  const std::size_t w = word_end(s, j);
  if (w == j || w >= s.size() || s[w] != ':') {
    return k_npos;
  }
  const std::size_t d = skip_digits(s, w + 1);
  if (d == w + 1 || d >= s.size() || s[d] != ']') {
    return k_npos;
  }
  return d + 1;
}

// vLLM "INFO 04-27 10:13:05 llm_engine.py:275] ", "ERROR 03-10 08:07:20
// [core.py:302] ", glog/TF "E tensorflow/core/x.cc:42] " and
// "W0511 14:10:52.227123 12345 x.cc:42] ", Python "ERROR:root:".
std::size_t level_prefix(std::string_view s, std::size_t i) {
  const std::size_t w = word_end(s, i);
  if (w == i) {
    return k_npos;
  }
  const std::string_view word = s.substr(i, w - i);
  if (word_is_level(word) && w < s.size() && s[w] == ':') {
    // Python logging's default format: LEVEL:logger:message.
    std::size_t j = w + 1;
    const std::size_t n = word_end(s, j);
    if (n > j && n < s.size() && s[n] == ':') {
      j = n + 1;
    }
    return j;
  }
  const bool glog_letter = word.size() == 1 && (word == "I" || word == "W" ||
                                                word == "E" || word == "F");
  const bool glog_date =
      word.size() == 5 &&
      (word[0] == 'I' || word[0] == 'W' || word[0] == 'E' || word[0] == 'F') &&
      digits(word, 1, 4) != k_npos;
  if (!word_is_level(word) && !glog_letter && !glog_date) {
    return k_npos;
  }
  std::size_t j = w;
  while (j < s.size() && s[j] == ' ') {
    ++j;
  }
  // Optional MM-DD date.
  if (digits(s, j, 2) != k_npos && j + 2 < s.size() && s[j + 2] == '-' &&
      digits(s, j + 3, 2) != k_npos) {
    j += 5;
    while (j < s.size() && s[j] == ' ') {
      ++j;
    }
  }
  // Optional time and thread id.
  const std::size_t t = clock_time(s, j);
  if (t != k_npos) {
    j = t;
    while (j < s.size() && s[j] == ' ') {
      ++j;
    }
    const std::size_t tid = skip_digits(s, j);
    if (tid > j && tid < s.size() && s[tid] == ' ') {
      j = tid + 1;
    }
  }
  const std::size_t loc = source_location(s, j);
  if (loc == k_npos) {
    return word_is_level(word) && t != k_npos ? j : k_npos;
  }
  return loc;
}

// "[rank0]:", "[1]", "[default0]:", "[INFO]", "[1,0]<stderr>:".
std::size_t bracket_prefix(std::string_view s, std::size_t i) {
  if (i >= s.size() || s[i] != '[') {
    return k_npos;
  }
  const std::size_t limit = std::min(s.size(), i + 66);
  std::size_t j = i + 1;
  while (j < limit && s[j] != ']' && !is_break(s[j])) {
    ++j;
  }
  if (j >= limit || s[j] != ']' || j == i + 1) {
    return k_npos;
  }
  ++j;
  if (starts_with_at(s, j, "<stderr>") || starts_with_at(s, j, "<stdout>")) {
    j += 8;
  }
  if (j < s.size() && s[j] == ':') {
    ++j;
  }
  return j;
}

// Ray and vLLM worker tags: "(VllmWorker rank=1 pid=254) ",
// "(EngineCore_DP0 pid=1094) ", "(train_rft pid=2657296) ".
std::size_t pid_tag_prefix(std::string_view s, std::size_t i) {
  if (i >= s.size() || s[i] != '(') {
    return k_npos;
  }
  const std::size_t limit = std::min(s.size(), i + 120);
  std::size_t j = i + 1;
  while (j < limit && s[j] != ')' && s[j] != '(' && !is_break(s[j])) {
    ++j;
  }
  if (j >= limit || s[j] != ')') {
    return k_npos;
  }
  const std::string_view inside = s.substr(i + 1, j - i - 1);
  if (inside.find("pid=") == k_npos) {
    return k_npos;
  }
  return j + 1;
}

// Container runtimes: CRI "stdout F ", docker compose "vllm-1  | ",
// "| ERROR | stderr | ", Buildkite "  | ", GitHub quotes "> ".
std::size_t pipe_prefix(std::string_view s, std::size_t i) {
  if (starts_with_at(s, i, "stdout ") || starts_with_at(s, i, "stderr ")) {
    if (i + 8 < s.size() && (s[i + 7] == 'F' || s[i + 7] == 'P') &&
        s[i + 8] == ' ') {
      return i + 9;
    }
  }
  if (i < s.size() && (s[i] == '|' || s[i] == '>') && i + 1 < s.size() &&
      s[i + 1] == ' ') {
    return i + 2;
  }
  const std::size_t w = word_end(s, i);
  if (w == i || w - i > 64) {
    return k_npos;
  }
  std::size_t j = w;
  while (j < s.size() && s[j] == ' ') {
    ++j;
  }
  if (j + 1 < s.size() && s[j] == '|' && s[j + 1] == ' ') {
    return j + 2;
  }
  return k_npos;
}

// syslog and journald (journalctl's default output): "Jul 24 16:07:58 vega
// ollama[114917]: ", the month's English abbreviation, day, time, host, and
// the process with an optional [pid].
std::size_t syslog_prefix(std::string_view s, std::size_t i) {
  static constexpr std::array<std::string_view, 12> k_months{
      "Jan", "Feb", "Mar", "Apr", "May", "Jun",
      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (i + 4 >= s.size() || s[i + 3] != ' ' ||
      std::find(k_months.begin(), k_months.end(), s.substr(i, 3)) ==
          k_months.end()) {
    return k_npos;
  }
  std::size_t j = i + 4;
  while (j < s.size() && s[j] == ' ') {
    ++j;
  }
  const std::size_t day = skip_digits(s, j);
  if (day == j || day - j > 2 || day >= s.size() || s[day] != ' ') {
    return k_npos;
  }
  j = clock_time(s, day + 1);
  if (j == k_npos || j >= s.size() || s[j] != ' ') {
    return k_npos;
  }
  const std::size_t host = word_end(s, j + 1);
  if (host == j + 1 || host >= s.size() || s[host] != ' ') {
    return k_npos;
  }
  std::size_t proc = word_end(s, host + 1);
  if (proc == host + 1) {
    return k_npos;
  }
  if (proc < s.size() && s[proc] == '[') {
    const std::size_t pid = skip_digits(s, proc + 1);
    if (pid == proc + 1 || pid >= s.size() || s[pid] != ']') {
      return k_npos;
    }
    proc = pid + 1;
  }
  if (proc + 1 >= s.size() || s[proc] != ':' || s[proc + 1] != ' ') {
    return k_npos;
  }
  return proc + 2;
}

// pdsh-style "node01: ", "ip-10-0-0-1.ec2.internal: ": a host-like word with
// a digit (so "RuntimeError: " stays).
std::size_t host_prefix(std::string_view s, std::size_t i) {
  const std::size_t w = word_end(s, i);
  if (w == i || w - i > 63 || w + 1 >= s.size() || s[w] != ':' ||
      s[w + 1] != ' ') {
    return k_npos;
  }
  const std::string_view word = s.substr(i, w - i);
  if (std::none_of(word.begin(), word.end(), is_digit) ||
      word.find('/') != k_npos) {
    return k_npos;
  }
  return w + 2;
}

}  // namespace

std::size_t skip_line_prefix(std::string_view s, std::size_t i) {
  for (int round = 0; round < 12; ++round) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
      ++i;
    }
    if (i >= s.size()) {
      return i;
    }
    if (const std::size_t a = ansi_length(s, i); a > 0) {
      i += a;
      continue;
    }
    std::size_t next = timestamp_prefix(s, i);
    if (next == k_npos) {
      next = syslog_prefix(s, i);
    }
    if (next == k_npos) {
      next = level_prefix(s, i);
    }
    if (next == k_npos) {
      next = bracket_prefix(s, i);
    }
    if (next == k_npos) {
      next = pid_tag_prefix(s, i);
    }
    if (next == k_npos) {
      next = pipe_prefix(s, i);
    }
    if (next == k_npos) {
      next = host_prefix(s, i);
    }
    if (next == k_npos || next == i) {
      return i;
    }
    i = next;
  }
  return i;
}

namespace {

// A byte normalize() copies unchanged: not a control character, nor the
// start of a caret escape ("^[[") or an HTML entity.
bool is_ordinary(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u != 0x7f && c != '^' && c != '&';
}

// The first byte at or after `i` that is not ordinary (raw.size() if none),
// 16 bytes at a time.
std::size_t ordinary_run_end(std::string_view raw, std::size_t i) {
#if defined(__SSE2__)
  const __m128i control = _mm_set1_epi8(0x1f);
  while (i + 16 <= raw.size()) {
    const __m128i v =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(raw.data() + i));
    // Unsigned v <= 0x1f, or one of DEL, '^', '&'.
    __m128i m = _mm_cmpeq_epi8(_mm_min_epu8(v, control), v);
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('^')));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('&')));
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(m));
    if (mask != 0) {
      return i + static_cast<std::size_t>(__builtin_ctz(mask));
    }
    i += 16;
  }
#endif
  while (i < raw.size() && is_ordinary(raw[i])) {
    ++i;
  }
  return i;
}

}  // namespace

void normalize(std::string_view raw, bool at_line_start, Window& w) {
  if (w.text.size() < raw.size()) {
    w.text.resize(raw.size());
    w.map.resize(raw.size());
  }
  w.length = 0;
  w.prefixes.clear();
  w.raw_size = raw.size();
  std::size_t i = 0;
  bool line_start = at_line_start;
  while (i < raw.size()) {
    if (line_start) {
      const std::size_t after = skip_line_prefix(raw, i);
      if (after > i) {
        w.prefixes.push_back({w.length, i, after});
      }
      i = after;
      line_start = false;
      continue;
    }
    const char c = raw[i];
    if (is_ordinary(c)) {
      // The common case: a run of ordinary characters, copied as is.
      const std::size_t j = ordinary_run_end(raw, i + 1);
      w.push_run(raw.data() + i, j - i, i);
      i = j;
      continue;
    }
    if (c == '\n') {
      w.push('\n', i);
      ++i;
      line_start = true;
      continue;
    }
    if (c == '\r') {
      if (i + 1 < raw.size() && raw[i + 1] == '\n') {
        ++i;
        continue;
      }
      w.push('\r', i);
      ++i;
      line_start = true;
      continue;
    }
    if (const std::size_t a = ansi_length(raw, i); a > 0) {
      i += a;
      continue;
    }
    if (c == '&') {
      char decoded = 0;
      if (const std::size_t e = entity_length(raw, i, decoded); e > 0) {
        // An escaped control (&#10;) is text, never a line break: line
        // numbers count the log's own lines.
        w.push(printable(decoded), i);
        i += e;
        continue;
      }
    }
    w.push(printable(c), i);
    ++i;
  }
}

}  // namespace oomplan::diag
