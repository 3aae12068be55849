#include "diagnose/cursor.hpp"

#include <array>
#include <cmath>

namespace oomplan::diag {

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

Bytes to_bytes(Decimal d, Bytes unit) {
  if (d.mantissa < 0 || unit <= 0) {
    return 0;
  }
  if (d.huge) {
    return k_max_size;
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

std::size_t word_begin(std::string_view t, std::size_t pos) {
  while (pos > 0 && (is_alpha(t[pos - 1]) || is_digit(t[pos - 1]) ||
                     t[pos - 1] == '_' || t[pos - 1] == '.')) {
    --pos;
  }
  return pos;
}

std::size_t find_in(std::string_view t, std::string_view s, std::size_t from,
                    std::size_t to) {
  to = std::min(to, t.size());
  if (from >= to || to - from < s.size()) {
    return k_npos;
  }
  const std::size_t p = t.substr(from, to - from).find(s);
  return p == k_npos ? k_npos : from + p;
}

std::size_t find_ci(std::string_view t, std::string_view s, std::size_t from,
                    std::size_t to) {
  to = std::min(to, t.size());
  for (std::size_t p = from; p + s.size() <= to; ++p) {
    if (starts_with_ci(t, p, s)) {
      return p;
    }
  }
  return k_npos;
}

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

}  // namespace oomplan::diag
