#include "oomplan/util/units.hpp"

#include <fmt/format.h>

namespace oomplan {

std::string format_gib(Bytes bytes) {
  return fmt::format("{:.2f} GiB", to_gib(bytes));
}

}  // namespace oomplan
