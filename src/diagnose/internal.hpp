#pragma once

// Shared by the diagnose sources: sizes shown the way PyTorch prints them.

#include "oomplan/util/units.hpp"

#include <fmt/format.h>

#include <string>

namespace oomplan::diag {

// As c10 CUDACachingAllocator.cpp format_size() prints sizes: "N bytes" up to
// 1 KiB, else two decimals in KiB, MiB or GiB, so evidence quotes the figures
// the log shows.
inline std::string size(Bytes b) {
  if (b <= 1024) {
    return fmt::format("{} bytes", b);
  }
  const auto d = static_cast<double>(b);
  if (b <= k_mib) {
    return fmt::format("{:.2f} KiB", d / static_cast<double>(k_kib));
  }
  if (b <= k_gib) {
    return fmt::format("{:.2f} MiB", d / static_cast<double>(k_mib));
  }
  return fmt::format("{:.2f} GiB", d / static_cast<double>(k_gib));
}

}  // namespace oomplan::diag
