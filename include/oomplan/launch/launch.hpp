#pragma once

// Launch-config readers for `oomplan check` (DESIGN §2, schema
// oomplan.check/1): the files a team launches with (a `vllm serve` command
// line, a DeepSpeed JSON, Hugging Face TrainingArguments / TRL SFTConfig, an
// accelerate config, axolotl, torchtune and LLaMA-Factory recipes, and
// oomplan's own plan lists) turned into oomplan COMMAND-LINE OPTIONS.
//
// Readers do not build a Setup: each maps the file's keys to the contract's
// flag names and canonical values ({"--zero", "3"}, {"--offload",
// "optimizer"}, {"--enforce-eager", ""}), which the plan pipeline's option
// table parses exactly like the command line. Precedence, lowest first:
//   oomplan's defaults < framework_defaults < options (what the file states)
//   < options given explicitly on the command line.
//
// Every key of a file ends up in exactly one place: read (it became an option,
// the model, gpus or nodes), `unused_keys` (the reader knows it and it does not
// change memory), or `unknown_keys` (the reader does not know it; a warning).
// A key that changes memory with a value oomplan cannot express (an
// unsupported optimizer, a parallelism it does not model) throws Error
// "<file>: <key>: <problem>; <what is valid>" — never a silent default.
//
// Pure: text in, structs out. The caller reads the files; a FileLoader seam
// serves the files one file names (`deepspeed: ds_config.json`).

#include "oomplan/model/model.hpp"
#include "oomplan/plan/fix.hpp"
#include "oomplan/setup/setup.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomplan {

// One command-line option. `value` is "" for a flag without a value
// ("--enforce-eager", "--fsdp", "--compile"). A flag that a file turns off is
// not emitted (no option means off), so a default that is on is never
// cancelled by a file: no framework default is a flag that a file can turn
// off.
struct LaunchOption {
  std::string flag;   // "--zero"
  std::string value;  // "3"
  // The file key it came from ("zero_optimization.stage",
  // "ds_z3.json: zero_optimization.stage" when it came from another file),
  // or, in framework_defaults, why the framework does this and where its
  // source says so ("torchtune recipes load the model in `dtype` and keep no
  // fp32 copy (recipes/full_finetune_single_device.py)").
  std::string key;

  bool operator==(const LaunchOption&) const = default;
};

struct LaunchPlan {
  std::string file;    // origin, as given (the first file of a combined plan)
  std::string reader;  // vllm, deepspeed, hf-trainer, accelerate, axolotl,
                       // torchtune, llama-factory, plans (DESIGN §2)
  // Whose defaults framework_defaults holds: the reader's name, except "trl"
  // for an hf-trainer file that is a TRL SFTConfig (TRL changes the defaults).
  std::string framework;
  // Other files folded into this plan: the DeepSpeed JSON a `deepspeed:` key
  // names, an accelerate config given next to a training-args file, ...
  std::vector<std::string> included_files;

  // The model as the file names it: a Hugging Face id or a local path; empty
  // when the file names none (DeepSpeed, accelerate). `model_key` is the key.
  std::string model;
  std::string model_key;
  // Other spellings of the same model the file implies, best first, for when
  // `model` is a local folder that is not there (torchtune's
  // checkpointer.checkpoint_dir "/tmp/Meta-Llama-3.1-8B-Instruct/" also gives
  // "Meta-Llama-3.1-8B-Instruct" and the builder's "llama3.1-8b").
  std::vector<std::string> model_aliases;

  // GPUs per node the file implies (accelerate num_processes / num_machines,
  // vLLM tp x pp x dp, DeepSpeed train_batch_size / (micro x accumulation)),
  // and nodes (accelerate num_machines); nullopt when the file does not say.
  // A plans file states --gpus NxNAME in `options` and its count here.
  std::optional<int> gpus;
  std::optional<int> nodes;

  // What the framework does when the file is silent (framework_defaults of
  // `framework`, adjusted for this file: e.g. axolotl trains in pure bf16
  // unless DeepSpeed keeps fp32 master weights).
  std::vector<LaunchOption> framework_defaults;
  // What the file states; wins over framework_defaults. One entry per flag.
  std::vector<LaunchOption> options;

  std::vector<std::string> unused_keys;   // dotted paths, document order
  std::vector<std::string> unknown_keys;  // dotted paths, document order
  // Facts a user should see: "train_micro_batch_size_per_gpu is auto: the
  // HF Trainer fills it", "offload_param applies only at ZeRO stage 3".
  std::vector<std::string> notes;
};

// Serves a file that another file names (`deepspeed: ds_config.json`,
// `fsdp_config: fsdp.json`, accelerate's `deepspeed_config_file`). `path` is
// as written in the file; `from` is the origin of the file that names it (the
// CLI resolves the path against the working directory, then against `from`'s
// folder). nullopt: no such file (the reader then throws Error naming the
// key). The text is untrusted like any other.
using FileLoader = std::function<std::optional<std::string>(
    const std::string& path, const std::string& from)>;

struct LaunchFile {
  std::string origin;  // as given on the command line; used in messages
  std::string text;
};

// The largest launch config accepted (bytes); larger input is refused before
// parsing. Launch configs are a few KiB; this bounds parser time and memory.
inline constexpr std::size_t k_max_launch_file_bytes = 1U << 20;

// Reads the files of one `oomplan check` call into plans, in file order.
// Grouping: a file another file names (by `deepspeed:` etc.) is folded into
// that file's plan; a launcher file (DeepSpeed JSON, accelerate config) that
// no file names joins the nearest training file before it that has none of
// its kind ("args.yaml ds.json" is one plan, as `--deepspeed ds.json` would
// make it); otherwise every file is its own plan, and a plans file gives one
// plan per entry. A DeepSpeed "auto" is resolved from the training file it
// joins (as transformers' HfTrainerDeepSpeedConfig does), and a DeepSpeed
// value that contradicts the training file is an Error, as it is for the HF
// Trainer.
// Throws Error (one line naming the file and key) for anything it cannot read.
std::vector<LaunchPlan> read_launch_files(const std::vector<LaunchFile>& files,
                                          const FileLoader& load);

// One file alone (no grouping); for tests and fuzzing.
std::vector<LaunchPlan> read_launch_file(const LaunchFile& file,
                                         const FileLoader& load);

// What `oomplan plan --framework NAME` applies: the defaults of NAME (one of
// framework_names()) for a job in `mode` (--mode's value; empty: the
// framework's own default mode). Throws Error for an unknown name, listing
// the valid ones.
std::vector<LaunchOption> framework_defaults(std::string_view framework,
                                             std::string_view mode = {});

// What changes when a job of `framework` moves from mode `from` to `to`
// (LitGPT's lm_head split and QLoRA precision, axolotl's adapter precision):
// the defaults for `to` that the defaults for `from` do not hold. Empty for a
// name that is not one of framework_names().
std::vector<LaunchOption> framework_mode_changes(std::string_view framework,
                                                 std::string_view from,
                                                 std::string_view to);

// vllm, deepspeed, hf-trainer, trl, accelerate, axolotl, torchtune,
// llama-factory, torchtitan, litgpt.
std::vector<std::string_view> framework_names();

// vLLM's own flag spellings for `oomplan plan --engine vllm ...`:
// "--tensor-parallel-size" "4" -> {"--tp", "4"},
// "--gpu-memory-utilization" "0.8" -> {"--gpu-util", "0.8"},
// "--kv-cache-dtype" "fp8_e4m3" -> {"--kv-dtype", "fp8"},
// "--dtype" "half" -> {"--dtype", "fp16"}, "-q" "awq_marlin" -> {"--quant",
// "awq"}. `flag` may be "--flag=value" (then `value` must be empty) or use
// underscores. nullopt: not a vLLM flag that oomplan translates (the caller
// treats it as its own option or an unknown one). Throws Error for a vLLM
// flag with a value oomplan cannot express ("--kv-cache-dtype fp8_inc").
// `takes_value` tells the caller whether the flag consumes the next word.
std::optional<LaunchOption> translate_vllm_flag(std::string_view flag,
                                                std::string_view value);
bool vllm_flag_takes_value(std::string_view flag);

// ---- Writers: a resolved setup -> the launch files of one framework ----
//
// What write_launch() gives: the blocks to paste (complete settings, not a
// diff: every setting that changes memory is written, so the files read back
// through read_launch_files() and check_setup() plan the same setup), and the
// settings the framework cannot express ("activation offload: the HF Trainer
// has none (TRL: activation_offloading)"). When `unwritten` is not empty the
// blocks do not run that setup: the advisor must not offer them as its
// launch.
struct LaunchWriting {
  std::vector<LaunchBlock> blocks;
  std::vector<std::string> unwritten;
};

// The launch blocks of `framework` for `setup` (resolved) of `model`.
// Settings of the run rather than of a launch file (the card, --vllm-version,
// --overhead-gib, --reserve, --min-headroom, --host-ram, --price, and for
// inference the workload's --seq and --batch) are not written. vllm,
// deepspeed, hf-trainer, trl, accelerate, torchtune, axolotl and
// llama-factory write files their reader reads back; generate and megatron
// write their arguments (no reader); torchtitan reports that no writer
// exists yet.
// True when torchtune ships model builders for this Hugging Face
// model_type (torchtune/models/: llama2-4, code_llama2, mistral, gemma,
// gemma2, qwen2, qwen2_5, qwen3, phi3, phi4); no recipe trains another.
bool torchtune_has_builder(std::string_view model_type);

LaunchWriting write_launch(Framework framework, const Resolved& setup,
                           const Model& model);

// Shell words of a command line: quotes ('...', "..."), backslash escapes and
// backslash-newline continuations, `#` comments; stops at the end of the
// first command (newline, `;`, `&&`, `|`). Throws Error on an unterminated
// quote. Exposed for tests.
std::vector<std::string> split_shell_words(std::string_view text,
                                           std::string_view origin);

}  // namespace oomplan
