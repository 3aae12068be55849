// memory(): one budget from a resolved setup, and the Budget's own methods.

#include "oomplan/memory/memory.hpp"

#include "memory/internal.hpp"

#include <algorithm>
#include <string>

namespace oomplan {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::load:
      return "load";
    case Phase::prefill:
      return "prefill";
    case Phase::decode:
      return "decode";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer_step:
      return "optimizer_step";
  }
  return "load";
}

void Budget::add(std::string_view name, Bytes bytes, std::string_view formula) {
  if (count < components.size()) {
    components[count++] = Component{name, bytes, formula};
  }
}

Bytes Budget::bytes_of(std::string_view name) const {
  for (std::size_t i = 0; i < count; ++i) {
    if (components[i].name == name) {
      return components[i].bytes;
    }
  }
  return 0;
}

Bytes Budget::total_bytes() const {
  Bytes total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    total += components[i].bytes;
  }
  return total;
}

Budget memory(const Model& model, const Gpu& gpu, const Resolved& setup) {
  Budget budget;
  budget.capacity_bytes = gpu.capacity_bytes;
  budget.usable_bytes = gpu.capacity_bytes;
  budget.margin_bytes = setup.min_headroom_bytes;
  budget.host_capacity_bytes = setup.host_ram_bytes;
  // LitGPT's GPT has no weight tying: convert_hf_checkpoint copies a tied
  // embedding into lm_head.weight (litgpt/scripts/convert_hf_checkpoint.py),
  // and the model loads it as a parameter of its own.
  Model untied;
  const Model* m = &model;
  if (setup.untied_head && model.tie_word_embeddings) {
    untied = model;
    untied.tie_word_embeddings = false;
    m = &untied;
  }
  if (setup.training()) {
    memory_terms::add_training(*m, gpu, setup, budget);
  } else {
    memory_terms::add_inference(*m, gpu, setup, budget);
  }
  if (budget.fits() && !budget.fits_with_margin()) {
    budget.warnings |= static_cast<unsigned>(Warning::low_headroom);
  }
  return budget;
}

}  // namespace oomplan
