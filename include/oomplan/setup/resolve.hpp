#pragma once

// From what the user asked (Setup) to what runs (Resolved), and whether it
// can run: the first two steps of every plan (plan/plan.hpp chains them with
// the memory model).

#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/setup/setup.hpp"

#include <optional>
#include <string>

namespace oomplan {

// Fills every default of `setup` for `model` on `gpu`: tp, quant, KV dtype,
// ZeRO stage, max-model-len, the vLLM scheduler budget. Pure and total: an
// invalid setup resolves to something check() rejects.
Resolved resolve(const Model& model, const Gpu& gpu, const Setup& setup);
// resolve(...).dp() without the rest of resolve (the search asks it for
// every setup it builds).
int resolved_dp(const Setup& setup);

// The first problem with `setup` for `model` on `gpu`, as the one-line
// message the CLI prints ("--tp 3 does not divide the 64 attention heads of
// llama-3-70b; valid: 1, 2, 4, 8, 16, 32, 64"); nullopt when the plan can be
// priced. The only validation of a setup: values a row of the option table
// parsed are already within their own bounds.
std::optional<std::string> check(const Model& model, const Gpu& gpu,
                                 const Setup& setup);
// The same with the resolution already computed (`resolved` is
// resolve(model, gpu, setup)).
std::optional<std::string> check(const Model& model, const Gpu& gpu,
                                 const Setup& setup, const Resolved& resolved);

}  // namespace oomplan
