#include "oomplan/report.hpp"

namespace oomplan {

std::string plan_args(const std::string& model_arg, const Gpu& /*gpu*/,
                      const Setup& /*setup*/) {
  return model_arg;
}

}  // namespace oomplan
