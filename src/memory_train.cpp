#include "memory_internal.hpp"

namespace oomplan {

void add_training(const Model& /*model*/, const Gpu& /*gpu*/,
                  const Setup& /*setup*/, Budget& /*budget*/) {}

}  // namespace oomplan
