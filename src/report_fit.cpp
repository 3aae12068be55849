#include "oomplan/report.hpp"

namespace oomplan {

std::string render_fit_text(const FitResult& /*result*/, const Model& /*model*/,
                            const std::string& /*model_arg*/) {
  return {};
}

std::string render_fit_json(const FitResult& /*result*/, const Model& /*model*/,
                            const std::string& /*model_arg*/) {
  return {};
}

std::string render_fit_markdown(const FitResult& /*result*/,
                                const Model& /*model*/,
                                const std::string& /*model_arg*/) {
  return {};
}

}  // namespace oomplan
