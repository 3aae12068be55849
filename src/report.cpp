#include "oomplan/report.hpp"

namespace oomplan {

std::string render_text(const Plan& /*plan*/,
                        const RenderOptions& /*options*/) {
  return {};
}

std::string render_json(const Plan& /*plan*/) {
  return {};
}

std::string render_markdown(const Plan& /*plan*/) {
  return {};
}

std::vector<std::string> warning_texts(const Plan& /*plan*/) {
  return {};
}

}  // namespace oomplan
