#include "oomplan/memory.hpp"

namespace oomplan {

Bytes weight_bytes(const Model& /*model*/, const Setup& /*setup*/,
                   const WeightShare& /*share*/) {
  return 0;
}

Bytes kv_bytes_per_token(const Model& /*model*/, const Setup& /*setup*/,
                         std::int64_t /*layer_begin*/,
                         std::int64_t /*layer_end*/) {
  return 0;
}

Bytes kv_cache_bytes(const Model& /*model*/, const Setup& /*setup*/,
                     std::int64_t /*layer_begin*/, std::int64_t /*layer_end*/,
                     std::int64_t /*batch*/, std::int64_t /*seq*/) {
  return 0;
}

Bytes runtime_overhead_bytes(const Gpu& /*gpu*/, const Setup& /*setup*/) {
  return 0;
}

}  // namespace oomplan
