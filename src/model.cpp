#include "oomplan/model.hpp"

namespace oomplan {

ParamCounts count_params(const Model& /*model*/) {
  return {};
}

std::int64_t layer_params(const Model& /*model*/, std::int64_t /*layer*/) {
  return 0;
}

bool is_local_layer(const Model& model, std::int64_t layer) {
  if (model.sliding_window <= 0) {
    return false;
  }
  return model.global_every == 0 || (layer + 1) % model.global_every != 0;
}

bool is_moe_layer(const Model& model, std::int64_t layer) {
  if (model.num_experts == 0 || layer < model.first_k_dense) {
    return false;
  }
  return (layer + 1) % model.moe_every == 0;
}

}  // namespace oomplan
