// The torchtune reader: a recipe config's keys, each a row of the tables
// below (rows.hpp), with the torchtune file that reads it.
//
// Sources: torchtune recipes/*.py (the cfg keys each recipe reads),
// torchtune/models/<family>/_model_builders.py (lora_ / qlora_ builders and
// their arguments), torchtune/modules/loss.

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <regex>

namespace oomplan::launch {
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
  if (const auto o = optimizer_of_class(c)) {
    return std::string(*o);
  }
  keys.fail("optimizer._component_",
            fmt::format("{} is not modelled; oomplan models {}", echo(c),
                        k_optimizer_classes));
}

// What a row passes to later rows.
struct Torchtune : Reading {
  std::optional<std::string> hub_id = {};  // from `tune download <id>`
  std::optional<std::string> dir = {};
  std::string builder = {};
  std::string leaf = {};  // the builder's function name
  bool qlora = false;
  bool lora = false;
  std::string targets = {};
};
using Row = KeyRow<Torchtune>;

// Where torchtune reads its keys.
constexpr std::string_view k_recipe = "recipes/full_finetune_distributed.py";
constexpr std::string_view k_builders =
    "torchtune/models/<family>/_model_builders.py";
constexpr std::string_view k_tokenizer =
    "torchtune/models/<family>/_tokenizer.py";

// Recipes say where the checkpoint comes from in a comment:
// "tune download meta-llama/Meta-Llama-3.1-8B-Instruct --output-dir ...".
std::optional<std::string> download_id(std::string_view text) {
  const auto at = text.find("tune download ");
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view rest = text.substr(at + 14);
  rest = rest.substr(0, rest.find_first_of(" \t\r\n"));
  if (!rest.empty() && rest.find('/') != std::string_view::npos &&
      rest.size() < 200) {
    return std::string(rest);
  }
  return std::nullopt;
}

// ---- the model ----

void store_checkpoint_dir(Torchtune& s, const Row& row) {
  s.dir = s.keys.string(row.key);
}

void store_builder(Torchtune& s, const Row& row) {
  const auto builder = s.keys.string(row.key);
  if (!builder) {
    s.keys.fail(row.key,
                "names no model builder; torchtune recipes "
                "need model._component_");
  }
  s.builder = *builder;
  s.leaf = s.builder.substr(s.builder.rfind('.') + 1);
}

// The model: the checkpoint folder (a local path), with the hub id, the
// folder's base name and the builder's name as aliases; the builder's name
// when there is no folder.
void set_model_names(Torchtune& s, const Row& row) {
  LaunchPlan& plan = s.plan;
  if (s.dir) {
    std::string d = *s.dir;
    while (d.size() > 1 && d.back() == '/') {
      d.pop_back();
    }
    plan.model = d;
    plan.model_key = std::string(row.key);
    const auto slash = d.rfind('/');
    const std::string base =
        slash == std::string::npos ? d : d.substr(slash + 1);
    if (!base.empty() && base != d) {
      plan.model_aliases.push_back(base);
    }
  }
  if (s.hub_id) {
    plan.model_aliases.insert(plan.model_aliases.begin(), *s.hub_id);
  }
  plan.model_aliases.push_back(builder_alias(s.builder));
  if (plan.model.empty()) {
    plan.model = plan.model_aliases.back();
    plan.model_key = "model._component_";
    plan.model_aliases.pop_back();
  }
}

// ---- adapters: torchtune.models.<family>.{lora_,qlora_}<name>; QLoRA bases
// are torchao NF4 (block 64, quantized scales) ----

void store_quantize_base(Torchtune& s, const Row& row) {
  s.qlora =
      s.leaf.rfind("qlora_", 0) == 0 || s.keys.boolean(row.key).value_or(false);
  s.lora = s.qlora || s.leaf.rfind("lora_", 0) == 0;
}

void refuse_dora(Torchtune& s, const Row& row) {
  if (s.leaf.rfind("dora_", 0) == 0 || s.leaf.rfind("qdora_", 0) == 0 ||
      s.keys.boolean(row.key).value_or(false)) {
    s.keys.fail("model._component_",
                "DoRA is not modelled; use a lora_ or "
                "qlora_ builder");
  }
}

void set_builder_mode(Torchtune& s, const Row& row) {
  if (!s.lora) {
    return;
  }
  set_option(s.plan, "--mode", s.qlora ? "qlora" : "lora",
             std::string(row.key));
  if (s.qlora) {
    set_option(s.plan, "--quant", "nf4", std::string(row.key));
  }
}

void lora_rank(Torchtune& s, const Row& row) {
  if (!s.lora) {
    return;
  }
  if (const auto r = s.keys.integer(row.key, 1, k_max_rank)) {
    set_option(s.plan, "--lora-rank", fmt::format("{}", *r),
               std::string(row.key));
  }
}

void lora_dropout(Torchtune& s, const Row& row) {
  if (s.lora) {
    set_probability(s, row);
  }
}

void store_lora_targets(Torchtune& s, const Row& row) {
  if (s.lora) {
    s.targets = peft_targets(s.keys, row.key);
  }
}

// apply_lora_to_mlp adds the MLP's three projections to the attention ones.
void set_lora_targets(Torchtune& s, const Row& row) {
  if (!s.lora) {
    return;
  }
  if (s.keys.boolean(row.key).value_or(false)) {
    s.targets += s.targets.empty() ? "gate,up,down" : ",gate,up,down";
  }
  if (!s.targets.empty()) {
    set_option(s.plan, "--lora-targets",
               s.targets == "q,k,v,o,gate,up,down" ? "all" : s.targets,
               "model.lora_attn_modules");
  }
}

void lora_to_output(Torchtune& s, const Row& row) {
  if (s.lora && s.keys.boolean(row.key).value_or(false)) {
    s.keys.fail(row.key,
                "LoRA on the output projection is not modelled; set it to "
                "False");
  }
}

constexpr std::array k_model_rows = {
    Row{"checkpointer.checkpoint_dir", store_checkpoint_dir, k_recipe},
    Row{"model._component_", store_builder, k_builders},
    Row{"checkpointer.checkpoint_dir", set_model_names, k_recipe},
    Row::unused_children("checkpointer", k_recipe),
    Row{"model.quantize_base", store_quantize_base, k_builders},
    Row{"model.use_dora", refuse_dora, k_builders},
    Row{"model._component_", set_builder_mode, k_builders},
    Row{"model.lora_rank", lora_rank, k_builders},
    Row{"model.lora_dropout", lora_dropout, k_builders, "--lora-dropout"},
    Row{"model.lora_attn_modules", store_lora_targets, k_builders},
    Row{"model.apply_lora_to_mlp", set_lora_targets, k_builders},
    Row{"model.apply_lora_to_output", lora_to_output, k_builders},
    Row::unused_children("model", k_builders),
};

// ---- data, batch, optimizer, loss ----

// torchtune does not truncate without max_seq_len: the longest sample sets
// the sequence.
void max_seq_len(Torchtune& s, const Row& row) {
  if (s.keys.peek(row.key) != nullptr) {
    const auto len = s.keys.integer(row.key, 1, k_max_seq);
    set_option(s.plan, "--seq", fmt::format("{}", *len), std::string(row.key));
  } else {
    s.keys.read(row.key);
    s.plan.notes.push_back(
        "tokenizer.max_seq_len is not set: torchtune does not truncate, so "
        "the longest sample sets the sequence; give --seq");
  }
}

void packed(Torchtune& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    s.plan.notes.push_back(
        "dataset.packed: each row packs samples up to "
        "tokenizer.max_seq_len tokens");
  }
}

void optimizer(Torchtune& s, const Row& row) {
  if (const auto o = s.keys.string(row.key)) {
    set_option(s.plan, "--optimizer", torchtune_optimizer(s.keys, *o),
               std::string(row.key));
  }
}

// torchtune/modules/loss: CEWithChunkedOutputLoss and LinearCrossEntropyLoss
// compute the loss in chunks; torch.nn.CrossEntropyLoss does not.
void loss(Torchtune& s, const Row& row) {
  const auto l = s.keys.string(row.key);
  if (!l) {
    return;
  }
  const std::string& c = *l;
  // torchtune/rlhf/loss (torchtune.modules.rlhf.loss before 0.5): the DPO
  // recipes (lora_dpo_single_device, lora_dpo_distributed,
  // full_dpo_distributed) run chosen and rejected through one
  // concatenated_forward and take log-probs from the full logits.
  // DPOLoss, RSOLoss and IPOLoss compare with a reference (a PEFT policy's
  // is its base with adapters disabled); SimPOLoss is reference-free.
  const std::size_t dot = c.find_last_of('.');
  const std::string_view cls =
      std::string_view(c).substr(dot == std::string::npos ? 0 : dot + 1);
  if (cls == "DPOLoss" || cls == "RSOLoss" || cls == "IPOLoss" ||
      cls == "SimPOLoss") {
    set_objective(s.plan, cls == "SimPOLoss" ? "simpo" : "dpo",
                  std::string(row.key));
    set_option(s.plan, "--loss", "full", std::string(row.key));
    return;
  }
  // The RL recipes: ppo_full_finetune_single_device (PPOLoss) and
  // dev/grpo_full_finetune_distributed (rlhf/loss/grpo.py GRPOLoss,
  // GRPOSimpleLoss, GRPOWithChunkedOutputLoss) generate during training.
  if (cls == "PPOLoss") {
    refuse_method(s.keys, row.key, "PPO");
  }
  if (cls.rfind("GRPO", 0) == 0) {
    refuse_method(s.keys, row.key, "GRPO");
  }
  if (c.find("ChunkedOutputLoss") != std::string::npos ||
      c.find("LinearCrossEntropyLoss") != std::string::npos) {
    set_option(s.plan, "--loss", "chunked", std::string(row.key));
  } else if (c == "torch.nn.CrossEntropyLoss") {
    set_option(s.plan, "--loss", "full", std::string(row.key));
  } else {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; use LinearCrossEntropyLoss, "
                            "CEWithChunkedOutputLoss or "
                            "torch.nn.CrossEntropyLoss",
                            echo(c)));
  }
}

constexpr std::array k_data_rows = {
    Row{"tokenizer.max_seq_len", max_seq_len, k_tokenizer},
    Row::unused_children("tokenizer", k_tokenizer),
    Row{"dataset.packed", packed, k_recipe},
    Row::unused_children("dataset", k_recipe),
    Row::integer("batch_size", "--batch", 1, k_max_batch, k_recipe),
    Row::integer("gradient_accumulation_steps", "--grad-accum", 1, k_max_accum,
                 k_recipe),
    Row{"optimizer._component_", optimizer, k_recipe},
    Row::unused_children("optimizer", k_recipe),
    Row::when_true("optimizer_in_bwd", "--optimizer-in-bwd", "", k_recipe),
    Row{"loss._component_", loss, k_recipe},
    Row::unused_children("loss", k_recipe),
};

// ---- compile, checkpointing, dtype, distributed ----

void compile(Torchtune& s, const Row& row) {
  if (const Json* c = s.keys.read(row.key)) {
    if ((c->is_boolean() && c->get<bool>()) || c->is_object()) {
      set_option(s.plan, "--compile", "", std::string(row.key));
    }
  }
}

void activation_checkpointing(Torchtune& s, const Row& row) {
  if (const auto ac = s.keys.boolean(row.key)) {
    set_option(s.plan, "--checkpointing", *ac ? "full" : "none",
               std::string(row.key));
  }
}

void ac_mode(Torchtune& s, const Row& row) {
  if (const auto mode = s.keys.string(row.key); mode && *mode != "full") {
    s.keys.fail(row.key, fmt::format("{} checkpointing (every n-th layer) is "
                                     "not modelled; use full",
                                     echo(*mode)));
  }
}

// training.get_dtype: fp16, bf16, fp32 (fp64 is refused here).
void dtype(Torchtune& s, const Row& row) {
  if (const auto d = s.keys.string(row.key)) {
    if (*d != "bf16" && *d != "fp32" && *d != "fp16") {
      s.keys.fail(row.key, fmt::format("{} is not modelled; use bf16 or fp32",
                                       echo(*d)));
    }
    set_option(s.plan, "--dtype", *d, std::string(row.key));
  }
}

void device(Torchtune& s, const Row& row) {
  if (const auto dev = s.keys.string(row.key); dev && *dev != "cuda") {
    s.keys.fail(row.key,
                fmt::format("{} is not a GPU; oomplan plans cuda", echo(*dev)));
  }
}

// fsdp_reshard_after_forward false keeps the gathered weights (ZeRO-2).
void reshard_after_forward(Torchtune& s, const Row& row) {
  if (!s.keys.boolean(row.key).value_or(true)) {
    set_option(s.plan, "--zero", "2", std::string(row.key));
  }
}

constexpr std::string_view k_second_model =
    "a second model (teacher) or QAT is not modelled; use an SFT or DPO "
    "recipe";

// The PPO recipe's reward and value model: refused as every reader refuses
// PPO.
void refuse_ppo(Torchtune& s, const Row& row) {
  if (s.keys.has(row.key)) {
    refuse_method(s.keys, row.key, "PPO");
  }
}

// full_dpo_distributed's reference model (ref_model, or the policy's builder
// loaded from ref_checkpointer, sharded like the policy by
// _setup_reference_model): the frozen copy --objective dpo plans under full
// fine-tuning; with another loss it is a second model.
void ref_model(Torchtune& s, const Row& row) {
  if (!s.keys.has(row.key)) {
    return;
  }
  const LaunchOption* o = find_option(s.plan, "--objective");
  if (o == nullptr || o->value != "dpo") {
    s.keys.fail(row.key,
                "a reference model without a DPO loss is not "
                "modelled; use loss torchtune.rlhf.loss.DPOLoss");
  }
  s.keys.unused_children(row.key);
}

// Distributed recipes: FSDP2 over data_parallel_shard_dim; fsdp_cpu_offload
// is CPUOffloadPolicy (parameters, gradients and the optimizer step on the
// CPU).
constexpr std::array k_run_rows = {
    Row{"compile", compile, k_recipe},
    Row{"enable_activation_checkpointing", activation_checkpointing, k_recipe},
    Row{"ac_mode", ac_mode, k_recipe},
    Row::unused("ac_option", k_recipe),
    Row::when_true("enable_activation_offloading", "--activation-offload", "",
                   k_recipe),
    Row{"dtype", dtype, k_recipe},
    Row{"device", device, k_recipe},
    Row::when_true("fsdp_cpu_offload", "--offload", "all", k_recipe),
    Row{"fsdp_reshard_after_forward", reshard_after_forward, k_recipe},
    Row::parallel("tensor_parallel_dim", "--tp", k_recipe),
    Row::refuse_degree("context_parallel_dim", -1,
                       "context parallelism is not modelled; set it to 1",
                       k_recipe),
    Row::refuse_degree("data_parallel_replicate_dim", -1,
                       "hybrid sharding (replicated shard groups) is not "
                       "modelled; set it to 1",
                       k_recipe),
    Row::refuse_true("enable_fp8_training", "FP8 training is not modelled",
                     k_recipe),
    Row::unused("fp8_recipe_name", k_recipe),
    Row{"ref_model", ref_model, "recipes/full_dpo_distributed.py"},
    Row{"ref_checkpointer", ref_model, "recipes/full_dpo_distributed.py"},
    Row{"reward_and_value_model", refuse_ppo,
        "recipes/ppo_full_finetune_single_device.py"},
    Row::refuse_present("teacher_model", k_second_model,
                        "recipes/knowledge_distillation_distributed.py"),
    Row::refuse_present("quantizer", k_second_model,
                        "recipes/qat_distributed.py"),
    Row::unused("fake_quant_after_n_steps", "recipes/qat_distributed.py"),
};

}  // namespace

// torch.optim and bitsandbytes.optim classes (torchtune recipes instantiate
// cfg.optimizer, LitGPT's instantiate_torch_optimizer its class_path);
// torchao's low-bit optimizers by their state width.
std::optional<std::string_view> optimizer_of_class(std::string_view c) {
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
      return to;
    }
  }
  return std::nullopt;
}

void read_torchtune(KeyReader& keys, LaunchPlan& plan, std::string_view text) {
  Torchtune s{{keys, plan}};
  s.hub_id = download_id(text);
  mark_unused_keys(keys, k_torchtune_unused);
  walk_rows(s, k_model_rows);
  walk_rows(s, k_data_rows);
  walk_rows(s, k_run_rows);
}

}  // namespace oomplan::launch
