#pragma once

// What each framework can express: the knobs the advisor's search may turn
// for a job that runs on it (capability.cpp has one row per framework, each
// cell citing its source). The search combines only moves the user's
// framework expresses; a move that needs another framework or engine is a
// labelled "switch to ..." fix of its own (DESIGN §3).

#include "oomplan/setup/setup.hpp"

#include <string_view>

namespace oomplan {

struct Capability {
  Framework framework = Framework::hf_trainer;
  // Training.
  bool zero = false;                  // DeepSpeed ZeRO stages 1-3
  bool fsdp = false;                  // FSDP sharding (FSDP1 or FSDP2)
  bool optimizer_offload = false;     // optimizer states alone in CPU RAM
  bool param_offload = false;         // weights (and grads, states) in CPU RAM
  bool activation_offload = false;    // checkpointed inputs in CPU RAM
  bool full_checkpoint = false;       // whole decoder layers recomputed
  bool selective_checkpoint = false;  // attention-core recomputation
  bool chunked_loss = false;          // chunked cross-entropy (no full logits)
  bool optimizer_8bit = false;        // bitsandbytes 8-bit / paged AdamW
  bool optimizer_in_bwd = false;      // each parameter steps in backward
  bool pure_bf16 = false;             // 16-bit weights, no fp32 master copy
  bool fp16 = false;                  // fp16 mixed precision
  bool training_layouts = false;      // tensor / pipeline parallel training
  bool sequence_parallel = false;     // sequence parallelism over tp
  bool qlora = false;                 // 4-bit NF4 base under adapters
  bool mxfp4_lora = false;            // LoRA over MXFP4 weights as stored
  bool sync_each_batch = false;       // FSDP reduce-scatter every micro-batch
  // Inference.
  bool inference_layouts = false;  // tp / pp (or layers split) serving
  bool fp8_weights = false;        // fp8 checkpoints or on-the-fly fp8
  bool fp8_kv = false;             // fp8 KV cache
  bool gpu_util = false;           // vLLM gpu_memory_utilization
  // Both.
  bool expandable_segments = false;  // PYTORCH_CUDA_ALLOC_CONF
};

// The row of `framework`.
const Capability& capability(Framework framework);

// The framework the job runs on: --framework or the files `check` read,
// else the stated default per mode and engine (default_framework()).
Framework framework_of(const Setup& setup);

// What `setup`'s framework expresses as configured: an FSDP job (--fsdp) has
// no ZeRO stage and no optimizer-only offload (FSDP's CPUOffload moves
// parameters, gradients and optimizer states together).
Capability capability_of(const Setup& setup);

// False when `setup` combines settings its framework cannot run together:
// pure bf16 under DeepSpeed ZeRO (ZeRO's optimizers keep fp32 master
// weights: runtime/zero/stage_1_and_2.py, stage3.py).
bool expresses(const Setup& setup);

// The frameworks a job may switch to for moves its own cannot express, in
// the order tried: torchtune (single-device memory moves), Megatron (tensor
// and pipeline parallel training); vLLM for transformers generate.
std::string_view switch_title(Framework framework);

}  // namespace oomplan
