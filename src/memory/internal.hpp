#pragma once

// Private to the core: the mode-specific halves of memory(). Each appends its
// components to `budget` and fills peak, stages, vllm and warnings.

#include "oomplan/memory/memory.hpp"

namespace oomplan {

// Inference: weights, KV cache, prefill activations, logits, overhead (engine
// hf or vllm).
void add_inference(const Model& model, const Gpu& gpu, const Resolved& setup,
                   Budget& budget);

// Training (full, lora, qlora): model states, activations, logits, overhead,
// timeline peak.
void add_training(const Model& model, const Gpu& gpu, const Resolved& setup,
                  Budget& budget);

// vLLM's MXFP4 MoE expert shapes on one GPU for a card's compute capability
// (memory/common.cpp): padded columns per GPU and padded hidden size.
struct Mxfp4Padding {
  std::int64_t inter = 0;
  std::int64_t hidden = 0;
  bool fp32_bias = false;
};
Mxfp4Padding mxfp4_padding(std::int64_t part, std::int64_t hidden, int cc);

}  // namespace oomplan
