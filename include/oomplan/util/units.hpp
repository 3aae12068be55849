#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace oomplan {

// Every memory quantity is a whole number of bytes.
using Bytes = std::int64_t;

inline constexpr Bytes k_kib = Bytes{1} << 10;
inline constexpr Bytes k_mib = Bytes{1} << 20;
inline constexpr Bytes k_gib = Bytes{1} << 30;

// Rounds a byte count computed in double (fractional bits per parameter,
// scales) to the nearest byte. Each term is rounded once, so components sum
// exactly to their total.
// Half away from zero, as std::llround, without its library call (the core
// rounds tens of terms per priced setup): exact below 2^53, where a double
// still has a fraction; above it every double is whole. Callers keep
// `bytes` inside int64 (saturated_bytes).
inline Bytes round_bytes(double bytes) {
  const auto whole = static_cast<Bytes>(bytes);
  const double fraction = bytes - static_cast<double>(whole);
  return whole + (fraction >= 0.5 ? 1 : 0) - (fraction <= -0.5 ? 1 : 0);
}

// Bytes -> GiB (2^30) for display only.
inline double to_gib(Bytes bytes) {
  return static_cast<double>(bytes) / static_cast<double>(k_gib);
}

// Formats `bytes` as GiB with two decimals, e.g. "131.42 GiB".
std::string format_gib(Bytes bytes);

}  // namespace oomplan
