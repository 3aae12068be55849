#pragma once

// Private to the core: the mode-specific halves of memory(). Each appends its
// components to `budget` and fills peak, stages, vllm and warnings.

#include "oomplan/memory.hpp"

namespace oomplan {

// Inference: weights, KV cache, prefill activations, logits, overhead (engine
// hf or vllm).
void add_inference(const Model& model, const Gpu& gpu, const Setup& setup,
                   Budget& budget);

// Training (full, lora, qlora): model states, activations, logits, overhead,
// timeline peak.
void add_training(const Model& model, const Gpu& gpu, const Setup& setup,
                  Budget& budget);

}  // namespace oomplan
