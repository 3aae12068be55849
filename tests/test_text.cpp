#include "oomplan/util/text.hpp"

#include <catch2/catch.hpp>

#include <string>

using oomplan::escape_for_message;

TEST_CASE("text: printable text, UTF-8 included, is echoed unchanged",
          "[text]") {
  CHECK(escape_for_message("llama3-70b") == "llama3-70b");
  CHECK(escape_for_message("caf\xc3\xa9 \xe2\x82\xac 4\xc3\x97H100") ==
        "caf\xc3\xa9 \xe2\x82\xac 4\xc3\x97H100");
  CHECK(escape_for_message("") == "");
}

TEST_CASE("text: control characters become escapes on one line", "[text]") {
  // D5: a newline in a model name used to split the error into two lines.
  CHECK(escape_for_message("a\nb") == "a\\nb");
  CHECK(escape_for_message("a\tb\rc") == "a\\tb\\rc");
  // ESC would start a terminal control sequence; NUL and DEL likewise.
  CHECK(escape_for_message("\x1b[31mred") == "\\x1b[31mred");
  CHECK(escape_for_message(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(escape_for_message("\x7f") == "\\x7f");
  // C1 NEL (U+0085) and the Unicode line separator U+2028.
  CHECK(escape_for_message("a\xc2\x85"
                           "b") == "a\\u0085b");
  CHECK(escape_for_message("a\xe2\x80\xa8"
                           "b") == "a\\u2028b");
}

TEST_CASE("text: bytes that are not UTF-8 are escaped one by one", "[text]") {
  CHECK(escape_for_message("\xff") == "\\xff");
  // A truncated sequence, an overlong '/', and a UTF-16 surrogate.
  CHECK(escape_for_message("a\xe2\x82") == "a\\xe2\\x82");
  CHECK(escape_for_message("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(escape_for_message("\xed\xa0\x80") == "\\xed\\xa0\\x80");
}

TEST_CASE("text: long text is cut at a character boundary", "[text]") {
  const std::string long_name(300, 'x');
  CHECK(escape_for_message(long_name) ==
        std::string(200, 'x') + "...(100 more bytes)");
  // A two-byte character straddling byte 200 is kept whole.
  const std::string straddle = std::string(199, 'x') + "\xc3\xa9" + "yz";
  CHECK(escape_for_message(straddle) ==
        std::string(199, 'x') + "\xc3\xa9" + "...(2 more bytes)");
  CHECK(escape_for_message(std::string(200, 'x')) == std::string(200, 'x'));
}
