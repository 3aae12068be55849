#pragma once

// A software release by number (vLLM 0.6.5, transformers 4.41): the tables
// that change behaviour by release compare against one.

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace oomplan {

// `patch` k_any_patch stands for "the newest X.Y.Z" (what "0.6" means).
inline constexpr int k_any_patch = 99;

struct Release {
  int major = 0;
  int minor = 0;
  int patch = 0;
  friend auto operator<=>(const Release&, const Release&) = default;
};

// "0.19", "4.41.2", "v0.8.5" -> release ("0.6" -> 0.6.99); nullopt when
// unparsable (numbers of at most 4 digits).
std::optional<Release> release_from_text(std::string_view text);
// "0.19", "0.6.5", "0.6" (for patch k_any_patch).
std::string release_text(Release release);

}  // namespace oomplan
