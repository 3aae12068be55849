// Readers for axolotl, torchtune and LLaMA-Factory YAML recipes.
//
// Sources: axolotl src/axolotl/utils/schemas/{config,model,peft,training,
// fsdp}.py (keys and defaults), src/axolotl/utils/config/__init__.py
// (resolve_dtype: the model is loaded in bf16 when bf16 is on),
// src/axolotl/loaders/model.py (bnb 4-bit: nf4, double quantization);
// torchtune recipes/*.py (cfg keys read by each recipe) and
// torchtune/modules/loss; LLaMA-Factory src/llamafactory/hparams/*.py,
// src/llamafactory/model/adapter.py (trainable parameters upcast to fp32
// unless pure_bf16), model/model_utils/checkpointing.py (gradient
// checkpointing on unless disable_gradient_checkpointing).

#include "launch/internal.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <regex>

namespace oomplan::launch {
namespace {

constexpr std::int64_t k_max_batch = 1 << 20;
constexpr std::int64_t k_max_accum = 1 << 20;
constexpr std::int64_t k_max_seq = 10'000'000;
constexpr std::int64_t k_max_gpus = 100'000;
constexpr std::int64_t k_max_rank = 1 << 16;

template <std::size_t N>
void mark_unused(KeyReader& keys, const std::array<const char*, N>& list) {
  for (const char* k : list) {
    keys.unused(k);
  }
}

void fail_if_true(KeyReader& keys, std::string_view key, std::string_view why) {
  if (keys.boolean(key).value_or(false)) {
    keys.fail(key, why);
  }
}

void fail_if_above_one(KeyReader& keys, std::string_view key,
                       std::string_view why) {
  if (keys.integer(key, -1, k_max_gpus).value_or(1) > 1) {
    keys.fail(key, why);
  }
}

// ---- axolotl ----

// axolotl keys (utils/schemas/*.py) that do not change GPU memory.
constexpr std::array k_axolotl_unused = {
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
    "lora_dropout",
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

void read_axolotl(KeyReader& keys, LaunchPlan& plan, const FileLoader& load,
                  const Attached& attached) {
  if (const auto m = keys.string("base_model")) {
    plan.model = *m;
    plan.model_key = "base_model";
  }
  mark_unused(keys, k_axolotl_unused);

  // Adapter and quantization (utils/schemas/peft.py; loaders/model.py builds
  // BitsAndBytesConfig(bnb_4bit_use_double_quant=True, quant_type nf4)).
  const auto adapter = keys.string("adapter");
  const bool in4 = keys.boolean("load_in_4bit").value_or(false);
  const bool in8 = keys.boolean("load_in_8bit").value_or(false);
  const bool gptq = keys.boolean("gptq").value_or(false);
  if (adapter && *adapter != "lora" && *adapter != "qlora") {
    keys.fail("adapter", fmt::format("{} is not modelled; use lora or qlora",
                                     echo(*adapter)));
  }
  if (in4 && in8) {
    keys.fail("load_in_8bit", "load_in_4bit and load_in_8bit are both set");
  }
  if (!adapter && (in4 || in8 || gptq)) {
    keys.fail(in4   ? "load_in_4bit"
              : in8 ? "load_in_8bit"
                    : "gptq",
              "a quantized base trains only through adapters; set adapter: "
              "lora or qlora");
  }
  if (adapter) {
    const bool qlora = *adapter == "qlora" || in4;
    set_option(plan, "--mode", qlora ? "qlora" : "lora", "adapter");
    if (qlora) {
      bool dq = true;
      if (const auto d =
              keys.boolean("bnb_config_kwargs.bnb_4bit_use_double_quant")) {
        dq = *d;
      }
      if (const auto t = keys.string("bnb_config_kwargs.bnb_4bit_quant_type");
          t && *t != "nf4") {
        keys.fail("bnb_config_kwargs.bnb_4bit_quant_type",
                  fmt::format("{} is not modelled; use nf4", echo(*t)));
      }
      set_option(plan, "--quant", dq ? "nf4" : "nf4-nodq",
                 in4 ? "load_in_4bit" : "adapter");
    } else if (in8) {
      set_option(plan, "--quant", "int8", "load_in_8bit");
    } else if (gptq) {
      set_option(plan, "--quant", "gptq", "gptq");
    }
    keys.unused_children("bnb_config_kwargs");
    if (const auto r = keys.integer("lora_r", 1, k_max_rank)) {
      set_option(plan, "--lora-rank", fmt::format("{}", *r), "lora_r");
    }
    if (keys.boolean("lora_target_linear").value_or(false)) {
      set_option(plan, "--lora-targets", "all", "lora_target_linear");
    } else if (const auto t = peft_targets(keys, "lora_target_modules");
               !t.empty()) {
      set_option(plan, "--lora-targets", t, "lora_target_modules");
    }
    if (const auto save = keys.strings("lora_modules_to_save");
        save && !save->empty()) {
      keys.fail("lora_modules_to_save",
                "fully trained copies of modules beside LoRA (embed_tokens, "
                "lm_head) are not modelled; remove it");
    }
    fail_if_true(keys, "peft_use_dora",
                 "DoRA's magnitude vectors and their activations are not "
                 "modelled; use LoRA");
  } else {
    keys.unused({"lora_r", "lora_target_linear", "lora_target_modules",
                 "lora_modules_to_save", "peft_use_dora"});
    if (const auto u = keys.strings("unfrozen_parameters"); u && !u->empty()) {
      keys.fail("unfrozen_parameters",
                "training only some parameters is not modelled; remove it "
                "for a full fine-tune");
    }
  }

  // Sequence and batch (schemas: sequence_len default 512, micro_batch_size
  // default 1; normalize_config: gradient_accumulation_steps =
  // batch_size // micro_batch_size when only batch_size is given).
  if (const auto s = keys.integer("sequence_len", 1, k_max_seq)) {
    set_option(plan, "--seq", fmt::format("{}", *s), "sequence_len");
  }
  const auto micro = keys.integer("micro_batch_size", 1, k_max_batch);
  if (micro) {
    set_option(plan, "--batch", fmt::format("{}", *micro), "micro_batch_size");
  }
  const auto accum =
      keys.integer("gradient_accumulation_steps", 1, k_max_accum);
  if (accum) {
    set_option(plan, "--grad-accum", fmt::format("{}", *accum),
               "gradient_accumulation_steps");
  } else if (const auto total = keys.integer("batch_size", 1, k_max_batch)) {
    const std::int64_t m = micro.value_or(1);
    set_option(plan, "--grad-accum",
               fmt::format("{}", std::max<std::int64_t>(1, *total / m)),
               "batch_size");
  }
  keys.unused("batch_size");

  // Checkpointing and offloading (schemas/config.py).
  if (const Json* gc = keys.read("gradient_checkpointing")) {
    if (gc->is_boolean()) {
      set_option(plan, "--checkpointing", gc->get<bool>() ? "full" : "none",
                 "gradient_checkpointing");
    } else if (gc->is_string() && gc->get<std::string>() == "offload") {
      // Checkpointed layer inputs are moved to CPU RAM.
      set_option(plan, "--checkpointing", "full", "gradient_checkpointing");
      set_option(plan, "--activation-offload", "", "gradient_checkpointing");
    } else {
      keys.fail("gradient_checkpointing",
                fmt::format("{} is not modelled; use true, false or offload "
                            "(offload_disk is not modelled)",
                            echo_json(*gc)));
    }
  }
  keys.unused_children("gradient_checkpointing_kwargs");
  if (const Json* ao = keys.read("activation_offloading")) {
    if ((ao->is_boolean() && ao->get<bool>()) ||
        (ao->is_string() && ao->get<std::string>() == "legacy")) {
      set_option(plan, "--activation-offload", "", "activation_offloading");
    } else if (!ao->is_boolean()) {
      keys.fail(
          "activation_offloading",
          fmt::format("{} is not modelled; use true or false", echo_json(*ao)));
    }
  }
  if (const Json* sc = keys.read("selective_checkpointing");
      sc != nullptr && !(sc->is_boolean() && !sc->get<bool>())) {
    keys.fail("selective_checkpointing",
              "axolotl's selective checkpointing (chosen layers or ops) is not "
              "modelled; use gradient_checkpointing");
  }
  fail_if_true(keys, "layer_offloading", "layer offloading is not modelled");
  fail_if_true(keys, "tiled_mlp", "tiled MLP activations are not modelled");

  // Attention (schemas/config.py flags; transformers' default is sdpa).
  const std::pair<const char*, const char*> k_attn[] = {
      {"flash_attention", "flash"},    {"flex_attention", "flash"},
      {"xformers_attention", "flash"}, {"sage_attention", "flash"},
      {"sdp_attention", "sdpa"},       {"eager_attention", "eager"}};
  for (const auto& [key, attn] : k_attn) {
    if (keys.boolean(key).value_or(false)) {
      set_option(plan, "--attn", attn, key);
    }
  }
  if (const auto a = keys.string("attn_implementation")) {
    set_option(plan, "--attn", hf_attention(keys, "attn_implementation", *a),
               "attn_implementation");
  }

  // Loss: chunked CE, Liger's fused linear CE and Cut Cross-Entropy never
  // hold the logits of the whole sequence.
  for (const char* key :
       {"chunked_cross_entropy", "liger_fused_linear_cross_entropy",
        "cut_cross_entropy"}) {
    if (keys.boolean(key).value_or(false)) {
      set_option(plan, "--loss", "chunked", key);
    }
  }
  keys.unused("chunked_cross_entropy_num_chunks");

  // Precision: resolve_dtype() loads the model in bf16 when bf16 is on (or
  // "auto" on a bf16 GPU), fp16 for fp16/float16/load_in_8bit, else fp32; the
  // HF Trainer then trains those weights as they are.
  const Json* bf16 = keys.read("bf16");
  const bool bf16_on =
      bf16 != nullptr &&
      ((bf16->is_boolean() && bf16->get<bool>()) ||
       (bf16->is_string() && (bf16->get<std::string>() == "auto" ||
                              bf16->get<std::string>() == "full")));
  if (bf16 != nullptr && !bf16->is_boolean() && !bf16_on) {
    keys.fail("bf16", fmt::format("expected true, false, auto or full, got {}",
                                  echo_json(*bf16)));
  }
  const bool fp16_on = keys.boolean("fp16").value_or(false);
  const bool bfloat16 = keys.boolean("bfloat16").value_or(false);
  const bool float16 = keys.boolean("float16").value_or(false);
  keys.boolean("float32");
  const bool bf16_auto = bf16 != nullptr && bf16->is_string();
  if (fp16_on && bf16 != nullptr && bf16->is_boolean() && bf16->get<bool>()) {
    keys.fail("fp16", "bf16 and fp16 are both set; keep one");
  }
  std::string dtype = "fp32";
  std::string dtype_key = "bf16";
  if (fp16_on || float16) {
    dtype = "fp16";
    dtype_key = fp16_on ? "fp16" : "float16";
  } else if (bf16_on || bfloat16) {
    dtype = "bf16";
    dtype_key = bf16_on ? "bf16" : "bfloat16";
  }
  if (bf16 != nullptr || keys.has("fp16") || bfloat16 || float16) {
    set_option(plan, "--dtype", dtype, dtype_key);
  }
  if (bf16_auto && !fp16_on) {
    plan.notes.push_back(
        "bf16: auto trains in bf16 on GPUs that support it (Ampere and newer) "
        "and in fp16 on older ones");
  }
  fail_if_true(keys, "fp8", "FP8 training is not modelled");
  keys.unused("fp8_enable_fsdp_float8_all_gather");

  // Optimizer (default adamw_torch_fused, schemas/training.py).
  if (const auto o = keys.string("optimizer")) {
    set_option(plan, "--optimizer", hf_optimizer(keys, "optimizer", *o),
               "optimizer");
  }
  if (const Json* c = keys.read("torch_compile")) {
    if (c->is_boolean() && c->get<bool>()) {
      set_option(plan, "--compile", "", "torch_compile");
    } else if (c->is_string()) {
      plan.notes.push_back(
          "torch_compile: auto compiles when the installed torch supports it; "
          "give --compile to plan it");
    }
  }
  keys.unused(
      {"torch_compile_backend", "torch_compile_mode", "torch_compile_options"});

  // Parallelism (schemas/config.py).
  if (const auto tp = keys.integer("tensor_parallel_size", 1, k_max_gpus)) {
    if (*tp > 1) {
      set_option(plan, "--tp", fmt::format("{}", *tp), "tensor_parallel_size");
    }
  }
  fail_if_above_one(keys, "context_parallel_size",
                    "context parallelism (ring attention) is not modelled");
  fail_if_above_one(keys, "sequence_parallel_degree",
                    "sequence parallelism (ring attention) is not modelled");
  fail_if_above_one(keys, "dp_replicate_size",
                    "hybrid sharding (replicated shard groups) is not "
                    "modelled");
  keys.unused({"heads_k_stride", "ring_attn_func"});

  if (const Json* rl = keys.read("rl")) {
    keys.fail("rl", fmt::format("preference / RL training ({}) holds chosen "
                                "and rejected sequences and often a "
                                "reference model, which is not modelled",
                                echo_json(*rl)));
  }
  if (keys.has("qat")) {
    keys.fail("qat", "quantization-aware training is not modelled");
  }
  keys.unused_children("quantization");

  // FSDP: `fsdp` list or `fsdp_config` (newer axolotl: fsdp_config alone with
  // fsdp_version 2 turns FSDP on, FULL_SHARD unless reshard_after_forward is
  // false).
  // The version inside fsdp_config, seen before read_hf_fsdp reads it: the
  // fallback below may turn --fsdp on after that read.
  std::optional<std::int64_t> config_version;
  std::string config_version_key;
  for (const char* k : {"fsdp_config.fsdp_version", "fsdp_config.version"}) {
    if (const Json* v = keys.peek(k); v != nullptr && v->is_number_integer()) {
      config_version = v->get<std::int64_t>();
      config_version_key = k;
    }
  }
  read_hf_fsdp(keys, plan, load);
  if (keys.has("fsdp_config") && find_option(plan, "--zero") == nullptr &&
      find_option(plan, "--fsdp") == nullptr) {
    set_option(plan, "--fsdp", "", "fsdp_config");
  }
  // axolotl's top-level fsdp_version (utils/schemas/config.py) picks
  // accelerate's FSDP1 or FSDP2; absent, accelerate's FSDP1.
  if (const auto top = keys.integer("fsdp_version", 1, 2)) {
    mark_fsdp_version(plan, top, "fsdp_version");
  } else {
    mark_fsdp_version(plan, config_version, config_version_key);
  }
  TrainerValues trainer;
  trainer.batch = micro;
  trainer.batch_key = "micro_batch_size";
  trainer.grad_accum = accum;
  trainer.grad_accum_key = "gradient_accumulation_steps";
  trainer.bf16 = dtype == "bf16";
  trainer.fp16 = dtype == "fp16";
  trainer.precision_key = dtype_key;
  const bool deepspeed = keys.has("deepspeed") || attached.deepspeed != nullptr;
  if (deepspeed) {
    fold_trainer_deepspeed(keys, "deepspeed", plan, load, attached, trainer);
  } else if (find_option(plan, "--mode") == nullptr && dtype != "fp32") {
    // Full fine-tune of a model loaded in 16 bits: torch's AdamW keeps its
    // states in the parameters' dtype and nothing holds an fp32 copy.
    set_default(plan, "--precision", "pure",
                fmt::format("axolotl loads the model in {} and the HF Trainer "
                            "trains it as loaded: no fp32 master weights "
                            "(axolotl utils/config/__init__.py resolve_dtype)",
                            dtype));
  }
}

// ---- torchtune ----

namespace {

constexpr std::array k_torchtune_unused = {
    "batch_size_val",
    "clip_grad_norm",
    "collate_fn",
    "cudnn_deterministic_mode",
    "custom_sharded_layers",
    "data_parallel_shard_dim",
    "dataset",
    "dataset_val",
    "enable_async_checkpointing",
    "epochs",
    "log_every_n_steps",
    "log_level",
    "log_peak_memory_stats",
    "low_cpu_ram",
    "lr_scheduler",
    "max_steps_per_epoch",
    "metric_logger",
    "output_dir",
    "profiler",
    "resize_token_embeddings",
    "resume_from_checkpoint",
    "run_val_every_n_steps",
    "save_adapter_weights_only",
    "save_every_n_steps",
    "seed",
    "shuffle",
    "tensor_parallel_plan",
};

// "torchtune.models.llama3_1.lora_llama3_1_8b" -> "llama3.1-8b".
std::string builder_alias(std::string name) {
  if (const auto dot = name.rfind('.'); dot != std::string::npos) {
    name = name.substr(dot + 1);
  }
  for (const char* prefix : {"qlora_", "lora_", "dora_", "qdora_"}) {
    if (name.rfind(prefix, 0) == 0) {
      name = name.substr(std::string_view(prefix).size());
    }
  }
  static const std::regex k_version("([a-z])(\\d+)_(\\d)_");
  name = std::regex_replace(name, k_version, "$1$2.$3_",
                            std::regex_constants::format_first_only);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::string torchtune_optimizer(KeyReader& keys, const std::string& c) {
  // torch.optim and bitsandbytes.optim classes (recipes instantiate
  // cfg.optimizer); torchao's low-bit optimizers by their state width.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12>
      k_classes = {{
          {"torch.optim.AdamW", "adamw"},
          {"torch.optim.Adam", "adamw"},
          {"torch.optim.SGD", "sgd"},
          {"torch.optim.Adafactor", "adafactor"},
          {"bitsandbytes.optim.AdamW", "adamw"},
          {"bitsandbytes.optim.AdamW8bit", "adamw-8bit"},
          {"bitsandbytes.optim.Adam8bit", "adamw-8bit"},
          {"bitsandbytes.optim.PagedAdamW", "paged-adamw"},
          {"bitsandbytes.optim.PagedAdamW32bit", "paged-adamw"},
          {"bitsandbytes.optim.PagedAdamW8bit", "paged-adamw-8bit"},
          {"torchao.optim.AdamW8bit", "adamw-8bit"},
          {"torchao.prototype.low_bit_optim.AdamW8bit", "adamw-8bit"},
      }};
  for (const auto& [from, to] : k_classes) {
    if (c == from) {
      return std::string(to);
    }
  }
  keys.fail("optimizer._component_",
            fmt::format("{} is not modelled; oomplan models torch.optim.AdamW "
                        "/ Adam / SGD / Adafactor and bitsandbytes.optim "
                        "AdamW8bit, PagedAdamW, PagedAdamW8bit",
                        echo(c)));
}

}  // namespace

void read_torchtune(KeyReader& keys, LaunchPlan& plan, std::string_view text) {
  mark_unused(keys, k_torchtune_unused);
  // Recipes say where the checkpoint comes from in a comment:
  // "tune download meta-llama/Meta-Llama-3.1-8B-Instruct --output-dir ...".
  std::optional<std::string> hub_id;
  if (const auto at = text.find("tune download ");
      at != std::string_view::npos) {
    std::string_view rest = text.substr(at + 14);
    const auto end = rest.find_first_of(" \t\r\n");
    rest = rest.substr(0, end);
    if (!rest.empty() && rest.find('/') != std::string_view::npos &&
        rest.size() < 200) {
      hub_id = std::string(rest);
    }
  }
  // The model: the checkpoint folder (a local path), with the builder's name
  // and the folder's base name as aliases.
  const auto dir = keys.string("checkpointer.checkpoint_dir");
  const auto builder = keys.string("model._component_");
  if (!builder) {
    keys.fail("model._component_",
              "names no model builder; torchtune recipes "
              "need model._component_");
  }
  if (dir) {
    std::string d = *dir;
    while (d.size() > 1 && d.back() == '/') {
      d.pop_back();
    }
    plan.model = d;
    plan.model_key = "checkpointer.checkpoint_dir";
    const auto slash = d.rfind('/');
    const std::string base =
        slash == std::string::npos ? d : d.substr(slash + 1);
    if (!base.empty() && base != d) {
      plan.model_aliases.push_back(base);
    }
  }
  if (hub_id) {
    plan.model_aliases.insert(plan.model_aliases.begin(), *hub_id);
  }
  plan.model_aliases.push_back(builder_alias(*builder));
  keys.unused_children("checkpointer");
  if (plan.model.empty()) {
    plan.model = plan.model_aliases.back();
    plan.model_key = "model._component_";
    plan.model_aliases.pop_back();
  }

  // Mode from the builder: torchtune.models.<family>.{lora_,qlora_}<name>;
  // QLoRA bases are torchao NF4 (block 64, quantized scales).
  const std::string leaf = builder->substr(builder->rfind('.') + 1);
  const bool qlora = leaf.rfind("qlora_", 0) == 0 ||
                     keys.boolean("model.quantize_base").value_or(false);
  const bool lora = qlora || leaf.rfind("lora_", 0) == 0;
  if (leaf.rfind("dora_", 0) == 0 || leaf.rfind("qdora_", 0) == 0 ||
      keys.boolean("model.use_dora").value_or(false)) {
    keys.fail("model._component_",
              "DoRA is not modelled; use a lora_ or "
              "qlora_ builder");
  }
  if (lora) {
    set_option(plan, "--mode", qlora ? "qlora" : "lora", "model._component_");
    if (qlora) {
      set_option(plan, "--quant", "nf4", "model._component_");
    }
    if (const auto r = keys.integer("model.lora_rank", 1, k_max_rank)) {
      set_option(plan, "--lora-rank", fmt::format("{}", *r), "model.lora_rank");
    }
    std::string targets = peft_targets(keys, "model.lora_attn_modules");
    if (keys.boolean("model.apply_lora_to_mlp").value_or(false)) {
      targets += targets.empty() ? "gate,up,down" : ",gate,up,down";
    }
    if (!targets.empty()) {
      set_option(plan, "--lora-targets",
                 targets == "q,k,v,o,gate,up,down" ? "all" : targets,
                 "model.lora_attn_modules");
    }
    fail_if_true(keys, "model.apply_lora_to_output",
                 "LoRA on the output projection is not modelled; set it to "
                 "False");
  }
  keys.unused_children("model");

  if (const Json* len = keys.peek("tokenizer.max_seq_len")) {
    (void)len;
    const auto s = keys.integer("tokenizer.max_seq_len", 1, k_max_seq);
    set_option(plan, "--seq", fmt::format("{}", *s), "tokenizer.max_seq_len");
  } else {
    keys.read("tokenizer.max_seq_len");
    plan.notes.push_back(
        "tokenizer.max_seq_len is not set: torchtune does not truncate, so "
        "the longest sample sets the sequence; give --seq");
  }
  keys.unused_children("tokenizer");
  if (keys.boolean("dataset.packed").value_or(false)) {
    plan.notes.push_back(
        "dataset.packed: each row packs samples up to "
        "tokenizer.max_seq_len tokens");
  }
  keys.unused_children("dataset");

  if (const auto b = keys.integer("batch_size", 1, k_max_batch)) {
    set_option(plan, "--batch", fmt::format("{}", *b), "batch_size");
  }
  if (const auto g =
          keys.integer("gradient_accumulation_steps", 1, k_max_accum)) {
    set_option(plan, "--grad-accum", fmt::format("{}", *g),
               "gradient_accumulation_steps");
  }
  if (const auto o = keys.string("optimizer._component_")) {
    set_option(plan, "--optimizer", torchtune_optimizer(keys, *o),
               "optimizer._component_");
  }
  keys.unused_children("optimizer");
  if (keys.boolean("optimizer_in_bwd").value_or(false)) {
    set_option(plan, "--optimizer-in-bwd", "", "optimizer_in_bwd");
  }
  // torchtune/modules/loss: CEWithChunkedOutputLoss and LinearCrossEntropyLoss
  // compute the loss in chunks; torch.nn.CrossEntropyLoss does not.
  if (const auto l = keys.string("loss._component_")) {
    const std::string& c = *l;
    if (c.find("ChunkedOutputLoss") != std::string::npos ||
        c.find("LinearCrossEntropyLoss") != std::string::npos) {
      set_option(plan, "--loss", "chunked", "loss._component_");
    } else if (c == "torch.nn.CrossEntropyLoss") {
      set_option(plan, "--loss", "full", "loss._component_");
    } else {
      keys.fail("loss._component_",
                fmt::format("{} is not modelled; use LinearCrossEntropyLoss, "
                            "CEWithChunkedOutputLoss or "
                            "torch.nn.CrossEntropyLoss",
                            echo(c)));
    }
  }
  keys.unused_children("loss");
  if (const Json* c = keys.read("compile")) {
    if ((c->is_boolean() && c->get<bool>()) || c->is_object()) {
      set_option(plan, "--compile", "", "compile");
    }
  }
  if (const auto ac = keys.boolean("enable_activation_checkpointing")) {
    set_option(plan, "--checkpointing", *ac ? "full" : "none",
               "enable_activation_checkpointing");
  }
  if (const auto mode = keys.string("ac_mode"); mode && *mode != "full") {
    keys.fail("ac_mode", fmt::format("{} checkpointing (every n-th layer) is "
                                     "not modelled; use full",
                                     echo(*mode)));
  }
  keys.unused("ac_option");
  if (keys.boolean("enable_activation_offloading").value_or(false)) {
    set_option(plan, "--activation-offload", "",
               "enable_activation_offloading");
  }
  // training.get_dtype: fp16, bf16, fp32 (fp64 is refused here).
  if (const auto d = keys.string("dtype")) {
    if (*d != "bf16" && *d != "fp32" && *d != "fp16") {
      keys.fail("dtype",
                fmt::format("{} is not modelled; use bf16 or fp32", echo(*d)));
    }
    set_option(plan, "--dtype", *d, "dtype");
  }
  if (const auto dev = keys.string("device"); dev && *dev != "cuda") {
    keys.fail("device",
              fmt::format("{} is not a GPU; oomplan plans cuda", echo(*dev)));
  }
  // Distributed recipes: FSDP2 over data_parallel_shard_dim; fsdp_cpu_offload
  // is CPUOffloadPolicy (parameters, gradients and the optimizer step on the
  // CPU); fsdp_reshard_after_forward false keeps gathered weights (ZeRO-2).
  if (keys.boolean("fsdp_cpu_offload").value_or(false)) {
    set_option(plan, "--offload", "all", "fsdp_cpu_offload");
  }
  if (!keys.boolean("fsdp_reshard_after_forward").value_or(true)) {
    set_option(plan, "--zero", "2", "fsdp_reshard_after_forward");
  }
  if (const auto tp = keys.integer("tensor_parallel_dim", 1, k_max_gpus);
      tp && *tp > 1) {
    set_option(plan, "--tp", fmt::format("{}", *tp), "tensor_parallel_dim");
  }
  fail_if_above_one(keys, "context_parallel_dim",
                    "context parallelism is not modelled; set it to 1");
  fail_if_above_one(keys, "data_parallel_replicate_dim",
                    "hybrid sharding (replicated shard groups) is not "
                    "modelled; set it to 1");
  fail_if_true(keys, "enable_fp8_training", "FP8 training is not modelled");
  keys.unused("fp8_recipe_name");
  for (const char* k : {"ref_model", "teacher_model", "quantizer"}) {
    if (keys.has(k)) {
      keys.fail(k,
                "a second model (reference, teacher) or QAT is not "
                "modelled; use an SFT recipe");
    }
  }
  keys.unused("fake_quant_after_n_steps");
}

// ---- LLaMA-Factory ----

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
    "lora_dropout",
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

}  // namespace

void read_llama_factory(KeyReader& keys, LaunchPlan& plan,
                        const FileLoader& load, const Attached& attached) {
  if (const auto m = keys.string("model_name_or_path")) {
    plan.model = *m;
    plan.model_key = "model_name_or_path";
  }
  mark_unused(keys, k_llama_factory_unused);
  mark_hf_unused(keys);
  // stage (finetuning_args.py): pt, sft, rm, ppo, dpo, kto.
  const std::string stage = keys.string("stage").value_or("sft");
  if (stage != "sft" && stage != "pt" && stage != "rm") {
    keys.fail("stage", fmt::format("{} training holds more than one model or "
                                   "paired sequences, which is not modelled; "
                                   "use sft or pt",
                                   echo(stage)));
  }
  for (const char* k : {"pref_beta",
                        "pref_ftx",
                        "pref_loss",
                        "pref_bco_weight",
                        "dpo_label_smoothing",
                        "kto_chosen_weight",
                        "kto_rejected_weight",
                        "simpo_gamma",
                        "ref_model",
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
                        "ld_alpha"}) {
    keys.unused(k);
  }
  // finetuning_type: lora (the default), full, freeze, oft.
  const std::string type = keys.string("finetuning_type").value_or("lora");
  if (type != "lora" && type != "full") {
    keys.fail("finetuning_type",
              fmt::format("{} is not modelled; use lora or full", echo(type)));
  }
  keys.unused({"freeze_trainable_layers", "freeze_trainable_modules",
               "freeze_extra_modules", "oft_rank", "oft_block_size",
               "oft_target", "module_dropout"});
  const auto bits = keys.integer("quantization_bit", 2, 8);
  const std::string method = keys.string("quantization_method").value_or("bnb");
  if (bits && (method != "bnb" || (*bits != 4 && *bits != 8))) {
    keys.fail("quantization_bit",
              fmt::format("{}-bit {} quantization is not modelled; use 4 or 8 "
                          "with quantization_method bnb",
                          *bits, method));
  }
  if (bits && type == "full") {
    keys.fail("quantization_bit",
              "quantized models train only through LoRA "
              "(LLaMA-Factory refuses full)");
  }
  if (type == "lora") {
    if (bits && *bits == 4) {
      set_option(plan, "--mode", "qlora", "quantization_bit");
      if (const auto q = keys.string("quantization_type"); q && *q != "nf4") {
        keys.fail("quantization_type",
                  fmt::format("{} is not modelled; use nf4", echo(*q)));
      }
      // model_args.py: double_quantization defaults to True.
      const bool dq = keys.boolean("double_quantization").value_or(true);
      set_option(plan, "--quant", dq ? "nf4" : "nf4-nodq", "quantization_bit");
    } else {
      set_option(plan, "--mode", "lora", "finetuning_type");
      if (bits) {
        set_option(plan, "--quant", "int8", "quantization_bit");
      }
    }
    if (const auto r = keys.integer("lora_rank", 1, k_max_rank)) {
      set_option(plan, "--lora-rank", fmt::format("{}", *r), "lora_rank");
    }
    if (const auto t = peft_targets(keys, "lora_target"); !t.empty()) {
      set_option(plan, "--lora-targets", t, "lora_target");
    }
    if (const auto extra = keys.strings("additional_target");
        extra && !extra->empty()) {
      keys.fail("additional_target",
                "fully trained modules beside LoRA are "
                "not modelled; remove it");
    }
    fail_if_true(keys, "use_dora", "DoRA is not modelled; use LoRA");
  } else {
    set_option(plan, "--mode", "full", "finetuning_type");
    keys.unused({"lora_rank", "lora_target", "additional_target", "use_dora",
                 "quantization_type"});
  }
  keys.unused("quantization_method");
  for (const char* k :
       {"use_galore", "use_apollo", "use_badam", "use_adam_mini", "use_muon",
        "use_llama_pro", "use_mca", "use_megatron_bridge", "use_hyper_parallel",
        "use_kt", "use_unsloth", "shift_attn", "mixture_of_depths", "fp8"}) {
    fail_if_true(keys, k, fmt::format("{} is not modelled; remove it", k));
  }
  keys.unused({"galore_target",
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
               "fp8_backend",
               "fp8_enable_fsdp_float8_all_gather"});

  if (const auto c = keys.integer("cutoff_len", 1, k_max_seq)) {
    set_option(plan, "--seq", fmt::format("{}", *c), "cutoff_len");
  }
  // flash_attn (model_args.py AttentionFunction): auto lets transformers
  // pick (sdpa), disabled is eager, fa2/fa3 are FlashAttention.
  if (const auto a = keys.string("flash_attn")) {
    if (*a == "fa2" || *a == "fa3") {
      set_option(plan, "--attn", "flash", "flash_attn");
    } else if (*a == "sdpa" || *a == "auto") {
      set_option(plan, "--attn", "sdpa", "flash_attn");
    } else if (*a == "disabled") {
      set_option(plan, "--attn", "eager", "flash_attn");
    } else {
      keys.fail("flash_attn", fmt::format("{} is not an attention choice; use "
                                          "auto, disabled, sdpa, fa2 or fa3",
                                          echo(*a)));
    }
  }
  if (const auto off = keys.boolean("disable_gradient_checkpointing")) {
    set_option(plan, "--checkpointing", *off ? "none" : "full",
               "disable_gradient_checkpointing");
  }
  if (keys.boolean("use_unsloth_gc").value_or(false)) {
    // Unsloth's checkpointing moves the saved layer inputs to CPU RAM.
    set_option(plan, "--checkpointing", "full", "use_unsloth_gc");
    set_option(plan, "--activation-offload", "", "use_unsloth_gc");
  }
  if (keys.boolean("enable_liger_kernel").value_or(false)) {
    // model_utils/liger_kernel.py: fused linear cross-entropy unless the
    // logits are needed (compute_accuracy).
    if (!keys.peek("compute_accuracy") ||
        !keys.boolean("compute_accuracy").value_or(false)) {
      set_option(plan, "--loss", "chunked", "enable_liger_kernel");
    }
  }

  // The HF Trainer arguments LLaMA-Factory passes through.
  TrainerValues trainer;
  if (const auto b =
          keys.integer("per_device_train_batch_size", 1, k_max_batch)) {
    trainer.batch = *b;
    trainer.batch_key = "per_device_train_batch_size";
    set_option(plan, "--batch", fmt::format("{}", *b),
               "per_device_train_batch_size");
  }
  if (const auto g =
          keys.integer("gradient_accumulation_steps", 1, k_max_accum)) {
    trainer.grad_accum = *g;
    trainer.grad_accum_key = "gradient_accumulation_steps";
    set_option(plan, "--grad-accum", fmt::format("{}", *g),
               "gradient_accumulation_steps");
  }
  const bool bf16 = keys.boolean("bf16").value_or(false);
  const bool fp16 = keys.boolean("fp16").value_or(false);
  const bool pure = keys.boolean("pure_bf16").value_or(false);
  if (bf16 && fp16) {
    keys.fail("fp16", "bf16 and fp16 are both set; keep one");
  }
  trainer.bf16 = bf16 || pure;
  trainer.fp16 = fp16;
  trainer.precision_key = pure ? "pure_bf16" : bf16 ? "bf16" : "fp16";
  if (bf16 || fp16 || pure) {
    set_option(plan, "--dtype", fp16 ? "fp16" : "bf16",
               pure ? "pure_bf16" : trainer.precision_key);
  } else if (keys.has("bf16") || keys.has("fp16")) {
    set_option(plan, "--dtype", "fp32", keys.has("bf16") ? "bf16" : "fp16");
  }
  if (pure) {
    set_option(plan, "--precision", "pure", "pure_bf16");
  }
  if (const auto o = keys.string("optim")) {
    set_option(plan, "--optimizer", hf_optimizer(keys, "optim", *o), "optim");
  }
  if (keys.boolean("torch_compile").value_or(false)) {
    set_option(plan, "--compile", "", "torch_compile");
  }
  // Every other TrainingArguments field passes through unread.
  read_hf_fsdp(keys, plan, load);
  if (keys.has("deepspeed") || attached.deepspeed != nullptr) {
    fold_trainer_deepspeed(keys, "deepspeed", plan, load, attached, trainer);
    if (pure) {
      // DeepSpeed still makes fp32 master copies of the bf16 weights.
      erase_option(plan, "--precision");
      plan.notes.push_back(
          "pure_bf16 under DeepSpeed: DeepSpeed still keeps "
          "fp32 master weights and optimizer states");
    }
    const LaunchOption* zero = find_option(plan, "--zero");
    if (pure && zero != nullptr && zero->value == "3") {
      // hparams/parser.py refuses the pair.
      keys.fail("pure_bf16",
                "pure_bf16 is incompatible with DeepSpeed ZeRO-3 "
                "(LLaMA-Factory refuses it); drop one");
    }
  }
}

}  // namespace oomplan::launch
