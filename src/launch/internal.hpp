#pragma once

// Private to the launch readers: one tree type for JSON and YAML documents
// (nlohmann's ordered_json, so keys keep document order), bounded parsers for
// untrusted text, and KeyReader, which records which keys a reader used so that
// every key of a file is reported as read, unused or unknown.

#include "oomplan/launch/launch.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan::launch {

using Json = nlohmann::ordered_json;

// Limits on untrusted documents, checked before and while parsing.
inline constexpr int k_max_depth = 64;         // nesting of mappings/lists
inline constexpr long k_max_values = 100'000;  // values after YAML aliases
inline constexpr int k_max_yaml_documents =
    64;  // "---" separated, empty ones too
inline constexpr std::size_t k_max_echo = 60;  // characters of user text
// The most GPUs one node holds (HGX/DGX boards of 8): a command line's larger
// engine spans nodes.
inline constexpr std::int64_t k_node_gpus = 8;

// Refuses text that is too large, holds NUL bytes or is not UTF-8.
void check_text(std::string_view text, const std::string& origin);
// Parse a JSON / YAML document (bounded). Throws Error "<origin>: ...".
// `repeated`, when given, receives the dotted paths of the keys an object
// repeats (at most k_max_repeated_keys); the value kept is the last, as
// Python's json.load and PyYAML keep it.
inline constexpr std::size_t k_max_repeated_keys = 16;
Json parse_json_text(std::string_view text, const std::string& origin,
                     std::vector<std::string>* repeated = nullptr);
Json parse_yaml_text(std::string_view text, const std::string& origin,
                     std::vector<std::string>* repeated = nullptr);
// DeepSpeed's loader refuses a repeated key (runtime/config.py
// dict_raise_error_on_duplicate_keys): an Error naming the first.
void refuse_repeated_keys(const std::vector<std::string>& repeated,
                          std::string_view origin);

// User text for a message: quoted, control characters escaped, long text cut.
std::string echo(std::string_view text);
std::string echo_json(const Json& value);

// "base.key", or "key" when base is empty.
std::string join_path(std::string_view base, std::string_view key);
// ASCII lower case (framework names compared without case).
std::string lower(std::string_view s);

// A whole number in [lo, hi] in decimal; nullopt otherwise (no exceptions).
std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t lo,
                                      std::int64_t hi);
std::optional<double> parse_double(std::string_view text);
// "4" for integral values, else the shortest round-trip text ("0.85").
std::string number_text(double value);

// Reads one document. Every lookup marks the key; finish() reports the rest.
class KeyReader {
 public:
  KeyReader(const Json& doc, std::string origin);

  const std::string& origin() const { return m_origin; }
  const Json& doc() const { return m_doc; }

  // The value at a dotted path ("zero_optimization.stage"), or nullptr when
  // absent or null; marks the path as read (memory-relevant) when present.
  const Json* read(std::string_view path);
  // Peeks without marking.
  const Json* peek(std::string_view path) const;
  bool has(std::string_view path) const { return peek(path) != nullptr; }
  // Marks keys the reader knows and that do not change memory.
  void unused(std::string_view path);
  void unused(std::initializer_list<std::string_view> paths);
  // Marks every key under `path` (an object) that is not marked yet.
  void unused_children(std::string_view path);

  // Typed reads: nullopt when absent or null; Error when of the wrong type.
  std::optional<bool> boolean(std::string_view path);
  std::optional<std::int64_t> integer(std::string_view path, std::int64_t lo,
                                      std::int64_t hi);
  std::optional<double> number(std::string_view path, double lo, double hi);
  std::optional<std::string> string(std::string_view path);
  // A string or a list of strings (YAML lists, or "a,b" / "a b" strings).
  std::optional<std::vector<std::string>> strings(std::string_view path);
  // True when the value is the string "auto" (DeepSpeed, HF, axolotl).
  bool is_auto(std::string_view path) const;

  [[noreturn]] void fail(std::string_view path, std::string_view problem) const;

  // Fills plan.unused_keys / plan.unknown_keys in document order.
  void finish(LaunchPlan& plan, std::string_view prefix = "") const;

 private:
  enum class Mark { read, unused };
  void mark(std::string_view path, Mark how);
  void walk(const Json& node, const std::string& path, LaunchPlan& plan,
            std::string_view prefix) const;
  bool marked_below(const std::string& path) const;

  const Json& m_doc;
  std::string m_origin;
  std::map<std::string, Mark, std::less<>> m_marks;
};

// Readers (one per format, each in its own file: vllm.cpp, deepspeed.cpp,
// hf_trainer.cpp, accelerate.cpp, axolotl.cpp, torchtune.cpp,
// llama_factory.cpp, plans.cpp; the key tables' machinery is rows.hpp). Each
// fills plan.options / model / gpus / notes; the caller calls finish().
enum class Format {
  vllm,
  deepspeed,
  hf_trainer,
  accelerate,
  axolotl,
  torchtune,
  llama_factory,
  litgpt,
  plans,
};
std::string_view format_name(Format format);

// What the DeepSpeed reader found, for merging into a training file's plan.
struct DeepSpeedFacts {
  std::optional<std::int64_t> micro_batch;  // nullopt: absent or auto
  std::optional<std::int64_t> grad_accum;
  std::optional<std::int64_t> train_batch;
  std::optional<bool> bf16;  // nullopt: absent or auto
  std::optional<bool> fp16;
  bool micro_batch_auto = false;
  bool grad_accum_auto = false;
  bool bf16_auto = false;
  bool fp16_auto = false;
  int stage = 0;
};

// A DeepSpeed config given next to a training file that does not name one
// ("oomplan check args.yaml ds.json").
struct Attached {
  const Json* deepspeed = nullptr;
  std::string deepspeed_origin;
};

// One command of a shell file: its words and the line it starts on.
struct ShellCommand {
  std::vector<std::string> words;
  std::int64_t line = 1;
};
// Shell words of every command in `text` (quotes, backslash continuations,
// comments; `;`, `|`, `&` and newlines end a command). Error naming `origin`
// and the line when a quote is not closed.
std::vector<ShellCommand> split_commands(std::string_view text,
                                         std::string_view origin);
// NAME=value assignments (a command's environment).
bool is_assignment(const std::string& w);
// The index of the program in a command's words, past environment
// assignments and the launchers exec, nohup, env, time, uvx, sudo and `uv
// run`; the assignments go to `env` when given.
std::size_t program_index(const std::vector<std::string>& words,
                          std::vector<std::string>* env);

// The first `vllm serve` command of `text` (a probe for format detection).
void read_vllm(std::string_view text, LaunchPlan& plan);
// Every vLLM server command of `text` (vllm serve, python -m ...api_server,
// docker run vllm/vllm-openai), one plan each, copied from `base`; named
// "FILE:LINE" when there are several.
std::vector<LaunchPlan> read_vllm_commands(std::string_view text,
                                           const LaunchPlan& base);
// A docker compose file: one plan per service whose command runs vLLM (the
// vllm/vllm-openai image's arguments, or `vllm serve ...`), named
// "FILE: services.NAME".
std::vector<LaunchPlan> read_compose(const Json& doc, const LaunchPlan& base);
DeepSpeedFacts read_deepspeed(KeyReader& keys, LaunchPlan& plan);
// The options a DeepSpeed config states when it is a plan of its own.
void deepspeed_own_options(const DeepSpeedFacts& facts, LaunchPlan& plan);
void read_hf_trainer(KeyReader& keys, LaunchPlan& plan, const FileLoader& load,
                     const Attached& attached);
void read_accelerate(KeyReader& keys, LaunchPlan& plan, const FileLoader& load);
void read_axolotl(KeyReader& keys, LaunchPlan& plan, const FileLoader& load,
                  const Attached& attached);
// `text` is the raw file: torchtune recipes name the Hugging Face id in their
// `tune download <id>` comment.
void read_torchtune(KeyReader& keys, LaunchPlan& plan, std::string_view text);
void read_llama_factory(KeyReader& keys, LaunchPlan& plan,
                        const FileLoader& load, const Attached& attached);
std::vector<LaunchPlan> read_plans(const Json& doc, const std::string& origin);
// LitGPT (litgpt.cpp). A finetune config's keys under `script`
// ("finetune_lora", "finetune_full", or "" when the keys say which).
void read_litgpt(KeyReader& keys, LaunchPlan& plan, std::string_view script);
// Whether `text` holds a `litgpt finetune*` (or pretrain) command.
bool has_litgpt_command(std::string_view text, std::string_view origin);
// The files its commands name with --config.
std::vector<std::string> litgpt_config_names(std::string_view text,
                                             std::string_view origin);
// One plan per `litgpt finetune_*` command of `text`, copied from `base`
// ("FILE:LINE" when there are several); --config files come from `load`.
std::vector<LaunchPlan> read_litgpt_commands(std::string_view text,
                                             const LaunchPlan& base,
                                             const FileLoader& load);
// Joins the framework's defaults (launch.cpp) with the reader's own
// adjustments, and drops the defaults the file's options replace.
void apply_framework_defaults(LaunchPlan& plan);

// Shared pieces of the training readers: DeepSpeed folding (deepspeed.cpp),
// names the HF-based readers share (hf_shared.cpp), FSDP (fsdp.cpp).
// Folds a DeepSpeed config (a path to load, or an inline object) into `plan`.
// `key` is the key that names it; `batch`, `grad_accum`, `bf16`, `fp16` are
// the training file's own values, which fill DeepSpeed's "auto".
struct TrainerValues {
  std::optional<std::int64_t> batch;
  std::optional<std::int64_t> grad_accum;
  bool bf16 = false;
  bool fp16 = false;
  std::string batch_key, grad_accum_key, precision_key;
};
void fold_deepspeed(KeyReader& keys, std::string_view key, LaunchPlan& plan,
                    const FileLoader& load, const TrainerValues& trainer);
// Folds a DeepSpeed document (a named file's or an attached one's) into
// `plan`; `prefix` goes before its keys in messages ("ds.json: ").
void fold_deepspeed_doc(const Json& doc, const std::string& origin,
                        const std::string& prefix, LaunchPlan& plan,
                        const TrainerValues& trainer);
void fold_trainer_deepspeed(KeyReader& keys, std::string_view key,
                            LaunchPlan& plan, const FileLoader& load,
                            const Attached& attached,
                            const TrainerValues& trainer);
void fold_deepspeed_facts(const DeepSpeedFacts& ds,
                          const std::string& ds_origin, LaunchPlan& plan,
                          const TrainerValues& trainer);
// Marks every TrainingArguments field that does not change memory.
void mark_hf_unused(KeyReader& keys);
// accelerator_config's sync_each_batch -> --fsdp-no-sync false.
void read_accelerator_config(KeyReader& keys, LaunchPlan& plan);
// PEFT target module names at `key` -> "q,v" / "all"; "" when absent.
std::string peft_targets(KeyReader& keys, std::string_view key);
// HF `optim` / axolotl `optimizer` names -> oomplan --optimizer; Error else.
std::string hf_optimizer(KeyReader& keys, std::string_view key,
                         std::string_view name);
// transformers attn_implementation -> --attn; Error else.
std::string hf_attention(KeyReader& keys, std::string_view key,
                         std::string_view name);
// HF `fsdp` (string or list) + `fsdp_config` (object or path).
void read_hf_fsdp(KeyReader& keys, LaunchPlan& plan, const FileLoader& load);
// FSDP activation checkpointing (`key` turned it on): FSDP's
// checkpoint_wrapper over every layer, which leaves the model's use_cache on.
void set_fsdp_checkpointing(LaunchPlan& plan, const std::string& key);
// --fsdp-version for a plan with --fsdp: `version` as read at `key`, else
// the default of transformers and accelerate, FSDP1.
void mark_fsdp_version(LaunchPlan& plan, std::optional<std::int64_t> version,
                       const std::string& key);
// Loads a file another file names; Error naming `key` when it is missing.
std::string load_named(const KeyReader& keys, std::string_view key,
                       const std::string& path, const FileLoader& load);

// Preference training (preference.cpp). The one refusal every reader gives
// for a training method oomplan does not model (PPO, GRPO and other online
// RL with generation, reward modelling): Error at `key` naming `method`.
[[noreturn]] void refuse_method(const KeyReader& keys, std::string_view key,
                                std::string_view method);
// --objective NAME (sft, dpo, orpo, kto, simpo) read at `key`; sft sets
// nothing.
void set_objective(LaunchPlan& plan, std::string_view objective,
                   std::string key);
// TRL's preference loss_type values (DPOConfig, CPOConfig, KTOConfig): the
// objective whose memory they have ("dpo", "simpo", "kto"), or "" when the
// name is none of them.
std::string_view trl_loss_objective(std::string_view loss_type);

// LoRA target module names (lora_modules.cpp). `targets` holds k_lora_*
// bits (setup.hpp): a fused module covers several.
struct LoraModule {
  std::string_view name;
  unsigned targets;
};
// The names a model_type's modeling file gives the projections (Llama's for
// the families that copy them).
std::span<const LoraModule> lora_modules_of(std::string_view model_type);
// The projections a target_modules name covers in any family; 0 for none.
unsigned lora_module_targets(std::string_view name);

// An optimizer class path (torch.optim, bitsandbytes.optim, torchao) ->
// oomplan --optimizer; nullopt when it is not modelled. k_optimizer_classes
// names the modelled ones for a refusal.
std::optional<std::string_view> optimizer_of_class(std::string_view c);
inline constexpr std::string_view k_optimizer_classes =
    "torch.optim.AdamW / Adam / SGD / Adafactor and bitsandbytes.optim "
    "AdamW8bit, PagedAdamW, PagedAdamW8bit";

// Options of `plan` (convenience).
void set_option(LaunchPlan& plan, std::string flag, std::string value,
                std::string key);
const LaunchOption* find_option(const LaunchPlan& plan, std::string_view flag);
void set_default(LaunchPlan& plan, std::string flag, std::string value,
                 std::string why);
void erase_option(LaunchPlan& plan, std::string_view flag);

}  // namespace oomplan::launch
