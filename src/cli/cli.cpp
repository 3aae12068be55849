#include "cli/cli.hpp"

#include <ostream>

namespace oomplan::cli {

int run(const std::vector<std::string>& /*args*/, std::ostream& /*out*/,
        std::ostream& err, bool /*out_is_terminal*/, bool /*no_color*/) {
  err << "oomplan: error: not implemented\n";
  return k_exit_bad_input;
}

}  // namespace oomplan::cli
