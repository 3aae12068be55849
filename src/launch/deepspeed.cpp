// The DeepSpeed reader: a DeepSpeed JSON's keys, each a row of the tables
// below (rows.hpp), with the DeepSpeed file that defines it; and the folding
// of a DeepSpeed config into a training file's plan.
//
// Sources: DeepSpeed deepspeed/runtime/config.py, deepspeed/runtime/zero/
// config.py and offload_config.py; transformers integrations/deepspeed.py
// (HfTrainerDeepSpeedConfig.trainer_config_process: "auto" filled from the
// Trainer's arguments, mismatches refused).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <array>

namespace oomplan::launch {
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

// The offload settings that size pinned buffers, and the loss-scaling and
// bf16 optimizer switches: DeepSpeed's defaults are what oomplan plans.
constexpr std::array k_ds_offload_unused = {
    "pin_memory", "buffer_count",  "buffer_size",    "max_in_cpu", "nvme_path",
    "fast_init",  "pipeline_read", "pipeline_write", "pipeline",
};
constexpr std::array k_ds_fp16_unused = {
    "loss_scale", "initial_scale_power",    "loss_scale_window",
    "hysteresis", "consecutive_hysteresis", "min_loss_scale",
    "auto_cast",
};
constexpr std::array k_ds_bf16_unused = {
    "immediate_grad_update",
    "check_grad_overflow",
    "check_overflow",
};

// Marks `names` under `section` ("fp16.loss_scale").
template <std::size_t N>
void mark_unused_under(KeyReader& keys, std::string_view section,
                       const std::array<const char*, N>& names) {
  for (const char* name : names) {
    keys.unused(join_path(section, name));
  }
}

// What a row passes to later rows.
struct DeepSpeed : Reading {
  DeepSpeedFacts facts = {};
  bool optimizer_offload = false;
  bool param_offload = false;
};
using Row = KeyRow<DeepSpeed>;

// Where DeepSpeed defines its keys (deepspeed/runtime/...).
constexpr std::string_view k_config = "runtime/config.py";
constexpr std::string_view k_zero = "runtime/zero/config.py";
constexpr std::string_view k_offload = "runtime/zero/offload_config.py";
constexpr std::string_view k_tp = "runtime/tensor_parallel/config.py";

// ---- ZeRO and offload ----

void zero_mapping(DeepSpeed& s, const Row& row) {
  const Json* z = s.keys.peek(row.key);
  if (z != nullptr && !z->is_object()) {
    s.keys.fail(row.key,
                fmt::format("expected a mapping, got {}", echo_json(*z)));
  }
}

void zero_stage(DeepSpeed& s, const Row& row) {
  if (const auto stage = s.keys.integer(row.key, 0, 3)) {
    s.facts.stage = static_cast<int>(*stage);
    set_option(s.plan, "--zero", fmt::format("{}", *stage),
               std::string(row.key));
  }
}

// MiCS shards within groups (deepspeed/runtime/zero/config.py).
void refuse_mics(DeepSpeed& s, const Row& row) {
  if (s.keys.integer(row.key, -1, k_max_gpus).value_or(-1) > 0) {
    s.keys.fail(row.key,
                "MiCS sharding within groups is not modelled; remove it");
  }
}

// offload_optimizer / offload_param "device": none, cpu, nvme
// (OffloadDeviceEnum).
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

void optimizer_device(DeepSpeed& s, const Row& row) {
  s.optimizer_offload = offload_device(s.keys, row.key);
}
void param_device(DeepSpeed& s, const Row& row) {
  s.param_offload = offload_device(s.keys, row.key);
}
// The ZeRO-2 era spellings (DeepSpeed < 0.3.x `cpu_offload`).
void cpu_offload(DeepSpeed& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    s.optimizer_offload = true;
  }
}
void cpu_offload_params(DeepSpeed& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    s.param_offload = true;
  }
}

void refuse_partial_offload(DeepSpeed& s, const Row& row) {
  if (const auto ratio = s.keys.number(row.key, 0, 1); ratio && *ratio < 1) {
    s.keys.fail(row.key,
                "partial optimizer offload (ZeRO-Offload++) is not modelled; "
                "remove it or set it to 1");
  }
}

// Parameters offload only at stage 3, the optimizer from stage 1.
void set_offload(DeepSpeed& s, const Row& /*row*/) {
  const int stage = s.facts.stage;
  if (s.param_offload && stage < 3) {
    s.plan.notes.push_back(fmt::format(
        "offload_param applies only at ZeRO stage 3; at stage {} DeepSpeed "
        "keeps the parameters on the GPU",
        stage));
    s.param_offload = false;
  }
  if (s.optimizer_offload && stage < 1) {
    s.plan.notes.push_back(
        "offload_optimizer applies only at ZeRO stage 1 or more; at stage 0 "
        "DeepSpeed keeps the optimizer on the GPU");
    s.optimizer_offload = false;
  }
  const bool opt = s.optimizer_offload;
  const bool par = s.param_offload;
  if (opt || par) {
    set_option(s.plan, "--offload",
               opt && par ? "all"
               : opt      ? "optimizer"
                          : "params",
               par ? "zero_optimization.offload_param.device"
                   : "zero_optimization.offload_optimizer.device");
  }
}

constexpr std::array k_zero_rows = {
    Row{"zero_optimization", zero_mapping, k_zero},
    Row{"zero_optimization.stage", zero_stage, k_zero},
    // ZeRO++ hierarchical partitioning keeps a secondary weight copy per
    // node.
    Row::refuse_degree("zero_optimization.zero_hpz_partition_size", 1,
                       "ZeRO++ hierarchical partitioning (a secondary copy of "
                       "the weights) is not modelled; remove it or set it to "
                       "1",
                       k_zero),
    Row{"zero_optimization.mics_shard_size", refuse_mics, k_zero},
    Row::unused("zero_optimization.mics_hierarchical_params_gather", k_zero),
    Row{"zero_optimization.offload_optimizer.device", optimizer_device,
        k_offload},
    Row{"zero_optimization.cpu_offload", cpu_offload, k_zero},
    Row{"zero_optimization.offload_param.device", param_device, k_offload},
    Row{"zero_optimization.cpu_offload_params", cpu_offload_params, k_zero},
    Row{"zero_optimization.offload_optimizer.ratio", refuse_partial_offload,
        k_offload},
    Row{"zero_optimization.offload_param.device", set_offload, k_offload},
};

// ---- batch and precision ----

// A count, or "auto" (the HF Trainer fills it).
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

void micro_batch(DeepSpeed& s, const Row& row) {
  s.facts.micro_batch =
      count_or_auto(s.keys, row.key, s.facts.micro_batch_auto, k_max_batch);
}
void grad_accum(DeepSpeed& s, const Row& row) {
  s.facts.grad_accum =
      count_or_auto(s.keys, row.key, s.facts.grad_accum_auto, k_max_accum);
}
void train_batch(DeepSpeed& s, const Row& row) {
  bool is_auto = false;
  s.facts.train_batch =
      count_or_auto(s.keys, row.key, is_auto, k_max_batch * k_max_gpus);
}

// `section`.enabled: true, false or "auto".
std::optional<bool> enabled_or_auto(KeyReader& keys, std::string_view path,
                                    bool& is_auto) {
  if (keys.is_auto(path)) {
    keys.read(path);
    is_auto = true;
    return std::nullopt;
  }
  return keys.boolean(path);
}

void fp16_enabled(DeepSpeed& s, const Row& row) {
  s.facts.fp16 = enabled_or_auto(s.keys, row.key, s.facts.fp16_auto);
}
void bf16_enabled(DeepSpeed& s, const Row& row) {
  s.facts.bf16 = enabled_or_auto(s.keys, row.key, s.facts.bf16_auto);
}
// "bfloat16" is DeepSpeed's alias for the bf16 section.
void bfloat16_enabled(DeepSpeed& s, const Row& row) {
  if (!s.facts.bf16 && !s.facts.bf16_auto) {
    s.facts.bf16 = enabled_or_auto(s.keys, row.key, s.facts.bf16_auto);
  }
}

void refuse_both_precisions(DeepSpeed& s, const Row& row) {
  if (s.facts.fp16.value_or(false) && s.facts.bf16.value_or(false)) {
    s.keys.fail(row.key,
                "bf16 and fp16 are both enabled; DeepSpeed "
                "refuses that, enable one");
  }
}

constexpr std::string_view k_master_weights =
    "16-bit master weights under DeepSpeed are not modelled; use the default "
    "fp32 master weights";

void refuse_bf16_master_weights(DeepSpeed& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false) ||
      s.keys.boolean("bf16.bf16_optimizer_states").value_or(false)) {
    s.keys.fail(row.key, k_master_weights);
  }
}

constexpr std::array k_batch_rows = {
    Row{"train_micro_batch_size_per_gpu", micro_batch, k_config},
    Row{"gradient_accumulation_steps", grad_accum, k_config},
    Row{"train_batch_size", train_batch, k_config},
    Row{"fp16.enabled", fp16_enabled, k_config},
    Row{"bf16.enabled", bf16_enabled, k_config},
    Row{"bfloat16.enabled", bfloat16_enabled, k_config},
    Row{"bf16.enabled", refuse_both_precisions, k_config},
    Row::refuse_true("fp16.fp16_master_weights_and_grads", k_master_weights,
                     k_config),
    Row{"bf16.bf16_master_weights_and_grads", refuse_bf16_master_weights,
        k_config},
    Row::refuse_true("amp.enabled",
                     "NVIDIA Apex AMP is not modelled; use bf16 or fp16",
                     k_config),
    Row::unused_children("amp", k_config),
};

// ---- optimizer, parallelism, checkpointing ----

// optimizer.type (DEEPSPEED_OPTIMIZERS).
void optimizer_type(DeepSpeed& s, const Row& row) {
  const auto type = s.keys.string(row.key);
  if (!type) {
    return;
  }
  const std::string t = lower(*type);
  if (t == "adam" || t == "adamw" || t == "cpuadam" || t == "fusedadam") {
    set_option(s.plan, "--optimizer", "adamw", std::string(row.key));
  } else {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; oomplan models Adam and "
                            "AdamW (DeepSpeed's 1-bit, LAMB, Lion, Adagrad "
                            "and Muon keep other states)",
                            echo(*type)));
  }
}

// Activation checkpointing here configures deepspeed.checkpointing, which
// only models that call it (Megatron-DeepSpeed) use; Hugging Face models
// checkpoint through gradient_checkpointing.
void activation_checkpointing(DeepSpeed& s, const Row& row) {
  if (s.keys.has(row.key)) {
    s.keys.unused_children(row.key);
    s.plan.notes.push_back(
        "activation_checkpointing configures deepspeed.checkpointing, which "
        "only Megatron-DeepSpeed models call; it does not turn checkpointing "
        "on for a Hugging Face model");
  }
}

// train_batch_size = micro x accumulation x GPUs gives the GPU count.
void world_size(DeepSpeed& s, const Row& row) {
  const DeepSpeedFacts& f = s.facts;
  if (!f.micro_batch || !f.grad_accum || !f.train_batch) {
    return;
  }
  const std::int64_t per_step = *f.micro_batch * *f.grad_accum;
  if (*f.train_batch % per_step != 0) {
    s.keys.fail(row.key,
                fmt::format("{} is not train_micro_batch_size_per_gpu x "
                            "gradient_accumulation_steps ({}) x GPUs; "
                            "DeepSpeed refuses it",
                            *f.train_batch, per_step));
  }
  const std::int64_t world = *f.train_batch / per_step;
  if (world > k_max_gpus) {
    s.keys.fail(row.key, "implies more than 100000 GPUs");
  }
  s.plan.gpus = static_cast<int>(world);
  s.plan.notes.push_back(fmt::format("train_batch_size {} = {} x {} x {} GPUs",
                                     *f.train_batch, *f.micro_batch,
                                     *f.grad_accum, world));
}

constexpr std::array k_run_rows = {
    Row{"optimizer.type", optimizer_type, k_config},
    Row::unused_children("optimizer.params", k_config),
    Row::unused("optimizer.params", k_config),
    Row::parallel("tensor_parallel.autotp_size", "--tp", k_tp),
    Row::unused_children("tensor_parallel", k_tp),
    Row::refuse_degree("sequence_parallel_size", 1,
                       "DeepSpeed-Ulysses sequence parallelism is not "
                       "modelled; remove it or set it to 1",
                       k_config),
    Row{"activation_checkpointing", activation_checkpointing, k_config},
    Row{"train_batch_size", world_size, k_config},
};

// The keys that do not change memory, under their sections.
void mark_deepspeed_unused(KeyReader& keys) {
  mark_unused_under(keys, "zero_optimization", k_ds_zero_unused);
  mark_unused_under(keys, "zero_optimization.offload_optimizer",
                    k_ds_offload_unused);
  mark_unused_under(keys, "zero_optimization.offload_param",
                    k_ds_offload_unused);
  mark_unused_under(keys, "fp16", k_ds_fp16_unused);
  mark_unused_under(keys, "bf16", k_ds_bf16_unused);
  mark_unused_under(keys, "bfloat16", k_ds_bf16_unused);
  mark_unused_keys(keys, k_ds_unused);
}

}  // namespace

DeepSpeedFacts read_deepspeed(KeyReader& keys, LaunchPlan& plan) {
  if (!keys.doc().is_object()) {
    keys.fail("(top level)", "a DeepSpeed config is a JSON object");
  }
  DeepSpeed s{{keys, plan}};
  mark_deepspeed_unused(keys);
  walk_rows(s, k_zero_rows);
  walk_rows(s, k_batch_rows);
  walk_rows(s, k_run_rows);
  return s.facts;
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
    std::vector<std::string> repeated;
    const Json loaded = parse_json_text(text, path, &repeated);
    refuse_repeated_keys(repeated, path);
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

}  // namespace oomplan::launch
