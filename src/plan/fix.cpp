#include "oomplan/plan/fix.hpp"

namespace oomplan {

std::string_view risk_name(Risk risk) {
  switch (risk) {
    case Risk::none:
      return "none";
    case Risk::low:
      return "low";
    case Risk::moderate:
      return "moderate";
  }
  return "none";
}

std::string_view fix_group_name(FixGroup group) {
  switch (group) {
    case FixGroup::same_hardware:
      return "same-hardware";
    case FixGroup::more_gpus:
      return "more-gpus";
    case FixGroup::other_gpus:
      return "other-gpus";
    case FixGroup::change_job:
      return "change-job";
    case FixGroup::switch_framework:
      return "switch-framework";
  }
  return "same-hardware";
}

}  // namespace oomplan
