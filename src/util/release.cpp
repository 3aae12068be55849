#include "oomplan/util/release.hpp"

#include <fmt/format.h>

namespace oomplan {

std::optional<Release> release_from_text(std::string_view text) {
  // "X.Y" or "X.Y.Z", an optional leading 'v'; numbers of at most 4 digits.
  std::size_t i = 0;
  auto read_number = [&](int& out) {
    const std::size_t start = i;
    out = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' &&
           i - start < 4) {
      out = out * 10 + (text[i] - '0');
      ++i;
    }
    return i > start;
  };
  if (!text.empty() && text[0] == 'v') {
    ++i;
  }
  Release release{0, 0, k_any_patch};
  if (!read_number(release.major) || i >= text.size() || text[i] != '.') {
    return std::nullopt;
  }
  ++i;
  if (!read_number(release.minor)) {
    return std::nullopt;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!read_number(release.patch) || release.patch >= k_any_patch) {
      return std::nullopt;
    }
  }
  if (i != text.size()) {
    return std::nullopt;
  }
  return release;
}

std::string release_text(Release release) {
  if (release.patch != k_any_patch && release.patch != 0) {
    return fmt::format("{}.{}.{}", release.major, release.minor, release.patch);
  }
  return fmt::format("{}.{}", release.major, release.minor);
}

}  // namespace oomplan
