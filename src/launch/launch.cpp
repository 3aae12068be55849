// Launch-config readers: format detection, grouping of files given together,
// framework defaults, and oomplan's own plan lists (launch.hpp).

#include "oomplan/launch/launch.hpp"

#include "launch/internal.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan {
namespace launch {
namespace {

struct Default {
  std::string_view flag;
  std::string_view value;
  std::string_view why;
};

// What each framework does when its file is silent, each with its source.
// clang-format off
constexpr std::array k_vllm_defaults = {
    Default{"--engine", "vllm", "a `vllm serve` command runs the vLLM engine"},
    Default{"--mode", "infer", "vLLM serves; it does not train"},
    Default{"--tp", "1", "vLLM runs on one GPU unless --tensor-parallel-size says otherwise (vllm/config/parallel.py ParallelConfig.tensor_parallel_size = 1)"},
    Default{"--pp", "1", "vllm/config/parallel.py ParallelConfig.pipeline_parallel_size = 1"},
    Default{"--gpu-util", "0.9", "vllm/config/cache.py CacheConfig.gpu_memory_utilization = 0.9"},
};
constexpr std::array k_deepspeed_defaults = {
    Default{"--mode", "full", "a DeepSpeed config trains every weight unless the training file adds adapters"},
    Default{"--zero", "0", "deepspeed/runtime/zero/config.py DeepSpeedZeroConfig.stage = 0"},
    Default{"--dtype", "fp32", "fp16 and bf16 are off unless enabled (deepspeed/runtime/config.py)"},
    Default{"--precision", "mixed", "DeepSpeed keeps fp32 master weights and optimizer states (deepspeed/runtime/zero/stage_1_and_2.py single_partition_of_fp32_groups, bf16_optimizer.py)"},
};
constexpr std::array k_hf_defaults = {
    Default{"--mode", "full", "the HF Trainer trains every weight unless the script adds PEFT adapters"},
    Default{"--precision", "mixed", "bf16/fp16 in TrainingArguments are torch.autocast over the weights as the script loads them (fp32 master weights: transformers training_args.py mixed_precision)"},
    Default{"--dtype", "fp32", "TrainingArguments bf16 and fp16 default to False: fp32 training (transformers training_args.py)"},
    Default{"--batch", "8", "TrainingArguments.per_device_train_batch_size = 8 (transformers training_args.py)"},
    Default{"--checkpointing", "none", "TrainingArguments.gradient_checkpointing = False; when on, every decoder layer is wrapped in torch.utils.checkpoint (transformers modeling_utils.py gradient_checkpointing_enable)"},
    Default{"--loss", "full", "transformers loss/loss_utils.py ForCausalLMLoss upcasts the whole sequence's logits to fp32"},
    Default{"--attn", "sdpa", "transformers picks sdpa when attn_implementation is not set (modeling_utils.py)"},
    Default{"--optimizer", "adamw", "TrainingArguments.optim = adamw_torch (adamw_torch_fused with torch >= 2.8)"},
    Default{"--fsdp-no-sync", "", "under FSDP the Trainer runs every micro-batch but the last in accelerator.no_sync (transformers trainer.py _inner_training_loop, >= 4.46; accelerate accumulate() before), so each GPU accumulates unsharded gradients; it only matters with --fsdp and gradient accumulation"},
    Default{"--nf4-backend", "bnb", "QLoRA loads the base through bitsandbytes Linear4bit (BitsAndBytesConfig load_in_4bit), whose MatMul4Bit saves each frozen projection's input"},
};
constexpr std::array k_trl_defaults = {
    Default{"--mode", "full", "SFTTrainer trains every weight unless use_peft is set (trl/trainer/model_config.py)"},
    Default{"--lora-dropout", "0.05", "ModelConfig.lora_dropout = 0.05 for use_peft (trl/trainer/model_config.py)"},
    Default{"--precision", "mixed", "SFTTrainer loads the model in float32 unless model_init_kwargs says otherwise and trains it under bf16 autocast (trl/trainer/sft_trainer.py, model_config.py dtype = float32)"},
    Default{"--dtype", "bf16", "SFTConfig.bf16 defaults to True unless fp16 is set (trl/trainer/base_config.py, TRL >= 0.19)"},
    Default{"--batch", "8", "TrainingArguments.per_device_train_batch_size = 8"},
    Default{"--checkpointing", "full", "SFTConfig.gradient_checkpointing defaults to True (trl/trainer/base_config.py, TRL >= 0.21)"},
    Default{"--seq", "1024", "SFTConfig.max_length = 1024 (trl/trainer/sft_config.py)"},
    Default{"--loss", "chunked", "SFTConfig.loss_type defaults to chunked_nll: the lm_head and cross-entropy run in chunks (trl/trainer/sft_config.py, TRL >= 1.7)"},
    Default{"--attn", "sdpa", "transformers picks sdpa when attn_implementation is not set"},
    Default{"--optimizer", "adamw", "TrainingArguments.optim = adamw_torch"},
    Default{"--fsdp-no-sync", "", "under FSDP the Trainer runs every micro-batch but the last in accelerator.no_sync (transformers trainer.py _inner_training_loop, >= 4.46; accelerate accumulate() before), so each GPU accumulates unsharded gradients; it only matters with --fsdp and gradient accumulation"},
    Default{"--nf4-backend", "bnb", "QLoRA loads the base through bitsandbytes Linear4bit (BitsAndBytesConfig load_in_4bit), whose MatMul4Bit saves each frozen projection's input"},
};
constexpr std::array k_accelerate_defaults = {
    Default{"--mode", "full", "an accelerate config trains every weight unless the script adds adapters"},
    Default{"--dtype", "fp32", "mixed_precision defaults to no (accelerate commands/config/config_args.py)"},
    Default{"--precision", "mixed", "accelerate's mixed precision is autocast over fp32 weights; FSDP MixedPrecision keeps fp32 sharded parameters (accelerate utils/dataclasses.py)"},
    Default{"--fsdp-no-sync", "", "Accelerator.accumulate() enters no_sync on every micro-batch but the last unless GradientAccumulationPlugin(sync_each_batch=True) (accelerate/accelerator.py); it only matters with --fsdp and gradient accumulation"},
    Default{"--nf4-backend", "bnb", "QLoRA loads the base through bitsandbytes Linear4bit (BitsAndBytesConfig load_in_4bit), whose MatMul4Bit saves each frozen projection's input"},
};
constexpr std::array k_axolotl_defaults = {
    Default{"--mode", "full", "no adapter: axolotl fine-tunes every weight (utils/schemas/peft.py adapter = None)"},
    Default{"--seq", "512", "sequence_len = 512 (utils/schemas/config.py)"},
    Default{"--batch", "1", "micro_batch_size = 1 (utils/schemas/training.py)"},
    Default{"--dtype", "bf16", "bf16 = auto: bf16 on GPUs that support it (utils/config/__init__.py resolve_dtype)"},
    Default{"--precision", "pure", "axolotl loads the model in bf16 (resolve_dtype: torch_dtype = bfloat16) and the HF Trainer trains it as loaded: no fp32 master weights"},
    Default{"--checkpointing", "none", "gradient_checkpointing = False (utils/schemas/config.py)"},
    Default{"--attn", "sdpa", "no attention flag: transformers' default, sdpa"},
    Default{"--optimizer", "adamw", "optimizer = adamw_torch_fused (utils/schemas/training.py)"},
    Default{"--loss", "full", "the HF Trainer's loss on fp32-upcast logits unless chunked_cross_entropy or a Liger / Cut Cross-Entropy plugin is on"},
    Default{"--fsdp-no-sync", "", "under FSDP the Trainer runs every micro-batch but the last in accelerator.no_sync (transformers trainer.py _inner_training_loop, >= 4.46; accelerate accumulate() before), so each GPU accumulates unsharded gradients; it only matters with --fsdp and gradient accumulation"},
    Default{"--nf4-backend", "bnb", "QLoRA loads the base through bitsandbytes Linear4bit (BitsAndBytesConfig load_in_4bit), whose MatMul4Bit saves each frozen projection's input"},
};
constexpr std::array k_torchtune_defaults = {
    Default{"--mode", "full", "a full_finetune recipe; lora_/qlora_ model builders add adapters"},
    Default{"--dtype", "bf16", "recipes ship dtype: bf16 (training.get_dtype)"},
    Default{"--precision", "pure", "recipes build the model in `dtype` and keep no fp32 copy: weights, gradients and optimizer states in bf16 (recipes/full_finetune_single_device.py, training/precision.py)"},
    Default{"--loss", "chunked", "recipes use LinearCrossEntropyLoss or CEWithChunkedOutputLoss (torchtune/modules/loss)"},
    Default{"--checkpointing", "none", "cfg.get(\"enable_activation_checkpointing\", False) (recipes/*.py)"},
    Default{"--attn", "sdpa", "torchtune attention calls F.scaled_dot_product_attention (torchtune/modules/attention_utils.py)"},
    Default{"--fsdp", "", "distributed recipes shard every model with FSDP2 fully_shard (training.shard_model); on one GPU that shards nothing"},
    Default{"--optimizer", "adamw", "recipes ship torch.optim.AdamW"},
    Default{"--nf4-backend", "torchao", "qlora_ model builders quantize the base with torchao's NF4Tensor (torchtune/modules/low_precision), whose linear_nf4 saves only the NF4 weight"},
};
constexpr std::array k_torchtitan_defaults = {
    Default{"--mode", "full", "torchtitan pre-trains every weight (no adapters)"},
    Default{"--dtype", "bf16", "TrainingConfig.mixed_precision_param = bfloat16 (torchtitan/config/configs.py)"},
    Default{"--precision", "mixed", "fully_shard keeps fp32 sharded parameters and computes in bf16: MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32) (torchtitan/distributed/fsdp.py)"},
    Default{"--fsdp", "", "ParallelismConfig.data_parallel_shard_degree = -1: FSDP2 fully_shard over every data-parallel rank"},
    Default{"--loss", "upcast", "components/loss.py cross_entropy_loss upcasts pred.flatten(0, 1).float(), and the trainer drops pred before backward"},
    Default{"--attn", "flash", "F.scaled_dot_product_attention on its flash backend (torchtitan/models/common/attention.py)"},
    Default{"--optimizer", "adamw", "OptimizersContainer builds torch.optim.AdamW (components/optimizer/optimizer.py)"},
};
constexpr std::array k_litgpt_defaults = {
    Default{"--mode", "lora", "`litgpt finetune` runs finetune_lora (litgpt/__main__.py)"},
    Default{"--dtype", "bf16", "get_default_supported_precision: bf16 where the card supports it (litgpt/utils.py)"},
    Default{"--precision", "amp", "precision defaults to bf16-mixed for training (litgpt/utils.py get_default_supported_precision): Lightning's torch.autocast over fp32 weights"},
    Default{"--batch", "1", "TrainArgs(micro_batch_size=1) (litgpt/finetune/lora.py setup)"},
    Default{"--lora-rank", "8", "lora_r = 8 (litgpt/finetune/lora.py setup)"},
    Default{"--lora-targets", "qv", "lora_query and lora_value only (litgpt/finetune/lora.py setup)"},
    Default{"--lora-dropout", "0.05", "lora_dropout = 0.05 (litgpt/finetune/lora.py setup)"},
    Default{"--untied-head", "", "LitGPT's GPT has an lm_head of its own; convert_hf_checkpoint copies a tied embedding into it"},
    Default{"--loss", "chunked", "chunked_cross_entropy over 128-token slices (litgpt/utils.py)"},
    Default{"--lm-head-chunk", "128", "fit calls model(input_ids, lm_head_chunk_size=128) (litgpt/finetune/lora.py)"},
    Default{"--attn", "sdpa", "CausalSelfAttention calls F.scaled_dot_product_attention (litgpt/model.py)"},
    Default{"--optimizer", "adamw", "optimizer = \"AdamW\": torch.optim.AdamW (litgpt/utils.py instantiate_torch_optimizer)"},
    Default{"--fsdp-no-sync", "", "fabric.no_backward_sync on every micro-batch but the last (litgpt/finetune/lora.py fit), so each GPU accumulates unsharded gradients; it only matters with --fsdp and gradient accumulation"},
    Default{"--nf4-backend", "bnb", "--quantize bnb.nf4 makes Lightning's BitsandbytesPrecision replace every nn.Linear with bitsandbytes Linear4bit"},
};
constexpr std::array k_llama_factory_defaults = {
    Default{"--mode", "lora", "finetuning_type = lora (hparams/finetuning_args.py)"},
    Default{"--lora-rank", "8", "lora_rank = 8 (hparams/finetuning_args.py)"},
    Default{"--lora-targets", "all", "lora_target = all (hparams/finetuning_args.py)"},
    Default{"--seq", "2048", "cutoff_len = 2048 (hparams/data_args.py)"},
    Default{"--batch", "8", "per_device_train_batch_size = 8 (transformers TrainingArguments)"},
    Default{"--checkpointing", "full", "gradient checkpointing is on unless disable_gradient_checkpointing (model/model_utils/checkpointing.py)"},
    Default{"--precision", "mixed", "trainable parameters are upcast to fp32 unless pure_bf16 (model/adapter.py cast_trainable_params_to_fp32)"},
    Default{"--attn", "sdpa", "flash_attn = auto lets transformers pick sdpa (model/model_utils/attention.py)"},
    Default{"--loss", "full", "the HF Trainer's loss on fp32-upcast logits"},
    Default{"--optimizer", "adamw", "TrainingArguments.optim = adamw_torch"},
    Default{"--fsdp-no-sync", "", "under FSDP the Trainer runs every micro-batch but the last in accelerator.no_sync (transformers trainer.py _inner_training_loop, >= 4.46; accelerate accumulate() before), so each GPU accumulates unsharded gradients; it only matters with --fsdp and gradient accumulation"},
    Default{"--nf4-backend", "bnb", "QLoRA loads the base through bitsandbytes Linear4bit (BitsAndBytesConfig load_in_4bit), whose MatMul4Bit saves each frozen projection's input"},
};
// clang-format on

struct FrameworkRow {
  std::string_view name;
  const Default* begin;
  const Default* end;
};

template <std::size_t N>
FrameworkRow row(std::string_view name, const std::array<Default, N>& d) {
  return {name, d.data(), d.data() + N};
}

std::vector<FrameworkRow> frameworks() {
  return {row("vllm", k_vllm_defaults),
          row("deepspeed", k_deepspeed_defaults),
          row("hf-trainer", k_hf_defaults),
          row("trl", k_trl_defaults),
          row("accelerate", k_accelerate_defaults),
          row("axolotl", k_axolotl_defaults),
          row("torchtune", k_torchtune_defaults),
          row("llama-factory", k_llama_factory_defaults),
          row("torchtitan", k_torchtitan_defaults),
          row("litgpt", k_litgpt_defaults)};
}

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) {
    return {};
  }
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool has_any(const Json& doc, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(),
                     [&](const char* k) { return doc.contains(k); });
}

std::optional<Format> classify(const Json& doc) {
  if (!doc.is_object()) {
    return std::nullopt;
  }
  for (const auto& item : doc.items()) {
    if (item.value().is_object() && item.value().contains("_component_")) {
      return Format::torchtune;
    }
  }
  // LitGPT: setup()'s arguments, TrainArgs under `train`
  // (litgpt/finetune/lora.py, litgpt/pretrain.py).
  if (doc.contains("train") && doc["train"].is_object() &&
      has_any(doc, {"checkpoint_dir", "initial_checkpoint_dir", "model_name",
                    "precision", "devices"})) {
    return Format::litgpt;
  }
  if (has_any(doc, {"distributed_type", "compute_environment"})) {
    return Format::accelerate;
  }
  if (has_any(doc, {"zero_optimization", "train_micro_batch_size_per_gpu",
                    "train_batch_size"}) ||
      (doc.contains("bf16") && doc["bf16"].is_object()) ||
      (doc.contains("fp16") && doc["fp16"].is_object())) {
    return Format::deepspeed;
  }
  if (has_any(doc, {"finetuning_type", "cutoff_len", "lora_target",
                    "quantization_bit", "pure_bf16"}) ||
      (doc.contains("stage") && doc.contains("template"))) {
    return Format::llama_factory;
  }
  if (has_any(doc, {"base_model", "micro_batch_size", "sequence_len", "adapter",
                    "lora_target_linear", "sample_packing"})) {
    return Format::axolotl;
  }
  if (has_any(doc,
              {"per_device_train_batch_size", "gradient_accumulation_steps",
               "output_dir", "num_train_epochs", "learning_rate", "optim",
               "gradient_checkpointing", "model_name_or_path", "bf16", "fp16",
               "deepspeed", "fsdp", "max_seq_length", "max_length"})) {
    return Format::hf_trainer;
  }
  return std::nullopt;
}

bool looks_like_vllm(std::string_view text, const std::string& origin) {
  if (text.find("vllm") == std::string_view::npos) {
    return false;
  }
  LaunchPlan probe;
  probe.file = origin;
  try {
    read_vllm(text, probe);
    return true;
  } catch (const Error& e) {
    // A command that is vLLM but wrong (a bad flag value) is still vLLM: the
    // error names the flag. Anything else is not a vLLM file.
    return std::string_view(e.what()).find("holds no `vllm serve`") ==
               std::string_view::npos &&
           std::string_view(e.what()).find("quote is not closed") ==
               std::string_view::npos;
  }
}

// One parsed input file. (clang-tidy 14 takes nlohmann::json's noexcept
// constructors for throwing ones.)
struct Parsed {  // NOLINT(bugprone-exception-escape)
  const LaunchFile* file = nullptr;
  Format format = Format::plans;
  Json doc;  // empty for vllm command lines; a compose file's document
  // Files it names, as written (deepspeed:, fsdp_config:,
  // deepspeed_config_file:).
  std::vector<std::string> names;
  std::vector<std::string> repeated;  // keys an object repeats
};

Parsed parse_file(const LaunchFile& file) {
  check_text(file.text, file.origin);
  Parsed p;
  p.file = &file;
  const std::string_view body = trim(file.text);
  if (body.empty()) {
    throw Error(fmt::format("{}: is empty; give a launch config", file.origin));
  }
  const bool json = body.front() == '{' || body.front() == '[';
  if (!json && has_litgpt_command(file.text, file.origin)) {
    p.format = Format::litgpt;  // command lines; the document stays empty
    p.names = litgpt_config_names(file.text, file.origin);
    return p;
  }
  if (!json && (file.origin.ends_with(".sh") || file.origin.ends_with(".cmd") ||
                looks_like_vllm(file.text, file.origin))) {
    p.format = Format::vllm;
    return p;
  }
  p.doc = json ? parse_json_text(file.text, file.origin, &p.repeated)
               : parse_yaml_text(file.text, file.origin, &p.repeated);
  // docker compose: services whose command runs vLLM.
  if (p.doc.is_object() && p.doc.contains("services") &&
      p.doc["services"].is_object()) {
    p.format = Format::vllm;
    return p;
  }
  if (p.doc.is_array() ||
      (p.doc.is_object() && p.doc.contains("plans") && p.doc.size() == 1)) {
    p.format = Format::plans;
    return p;
  }
  const auto format = classify(p.doc);
  if (!format) {
    throw Error(fmt::format(
        "{}: cannot tell which framework this file configures; oomplan reads "
        "`vllm serve` command lines, DeepSpeed JSON, Hugging Face "
        "TrainingArguments / TRL configs, accelerate configs, axolotl, "
        "torchtune and LLaMA-Factory recipes, LitGPT finetune configs and "
        "commands, and plan lists (a JSON array of option objects)",
        file.origin));
  }
  p.format = *format;
  if (p.format == Format::deepspeed) {
    refuse_repeated_keys(p.repeated, file.origin);
  }
  const auto name = [&](const char* k) {
    if (p.doc.contains(k) && p.doc[k].is_string()) {
      p.names.push_back(p.doc[k].get<std::string>());
    }
  };
  name("deepspeed");
  name("fsdp_config");
  if (p.doc.contains("deepspeed_config") &&
      p.doc["deepspeed_config"].is_object()) {
    const Json& d = p.doc["deepspeed_config"];
    if (d.contains("deepspeed_config_file") &&
        d["deepspeed_config_file"].is_string()) {
      p.names.push_back(d["deepspeed_config_file"].get<std::string>());
    }
  }
  return p;
}

std::string normalize_path(std::string_view p) {
  while (p.rfind("./", 0) == 0) {
    p.remove_prefix(2);
  }
  return std::string(p);
}

bool same_file(std::string_view a, std::string_view b) {
  const std::string x = normalize_path(a);
  const std::string y = normalize_path(b);
  if (x == y) {
    return true;
  }
  const auto suffix = [](const std::string& longer,
                         const std::string& shorter) {
    return longer.size() > shorter.size() && longer.ends_with(shorter) &&
           longer[longer.size() - shorter.size() - 1] == '/';
  };
  return suffix(x, y) || suffix(y, x);
}

bool is_job(Format f) {
  return f == Format::hf_trainer || f == Format::axolotl ||
         f == Format::llama_factory;
}

void read_one(const Parsed& p, LaunchPlan& plan, const FileLoader& load,
              const Attached& attached) {
  const std::string& origin = p.file->origin;
  plan.file = origin;
  plan.reader = std::string(format_name(p.format));
  plan.framework = plan.reader;
  for (const std::string& key : p.repeated) {
    plan.notes.push_back(fmt::format(
        "key {} appears twice; the last value is used, as the framework's "
        "loader (PyYAML, Python's json) keeps it",
        echo(key)));
  }
  KeyReader keys(p.doc, origin);
  switch (p.format) {
    case Format::deepspeed: {
      const DeepSpeedFacts facts = read_deepspeed(keys, plan);
      deepspeed_own_options(facts, plan);
      break;
    }
    case Format::hf_trainer:
      read_hf_trainer(keys, plan, load, attached);
      break;
    case Format::accelerate:
      read_accelerate(keys, plan, load);
      break;
    case Format::axolotl:
      read_axolotl(keys, plan, load, attached);
      break;
    case Format::torchtune:
      read_torchtune(keys, plan, p.file->text);
      break;
    case Format::llama_factory:
      read_llama_factory(keys, plan, load, attached);
      break;
    case Format::litgpt:
      read_litgpt(keys, plan, "");
      break;
    case Format::vllm:
    case Format::plans:
      break;
  }
  keys.finish(plan);
  apply_framework_defaults(plan);
}

// A command-line file: one plan per vLLM server or LitGPT command in it.
std::vector<LaunchPlan> read_commands(const Parsed& p, const FileLoader& load) {
  LaunchPlan base;
  base.file = p.file->origin;
  base.reader = std::string(format_name(p.format));
  base.framework = base.reader;
  if (p.format == Format::litgpt) {
    return read_litgpt_commands(p.file->text, base, load);
  }
  std::vector<LaunchPlan> plans = p.doc.is_object()
                                      ? read_compose(p.doc, base)
                                      : read_vllm_commands(p.file->text, base);
  for (LaunchPlan& plan : plans) {
    apply_framework_defaults(plan);
  }
  return plans;
}

// Folds a launcher plan (an accelerate config given next to a training file)
// into the training file's plan: the training file's own options win.
void merge_launcher(LaunchPlan& job, const LaunchPlan& launcher) {
  job.included_files.push_back(launcher.file);
  for (const auto& f : launcher.included_files) {
    job.included_files.push_back(f);
  }
  for (const auto& o : launcher.options) {
    if (find_option(job, o.flag) == nullptr) {
      const bool sharding = o.flag == "--fsdp" || o.flag == "--zero";
      if (sharding && (find_option(job, "--fsdp") != nullptr ||
                       find_option(job, "--zero") != nullptr)) {
        continue;
      }
      job.options.push_back(
          {o.flag, o.value, fmt::format("{}: {}", launcher.file, o.key)});
    }
  }
  if (launcher.gpus && !job.gpus) {
    job.gpus = launcher.gpus;
  }
  if (launcher.nodes && !job.nodes) {
    job.nodes = launcher.nodes;
  }
  for (const auto& k : launcher.unused_keys) {
    job.unused_keys.push_back(fmt::format("{}: {}", launcher.file, k));
  }
  for (const auto& k : launcher.unknown_keys) {
    job.unknown_keys.push_back(fmt::format("{}: {}", launcher.file, k));
  }
  for (const auto& n : launcher.notes) {
    job.notes.push_back(fmt::format("{}: {}", launcher.file, n));
  }
  // The launcher's sharding decides the framework default for it.
  auto drop = [&](std::string_view flag) {
    std::erase_if(job.framework_defaults,
                  [&](const LaunchOption& o) { return o.flag == flag; });
  };
  if (find_option(job, "--zero") != nullptr) {
    drop("--fsdp");
  }
  if (find_option(job, "--fsdp") != nullptr) {
    drop("--zero");
  }
}

}  // namespace

std::string_view format_name(Format format) {
  switch (format) {
    case Format::vllm:
      return "vllm";
    case Format::deepspeed:
      return "deepspeed";
    case Format::hf_trainer:
      return "hf-trainer";
    case Format::accelerate:
      return "accelerate";
    case Format::axolotl:
      return "axolotl";
    case Format::torchtune:
      return "torchtune";
    case Format::llama_factory:
      return "llama-factory";
    case Format::litgpt:
      return "litgpt";
    case Format::plans:
      return "plans";
  }
  return "plans";
}

void apply_framework_defaults(LaunchPlan& plan) {
  // The reader's own adjustments (plan.framework_defaults so far) win over
  // the framework's table.
  std::vector<LaunchOption> specific = std::move(plan.framework_defaults);
  auto option = [&](std::string_view flag) { return find_option(plan, flag); };
  const auto* mode = option("--mode");
  plan.framework_defaults = framework_defaults(
      plan.framework, mode != nullptr ? std::string_view(mode->value) : "");
  for (auto& s : specific) {
    set_default(plan, s.flag, s.value, s.key);
  }
  auto drop_default = [&](std::string_view flag) {
    std::erase_if(plan.framework_defaults,
                  [&](const LaunchOption& o) { return o.flag == flag; });
  };
  // An explicit sharding choice replaces the framework's.
  if (option("--zero") != nullptr) {
    drop_default("--fsdp");
  }
  if (option("--fsdp") != nullptr) {
    drop_default("--zero");
  }
}

}  // namespace launch

std::vector<std::string_view> framework_names() {
  std::vector<std::string_view> out;
  for (const auto& f : launch::frameworks()) {
    out.push_back(f.name);
  }
  return out;
}

namespace {

// LitGPT's per-script rules: finetune_full calls model(input_ids) whole;
// finetune_lora with --quantize refuses mixed precision ("Quantization and
// mixed precision is not supported") and instantiate_bnb_optimizer builds
// bnb.optim.PagedAdamW.
void litgpt_mode_defaults(std::string_view mode,
                          std::vector<LaunchOption>& out) {
  const auto drop = [&](std::string_view flag) {
    std::erase_if(out, [&](const LaunchOption& o) { return o.flag == flag; });
  };
  if (mode == "full") {
    drop("--lm-head-chunk");
    out.push_back({"--lm-head-chunk", "0",
                   "finetune_full calls model(input_ids) on the whole "
                   "sequence (litgpt/finetune/full.py fit)"});
  }
  if (mode == "qlora") {
    drop("--precision");
    drop("--optimizer");
    out.push_back({"--precision", "pure",
                   "--quantize refuses bf16-mixed: QLoRA runs --precision "
                   "bf16-true (litgpt/finetune/lora.py setup)"});
    out.push_back({"--optimizer", "paged-adamw",
                   "instantiate_bnb_optimizer builds bnb.optim.PagedAdamW "
                   "(litgpt/utils.py)"});
  }
}

}  // namespace

std::vector<LaunchOption> framework_defaults(std::string_view framework,
                                             std::string_view mode) {
  if (framework == "plans") {
    return {};
  }
  for (const auto& f : launch::frameworks()) {
    if (f.name != framework) {
      continue;
    }
    std::vector<LaunchOption> out;
    for (const auto* d = f.begin; d != f.end; ++d) {
      out.push_back(
          {std::string(d->flag), std::string(d->value), std::string(d->why)});
      if (mode.empty() && d->flag == "--mode") {
        mode = d->value;
      }
    }
    if (framework == "litgpt") {
      litgpt_mode_defaults(mode, out);
    }
    if ((mode == "lora" || mode == "qlora") && framework == "axolotl") {
      // PEFT upcasts the adapter weights to fp32 (peft tuners_utils.py
      // _cast_adapter_dtype, autocast_adapter_dtype=True); only the frozen
      // base stays in bf16.
      std::erase_if(
          out, [](const LaunchOption& o) { return o.flag == "--precision"; });
      out.push_back({"--precision", "mixed",
                     "PEFT keeps LoRA adapters in fp32 over the bf16 base "
                     "(peft autocast_adapter_dtype=True)"});
    }
    return out;
  }
  throw Error(
      fmt::format("--framework {} is not a framework oomplan knows; use "
                  "{}",
                  launch::echo(framework), fmt::join(framework_names(), ", ")));
}

std::vector<LaunchOption> framework_mode_changes(std::string_view framework,
                                                 std::string_view from,
                                                 std::string_view to) {
  const auto names = framework_names();
  if (from == to ||
      std::find(names.begin(), names.end(), framework) == names.end()) {
    return {};
  }
  const auto before = framework_defaults(framework, from);
  std::vector<LaunchOption> out = framework_defaults(framework, to);
  std::erase_if(out, [&](const LaunchOption& o) {
    return std::any_of(before.begin(), before.end(), [&](const auto& b) {
      return b.flag == o.flag && b.value == o.value;
    });
  });
  return out;
}

std::vector<LaunchPlan> read_launch_file(const LaunchFile& file,
                                         const FileLoader& load) {
  return read_launch_files({file}, load);
}

std::vector<LaunchPlan> read_launch_files(const std::vector<LaunchFile>& files,
                                          const FileLoader& load) {
  using namespace launch;
  std::vector<Parsed> parsed;
  parsed.reserve(files.size());
  for (const auto& f : files) {
    parsed.push_back(parse_file(f));
  }
  // Which listed files another listed file names (they fold into it).
  std::vector<bool> named(parsed.size(), false);
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    for (std::size_t j = 0; j < parsed.size(); ++j) {
      if (i == j) {
        continue;
      }
      for (const auto& n : parsed[j].names) {
        if (same_file(n, parsed[i].file->origin)) {
          named[i] = true;
        }
      }
    }
  }
  // A launcher file no file names joins the nearest training file before it
  // that has none of its kind.
  std::vector<std::optional<std::size_t>> joins(parsed.size());
  std::vector<bool> job_has_ds(parsed.size(), false);
  std::vector<bool> job_has_acc(parsed.size(), false);
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    if (is_job(parsed[i].format) && parsed[i].doc.is_object() &&
        parsed[i].doc.contains("deepspeed")) {
      job_has_ds[i] = true;
    }
  }
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const Format f = parsed[i].format;
    if (named[i] || (f != Format::deepspeed && f != Format::accelerate)) {
      continue;
    }
    for (std::size_t j = i; j-- > 0;) {
      if (!is_job(parsed[j].format)) {
        continue;
      }
      auto& taken = f == Format::deepspeed ? job_has_ds : job_has_acc;
      if (!taken[j]) {
        taken[j] = true;
        joins[i] = j;
      }
      break;
    }
  }
  std::vector<LaunchPlan> plans;
  std::vector<std::optional<std::size_t>> plan_of(parsed.size());
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    if (named[i] || joins[i]) {
      continue;
    }
    const Parsed& p = parsed[i];
    const bool commands = p.format == Format::vllm ||
                          (p.format == Format::litgpt && p.doc.is_null());
    if (p.format == Format::plans || commands) {
      for (auto& plan : p.format == Format::plans
                            ? read_plans(p.doc, p.file->origin)
                            : read_commands(p, load)) {
        plans.push_back(std::move(plan));
      }
      continue;
    }
    Attached attached;
    for (std::size_t k = i + 1; k < parsed.size(); ++k) {
      if (joins[k] == i && parsed[k].format == Format::deepspeed) {
        attached.deepspeed = &parsed[k].doc;
        attached.deepspeed_origin = parsed[k].file->origin;
      }
    }
    LaunchPlan plan;
    read_one(p, plan, load, attached);
    for (std::size_t k = i + 1; k < parsed.size(); ++k) {
      if (joins[k] == i && parsed[k].format == Format::accelerate) {
        LaunchPlan launcher;
        read_one(parsed[k], launcher, load, Attached{});
        merge_launcher(plan, launcher);
      }
    }
    plan_of[i] = plans.size();
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace oomplan
