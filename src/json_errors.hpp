#pragma once

// Private to the core: turning nlohmann exceptions into users' messages.

#include <string>

namespace oomplan {

// Strips nlohmann's "[json.exception.type_error.302] " prefix: users need the
// problem, not the exception id.
inline std::string strip_json_prefix(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0) {
    const auto close = what.find("] ");
    if (close != std::string::npos) {
      return what.substr(close + 2);
    }
  }
  return what;
}

}  // namespace oomplan
