// The accelerate config reader (`accelerate config` YAML): the file's keys,
// each a row of the tables below (rows.hpp), with the accelerate file that
// defines it; the fsdp_config and deepspeed_config rows apply only under
// their distributed_type.
//
// Sources: accelerate src/accelerate/commands/config/config_args.py (the
// file's keys), utils/dataclasses.py (PrecisionType, DistributedType,
// FullyShardedDataParallelPlugin, ParallelismConfig).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <array>
#include <string>

namespace oomplan::launch {
namespace {

// Keys that do not change GPU memory (config_args.py ClusterConfig).
constexpr std::array k_accelerate_unused = {
    "compute_environment",
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
    "use_mps_device",
};

// What a row passes to later rows.
struct Accelerate : Reading {
  const FileLoader& load;
  std::optional<std::int64_t> processes = {};
  std::optional<std::int64_t> machines = {};
  std::string type = "NO";  // distributed_type
  std::int64_t fsdp_version = 1;
  bool optimizer_offload = false;
  bool param_offload = false;
};
using Row = KeyRow<Accelerate>;

constexpr std::string_view k_config_args = "commands/config/config_args.py";
constexpr std::string_view k_dataclasses = "utils/dataclasses.py";

// ---- processes, precision, compile, distributed type ----

void store_processes(Accelerate& s, const Row& row) {
  s.processes = s.keys.integer(row.key, 1, k_max_gpus);
}
void store_machines(Accelerate& s, const Row& row) {
  s.machines = s.keys.integer(row.key, 1, k_max_gpus);
}

// accelerate starts num_processes / num_machines processes per machine.
void set_gpus(Accelerate& s, const Row& row) {
  if (s.processes) {
    const std::int64_t nodes = s.machines.value_or(1);
    if (*s.processes % nodes != 0) {
      s.keys.fail(row.key,
                  fmt::format("{} processes do not split evenly over {} "
                              "machines; accelerate starts num_processes / "
                              "num_machines per machine",
                              *s.processes, nodes));
    }
    s.plan.gpus = static_cast<int>(*s.processes / nodes);
  }
  if (s.machines) {
    s.plan.nodes = static_cast<int>(*s.machines);
  }
}

// mixed_precision: no, fp16, bf16, fp8 (PrecisionType): autocast over fp32
// weights (FSDP: MixedPrecision with fp32 sharded parameters).
void mixed_precision(Accelerate& s, const Row& row) {
  const auto mp = s.keys.string(row.key);
  if (!mp) {
    return;
  }
  if (*mp == "bf16" || *mp == "fp16") {
    set_option(s.plan, "--dtype", *mp, std::string(row.key));
  } else if (*mp == "no") {
    set_option(s.plan, "--dtype", "fp32", std::string(row.key));
  } else {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; use no, fp16 or bf16 (FP8 "
                            "training is not modelled)",
                            echo(*mp)));
  }
}

void dynamo_backend(Accelerate& s, const Row& row) {
  if (const auto backend = s.keys.string(row.key)) {
    if (lower(*backend) != "no") {
      set_option(s.plan, "--compile", "", std::string(row.key));
    }
  }
}

// NO, MULTI_GPU, FSDP and DEEPSPEED on GPUs (DistributedType).
void distributed_type(Accelerate& s, const Row& row) {
  s.type = s.keys.string(row.key).value_or("NO");
  const std::string& type = s.type;
  if (type == "MEGATRON_LM" || type == "XLA" || type == "TPU" ||
      type == "MULTI_CPU" || type == "MULTI_NPU" || type == "MULTI_XPU" ||
      type == "MULTI_MLU" || type == "MULTI_SDAA" || type == "MULTI_MUSA" ||
      type == "MULTI_HPU") {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; oomplan plans NO, MULTI_GPU, "
                            "FSDP and DEEPSPEED on GPUs",
                            type));
  }
  if (type != "NO" && type != "MULTI_GPU" && type != "FSDP" &&
      type != "DEEPSPEED") {
    s.keys.fail(row.key,
                fmt::format("{} is not an accelerate distributed type; use NO, "
                            "MULTI_GPU, FSDP or DEEPSPEED",
                            echo(type)));
  }
}

constexpr std::array k_launch_rows = {
    Row::refuse_true("use_cpu", "training on the CPU is not planned",
                     k_config_args),
    Row{"num_processes", store_processes, k_config_args},
    Row{"num_machines", store_machines, k_config_args},
    Row{"num_processes", set_gpus, k_config_args},
    Row{"mixed_precision", mixed_precision, k_config_args},
    Row{"dynamo_config.dynamo_backend", dynamo_backend, k_config_args},
    Row::unused_children("dynamo_config", k_config_args),
    Row{"distributed_type", distributed_type, k_config_args},
};

// ---- distributed_type FSDP ----

// fsdp_version 1 (FullyShardedDataParallel) or 2 (fully_shard).
void fsdp_version(Accelerate& s, const Row& row) {
  s.fsdp_version = s.keys.integer(row.key, 1, 2).value_or(1);
}

// FSDP1 sharding strategies (ShardingStrategy names or their numbers), as
// fsdp_sharding_strategy and, since accelerate 1.6, fsdp_reshard_after_forward
// state them (FullyShardedDataParallelPlugin).
void fsdp1_strategy(Accelerate& s, std::string_view key,
                    const std::string& st) {
  if (st == "FULL_SHARD" || st == "1") {
    set_option(s.plan, "--fsdp", "", std::string(key));
  } else if (st == "SHARD_GRAD_OP" || st == "2") {
    set_option(s.plan, "--zero", "2", std::string(key));
  } else if (st == "HYBRID_SHARD" || st == "HYBRID_SHARD_ZERO2" || st == "4" ||
             st == "5") {
    s.keys.fail(key,
                fmt::format("{} shards within a node and replicates across "
                            "nodes, which is not modelled; use FULL_SHARD or "
                            "SHARD_GRAD_OP",
                            st));
  } else if (st != "NO_SHARD" && st != "3") {
    s.keys.fail(key, fmt::format("{} is not a sharding strategy; use "
                                 "FULL_SHARD, SHARD_GRAD_OP or NO_SHARD",
                                 echo(st)));
  }
}

// fsdp_reshard_after_forward (FullyShardedDataParallelPlugin, accelerate >=
// 1.6, which deprecates fsdp_sharding_strategy for it): under FSDP2 a bool,
// true = FULL_SHARD, false keeps the gathered parameters from forward to
// backward = SHARD_GRAD_OP (ZeRO-2); under FSDP1 a sharding-strategy name.
void reshard_after_forward(Accelerate& s, const Row& row) {
  const Json* r = s.keys.read(row.key);
  if (s.fsdp_version != 2) {
    if (r != nullptr) {
      const auto st = r->is_boolean()
                          ? std::optional<std::string>(
                                r->get<bool>() ? "FULL_SHARD" : "SHARD_GRAD_OP")
                          : s.keys.string(row.key);
      fsdp1_strategy(s, row.key, st.value_or("FULL_SHARD"));
    }
    return;
  }
  const bool reshard =
      r == nullptr || (r->is_boolean() && r->get<bool>()) ||
      (r->is_string() && (r->get<std::string>() == "FULL_SHARD" ||
                          lower(r->get<std::string>()) == "true"));
  set_option(s.plan, reshard ? "--fsdp" : "--zero", reshard ? "" : "2",
             std::string(row.key));
}

// FSDP1: fsdp_sharding_strategy, FULL_SHARD by default; the newer
// fsdp_reshard_after_forward, when stated, replaces it.
void sharding_strategy(Accelerate& s, const Row& row) {
  if (s.fsdp_version == 2 ||
      s.keys.has("fsdp_config.fsdp_reshard_after_forward")) {
    s.keys.read(row.key);
    return;
  }
  fsdp1_strategy(s, row.key, s.keys.string(row.key).value_or("FULL_SHARD"));
}

void mark_version(Accelerate& s, const Row& row) {
  mark_fsdp_version(s.plan,
                    s.keys.has(row.key)
                        ? std::optional<std::int64_t>(s.fsdp_version)
                        : std::nullopt,
                    std::string(row.key));
}

// Under distributed_type FSDP; other fsdp_config keys are unknown.
void fsdp_checkpointing(Accelerate& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    set_fsdp_checkpointing(s.plan, std::string(row.key));
  }
}

constexpr std::array k_fsdp_rows = {
    Row{"fsdp_config.fsdp_version", fsdp_version, k_dataclasses},
    Row{"fsdp_config.fsdp_reshard_after_forward", reshard_after_forward,
        k_dataclasses},
    Row{"fsdp_config.fsdp_sharding_strategy", sharding_strategy, k_dataclasses},
    Row{"fsdp_config.fsdp_version", mark_version, k_dataclasses},
    Row::when_true("fsdp_config.fsdp_offload_params", "--offload", "all",
                   k_dataclasses),
    Row{"fsdp_config.fsdp_activation_checkpointing", fsdp_checkpointing,
        k_dataclasses},
    Row::unused("fsdp_config.fsdp_auto_wrap_policy", k_dataclasses),
    Row::unused("fsdp_config.fsdp_backward_prefetch", k_dataclasses),
    Row::unused("fsdp_config.fsdp_backward_prefetch_policy", k_dataclasses),
    Row::unused("fsdp_config.fsdp_forward_prefetch", k_dataclasses),
    Row::unused("fsdp_config.fsdp_cpu_ram_efficient_loading", k_dataclasses),
    Row::unused("fsdp_config.fsdp_state_dict_type", k_dataclasses),
    Row::unused("fsdp_config.fsdp_sync_module_states", k_dataclasses),
    Row::unused("fsdp_config.fsdp_use_orig_params", k_dataclasses),
    Row::unused("fsdp_config.fsdp_transformer_layer_cls_to_wrap",
                k_dataclasses),
    Row::unused("fsdp_config.fsdp_min_num_params", k_dataclasses),
    Row::unused("fsdp_config.fsdp_cpu_offload_pin_memory", k_dataclasses),
};

// ---- distributed_type DEEPSPEED ----

// A DeepSpeed JSON file: batch and accumulation are its own (no trainer
// values fill them).
void deepspeed_config_file(Accelerate& s, const Row& row) {
  fold_deepspeed(s.keys, row.key, s.plan, s.load, TrainerValues{});
}

// offload_optimizer_device / offload_param_device: none or cpu.
bool offload_device(Accelerate& s, std::string_view key) {
  const auto d = s.keys.string(key);
  if (!d || *d == "none") {
    return false;
  }
  if (*d == "cpu") {
    return true;
  }
  s.keys.fail(key, *d == "nvme" ? std::string("NVMe offload is not modelled; "
                                              "use cpu or none")
                                : fmt::format("{} is not an offload device; "
                                              "use none or cpu",
                                              echo(*d)));
}

void optimizer_device(Accelerate& s, const Row& row) {
  s.optimizer_offload = offload_device(s, row.key);
}
void param_device(Accelerate& s, const Row& row) {
  s.param_offload = offload_device(s, row.key);
}

// Parameters offload only at ZeRO stage 3.
void set_offload(Accelerate& s, const Row& row) {
  const bool opt = s.optimizer_offload;
  const bool par = s.param_offload;
  const LaunchOption* zero = find_option(s.plan, "--zero");
  const int stage = zero != nullptr ? std::stoi(zero->value) : 0;
  if (opt || (par && stage == 3)) {
    set_option(s.plan, "--offload",
               opt && par && stage == 3 ? "all"
               : opt                    ? "optimizer"
                                        : "params",
               par && stage == 3 ? std::string(row.key)
                                 : "deepspeed_config.offload_optimizer_device");
  }
  if (par && stage < 3) {
    s.plan.notes.push_back(
        "offload_param_device applies only at ZeRO stage "
        "3; DeepSpeed keeps the parameters on the GPU");
  }
}

void keep_master_weights(Accelerate& s, const Row& /*row*/) {
  set_default(s.plan, "--precision", "mixed",
              "DeepSpeed keeps fp32 master weights and optimizer states "
              "(deepspeed/runtime/zero/stage_1_and_2.py, stage3.py)");
}

// A DeepSpeed config file, when named, replaces the settings below.
constexpr std::array k_deepspeed_file_rows = {
    Row{"deepspeed_config.deepspeed_config_file", deepspeed_config_file,
        k_dataclasses},
};

// The DeepSpeed settings accelerate states itself (no config file).
constexpr std::array k_deepspeed_rows = {
    Row::integer("deepspeed_config.zero_stage", "--zero", 0, 3, k_dataclasses),
    Row{"deepspeed_config.offload_optimizer_device", optimizer_device,
        k_dataclasses},
    Row{"deepspeed_config.offload_param_device", param_device, k_dataclasses},
    Row{"deepspeed_config.offload_param_device", set_offload, k_dataclasses},
    Row::integer("deepspeed_config.gradient_accumulation_steps", "--grad-accum",
                 1, k_max_accum, k_dataclasses),
    Row{"deepspeed_config", keep_master_weights, k_dataclasses},
};

constexpr std::array k_deepspeed_unused = {
    "deepspeed_config.gradient_clipping",
    "deepspeed_config.zero3_init_flag",
    "deepspeed_config.zero3_save_16bit_model",
    "deepspeed_config.deepspeed_multinode_launcher",
    "deepspeed_config.deepspeed_hostfile",
    "deepspeed_config.deepspeed_exclusion_filter",
    "deepspeed_config.deepspeed_inclusion_filter",
    "deepspeed_config.deepspeed_moe_layer_cls_names",
};

// ---- ParallelismConfig (parallelism_config_*) ----

constexpr std::array k_parallelism_rows = {
    Row::parallel("parallelism_config.parallelism_config_tp_size", "--tp",
                  k_dataclasses),
    // ParallelismConfig.cp_size: the sequence sharded over cp ranks.
    Row::parallel("parallelism_config.parallelism_config_cp_size", "--cp",
                  k_dataclasses),
    Row::unused("parallelism_config.parallelism_config_cp_comm_strategy",
                k_dataclasses),
    Row::unused("parallelism_config.parallelism_config_cp_backend",
                k_dataclasses),
    Row::refuse_degree(
        "parallelism_config.parallelism_config_dp_replicate_size", 1,
        "hybrid sharding (replicated shard groups) is not modelled",
        k_dataclasses),
    Row::unused("parallelism_config.parallelism_config_dp_shard_size",
                k_dataclasses),
};

// The rows of the distributed type; the other type's mapping is unused.
void walk_distributed(Accelerate& s) {
  if (s.type == "FSDP") {
    walk_rows(s, k_fsdp_rows);
  } else {
    s.keys.unused_children("fsdp_config");
  }
  if (s.type == "DEEPSPEED") {
    if (s.keys.has("deepspeed_config.deepspeed_config_file")) {
      walk_rows(s, k_deepspeed_file_rows);
    } else {
      walk_rows(s, k_deepspeed_rows);
    }
    mark_unused_keys(s.keys, k_deepspeed_unused);
  } else {
    s.keys.unused_children("deepspeed_config");
  }
  s.keys.unused_children("megatron_lm_config");
}

}  // namespace

void read_accelerate(KeyReader& keys, LaunchPlan& plan,
                     const FileLoader& load) {
  Accelerate s{{keys, plan}, load};
  mark_unused_keys(keys, k_accelerate_unused);
  walk_rows(s, k_launch_rows);
  walk_distributed(s);
  walk_rows(s, k_parallelism_rows);
}

}  // namespace oomplan::launch
