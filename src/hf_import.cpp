#include "oomplan/catalog.hpp"
#include "oomplan/error.hpp"

namespace oomplan {

Model import_hf_config(std::string_view /*config_text*/,
                       std::string_view origin,
                       std::optional<std::string_view> /*index_text*/) {
  throw Error(std::string(origin) + ": not implemented");
}

}  // namespace oomplan
