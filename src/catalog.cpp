#include "oomplan/catalog.hpp"

#include "oomplan/error.hpp"

namespace oomplan {

Catalog parse_catalog(std::string_view /*text*/, std::string_view /*origin*/) {
  return {};
}

void merge_catalog(Catalog& /*base*/, Catalog /*extra*/) {}

Catalog builtin_catalog() {
  return {};
}

const Model& find_model(const Catalog& /*catalog*/, std::string_view name) {
  throw Error("unknown model '" + std::string(name) + "'");
}

const Gpu& find_gpu(const Catalog& /*catalog*/, std::string_view name) {
  throw Error("unknown GPU '" + std::string(name) + "'");
}

GpuSpec parse_gpu_spec(const Catalog& /*catalog*/, std::string_view /*spec*/) {
  return {};
}

std::optional<std::string> suggest(
    std::string_view /*word*/, const std::vector<std::string>& /*candidates*/) {
  return std::nullopt;
}

}  // namespace oomplan
