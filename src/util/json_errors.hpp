#pragma once

// Private to the core: turning nlohmann exceptions into users' messages, and
// the checks that run on JSON text before nlohmann sees it.

#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace oomplan {

// Strips nlohmann's "[json.exception.type_error.302] " prefix (users need the
// problem, not the exception id) and the bytes of the file a parse error
// quotes ("; last read: '...'"): a config may name any file, and an error
// about it must not copy that file's content into a CI log. The line and
// column stay.
inline std::string strip_json_prefix(const std::string& what) {
  std::string_view text = what;
  if (text.rfind("[json.exception.", 0) == 0) {
    const auto close = text.find("] ");
    if (close != std::string_view::npos) {
      text.remove_prefix(close + 2);
    }
  }
  if (const auto quoted = text.find("; last read: '");
      quoted != std::string_view::npos) {
    text = text.substr(0, quoted);
  }
  return escape_for_message(text, 1000);
}

// `doc` as JSON text, a byte that is not UTF-8 (a file name, a YAML value)
// written as U+FFFD instead of nlohmann's type_error.316, which would make
// bad input an internal error (exit 3). Every dump of oomplan's goes here.
template <typename Json>
std::string json_text(const Json& doc, int indent = -1) {
  return doc.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// Deepest nesting a config or catalog may have. Real files nest 4 levels
// (quantization_config.config_groups.group_0.weights); nlohmann parses any
// depth, but copying and printing a value recurse once per level, so a 16 MB
// "[[[[..." would overflow the stack.
inline constexpr std::size_t k_max_json_depth = 64;

// Throws Error "`where`: JSON nested deeper than 64 levels" when `text` opens
// more than k_max_json_depth arrays and objects at once. One pass over the
// bytes; strings (with their escapes) are skipped.
inline void check_json_depth(std::string_view text, std::string_view where) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > k_max_json_depth) {
        throw Error(fmt::format("{}: JSON nested deeper than {} levels", where,
                                k_max_json_depth));
      }
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace oomplan
