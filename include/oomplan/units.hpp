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
inline Bytes round_bytes(double bytes) {
  return static_cast<Bytes>(std::llround(bytes));
}

// Bytes -> GiB (2^30) for display only.
inline double to_gib(Bytes bytes) {
  return static_cast<double>(bytes) / static_cast<double>(k_gib);
}

// Formats `bytes` as GiB with two decimals, e.g. "131.42 GiB".
std::string format_gib(Bytes bytes);

}  // namespace oomplan
