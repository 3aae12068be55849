#include "diagnose/anchors.hpp"
#include "diagnose/cursor.hpp"
#include "diagnose/window.hpp"

#include "oomplan/diagnose/diagnose.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// The scanner. Invariants:
// - Every byte is looked at a constant number of times: one pass for the
//   NUL / UTF-8 statistics, one newline count, one SSE2 pass over byte pairs
//   (PairSet); a verified candidate costs one window of at most
//   k_lookbehind + k_ahead bytes, normalized and parsed once (twice when the
//   first k_first_ahead bytes were not enough). No backtracking: the parser
//   only moves forward from a start phrase, each clause matched once, and a
//   look-back searches a bounded distance.
// - The buffer holds at most one slice (k_slice) plus k_lookbehind +
//   k_ahead bytes; messages keep at most 300 characters of text; at most
//   k_max_messages messages are kept. Memory is constant in the log size.
// - A candidate is parsed only once k_ahead bytes after it are buffered (or
//   at the end), and the window starts k_lookbehind bytes before it, so any
//   split of the input into chunks gives the same result.
// The grammars, one file per log format, are listed in grammars.hpp;
// anchors.cpp leads a hit to its grammar.

namespace oomplan {
namespace {

using diag::Cursor;
using diag::ends_before_ci;
using diag::Hit;
using diag::is_break;
using diag::is_context_hit;
using diag::is_digit;
using diag::is_space;
using diag::k_max_size;
using diag::k_npos;
using diag::line_begin;
using diag::line_finish;
using diag::lower;
using diag::normalize;
using diag::parse_at_anchor;
using diag::Parsed;
using diag::starts_with_at;
using diag::Window;

// Bytes before a candidate that its window keeps: the start of a wrapped
// message (vLLM V1 prints ~110 characters before "KV cache"), the line's
// prefix and NCCL's "[N]" device column.
constexpr std::size_t k_lookbehind = 512;
// Bytes after a candidate its message may span (a PyTorch 2.x message with a
// dozen "Process N has" clauses is ~1.5 KiB; wrapped logs add prefixes).
constexpr std::size_t k_ahead = 4096;
// What a first, cheaper window normalizes (a PyTorch 2.x message is ~600).
constexpr std::size_t k_first_ahead = 1024;
// The most the scanner buffers from one feed() at a time.
constexpr std::size_t k_slice = std::size_t{1} << 20;
constexpr std::size_t k_text_chars = 300;
// A DeepSpeed "Requested/Free/Total" triple belongs to a workspace error at
// most this many lines later (a Python traceback sits between them).
constexpr std::int64_t k_requested_lines = 1000;

// The prefilter: byte pairs that start an anchor, found 16 at a time with
// SSE2 (baseline on x86-64; a scalar loop elsewhere). Pairs rather than
// single bytes keep candidates rare ("ry" of "memory", not every 'y').
//   "ry"/"RY" -> memory / MEMORY   "KV" -> KV cache
//   "UD" -> CUDA calloc, CUDNN_STATUS_
//   "BL" -> BLAS_STATUS_ALLOC       "xh"/"XH" -> exhausted
//   "Tr" -> Tried to allocate       "qu" -> Requested:   "/s", "/i" -> tqdm
struct PairSet {
  bool progress = true;  // the tqdm pairs, until the first progress bar

  static bool is_pair(char a, char b, bool progress) {
    switch (a) {
      case 'r':
        return b == 'y';
      case 'R':
        return b == 'Y';
      case 'K':
        return b == 'V';
      case 'U':
        return b == 'D';
      case 'B':
        return b == 'L';
      case 'x':
        return b == 'h';
      case 'X':
        return b == 'H';
      case 'T':
        return b == 'r';
      case 'q':
        return b == 'u';
      case '/':
        return progress && (b == 's' || b == 'i');
      default:
        return false;
    }
  }

  // Candidate bit mask for the 16 pairs starting at p (p + 17 readable).
  unsigned block_mask(const char* p) const {
#if defined(__SSE2__)
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 1));
    const auto eq = [](__m128i v, char c) {
      return _mm_cmpeq_epi8(v, _mm_set1_epi8(c));
    };
    const auto both = [&](char a, char b) {
      return _mm_and_si128(eq(v0, a), eq(v1, b));
    };
    __m128i m = _mm_or_si128(both('r', 'y'), both('R', 'Y'));
    m = _mm_or_si128(m, both('K', 'V'));
    m = _mm_or_si128(m, both('U', 'D'));
    m = _mm_or_si128(m, both('B', 'L'));
    m = _mm_or_si128(m, both('x', 'h'));
    m = _mm_or_si128(m, both('X', 'H'));
    m = _mm_or_si128(m, both('T', 'r'));
    m = _mm_or_si128(m, both('q', 'u'));
    if (progress) {
      m = _mm_or_si128(
          m,
          _mm_and_si128(eq(v0, '/'), _mm_or_si128(eq(v1, 's'), eq(v1, 'i'))));
    }
    return static_cast<unsigned>(_mm_movemask_epi8(m));
#else
    unsigned mask = 0;
    for (unsigned k = 0; k < 16; ++k) {
      if (is_pair(p[k], p[k + 1], progress)) {
        mask |= 1U << k;
      }
    }
    return mask;
#endif
  }
};

// '\n' in [p, p + n).
std::int64_t count_newlines(const char* p, std::size_t n) {
  std::int64_t total = 0;
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i nl = _mm_set1_epi8('\n');
  const __m128i zero = _mm_setzero_si128();
  while (i + 16 <= n) {
    // Up to 255 blocks per byte-lane accumulator, then sum the lanes.
    __m128i acc = zero;
    const std::size_t blocks = std::min<std::size_t>(255, (n - i) / 16);
    for (std::size_t k = 0; k < blocks; ++k, i += 16) {
      const __m128i v =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl));
    }
    const __m128i sums = _mm_sad_epu8(acc, zero);
    total += _mm_cvtsi128_si32(sums) +
             _mm_cvtsi128_si32(_mm_unpackhi_epi64(sums, sums));
  }
#endif
  for (; i < n; ++i) {
    total += p[i] == '\n' ? 1 : 0;
  }
  return total;
}

struct Requested {
  std::int64_t line = 0;
  std::optional<Bytes> requested, free, total;
};

// Length of a valid UTF-8 sequence at i (< end), or 0.
std::size_t utf8_length(std::string_view t, std::size_t i, std::size_t end) {
  const auto c = static_cast<unsigned char>(t[i]);
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    lo = c == 0xe0 ? 0xa0 : 0x80;
    hi = c == 0xed ? 0x9f : 0xbf;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    lo = c == 0xf0 ? 0x90 : 0x80;
    hi = c == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (i + n > end) {
    return 0;
  }
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(t[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) {
      return 0;
    }
  }
  return n;
}

// The message text: whitespace collapsed, at most k_text_chars characters,
// invalid UTF-8 replaced by U+FFFD.
std::string message_text(std::string_view t, std::size_t start,
                         std::size_t end) {
  std::string out;
  std::size_t chars = 0;
  bool space = false;
  std::size_t i = start;
  end = std::min(end, t.size());
  while (i < end && chars < k_text_chars) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (is_space(static_cast<char>(c))) {
      space = true;
      ++i;
      continue;
    }
    if (space && !out.empty()) {
      out.push_back(' ');
      ++chars;
      if (chars >= k_text_chars) {
        break;
      }
    }
    space = false;
    std::size_t len = 1;
    if (c >= 0x80) {
      len = utf8_length(t, i, end);
      if (len == 0) {
        out += "\xEF\xBF\xBD";
        ++chars;
        ++i;
        continue;
      }
    }
    out.append(t.substr(i, len));
    ++chars;
    i += len;
  }
  return out;
}

}  // namespace

struct LogScanner::Impl {
  std::string m_buf;
  std::size_t m_pos = 0;        // [0, m_pos) scanned; [m_pos, size) pending
  std::int64_t m_base = 0;      // stream offset of m_buf[0]
  std::int64_t m_last_end = 0;  // stream offset where the last message ended
  std::size_t m_counted = 0;    // buffer offset up to which '\n' are m_counted
  std::int64_t m_lines_before = 0;  // '\n' in the stream before `m_counted`
  PairSet m_pairs;
  // UTF-8 state across chunks: continuation bytes still expected and the
  // allowed range of the next one.
  int m_utf8_need = 0;
  unsigned char m_utf8_lo = 0x80;
  unsigned char m_utf8_hi = 0xbf;
  bool m_last_was_newline = true;
  Diagnosis m_d;
  bool m_context_frozen = false;
  std::optional<Requested> m_requested;
  Window m_window;
  std::string_view m_raw_window;  // the raw bytes behind `m_window`

  // --- statistics ---
  void count_bytes(std::string_view s) {
    m_d.bytes += static_cast<std::int64_t>(s.size());
    // NUL bytes: memchr (there are usually none).
    const char* const end = s.data() + s.size();
    for (const char* p = s.data(); p < end; ++p) {
      p = static_cast<const char*>(
          std::memchr(p, 0, static_cast<std::size_t>(end - p)));
      if (p == nullptr) {
        break;
      }
      ++m_d.nul_bytes;
    }
    // UTF-8: blocks of 64 ASCII bytes are skipped with an OR the compiler
    // vectorizes; only blocks with a high bit are decoded.
    constexpr std::size_t k_block = 64;
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
      if (m_utf8_need == 0 && i + k_block <= n) {
        unsigned char acc = 0;
        for (std::size_t k = 0; k < k_block; ++k) {
          acc = static_cast<unsigned char>(
              acc | static_cast<unsigned char>(s[i + k]));
        }
        if (acc < 0x80) {
          i += k_block;
          continue;
        }
      }
      const std::size_t stop = std::min(n, i + k_block);
      for (; i < stop; ++i) {
        utf8_step(static_cast<unsigned char>(s[i]));
      }
    }
    if (!s.empty()) {
      m_last_was_newline = s.back() == '\n';
    }
  }

  void utf8_step(unsigned char c) {
    if (m_utf8_need > 0) {
      if (c >= m_utf8_lo && c <= m_utf8_hi) {
        --m_utf8_need;
        m_utf8_lo = 0x80;
        m_utf8_hi = 0xbf;
        return;
      }
      // The sequence broke off: its bytes so far were invalid; read this
      // byte afresh.
      ++m_d.invalid_utf8_bytes;
      m_utf8_need = 0;
      m_utf8_lo = 0x80;
      m_utf8_hi = 0xbf;
    }
    if (c < 0x80) {
      return;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      m_utf8_need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      m_utf8_need = 2;
      m_utf8_lo = c == 0xe0 ? 0xa0 : 0x80;
      m_utf8_hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
      m_utf8_need = 3;
      m_utf8_lo = c == 0xf0 ? 0x90 : 0x80;
      m_utf8_hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
      ++m_d.invalid_utf8_bytes;
    }
  }

  // '\n' in the stream before buffer offset `off` (off >= m_pos -
  // k_lookbehind).
  std::int64_t lines_at(std::size_t off) {
    if (off >= m_counted) {
      m_lines_before +=
          count_newlines(m_buf.data() + m_counted, off - m_counted);
      m_counted = off;
      return m_lines_before;
    }
    return m_lines_before - count_newlines(m_buf.data() + off, m_counted - off);
  }

  // --- the prefilter ---
  // Verifies the candidate pair starting at p.
  Hit verify(std::size_t p) const {
    const std::string_view s(m_buf);
    switch (s[p]) {
      case 'r':
      case 'R':
        return verify_memory(s, p + 1);
      case 'K': {
        // "KV cache is needed", "KV cache memory", "KV cache (N)", "KV Cache
        // is X"; not vLLM's periodic "GPU KV cache usage: 45.6%" metrics.
        if (!(starts_with_at(s, p + 1, "V cache ") ||
              starts_with_at(s, p + 1, "V Cache "))) {
          return Hit::none;
        }
        const std::size_t after = p + 9;
        return starts_with_at(s, after, "is ") ||
                       starts_with_at(s, after, "memory") ||
                       starts_with_at(s, after, "(")
                   ? Hit::kv_cache
                   : Hit::none;
      }
      case 'U':
        if (p == 0 || s[p - 1] != 'C') {
          return Hit::none;
        }
        if (starts_with_at(s, p, "UDA calloc")) {
          return Hit::cuda_calloc;
        }
        // cuDNN's handle: "CUDNN_STATUS_ALLOC_FAILED", or TensorFlow's
        // "Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR".
        return starts_with_at(s, p, "UDNN_STATUS_ALLOC_FAILED") ||
                       (starts_with_at(s, p, "UDNN_STATUS_INTERNAL_ERROR") &&
                        p >= 31 &&
                        ends_before_ci(s, p - 1, "create cudnn handle: "))
                   ? Hit::dnn_handle
                   : Hit::none;
      case 'B':
        return starts_with_at(s, p, "BLAS_STATUS_ALLOC_FAILED")
                   ? Hit::blas_alloc
                   : Hit::none;
      case 'x':
        return p > 0 && lower(s[p - 1]) == 'e' &&
                       starts_with_at(s, p, "xhausted")
                   ? Hit::exhausted
                   : Hit::none;
      case 'X':
        return p > 0 && s[p - 1] == 'E' && starts_with_at(s, p, "XHAUSTED")
                   ? Hit::exhausted
                   : Hit::none;
      case 'T':
        return starts_with_at(s, p, "Tried to allocate")
                   ? Hit::tried_to_allocate
                   : Hit::none;
      case 'q':
        return p >= 2 && starts_with_at(s, p - 2, "Requested:") ? Hit::requested
                                                                : Hit::none;
      case '/': {
        // tqdm's rate: "4.50it/s]", "?it/s]", "2.1s/it]".
        auto rate_end = [&](std::size_t e) {
          return e < s.size() && (s[e] == ']' || s[e] == ',' || s[e] == ' ');
        };
        if (p >= 3 && s[p - 2] == 'i' && s[p - 1] == 't' &&
            (is_digit(s[p - 3]) || s[p - 3] == '?') &&
            starts_with_at(s, p + 1, "s") && rate_end(p + 2)) {
          return Hit::progress;
        }
        if (p >= 2 && s[p - 1] == 's' && is_digit(s[p - 2]) &&
            starts_with_at(s, p + 1, "it") && rate_end(p + 3)) {
          return Hit::progress;
        }
        return Hit::none;
      }
      default:
        return Hit::none;
    }
  }

  // p is the 'y' of a "...ry" pair.
  Hit verify_memory(std::string_view s, std::size_t p) const {
    if (!ends_before_ci(s, p, "memor")) {
      return Hit::none;
    }
    const std::size_t m = p - 5;  // start of "memory"
    if (ends_before_ci(s, m, "out of ")) {
      return Hit::out_of_memory;
    }
    if (ends_before_ci(s, m, "OutOf") || ends_before_ci(s, m, "OUT_OF_") ||
        ends_before_ci(s, m, "OutOfDevice")) {
      return Hit::camel_oom;
    }
    if (ends_before_ci(s, m, "available ")) {
      return Hit::cache_blocks;
    }
    if (ends_before_ci(s, m, "enough ")) {
      return Hit::enough_memory;
    }
    if (ends_before_ci(s, m, "GPU ") &&
        starts_with_at(s, p + 1, " utilization (")) {
      return Hit::startup;
    }
    if (m_context_frozen) {
      return Hit::none;
    }
    if (ends_before_ci(s, m, "total_gpu_")) {
      return Hit::vllm_profile;
    }
    if (ends_before_ci(s, m, "see_")) {
      return Hit::deepspeed_usage;
    }
    return Hit::none;
  }

  // Where the parser expects a hit: the 'y' of "memory", the 'V' of "KV";
  // the pair's first byte otherwise.
  std::size_t anchor(std::size_t p) const {
    const char c = m_buf[p];
    return c == 'r' || c == 'R' || c == 'K' ? p + 1 : p;
  }

  // The next verified hit starting in [from, limit), or k_npos. Pairs are
  // read up to m_buf.size() (the second byte may lie past `limit`).
  std::pair<std::size_t, Hit> next_hit(std::size_t from, std::size_t limit) {
    const char* const data = m_buf.data();
    std::size_t i = from;
    while (i < limit) {
      if (i + 17 <= m_buf.size()) {
        unsigned mask = m_pairs.block_mask(data + i);
        while (mask != 0) {
          const auto bit = static_cast<std::size_t>(__builtin_ctz(mask));
          mask &= mask - 1;
          const std::size_t p = i + bit;
          if (p >= limit) {
            return {k_npos, Hit::none};
          }
          const Hit h = verify(p);
          if (h != Hit::none) {
            return {anchor(p), h};
          }
        }
        i += 16;
        continue;
      }
      const char next = i + 1 < m_buf.size() ? data[i + 1] : '\0';
      if (PairSet::is_pair(data[i], next, m_pairs.progress)) {
        const Hit h = verify(i);
        if (h != Hit::none) {
          return {anchor(i), h};
        }
      }
      ++i;
    }
    return {k_npos, Hit::none};
  }

  // --- feeding ---
  void feed(std::string_view chunk) {
    while (!chunk.empty() && !m_d.stopped) {
      // Slices end at every k_binary_probe_bytes of the stream, where the
      // early stop is decided.
      const auto to_probe = static_cast<std::size_t>(
          k_binary_probe_bytes - m_d.bytes % k_binary_probe_bytes);
      const std::string_view slice =
          chunk.substr(0, std::min(k_slice, to_probe));
      chunk.remove_prefix(slice.size());
      count_bytes(slice);
      m_buf.append(slice);
      process(false);
      if (m_d.bytes % k_binary_probe_bytes == 0 &&
          (m_d.nul_bytes + m_d.invalid_utf8_bytes) * k_binary_stop_ratio >
              m_d.bytes) {
        m_d.stopped = true;
      }
    }
  }

  void process(bool final) {
    const std::size_t limit =
        final ? m_buf.size()
              : (m_buf.size() > k_ahead ? m_buf.size() - k_ahead : 0);
    while (m_pos < limit) {
      const auto [p, hit] = next_hit(m_pos, limit);
      if (p == k_npos) {
        m_pos = limit;
        break;
      }
      m_pos = std::max(m_pos, handle(p, hit));
    }
    compact();
  }

  void compact() {
    const std::size_t keep_from =
        m_pos > k_lookbehind ? m_pos - k_lookbehind : 0;
    if (keep_from < (std::size_t{1} << 16)) {
      return;
    }
    lines_at(keep_from);
    m_buf.erase(0, keep_from);
    m_pos -= keep_from;
    m_counted -= keep_from;
    m_base += static_cast<std::int64_t>(keep_from);
  }

  // Handles the verified hit at buffer offset p; returns where scanning
  // resumes.
  std::size_t handle(std::size_t p, Hit hit) {
    if (hit == Hit::progress) {
      note_activity(static_cast<std::int64_t>(lines_at(p)) + 1);
      m_pairs.progress = false;
      return p + 1;
    }
    const std::size_t ws = window_start(p);
    const std::size_t we = window_end(p, hit);
    const bool at_line_start =
        (ws == 0 && m_base == 0) || (ws > 0 && is_break(m_buf[ws - 1]));
    // Most messages end within k_first_ahead bytes: normalize that much
    // first, and the whole k_ahead only when the parse ran into the end.
    const std::int64_t window_line = lines_at(ws);
    std::optional<Parsed> parsed;
    std::size_t np = 0;
    for (const std::size_t ahead : {k_first_ahead, k_ahead}) {
      const std::size_t end = std::min(we, p + ahead);
      np = load_window(ws, end, p, at_line_start);
      const std::string_view t = m_window.view();
      if (is_context_hit(hit)) {
        read_context(t, np, hit, window_line);
        return p + 1;
      }
      parsed = parse_at_anchor(m_window, m_raw_window, np, hit);
      const bool cut = end < we;
      const std::size_t reached = parsed ? parsed->end : np;
      if (!cut || reached + 256 < t.size()) {
        break;
      }
    }
    if (!parsed) {
      // Context phrases that share an anchor with messages ("Available KV
      // cache memory", "reserved for KV Cache is").
      if (hit == Hit::kv_cache) {
        read_context(m_window.view(), np, hit, window_line);
      }
      return p + 1;
    }
    return keep(std::move(*parsed), ws, p, window_line);
  }

  // A window starts k_lookbehind bytes before the hit, but not before the
  // end of the last message.
  std::size_t window_start(std::size_t p) const {
    const std::int64_t last_end_buf = m_last_end - m_base;
    std::size_t ws = p > k_lookbehind ? p - k_lookbehind : 0;
    if (last_end_buf > 0 && static_cast<std::size_t>(last_end_buf) > ws) {
      ws = std::min(p, static_cast<std::size_t>(last_end_buf));
    }
    return ws;
  }

  // Context lines need only their own line (DeepSpeed's "Requested:" the two
  // after it too); messages may span k_ahead.
  std::size_t window_end(std::size_t p, Hit hit) const {
    const std::size_t we = std::min(m_buf.size(), p + k_ahead);
    if (!is_context_hit(hit)) {
      return we;
    }
    const std::size_t lines_needed = hit == Hit::requested ? 3 : 1;
    std::size_t e = p;
    for (std::size_t k = 0; k < lines_needed && e < we; ++k) {
      const void* nl = std::memchr(m_buf.data() + e, '\n', we - e);
      e = nl != nullptr ? static_cast<std::size_t>(
                              static_cast<const char*>(nl) - m_buf.data()) +
                              1
                        : we;
    }
    return std::min(we, e);
  }

  // Normalizes m_buf[ws, end) into the window; returns the hit's (buffer
  // offset p) position in the window text.
  std::size_t load_window(std::size_t ws, std::size_t end, std::size_t p,
                          bool at_line_start) {
    m_raw_window = std::string_view(m_buf).substr(ws, end - ws);
    normalize(m_raw_window, at_line_start, m_window);
    const auto map_end =
        m_window.map.begin() + static_cast<std::ptrdiff_t>(m_window.length);
    const auto it = std::lower_bound(m_window.map.begin(), map_end,
                                     static_cast<std::uint32_t>(p - ws));
    return static_cast<std::size_t>(it - m_window.map.begin());
  }

  // Records the parsed message of the window starting at buffer offset `ws`
  // (hit at p); returns where scanning resumes: after the message.
  std::size_t keep(Parsed r, std::size_t ws, std::size_t p,
                   std::int64_t window_line) {
    const std::string_view t = m_window.view();
    const auto line_in_window = std::count(
        t.begin(), t.begin() + static_cast<std::ptrdiff_t>(r.start), '\n');
    r.message.line = window_line + line_in_window + 1;
    r.message.text = message_text(t, r.start, r.end);
    record(std::move(r.message));
    const std::size_t raw_end = ws + m_window.raw_offset(r.end);
    m_last_end = m_base + static_cast<std::int64_t>(std::max(raw_end, p + 1));
    return std::max(raw_end, p + 1);
  }

  void note_activity(std::int64_t line) {
    if (!m_context_frozen && !m_d.context.first_activity_line) {
      m_d.context.first_activity_line = line;
    }
  }

  void record(OomMessage m) {
    if (m.kind == OomKind::deepspeed_workspace && m_requested &&
        m.line - m_requested->line <= k_requested_lines) {
      m.requested_bytes = m_requested->requested;
      m.free_bytes = m_requested->free;
      m.capacity_bytes = m_requested->total;
    }
    ++m_d.count;
    if (!m_context_frozen) {
      m_context_frozen = true;
      m_pairs.progress = false;
    }
    if (m_d.messages.size() < k_max_messages) {
      m_d.messages.push_back(std::move(m));
    }
  }

  // --- context lines ---
  void read_context(std::string_view t, std::size_t np, Hit hit,
                    std::int64_t window_line) {
    const std::size_t b = line_begin(t, np);
    const std::size_t e = line_finish(t, np);
    const std::string_view line = t.substr(b, e - b);
    const std::int64_t line_no =
        window_line +
        std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(b),
                   '\n') +
        1;
    if (hit == Hit::requested) {
      read_requested(t, np, b, line_no);
      return;
    }
    if (m_context_frozen) {
      return;
    }
    if (hit == Hit::deepspeed_usage) {
      read_deepspeed_usage(line, line_no);
    } else if (hit == Hit::vllm_profile) {
      read_vllm_profile(line);
    } else if (hit == Hit::kv_cache) {
      read_kv_cache_line(line);
    }
  }

  // "Requested:\t104873984", then "Free:\t..." and "Total:\t..." lines
  // (DeepSpeed's workspace error follows them).
  void read_requested(std::string_view t, std::size_t np, std::size_t b,
                      std::int64_t line_no) {
    Requested r;
    r.line = line_no;
    Cursor c(t, np);
    c.set(b);
    c.skip_past("Requested:", 64);
    if (const auto n = c.integer()) {
      r.requested = std::min<Bytes>(k_max_size, *n);
    }
    if (c.lit("Free:")) {
      if (const auto n = c.integer()) {
        r.free = std::min<Bytes>(k_max_size, *n);
      }
    }
    if (c.lit("Total:")) {
      if (const auto n = c.integer()) {
        r.total = std::min<Bytes>(k_max_size, *n);
      }
    }
    if (r.requested) {
      m_requested = r;
    }
  }

  // "[utils.py:830:see_memory_usage] MA 0.12 GB Max_MA 0.12 GB CA 0.31 GB"
  void read_deepspeed_usage(std::string_view line, std::int64_t line_no) {
    LogContext& ctx = m_d.context;
    Cursor c(line, 0);
    if (c.skip_past("see_memory_usage]", line.size()) && c.lit("MA")) {
      const auto ma = c.size();
      if (ma && c.skip_past("CA", 40)) {
        ctx.deepspeed_allocated_bytes = ma;
        ctx.deepspeed_reserved_bytes = c.size();
        if (*ma > 0) {
          note_activity(line_no);
        }
      }
    }
  }

  // V0.5: "Memory profiling results: total_gpu_memory=23.58GiB ...
  // kv_cache_size=2.89GiB gpu_memory_utilization=0.90"; V0.6:
  // "total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = ...".
  void read_vllm_profile(std::string_view line) {
    LogContext& ctx = m_d.context;
    Cursor c(line, 0);
    if (c.skip_past("total_gpu_memory", line.size())) {
      if (!c.lit("=")) {
        c.lit("(");
      }
      if (const auto total = c.size()) {
        ctx.vllm_total_bytes = total;
      }
    }
    Cursor k(line, 0);
    if (k.skip_past("kv_cache_size=", line.size())) {
      if (const auto kv = k.size()) {
        ctx.vllm_kv_cache_bytes = kv;
      }
    }
    Cursor u(line, 0);
    if (u.skip_past("gpu_memory_utilization", line.size())) {
      if (!u.lit("=")) {
        u.lit("(");
      }
      if (const auto util = u.decimal(); util && *util > 0 && *util <= 1) {
        ctx.vllm_gpu_util = util;
      }
    }
  }

  // V1 "Available KV cache memory: 19.5 GiB"; V0.6 "the rest of the memory
  // reserved for KV Cache is 55.00GiB."
  void read_kv_cache_line(std::string_view line) {
    for (const std::string_view phrase :
         {"Available KV cache memory:", "reserved for KV Cache is"}) {
      Cursor c(line, 0);
      if (c.skip_past(phrase, line.size())) {
        if (const auto kv = c.size()) {
          m_d.context.vllm_kv_cache_bytes = kv;
        }
      }
    }
  }

  Diagnosis finish() {
    process(true);
    m_d.lines =
        lines_at(m_buf.size()) + (m_last_was_newline || m_d.bytes == 0 ? 0 : 1);
    if (m_utf8_need > 0) {
      ++m_d.invalid_utf8_bytes;  // a sequence cut off by the end of the input
    }
    m_d.binary = m_d.stopped ||
                 (m_d.nul_bytes + m_d.invalid_utf8_bytes) * 100 > m_d.bytes;
    explain(m_d);
    return std::move(m_d);
  }
};

LogScanner::LogScanner() : m_impl(std::make_unique<Impl>()) {}
LogScanner::~LogScanner() = default;
LogScanner::LogScanner(LogScanner&&) noexcept = default;
LogScanner& LogScanner::operator=(LogScanner&&) noexcept = default;

void LogScanner::feed(std::string_view chunk) {
  m_impl->feed(chunk);
}

bool LogScanner::done() const {
  return m_impl->m_d.stopped;
}

Diagnosis LogScanner::finish() {
  return m_impl->finish();
}

}  // namespace oomplan
