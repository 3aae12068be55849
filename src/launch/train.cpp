// Readers for DeepSpeed JSON, Hugging Face TrainingArguments / TRL SFTConfig
// (JSON or YAML) and accelerate config YAML, and the pieces axolotl and
// LLaMA-Factory share with them (optimizer and attention names, FSDP, a
// DeepSpeed config folded into a training file's plan).
//
// Sources: transformers src/transformers/training_args.py (TrainingArguments,
// OptimizerNames), src/transformers/integrations/deepspeed.py
// (HfTrainerDeepSpeedConfig.trainer_config_process: "auto" filled from the
// Trainer's arguments, mismatches refused); trl trl/trainer/sft_config.py,
// base_config.py, model_config.py (v1.9); DeepSpeed deepspeed/runtime/config.py
// and deepspeed/runtime/zero/config.py, offload_config.py; accelerate
// src/accelerate/commands/config/config_args.py and utils/dataclasses.py.

#include "launch/internal.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan::launch {
namespace {

constexpr std::int64_t k_max_batch = 1 << 20;
constexpr std::int64_t k_max_accum = 1 << 20;
constexpr std::int64_t k_max_seq = 10'000'000;
constexpr std::int64_t k_max_gpus = 100'000;
constexpr std::int64_t k_max_rank = 1 << 16;

std::string join_path(std::string_view base, std::string_view key) {
  return base.empty() ? std::string(key) : fmt::format("{}.{}", base, key);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return out;
}

// TrainingArguments fields (transformers v5 and the v4 names still found in
// configs) that do not change GPU memory. Memory-relevant fields are read by
// name in read_hf_trainer.
constexpr std::array k_hf_unused = {
    "accelerator_config",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "auto_find_batch_size",
    "average_tokens_across_devices",
    "batch_eval_metrics",
    "bf16_full_eval",
    "data_seed",
    "dataloader_drop_last",
    "dataloader_num_workers",
    "dataloader_persistent_workers",
    "dataloader_pin_memory",
    "dataloader_prefetch_factor",
    "ddp_backend",
    "ddp_broadcast_buffers",
    "ddp_bucket_cap_mb",
    "ddp_find_unused_parameters",
    "ddp_timeout",
    "debug",
    "disable_tqdm",
    "dispatch_batches",
    "do_eval",
    "do_predict",
    "do_train",
    "enable_jit_checkpoint",
    "eval_accumulation_steps",
    "eval_delay",
    "eval_do_concat_batches",
    "eval_on_start",
    "eval_steps",
    "eval_strategy",
    "eval_use_gather_object",
    "evaluation_strategy",
    "fp16_backend",
    "fp16_full_eval",
    "fp16_opt_level",
    "full_determinism",
    "greater_is_better",
    "group_by_length",
    "half_precision_backend",
    "hub_always_push",
    "hub_model_id",
    "hub_private_repo",
    "hub_revision",
    "hub_strategy",
    "hub_token",
    "ignore_data_skip",
    "include_for_metrics",
    "include_inputs_for_metrics",
    "include_num_input_tokens_seen",
    "include_tokens_per_second",
    "jit_mode_eval",
    "label_names",
    "label_smoothing_factor",
    "learning_rate",
    "length_column_name",
    "load_best_model_at_end",
    "local_rank",
    "log_level",
    "log_level_replica",
    "log_on_each_node",
    "logging_dir",
    "logging_first_step",
    "logging_nan_inf_filter",
    "logging_steps",
    "logging_strategy",
    "lr_scheduler_kwargs",
    "lr_scheduler_type",
    "max_grad_norm",
    "max_steps",
    "metric_for_best_model",
    "mp_parameters",
    "neftune_noise_alpha",
    "no_cuda",
    "num_train_epochs",
    "optim_args",
    "output_dir",
    "overwrite_output_dir",
    "past_index",
    "per_device_eval_batch_size",
    "per_gpu_eval_batch_size",
    "prediction_loss_only",
    "project",
    "push_to_hub",
    "push_to_hub_model_id",
    "push_to_hub_organization",
    "push_to_hub_token",
    "ray_scope",
    "remove_unused_columns",
    "report_to",
    "restore_callback_states_from_checkpoint",
    "resume_from_checkpoint",
    "run_name",
    "save_on_each_node",
    "save_only_model",
    "save_safetensors",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "seed",
    "skip_memory_metrics",
    "split_batches",
    "tf32",
    "torch_empty_cache_steps",
    "tpu_metrics_debug",
    "tpu_num_cores",
    "trackio_space_id",
    "train_sampling_strategy",
    "use_cache",
    "use_legacy_prediction_loop",
    "use_mps_device",
    "warmup_ratio",
    "warmup_steps",
    "weight_decay",
};

// TRL keys (SFTConfig, ModelConfig, ScriptArguments) and transformers example
// script keys (run_clm.py ModelArguments / DataTrainingArguments) that do not
// change memory.
constexpr std::array k_trl_unused = {
    "assistant_only_loss",
    "bnb_4bit_quant_storage",
    "cache_dir",
    "chat_template_path",
    "completion_only_loss",
    "config_name",
    "dataset_config",
    "dataset_config_name",
    "dataset_kwargs",
    "dataset_name",
    "dataset_num_proc",
    "dataset_streaming",
    "dataset_test_split",
    "dataset_text_field",
    "dataset_train_split",
    "env",
    "eos_token",
    "eval_packing",
    "gradient_checkpointing_use_reentrant",
    "ignore_bias_buffers",
    "keep_linebreaks",
    "lora_alpha",
    "lora_dropout",
    "lora_task_type",
    "low_cpu_mem_usage",
    "max_eval_samples",
    "max_train_samples",
    "model_revision",
    "overwrite_cache",
    "packing",
    "packing_strategy",
    "pad_to_multiple_of",
    "pad_token",
    "padding_free",
    "preprocessing_num_workers",
    "router_aux_loss_coef",
    "shuffle_dataset",
    "streaming",
    "token",
    "tokenizer_name",
    "train_file",
    "trust_remote_code",
    "truncation_mode",
    "use_fast_tokenizer",
    "use_rslora",
    "validation_file",
    "validation_split_percentage",
};

// Keys only TRL's configs have: a file with one is a TRL SFTConfig (or a `trl
// sft --config` YAML), whose defaults differ from TrainingArguments'.
constexpr std::array k_trl_markers = {
    "assistant_only_loss",
    "completion_only_loss",
    "dataset_kwargs",
    "dataset_num_proc",
    "dataset_text_field",
    "eos_token",
    "loss_type",
    "max_length",
    "max_seq_length",
    "model_init_kwargs",
    "packing",
    "packing_strategy",
    "padding_free",
    "use_peft",
    "use_bnb_nested_quant",
    "activation_offloading",
    "dataset_name",
    "dataset_train_split",
};

template <std::size_t N>
void mark_unused(KeyReader& keys, const std::array<const char*, N>& list) {
  for (const char* k : list) {
    keys.unused(k);
  }
}

}  // namespace

std::string load_named(const KeyReader& keys, std::string_view key,
                       const std::string& path, const FileLoader& load) {
  std::optional<std::string> text;
  if (load) {
    text = load(path, keys.origin());
  }
  if (!text) {
    keys.fail(key, fmt::format("names {}, which cannot be read; give the file "
                               "next to this one or fix the path",
                               echo(path)));
  }
  check_text(*text, path);
  return *text;
}

// ---- names shared by the HF-based readers ----

std::string hf_optimizer(KeyReader& keys, std::string_view key,
                         std::string_view name_in) {
  const std::string name = lower(name_in);
  // transformers OptimizerNames (training_args.py) and axolotl's
  // CustomSupportedOptimizers (utils/schemas/enums.py), by the states each
  // keeps per parameter.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 21>
      k_names = {{
          {"adamw_torch", "adamw"},
          {"adamw_torch_fused", "adamw"},
          {"adamw_hf", "adamw"},
          {"adamw", "adamw"},
          {"adamw_apex_fused", "adamw"},
          {"adamw_torch_xla", "adamw"},
          {"adamw_torch_npu_fused", "adamw"},
          {"stable_adamw", "adamw"},
          {"optimi_adamw", "adamw"},
          {"adamw_bnb_8bit", "adamw-8bit"},
          {"adamw_8bit", "adamw-8bit"},
          {"adamw_torch_8bit", "adamw-8bit"},
          {"ao_adamw_8bit", "adamw-8bit"},
          {"paged_adamw_32bit", "paged-adamw"},
          {"paged_adamw", "paged-adamw"},
          {"paged_adamw_8bit", "paged-adamw-8bit"},
          {"adafactor", "adafactor"},
          {"sgd", "sgd"},
          {"torch.optim.adamw", "adamw"},
          {"torch.optim.adam", "adamw"},
          {"torch.optim.sgd", "sgd"},
      }};
  for (const auto& [from, to] : k_names) {
    if (name == from) {
      return std::string(to);
    }
  }
  keys.fail(key,
            fmt::format("optimizer {} is not modelled; oomplan models AdamW "
                        "(adamw_torch, adamw_torch_fused, adamw_hf, "
                        "stable_adamw), 8-bit AdamW (adamw_8bit, "
                        "adamw_bnb_8bit, adamw_torch_8bit), paged AdamW "
                        "(paged_adamw_32bit, paged_adamw_8bit), adafactor and "
                        "sgd",
                        echo(name_in)));
}

std::string hf_attention(KeyReader& keys, std::string_view key,
                         std::string_view name) {
  // transformers modeling_utils.py attn_implementation values; flex and the
  // flash kernels never hold the s x s score matrix.
  if (name == "eager") {
    return "eager";
  }
  if (name == "sdpa") {
    return "sdpa";
  }
  if (name == "flash_attention_2" || name == "flash_attention_3" ||
      name == "flex_attention" || name == "kernels-community/flash-attn" ||
      name == "kernels-community/flash-attn3" ||
      name == "kernels-community/vllm-flash-attn3") {
    return "flash";
  }
  keys.fail(key, fmt::format("attention {} is not modelled; use eager, sdpa, "
                             "flash_attention_2, flash_attention_3 or "
                             "flex_attention",
                             echo(name)));
}

void mark_fsdp_version(LaunchPlan& plan, std::optional<std::int64_t> version,
                       const std::string& key) {
  if (find_option(plan, "--fsdp") == nullptr) {
    return;  // SHARD_GRAD_OP or no FSDP: --fsdp-version applies to --fsdp
  }
  if (version) {
    set_option(plan, "--fsdp-version", fmt::format("{}", *version), key);
  } else if (find_option(plan, "--fsdp-version") == nullptr) {
    // accelerate utils/dataclasses.py FullyShardedDataParallelPlugin:
    // fsdp_version defaults to 1 (FSDP_VERSION unset),
    // FullyShardedDataParallel.
    set_default(plan, "--fsdp-version", "1",
                "transformers and accelerate wrap with FSDP1 "
                "(FullyShardedDataParallel) unless fsdp_version is 2");
  }
}

void read_hf_fsdp(KeyReader& keys, LaunchPlan& plan, const FileLoader& load) {
  // `fsdp`: "full_shard auto_wrap" or a list (transformers trainer_utils.py
  // FSDPOption); axolotl also accepts the list form.
  if (const auto words = keys.strings("fsdp")) {
    for (const auto& w : *words) {
      if (w == "full_shard") {
        set_option(plan, "--fsdp", "", "fsdp");
      } else if (w == "shard_grad_op") {
        set_option(plan, "--zero", "2", "fsdp");
      } else if (w == "offload") {
        // FSDP CPUOffload(offload_params=True) keeps parameters and
        // gradients on the CPU and steps the optimizer there.
        set_option(plan, "--offload", "all", "fsdp");
      } else if (w == "hybrid_shard" || w == "hybrid_shard_zero2") {
        keys.fail("fsdp", fmt::format("{} shards within a node and replicates "
                                      "across nodes, which is not modelled; "
                                      "use full_shard or shard_grad_op",
                                      w));
      } else if (w != "auto_wrap" && w != "no_shard") {
        keys.fail("fsdp", fmt::format("{} is not an FSDP option; use "
                                      "full_shard, shard_grad_op, offload, "
                                      "auto_wrap",
                                      echo(w)));
      }
    }
  }
  const Json* config = keys.peek("fsdp_config");
  if (config == nullptr) {
    keys.read("fsdp_config");  // present but null
    mark_fsdp_version(plan, std::nullopt, "");
    return;
  }
  std::optional<Json> loaded;
  std::optional<KeyReader> file_keys;
  KeyReader* r = &keys;
  std::string base = "fsdp_config";
  std::optional<std::int64_t> version;
  std::string version_key;
  if (config->is_string()) {
    keys.read("fsdp_config");
    const std::string path = config->get<std::string>();
    const std::string text = load_named(keys, "fsdp_config", path, load);
    loaded = parse_json_text(text, path);
    file_keys.emplace(*loaded, path);
    r = &*file_keys;
    base = "";
    plan.included_files.push_back(path);
  } else if (!config->is_object()) {
    keys.fail("fsdp_config", fmt::format("expected a mapping or a JSON file, "
                                         "got {}",
                                         echo_json(*config)));
  }
  // transformers strips an "fsdp_" prefix from fsdp_config keys
  // (TrainingArguments._process_fsdp_args); both spellings are read.
  const Json& cfg = base.empty() ? *loaded : *config;
  for (const auto& item : cfg.items()) {
    const std::string& k = item.key();
    const std::string bare = k.rfind("fsdp_", 0) == 0 ? k.substr(5) : k;
    const std::string path = join_path(base, k);
    if (bare == "activation_checkpointing") {
      if (r->boolean(path).value_or(false)) {
        set_option(plan, "--checkpointing", "full", path);
      }
    } else if (bare == "offload_params" || bare == "cpu_offload") {
      if (r->boolean(path).value_or(false)) {
        set_option(plan, "--offload", "all", path);
      }
    } else if (bare == "reshard_after_forward") {
      // FSDP2 fully_shard(reshard_after_forward=False) keeps the gathered
      // parameters after forward: ZeRO-2 semantics.
      if (!r->boolean(path).value_or(true)) {
        set_option(plan, "--zero", "2", path);
        plan.options.erase(
            std::remove_if(
                plan.options.begin(), plan.options.end(),
                [](const LaunchOption& o) { return o.flag == "--fsdp"; }),
            plan.options.end());
      }
    } else if (bare == "sharding_strategy") {
      const auto s = r->string(path).value_or("");
      if (s == "FULL_SHARD" || s == "1") {
        if (find_option(plan, "--fsdp") == nullptr) {
          set_option(plan, "--fsdp", "", path);
        }
      } else if (s == "SHARD_GRAD_OP" || s == "2") {
        set_option(plan, "--zero", "2", path);
        erase_option(plan, "--fsdp");
      } else if (s != "NO_SHARD" && s != "3") {
        r->fail(path, fmt::format("{} is not modelled; use FULL_SHARD, "
                                  "SHARD_GRAD_OP or NO_SHARD",
                                  echo(s)));
      }
    } else if (bare == "xla") {
      if (r->boolean(path).value_or(false)) {
        r->fail(path, "PyTorch/XLA FSDP is not modelled");
      }
    } else if (bare == "version") {
      // transformers TrainingArguments fsdp_config["version"] becomes
      // accelerate's FullyShardedDataParallelPlugin(fsdp_version=...).
      version = r->integer(path, 1, 2);
      version_key = path;
    } else if (bare == "min_num_params" ||
               bare == "transformer_layer_cls_to_wrap" ||
               bare == "backward_prefetch" || bare == "forward_prefetch" ||
               bare == "limit_all_gathers" || bare == "use_orig_params" ||
               bare == "sync_module_states" ||
               bare == "cpu_ram_efficient_loading" ||
               bare == "state_dict_type" || bare == "auto_wrap_policy" ||
               bare == "xla_fsdp_settings" || bare == "xla_fsdp_grad_ckpt" ||
               bare == "final_state_dict_type" ||
               bare == "cpu_offload_pin_memory" ||
               bare == "mixed_precision_policy") {
      r->unused(path);
    }
  }
  mark_fsdp_version(plan, version, version_key);
  if (file_keys) {
    LaunchPlan sub;
    file_keys->finish(sub);
    for (auto& k : sub.unused_keys) {
      plan.unused_keys.push_back(fmt::format("{}: {}", file_keys->origin(), k));
    }
    for (auto& k : sub.unknown_keys) {
      plan.unknown_keys.push_back(
          fmt::format("{}: {}", file_keys->origin(), k));
    }
  }
}

// ---- DeepSpeed ----

namespace {

// deepspeed/runtime/zero/config.py DeepSpeedZeroConfig fields that size
// communication buckets and prefetch windows or steer checkpoint saving;
// oomplan's overhead term stands for DeepSpeed's default buffers.
constexpr std::array k_ds_zero_unused = {
    "allgather_bucket_size",
    "allgather_partitions",
    "contiguous_gradients",
    "cpu_offload_use_pin_memory",
    "elastic_checkpoint",
    "gather_16bit_weights_on_model_save",
    "ignore_unused_parameters",
    "legacy_stage1",
    "load_from_fp32_weights",
    "log_trace_cache_warnings",
    "max_live_parameters",
    "max_reuse_distance",
    "memory_efficient_linear",
    "model_persistence_threshold",
    "module_granularity_threshold",
    "overlap_comm",
    "override_module_apply",
    "param_persistence_threshold",
    "pipeline_loading_checkpoint",
    "prefetch_bucket_size",
    "reduce_bucket_size",
    "reduce_scatter",
    "round_robin_gradients",
    "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_module_granularity_threshold",
    "stage3_param_persistence_threshold",
    "stage3_prefetch_bucket_size",
    "stage3_use_all_reduce_for_fetch_params",
    "sub_group_size",
    "use_all_reduce_for_fetch_params",
    "use_multi_rank_bucket_allreduce",
    "zero_quantized_gradients",
    "zero_quantized_nontrainable_weights",
    "zero_quantized_weights",
    "zeropp_loco_param",
};

constexpr std::array k_ds_unused = {
    "aio",
    "autotuning",
    "checkpoint",
    "comet",
    "communication_data_type",
    "comms_logger",
    "compile",
    "csv_monitor",
    "curriculum_learning",
    "data_efficiency",
    "dump_state",
    "elasticity",
    "flops_profiler",
    "gradient_clipping",
    "gradient_predivide_factor",
    "memory_breakdown",
    "monitor_config",
    "prescale_gradients",
    "scheduler",
    "seq_parallel_communication_data_type",
    "sparse_gradients",
    "steps_per_print",
    "tensorboard",
    "timers",
    "wall_clock_breakdown",
    "wandb",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
};

// offload_optimizer / offload_param "device": none, cpu, nvme
// (deepspeed/runtime/zero/offload_config.py OffloadDeviceEnum).
bool offload_device(KeyReader& keys, std::string_view path) {
  const auto device = keys.string(path);
  if (!device || *device == "none") {
    return false;
  }
  if (*device == "cpu") {
    return true;
  }
  if (*device == "nvme") {
    keys.fail(path, "NVMe offload is not modelled; use cpu or none");
  }
  keys.fail(path, fmt::format("{} is not an offload device; use none, cpu or "
                              "nvme",
                              echo(*device)));
}

std::optional<std::int64_t> count_or_auto(KeyReader& keys,
                                          std::string_view path, bool& is_auto,
                                          std::int64_t hi) {
  if (keys.is_auto(path)) {
    keys.read(path);
    is_auto = true;
    return std::nullopt;
  }
  return keys.integer(path, 1, hi);
}

std::optional<bool> enabled_or_auto(KeyReader& keys, std::string_view section,
                                    bool& is_auto) {
  const std::string path = join_path(section, "enabled");
  if (keys.is_auto(path)) {
    keys.read(path);
    is_auto = true;
    return std::nullopt;
  }
  return keys.boolean(path);
}

}  // namespace

DeepSpeedFacts read_deepspeed(KeyReader& keys, LaunchPlan& plan) {
  DeepSpeedFacts facts;
  if (!keys.doc().is_object()) {
    keys.fail("(top level)", "a DeepSpeed config is a JSON object");
  }
  const std::string zero = "zero_optimization";
  const Json* z = keys.peek(zero);
  if (z != nullptr && !z->is_object()) {
    keys.fail(zero, fmt::format("expected a mapping, got {}", echo_json(*z)));
  }
  if (const auto stage = keys.integer("zero_optimization.stage", 0, 3)) {
    facts.stage = static_cast<int>(*stage);
    set_option(plan, "--zero", fmt::format("{}", *stage),
               "zero_optimization.stage");
  }
  for (const char* k : k_ds_zero_unused) {
    keys.unused(join_path(zero, k));
  }
  // ZeRO++ hierarchical partitioning keeps a secondary weight copy per node;
  // MiCS shards within groups (deepspeed/runtime/zero/config.py).
  if (keys.integer("zero_optimization.zero_hpz_partition_size", 1, k_max_gpus)
          .value_or(1) > 1) {
    keys.fail("zero_optimization.zero_hpz_partition_size",
              "ZeRO++ hierarchical partitioning (a secondary copy of the "
              "weights) is not modelled; remove it or set it to 1");
  }
  if (keys.integer("zero_optimization.mics_shard_size", -1, k_max_gpus)
          .value_or(-1) > 0) {
    keys.fail("zero_optimization.mics_shard_size",
              "MiCS sharding within groups is not modelled; remove it");
  }
  keys.unused("zero_optimization.mics_hierarchical_params_gather");
  bool opt_off =
      offload_device(keys, "zero_optimization.offload_optimizer.device");
  // The ZeRO-2 era spelling (DeepSpeed < 0.3.x `cpu_offload`).
  if (keys.boolean("zero_optimization.cpu_offload").value_or(false)) {
    opt_off = true;
  }
  bool param_off =
      offload_device(keys, "zero_optimization.offload_param.device");
  if (keys.boolean("zero_optimization.cpu_offload_params").value_or(false)) {
    param_off = true;
  }
  if (const auto ratio =
          keys.number("zero_optimization.offload_optimizer.ratio", 0, 1);
      ratio && *ratio < 1) {
    keys.fail("zero_optimization.offload_optimizer.ratio",
              "partial optimizer offload (ZeRO-Offload++) is not modelled; "
              "remove it or set it to 1");
  }
  for (const char* sub : {"offload_optimizer", "offload_param"}) {
    for (const char* k : {"pin_memory", "buffer_count", "buffer_size",
                          "max_in_cpu", "nvme_path", "fast_init",
                          "pipeline_read", "pipeline_write", "pipeline"}) {
      keys.unused(fmt::format("{}.{}.{}", zero, sub, k));
    }
  }
  if (param_off && facts.stage < 3) {
    plan.notes.push_back(fmt::format(
        "offload_param applies only at ZeRO stage 3; at stage {} DeepSpeed "
        "keeps the parameters on the GPU",
        facts.stage));
    param_off = false;
  }
  if (opt_off && facts.stage < 1) {
    plan.notes.push_back(
        "offload_optimizer applies only at ZeRO stage 1 or more; at stage 0 "
        "DeepSpeed keeps the optimizer on the GPU");
    opt_off = false;
  }
  if (opt_off || param_off) {
    set_option(plan, "--offload",
               opt_off && param_off ? "all"
               : opt_off            ? "optimizer"
                                    : "params",
               param_off ? "zero_optimization.offload_param.device"
                         : "zero_optimization.offload_optimizer.device");
  }

  facts.micro_batch = count_or_auto(keys, "train_micro_batch_size_per_gpu",
                                    facts.micro_batch_auto, k_max_batch);
  facts.grad_accum = count_or_auto(keys, "gradient_accumulation_steps",
                                   facts.grad_accum_auto, k_max_accum);
  bool train_auto = false;
  facts.train_batch = count_or_auto(keys, "train_batch_size", train_auto,
                                    k_max_batch * k_max_gpus);

  // fp16 / bf16 ("bfloat16" is DeepSpeed's alias for the bf16 section).
  facts.fp16 = enabled_or_auto(keys, "fp16", facts.fp16_auto);
  facts.bf16 = enabled_or_auto(keys, "bf16", facts.bf16_auto);
  if (!facts.bf16 && !facts.bf16_auto) {
    facts.bf16 = enabled_or_auto(keys, "bfloat16", facts.bf16_auto);
  }
  if (facts.fp16.value_or(false) && facts.bf16.value_or(false)) {
    keys.fail("bf16.enabled",
              "bf16 and fp16 are both enabled; DeepSpeed "
              "refuses that, enable one");
  }
  for (const char* k :
       {"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
        "consecutive_hysteresis", "min_loss_scale", "auto_cast"}) {
    keys.unused(join_path("fp16", k));
  }
  for (const char* sec : {"bf16", "bfloat16"}) {
    for (const char* k :
         {"immediate_grad_update", "check_grad_overflow", "check_overflow"}) {
      keys.unused(join_path(sec, k));
    }
  }
  if (keys.boolean("fp16.fp16_master_weights_and_grads").value_or(false)) {
    keys.fail("fp16.fp16_master_weights_and_grads",
              "16-bit master weights under DeepSpeed are not modelled; use "
              "the default fp32 master weights");
  }
  if (keys.boolean("bf16.bf16_master_weights_and_grads").value_or(false) ||
      keys.boolean("bf16.bf16_optimizer_states").value_or(false)) {
    keys.fail("bf16.bf16_master_weights_and_grads",
              "16-bit master weights under DeepSpeed are not modelled; use "
              "the default fp32 master weights");
  }
  if (keys.boolean("amp.enabled").value_or(false)) {
    keys.fail("amp.enabled",
              "NVIDIA Apex AMP is not modelled; use bf16 or "
              "fp16");
  }
  keys.unused_children("amp");

  // optimizer.type (deepspeed/runtime/config.py DEEPSPEED_OPTIMIZERS).
  if (const auto type = keys.string("optimizer.type")) {
    const std::string t = lower(*type);
    if (t == "adam" || t == "adamw" || t == "cpuadam" || t == "fusedadam") {
      set_option(plan, "--optimizer", "adamw", "optimizer.type");
    } else {
      keys.fail("optimizer.type",
                fmt::format("{} is not modelled; oomplan models Adam and "
                            "AdamW (DeepSpeed's 1-bit, LAMB, Lion, Adagrad "
                            "and Muon keep other states)",
                            echo(*type)));
    }
  }
  keys.unused_children("optimizer.params");
  keys.unused("optimizer.params");

  // AutoTP (deepspeed/runtime/tensor_parallel/config.py).
  if (const auto tp =
          keys.integer("tensor_parallel.autotp_size", 1, k_max_gpus)) {
    if (*tp > 1) {
      set_option(plan, "--tp", fmt::format("{}", *tp),
                 "tensor_parallel.autotp_size");
    }
  }
  keys.unused_children("tensor_parallel");
  if (keys.integer("sequence_parallel_size", 1, k_max_gpus).value_or(1) > 1) {
    keys.fail("sequence_parallel_size",
              "DeepSpeed-Ulysses sequence parallelism is not modelled; remove "
              "it or set it to 1");
  }
  // Activation checkpointing here configures deepspeed.checkpointing, which
  // only models that call it (Megatron-DeepSpeed) use; Hugging Face models
  // checkpoint through gradient_checkpointing.
  if (keys.has("activation_checkpointing")) {
    keys.unused_children("activation_checkpointing");
    plan.notes.push_back(
        "activation_checkpointing configures deepspeed.checkpointing, which "
        "only Megatron-DeepSpeed models call; it does not turn checkpointing "
        "on for a Hugging Face model");
  }
  for (const char* k : k_ds_unused) {
    keys.unused(k);
  }
  if (facts.micro_batch && facts.grad_accum && facts.train_batch) {
    const std::int64_t per_step = *facts.micro_batch * *facts.grad_accum;
    if (*facts.train_batch % per_step != 0) {
      keys.fail("train_batch_size",
                fmt::format("{} is not train_micro_batch_size_per_gpu x "
                            "gradient_accumulation_steps ({}) x GPUs; "
                            "DeepSpeed refuses it",
                            *facts.train_batch, per_step));
    }
    const std::int64_t world = *facts.train_batch / per_step;
    if (world > k_max_gpus) {
      keys.fail("train_batch_size", "implies more than 100000 GPUs");
    }
    plan.gpus = static_cast<int>(world);
    plan.notes.push_back(fmt::format("train_batch_size {} = {} x {} x {} GPUs",
                                     *facts.train_batch, *facts.micro_batch,
                                     *facts.grad_accum, world));
  }
  return facts;
}

// The options a DeepSpeed config states on its own (no training file).
void deepspeed_own_options(const DeepSpeedFacts& f, LaunchPlan& plan) {
  if (f.micro_batch) {
    set_option(plan, "--batch", fmt::format("{}", *f.micro_batch),
               "train_micro_batch_size_per_gpu");
  }
  if (f.grad_accum) {
    set_option(plan, "--grad-accum", fmt::format("{}", *f.grad_accum),
               "gradient_accumulation_steps");
  }
  if (f.bf16.value_or(false)) {
    set_option(plan, "--dtype", "bf16", "bf16.enabled");
  } else if (f.fp16.value_or(false)) {
    set_option(plan, "--dtype", "fp16", "fp16.enabled");
  } else if (f.bf16.has_value() || f.fp16.has_value()) {
    if (!f.bf16_auto && !f.fp16_auto) {
      set_option(plan, "--dtype", "fp32",
                 f.bf16.has_value() ? "bf16.enabled" : "fp16.enabled");
    }
  }
  const auto auto_note = [&](bool is_auto, std::string_view key,
                             std::string_view option) {
    if (is_auto) {
      plan.notes.push_back(fmt::format(
          "{} is \"auto\": the HF Trainer fills it from its own arguments; "
          "give the training arguments file too, or {}",
          key, option));
    }
  };
  auto_note(f.micro_batch_auto, "train_micro_batch_size_per_gpu", "--batch");
  auto_note(f.grad_accum_auto, "gradient_accumulation_steps", "--grad-accum");
  auto_note(f.bf16_auto || f.fp16_auto, "bf16/fp16.enabled", "--dtype");
}

void fold_deepspeed_facts(const DeepSpeedFacts& ds, const std::string& origin,
                          LaunchPlan& plan, const TrainerValues& trainer) {
  const auto mismatch = [&](std::string_view ds_key, std::int64_t ds_value,
                            std::string_view key, std::int64_t value) {
    throw Error(fmt::format(
        "{}: {}: {} contradicts {} {} in {}; the HF Trainer refuses the "
        "mismatch, set it to \"auto\"",
        origin, ds_key, ds_value, key, value, plan.file));
  };
  if (ds.micro_batch) {
    if (trainer.batch && *trainer.batch != *ds.micro_batch) {
      mismatch("train_micro_batch_size_per_gpu", *ds.micro_batch,
               trainer.batch_key, *trainer.batch);
    }
    if (!trainer.batch) {
      set_option(plan, "--batch", fmt::format("{}", *ds.micro_batch),
                 fmt::format("{}: train_micro_batch_size_per_gpu", origin));
    }
  }
  if (ds.grad_accum) {
    if (trainer.grad_accum && *trainer.grad_accum != *ds.grad_accum) {
      mismatch("gradient_accumulation_steps", *ds.grad_accum,
               trainer.grad_accum_key, *trainer.grad_accum);
    }
    if (!trainer.grad_accum) {
      set_option(plan, "--grad-accum", fmt::format("{}", *ds.grad_accum),
                 fmt::format("{}: gradient_accumulation_steps", origin));
    }
  }
  const bool ds_bf16 = ds.bf16.value_or(false);
  const bool ds_fp16 = ds.fp16.value_or(false);
  if ((ds_bf16 && trainer.fp16) || (ds_fp16 && trainer.bf16) ||
      (ds.bf16.has_value() && !ds_bf16 && trainer.bf16 && !ds.bf16_auto) ||
      (ds.fp16.has_value() && !ds_fp16 && trainer.fp16 && !ds.fp16_auto)) {
    throw Error(fmt::format(
        "{}: {}: {} contradicts {} in {}; the HF Trainer refuses the "
        "mismatch, set enabled to \"auto\"",
        origin, ds_bf16 || trainer.bf16 ? "bf16.enabled" : "fp16.enabled",
        ds_bf16 || ds_fp16 ? "true" : "false",
        trainer.precision_key.empty() ? "the precision" : trainer.precision_key,
        plan.file));
  }
  if (!trainer.bf16 && !trainer.fp16 && (ds_bf16 || ds_fp16)) {
    set_option(
        plan, "--dtype", ds_bf16 ? "bf16" : "fp16",
        fmt::format("{}: {}.enabled", origin, ds_bf16 ? "bf16" : "fp16"));
  }
  // DeepSpeed's ZeRO and BF16 optimizers keep fp32 master weights and fp32
  // optimizer states whatever dtype the model was loaded in
  // (deepspeed/runtime/zero/stage_1_and_2.py single_partition_of_fp32_groups,
  // stage3.py fp32_partitioned_groups_flat, bf16_optimizer.py
  // fp32_groups_flat_partition).
  set_default(plan, "--precision", "mixed",
              "DeepSpeed keeps fp32 master weights and optimizer states "
              "(deepspeed/runtime/zero/stage_1_and_2.py, stage3.py, "
              "bf16_optimizer.py)");
}

void fold_deepspeed_doc(const Json& doc, const std::string& origin,
                        const std::string& prefix, LaunchPlan& plan,
                        const TrainerValues& trainer) {
  KeyReader ds_keys(doc, origin);
  LaunchPlan ds_plan;
  const DeepSpeedFacts facts = read_deepspeed(ds_keys, ds_plan);
  ds_keys.finish(ds_plan);
  for (const auto& o : ds_plan.options) {
    set_option(plan, o.flag, o.value, fmt::format("{}{}", prefix, o.key));
  }
  for (auto& n : ds_plan.notes) {
    plan.notes.push_back(fmt::format("{}{}", prefix, n));
  }
  for (auto& k : ds_plan.unused_keys) {
    plan.unused_keys.push_back(prefix + k);
  }
  for (auto& k : ds_plan.unknown_keys) {
    plan.unknown_keys.push_back(prefix + k);
  }
  if (ds_plan.gpus && !plan.gpus) {
    plan.gpus = ds_plan.gpus;
  }
  fold_deepspeed_facts(facts, origin, plan, trainer);
  // A sharding stage from DeepSpeed replaces FSDP.
  erase_option(plan, "--fsdp");
}

void fold_deepspeed(KeyReader& keys, std::string_view key, LaunchPlan& plan,
                    const FileLoader& load, const TrainerValues& trainer) {
  const Json* v = keys.read(key);
  if (v == nullptr) {
    return;
  }
  if (v->is_string()) {
    const std::string path = v->get<std::string>();
    const std::string text = load_named(keys, key, path, load);
    const Json loaded = parse_json_text(text, path);
    plan.included_files.push_back(path);
    fold_deepspeed_doc(loaded, path, path + ": ", plan, trainer);
  } else if (v->is_object()) {
    fold_deepspeed_doc(*v, fmt::format("{}: {}", keys.origin(), key),
                       fmt::format("{}.", key), plan, trainer);
  } else {
    keys.fail(key, fmt::format("expected a DeepSpeed JSON file or a mapping, "
                               "got {}",
                               echo_json(*v)));
  }
}

// Folds what a training file gives to DeepSpeed (its own `deepspeed` key, or a
// DeepSpeed file given next to it).
void fold_trainer_deepspeed(KeyReader& keys, std::string_view key,
                            LaunchPlan& plan, const FileLoader& load,
                            const Attached& attached,
                            const TrainerValues& trainer) {
  if (keys.has(key)) {
    fold_deepspeed(keys, key, plan, load, trainer);
  } else if (attached.deepspeed != nullptr) {
    plan.included_files.push_back(attached.deepspeed_origin);
    fold_deepspeed_doc(*attached.deepspeed, attached.deepspeed_origin,
                       attached.deepspeed_origin + ": ", plan, trainer);
  }
}

// ---- Hugging Face TrainingArguments / TRL SFTConfig ----

namespace {

// LoRA target module names (PEFT target_modules) -> oomplan --lora-targets.
std::string lora_targets(KeyReader& keys, std::string_view key,
                         const std::vector<std::string>& names) {
  if (names.size() == 1 && (names[0] == "all-linear" || names[0] == "all" ||
                            names[0] == "all_linear")) {
    return "all";
  }
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 14>
      k_modules = {{
          {"q_proj", "q"},
          {"k_proj", "k"},
          {"v_proj", "v"},
          {"o_proj", "o"},
          {"gate_proj", "gate"},
          {"up_proj", "up"},
          {"down_proj", "down"},
          // torchtune's names (lora_attn_modules).
          {"output_proj", "o"},
          {"w1", "gate"},
          {"w3", "up"},
          {"w2", "down"},
          {"q", "q"},
          {"k", "k"},
          {"v", "v"},
      }};
  std::vector<std::string> out;
  for (const auto& n : names) {
    const auto it = std::find_if(k_modules.begin(), k_modules.end(),
                                 [&](const auto& m) { return m.first == n; });
    if (it == k_modules.end()) {
      keys.fail(key, fmt::format("LoRA on {} is not modelled; oomplan puts "
                                 "adapters on q_proj, k_proj, v_proj, o_proj, "
                                 "gate_proj, up_proj, down_proj or all-linear",
                                 echo(n)));
    }
    if (std::find(out.begin(), out.end(), it->second) == out.end()) {
      out.emplace_back(it->second);
    }
  }
  if (out.empty()) {
    keys.fail(key, "names no LoRA target modules");
  }
  // Canonical order q,k,v,o,gate,up,down (setup.hpp LoraTarget).
  static constexpr std::array<std::string_view, 7> k_order = {
      "q", "k", "v", "o", "gate", "up", "down"};
  std::string text;
  for (const auto o : k_order) {
    if (std::find(out.begin(), out.end(), o) != out.end()) {
      text += text.empty() ? "" : ",";
      text += o;
    }
  }
  return text;
}

// transformers/TRL dtype names for loading the model.
std::optional<std::string> torch_dtype_name(KeyReader& keys,
                                            std::string_view key) {
  const auto v = keys.string(key);
  if (!v) {
    return std::nullopt;
  }
  const std::string d = lower(*v);
  if (d == "bfloat16" || d == "bf16" || d == "torch.bfloat16") {
    return "bf16";
  }
  if (d == "float16" || d == "fp16" || d == "half" || d == "torch.float16") {
    return "fp16";
  }
  if (d == "float32" || d == "fp32" || d == "float" || d == "torch.float32") {
    return "fp32";
  }
  if (d == "auto") {
    return std::nullopt;
  }
  keys.fail(key, fmt::format("{} is not a dtype; use bfloat16, float16, "
                             "float32 or auto",
                             echo_json(*v)));
}

}  // namespace

std::string peft_targets(KeyReader& keys, std::string_view key) {
  const auto names = keys.strings(key);
  return names ? lora_targets(keys, key, *names) : std::string();
}

void mark_hf_unused(KeyReader& keys) {
  mark_unused(keys, k_hf_unused);
}

void read_hf_trainer(KeyReader& keys, LaunchPlan& plan, const FileLoader& load,
                     const Attached& attached) {
  const bool trl = std::any_of(k_trl_markers.begin(), k_trl_markers.end(),
                               [&](const char* k) { return keys.has(k); });
  plan.framework = trl ? "trl" : "hf-trainer";
  if (const auto model = keys.string("model_name_or_path")) {
    plan.model = *model;
    plan.model_key = "model_name_or_path";
  }
  mark_unused(keys, k_hf_unused);
  mark_unused(keys, k_trl_unused);

  // Mode and quantization (TRL ModelConfig: use_peft, load_in_4bit/8bit,
  // bnb_4bit_quant_type default nf4, use_bnb_nested_quant default False).
  const bool peft = keys.boolean("use_peft").value_or(false);
  const bool in4 = keys.boolean("load_in_4bit").value_or(false);
  const bool in8 = keys.boolean("load_in_8bit").value_or(false);
  if (in4 && in8) {
    keys.fail("load_in_8bit",
              "load_in_4bit and load_in_8bit are both set; "
              "keep one");
  }
  if ((in4 || in8) && !peft) {
    keys.fail(in4 ? "load_in_4bit" : "load_in_8bit",
              "a quantized base trains only through adapters; set use_peft: "
              "true");
  }
  if (in4) {
    set_option(plan, "--mode", "qlora", "load_in_4bit");
    const auto type = keys.string("bnb_4bit_quant_type").value_or("nf4");
    if (type != "nf4") {
      keys.fail("bnb_4bit_quant_type",
                fmt::format("{} is not modelled; use nf4", echo(type)));
    }
    const bool nested = keys.boolean("use_bnb_nested_quant").value_or(false);
    set_option(plan, "--quant", nested ? "nf4" : "nf4-nodq",
               nested ? "use_bnb_nested_quant" : "bnb_4bit_quant_type");
  } else if (peft) {
    set_option(plan, "--mode", "lora", "use_peft");
    if (in8) {
      set_option(plan, "--quant", "int8", "load_in_8bit");
    }
  }
  if (peft) {
    if (const auto r = keys.integer("lora_r", 1, k_max_rank)) {
      set_option(plan, "--lora-rank", fmt::format("{}", *r), "lora_r");
    }
    if (const auto t = peft_targets(keys, "lora_target_modules"); !t.empty()) {
      set_option(plan, "--lora-targets", t, "lora_target_modules");
    }
    if (keys.boolean("use_dora").value_or(false)) {
      keys.fail("use_dora",
                "DoRA's magnitude vectors and their activations "
                "are not modelled; use LoRA");
    }
    if (const auto save = keys.strings("lora_modules_to_save");
        save && !save->empty()) {
      keys.fail("lora_modules_to_save",
                "fully trained copies of modules beside LoRA are not "
                "modelled; remove it");
    }
    if (keys.has("lora_target_parameters")) {
      keys.fail("lora_target_parameters",
                "LoRA on raw parameters (MoE experts) is not modelled");
    }
  } else {
    keys.unused({"lora_r", "lora_target_modules", "use_dora",
                 "lora_modules_to_save", "lora_target_parameters",
                 "bnb_4bit_quant_type", "use_bnb_nested_quant"});
  }

  // Batch, accumulation, sequence.
  TrainerValues trainer;
  for (const char* k :
       {"per_device_train_batch_size", "per_gpu_train_batch_size"}) {
    if (const auto b = keys.integer(k, 1, k_max_batch)) {
      trainer.batch = *b;
      trainer.batch_key = k;
      set_option(plan, "--batch", fmt::format("{}", *b), k);
      break;
    }
  }
  if (const auto g =
          keys.integer("gradient_accumulation_steps", 1, k_max_accum)) {
    trainer.grad_accum = *g;
    trainer.grad_accum_key = "gradient_accumulation_steps";
    set_option(plan, "--grad-accum", fmt::format("{}", *g),
               "gradient_accumulation_steps");
  }
  for (const char* k :
       {"max_length", "max_seq_length", "block_size", "model_max_length"}) {
    if (const auto s = keys.integer(k, 1, k_max_seq)) {
      set_option(plan, "--seq", fmt::format("{}", *s), k);
      break;
    }
  }

  // Precision: bf16/fp16 are torch.autocast over the weights as loaded
  // (TrainingArguments.mixed_precision -> accelerate); the weights' dtype is
  // the script's (TRL ModelConfig.dtype, default float32; model_init_kwargs).
  const bool bf16 = keys.boolean("bf16").value_or(false);
  const bool fp16 = keys.boolean("fp16").value_or(false);
  if (bf16 && fp16) {
    keys.fail("fp16",
              "bf16 and fp16 are both set; TrainingArguments "
              "refuses that, keep one");
  }
  trainer.bf16 = bf16;
  trainer.fp16 = fp16;
  trainer.precision_key = bf16 ? "bf16" : fp16 ? "fp16" : "";
  std::optional<std::string> weights;
  std::string weights_key;
  for (const char* k : {"dtype", "torch_dtype", "model_init_kwargs.dtype",
                        "model_init_kwargs.torch_dtype"}) {
    if (auto d = torch_dtype_name(keys, k)) {
      weights = d;
      weights_key = k;
      break;
    }
  }
  keys.unused_children("model_init_kwargs");
  if (bf16 || fp16) {
    set_option(plan, "--dtype", bf16 ? "bf16" : "fp16", bf16 ? "bf16" : "fp16");
  } else if (keys.has("bf16") || keys.has("fp16")) {
    set_option(plan, "--dtype", weights.value_or("fp32"),
               weights ? weights_key : (keys.has("bf16") ? "bf16" : "fp16"));
  } else if (weights) {
    set_option(plan, "--dtype", *weights, weights_key);
  }
  const bool full = find_option(plan, "--mode") == nullptr;
  if (weights && *weights != "fp32" && full) {
    // A model loaded in 16 bits trains in 16 bits: torch's AdamW keeps its
    // states in the parameters' dtype and there is no fp32 master copy.
    set_option(plan, "--precision", "pure", weights_key);
    set_option(plan, "--dtype", *weights, weights_key);
  }

  // Checkpointing: transformers gradient_checkpointing_enable() wraps every
  // decoder layer in torch.utils.checkpoint (modeling_utils.py); use_reentrant
  // picks the implementation, not what is kept.
  if (const auto gc = keys.boolean("gradient_checkpointing")) {
    set_option(plan, "--checkpointing", *gc ? "full" : "none",
               "gradient_checkpointing");
  }
  keys.unused_children("gradient_checkpointing_kwargs");
  if (keys.boolean("activation_offloading").value_or(false)) {
    set_option(plan, "--activation-offload", "", "activation_offloading");
  }

  // Optimizer.
  if (keys.boolean("adafactor").value_or(false)) {
    set_option(plan, "--optimizer", "adafactor", "adafactor");
  }
  if (const auto optim = keys.string("optim")) {
    set_option(plan, "--optimizer", hf_optimizer(keys, "optim", *optim),
               "optim");
  }
  if (keys.has("optim_target_modules")) {
    keys.read("optim_target_modules");
  }

  // Compile, kernels, loss.
  const bool compile = keys.boolean("torch_compile").value_or(false) ||
                       keys.string("torch_compile_backend").has_value() ||
                       keys.string("torch_compile_mode").has_value();
  if (compile) {
    set_option(plan, "--compile", "",
               keys.has("torch_compile")           ? "torch_compile"
               : keys.has("torch_compile_backend") ? "torch_compile_backend"
                                                   : "torch_compile_mode");
  }
  if (const auto attn = keys.string("attn_implementation")) {
    set_option(plan, "--attn", hf_attention(keys, "attn_implementation", *attn),
               "attn_implementation");
  }
  const bool liger = keys.boolean("use_liger_kernel").value_or(false);
  keys.unused_children("liger_kernel_config");
  if (liger) {
    // Liger's fused linear cross-entropy never materialises the logits.
    set_option(plan, "--loss", "chunked", "use_liger_kernel");
  }
  if (const auto loss = keys.string("loss_type")) {
    if (*loss == "chunked_nll") {
      set_option(plan, "--loss", "chunked", "loss_type");
    } else if (*loss == "nll" || *loss == "dft") {
      set_option(plan, "--loss", "full", "loss_type");
    } else {
      keys.fail("loss_type", fmt::format("{} is not an SFT loss; use nll, dft "
                                         "or chunked_nll",
                                         echo(*loss)));
    }
  }
  if (keys.boolean("use_cpu").value_or(false)) {
    keys.fail("use_cpu",
              "training on the CPU is not planned; oomplan plans "
              "GPU memory");
  }
  if (keys.has("parallelism_config")) {
    keys.fail("parallelism_config",
              "accelerate's ParallelismConfig is not read; give --tp instead");
  }
  read_hf_fsdp(keys, plan, load);
  fold_trainer_deepspeed(keys, "deepspeed", plan, load, attached, trainer);
  if (!plan.included_files.empty() || keys.has("deepspeed")) {
    const LaunchOption* p = find_option(plan, "--precision");
    if (p != nullptr && p->value == "pure" &&
        (keys.has("deepspeed") || attached.deepspeed != nullptr)) {
      // DeepSpeed makes fp32 master copies of 16-bit weights.
      erase_option(plan, "--precision");
    }
  }
}

// ---- accelerate config ----

void read_accelerate(KeyReader& keys, LaunchPlan& plan,
                     const FileLoader& load) {
  keys.unused({"compute_environment",
               "debug",
               "downcast_bf16",
               "machine_rank",
               "main_process_ip",
               "main_process_port",
               "main_training_function",
               "rdzv_backend",
               "same_network",
               "tpu_env",
               "tpu_use_cluster",
               "tpu_use_sudo",
               "tpu_name",
               "tpu_zone",
               "gpu_ids",
               "enable_cpu_affinity",
               "commands",
               "command_file",
               "ipex_config",
               "mpirun_config",
               "use_mps_device"});
  if (keys.boolean("use_cpu").value_or(false)) {
    keys.fail("use_cpu", "training on the CPU is not planned");
  }
  const auto processes = keys.integer("num_processes", 1, k_max_gpus);
  const auto machines = keys.integer("num_machines", 1, k_max_gpus);
  if (processes) {
    const std::int64_t nodes = machines.value_or(1);
    if (*processes % nodes != 0) {
      keys.fail("num_processes",
                fmt::format("{} processes do not split evenly over {} "
                            "machines; accelerate starts num_processes / "
                            "num_machines per machine",
                            *processes, nodes));
    }
    plan.gpus = static_cast<int>(*processes / nodes);
  }
  if (machines) {
    plan.nodes = static_cast<int>(*machines);
  }
  // mixed_precision: no, fp16, bf16, fp8 (accelerate utils/dataclasses.py
  // PrecisionType) — autocast over fp32 weights (FSDP: MixedPrecision with
  // fp32 sharded parameters).
  if (const auto mp = keys.string("mixed_precision")) {
    if (*mp == "bf16" || *mp == "fp16") {
      set_option(plan, "--dtype", *mp, "mixed_precision");
    } else if (*mp == "no") {
      set_option(plan, "--dtype", "fp32", "mixed_precision");
    } else {
      keys.fail("mixed_precision",
                fmt::format("{} is not modelled; use no, fp16 or bf16 (FP8 "
                            "training is not modelled)",
                            echo(*mp)));
    }
  }
  if (const auto backend = keys.string("dynamo_config.dynamo_backend")) {
    if (lower(*backend) != "no") {
      set_option(plan, "--compile", "", "dynamo_config.dynamo_backend");
    }
  }
  keys.unused_children("dynamo_config");
  const std::string type = keys.string("distributed_type").value_or("NO");
  if (type == "FSDP") {
    const std::string base = "fsdp_config";
    const auto version =
        keys.integer("fsdp_config.fsdp_version", 1, 2).value_or(1);
    bool sharded = false;
    if (version == 2) {
      // FSDP2 (accelerate utils/dataclasses.py FullyShardedDataParallelPlugin):
      // fsdp_reshard_after_forward true = FULL_SHARD, false = SHARD_GRAD_OP.
      const Json* r = keys.read("fsdp_config.fsdp_reshard_after_forward");
      const bool reshard =
          r == nullptr || (r->is_boolean() && r->get<bool>()) ||
          (r->is_string() && r->get<std::string>() == "FULL_SHARD");
      set_option(plan, reshard ? "--fsdp" : "--zero", reshard ? "" : "2",
                 "fsdp_config.fsdp_reshard_after_forward");
      sharded = true;
    } else {
      const auto s = keys.string("fsdp_config.fsdp_sharding_strategy")
                         .value_or("FULL_SHARD");
      if (s == "FULL_SHARD" || s == "1") {
        set_option(plan, "--fsdp", "", "fsdp_config.fsdp_sharding_strategy");
        sharded = true;
      } else if (s == "SHARD_GRAD_OP" || s == "2") {
        set_option(plan, "--zero", "2", "fsdp_config.fsdp_sharding_strategy");
        sharded = true;
      } else if (s == "HYBRID_SHARD" || s == "HYBRID_SHARD_ZERO2" || s == "4" ||
                 s == "5") {
        keys.fail("fsdp_config.fsdp_sharding_strategy",
                  fmt::format("{} shards within a node and replicates across "
                              "nodes, which is not modelled; use FULL_SHARD or "
                              "SHARD_GRAD_OP",
                              s));
      } else if (s != "NO_SHARD" && s != "3") {
        keys.fail("fsdp_config.fsdp_sharding_strategy",
                  fmt::format("{} is not a sharding strategy; use FULL_SHARD, "
                              "SHARD_GRAD_OP or NO_SHARD",
                              echo(s)));
      }
    }
    (void)sharded;
    mark_fsdp_version(plan,
                      keys.has("fsdp_config.fsdp_version")
                          ? std::optional<std::int64_t>(version)
                          : std::nullopt,
                      "fsdp_config.fsdp_version");
    if (keys.boolean("fsdp_config.fsdp_offload_params").value_or(false)) {
      set_option(plan, "--offload", "all", "fsdp_config.fsdp_offload_params");
    }
    if (keys.boolean("fsdp_config.fsdp_activation_checkpointing")
            .value_or(false)) {
      set_option(plan, "--checkpointing", "full",
                 "fsdp_config.fsdp_activation_checkpointing");
    }
    for (const char* k :
         {"fsdp_auto_wrap_policy", "fsdp_backward_prefetch",
          "fsdp_backward_prefetch_policy", "fsdp_forward_prefetch",
          "fsdp_cpu_ram_efficient_loading", "fsdp_state_dict_type",
          "fsdp_sync_module_states", "fsdp_use_orig_params",
          "fsdp_transformer_layer_cls_to_wrap", "fsdp_min_num_params",
          "fsdp_cpu_offload_pin_memory"}) {
      keys.unused(join_path(base, k));
    }
  } else if (type == "DEEPSPEED") {
    TrainerValues none;
    if (keys.has("deepspeed_config.deepspeed_config_file")) {
      fold_deepspeed(keys, "deepspeed_config.deepspeed_config_file", plan, load,
                     none);
      // fold_deepspeed fills batch/accumulation only when the trainer is
      // silent; here they are the DeepSpeed file's own.
    } else {
      if (const auto stage =
              keys.integer("deepspeed_config.zero_stage", 0, 3)) {
        set_option(plan, "--zero", fmt::format("{}", *stage),
                   "deepspeed_config.zero_stage");
      }
      const auto device = [&](const char* k) {
        const auto d = keys.string(join_path("deepspeed_config", k));
        if (!d || *d == "none") {
          return false;
        }
        if (*d == "cpu") {
          return true;
        }
        keys.fail(join_path("deepspeed_config", k),
                  *d == "nvme" ? std::string("NVMe offload is not modelled; "
                                             "use cpu or none")
                               : fmt::format("{} is not an offload device; use "
                                             "none or cpu",
                                             echo(*d)));
      };
      const bool opt = device("offload_optimizer_device");
      const bool par = device("offload_param_device");
      const int stage = find_option(plan, "--zero") != nullptr
                            ? std::stoi(find_option(plan, "--zero")->value)
                            : 0;
      if (opt || (par && stage == 3)) {
        set_option(plan, "--offload",
                   opt && par && stage == 3 ? "all"
                   : opt                    ? "optimizer"
                                            : "params",
                   par && stage == 3
                       ? "deepspeed_config.offload_param_device"
                       : "deepspeed_config.offload_optimizer_device");
      }
      if (par && stage < 3) {
        plan.notes.push_back(
            "offload_param_device applies only at ZeRO stage "
            "3; DeepSpeed keeps the parameters on the GPU");
      }
      if (const auto g = keys.integer(
              "deepspeed_config.gradient_accumulation_steps", 1, k_max_accum)) {
        set_option(plan, "--grad-accum", fmt::format("{}", *g),
                   "deepspeed_config.gradient_accumulation_steps");
      }
      set_default(plan, "--precision", "mixed",
                  "DeepSpeed keeps fp32 master weights and optimizer states "
                  "(deepspeed/runtime/zero/stage_1_and_2.py, stage3.py)");
    }
    for (const char* k :
         {"gradient_clipping", "zero3_init_flag", "zero3_save_16bit_model",
          "deepspeed_multinode_launcher", "deepspeed_hostfile",
          "deepspeed_exclusion_filter", "deepspeed_inclusion_filter",
          "deepspeed_moe_layer_cls_names"}) {
      keys.unused(join_path("deepspeed_config", k));
    }
  } else if (type == "MEGATRON_LM" || type == "XLA" || type == "TPU" ||
             type == "MULTI_CPU" || type == "MULTI_NPU" ||
             type == "MULTI_XPU" || type == "MULTI_MLU" ||
             type == "MULTI_SDAA" || type == "MULTI_MUSA" ||
             type == "MULTI_HPU") {
    keys.fail("distributed_type",
              fmt::format("{} is not modelled; oomplan plans NO, MULTI_GPU, "
                          "FSDP and DEEPSPEED on GPUs",
                          type));
  } else if (type != "NO" && type != "MULTI_GPU") {
    keys.fail("distributed_type",
              fmt::format("{} is not an accelerate distributed type; use NO, "
                          "MULTI_GPU, FSDP or DEEPSPEED",
                          echo(type)));
  }
  if (type != "FSDP") {
    keys.unused_children("fsdp_config");
  }
  if (type != "DEEPSPEED") {
    keys.unused_children("deepspeed_config");
  }
  keys.unused_children("megatron_lm_config");
  // accelerate ParallelismConfig (parallelism_config_*).
  if (const auto tp = keys.integer(
          "parallelism_config.parallelism_config_tp_size", 1, k_max_gpus);
      tp && *tp > 1) {
    set_option(plan, "--tp", fmt::format("{}", *tp),
               "parallelism_config.parallelism_config_tp_size");
  }
  if (keys.integer("parallelism_config.parallelism_config_cp_size", 1,
                   k_max_gpus)
          .value_or(1) > 1) {
    keys.fail("parallelism_config.parallelism_config_cp_size",
              "context parallelism is not modelled; remove it or set it to 1");
  }
  if (keys.integer("parallelism_config.parallelism_config_dp_replicate_size", 1,
                   k_max_gpus)
          .value_or(1) > 1) {
    keys.fail("parallelism_config.parallelism_config_dp_replicate_size",
              "hybrid sharding (replicated shard groups) is not modelled");
  }
  keys.unused("parallelism_config.parallelism_config_dp_shard_size");
}

}  // namespace oomplan::launch
