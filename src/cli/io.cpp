#include "cli/io.hpp"

#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <fstream>
#include <system_error>
#include <vector>

namespace oomplan::cli {

namespace fs = std::filesystem;

bool is_regular(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(fs::status(path, ec));
}

std::string read_input_file(const fs::path& path, std::string_view what,
                            std::uintmax_t max_bytes) {
  const std::string name = one_line(path.string());
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw Error(fmt::format("no such file '{}'", name));
  }
  if (!fs::is_regular_file(status)) {
    // Opening a FIFO would block and a device (/dev/zero) never ends.
    throw Error(fmt::format(
        "'{}' is not a regular file; give the {} itself, not a folder, pipe "
        "or device",
        name, what));
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > max_bytes) {
    throw Error(fmt::format(
        "'{}' is larger than the {} MiB limit for a {}; is it the right file?",
        name, max_bytes >> 20, what));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(fmt::format("cannot read '{}'", name));
  }
  // Read at most the limit, even if the file grew since the size check.
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    throw Error(fmt::format("cannot read '{}'", name));
  }
  return text;
}

std::string one_line(std::string_view message) {
  return escape_for_message(message, std::string_view::npos);
}

}  // namespace oomplan::cli
