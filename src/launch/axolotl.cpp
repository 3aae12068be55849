// The axolotl reader: a YAML recipe's keys, each a row of the tables below
// (rows.hpp), with the axolotl source file that defines it.
//
// Sources: axolotl src/axolotl/utils/schemas/{config,model,peft,training,
// fsdp}.py (keys and defaults), src/axolotl/utils/config/__init__.py
// (resolve_dtype: the model is loaded in bf16 when bf16 is on),
// src/axolotl/loaders/model.py (bnb 4-bit: nf4, double quantization).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan::launch {
namespace {

// axolotl keys (utils/schemas/*.py) that do not change GPU memory, in two
// alphabetical halves.
constexpr std::array k_axolotl_unused_a_to_l = {
    "adam_beta1",
    "adam_beta2",
    "adam_beta3",
    "adam_epsilon",
    "adam_epsilon2",
    "added_tokens_overrides",
    "auto_resume_from_checkpoints",
    "axolotl_config_path",
    "base_model_config",
    "batch_flattening",
    "bench_dataset",
    "bench_split",
    "chat_template",
    "chat_template_jinja",
    "chat_template_kwargs",
    "cosine_constant_lr_ratio",
    "cosine_min_lr_ratio",
    "curriculum_sampling",
    "dataloader_drop_last",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_prefetch_factor",
    "dataset_exact_deduplication",
    "dataset_keep_in_memory",
    "dataset_num_proc",
    "dataset_prepared_path",
    "dataset_processes",
    "dataset_shard_idx",
    "dataset_shard_num",
    "datasets",
    "ddp",
    "ddp_broadcast_buffers",
    "ddp_bucket_cap_mb",
    "ddp_find_unused_parameters",
    "ddp_timeout",
    "debug",
    "default_system_message",
    "device_map",
    "do_bench_eval",
    "do_causal_lm_eval",
    "dp_shard_size",
    "early_stopping_patience",
    "embedding_lr",
    "embedding_lr_scale",
    "eot_tokens",
    "eval_batch_size",
    "eval_causal_lm_metrics",
    "eval_max_new_tokens",
    "eval_sample_packing",
    "eval_sequence_len",
    "eval_steps",
    "eval_strategy",
    "eval_table_size",
    "evals_per_epoch",
    "excess_length_strategy",
    "flash_attn_cross_entropy",
    "flash_attn_fuse_mlp",
    "flash_attn_fuse_qkv",
    "flash_attn_rms_norm",
    "flash_optimum",
    "fix_untrained_tokens",
    "fsdp_final_state_dict_type",
    "gc_steps",
    "gpu_memory_limit",
    "greater_is_better",
    "group_by_length",
    "hf_use_auth_token",
    "hub_model_id",
    "hub_revision",
    "hub_strategy",
    "include_tkps",
    "include_tokens_per_second",
    "is_falcon_derived_model",
    "is_llama_derived_model",
    "is_mistral_derived_model",
    "is_qwen_derived_model",
    "learning_rate",
    "liger_cross_entropy",
    "liger_glu_activation",
    "liger_layer_norm",
    "liger_rms_norm",
    "liger_rope",
    "load_best_model_at_end",
    "local_rank",
    "logging_steps",
    "lora_alpha",
    "lora_fan_in_fan_out",
    "lora_model_dir",
    "loraplus_lr_embedding",
    "loraplus_lr_ratio",
    "loss_watchdog_patience",
    "loss_watchdog_threshold",
    "low_cpu_mem_usage",
    "lr_div_factor",
    "lr_quadratic_warmup",
    "lr_scheduler",
    "lr_scheduler_kwargs",
};
constexpr std::array k_axolotl_unused_m_to_z = {
    "max_grad_norm",
    "max_memory",
    "max_steps",
    "merge_lora",
    "metric_for_best_model",
    "min_sample_len",
    "mlflow_experiment_name",
    "mlflow_run_name",
    "mlflow_tracking_uri",
    "model_config_type",
    "model_type",
    "multipack_real_batches",
    "neftune_noise_alpha",
    "num_epochs",
    "optim_args",
    "output_dir",
    "pad_to_multiple_of",
    "pad_to_sequence_len",
    "peft_init_lora_weights",
    "peft_use_rslora",
    "plugins",
    "pretraining_dataset",
    "processor_type",
    "profiler_steps",
    "push_dataset_to_hub",
    "remove_unused_columns",
    "resize_token_embeddings_to_32x",
    "resume_from_checkpoint",
    "sample_packing",
    "sample_packing_bin_size",
    "sample_packing_group_size",
    "sample_packing_sequentially",
    "save_first_step",
    "save_only_model",
    "save_safetensors",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "saves_per_epoch",
    "seed",
    "shuffle_before_merging_datasets",
    "shuffle_merged_datasets",
    "skip_prepare_dataset",
    "special_tokens",
    "strict",
    "test_datasets",
    "tf32",
    "tokenizer_config",
    "tokenizer_legacy",
    "tokenizer_type",
    "tokenizer_use_fast",
    "tokenizer_use_mistral_common",
    "tokens",
    "torch_empty_cache_steps",
    "train_on_inputs",
    "trust_remote_code",
    "use_tensorboard",
    "val_set_size",
    "wandb_entity",
    "wandb_log_model",
    "wandb_mode",
    "wandb_name",
    "wandb_project",
    "wandb_run_id",
    "wandb_watch",
    "warmup_ratio",
    "warmup_steps",
    "weight_decay",
    "world_size",
    "xformers_attention_legacy",
};

}  // namespace

namespace {

// What a row passes to later rows.
struct Axolotl : Reading {
  const FileLoader& load;
  const Attached& attached;
  std::optional<std::string> adapter = {};
  bool in4 = false;
  bool in8 = false;
  bool gptq = false;
  bool target_linear = false;
  std::optional<std::int64_t> micro = {};
  std::optional<std::int64_t> accum = {};
  const Json* bf16 = nullptr;
  bool bf16_on = false;
  bool fp16_on = false;
  bool bfloat16 = false;
  bool float16 = false;
  std::string dtype = "fp32";
  std::string dtype_key = "bf16";
  std::optional<std::int64_t> config_version = {};
  std::string config_version_key = {};
};
using Row = KeyRow<Axolotl>;

// Where axolotl defines its keys (src/axolotl/...).
constexpr std::string_view k_config = "utils/schemas/config.py";
constexpr std::string_view k_model = "utils/schemas/model.py";
constexpr std::string_view k_peft = "utils/schemas/peft.py";
constexpr std::string_view k_training = "utils/schemas/training.py";
constexpr std::string_view k_fsdp = "utils/schemas/fsdp.py";
constexpr std::string_view k_liger = "integrations/liger/args.py";
constexpr std::string_view k_cce = "integrations/cut_cross_entropy/args.py";

// ---- adapter and quantization ----

void store_adapter(Axolotl& s, const Row& row) {
  s.adapter = s.keys.string(row.key);
}
void store_in4(Axolotl& s, const Row& row) {
  s.in4 = s.keys.boolean(row.key).value_or(false);
}
void store_in8(Axolotl& s, const Row& row) {
  s.in8 = s.keys.boolean(row.key).value_or(false);
}
void store_gptq(Axolotl& s, const Row& row) {
  s.gptq = s.keys.boolean(row.key).value_or(false);
}

// lora or qlora; a quantized base only under an adapter.
void check_adapter(Axolotl& s, const Row& row) {
  if (s.adapter && *s.adapter != "lora" && *s.adapter != "qlora") {
    s.keys.fail(row.key, fmt::format("{} is not modelled; use lora or qlora",
                                     echo(*s.adapter)));
  }
  if (s.in4 && s.in8) {
    s.keys.fail("load_in_8bit", "load_in_4bit and load_in_8bit are both set");
  }
  if (!s.adapter && (s.in4 || s.in8 || s.gptq)) {
    s.keys.fail(s.in4   ? "load_in_4bit"
                : s.in8 ? "load_in_8bit"
                        : "gptq",
                "a quantized base trains only through adapters; set adapter: "
                "lora or qlora");
  }
}

// loaders/model.py builds BitsAndBytesConfig(bnb_4bit_use_double_quant=True,
// quant_type nf4) unless bnb_config_kwargs says otherwise.
void set_qlora_quant(Axolotl& s) {
  bool dq = true;
  if (const auto d =
          s.keys.boolean("bnb_config_kwargs.bnb_4bit_use_double_quant")) {
    dq = *d;
  }
  if (const auto t = s.keys.string("bnb_config_kwargs.bnb_4bit_quant_type");
      t && *t != "nf4") {
    s.keys.fail("bnb_config_kwargs.bnb_4bit_quant_type",
                fmt::format("{} is not modelled; use nf4", echo(*t)));
  }
  set_option(s.plan, "--quant", dq ? "nf4" : "nf4-nodq",
             s.in4 ? "load_in_4bit" : "adapter");
}

// --mode from the adapter, --quant from the base's loading.
void set_adapter_mode(Axolotl& s, const Row& row) {
  const bool qlora = *s.adapter == "qlora" || s.in4;
  set_option(s.plan, "--mode", qlora ? "qlora" : "lora", std::string(row.key));
  if (qlora) {
    set_qlora_quant(s);
  } else if (s.in8) {
    set_option(s.plan, "--quant", "int8", "load_in_8bit");
  } else if (s.gptq) {
    set_option(s.plan, "--quant", "gptq", "gptq");
  }
  s.keys.unused_children("bnb_config_kwargs");
}

void lora_target_linear(Axolotl& s, const Row& row) {
  s.target_linear = s.keys.boolean(row.key).value_or(false);
  if (s.target_linear) {
    set_option(s.plan, "--lora-targets", "all", std::string(row.key));
  }
}

// Read only when lora_target_linear does not already target every layer.
void lora_target_modules(Axolotl& s, const Row& row) {
  if (s.target_linear) {
    return;
  }
  if (const auto t = peft_targets(s.keys, row.key); !t.empty()) {
    set_option(s.plan, "--lora-targets", t, std::string(row.key));
  }
}

void lora_modules_to_save(Axolotl& s, const Row& row) {
  if (const auto save = s.keys.strings(row.key); save && !save->empty()) {
    s.keys.fail(row.key,
                "fully trained copies of modules beside LoRA (embed_tokens, "
                "lm_head) are not modelled; remove it");
  }
}

// A full fine-tune, unless only some parameters train.
void unfrozen_parameters(Axolotl& s, const Row& row) {
  if (const auto u = s.keys.strings(row.key); u && !u->empty()) {
    s.keys.fail(row.key,
                "training only some parameters is not modelled; remove it "
                "for a full fine-tune");
  }
}

constexpr std::array k_adapter_rows = {
    Row{"base_model", set_model, k_model},
    Row{"adapter", store_adapter, k_peft},
    Row{"load_in_4bit", store_in4, k_peft},
    Row{"load_in_8bit", store_in8, k_peft},
    Row{"gptq", store_gptq, k_peft},
    Row{"adapter", check_adapter, k_peft},
};

// With an adapter.
constexpr std::array k_lora_rows = {
    Row{"adapter", set_adapter_mode, k_peft},
    Row::integer("lora_r", "--lora-rank", 1, k_max_rank, k_peft),
    Row::probability("lora_dropout", "--lora-dropout", k_peft),
    Row{"lora_target_linear", lora_target_linear, k_peft},
    Row{"lora_target_modules", lora_target_modules, k_peft},
    Row{"lora_modules_to_save", lora_modules_to_save, k_peft},
    Row::refuse_true("peft_use_dora",
                     "DoRA's magnitude vectors and their activations are not "
                     "modelled; use LoRA",
                     k_peft),
};

// Without an adapter: the LoRA keys are unused.
constexpr std::array k_full_rows = {
    Row::unused("lora_r", k_peft),
    Row::unused("lora_dropout", k_peft),
    Row::unused("lora_target_linear", k_peft),
    Row::unused("lora_target_modules", k_peft),
    Row::unused("lora_modules_to_save", k_peft),
    Row::unused("peft_use_dora", k_peft),
    Row{"unfrozen_parameters", unfrozen_parameters, k_config},
};

// ---- sequence, batch, checkpointing ----

void micro_batch_size(Axolotl& s, const Row& row) {
  s.micro = s.keys.integer(row.key, 1, k_max_batch);
  if (s.micro) {
    set_option(s.plan, "--batch", fmt::format("{}", *s.micro),
               std::string(row.key));
  }
}

void gradient_accumulation_steps(Axolotl& s, const Row& row) {
  s.accum = s.keys.integer(row.key, 1, k_max_accum);
  if (s.accum) {
    set_option(s.plan, "--grad-accum", fmt::format("{}", *s.accum),
               std::string(row.key));
  }
}

// normalize_config: gradient_accumulation_steps = batch_size //
// micro_batch_size when only batch_size is given.
void batch_size(Axolotl& s, const Row& row) {
  if (!s.accum) {
    if (const auto total = s.keys.integer(row.key, 1, k_max_batch)) {
      const std::int64_t m = s.micro.value_or(1);
      set_option(s.plan, "--grad-accum",
                 fmt::format("{}", std::max<std::int64_t>(1, *total / m)),
                 std::string(row.key));
    }
  }
  s.keys.unused(row.key);
}

// true, false or "offload" (checkpointed layer inputs moved to CPU RAM).
void gradient_checkpointing(Axolotl& s, const Row& row) {
  const Json* gc = s.keys.read(row.key);
  if (gc == nullptr) {
    return;
  }
  const std::string key(row.key);
  if (gc->is_boolean()) {
    set_option(s.plan, "--checkpointing", gc->get<bool>() ? "full" : "none",
               key);
  } else if (gc->is_string() && gc->get<std::string>() == "offload") {
    set_option(s.plan, "--checkpointing", "full", key);
    set_option(s.plan, "--activation-offload", "", key);
  } else {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; use true, false or offload "
                            "(offload_disk is not modelled)",
                            echo_json(*gc)));
  }
}

void activation_offloading(Axolotl& s, const Row& row) {
  const Json* ao = s.keys.read(row.key);
  if (ao == nullptr) {
    return;
  }
  if ((ao->is_boolean() && ao->get<bool>()) ||
      (ao->is_string() && ao->get<std::string>() == "legacy")) {
    set_option(s.plan, "--activation-offload", "", std::string(row.key));
  } else if (!ao->is_boolean()) {
    s.keys.fail(row.key, fmt::format("{} is not modelled; use true or false",
                                     echo_json(*ao)));
  }
}

void selective_checkpointing(Axolotl& s, const Row& row) {
  if (const Json* sc = s.keys.read(row.key);
      sc != nullptr && !(sc->is_boolean() && !sc->get<bool>())) {
    s.keys.fail(row.key,
                "axolotl's selective checkpointing (chosen layers or ops) is "
                "not modelled; use gradient_checkpointing");
  }
}

constexpr std::array k_batch_rows = {
    Row::integer("sequence_len", "--seq", 1, k_max_seq, k_config),
    Row{"micro_batch_size", micro_batch_size, k_training},
    Row{"gradient_accumulation_steps", gradient_accumulation_steps, k_training},
    Row{"batch_size", batch_size, k_training},
    Row{"gradient_checkpointing", gradient_checkpointing, k_config},
    Row::unused_children("gradient_checkpointing_kwargs", k_config),
    Row{"activation_offloading", activation_offloading, k_config},
    Row{"selective_checkpointing", selective_checkpointing, k_config},
    Row::refuse_true("layer_offloading", "layer offloading is not modelled",
                     k_config),
    Row::refuse_true("tiled_mlp", "tiled MLP activations are not modelled",
                     k_config),
};

// ---- attention, loss, precision, optimizer ----

void attn_implementation(Axolotl& s, const Row& row) {
  if (const auto a = s.keys.string(row.key)) {
    set_option(s.plan, "--attn", hf_attention(s.keys, row.key, *a),
               std::string(row.key));
  }
}

// bf16: true, false, "auto" (bf16 on GPUs that support it) or "full".
void store_bf16(Axolotl& s, const Row& row) {
  s.bf16 = s.keys.read(row.key);
  const Json* bf16 = s.bf16;
  s.bf16_on = bf16 != nullptr &&
              ((bf16->is_boolean() && bf16->get<bool>()) ||
               (bf16->is_string() && (bf16->get<std::string>() == "auto" ||
                                      bf16->get<std::string>() == "full")));
  if (bf16 != nullptr && !bf16->is_boolean() && !s.bf16_on) {
    s.keys.fail(row.key,
                fmt::format("expected true, false, auto or full, got {}",
                            echo_json(*bf16)));
  }
}
void store_fp16(Axolotl& s, const Row& row) {
  s.fp16_on = s.keys.boolean(row.key).value_or(false);
}
void store_bfloat16(Axolotl& s, const Row& row) {
  s.bfloat16 = s.keys.boolean(row.key).value_or(false);
}
void store_float16(Axolotl& s, const Row& row) {
  s.float16 = s.keys.boolean(row.key).value_or(false);
}
void check_boolean(Axolotl& s, const Row& row) {
  s.keys.boolean(row.key);
}

// resolve_dtype() loads the model in bf16 when bf16 is on (or "auto" on a
// bf16 GPU), fp16 for fp16/float16/load_in_8bit, else fp32; the HF Trainer
// then trains those weights as they are.
void choose_dtype(Axolotl& s, const Row& /*row*/) {
  const Json* bf16 = s.bf16;
  const bool bf16_auto = bf16 != nullptr && bf16->is_string();
  if (s.fp16_on && bf16 != nullptr && bf16->is_boolean() && bf16->get<bool>()) {
    s.keys.fail("fp16", "bf16 and fp16 are both set; keep one");
  }
  if (s.fp16_on || s.float16) {
    s.dtype = "fp16";
    s.dtype_key = s.fp16_on ? "fp16" : "float16";
  } else if (s.bf16_on || s.bfloat16) {
    s.dtype = "bf16";
    s.dtype_key = s.bf16_on ? "bf16" : "bfloat16";
  }
  if (bf16 != nullptr || s.keys.has("fp16") || s.bfloat16 || s.float16) {
    set_option(s.plan, "--dtype", s.dtype, s.dtype_key);
  }
  if (bf16_auto && !s.fp16_on) {
    s.plan.notes.push_back(
        "bf16: auto trains in bf16 on GPUs that support it (Ampere and newer) "
        "and in fp16 on older ones");
  }
}

void optimizer(Axolotl& s, const Row& row) {
  if (const auto o = s.keys.string(row.key)) {
    set_option(s.plan, "--optimizer", hf_optimizer(s.keys, row.key, *o),
               std::string(row.key));
  }
}

void torch_compile(Axolotl& s, const Row& row) {
  const Json* c = s.keys.read(row.key);
  if (c == nullptr) {
    return;
  }
  if (c->is_boolean() && c->get<bool>()) {
    set_option(s.plan, "--compile", "", std::string(row.key));
  } else if (c->is_string()) {
    s.plan.notes.push_back(
        "torch_compile: auto compiles when the installed torch supports it; "
        "give --compile to plan it");
  }
}

// Attention flags (transformers' default is sdpa); chunked CE, Liger's fused
// linear CE and Cut Cross-Entropy never hold the whole sequence's logits.
constexpr std::array k_kernel_rows = {
    Row::when_true("flash_attention", "--attn", "flash", k_config),
    Row::when_true("flex_attention", "--attn", "flash", k_config),
    Row::when_true("xformers_attention", "--attn", "flash", k_config),
    Row::when_true("sage_attention", "--attn", "flash", k_config),
    Row::when_true("sdp_attention", "--attn", "sdpa", k_config),
    Row::when_true("eager_attention", "--attn", "eager", k_config),
    Row{"attn_implementation", attn_implementation, k_config},
    Row::when_true("chunked_cross_entropy", "--loss", "chunked", k_config),
    Row::when_true("liger_fused_linear_cross_entropy", "--loss", "chunked",
                   k_liger),
    Row::when_true("cut_cross_entropy", "--loss", "chunked", k_cce),
    Row::unused("chunked_cross_entropy_num_chunks", k_config),
    Row{"bf16", store_bf16, k_config},
    Row{"fp16", store_fp16, k_config},
    Row{"bfloat16", store_bfloat16, k_config},
    Row{"float16", store_float16, k_config},
    Row{"float32", check_boolean, k_config},
    Row{"bf16", choose_dtype, k_config},
    Row::refuse_true("fp8", "FP8 training is not modelled", k_config),
    Row::unused("fp8_enable_fsdp_float8_all_gather", k_config),
    Row{"optimizer", optimizer, k_training},
    Row{"torch_compile", torch_compile, k_config},
    Row::unused("torch_compile_backend", k_config),
    Row::unused("torch_compile_mode", k_config),
    Row::unused("torch_compile_options", k_config),
};

// ---- parallelism, FSDP, DeepSpeed ----

// The preference trainers' settings (utils/schemas/config.py): they do not
// change memory.
constexpr std::array k_axolotl_preference_unused = {
    "rl_beta",
    "dpo_use_weighting",
    "dpo_use_logits_to_keep",
    "dpo_label_smoothing",
    "dpo_norm_loss",
    "dpo_padding_free",
    "dpo_generate_during_eval",
    "orpo_alpha",
    "kto_desirable_weight",
    "kto_undesirable_weight",
    "simpo_gamma",
    "cpo_alpha",
    "rpo_alpha",
    "max_prompt_len",
};

// rl (utils/schemas/enums.py RLType): dpo and ipo (TRL DPOTrainer, a
// reference model under full fine-tuning: core/builders/rl.py loads
// model_ref only without an adapter), orpo, kto, simpo (CPOTrainer); grpo
// generates during training and is refused as every reader refuses it.
void rl(Axolotl& s, const Row& row) {
  const auto method = s.keys.string(row.key);
  if (!method) {
    return;
  }
  const std::string m = lower(*method);
  if (m == "dpo" || m == "ipo") {
    set_objective(s.plan, "dpo", std::string(row.key));
  } else if (m == "orpo" || m == "kto" || m == "simpo") {
    set_objective(s.plan, m, std::string(row.key));
  } else {
    refuse_method(s.keys, row.key, *method);
  }
  // Preference losses gather per-token log-probs from the whole logits
  // (trl/trainer/dpo_trainer.py concatenated_forward).
  set_default(s.plan, "--loss", "full",
              "axolotl's rl trainers are TRL's: per-token log-probs from "
              "the full logits (trl/trainer/dpo_trainer.py)");
}

// The version inside fsdp_config, seen before read_hf_fsdp reads it: the
// fsdp_config row may turn --fsdp on after that read.
void peek_fsdp_version(Axolotl& s, const Row& row) {
  if (const Json* v = s.keys.peek(row.key);
      v != nullptr && v->is_number_integer()) {
    s.config_version = v->get<std::int64_t>();
    s.config_version_key = std::string(row.key);
  }
}

void fsdp(Axolotl& s, const Row& /*row*/) {
  read_hf_fsdp(s.keys, s.plan, s.load);
}

// Newer axolotl: fsdp_config alone turns FSDP on (FULL_SHARD unless
// reshard_after_forward is false).
void fsdp_config(Axolotl& s, const Row& row) {
  if (s.keys.has(row.key) && find_option(s.plan, "--zero") == nullptr &&
      find_option(s.plan, "--fsdp") == nullptr) {
    set_option(s.plan, "--fsdp", "", std::string(row.key));
  }
}

// The top-level fsdp_version picks accelerate's FSDP1 or FSDP2; absent, the
// one inside fsdp_config, else accelerate's FSDP1.
void fsdp_version(Axolotl& s, const Row& row) {
  if (const auto top = s.keys.integer(row.key, 1, 2)) {
    mark_fsdp_version(s.plan, top, std::string(row.key));
  } else {
    mark_fsdp_version(s.plan, s.config_version, s.config_version_key);
  }
}

// A DeepSpeed config (named, or given next to this file) fills its "auto"s
// from this file's values. Without one, a full fine-tune of a model loaded
// in 16 bits keeps no fp32 copy: torch's AdamW keeps its states in the
// parameters' dtype.
void deepspeed(Axolotl& s, const Row& row) {
  TrainerValues trainer;
  trainer.batch = s.micro;
  trainer.batch_key = "micro_batch_size";
  trainer.grad_accum = s.accum;
  trainer.grad_accum_key = "gradient_accumulation_steps";
  trainer.bf16 = s.dtype == "bf16";
  trainer.fp16 = s.dtype == "fp16";
  trainer.precision_key = s.dtype_key;
  if (s.keys.has(row.key) || s.attached.deepspeed != nullptr) {
    fold_trainer_deepspeed(s.keys, row.key, s.plan, s.load, s.attached,
                           trainer);
  } else if (find_option(s.plan, "--mode") == nullptr && s.dtype != "fp32") {
    set_default(s.plan, "--precision", "pure",
                fmt::format("axolotl loads the model in {} and the HF Trainer "
                            "trains it as loaded: no fp32 master weights "
                            "(axolotl utils/config/__init__.py resolve_dtype)",
                            s.dtype));
  }
}

constexpr std::array k_parallel_rows = {
    Row::parallel("tensor_parallel_size", "--tp", k_config),
    Row::refuse_degree("context_parallel_size", -1,
                       "context parallelism (ring attention) is not modelled",
                       k_config),
    Row::refuse_degree("sequence_parallel_degree", -1,
                       "sequence parallelism (ring attention) is not modelled",
                       k_config),
    Row::refuse_degree("dp_replicate_size", -1,
                       "hybrid sharding (replicated shard groups) is not "
                       "modelled",
                       k_config),
    Row::unused("heads_k_stride", k_config),
    Row::unused("ring_attn_func", k_config),
    Row{"rl", rl, k_config},
    Row::when_true("precompute_ref_log_probs", "--precompute-ref", "",
                   k_config),
    Row::refuse_present("qat", "quantization-aware training is not modelled",
                        k_config),
    Row::unused_children("quantization", k_config),
    Row{"fsdp_config.fsdp_version", peek_fsdp_version, k_fsdp},
    Row{"fsdp_config.version", peek_fsdp_version, k_fsdp},
    Row{"fsdp", fsdp, k_config},
    Row{"fsdp_config", fsdp_config, k_config},
    Row{"fsdp_version", fsdp_version, k_config},
    Row{"deepspeed", deepspeed, k_config},
};

}  // namespace

void read_axolotl(KeyReader& keys, LaunchPlan& plan, const FileLoader& load,
                  const Attached& attached) {
  Axolotl s{{keys, plan}, load, attached};
  mark_unused_keys(keys, k_axolotl_unused_a_to_l);
  mark_unused_keys(keys, k_axolotl_unused_m_to_z);
  mark_unused_keys(keys, k_axolotl_preference_unused);
  walk_rows(s, k_adapter_rows);
  if (s.adapter) {
    walk_rows(s, k_lora_rows);
  } else {
    walk_rows(s, k_full_rows);
  }
  walk_rows(s, k_batch_rows);
  walk_rows(s, k_kernel_rows);
  walk_rows(s, k_parallel_rows);
}

}  // namespace oomplan::launch
