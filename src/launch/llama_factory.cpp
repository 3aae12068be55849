// The LLaMA-Factory reader: a training YAML's keys, each a row of the tables
// below (rows.hpp), with the LLaMA-Factory (or transformers) file that
// defines it.
//
// Sources: LLaMA-Factory src/llamafactory/hparams/*.py (keys and defaults),
// src/llamafactory/model/adapter.py (trainable parameters upcast to fp32
// unless pure_bf16), model/model_utils/checkpointing.py (gradient
// checkpointing on unless disable_gradient_checkpointing); the HF Trainer's
// arguments pass through (transformers training_args.py).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <array>

namespace oomplan::launch {
namespace {

constexpr std::array k_llama_factory_unused = {
    "adapter_folder",
    "adapter_name_or_path",
    "add_special_tokens",
    "add_tokens",
    "buffer_size",
    "cache_dir",
    "compute_accuracy",
    "create_new_adapter",
    "dataset",
    "dataset_dir",
    "default_system",
    "disable_shuffling",
    "double_quantization",
    "early_stopping_steps",
    "enable_thinking",
    "eval_dataset",
    "eval_num_beams",
    "eval_on_each_dataset",
    "export_dir",
    "freeze_language_model",
    "freeze_multi_modal_projector",
    "freeze_vision_tower",
    "hf_hub_token",
    "ignore_pad_token_for_loss",
    "image_max_pixels",
    "image_min_pixels",
    "include_effective_tokens_per_second",
    "infer_backend",
    "infer_dtype",
    "init_special_tokens",
    "interleave_probs",
    "lora_alpha",
    "loraplus_lr_embedding",
    "loraplus_lr_ratio",
    "mask_history",
    "max_samples",
    "media_dir",
    "mix_strategy",
    "model_revision",
    "moe_aux_loss_coef",
    "ms_hub_token",
    "neat_packing",
    "new_special_tokens_config",
    "offload_folder",
    "om_hub_token",
    "overwrite_cache",
    "packing",
    "pissa_convert",
    "pissa_init",
    "pissa_iter",
    "plot_loss",
    "preprocessing_batch_size",
    "preprocessing_num_workers",
    "preserve_thinking",
    "print_param_status",
    "quantization_device_map",
    "ray_init_kwargs",
    "ray_num_workers",
    "resize_vocab",
    "rope_scaling",
    "split_special_tokens",
    "streaming",
    "swanlab_api_key",
    "swanlab_lark_secret",
    "swanlab_lark_webhook_url",
    "swanlab_logdir",
    "swanlab_mode",
    "swanlab_project",
    "swanlab_run_name",
    "swanlab_workspace",
    "template",
    "tokenized_path",
    "tool_format",
    "train_from_scratch",
    "train_on_prompt",
    "trust_remote_code",
    "upcast_layernorm",
    "upcast_lmhead_output",
    "use_fast_tokenizer",
    "use_kv_cache",
    "use_reentrant_gc",
    "use_rslora",
    "use_swanlab",
    "val_size",
    "video_fps",
    "video_max_pixels",
    "video_maxlen",
    "video_min_pixels",
    "vllm_config",
    "vllm_enforce_eager",
    "vllm_gpu_util",
    "vllm_max_lora_rank",
    "vllm_maxlen",
};

// Preference, PPO and reward-model keys (finetuning_args.py): unused in the
// sft, pt and rm stages the stage row allows.
constexpr std::array k_preference_unused = {
    "pref_beta",
    "pref_ftx",
    "pref_bco_weight",
    "dpo_label_smoothing",
    "kto_chosen_weight",
    "kto_rejected_weight",
    "simpo_gamma",
    "reward_model",
    "ppo_epochs",
    "ppo_buffer_size",
    "ppo_score_norm",
    "ppo_target",
    "ppo_whiten_rewards",
    "ref_model_adapters",
    "ref_model_quantization_bit",
    "reward_model_adapters",
    "reward_model_quantization_bit",
    "reward_model_type",
    "ld_alpha",
};

// Freeze and OFT tuning keys, and the settings of the optimizers and losses
// the refusing rows name (finetuning_args.py, training_args.py): unused
// unless their switch is on, which is refused.
constexpr std::array k_method_unused = {
    "freeze_trainable_layers",
    "freeze_trainable_modules",
    "freeze_extra_modules",
    "oft_rank",
    "oft_block_size",
    "oft_target",
    "module_dropout",
    "galore_target",
    "galore_rank",
    "galore_update_interval",
    "galore_scale",
    "galore_proj_type",
    "galore_layerwise",
    "apollo_target",
    "apollo_rank",
    "apollo_update_interval",
    "apollo_scale",
    "apollo_proj",
    "apollo_proj_type",
    "apollo_scale_type",
    "apollo_layerwise",
    "apollo_scale_front",
    "badam_mode",
    "badam_start_block",
    "badam_switch_mode",
    "badam_switch_interval",
    "badam_update_ratio",
    "badam_mask_mode",
    "badam_verbose",
    "use_dft_loss",
    "use_asft_loss",
    "asft_alpha",
    "use_eaft_loss",
    "eaft_alpha",
    "fp8_enable_fsdp_float8_all_gather",
};

// What a row passes to later rows.
struct LlamaFactory : Reading {
  const FileLoader& load;
  const Attached& attached;
  std::string type = "lora";  // finetuning_type
  std::optional<std::int64_t> bits = {};
  std::string method = "bnb";
  bool bf16 = false;
  bool fp16 = false;
  bool pure = false;
  TrainerValues trainer = {};
};
using Row = KeyRow<LlamaFactory>;

// Where LLaMA-Factory defines its keys (src/llamafactory/...), and the HF
// Trainer's arguments it passes through.
constexpr std::string_view k_model = "hparams/model_args.py";
constexpr std::string_view k_finetuning = "hparams/finetuning_args.py";
constexpr std::string_view k_data = "hparams/data_args.py";
constexpr std::string_view k_training = "hparams/training_args.py";
constexpr std::string_view k_trainer = "transformers training_args.py";

// ---- stage, tuning method, quantization ----

// pt, sft, rm, ppo, dpo, kto (finetuning_args.py): pt and sft, and the
// preference stages dpo (pref_loss sigmoid, hinge, ipo, kto_pair, orpo,
// simpo) and kto. rm trains a reward model and ppo holds reward and value
// models: refused, as every reader refuses them.
void stage(LlamaFactory& s, const Row& row) {
  const std::string st = s.keys.string(row.key).value_or("sft");
  if (st != "dpo") {
    s.keys.unused("pref_loss");
  }
  if (st == "rm") {
    refuse_method(s.keys, row.key, "reward-model");
  }
  if (st == "ppo") {
    refuse_method(s.keys, row.key, "PPO");
  }
  if (st == "kto") {
    set_objective(s.plan, "kto", std::string(row.key));
  } else if (st == "dpo") {
    // train/dpo/trainer.py: orpo and simpo are reference-free
    // (finetuning_args.use_ref_model is False for them).
    const std::string loss = s.keys.string("pref_loss").value_or("sigmoid");
    if (loss != "sigmoid" && loss != "hinge" && loss != "ipo" &&
        loss != "kto_pair" && loss != "orpo" && loss != "simpo") {
      s.keys.fail("pref_loss",
                  fmt::format("{} is not a LLaMA-Factory pref_loss; use "
                              "sigmoid, hinge, ipo, kto_pair, orpo or simpo",
                              echo(loss)));
    }
    set_objective(s.plan,
                  loss == "orpo" || loss == "simpo" ? loss : std::string("dpo"),
                  loss == "sigmoid" ? std::string(row.key) : "pref_loss");
  } else if (st != "sft" && st != "pt") {
    s.keys.fail(row.key, fmt::format("{} is not a LLaMA-Factory stage; use "
                                     "pt, sft, dpo or kto",
                                     echo(st)));
  }
}

// A reference model other than the policy's own weights (ref_model): a
// second model of its own, which is not modelled.
void ref_model(LlamaFactory& s, const Row& row) {
  if (s.keys.string(row.key)) {
    s.keys.fail(row.key,
                "a separate reference model is not modelled; remove it to "
                "use the policy's own weights (train/trainer_utils.py "
                "create_ref_model)");
  }
}

// lora (the default), full, freeze, oft.
void store_finetuning_type(LlamaFactory& s, const Row& row) {
  s.type = s.keys.string(row.key).value_or("lora");
  if (s.type != "lora" && s.type != "full") {
    s.keys.fail(row.key, fmt::format("{} is not modelled; use lora or full",
                                     echo(s.type)));
  }
}

void store_bits(LlamaFactory& s, const Row& row) {
  s.bits = s.keys.integer(row.key, 2, 8);
}
// QuantizationMethod (extras/constants.py): bitsandbytes is spelled "bnb"
// in older releases and "bitsandbytes" in newer ones (the project's own
// examples/train_qlora/llama3_lora_sft_otfq.yaml); gptq, awq, aqlm, quanto,
// eetq, hqq and mxfp4 are not modelled.
void store_method(LlamaFactory& s, const Row& row) {
  s.method = lower(s.keys.string(row.key).value_or("bnb"));
  if (s.method == "bitsandbytes") {
    s.method = "bnb";
  }
}

// bitsandbytes 4 or 8 bits, and only under LoRA.
void check_quantization(LlamaFactory& s, const Row& row) {
  if (s.bits && s.method != "bnb") {
    s.keys.fail("quantization_method",
                fmt::format("{} quantization is not modelled; use "
                            "quantization_method bitsandbytes (bnb)",
                            echo(s.method)));
  }
  if (s.bits && *s.bits != 4 && *s.bits != 8) {
    s.keys.fail(row.key, fmt::format("{}-bit bitsandbytes quantization is not "
                                     "modelled; use 4 or 8",
                                     *s.bits));
  }
  if (s.bits && s.type == "full") {
    s.keys.fail(row.key,
                "quantized models train only through LoRA "
                "(LLaMA-Factory refuses full)");
  }
}

bool qlora(const LlamaFactory& s) {
  return s.bits && *s.bits == 4;
}

void set_lora_mode(LlamaFactory& s, const Row& row) {
  if (qlora(s)) {
    set_option(s.plan, "--mode", "qlora", "quantization_bit");
  } else {
    set_option(s.plan, "--mode", "lora", std::string(row.key));
  }
}

void quantization_type(LlamaFactory& s, const Row& row) {
  if (!qlora(s)) {
    return;
  }
  if (const auto q = s.keys.string(row.key); q && *q != "nf4") {
    s.keys.fail(row.key, fmt::format("{} is not modelled; use nf4", echo(*q)));
  }
}

// bitsandbytes NF4 (model_args.py: double_quantization defaults to True) or
// int8.
void set_quant(LlamaFactory& s, const Row& row) {
  if (qlora(s)) {
    const bool dq = s.keys.boolean("double_quantization").value_or(true);
    set_option(s.plan, "--quant", dq ? "nf4" : "nf4-nodq",
               std::string(row.key));
  } else if (s.bits) {
    set_option(s.plan, "--quant", "int8", std::string(row.key));
  }
}

void lora_target(LlamaFactory& s, const Row& row) {
  if (const auto t = peft_targets(s.keys, row.key); !t.empty()) {
    set_option(s.plan, "--lora-targets", t, std::string(row.key));
  }
}

void additional_target(LlamaFactory& s, const Row& row) {
  if (const auto extra = s.keys.strings(row.key); extra && !extra->empty()) {
    s.keys.fail(row.key,
                "fully trained modules beside LoRA are "
                "not modelled; remove it");
  }
}

void set_full_mode(LlamaFactory& s, const Row& row) {
  set_option(s.plan, "--mode", "full", std::string(row.key));
}

constexpr std::array k_method_rows = {
    Row{"model_name_or_path", set_model, k_model},
    Row{"stage", stage, k_finetuning},
    Row{"ref_model", ref_model, k_finetuning},
    Row{"finetuning_type", store_finetuning_type, k_finetuning},
    Row{"quantization_bit", store_bits, k_model},
    Row{"quantization_method", store_method, k_model},
    Row{"quantization_bit", check_quantization, k_model},
};

// finetuning_type lora.
constexpr std::array k_lora_rows = {
    Row{"finetuning_type", set_lora_mode, k_finetuning},
    Row{"quantization_type", quantization_type, k_model},
    Row{"quantization_bit", set_quant, k_model},
    Row::integer("lora_rank", "--lora-rank", 1, k_max_rank, k_finetuning),
    Row::probability("lora_dropout", "--lora-dropout", k_finetuning),
    Row{"lora_target", lora_target, k_finetuning},
    Row{"additional_target", additional_target, k_finetuning},
    Row::refuse_true("use_dora", "DoRA is not modelled; use LoRA",
                     k_finetuning),
};

// finetuning_type full: the LoRA and quantization keys are unused.
constexpr std::array k_full_rows = {
    Row{"finetuning_type", set_full_mode, k_finetuning},
    Row::unused("lora_rank", k_finetuning),
    Row::unused("lora_dropout", k_finetuning),
    Row::unused("lora_target", k_finetuning),
    Row::unused("additional_target", k_finetuning),
    Row::unused("use_dora", k_finetuning),
    Row::unused("quantization_type", k_model),
};

// Optimizers, kernels and tricks whose memory is not modelled, refused when
// switched on.
void refuse_switch(LlamaFactory& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    s.keys.fail(row.key, fmt::format("{} is not modelled; remove it", row.key));
  }
}

// fp8 with fp8_backend (training_args.py; train/fp8_utils.py): torchao, and
// auto, which builds accelerate's AORecipeKwargs, swap the linears for
// torchao Float8Linear; te (Transformer Engine) and msamp are not modelled.
void fp8(LlamaFactory& s, const Row& row) {
  if (!s.keys.boolean(row.key).value_or(false)) {
    s.keys.read("fp8_backend");
    return;
  }
  const std::string backend =
      lower(s.keys.string("fp8_backend").value_or("auto"));
  if (backend != "auto" && backend != "torchao") {
    s.keys.fail("fp8_backend",
                fmt::format("{} FP8 is not modelled; use fp8_backend torchao",
                            echo(backend)));
  }
  set_option(s.plan, "--float8", "", std::string(row.key));
}

constexpr std::array k_refused_rows = {
    Row{"use_galore", refuse_switch, k_finetuning},
    Row{"use_apollo", refuse_switch, k_finetuning},
    Row{"use_badam", refuse_switch, k_finetuning},
    Row{"use_adam_mini", refuse_switch, k_finetuning},
    Row{"use_muon", refuse_switch, k_finetuning},
    Row{"use_llama_pro", refuse_switch, k_finetuning},
    Row{"use_mca", refuse_switch, k_finetuning},
    Row{"use_megatron_bridge", refuse_switch, k_finetuning},
    Row{"use_hyper_parallel", refuse_switch, k_finetuning},
    Row{"use_kt", refuse_switch, k_model},
    Row{"use_unsloth", refuse_switch, k_model},
    Row{"shift_attn", refuse_switch, k_model},
    Row{"mixture_of_depths", refuse_switch, k_model},
    Row{"fp8", fp8, k_training},
};

// ---- sequence, attention, checkpointing, loss ----

// flash_attn (model_args.py AttentionFunction): auto lets transformers pick
// (sdpa), disabled is eager, fa2/fa3 are FlashAttention.
void flash_attn(LlamaFactory& s, const Row& row) {
  const auto a = s.keys.string(row.key);
  if (!a) {
    return;
  }
  const std::string key(row.key);
  if (*a == "fa2" || *a == "fa3") {
    set_option(s.plan, "--attn", "flash", key);
  } else if (*a == "sdpa" || *a == "auto") {
    set_option(s.plan, "--attn", "sdpa", key);
  } else if (*a == "disabled") {
    set_option(s.plan, "--attn", "eager", key);
  } else {
    s.keys.fail(row.key, fmt::format("{} is not an attention choice; use "
                                     "auto, disabled, sdpa, fa2 or fa3",
                                     echo(*a)));
  }
}

void disable_gradient_checkpointing(LlamaFactory& s, const Row& row) {
  if (const auto off = s.keys.boolean(row.key)) {
    set_option(s.plan, "--checkpointing", *off ? "none" : "full",
               std::string(row.key));
  }
}

// Unsloth's checkpointing moves the saved layer inputs to CPU RAM.
void use_unsloth_gc(LlamaFactory& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    set_option(s.plan, "--checkpointing", "full", std::string(row.key));
    set_option(s.plan, "--activation-offload", "", std::string(row.key));
  }
}

// model_utils/liger_kernel.py: fused linear cross-entropy unless the logits
// are needed (compute_accuracy).
void enable_liger_kernel(LlamaFactory& s, const Row& row) {
  if (!s.keys.boolean(row.key).value_or(false)) {
    return;
  }
  if (!s.keys.peek("compute_accuracy") ||
      !s.keys.boolean("compute_accuracy").value_or(false)) {
    set_option(s.plan, "--loss", "chunked", std::string(row.key));
  }
}

constexpr std::array k_kernel_rows = {
    Row::integer("cutoff_len", "--seq", 1, k_max_seq, k_data),
    Row{"flash_attn", flash_attn, k_model},
    Row{"disable_gradient_checkpointing", disable_gradient_checkpointing,
        k_model},
    Row{"use_unsloth_gc", use_unsloth_gc, k_model},
    Row{"enable_liger_kernel", enable_liger_kernel, k_model},
};

// ---- the HF Trainer's arguments ----

void batch(LlamaFactory& s, const Row& row) {
  if (const auto b = s.keys.integer(row.key, 1, k_max_batch)) {
    s.trainer.batch = *b;
    s.trainer.batch_key = std::string(row.key);
    set_option(s.plan, "--batch", fmt::format("{}", *b), std::string(row.key));
  }
}

void grad_accum(LlamaFactory& s, const Row& row) {
  if (const auto g = s.keys.integer(row.key, 1, k_max_accum)) {
    s.trainer.grad_accum = *g;
    s.trainer.grad_accum_key = std::string(row.key);
    set_option(s.plan, "--grad-accum", fmt::format("{}", *g),
               std::string(row.key));
  }
}

void store_bf16(LlamaFactory& s, const Row& row) {
  s.bf16 = s.keys.boolean(row.key).value_or(false);
}
void store_fp16(LlamaFactory& s, const Row& row) {
  s.fp16 = s.keys.boolean(row.key).value_or(false);
}
void store_pure(LlamaFactory& s, const Row& row) {
  s.pure = s.keys.boolean(row.key).value_or(false);
}

// bf16 / fp16 autocast, or pure_bf16: weights, gradients and optimizer
// states in bf16 (model/adapter.py skips the fp32 upcast).
void set_dtype(LlamaFactory& s, const Row& /*row*/) {
  if (s.bf16 && s.fp16) {
    s.keys.fail("fp16", "bf16 and fp16 are both set; keep one");
  }
  s.trainer.bf16 = s.bf16 || s.pure;
  s.trainer.fp16 = s.fp16;
  s.trainer.precision_key = s.pure ? "pure_bf16" : s.bf16 ? "bf16" : "fp16";
  if (s.bf16 || s.fp16 || s.pure) {
    set_option(s.plan, "--dtype", s.fp16 ? "fp16" : "bf16",
               s.pure ? "pure_bf16" : s.trainer.precision_key);
  } else if (s.keys.has("bf16") || s.keys.has("fp16")) {
    set_option(s.plan, "--dtype", "fp32", s.keys.has("bf16") ? "bf16" : "fp16");
  }
  if (s.pure) {
    set_option(s.plan, "--precision", "pure", "pure_bf16");
  }
}

void optim(LlamaFactory& s, const Row& row) {
  if (const auto o = s.keys.string(row.key)) {
    set_option(s.plan, "--optimizer", hf_optimizer(s.keys, row.key, *o),
               std::string(row.key));
  }
}

void fsdp(LlamaFactory& s, const Row& /*row*/) {
  read_hf_fsdp(s.keys, s.plan, s.load);
}

// DeepSpeed still makes fp32 master copies of pure_bf16's weights, and
// hparams/parser.py refuses pure_bf16 with ZeRO-3.
void deepspeed(LlamaFactory& s, const Row& row) {
  if (!s.keys.has(row.key) && s.attached.deepspeed == nullptr) {
    return;
  }
  fold_trainer_deepspeed(s.keys, row.key, s.plan, s.load, s.attached,
                         s.trainer);
  if (s.pure) {
    erase_option(s.plan, "--precision");
    s.plan.notes.push_back(
        "pure_bf16 under DeepSpeed: DeepSpeed still keeps "
        "fp32 master weights and optimizer states");
  }
  const LaunchOption* zero = find_option(s.plan, "--zero");
  if (s.pure && zero != nullptr && zero->value == "3") {
    s.keys.fail("pure_bf16",
                "pure_bf16 is incompatible with DeepSpeed ZeRO-3 "
                "(LLaMA-Factory refuses it); drop one");
  }
}

// Every other TrainingArguments field passes through unread.
constexpr std::array k_trainer_rows = {
    Row{"per_device_train_batch_size", batch, k_trainer},
    Row{"gradient_accumulation_steps", grad_accum, k_trainer},
    Row{"bf16", store_bf16, k_trainer},
    Row{"fp16", store_fp16, k_trainer},
    Row{"pure_bf16", store_pure, k_finetuning},
    Row{"bf16", set_dtype, k_trainer},
    Row{"optim", optim, k_trainer},
    Row::when_true("torch_compile", "--compile", "", k_trainer),
    Row{"fsdp", fsdp, k_trainer},
    Row{"deepspeed", deepspeed, k_trainer},
};

}  // namespace

void read_llama_factory(KeyReader& keys, LaunchPlan& plan,
                        const FileLoader& load, const Attached& attached) {
  LlamaFactory s{{keys, plan}, load, attached};
  mark_unused_keys(keys, k_llama_factory_unused);
  read_accelerator_config(keys, plan);
  mark_hf_unused(keys);
  mark_unused_keys(keys, k_preference_unused);
  mark_unused_keys(keys, k_method_unused);
  walk_rows(s, k_method_rows);
  if (s.type == "lora") {
    walk_rows(s, k_lora_rows);
  } else {
    walk_rows(s, k_full_rows);
  }
  walk_rows(s, k_refused_rows);
  walk_rows(s, k_kernel_rows);
  walk_rows(s, k_trainer_rows);
}

}  // namespace oomplan::launch
