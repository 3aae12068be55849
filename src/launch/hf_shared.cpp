// What the Hugging Face-based readers (HF Trainer / TRL, axolotl,
// LLaMA-Factory) share: the TrainingArguments fields that do not change
// memory, optimizer, attention and LoRA target names, and files one file
// names.
//
// Sources: transformers src/transformers/training_args.py
// (TrainingArguments, OptimizerNames), modeling_utils.py
// (attn_implementation); axolotl utils/schemas/enums.py
// (CustomSupportedOptimizers); PEFT target_modules.

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan::launch {
namespace {

// TrainingArguments fields (transformers v5 and the v4 names still found in
// configs) that do not change GPU memory. Memory-relevant fields are read by
// name in read_hf_trainer.
constexpr std::array k_hf_unused = {
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

// LoRA target module names (PEFT target_modules) -> oomplan --lora-targets.
std::string lora_targets(KeyReader& keys, std::string_view key,
                         const std::vector<std::string>& names) {
  if (names.size() == 1 && (names[0] == "all-linear" || names[0] == "all" ||
                            names[0] == "all_linear")) {
    return "all";
  }
  unsigned targets = 0;
  for (const auto& n : names) {
    const unsigned covered = lora_module_targets(n);
    if (covered == 0) {
      keys.fail(key, fmt::format("LoRA on {} is not modelled; oomplan puts "
                                 "adapters on q_proj, k_proj, v_proj, o_proj, "
                                 "gate_proj, up_proj, down_proj (or the "
                                 "family's names for them) or all-linear",
                                 echo(n)));
    }
    targets |= covered;
  }
  if (targets == 0) {
    keys.fail(key, "names no LoRA target modules");
  }
  // Canonical order q,k,v,o,gate,up,down (setup.hpp LoraTarget).
  static constexpr std::array<std::pair<unsigned, std::string_view>, 7>
      k_order = {{{k_lora_q, "q"},
                  {k_lora_k, "k"},
                  {k_lora_v, "v"},
                  {k_lora_o, "o"},
                  {k_lora_gate, "gate"},
                  {k_lora_up, "up"},
                  {k_lora_down, "down"}}};
  std::string text;
  for (const auto& [bit, word] : k_order) {
    if ((targets & bit) != 0) {
      text += text.empty() ? "" : ",";
      text += word;
    }
  }
  return text;
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

std::string peft_targets(KeyReader& keys, std::string_view key) {
  const auto names = keys.strings(key);
  return names ? lora_targets(keys, key, *names) : std::string();
}

void read_accelerator_config(KeyReader& keys, LaunchPlan& plan) {
  // accelerator_config (a mapping; its JSON-text form is not read):
  // gradient_accumulation_kwargs.sync_each_batch reduce-scatters after every
  // micro-batch instead of the Trainer's no_sync (accelerate
  // GradientAccumulationPlugin; transformers honours it in its own loop
  // again since #43919); the other keys do not change memory.
  constexpr std::string_view sync =
      "accelerator_config.gradient_accumulation_kwargs.sync_each_batch";
  if (const auto each = keys.boolean(sync)) {
    set_option(plan, "--fsdp-no-sync", *each ? "false" : "true",
               std::string(sync));
  }
  keys.unused_children("accelerator_config");
}

void mark_hf_unused(KeyReader& keys) {
  mark_unused_keys(keys, k_hf_unused);
}

}  // namespace oomplan::launch
