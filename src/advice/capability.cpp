#include "oomplan/advice/capability.hpp"

#include <array>

// The capability table: one row per framework, each cell's source in a
// comment beside it. A cell left out is false: the framework has no such
// setting.

namespace oomplan {
namespace {

// HF Trainer (transformers/training_args.py): --deepspeed takes a ZeRO
// config, --fsdp FSDP; --optim adamw_bnb_8bit / paged_adamw_8bit; no
// activation offload and no optimizer step in backward; gradient_checkpointing
// recomputes whole layers only; use_liger_kernel gives the fused chunked
// cross-entropy; a model loaded in bf16 without --bf16 trains in pure bf16;
// no tensor or pipeline parallel training (docs: "Megatron-LM" for 3D).
constexpr Capability k_hf_trainer{
    .framework = Framework::hf_trainer,
    .zero = true,               // training_args.py deepspeed
    .fsdp = true,               // training_args.py fsdp
    .optimizer_offload = true,  // DeepSpeed zero_optimization.offload_optimizer
    .param_offload = true,      // DeepSpeed offload_param / FSDP cpu_offload
    .full_checkpoint = true,    // training_args.py gradient_checkpointing
    .chunked_loss = true,       // training_args.py use_liger_kernel
    .optimizer_8bit = true,     // trainer_utils.py OptimizerNames
    .pure_bf16 = true,          // the model's own dtype without --bf16
    .fp16 = true,               // training_args.py fp16
    .qlora = true,              // peft + BitsAndBytesConfig(load_in_4bit)
    // accelerator_config gradient_accumulation_kwargs.sync_each_batch
    // (accelerate GradientAccumulationPlugin; trainer.py honours it again
    // since transformers #43919)
    .sync_each_batch = true,
    .expandable_segments = true,  // torch/cuda/memory PYTORCH_CUDA_ALLOC_CONF
};

// TRL's SFTConfig extends TrainingArguments with activation_offloading
// (trl/trainer/sft_config.py; trl/models/activation_offloading.py).
constexpr Capability trl_row() {
  Capability c = k_hf_trainer;
  c.framework = Framework::trl;
  c.activation_offload = true;  // sft_config.py activation_offloading
  return c;
}

// DeepSpeed through the Trainer: ZeRO and its offloads; ZeRO's and
// BF16_Optimizer's fp32 master copy is always kept (runtime/bf16_optimizer.py),
// so no pure bf16; no FSDP.
constexpr Capability deepspeed_row() {
  Capability c = k_hf_trainer;
  c.framework = Framework::deepspeed;
  c.fsdp = false;             // DeepSpeed shards with ZeRO, not FSDP
  c.sync_each_batch = false;  // ZeRO reduces every micro-batch already
  c.pure_bf16 = false;        // runtime/bf16_optimizer.py fp32 groups
  return c;
}

// accelerate launches FSDP1/FSDP2 or DeepSpeed (accelerate/utils/
// dataclasses.py FullyShardedDataParallelPlugin, DeepSpeedPlugin); the
// script's own optimizer and loss apply.
constexpr Capability accelerate_row() {
  Capability c = k_hf_trainer;
  c.framework = Framework::accelerate;
  return c;
}

// axolotl (docs/config-reference.qmd): deepspeed / fsdp keys,
// activation_offloading, gradient_checkpointing, liger / cut_cross_entropy
// plugins, optimizer: adamw_bnb_8bit, bf16: full (pure bf16), load_in_4bit.
constexpr Capability axolotl_row() {
  Capability c = k_hf_trainer;
  c.framework = Framework::axolotl;
  c.activation_offload = true;  // config-reference activation_offloading
  c.sync_each_batch = false;    // no accelerator_config key in its schema
  return c;
}

// LLaMA-Factory (src/llamafactory/hparams/finetuning_args.py): pure_bf16,
// enable_liger_kernel, DeepSpeed and FSDP through the Trainer.
constexpr Capability llama_factory_row() {
  Capability c = k_hf_trainer;
  c.framework = Framework::llama_factory;
  // hparams/model_args.py use_unsloth_gc: model_utils/checkpointing.py keeps
  // each checkpointed layer input in CPU RAM.
  c.activation_offload = true;  // use_unsloth_gc
  return c;
}

// torchtune (docs/source/tutorials/memory_optimizations.rst): FSDP2 in the
// distributed recipes, fsdp_cpu_offload, torchao CPUOffloadOptimizer,
// enable_activation_offloading, enable_activation_checkpointing (whole
// layers), CEWithChunkedOutputLoss, bitsandbytes PagedAdamW8bit,
// optimizer_in_bwd; dtype bf16 is pure bf16 (no mixed precision,
// training/precision.py), and fp16 is refused there.
constexpr Capability k_torchtune{
    .framework = Framework::torchtune,
    .fsdp = true,                // recipes/full_finetune_distributed.py
    .optimizer_offload = true,   // memory_optimizations.rst CPUOffloadOptimizer
    .param_offload = true,       // full_finetune_distributed fsdp_cpu_offload
    .activation_offload = true,  // enable_activation_offloading
    .full_checkpoint = true,     // enable_activation_checkpointing
    .chunked_loss = true,        // modules/loss CEWithChunkedOutputLoss
    .optimizer_8bit = true,      // bitsandbytes.optim.PagedAdamW8bit
    .optimizer_in_bwd = true,    // memory_optimizations.rst optimizer_in_bwd
    .pure_bf16 = true,           // training/precision.py: bf16 or fp32 only
    .qlora = true,               // models/*/qlora_* builders
    .expandable_segments = true,
};

// Megatron-LM (megatron/training/arguments.py): --tensor/--pipeline-model-
// parallel-size, --sequence-parallel, --recompute-granularity selective,
// --use-distributed-optimizer, --optimizer-cpu-offload, --fp16; its own
// Adam keeps fp32 main params; no bitsandbytes optimizers or NF4 weights
// under its tensor-parallel layers.
constexpr Capability k_megatron{
    .framework = Framework::megatron,
    .optimizer_offload = true,     // arguments.py --optimizer-cpu-offload
    .full_checkpoint = true,       // arguments.py --recompute-granularity full
    .selective_checkpoint = true,  // arguments.py --recompute-granularity
    .fp16 = true,                  // arguments.py --fp16
    .training_layouts = true,      // arguments.py --tensor-model-parallel-size
    .sequence_parallel = true,     // arguments.py --sequence-parallel
    .expandable_segments = true,
};

// torchtitan (docs/fsdp.md, torchtitan/config/job_config.py): FSDP2 with
// enable_cpu_offload, activation_checkpoint.mode selective, tensor / pipeline
// / context parallel degrees, optimizer.early_step_in_backward; FSDP2's
// MixedPrecisionPolicy keeps fp32 parameters.
constexpr Capability k_torchtitan{
    .framework = Framework::torchtitan,
    .fsdp = true,                  // parallelize.py fully_shard
    .param_offload = true,         // job_config.py training.enable_cpu_offload
    .full_checkpoint = true,       // activation_checkpoint.mode = "full"
    .selective_checkpoint = true,  // job_config.py activation_checkpoint.mode
    .optimizer_in_bwd = true,      // job_config.py early_step_in_backward
    .training_layouts = true,      // job_config.py tensor_parallel_degree
    .sequence_parallel = true,     // tensor parallel plans shard the sequence
    .expandable_segments = true,
};

// LitGPT (litgpt/finetune/lora.py, full.py; litgpt/utils.py): --precision
// bf16-true / 16-mixed, --quantize bnb.nf4 on one device, --optimizer with a
// class_path (bitsandbytes.optim.AdamW8bit), more --devices under FSDP. No
// activation checkpointing setting (none on one device, every Block on
// several), no CPU offload (FSDPStrategy(cpu_offload=False)), no tensor
// parallelism (tensor_parallel_size=1), no_backward_sync always on.
constexpr Capability k_litgpt{
    .framework = Framework::litgpt,
    .fsdp = true,            // FSDPStrategy / ModelParallelStrategy
    .chunked_loss = true,    // utils.py chunked_cross_entropy
    .optimizer_8bit = true,  // --optimizer.class_path bitsandbytes.optim...
    .pure_bf16 = true,       // --precision bf16-true
    .fp16 = true,            // --precision 16-mixed
    .qlora = true,           // --quantize bnb.nf4 / bnb.nf4-dq
    .expandable_segments = true,
};

// vLLM (vllm/engine/arg_utils.py): --tensor/--pipeline-parallel-size,
// --quantization fp8 (weight-only Marlin on Ampere, native on sm89+),
// --kv-cache-dtype fp8, --gpu-memory-utilization, --dtype float16.
constexpr Capability k_vllm{
    .framework = Framework::vllm,
    .fp16 = true,               // arg_utils.py --dtype
    .inference_layouts = true,  // arg_utils.py --tensor-parallel-size
    .fp8_weights = true,        // arg_utils.py --quantization fp8
    .fp8_kv = true,             // arg_utils.py --kv-cache-dtype
    .gpu_util = true,           // arg_utils.py --gpu-memory-utilization
    .expandable_segments = true,
};

// transformers generate: device_map="auto" / tp_plan="auto"
// (modeling_utils.py from_pretrained), BitsAndBytesConfig / FbgemmFp8Config
// weights, torch_dtype float16, offload to CPU with device_map.
constexpr Capability k_generate{
    .framework = Framework::generate,
    .param_offload = true,      // modeling_utils.py device_map offload
    .fp16 = true,               // from_pretrained torch_dtype
    .inference_layouts = true,  // modeling_utils.py tp_plan / device_map
    .fp8_weights = true,        // quantizers/quantizer_fbgemm_fp8.py
    .expandable_segments = true,
};

constexpr std::array k_rows = {
    k_vllm,           deepspeed_row(), k_hf_trainer, trl_row(),
    accelerate_row(), axolotl_row(),   k_torchtune,  llama_factory_row(),
    k_megatron,       k_torchtitan,    k_generate,   k_litgpt,
};

}  // namespace

const Capability& capability(Framework framework) {
  for (const Capability& row : k_rows) {
    if (row.framework == framework) {
      return row;
    }
  }
  return k_hf_trainer;
}

Framework framework_of(const Setup& setup) {
  return setup.framework.value_or(default_framework(setup.mode, setup.engine));
}

Capability capability_of(const Setup& setup) {
  Capability c = capability(framework_of(setup));
  if (setup.fsdp) {
    // FSDP's CPUOffload(offload_params=True) moves parameters, gradients and
    // optimizer states together: no optimizer-only offload
    // (torch/distributed/fsdp/api.py CPUOffload); no ZeRO stage on top.
    c.zero = false;
    c.optimizer_offload = false;
  }
  if (setup.objective != TrainObjective::sft) {
    // Preference trainers take per-token log-probs from the full logits
    // (trl/trainer/dpo_trainer.py concatenated_forward, torchtune's DPO
    // recipes): no chunked loss to switch on.
    c.chunked_loss = false;
  }
  return c;
}

bool expresses(const Setup& setup) {
  const bool deepspeed = setup.zero.value_or(0) >= 1 && !setup.fsdp;
  return !(deepspeed && setup.precision == Precision::pure);
}

std::string_view switch_title(Framework framework) {
  switch (framework) {
    case Framework::torchtune:
      return "switch to torchtune";
    case Framework::megatron:
      return "switch to Megatron-LM";
    case Framework::torchtitan:
      return "switch to torchtitan";
    case Framework::vllm:
      return "switch to vLLM";
    default:
      break;
  }
  return "switch framework";
}

}  // namespace oomplan
