// FSDP as the Hugging Face Trainer, axolotl and LLaMA-Factory state it: the
// `fsdp` option words and the `fsdp_config` mapping (inline, or a JSON file it
// names), each key a row of the tables below (rows.hpp).
//
// Sources: transformers trainer_utils.py (FSDPOption), training_args.py
// (fsdp_config, _process_fsdp_args); accelerate utils/dataclasses.py
// (FullyShardedDataParallelPlugin).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan::launch {
namespace {

// ---- `fsdp`: "full_shard auto_wrap" or a list (FSDPOption) ----

struct FsdpWord {
  std::string_view word;
  std::string_view flag;  // "" for a word that changes nothing oomplan plans
  std::string_view value;
};

constexpr std::array k_fsdp_words = {
    FsdpWord{"full_shard", "--fsdp", ""},
    FsdpWord{"shard_grad_op", "--zero", "2"},
    // CPUOffload(offload_params=True) keeps parameters and gradients on the
    // CPU and steps the optimizer there.
    FsdpWord{"offload", "--offload", "all"},
    FsdpWord{"auto_wrap", "", ""},
    FsdpWord{"no_shard", "", ""},
};

void read_fsdp_words(KeyReader& keys, LaunchPlan& plan) {
  const auto words = keys.strings("fsdp");
  if (!words) {
    return;
  }
  for (const auto& w : *words) {
    const auto it =
        std::find_if(k_fsdp_words.begin(), k_fsdp_words.end(),
                     [&](const FsdpWord& f) { return f.word == w; });
    if (it != k_fsdp_words.end()) {
      if (!it->flag.empty()) {
        set_option(plan, std::string(it->flag), std::string(it->value), "fsdp");
      }
    } else if (w == "hybrid_shard" || w == "hybrid_shard_zero2") {
      keys.fail("fsdp", fmt::format("{} shards within a node and replicates "
                                    "across nodes, which is not modelled; "
                                    "use full_shard or shard_grad_op",
                                    w));
    } else {
      keys.fail("fsdp", fmt::format("{} is not an FSDP option; use "
                                    "full_shard, shard_grad_op, offload, "
                                    "auto_wrap",
                                    echo(w)));
    }
  }
}

// ---- `fsdp_config` ----

// The fsdp_config key being read: the rows are keyed by its name without
// the "fsdp_" prefix transformers strips (both spellings are read), and
// write `path`, the key as the file spells it.
struct FsdpConfig : Reading {
  std::string path = {};
  std::optional<std::int64_t> version = {};
  std::string version_key = {};
};
using Row = KeyRow<FsdpConfig>;

constexpr std::string_view k_transformers = "transformers training_args.py";
constexpr std::string_view k_accelerate = "accelerate utils/dataclasses.py";

void activation_checkpointing(FsdpConfig& s, const Row& /*row*/) {
  if (s.keys.boolean(s.path).value_or(false)) {
    set_fsdp_checkpointing(s.plan, s.path);
  }
}

void offload_params(FsdpConfig& s, const Row& /*row*/) {
  if (s.keys.boolean(s.path).value_or(false)) {
    set_option(s.plan, "--offload", "all", s.path);
  }
}

// FSDP2 fully_shard(reshard_after_forward=False) keeps the gathered
// parameters after forward: ZeRO-2 semantics.
void reshard_after_forward(FsdpConfig& s, const Row& /*row*/) {
  if (!s.keys.boolean(s.path).value_or(true)) {
    set_option(s.plan, "--zero", "2", s.path);
    erase_option(s.plan, "--fsdp");
  }
}

void sharding_strategy(FsdpConfig& s, const Row& /*row*/) {
  const auto strategy = s.keys.string(s.path).value_or("");
  if (strategy == "FULL_SHARD" || strategy == "1") {
    if (find_option(s.plan, "--fsdp") == nullptr) {
      set_option(s.plan, "--fsdp", "", s.path);
    }
  } else if (strategy == "SHARD_GRAD_OP" || strategy == "2") {
    set_option(s.plan, "--zero", "2", s.path);
    erase_option(s.plan, "--fsdp");
  } else if (strategy != "NO_SHARD" && strategy != "3") {
    s.keys.fail(s.path, fmt::format("{} is not modelled; use FULL_SHARD, "
                                    "SHARD_GRAD_OP or NO_SHARD",
                                    echo(strategy)));
  }
}

void refuse_xla(FsdpConfig& s, const Row& /*row*/) {
  if (s.keys.boolean(s.path).value_or(false)) {
    s.keys.fail(s.path, "PyTorch/XLA FSDP is not modelled");
  }
}

// fsdp_config["version"] becomes accelerate's
// FullyShardedDataParallelPlugin(fsdp_version=...).
void version(FsdpConfig& s, const Row& /*row*/) {
  s.version = s.keys.integer(s.path, 1, 2);
  s.version_key = s.path;
}

void unused_path(FsdpConfig& s, const Row& /*row*/) {
  s.keys.unused(s.path);
}

constexpr std::array k_fsdp_config_rows = {
    Row{"activation_checkpointing", activation_checkpointing, k_transformers},
    Row{"offload_params", offload_params, k_accelerate},
    Row{"cpu_offload", offload_params, k_accelerate},
    Row{"reshard_after_forward", reshard_after_forward, k_accelerate},
    Row{"sharding_strategy", sharding_strategy, k_accelerate},
    Row{"xla", refuse_xla, k_transformers},
    Row{"version", version, k_transformers},
    Row{"min_num_params", unused_path, k_transformers},
    Row{"transformer_layer_cls_to_wrap", unused_path, k_transformers},
    Row{"backward_prefetch", unused_path, k_transformers},
    Row{"forward_prefetch", unused_path, k_transformers},
    Row{"limit_all_gathers", unused_path, k_transformers},
    Row{"use_orig_params", unused_path, k_accelerate},
    Row{"sync_module_states", unused_path, k_transformers},
    Row{"cpu_ram_efficient_loading", unused_path, k_accelerate},
    Row{"state_dict_type", unused_path, k_accelerate},
    Row{"auto_wrap_policy", unused_path, k_accelerate},
    Row{"xla_fsdp_settings", unused_path, k_transformers},
    Row{"xla_fsdp_grad_ckpt", unused_path, k_transformers},
    Row{"final_state_dict_type", unused_path, k_accelerate},
    Row{"cpu_offload_pin_memory", unused_path, k_accelerate},
    Row{"mixed_precision_policy", unused_path, k_accelerate},
};

// Walks the mapping's keys in document order through the table; a key no
// row names stays unread, and finish() reports it as unknown.
void walk_fsdp_config(FsdpConfig& s, const Json& cfg, std::string_view base) {
  for (const auto& item : cfg.items()) {
    const std::string& k = item.key();
    const std::string bare = k.rfind("fsdp_", 0) == 0 ? k.substr(5) : k;
    const auto row =
        std::find_if(k_fsdp_config_rows.begin(), k_fsdp_config_rows.end(),
                     [&](const Row& r) { return r.key == bare; });
    if (row != k_fsdp_config_rows.end()) {
      s.path = join_path(base, k);
      row->set(s, *row);
    }
  }
}

// The keys of an fsdp_config file, under the file's name.
void report_file_keys(const KeyReader& file_keys, LaunchPlan& plan) {
  LaunchPlan sub;
  file_keys.finish(sub);
  for (auto& k : sub.unused_keys) {
    plan.unused_keys.push_back(fmt::format("{}: {}", file_keys.origin(), k));
  }
  for (auto& k : sub.unknown_keys) {
    plan.unknown_keys.push_back(fmt::format("{}: {}", file_keys.origin(), k));
  }
}

}  // namespace

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

void set_fsdp_checkpointing(LaunchPlan& plan, const std::string& key) {
  // checkpoint_wrapper, not gradient_checkpointing_enable: transformers'
  // configs default to use_cache=True and only the latter turns it off, so
  // the forward also keeps its KV cache.
  set_option(plan, "--checkpointing", "full", key);
  set_option(plan, "--use-cache", "true", key);
}

void read_hf_fsdp(KeyReader& keys, LaunchPlan& plan, const FileLoader& load) {
  read_fsdp_words(keys, plan);
  const Json* config = keys.peek("fsdp_config");
  if (config == nullptr) {
    keys.read("fsdp_config");  // present but null
    mark_fsdp_version(plan, std::nullopt, "");
    return;
  }
  if (config->is_object()) {
    FsdpConfig s{{keys, plan}};
    walk_fsdp_config(s, *config, "fsdp_config");
    mark_fsdp_version(plan, s.version, s.version_key);
    return;
  }
  if (!config->is_string()) {
    keys.fail("fsdp_config", fmt::format("expected a mapping or a JSON file, "
                                         "got {}",
                                         echo_json(*config)));
  }
  keys.read("fsdp_config");
  const std::string path = config->get<std::string>();
  const Json loaded =
      parse_json_text(load_named(keys, "fsdp_config", path, load), path);
  KeyReader file_keys(loaded, path);
  plan.included_files.push_back(path);
  FsdpConfig s{{file_keys, plan}};
  walk_fsdp_config(s, loaded, "");
  mark_fsdp_version(plan, s.version, s.version_key);
  report_file_keys(file_keys, plan);
}

}  // namespace oomplan::launch
