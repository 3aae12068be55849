#pragma once

#include <stdexcept>
#include <string>

namespace oomplan {

// Bad input: an unknown name, a malformed catalog or config, an impossible
// setting. The message is complete and actionable ("unknown GPU 'A100-90'; did
// you mean A100-80?"); the CLI prints it once as "oomplan: error: <message>"
// and exits 2.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace oomplan
