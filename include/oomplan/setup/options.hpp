#pragma once

// The option table: one row per plan option of DESIGN.md §2, in the order the
// report's setup line and the re-run command lines list them. CLI11
// registration and --help (src/cli), the re-run command line of every fix
// and fit plan (plan_argv), the report's setup line and the JSON `setup`
// object are all generated from it, and the launch-config readers hand it
// the option texts they read. Adding an option is one row here plus its use
// in the core.

#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/setup/setup.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace oomplan {

// The groups of --help and of the man page.
enum class OptionGroup { hardware, workload, training, serving, overrides };
std::string_view option_group_name(OptionGroup group);  // "Hardware", ...

// One value of the JSON `setup` object.
using SetupValue =
    std::variant<std::nullptr_t, bool, std::int64_t, double, std::string>;

// What a row prints from: the model and card of the plan, the setup as the
// user asked for it, and the same setup resolved.
struct OptionContext {
  const Model& model;
  const Gpu& gpu;
  const Setup& setup;
  const Resolved& resolved;
};

struct OptionRow {
  std::string_view flag;  // "--seq"; empty for a derived field (JSON only)
  std::string_view key;   // JSON key, and the key of a plan-list entry
  OptionGroup group;
  std::string_view value_name;  // "INT", "FLOAT", "NAME"; empty for a flag
  std::string_view help;
  std::string_view default_text;  // as --help shows it; empty: derived
  // Valid values of a NAME option (empty for the others).
  std::vector<std::string_view> (*choices)();
  // Stores `text` (empty for a flag given without a value) into `setup`.
  // Throws Error with the complete one-line message for a bad value.
  // nullptr: not parsed from text (--gpus needs the catalog).
  void (*parse)(Setup& setup, std::string_view text);
  // The option's words on the command line that plans `setup` again; empty
  // when the option is at its default (or derives to the same value).
  std::vector<std::string> (*args)(const OptionContext& context);
  // Its fragment of the report's setup line; empty for none.
  std::string (*describe)(const OptionContext& context);
  // Its value in the JSON `setup` object (resolved); nullptr: none.
  SetupValue (*json)(const OptionContext& context);
};

// Every row, in order.
std::span<const OptionRow> option_rows();

// The row with this flag ("--seq") or key ("seq"); nullptr when none.
const OptionRow* find_option(std::string_view flag_or_key);

// Parses one option given as text into `setup`, as the command line does:
// `name` is the flag ("--seq") or the key ("seq"). Throws Error for an
// unknown option (with a "did you mean") or a bad value.
void apply_option(Setup& setup, std::string_view name, std::string_view text);

// The edge's bounds (STYLE 4.2): inputs stay below them, so no byte count in
// the core overflows (10M tokens x 1M sequences x 100k GPUs stay far below
// 2^63 in each term the core computes).
inline constexpr std::int64_t k_max_seq = 10'000'000;
inline constexpr std::int64_t k_max_batch = 1'000'000;
inline constexpr std::int64_t k_max_gpus = 100'000;
inline constexpr std::int64_t k_max_lora_rank = 65'536;
inline constexpr std::int64_t k_max_grad_accum = 1'000'000;
inline constexpr std::int64_t k_max_num_seqs = 1'000'000;
inline constexpr double k_max_overhead_gib = 1024;
inline constexpr double k_max_price = 1'000'000;
inline constexpr double k_max_host_ram_gib = 1'048'576;  // 1 PiB per node

// Number parsing with the contract's messages ("--seq 'abc' is not a whole
// number", "--seq 0 is out of range; use 1 to 10000000 tokens"), shared by the
// rows and the commands' own options (fit's --top, ...).
std::int64_t parse_whole(std::string_view option, std::string_view text,
                         std::int64_t low, std::int64_t high,
                         std::string_view unit);
double parse_real(std::string_view option, std::string_view text);
// A flag's value: none or "true" is on, "false" off; anything else throws
// "--fsdp takes no value, got '256'".
bool parse_flag(std::string_view flag, std::string_view text);

// The command line after `oomplan` that plans `setup` for `model` on `gpu`
// again (DESIGN §2 fixes[].argv): MODEL, --gpus NxNAME, then every option the
// table prints, in table order. plan_args joins it for a POSIX shell.
std::vector<std::string> plan_argv(const std::string& model_arg,
                                   const Model& model, const Gpu& gpu,
                                   const Setup& setup);
std::string plan_args(const std::string& model_arg, const Model& model,
                      const Gpu& gpu, const Setup& setup);

}  // namespace oomplan
