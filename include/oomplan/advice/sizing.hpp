#pragma once

// `oomplan MODEL` without --gpus: for each common card, the fewest that fit,
// found by the search (advice/search.hpp).

#include "oomplan/advice/search.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/setup/setup.hpp"

#include <string>
#include <vector>

namespace oomplan {

// `oomplan MODEL` without --gpus: for each common GPU, the fewest that fit
// with the cheapest setup (the search's free and compute knobs: no weight
// quantization, no offload).
struct SizingRow {
  const Gpu* gpu = nullptr;
  int count = 0;   // total GPUs of the smallest setup that fits; 0: none
  Setup request;   // that setup as asked (the user's on the most GPUs tried
  Resolved setup;  // when none fits), and resolved
  std::vector<Move> moves;  // what the search changed
  Bytes total_bytes = 0;    // per GPU
  Bytes usable_bytes = 0;   // per GPU
  bool fits = false;
};
struct Sizing {
  const Model* model = nullptr;
  Setup setup;            // the user's setup (gpus unset)
  std::string model_arg;  // what the user typed for MODEL
  ModelOrigin origin;     // how MODEL was resolved (the first line)
  int max_gpus = 0;       // the largest count tried
  std::vector<SizingRow> rows;
};

// Sizes `setup` on every common card of `cards`. Throws Error with the first
// problem when no layout of any card is valid.
Sizing make_sizing(const Model& model, const std::vector<Gpu>& cards,
                   const Setup& setup, const std::string& model_arg);

}  // namespace oomplan
