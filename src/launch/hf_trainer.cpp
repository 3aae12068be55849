// The Hugging Face TrainingArguments / TRL SFTConfig reader (JSON or YAML):
// the file's keys, each a row of the tables below (rows.hpp), with the
// transformers or TRL file that defines it.
//
// Sources: transformers src/transformers/training_args.py
// (TrainingArguments); trl trl/trainer/sft_config.py, base_config.py,
// model_config.py (v1.9).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan::launch {
namespace {

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
    "dataset_mixer",  // alignment-handbook's DataArguments
    "dataset_name",
    "dataset_num_proc",
    "dataset_splits",  // alignment-handbook's DataArguments
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

// What a row passes to later rows.
struct HfTrainer : Reading {
  const FileLoader& load;
  const Attached& attached;
  bool peft = false;
  bool in4 = false;
  bool in8 = false;
  bool seq_set = false;
  bool compile = false;
  std::optional<std::string> weights = {};  // the dtype the model loads in
  std::string weights_key = {};
  TrainerValues trainer = {};
  std::string objective = "sft";  // --objective of a TRL preference config
};
using Row = KeyRow<HfTrainer>;

// Where transformers and TRL define the keys.
constexpr std::string_view k_args = "transformers training_args.py";
constexpr std::string_view k_model_config = "trl/trainer/model_config.py";
constexpr std::string_view k_sft = "trl/trainer/sft_config.py";
constexpr std::string_view k_run_clm =
    "transformers examples/pytorch/language-modeling/run_clm.py";

// ---- mode and quantization (TRL ModelConfig: use_peft, load_in_4bit/8bit,
// bnb_4bit_quant_type default nf4, use_bnb_nested_quant default False) ----

void store_peft(HfTrainer& s, const Row& row) {
  s.peft = s.keys.boolean(row.key).value_or(false);
}
void store_in4(HfTrainer& s, const Row& row) {
  s.in4 = s.keys.boolean(row.key).value_or(false);
}
void store_in8(HfTrainer& s, const Row& row) {
  s.in8 = s.keys.boolean(row.key).value_or(false);
}

void check_quantized(HfTrainer& s, const Row& /*row*/) {
  if (s.in4 && s.in8) {
    s.keys.fail("load_in_8bit",
                "load_in_4bit and load_in_8bit are both set; "
                "keep one");
  }
  if ((s.in4 || s.in8) && !s.peft) {
    s.keys.fail(s.in4 ? "load_in_4bit" : "load_in_8bit",
                "a quantized base trains only through adapters; set "
                "use_peft: true");
  }
}

void set_peft_mode(HfTrainer& s, const Row& row) {
  if (s.in4) {
    set_option(s.plan, "--mode", "qlora", std::string(row.key));
  } else if (s.peft) {
    set_option(s.plan, "--mode", "lora", "use_peft");
    if (s.in8) {
      set_option(s.plan, "--quant", "int8", "load_in_8bit");
    }
  }
}

// The 4-bit keys count only with load_in_4bit; without PEFT they are unused.
void bnb_4bit_quant_type(HfTrainer& s, const Row& row) {
  if (s.in4) {
    const auto type = s.keys.string(row.key).value_or("nf4");
    if (type != "nf4") {
      s.keys.fail(row.key,
                  fmt::format("{} is not modelled; use nf4", echo(type)));
    }
  } else if (!s.peft) {
    s.keys.unused(row.key);
  }
}

void use_bnb_nested_quant(HfTrainer& s, const Row& row) {
  if (s.in4) {
    const bool nested = s.keys.boolean(row.key).value_or(false);
    set_option(s.plan, "--quant", nested ? "nf4" : "nf4-nodq",
               nested ? "use_bnb_nested_quant" : "bnb_4bit_quant_type");
  } else if (!s.peft) {
    s.keys.unused(row.key);
  }
}

void lora_target_modules(HfTrainer& s, const Row& row) {
  if (const auto t = peft_targets(s.keys, row.key); !t.empty()) {
    set_option(s.plan, "--lora-targets", t, std::string(row.key));
  }
}

void lora_modules_to_save(HfTrainer& s, const Row& row) {
  if (const auto save = s.keys.strings(row.key); save && !save->empty()) {
    s.keys.fail(row.key,
                "fully trained copies of modules beside LoRA are not "
                "modelled; remove it");
  }
}

constexpr std::array k_mode_rows = {
    Row{"model_name_or_path", set_model, k_model_config},
    Row{"use_peft", store_peft, k_model_config},
    Row{"load_in_4bit", store_in4, k_model_config},
    Row{"load_in_8bit", store_in8, k_model_config},
    Row{"load_in_8bit", check_quantized, k_model_config},
    Row{"load_in_4bit", set_peft_mode, k_model_config},
    Row{"bnb_4bit_quant_type", bnb_4bit_quant_type, k_model_config},
    Row{"use_bnb_nested_quant", use_bnb_nested_quant, k_model_config},
};

// With use_peft.
constexpr std::array k_peft_rows = {
    Row::integer("lora_r", "--lora-rank", 1, k_max_rank, k_model_config),
    Row::probability("lora_dropout", "--lora-dropout", k_model_config),
    Row{"lora_target_modules", lora_target_modules, k_model_config},
    Row::refuse_true("use_dora",
                     "DoRA's magnitude vectors and their activations "
                     "are not modelled; use LoRA",
                     k_model_config),
    Row{"lora_modules_to_save", lora_modules_to_save, k_model_config},
    Row::refuse_present("lora_target_parameters",
                        "LoRA on raw parameters (MoE experts) is not modelled",
                        k_model_config),
};

// Without use_peft: the LoRA keys are unused.
constexpr std::array k_full_rows = {
    Row::unused("lora_r", k_model_config),
    Row::unused("lora_dropout", k_model_config),
    Row::unused("lora_target_modules", k_model_config),
    Row::unused("use_dora", k_model_config),
    Row::unused("lora_modules_to_save", k_model_config),
    Row::unused("lora_target_parameters", k_model_config),
};

// ---- batch, sequence, precision ----

// The first of the spellings a file states wins; the later ones are not read.
void batch(HfTrainer& s, const Row& row) {
  if (s.trainer.batch) {
    return;
  }
  if (const auto b = s.keys.integer(row.key, 1, k_max_batch)) {
    s.trainer.batch = *b;
    s.trainer.batch_key = std::string(row.key);
    set_option(s.plan, "--batch", fmt::format("{}", *b), std::string(row.key));
  }
}

void grad_accum(HfTrainer& s, const Row& row) {
  if (const auto g = s.keys.integer(row.key, 1, k_max_accum)) {
    s.trainer.grad_accum = *g;
    s.trainer.grad_accum_key = std::string(row.key);
    set_option(s.plan, "--grad-accum", fmt::format("{}", *g),
               std::string(row.key));
  }
}

void seq(HfTrainer& s, const Row& row) {
  if (s.seq_set) {
    return;
  }
  if (const auto len = s.keys.integer(row.key, 1, k_max_seq)) {
    set_option(s.plan, "--seq", fmt::format("{}", *len), std::string(row.key));
    s.seq_set = true;
  }
}

void store_bf16(HfTrainer& s, const Row& row) {
  s.trainer.bf16 = s.keys.boolean(row.key).value_or(false);
}
void store_fp16(HfTrainer& s, const Row& row) {
  s.trainer.fp16 = s.keys.boolean(row.key).value_or(false);
}

void check_precision(HfTrainer& s, const Row& /*row*/) {
  if (s.trainer.bf16 && s.trainer.fp16) {
    s.keys.fail("fp16",
                "bf16 and fp16 are both set; TrainingArguments "
                "refuses that, keep one");
  }
  s.trainer.precision_key = s.trainer.bf16   ? "bf16"
                            : s.trainer.fp16 ? "fp16"
                                             : "";
}

// The dtype the script loads the weights in (TRL ModelConfig.dtype, default
// float32; model_init_kwargs); the first spelling with a dtype wins.
void weights(HfTrainer& s, const Row& row) {
  if (s.weights) {
    return;
  }
  if (auto d = torch_dtype_name(s.keys, row.key)) {
    s.weights = d;
    s.weights_key = std::string(row.key);
  }
}

// bf16/fp16 are torch.autocast over the weights as loaded
// (TrainingArguments.mixed_precision -> accelerate). A full fine-tune of a
// model loaded in 16 bits trains in 16 bits: torch's AdamW keeps its states
// in the parameters' dtype and there is no fp32 master copy.
void set_dtype(HfTrainer& s, const Row& /*row*/) {
  const bool bf16 = s.trainer.bf16;
  const bool fp16 = s.trainer.fp16;
  if (bf16 || fp16) {
    set_option(s.plan, "--dtype", bf16 ? "bf16" : "fp16",
               bf16 ? "bf16" : "fp16");
  } else if (s.keys.has("bf16") || s.keys.has("fp16")) {
    set_option(
        s.plan, "--dtype", s.weights.value_or("fp32"),
        s.weights ? s.weights_key : (s.keys.has("bf16") ? "bf16" : "fp16"));
  } else if (s.weights) {
    set_option(s.plan, "--dtype", *s.weights, s.weights_key);
  }
  const bool full = find_option(s.plan, "--mode") == nullptr;
  if (s.weights && *s.weights != "fp32" && full) {
    set_option(s.plan, "--precision", "pure", s.weights_key);
    set_option(s.plan, "--dtype", *s.weights, s.weights_key);
  }
}

constexpr std::array k_batch_rows = {
    Row{"per_device_train_batch_size", batch, k_args},
    Row{"per_gpu_train_batch_size", batch, k_args},
    Row{"gradient_accumulation_steps", grad_accum, k_args},
    Row{"max_length", seq, k_sft},
    Row{"max_seq_length", seq, "trl/trainer/sft_config.py (TRL < 0.20)"},
    Row{"block_size", seq, k_run_clm},
    Row{"model_max_length", seq, "transformers tokenization_utils_base.py"},
    Row{"bf16", store_bf16, k_args},
    Row{"fp16", store_fp16, k_args},
    Row{"bf16", check_precision, k_args},
    Row{"dtype", weights, k_model_config},
    Row{"torch_dtype", weights, k_model_config},
    Row{"model_init_kwargs.dtype", weights, k_sft},
    Row{"model_init_kwargs.torch_dtype", weights, k_sft},
    Row::unused_children("model_init_kwargs", k_sft),
    Row{"bf16", set_dtype, k_args},
};

// ---- checkpointing, optimizer, kernels, loss, sharding ----

// gradient_checkpointing_enable() wraps every decoder layer in
// torch.utils.checkpoint (modeling_utils.py); use_reentrant picks the
// implementation, not what is kept.
void gradient_checkpointing(HfTrainer& s, const Row& row) {
  if (const auto gc = s.keys.boolean(row.key)) {
    set_option(s.plan, "--checkpointing", *gc ? "full" : "none",
               std::string(row.key));
  }
}

void optim(HfTrainer& s, const Row& row) {
  if (const auto o = s.keys.string(row.key)) {
    set_option(s.plan, "--optimizer", hf_optimizer(s.keys, row.key, *o),
               std::string(row.key));
  }
}

// Read (it names modules of GaLore-style optimizers, which optim refuses).
void mark_read(HfTrainer& s, const Row& row) {
  if (s.keys.has(row.key)) {
    s.keys.read(row.key);
  }
}

// torch_compile, or a backend or mode given alone, compiles; once one says
// so the others are not read.
void store_compile(HfTrainer& s, const Row& row) {
  s.compile = s.keys.boolean(row.key).value_or(false);
}
void store_compile_setting(HfTrainer& s, const Row& row) {
  if (!s.compile) {
    s.compile = s.keys.string(row.key).has_value();
  }
}
void set_compile(HfTrainer& s, const Row& /*row*/) {
  if (s.compile) {
    set_option(s.plan, "--compile", "",
               s.keys.has("torch_compile")           ? "torch_compile"
               : s.keys.has("torch_compile_backend") ? "torch_compile_backend"
                                                     : "torch_compile_mode");
  }
}

void attn_implementation(HfTrainer& s, const Row& row) {
  if (const auto a = s.keys.string(row.key)) {
    set_option(s.plan, "--attn", hf_attention(s.keys, row.key, *a),
               std::string(row.key));
  }
}

void loss_type(HfTrainer& s, const Row& row) {
  const auto loss = s.keys.string(row.key);
  if (!loss) {
    return;
  }
  if (s.objective != "sft") {
    if (trl_loss_objective(*loss).empty()) {
      s.keys.fail(row.key, fmt::format("{} is not a DPO, CPO or KTO loss_type "
                                       "(trl/trainer/dpo_config.py)",
                                       echo(*loss)));
    }
    return;
  }
  if (*loss == "chunked_nll") {
    set_option(s.plan, "--loss", "chunked", std::string(row.key));
  } else if (*loss == "nll" || *loss == "dft") {
    set_option(s.plan, "--loss", "full", std::string(row.key));
  } else {
    s.keys.fail(row.key, fmt::format("{} is not an SFT loss; use nll, dft "
                                     "or chunked_nll",
                                     echo(*loss)));
  }
}

void fsdp(HfTrainer& s, const Row& /*row*/) {
  read_hf_fsdp(s.keys, s.plan, s.load);
}

// DeepSpeed (named, or given next to this file) makes fp32 master copies of
// 16-bit weights: no pure precision under it.
void deepspeed(HfTrainer& s, const Row& row) {
  fold_trainer_deepspeed(s.keys, row.key, s.plan, s.load, s.attached,
                         s.trainer);
  if (!s.plan.included_files.empty() || s.keys.has(row.key)) {
    const LaunchOption* p = find_option(s.plan, "--precision");
    if (p != nullptr && p->value == "pure" &&
        (s.keys.has(row.key) || s.attached.deepspeed != nullptr)) {
      erase_option(s.plan, "--precision");
    }
  }
}

constexpr std::array k_run_rows = {
    Row{"gradient_checkpointing", gradient_checkpointing, k_args},
    Row::unused_children("gradient_checkpointing_kwargs", k_args),
    Row::when_true("activation_offloading", "--activation-offload", "", k_sft),
    Row::when_true("adafactor", "--optimizer", "adafactor", k_args),
    Row{"optim", optim, k_args},
    Row{"optim_target_modules", mark_read, k_args},
    Row{"torch_compile", store_compile, k_args},
    Row{"torch_compile_backend", store_compile_setting, k_args},
    Row{"torch_compile_mode", store_compile_setting, k_args},
    Row{"torch_compile", set_compile, k_args},
    Row{"attn_implementation", attn_implementation, k_model_config},
    // Liger's fused linear cross-entropy never materialises the logits.
    Row::when_true("use_liger_kernel", "--loss", "chunked", k_args),
    Row::unused_children("liger_kernel_config", k_args),
    Row{"loss_type", loss_type, k_sft},
    Row::when_true("precompute_ref_log_probs", "--precompute-ref", "",
                   "trl/trainer/dpo_config.py"),
    Row::refuse_true("use_cpu",
                     "training on the CPU is not planned; oomplan plans "
                     "GPU memory",
                     k_args),
    Row::refuse_present("parallelism_config",
                        "accelerate's ParallelismConfig is not read; give "
                        "--tp instead",
                        k_args),
    Row{"fsdp", fsdp, k_args},
    Row{"deepspeed", deepspeed, k_args},
};

// ---- TRL preference and RL configs: which trainer the file configures ----

// Keys only one trainer's config has (trl/trainer/kto_config.py,
// cpo_config.py, dpo_config.py).
constexpr std::array k_kto_markers = {"desirable_weight", "undesirable_weight"};
constexpr std::array k_cpo_markers = {"cpo_alpha", "simpo_gamma"};
// DPOConfig's keys that change memory (read by set_objective and the
// reader), and those that do not.
constexpr std::array k_dpo_ref_markers = {"precompute_ref_log_probs",
                                          "ref_model_init_kwargs"};
constexpr std::array k_dpo_markers = {
    "precompute_ref_batch_size",
    "rpo_alpha",
    "ref_adapter_name",
    "model_adapter_name",
    "sync_ref_model",
    "ref_model_sync_steps",
    "ref_model_mixup_alpha",
    "reference_free",
    "f_divergence_type",
    "f_alpha_divergence_coef",
    "use_weighting",
    "loss_weights",
    "ld_alpha",
    "force_use_ref_model",
};
// Keys of the trainers oomplan does not model, and their method: GRPO and
// RLOO generate completions during training (grpo_config.py, rloo_config.py),
// PPO holds reward and value models (ppo_config.py), RewardConfig trains a
// reward model (reward_config.py).
struct RlMarker {
  const char* key;
  std::string_view method;
};
constexpr std::array k_rl_markers = {
    RlMarker{"num_generations", "GRPO/RLOO"},
    RlMarker{"num_ppo_epochs", "PPO"},
    RlMarker{"vf_coef", "PPO"},
    RlMarker{"reward_model_path", "PPO"},
    RlMarker{"center_rewards_coefficient", "reward-model"},
};
// The other preference keys: they do not change memory (nor do the KTO,
// CPO and DPO-only markers above).
constexpr std::array k_preference_unused = {
    "beta",
    "label_smoothing",
    "max_prompt_length",
    "max_completion_length",
    "label_pad_token_id",
    "padding_value",
    "disable_dropout",
    "generate_during_eval",
    "is_encoder_decoder",
    "use_logits_to_keep",
    "tools",
};

template <std::size_t N>
const char* first_present(const KeyReader& keys,
                          const std::array<const char*, N>& markers) {
  for (const char* k : markers) {
    if (keys.has(k)) {
      return k;
    }
  }
  return nullptr;
}

// The objective a trainer name in the file's path gives ("dpo.yaml",
// "orpo_qwen.yaml", alignment-handbook's "recipes/.../orpo/config_full.yaml"):
// ORPOConfig has no key of its own.
std::string_view objective_of_name(std::string_view file) {
  const std::string name = lower(file);
  for (const auto& [word, objective] :
       {std::pair<std::string_view, std::string_view>{"orpo", "orpo"},
        {"kto", "kto"},
        {"simpo", "simpo"},
        {"cpo", "simpo"},
        {"dpo", "dpo"}}) {
    if (name.find(word) != std::string::npos) {
      return objective;
    }
  }
  return "";
}

// The trainer of a TRL config: keys only its config has, then a preference
// loss_type, then the trainer named in the file's name, then DPO's beta.
// RL trainers are refused. "sft" when nothing says preference.
void detect_trl_objective(HfTrainer& s) {
  for (const RlMarker& m : k_rl_markers) {
    if (s.keys.has(m.key)) {
      refuse_method(s.keys, m.key, m.method);
    }
  }
  const std::string loss = s.keys.peek("loss_type") != nullptr &&
                                   s.keys.peek("loss_type")->is_string()
                               ? s.keys.peek("loss_type")->get<std::string>()
                               : std::string();
  const std::string_view by_loss = trl_loss_objective(loss);
  std::string key;
  if (const char* k = first_present(s.keys, k_kto_markers)) {
    s.objective = "kto", key = k;
  } else if (by_loss == "kto" || by_loss == "simpo") {
    s.objective = by_loss, key = "loss_type";
  } else if (const char* c = first_present(s.keys, k_cpo_markers)) {
    s.objective = "simpo", key = c;
  } else if (const char* d = first_present(s.keys, k_dpo_ref_markers)) {
    s.objective = "dpo", key = d;
  } else if (const char* o = first_present(s.keys, k_dpo_markers)) {
    s.objective = "dpo", key = o;
  } else if (const auto named = objective_of_name(s.plan.file);
             !named.empty() && (s.keys.has("beta") || !by_loss.empty())) {
    s.objective = named, key = s.keys.has("beta") ? "beta" : "loss_type";
  } else if (!by_loss.empty() || s.keys.has("beta")) {
    s.objective = "dpo", key = by_loss.empty() ? "beta" : "loss_type";
    s.plan.notes.push_back(
        "a preference config with no key only one trainer has: planned as "
        "DPO (trl/trainer/dpo_config.py), which holds a reference model; for "
        "ORPO or SimPO give --objective orpo or simpo");
  }
  if (s.objective != "sft") {
    mark_unused_keys(s.keys, k_preference_unused);
    mark_unused_keys(s.keys, k_kto_markers);
    mark_unused_keys(s.keys, k_cpo_markers);
    mark_unused_keys(s.keys, k_dpo_markers);
    s.keys.unused_children("ref_model_init_kwargs");
    set_objective(s.plan, s.objective, key);
    // Preference losses gather per-token log-probs from the whole logits
    // (trl/trainer/dpo_trainer.py concatenated_forward, selective_log_softmax
    // in utils.py), not SFT's chunked_nll.
    set_default(
        s.plan, "--loss", "full",
        "DPO, ORPO, KTO and CPO compute per-token log-probs from the "
        "full logits (trl/trainer/dpo_trainer.py concatenated_forward)");
  }
}

}  // namespace

void read_hf_trainer(KeyReader& keys, LaunchPlan& plan, const FileLoader& load,
                     const Attached& attached) {
  const bool trl = std::any_of(k_trl_markers.begin(), k_trl_markers.end(),
                               [&](const char* k) { return keys.has(k); });
  plan.framework = trl ? "trl" : "hf-trainer";
  HfTrainer s{{keys, plan}, load, attached};
  detect_trl_objective(s);
  if (s.objective != "sft") {
    plan.framework = "trl";
  }
  read_accelerator_config(keys, plan);
  mark_hf_unused(keys);
  mark_unused_keys(keys, k_trl_unused);
  walk_rows(s, k_mode_rows);
  if (s.peft) {
    walk_rows(s, k_peft_rows);
  } else {
    walk_rows(s, k_full_rows);
  }
  walk_rows(s, k_batch_rows);
  walk_rows(s, k_run_rows);
}

}  // namespace oomplan::launch
