#pragma once

// Private to the time layer: the terms of a step's time as named functions,
// grouped by the file that defines them. estimate_time (time.cpp) calls
// training_time (train_time.cpp) or inference_time (infer_time.cpp), which
// compose them. Tests call the terms directly.

#include "oomplan/time/time.hpp"

#include <cstdint>

namespace oomplan::time_terms {

// --- Rates (rates.cpp): what the card, its links and the model give ---------

// Every transformer block: decoder-only layers plus an encoder-decoder's
// decoder stack.
std::int64_t all_layers(const Model& model);
double gb_s(double gb);  // GB/s in bytes per second
// Tensor-core peak for the compute dtype, FLOP/s.
double peak_flops(const Gpu& gpu, const Resolved& setup);
// One GPU's link to its peers, one direction, at k_link_util, bytes/s.
double intra_node_bytes_s(const Gpu& gpu);
double inter_node_bytes_s(const Gpu& gpu);
// Weights read per forward pass (all layers, split by tp), in bytes.
double weight_read_bytes(const Model& model, const Resolved& setup);
// Multiply-accumulate parameters one token touches.
double matmul_params_per_token(const Model& model, const ParamCounts& p);
// Average attended context per query of layer `layer` at `seq` tokens.
double average_context(const Model& model, std::int64_t layer, double seq);
// Attention score and value FLOPs per token, forward.
double attention_flops_per_token(const Model& model, double seq);
// Trainable parameters (full: all; LoRA: the adapters).
double trainable_params(const Model& model, const Resolved& setup,
                        const ParamCounts& p);

// --- Training step (train_time.cpp) -----------------------------------------

// FLOPs per token of one training step (forward, backward, recompute).
double training_flops_per_token(const Model& model, const Resolved& setup,
                                const ParamCounts& params);
// FLOPs / (peak x MFU) per GPU, NF4 slowdown and pipeline bubble included.
double training_compute_s(const Gpu& gpu, const Resolved& setup,
                          double flops_per_step);
// Tensor-parallel all-reduces of one step, on the critical path.
double training_tp_comm_s(const Model& model, const Gpu& gpu,
                          const Resolved& setup);
// Data-parallel gradient (and ZeRO-3 weight) traffic of one step.
double training_dp_comm_s(const Model& model, const Gpu& gpu,
                          const Resolved& setup, const ParamCounts& params);
// Optimizer offload: gradients down, weights back, Adam on the CPU.
double optimizer_offload_s(const Model& model, const Gpu& gpu,
                           const Resolved& setup, const ParamCounts& params);
// Parameter offload: the weight shard fetched for forward and backward.
double param_offload_s(const Model& model, const Gpu& gpu,
                       const Resolved& setup);
// Activation offload's traffic beyond what `compute_s` hides.
double activation_offload_s(const Model& model, const Gpu& gpu,
                            const Resolved& setup, double compute_s);
StepTime training_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup, const ParamCounts& params);

// --- Decode step (infer_time.cpp) -------------------------------------------

// Weight bytes one decode step of `batch` sequences reads (LLM.int8() at the
// 16-bit model's time and more; MoE experts no token routes to skipped).
double decode_weight_bytes(const Model& model, const Resolved& setup,
                           const ParamCounts& params, double batch);
// Tensor- and pipeline-parallel traffic of one decode step.
double decode_comm_s(const Model& model, const Gpu& gpu, const Resolved& setup,
                     double batch);
// Host launch time of one decode step (eager kernels or CUDA graphs).
double decode_launch_s(const Model& model, const Resolved& setup);
StepTime inference_time(const Model& model, const Gpu& gpu,
                        const Resolved& setup, const ParamCounts& params,
                        std::int64_t batch_cap);

}  // namespace oomplan::time_terms
