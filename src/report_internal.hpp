#pragma once

// Private to the renderers: what the plan, sizing and fit reports share.

#include "oomplan/gpu.hpp"
#include "oomplan/model.hpp"
#include "oomplan/setup.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace oomplan {

// The report's setup line: "llama-3-70b (70.55B params) on 4 x A100-80:
// infer (hf), seq 8192, ...", each fragment from its option-table row;
// without a card (`gpu` null) the hardware rows are left out.
std::string setup_line(const Model& model, const Gpu* gpu, const Setup& request,
                       const Resolved& setup);

// The JSON `setup` object: every row's resolved value under its key.
nlohmann::ordered_json setup_json(const Model& model, const Gpu& gpu,
                                  const Setup& request, const Resolved& setup);

// "70.55B"
std::string billions(std::int64_t params);

}  // namespace oomplan
