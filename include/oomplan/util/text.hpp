#pragma once

// Text helpers for messages that echo user input (names, keys, values, paths).

#include <cstddef>
#include <string>
#include <string_view>

namespace oomplan {

// Longest run of user text an error message echoes; longer text is cut (a
// 100,000-character model name must not become a 100,000-character message).
inline constexpr std::size_t k_max_echo_bytes = 200;

// `text` made safe to print inside a one-line message: control characters
// (C0, DEL, C1), bidirectional controls (U+202E, ...) and bytes that are not
// UTF-8 become escapes (\n, \t, \r, \\x1b,
// \u0085), so the message stays one line and prints nothing to the terminal
// but text; text over k_max_echo_bytes is cut at a character boundary and
// ends in "...(N more bytes)". Plain printable text, UTF-8 included, is
// returned unchanged.
std::string escape_for_message(std::string_view text);

// The same with another cut-off, for text that is mostly ours (a library's
// message quoting a few bytes of input).
std::string escape_for_message(std::string_view text, std::size_t max_bytes);

// A text or Markdown report made safe for a terminal or a PR comment, at the
// edge where it is printed:
// the same escapes as escape_for_message, bidirectional controls included,
// but lines kept and nothing cut; with `keep_colour`, SGR sequences (ESC [
// ... m, colours and bold) are kept. Whatever a config, a log or a name
// holds, the output holds no control but newline and colour.
std::string inert_text(std::string_view text, bool keep_colour);

// Quotes `word` for a POSIX shell when it holds anything but safe characters.
std::string shell_word(const std::string& word);

// ASCII case-insensitive equality (model, GPU and folder names).
bool iequals(std::string_view a, std::string_view b);

}  // namespace oomplan
