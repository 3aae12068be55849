#include "oomplan/diagnose/diagnose.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
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
//
// Where the wordings come from (read in the engines' source):
// - PyTorch c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc
//   (OutOfMemoryError text per version: 1.0-1.3 "... free; X cached)", 1.4-2.0
//   "... free; [X allowed; ]X reserved in total by PyTorch)", 2.1 "GPU N has a
//   total capacty of ...", 2.2+ "capacity", "Including non-PyTorch memory,
//   this process has", "with X allocated in private pools"); sizes printed by
//   format_size(): "N bytes" up to 1 KiB, then "%.2f KiB/MiB/GiB" (2^10..).
//   ROCm builds are hipified: "HIP out of memory", PYTORCH_HIP_ALLOC_CONF.
//   c10/xpu/XPUCachingAllocator.cpp prints "XPU out of memory".
// - vLLM vllm/worker/worker.py raise_if_cache_size_invalid (V0: "No
//   available memory for the cache blocks", "The model's max seq len (N) is
//   larger than the maximum number of tokens that can be stored in KV cache
//   (M)"), vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (V1:
//   "To serve at least one request with the models's [later model's] max seq
//   len (N), (X GiB KV cache is needed, ... (Y GiB). Based on the available
//   memory, the estimated maximum model length is E."), format_gib() =
//   "%.2f" of bytes / 1024**3, and vllm/v1/worker/gpu_worker.py (later
//   worker/utils.py request_memory): "Free memory on device [cuda:0 ](F/C
//   GiB) on startup is less than desired GPU memory utilization (U, R GiB)"
//   with GiB = 2^30 (GiB_bytes). vLLM's "Loading model weights took X GB"
//   divides by GiB_bytes too: its "GB" is 2^30.
// - NCCL src/include/alloc.h / checks.h: WARN("Cuda failure '%s'") (newer
//   "Cuda failure %d '%s'") and WARN("Failed to CUDA calloc %ld bytes"); the
//   debug prefix is "host:pid:tid [cudaDev] file:line NCCL WARN".
// - XLA/TSL: "Out of memory while trying to allocate %d bytes.", "Out of
//   memory allocating %d bytes.", "Failed to allocate request for %s (%dB) on
//   device ordinal %d", BFC "ran out of memory trying to allocate %s (rounded
//   to %d)"; tsl HumanReadableNumBytes prints KiB/MiB/GiB (2^10..). The
//   XLA:TPU compiler (closed source) prints "Used 21.95G of 15.48G hbm": its
//   "G" is 2^30 (a v3 core's 16 GiB HBM shows as 15.48G beside 0.52G
//   reserved; in 10^9 units it would read 17.18G). The TF/XLA stream executor
//   prints "failed to allocate 890.06M (933298432 bytes)": "M" is 2^20 and
//   the exact bytes follow, which we use.
// - DeepSpeed csrc/transformer/inference/includes/inference_context.h
//   GenWorkSpace: printf("Requested:\t%lu\nFree:\t%lu\nTotal:\t%lu\n") in
//   bytes, then "Workspace can't be allocated, no enough memory.";
//   deepspeed/runtime/utils.py see_memory_usage prints "MA x GB ... CA y GB"
//   with x = bytes / (1024 * 1024 * 1024): "GB" is 2^30.
// - bitsandbytes csrc/ops.cuh CUDA_CHECK_RETURN: "Error %s at line %d in
//   file %s" with cudaGetErrorString ("out of memory").
// - PyTorch aten/src/ATen/mps/MPSAllocator.mm: "MPS backend out of memory
//   (MPS allocated: X, other allocations: Y, max allowed: Z). Tried to
//   allocate W on private pool." with 2^10-based "KB/MB/GB" (later KiB...).

namespace oomplan {

std::string_view oom_format_name(OomFormat format) {
  switch (format) {
    case OomFormat::pytorch2:
      return "pytorch2";
    case OomFormat::pytorch1:
      return "pytorch1";
    case OomFormat::vllm:
      return "vllm";
    case OomFormat::cuda_runtime:
      return "cuda_runtime";
    case OomFormat::cublas:
      return "cublas";
    case OomFormat::nccl:
      return "nccl";
    case OomFormat::xla:
      return "xla";
    case OomFormat::other:
      return "other";
  }
  return "other";
}

std::string_view oom_cause_name(OomCause cause) {
  switch (cause) {
    case OomCause::vllm_startup_free_memory:
      return "vllm_startup_free_memory";
    case OomCause::vllm_kv_cache:
      return "vllm_kv_cache";
    case OomCause::context_creation:
      return "context_creation";
    case OomCause::fragmentation:
      return "fragmentation";
    case OomCause::unknown:
      return "unknown";
    case OomCause::large_allocation:
      return "large_allocation";
    case OomCause::other_processes:
      return "other_processes";
    case OomCause::shortfall:
      return "shortfall";
  }
  return "shortfall";
}

namespace {

constexpr std::size_t k_npos = std::string_view::npos;
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
constexpr std::size_t k_max_processes = 32;
// Sizes saturate here (1 EiB, beyond any device) so arithmetic on them
// cannot overflow.
constexpr Bytes k_max_size = Bytes{1} << 60;
// A DeepSpeed "Requested/Free/Total" triple belongs to a workspace error at
// most this many lines later (a Python traceback sits between them).
constexpr std::int64_t k_requested_lines = 1000;

// --- characters --------------------------------------------------------------

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_break(char c) {
  return c == '\n' || c == '\r';
}
char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool starts_with_ci(std::string_view text, std::size_t pos,
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

bool starts_with_at(std::string_view text, std::size_t pos,
                    std::string_view lit) {
  return pos <= text.size() && text.size() - pos >= lit.size() &&
         text.compare(pos, lit.size(), lit) == 0;
}

// `lit` ends exactly before `pos` (case-insensitive).
bool ends_before_ci(std::string_view text, std::size_t pos,
                    std::string_view lit) {
  return pos >= lit.size() && starts_with_ci(text, pos - lit.size(), lit);
}

// --- sizes -------------------------------------------------------------------

// Bytes per unit as printed; 0 for an unknown unit. Every tool in scope that
// prints "KB"/"MB"/"GB" or a bare "K"/"M"/"G" means 2^10/2^20/2^30 (see the
// sources above), so they share the binary multipliers.
Bytes unit_bytes(std::string_view unit) {
  struct Unit {
    std::string_view name;
    Bytes bytes;
  };
  // clang-format off
  static constexpr std::array<Unit, 23> k_units{{
      {"B", 1}, {"byte", 1}, {"bytes", 1},
      {"KiB", k_kib}, {"KB", k_kib}, {"kB", k_kib}, {"K", k_kib},
      {"MiB", k_mib}, {"MB", k_mib}, {"M", k_mib},
      {"GiB", k_gib}, {"GB", k_gib}, {"G", k_gib},
      {"TiB", k_gib << 10}, {"TB", k_gib << 10}, {"T", k_gib << 10},
      {"PiB", k_gib << 20}, {"PB", k_gib << 20}, {"P", k_gib << 20},
      {"EiB", k_gib << 30}, {"EB", k_gib << 30}, {"E", k_gib << 30},
      {"Bytes", 1},
  }};
  // clang-format on
  for (const Unit& u : k_units) {
    if (u.name == unit) {
      return u.bytes;
    }
  }
  return 0;
}

// A decimal as printed: mantissa / 10^decimals.
struct Decimal {
  std::int64_t mantissa = 0;
  int decimals = 0;
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
Bytes to_bytes(Decimal d, Bytes unit) {
  if (d.mantissa < 0 || unit <= 0) {
    return 0;
  }
  while (d.decimals > 6) {
    d.mantissa /= 10;
    --d.decimals;
  }
  std::int64_t scale = 1;
  for (int i = 0; i < d.decimals; ++i) {
    scale *= 10;
  }
  const std::int64_t whole = d.mantissa / scale;
  const std::int64_t frac = d.mantissa % scale;
  if (whole >= k_max_size / unit) {
    return k_max_size;
  }
  // whole x unit < 2^60; frac x unit < 10^6 x 2^40 < 2^63.
  if (unit > (Bytes{1} << 40)) {
    return std::min(k_max_size,
                    whole * unit + static_cast<Bytes>(std::llround(
                                       static_cast<double>(frac) *
                                       static_cast<double>(unit) /
                                       static_cast<double>(scale))));
  }
  return std::min(k_max_size, whole * unit + (frac * unit + scale / 2) / scale);
}

// --- the normalized window --------------------------------------------------

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

// Builds the normalized window of raw[0, raw.size()); `at_line_start` when
// raw[0] begins a line (its prefix is then removed too).
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
    const auto u = static_cast<unsigned char>(c);
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
        w.push(decoded, i);
        i += e;
        continue;
      }
    }
    w.push(u < 0x20 || u == 0x7f ? ' ' : c, i);
    ++i;
  }
}

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
        if (int_digits + d.decimals < 18) {
          d.mantissa = d.mantissa * 10 + (c - '0');
          if (dot) {
            ++d.decimals;
          } else {
            ++int_digits;
          }
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

  std::optional<std::int64_t> integer() {
    const std::size_t save = m_pos;
    for (const bool join : {true, false}) {
      m_pos = save;
      const auto d = number(join);
      if (d && d->decimals == 0) {
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
std::size_t line_begin(std::string_view t, std::size_t pos) {
  while (pos > 0 && !is_break(t[pos - 1])) {
    --pos;
  }
  return pos;
}

std::size_t line_finish(std::string_view t, std::size_t pos) {
  while (pos < t.size() && !is_break(t[pos])) {
    ++pos;
  }
  return pos;
}

// Start of the identifier-like word holding `pos`.
std::size_t word_begin(std::string_view t, std::size_t pos) {
  while (pos > 0 && (is_alpha(t[pos - 1]) || is_digit(t[pos - 1]) ||
                     t[pos - 1] == '_' || t[pos - 1] == '.')) {
    --pos;
  }
  return pos;
}

// Exact (case-sensitive) search for `s` in t[from, to).
std::size_t find_in(std::string_view t, std::string_view s, std::size_t from,
                    std::size_t to) {
  to = std::min(to, t.size());
  if (from >= to || to - from < s.size()) {
    return k_npos;
  }
  const std::size_t p = t.substr(from, to - from).find(s);
  return p == k_npos ? k_npos : from + p;
}

// Last exact occurrence of `s` starting in [from, to).
std::size_t rfind_in(std::string_view t, std::string_view s, std::size_t from,
                     std::size_t to) {
  to = std::min(to, t.size());
  if (from >= to) {
    return k_npos;
  }
  const std::size_t end = std::min(t.size(), to + s.size() - 1);
  const std::size_t p = t.substr(from, end - from).rfind(s);
  return p == k_npos ? k_npos : from + p;
}

// Whitespace-insensitive, case-insensitive search backwards for the start of
// `s` in [from, to).
std::size_t rfind_ws(std::string_view t, std::string_view s, std::size_t from,
                     std::size_t to) {
  for (std::size_t p = std::min(to, t.size()); p > from; --p) {
    Cursor c(t, p - 1);
    if (lower(t[p - 1]) == lower(s.front()) && c.lit(s)) {
      return p - 1;
    }
  }
  return k_npos;
}

bool contains_gpu_word(std::string_view line) {
  static constexpr std::array<std::string_view, 7> k_words{
      "CUDA", "cuda", "GPU", "HIP", "hip", "device", "Cuda"};
  return std::any_of(k_words.begin(), k_words.end(), [&](std::string_view w) {
    return line.find(w) != k_npos;
  });
}

// The "[N]" device column before `pos` on its line (NCCL's debug prefix).
std::optional<int> bracket_device(std::string_view t, std::size_t pos) {
  const std::size_t b = line_begin(t, pos);
  std::size_t close = rfind_in(t, "] ", b, pos);
  while (close != k_npos && close > b) {
    std::size_t open = close;
    while (open > b && is_digit(t[open - 1])) {
      --open;
    }
    if (open < close && open > b && t[open - 1] == '[' && close - open <= 4) {
      return std::stoi(std::string(t.substr(open, close - open)));
    }
    close = close > b + 1 ? rfind_in(t, "] ", b, close - 1) : k_npos;
  }
  return std::nullopt;
}

// --- the grammars -----------------------------------------------------------

struct Parsed {
  OomMessage message;
  std::size_t start = 0;  // window text offsets
  std::size_t end = 0;
};

void add_process(OomMessage& m, std::int64_t pid, Bytes bytes) {
  m.other_processes_bytes =
      std::min(k_max_size, m.other_processes_bytes.value_or(0) + bytes);
  if (m.processes.size() < k_max_processes) {
    m.processes.push_back({pid, bytes});
  }
}

// "If reserved but unallocated memory is large try setting
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.
// See documentation for Memory Management (https://...)" and the 1.x / 2.1
// "max_split_size_mb" forms.
void pytorch_suggestion(Cursor& c, OomMessage& m) {
  if (c.lit("If reserved but unallocated memory is large try setting") ||
      c.lit("If reserved memory is >> allocated memory try setting")) {
    const std::string_view env = c.word();
    if (env == "PYTORCH_CUDA_ALLOC_CONF") {
      m.alloc_conf_env = "PYTORCH_CUDA_ALLOC_CONF";
    } else if (env == "PYTORCH_HIP_ALLOC_CONF") {
      m.alloc_conf_env = "PYTORCH_HIP_ALLOC_CONF";
    } else if (env == "PYTORCH_ALLOC_CONF") {
      m.alloc_conf_env = "PYTORCH_ALLOC_CONF";
    }
    c.skip_past("fragmentation.", 80);
  }
  if (c.lit("See documentation for Memory Management")) {
    if (c.lit("and PYTORCH_CUDA_ALLOC_CONF")) {
      return;
    }
    if (c.peek() == '(') {
      c.skip_past(")", 160);
    }
  }
  c.lit("Please use `empty_cache` to release all unoccupied cached memory.");
}

// PyTorch's caching allocator, from "CUDA out of memory" (or a pasted
// fragment starting at "Tried to allocate").
void parse_caching_allocator(Cursor& c, OomMessage& m,
                             bool raised_as_runtime_error) {
  m.kind = OomKind::caching_allocator;
  m.source = "pytorch";
  m.format =
      raised_as_runtime_error ? OomFormat::pytorch1 : OomFormat::pytorch2;
  bool head = false;
  for (const std::string_view dev : {"CUDA", "HIP", "XPU"}) {
    if (c.lit(std::string(dev) + " out of memory")) {
      m.device = dev == "CUDA" ? "cuda" : dev == "HIP" ? "hip" : "xpu";
      head = true;
      break;
    }
  }
  // Prose ("a CUDA out of memory error", "CUDA out of memory: https://...")
  // is not a message: the message's first sentence ends with '.', and only a
  // message cut off there may lack "Tried to allocate". A rejected candidate
  // has no source.
  if (head && !c.lit(".")) {
    m.source = {};
    return;
  }
  if (!c.lit("Tried to allocate")) {
    if (!head || !c.at_line_end()) {
      m.source = {};
    }
    return;
  }
  if (c.lit("more than 1EB memory")) {
    m.requested_bytes = k_max_size;
    m.format = OomFormat::pytorch2;
    c.lit(".");
    return;
  }
  m.requested_bytes = c.size();
  if (!m.requested_bytes) {
    return;
  }
  if (c.lit("(")) {
    // 1.x: "(GPU 0; 15.78 GiB total capacity; 14.01 GiB already allocated;
    // 19.69 MiB free; [1.50 GiB allowed; ]14.43 GiB reserved in total by
    // PyTorch)" or, in 1.0-1.3, "...; 4.68 MiB cached)".
    m.format = OomFormat::pytorch1;
    if (m.device.empty()) {
      m.device = "cuda";
    }
    if (!c.lit("GPU")) {
      return;
    }
    const auto idx = c.integer();
    if (!idx || !c.lit(";")) {
      return;
    }
    if (*idx < 4096) {
      m.gpu_index = static_cast<int>(*idx);
    }
    const auto capacity = c.size();
    if (!capacity || !c.lit("total capacity") || !c.lit(";")) {
      return;
    }
    m.capacity_bytes = capacity;
    const auto allocated = c.size();
    if (!allocated || !c.lit("already allocated") || !c.lit(";")) {
      return;
    }
    m.allocated_bytes = allocated;
    const auto free = c.size();
    if (!free || !c.lit("free")) {
      return;
    }
    m.free_bytes = free;
    for (int clause = 0; clause < 3 && c.lit(";"); ++clause) {
      const auto value = c.size();
      if (!value) {
        return;
      }
      if (c.lit("allowed")) {
        m.allowed_bytes = value;
      } else if (c.lit("reserved in total by PyTorch")) {
        m.reserved_total_bytes = value;
      } else if (c.lit("cached")) {
        m.reserved_unallocated_bytes = value;
      } else {
        return;
      }
    }
    if (c.lit(")")) {
      pytorch_suggestion(c, m);
    }
    return;
  }
  // 2.x: ". GPU 0 has a total capacity of X of which Y is free. [Process N
  // has Z memory in use. ][Including non-PyTorch memory, this process has P
  // memory in use. ][X allowed; ]Of the allocated memory A is allocated by
  // PyTorch, [with Q allocated in private pools (e.g., CUDA Graphs), ]and U
  // is reserved by PyTorch but unallocated."
  m.format = OomFormat::pytorch2;
  if (m.device.empty()) {
    m.device = "cuda";
  }
  if (!c.lit(".") || !c.lit("GPU")) {
    return;
  }
  const auto idx = c.integer();
  // PyTorch 2.1 printed "capacty".
  if (!idx || !c.lit("has a total capac")) {
    return;
  }
  if (*idx < 4096) {
    m.gpu_index = static_cast<int>(*idx);
  }
  c.lit("i");
  if (!c.lit("ty of")) {
    return;
  }
  m.capacity_bytes = c.size();
  if (!m.capacity_bytes || !c.lit("of which")) {
    return;
  }
  m.free_bytes = c.size();
  if (!m.free_bytes || !c.lit("is free.")) {
    return;
  }
  for (int clause = 0; clause < 256; ++clause) {
    if (c.lit("Process")) {
      const auto pid = c.integer();
      if (!pid || !c.lit("has")) {
        return;
      }
      const auto bytes = c.size();
      if (!bytes || !c.lit("memory in use.")) {
        return;
      }
      add_process(m, *pid, *bytes);
    } else if (c.lit("Including non-PyTorch memory, this process has")) {
      m.process_bytes = c.size();
      if (!m.process_bytes || !c.lit("memory in use.")) {
        return;
      }
    } else {
      const std::size_t save = c.pos();
      const auto allowed = c.size();
      if (allowed && c.lit("allowed;")) {
        m.allowed_bytes = allowed;
        continue;
      }
      c.set(save);
      break;
    }
  }
  if (!c.lit("Of the allocated memory")) {
    return;
  }
  m.allocated_bytes = c.size();
  if (!m.allocated_bytes || !c.lit("is allocated by PyTorch,")) {
    return;
  }
  if (c.lit("with")) {
    // "with 314.00 MiB allocated in private pools (e.g., CUDA Graphs), and".
    if (!c.skip_past("), and", 80)) {
      return;
    }
  } else if (!c.lit("and")) {
    return;
  }
  m.reserved_unallocated_bytes = c.size();
  if (!m.reserved_unallocated_bytes ||
      !c.lit("is reserved by PyTorch but unallocated.")) {
    return;
  }
  pytorch_suggestion(c, m);
}

// "MPS backend out of memory (MPS allocated: X, other allocations: Y, max
// allowed: Z). Tried to allocate W on private pool."
void parse_mps(Cursor& c, OomMessage& m) {
  m.kind = OomKind::mps_allocator;
  m.format = OomFormat::other;
  m.source = "pytorch";
  m.device = "mps";
  if (!c.lit("MPS backend out of memory") || !c.lit("(MPS allocated:")) {
    return;
  }
  m.allocated_bytes = c.size();
  if (!m.allocated_bytes) {
    return;
  }
  if (c.lit(", other allocations:")) {
    if (const auto other = c.size()) {
      m.process_bytes = std::min(k_max_size, *m.allocated_bytes + *other);
    }
  }
  if (c.lit(", max allowed:")) {
    // The allocator's limit (recommendedMaxWorkingSetSize x the watermark
    // ratio): the capacity it works against.
    m.allowed_bytes = c.size();
    m.capacity_bytes = m.allowed_bytes;
  }
  if (c.lit(").") && c.lit("Tried to allocate")) {
    m.requested_bytes = c.size();
    if (c.lit("on private pool") || c.lit("on shared pool")) {
      c.lit(".");
    }
  }
  c.skip_past("(may cause system failure).", 140);
}

// "CUDA error: out of memory" and its boilerplate; "cuda runtime error (2) :
// out of memory at file:line" (PyTorch 0.x); driver "CUDA_ERROR_OUT_OF_MEMORY:
// out of memory".
void parse_cuda_error(Cursor& c, OomMessage& m, std::string_view device) {
  m.kind = OomKind::cuda_error;
  m.format = OomFormat::cuda_runtime;
  m.source = "cuda";
  m.device = device;
  c.skip_past("out of memory", 64);
  c.lit("Search for `cudaErrorMemoryAllocation' in");
  if (c.lit("at")) {
    c.skip_word();
  }
  c.skip_past("for more information.", 120);
  if (c.lit("CUDA kernel errors might be asynchronously reported at some other "
            "API call")) {
    c.skip_past("might be incorrect.", 80);
  }
  if (c.lit("For debugging consider passing CUDA_LAUNCH_BLOCKING=1")) {
    c.lit(".");
  }
  if (c.lit("Compile with `TORCH_USE_CUDA_DSA` to enable device-side "
            "assertions.")) {
  }
}

// NCCL: "Cuda failure 'out of memory'" / "Cuda failure 2 'out of memory'",
// merged with a "Failed to CUDA calloc N bytes" within the next 3 lines; or a
// calloc line alone.
void parse_nccl(std::string_view t, Cursor& c, OomMessage& m) {
  m.kind = OomKind::nccl;
  m.format = OomFormat::nccl;
  m.source = "nccl";
  m.device = "cuda";
  m.gpu_index = bracket_device(t, c.pos());
  if (c.lit("Cuda failure")) {
    c.integer();
    c.lit("'out of memory'");
    // Look for NCCL's calloc line right after.
    std::size_t p = c.pos();
    for (int line = 0; line < 3 && p < t.size(); ++line) {
      p = line_finish(t, p);
      const std::size_t next = p < t.size() ? p + 1 : p;
      const std::size_t calloc =
          find_in(t, "Failed to CUDA calloc", next, line_finish(t, next));
      if (calloc != k_npos) {
        c.set(calloc);
        break;
      }
      p = next;
    }
  }
  if (c.lit("Failed to CUDA calloc")) {
    const auto bytes = c.size();
    if (bytes) {
      m.requested_bytes = bytes;
    } else if (const auto n = c.integer()) {
      m.requested_bytes = std::min<Bytes>(k_max_size, *n);
    }
  }
}

void parse_cublas(Cursor& c, OomMessage& m) {
  m.format = OomFormat::cublas;
  m.kind = OomKind::cublas;
  m.source = "cublas";
  if (c.lit("CUBLAS_STATUS_ALLOC_FAILED")) {
    m.device = "cuda";
  } else if (c.lit("HIPBLAS_STATUS_ALLOC_FAILED")) {
    m.device = "hip";
  }
  if (c.lit("when calling")) {
    c.lit("`");
    if (c.lit("cublasCreate") || c.lit("hipblasCreate")) {
      m.kind = OomKind::cublas_create;
    }
    c.skip_past(")", 40);
    c.lit("`");
  }
}

void parse_xla_device(Cursor& c, OomMessage& m) {
  if (c.lit("on device ordinal")) {
    if (const auto idx = c.integer(); idx && *idx < 4096) {
      m.gpu_index = static_cast<int>(*idx);
    }
  }
}

// The exact byte count XLA prints after a human-readable size:
// "2.99GiB (3206250496B)", "890.06M (933298432 bytes)", "16.00GiB (rounded
// to 17179869184)".
std::optional<Bytes> exact_bytes_after(Cursor& c) {
  const std::size_t save = c.pos();
  if (c.lit("(")) {
    c.lit("rounded to");
    const auto d = c.number(false);
    const std::optional<std::int64_t> n =
        d && d->decimals == 0 ? std::optional<std::int64_t>(d->mantissa)
                              : std::nullopt;
    if (n) {
      if (!c.lit("bytes")) {
        c.lit("B");
      }
      if (c.lit(")")) {
        return std::min<Bytes>(k_max_size, *n);
      }
    }
  }
  c.set(save);
  return std::nullopt;
}

Bytes dtype_size(std::string_view type) {
  if (type == "float" || type == "int32" || type == "uint32") {
    return 4;
  }
  if (type == "half" || type == "bfloat16" || type == "int16") {
    return 2;
  }
  if (type == "double" || type == "int64" || type == "uint64") {
    return 8;
  }
  if (type == "int8" || type == "uint8" || type == "bool") {
    return 1;
  }
  return 0;
}

// XLA / JAX / TF, from the phrase after RESOURCE_EXHAUSTED (or the phrase
// itself).
void parse_xla(std::string_view t, Cursor& c, OomMessage& m,
               std::string_view prefix) {
  m.kind = OomKind::xla_allocation;
  m.format = OomFormat::xla;
  m.source = "xla";
  const std::string_view line = t.substr(
      line_begin(t, c.pos()), line_finish(t, c.pos()) - line_begin(t, c.pos()));
  // TensorFlow's own runtime, named by the glog prefix's source path or
  // the exception (jaxlib's paths also say tensorflow/, under compiler/xla).
  const auto tf_path = [](std::string_view s) {
    return s.find("tensorflow/") != k_npos && s.find("/xla/") == k_npos;
  };
  if (tf_path(line) || tf_path(prefix) ||
      line.find("ResourceExhaustedError") != k_npos ||
      line.find("OOM when allocating") != k_npos) {
    m.source = "tensorflow";
  }
  if (c.lit("RESOURCE_EXHAUSTED") || c.lit("ResourceExhaustedError") ||
      c.lit("Resource exhausted")) {
    c.lit(":");
  }
  if (c.lit("XLA:TPU compile permanent error.")) {
    m.kind = OomKind::xla_compile;
    m.device = "tpu";
  }
  if (c.lit("Out of memory while trying to allocate") ||
      c.lit("Out of memory allocating")) {
    if (const auto n = c.integer()) {
      m.requested_bytes = std::min<Bytes>(k_max_size, *n);
      c.lit("bytes");
      c.lit(".");
    }
    return;
  }
  if (c.lit("Failed to allocate request for")) {
    m.requested_bytes = c.size();
    if (const auto exact = exact_bytes_after(c)) {
      m.requested_bytes = exact;
    }
    parse_xla_device(c, m);
    return;
  }
  if (c.lit("Ran out of memory in memory space")) {
    const std::string_view space = c.word();
    c.skip_word();
    c.lit(".");
    if (m.device.empty()) {
      m.device = "tpu";
    }
    if (c.lit("Used")) {
      m.requested_bytes = c.size();
      if (c.lit("of")) {
        m.capacity_bytes = c.size();
        if (!space.empty()) {
          c.lit(space);
        }
        c.lit(".");
      }
    }
    if (c.lit("Exceeded")) {
      c.skip_past("by", 16);
      c.size();
      c.lit(".");
    }
    return;
  }
  if (c.lit("OOM when allocating tensor with shape[")) {
    // shape[d0,d1,...] and type T on /job:.../device:GPU:N by allocator ...
    Bytes elements = 1;
    bool ok = true;
    for (int dim = 0; dim < 16; ++dim) {
      const auto n = c.integer();
      if (!n) {
        ok = false;
        break;
      }
      elements =
          *n > 0 && elements > k_max_size / *n ? k_max_size : elements * *n;
      if (!c.lit(",")) {
        break;
      }
    }
    if (ok && c.lit("]") && c.lit("and type")) {
      const Bytes per = dtype_size(c.word());
      c.skip_word();
      if (per > 0) {
        m.requested_bytes = std::min(k_max_size, elements * per);
      }
    }
    if (c.skip_past("device:GPU:", 80)) {
      if (const auto idx = c.integer(); idx && *idx < 4096) {
        m.gpu_index = static_cast<int>(*idx);
      }
    }
    c.skip_past("bfc", 40);
    return;
  }
  // "Allocator (GPU_0_bfc) ran out of memory trying to allocate 16.00GiB
  // (rounded to 17179869184)requested by op ..."
  const std::size_t bfc =
      find_in(t, "GPU_", line_begin(t, c.pos()), line_finish(t, c.pos()));
  if (c.lit("ran out of memory trying to allocate")) {
    // TF/XLA's BFC also logs this as a warning it recovers from.
    if (line.find("this is not a failure") != k_npos) {
      m.source = {};
      return;
    }
    m.requested_bytes = c.size();
    if (const auto exact = exact_bytes_after(c)) {
      m.requested_bytes = exact;
    }
    if (bfc != k_npos) {
      Cursor g(t, bfc + 4);
      if (const auto idx = g.integer(); idx && *idx < 4096) {
        m.gpu_index = static_cast<int>(*idx);
      }
    }
    return;
  }
  // Stream executor: "failed to allocate 890.06M (933298432 bytes) from
  // device: CUDA_ERROR_OUT_OF_MEMORY: out of memory" / "failed to alloc N
  // bytes on host: ..." (pinned host memory).
  if (c.lit("failed to allocate") || c.lit("failed to alloc")) {
    m.requested_bytes = c.size();
    if (const auto exact = exact_bytes_after(c)) {
      m.requested_bytes = exact;
    }
    if (c.lit("on host")) {
      m.device = "host";
    } else if (c.lit("from device")) {
      c.lit(":");
    }
    if (c.lit("CUDA_ERROR_OUT_OF_MEMORY")) {
      if (m.device.empty()) {
        m.device = "cuda";
      }
      c.lit(": out of memory");
    } else if (c.lit("HIP_ERROR_OutOfMemory")) {
      if (m.device.empty()) {
        m.device = "hip";
      }
    }
  }
}

void parse_vllm_no_blocks(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_no_cache_blocks;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  c.lit("No available memory for the cache blocks.");
  if (c.lit("Try increasing `gpu_memory_utilization` when initializing the "
            "engine")) {
    c.skip_past(".", 120);
  }
  if (c.lit("See https://docs.vllm.ai/")) {
    c.skip_past("for more details.", 120);
  }
}

void vllm_try_increasing(Cursor& c) {
  if (c.lit("Try increasing")) {
    c.skip_past("when initializing the engine.", 160);
  }
  if (c.lit("See https://docs.vllm.ai/")) {
    c.skip_past("for more details.", 120);
  }
}

// V0: "The model's max seq len (N) is larger than the maximum number of
// tokens that can be stored in KV cache (M)."
void parse_vllm_v0(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_max_seq_len;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  if (!c.lit("The model's max seq len (")) {
    return;
  }
  const auto seq = c.integer();
  if (!seq ||
      !c.lit(") is larger than the maximum number of tokens that can be "
             "stored in KV cache (")) {
    return;
  }
  m.max_seq_len = seq;
  const auto tokens = c.integer();
  if (tokens && c.lit(")")) {
    m.kv_tokens = tokens;
    c.lit(".");
    vllm_try_increasing(c);
  }
}

// V1: "To serve at least one request with the models's max seq len (N), (X
// GiB KV cache is needed, which is larger than the available KV cache memory
// (Y GiB). Based on the available memory, the estimated maximum model length
// is E."
void parse_vllm_v1(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_max_seq_len;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  if (!c.lit("To serve at least one request with the")) {
    return;
  }
  if (!c.lit("models's") && !c.lit("model's")) {
    return;
  }
  if (!c.lit("max seq len")) {
    return;
  }
  c.lit("(");
  const auto seq = c.integer();
  if (!seq || !(c.lit(")") || c.lit(","))) {
    return;
  }
  m.max_seq_len = seq;
  c.lit(",");
  c.lit("(");
  m.requested_bytes = c.size();
  if (!m.requested_bytes ||
      !c.lit("KV cache is needed, which is larger than the available KV cache "
             "memory")) {
    return;
  }
  c.lit("(");
  m.free_bytes = c.size();
  if (!m.free_bytes) {
    return;
  }
  c.lit(")");
  c.lit(".");
  if (c.lit("Based on the available memory, the estimated maximum model length "
            "is")) {
    const auto estimate = c.integer();
    if (estimate && c.lit(".")) {
      m.estimated_max_model_len = estimate;
    }
  }
  vllm_try_increasing(c);
}

// "Free memory on device [cuda:0 ](F/C GiB) on startup is less than desired
// GPU memory utilization (U, R GiB). Decrease GPU memory utilization or
// reduce GPU memory used by other processes."
void parse_vllm_startup(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_startup_free_memory;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  if (!c.lit("Free memory on device")) {
    return;
  }
  if (c.peek() != '(') {
    // "cuda:0", "xpu:0"
    const std::string_view dev = c.word();
    const std::size_t colon = dev.find(':');
    const std::string_view name = dev.substr(0, colon);
    if (name == "cuda") {
      m.device = "cuda";
    } else if (name == "xpu") {
      m.device = "xpu";
    } else if (name == "hip" || name == "rocm") {
      m.device = "hip";
    }
    if (colon != k_npos) {
      Cursor idx(dev, colon + 1);
      if (const auto n = idx.integer(); n && *n < 4096) {
        m.gpu_index = static_cast<int>(*n);
      }
    }
    c.skip_word();
  }
  if (!c.lit("(")) {
    return;
  }
  // "(F/C GiB)": both figures share the unit.
  const auto free = c.number(false);
  if (!free || !c.lit("/")) {
    return;
  }
  const auto total = c.number(false);
  const Bytes unit = total ? c.unit() : 0;
  if (unit == 0) {
    return;
  }
  m.free_bytes = to_bytes(*free, unit);
  m.capacity_bytes = to_bytes(*total, unit);
  if (!c.lit(")") ||
      !c.lit("on startup is less than desired GPU memory utilization (")) {
    return;
  }
  m.gpu_util = c.decimal();
  if (!m.gpu_util || !c.lit(",")) {
    return;
  }
  m.requested_bytes = c.size();
  if (c.lit(").")) {
    c.lit(
        "Decrease GPU memory utilization or reduce GPU memory used by other "
        "processes.");
  }
}

void parse_bitsandbytes(Cursor& c, OomMessage& m) {
  m.kind = OomKind::bitsandbytes;
  m.format = OomFormat::other;
  m.source = "bitsandbytes";
  m.device = "cuda";
  if (c.lit("Error out of memory at line")) {
    c.integer();
    if (c.lit("in file")) {
      c.skip_word();
      // The path runs to the end of the line.
    }
  }
}

// --- the scanner ------------------------------------------------------------

// What a verified anchor found.
enum class Hit {
  none,
  out_of_memory,      // "out of memory" (any case)
  camel_oom,          // "OutOfMemory", "OUT_OF_MEMORY"
  cache_blocks,       // "available memory"
  startup,            // "GPU memory utilization ("
  enough_memory,      // "enough memory"
  vllm_profile,       // "total_gpu_memory"
  deepspeed_usage,    // "see_memory_usage"
  kv_cache,           // "KV cache" / "KV Cache"
  cuda_calloc,        // "CUDA calloc"
  blas_alloc,         // "BLAS_STATUS_ALLOC_FAILED"
  exhausted,          // "exhausted" / "EXHAUSTED"
  tried_to_allocate,  // "Tried to allocate"
  requested,          // "Requested:" (DeepSpeed)
  progress,           // "it/s", "s/it"
};

bool is_context_hit(Hit h) {
  return h == Hit::vllm_profile || h == Hit::deepspeed_usage ||
         h == Hit::requested || h == Hit::progress;
}

// The prefilter: byte pairs that start an anchor, found 16 at a time with
// SSE2 (baseline on x86-64; a scalar loop elsewhere). Pairs rather than
// single bytes keep candidates rare ("ry" of "memory", not every 'y').
//   "ry"/"RY" -> memory / MEMORY   "KV" -> KV cache     "UD" -> CUDA calloc
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
        return p > 0 && s[p - 1] == 'C' && starts_with_at(s, p, "UDA calloc")
                   ? Hit::cuda_calloc
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
    if (ends_before_ci(s, m, "OutOf") || ends_before_ci(s, m, "OUT_OF_")) {
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
    const std::int64_t last_end_buf = m_last_end - m_base;
    std::size_t ws = p > k_lookbehind ? p - k_lookbehind : 0;
    if (last_end_buf > 0 && static_cast<std::size_t>(last_end_buf) > ws) {
      ws = std::min(p, static_cast<std::size_t>(last_end_buf));
    }
    // Context lines need only their own line; messages may span k_ahead.
    std::size_t we = std::min(m_buf.size(), p + k_ahead);
    if (is_context_hit(hit)) {
      const std::size_t lines_needed = hit == Hit::requested ? 3 : 1;
      std::size_t e = p;
      for (std::size_t k = 0; k < lines_needed && e < we; ++k) {
        const void* nl = std::memchr(m_buf.data() + e, '\n', we - e);
        e = nl != nullptr ? static_cast<std::size_t>(
                                static_cast<const char*>(nl) - m_buf.data()) +
                                1
                          : we;
      }
      we = std::min(we, e);
    }
    const bool at_line_start =
        (ws == 0 && m_base == 0) || (ws > 0 && is_break(m_buf[ws - 1]));
    // Most messages end within k_first_ahead bytes: normalize that much
    // first, and the whole k_ahead only when the parse ran into the end.
    const std::int64_t window_line = lines_at(ws);
    std::optional<Parsed> parsed;
    std::size_t np = 0;
    for (const std::size_t ahead : {k_first_ahead, k_ahead}) {
      const std::size_t end = std::min(we, p + ahead);
      m_raw_window = std::string_view(m_buf).substr(ws, end - ws);
      normalize(m_raw_window, at_line_start, m_window);
      const std::string_view t = m_window.view();
      // The hit's position in the window text.
      const auto map_end =
          m_window.map.begin() + static_cast<std::ptrdiff_t>(m_window.length);
      const auto it = std::lower_bound(m_window.map.begin(), map_end,
                                       static_cast<std::uint32_t>(p - ws));
      np = static_cast<std::size_t>(it - m_window.map.begin());
      if (is_context_hit(hit)) {
        read_context(t, np, hit, window_line);
        return p + 1;
      }
      parsed = parse(t, np, hit);
      const bool cut = end < we;
      const std::size_t reached = parsed ? parsed->end : np;
      if (!cut || reached + 256 < t.size()) {
        break;
      }
    }
    const std::string_view t = m_window.view();
    if (!parsed) {
      // Context phrases that share an anchor with messages ("Available KV
      // cache memory", "reserved for KV Cache is").
      if (hit == Hit::kv_cache) {
        read_context(t, np, hit, window_line);
      }
      return p + 1;
    }
    Parsed& r = *parsed;
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
    LogContext& ctx = m_d.context;
    if (hit == Hit::requested) {
      // "Requested:\t104873984", then "Free:\t..." and "Total:\t..." lines.
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
      return;
    }
    if (m_context_frozen) {
      return;
    }
    if (hit == Hit::deepspeed_usage) {
      // "[utils.py:830:see_memory_usage] MA 0.12 GB Max_MA 0.12 GB CA 0.31 GB"
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
      return;
    }
    if (hit == Hit::vllm_profile) {
      // V0.5: "Memory profiling results: total_gpu_memory=23.58GiB ...
      // kv_cache_size=2.89GiB gpu_memory_utilization=0.90"; V0.6:
      // "total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = ...".
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
      return;
    }
    if (hit == Hit::kv_cache) {
      // V1 "Available KV cache memory: 19.5 GiB"; V0.6 "the rest of the memory
      // reserved for KV Cache is 55.00GiB."
      for (const std::string_view phrase :
           {"Available KV cache memory:", "reserved for KV Cache is"}) {
        Cursor c(line, 0);
        if (c.skip_past(phrase, line.size())) {
          if (const auto kv = c.size()) {
            ctx.vllm_kv_cache_bytes = kv;
          }
        }
      }
    }
  }

  // --- dispatch ---
  std::optional<Parsed> parse(std::string_view t, std::size_t np, Hit hit) {
    if (np >= t.size()) {
      return std::nullopt;
    }
    const std::size_t lb = line_begin(t, np);
    Parsed r;
    OomMessage& m = r.message;
    std::size_t start = k_npos;
    auto run = [&](std::size_t s, auto&& grammar) {
      if (s >= t.size()) {
        return;
      }
      start = s;
      Cursor c(t, s);
      grammar(c);
      r.start = s;
      r.end = std::max(c.pos(), s + 1);
    };
    switch (hit) {
      case Hit::out_of_memory: {
        // np is the 'y' of "memory"; "out of memory" starts 12 before.
        if (np < 12) {
          return std::nullopt;
        }
        const std::size_t oom = np - 12;
        const std::string_view line = t.substr(lb, line_finish(t, np) - lb);
        if (ends_before_ci(t, oom, "MPS backend ")) {
          run(oom - 12, [&](Cursor& c) { parse_mps(c, m); });
        } else if (ends_before_ci(t, oom, "CUDA error: ") ||
                   ends_before_ci(t, oom, "HIP error: ")) {
          const bool hip = ends_before_ci(t, oom, "HIP error: ");
          run(oom - (hip ? 11 : 12),
              [&](Cursor& c) { parse_cuda_error(c, m, hip ? "hip" : "cuda"); });
        } else if (ends_before_ci(t, oom, "CUDA ") ||
                   ends_before_ci(t, oom, "HIP ") ||
                   ends_before_ci(t, oom, "XPU ")) {
          const std::size_t s = oom - (ends_before_ci(t, oom, "CUDA ") ? 5 : 4);
          const bool runtime_error = ends_before_ci(t, s, "RuntimeError: ");
          run(s,
              [&](Cursor& c) { parse_caching_allocator(c, m, runtime_error); });
          if (m.source.empty()) {
            return std::nullopt;
          }
        } else if (const std::size_t failure =
                       rfind_in(t, "Cuda failure", lb, oom);
                   failure != k_npos && oom > 0 && t[oom - 1] == '\'') {
          run(failure, [&](Cursor& c) { parse_nccl(t, c, m); });
        } else if (ends_before_ci(t, oom, "Error ") &&
                   starts_with_ci(t, np + 1, " at line")) {
          run(oom - 6, [&](Cursor& c) { parse_bitsandbytes(c, m); });
        } else if (const std::size_t thc =
                       rfind_in(t, "THCudaCheck FAIL", lb, oom);
                   thc != k_npos && ends_before_ci(t, oom, ": ")) {
          // PyTorch 0.x logs the CUDA error before raising it.
          run(thc, [&](Cursor& c) { parse_cuda_error(c, m, "cuda"); });
        } else if (const std::size_t rt =
                       rfind_in(t, "runtime error (", lb, oom);
                   rt != k_npos && ends_before_ci(t, oom, ": ")) {
          const std::size_t s =
              rt >= 5 && ends_before_ci(t, rt, "cuda ") ? rt - 5 : rt;
          run(s, [&](Cursor& c) { parse_cuda_error(c, m, "cuda"); });
        } else if (ends_before_ci(t, oom, "Ran ") ||
                   starts_with_at(t, oom, "Out of memory while trying") ||
                   starts_with_at(t, oom, "Out of memory allocating") ||
                   ends_before_ci(t, oom, "ran ")) {
          // XLA; start at RESOURCE_EXHAUSTED / "Resource exhausted" when it
          // leads the line (an exhausted hit would have parsed it already).
          const std::size_t s = ends_before_ci(t, oom, "ran ")   ? oom - 4
                                : ends_before_ci(t, oom, "Ran ") ? oom - 4
                                                                 : oom;
          run(s, [&](Cursor& c) { parse_xla(t, c, m, prefix_at(t, c.pos())); });
        } else if (ends_before_ci(t, oom, ": ") &&
                   (ends_before_ci(t, oom - 2, "CUDA_ERROR_OUT_OF_MEMORY") ||
                    ends_before_ci(t, oom - 2, "cudaErrorMemoryAllocation") ||
                    ends_before_ci(t, oom - 2, "hipErrorOutOfMemory"))) {
          const std::size_t failed = rfind_in(t, "failed to alloc", lb, oom);
          if (failed != k_npos) {
            run(failed,
                [&](Cursor& c) { parse_xla(t, c, m, prefix_at(t, c.pos())); });
          } else {
            const std::size_t s =
                rfind_in(t, "CUDA_ERROR_OUT_OF_MEMORY", lb, oom) != k_npos
                    ? rfind_in(t, "CUDA_ERROR_OUT_OF_MEMORY", lb, oom)
                    : line_begin(t, oom);
            run(s, [&](Cursor& c) { parse_cuda_error(c, m, "cuda"); });
          }
        } else if (contains_gpu_word(line)) {
          run(oom, [&](Cursor& c) {
            m.kind = OomKind::generic;
            m.format = OomFormat::other;
            c.lit("out of memory");
          });
        } else {
          return std::nullopt;
        }
        break;
      }
      case Hit::camel_oom: {
        // torch.OutOfMemoryError / CUDA_ERROR_OUT_OF_MEMORY with the words
        // "out of memory" close after: that hit parses it.
        // The words follow on the same line, or on the next one when the
        // exception name ends its line ("torch.OutOfMemoryError:\nCUDA out of
        // memory.", huggingface/trl#3172).
        std::size_t to = line_finish(t, np);
        if (starts_with_at(t, np + 1, "Error:")) {
          std::size_t rest = np + 7;
          while (rest < to && t[rest] == ' ') {
            ++rest;
          }
          if (rest == to && to < t.size()) {
            to = line_finish(t, to + 1);
          }
        }
        if (find_ci(t, "out of memory", np, to) != k_npos) {
          return std::nullopt;
        }
        const std::string_view line = t.substr(lb, line_finish(t, np) - lb);
        const std::size_t failed = rfind_in(t, "failed to alloc", lb, np);
        if (failed != k_npos) {
          run(failed,
              [&](Cursor& c) { parse_xla(t, c, m, prefix_at(t, c.pos())); });
        } else if (line.find("HIP_ERROR_OutOfMemory") != k_npos ||
                   line.find("hipErrorOutOfMemory") != k_npos) {
          run(word_begin(t, np),
              [&](Cursor& c) { parse_cuda_error(c, m, "hip"); });
        } else if (line.find("CUDA_ERROR_OUT_OF_MEMORY") != k_npos) {
          run(line_begin(t, np) + line.find("CUDA_ERROR_OUT_OF_MEMORY"),
              [&](Cursor& c) { parse_cuda_error(c, m, "cuda"); });
        } else {
          return std::nullopt;
        }
        break;
      }
      case Hit::cache_blocks: {
        const std::size_t s = rfind_in(t, "No available memory", lb, np);
        if (s == k_npos) {
          return std::nullopt;
        }
        run(s, [&](Cursor& c) { parse_vllm_no_blocks(c, m); });
        break;
      }
      case Hit::startup: {
        const std::size_t s =
            rfind_in(t, "Free memory on device", np > 200 ? np - 200 : 0, np);
        if (s == k_npos) {
          return std::nullopt;
        }
        run(s, [&](Cursor& c) { parse_vllm_startup(c, m); });
        break;
      }
      case Hit::enough_memory: {
        const std::size_t s =
            rfind_in(t, "Workspace can't be allocated", lb, np);
        if (s == k_npos) {
          return std::nullopt;
        }
        run(s, [&](Cursor& c) {
          m.kind = OomKind::deepspeed_workspace;
          m.format = OomFormat::other;
          m.source = "deepspeed";
          m.device = "cuda";
          c.skip_past("no enough memory.", 64);
        });
        break;
      }
      case Hit::kv_cache: {
        const std::size_t from = np > 480 ? np - 480 : 0;
        std::size_t s = rfind_ws(t, "To serve at least one request", from, np);
        if (s != k_npos) {
          run(s, [&](Cursor& c) { parse_vllm_v1(c, m); });
          if (!m.requested_bytes) {
            return std::nullopt;
          }
          break;
        }
        s = rfind_in(t, "The model's max seq len (", from, np);
        if (s == k_npos) {
          s = rfind_ws(t, "The model's max seq len (", from, np);
        }
        if (s != k_npos) {
          run(s, [&](Cursor& c) { parse_vllm_v0(c, m); });
          if (!m.kv_tokens) {
            return std::nullopt;
          }
          break;
        }
        return std::nullopt;
      }
      case Hit::cuda_calloc: {
        const std::size_t s = rfind_in(t, "Failed to CUDA calloc", lb, np);
        if (s == k_npos) {
          return std::nullopt;
        }
        run(s, [&](Cursor& c) { parse_nccl(t, c, m); });
        break;
      }
      case Hit::blas_alloc: {
        const std::size_t s = np >= 3 && ends_before_ci(t, np, "HIP")
                                  ? np - 3
                                  : (np >= 2 ? np - 2 : np);
        run(s, [&](Cursor& c) { parse_cublas(c, m); });
        break;
      }
      case Hit::exhausted: {
        // The word before "xhausted": RESOURCE_EXHAUSTED, Resource exhausted,
        // ResourceExhaustedError.
        std::size_t s = np;
        while (s > lb && (is_alpha(t[s - 1]) || t[s - 1] == '_')) {
          --s;
        }
        if (ends_before_ci(t, s, "Resource ")) {
          s -= 9;
        }
        Cursor probe(t, s);
        probe.skip_word();
        probe.lit("exhausted");
        probe.lit("Error");
        probe.lit(":");
        static constexpr std::array<std::string_view, 8> k_next{
            "Out of memory",
            "Failed to allocate request",
            "XLA:TPU compile permanent error",
            "Ran out of memory",
            "OOM when allocating",
            "failed to allocate",
            "failed to alloc",
            "ran out of memory"};
        const bool ours =
            std::any_of(k_next.begin(), k_next.end(),
                        [&](std::string_view p) { return probe.peek_lit(p); });
        if (!ours) {
          return std::nullopt;
        }
        run(s, [&](Cursor& c) { parse_xla(t, c, m, prefix_at(t, c.pos())); });
        break;
      }
      case Hit::tried_to_allocate: {
        // A fragment pasted without its "CUDA out of memory." head.
        run(np, [&](Cursor& c) { parse_caching_allocator(c, m, false); });
        if (!m.capacity_bytes) {
          return std::nullopt;
        }
        break;
      }
      default:
        return std::nullopt;
    }
    if (start == k_npos || m.source.empty() || in_source_line(t, start)) {
      return std::nullopt;
    }
    return r;
  }

  // A traceback quoting the engine's source ("raise ValueError(\"No
  // available memory for the cache blocks. \"") is not a message.
  static bool in_source_line(std::string_view t, std::size_t start) {
    const std::size_t b = line_begin(t, start);
    std::size_t q = start;
    while (q > b && t[q - 1] == ' ') {
      --q;
    }
    if (q == b || (t[q - 1] != '"' && t[q - 1] != '\'')) {
      return false;
    }
    return t.substr(b, q - b).find("raise ") != k_npos;
  }

  // The raw prefix removed from the line holding text offset `at`.
  std::string_view prefix_at(std::string_view t, std::size_t at) const {
    const std::size_t b = line_begin(t, at);
    for (const Window::Prefix& p : m_window.prefixes) {
      if (p.text_line == b) {
        return m_raw_window.substr(p.raw_begin, p.raw_end - p.raw_begin);
      }
    }
    return {};
  }

  static std::size_t find_ci(std::string_view t, std::string_view s,
                             std::size_t from, std::size_t to) {
    to = std::min(to, t.size());
    for (std::size_t p = from; p + s.size() <= to; ++p) {
      if (starts_with_ci(t, p, s)) {
        return p;
      }
    }
    return k_npos;
  }

  // The message text: whitespace collapsed, at most k_text_chars characters,
  // invalid UTF-8 replaced by U+FFFD.
  static std::string message_text(std::string_view t, std::size_t start,
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

  // Length of a valid UTF-8 sequence at i (< end), or 0.
  static std::size_t utf8_length(std::string_view t, std::size_t i,
                                 std::size_t end) {
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

Diagnosis diagnose(std::string_view log) {
  LogScanner scanner;
  scanner.feed(log);
  return scanner.finish();
}

}  // namespace oomplan
