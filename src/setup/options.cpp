#include "oomplan/setup/options.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/setup/resolve.hpp"
#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <system_error>

// The option table. Each row parses its text into the Setup the user asks
// for, prints the words that ask for it again (only when it differs from
// what it would derive to), describes itself in the setup line and gives
// its resolved value to the JSON `setup` object. The row order is the setup
// line's and the re-run command line's.

namespace oomplan {
namespace {

using Words = std::vector<std::string>;
using Names = std::vector<std::string_view>;

std::string join_names(const Names& names, std::string_view sep) {
  std::string out;
  for (const auto name : names) {
    if (!out.empty()) {
      out += sep;
    }
    out += name;
  }
  return out;
}

// CLI11's membership message, kept as the contract's text:
// "--dtype: fp12 not in {bf16,fp16,fp32}".
Names nf4_backend_names() {
  return {"bnb", "torchao"};
}

// --gptq-kernel's values: gptq_kernel_name() of every kernel but none.
Names gptq_kernel_names() {
  return {"exllama", "exllamav2", "marlin", "cuda-old", "torch", "triton"};
}

std::string_view nf4_backend_name(Nf4Backend b) {
  return b == Nf4Backend::bnb ? "bnb" : "torchao";
}

std::string_view choose(std::string_view flag, std::string_view text,
                        const Names& names) {
  for (const auto name : names) {
    if (name == text) {
      return name;
    }
  }
  throw Error(
      fmt::format("{}: {} not in {{{}}}", flag, text, join_names(names, ",")));
}

Words words(std::string_view flag, const std::string& value) {
  return {std::string(flag), value};
}

template <typename T>
Words words_of(std::string_view flag, T value) {
  return {std::string(flag), fmt::format("{}", value)};
}

Names dtypes() {
  return {"bf16", "fp16", "fp32"};
}
Names kv_dtypes() {
  return {"auto", "fp8", "fp16", "bf16"};
}
Names split_values() {
  return {"layers"};
}

// What `setup` resolves to with one field left to its default: a row prints
// its value only when that would differ.
template <typename Clear>
Resolved derived(const OptionContext& c, Clear clear) {
  Setup t = c.setup;
  clear(t);
  return resolve(c.model, c.gpu, t);
}

const Setup k_default{};

// clang-format off
const std::array k_rows = {
  OptionRow{
    "--gpus", "gpus", OptionGroup::hardware, "NxNAME",
    "GPUs per node and card (4xA100-80) or a cloud instance (p4de.24xlarge); "
    "absent: the fewest of each common GPU", "",
    nullptr, nullptr,
    [](const OptionContext& c) {
      return words("--gpus", fmt::format("{}x{}", c.setup.gpus, c.gpu.name));
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.gpus}}; }},
  OptionRow{
    "--nodes", "nodes", OptionGroup::hardware, "INT",
    "nodes, each with --gpus GPUs", "1", nullptr,
    [](Setup& s, std::string_view t) {
      s.nodes = static_cast<int>(parse_whole("--nodes", t, 1, k_max_gpus, "nodes"));
    },
    [](const OptionContext& c) {
      return c.setup.nodes != k_default.nodes ? words_of("--nodes", c.setup.nodes) : Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.nodes}}; }},
  OptionRow{
    "--host-ram", "host_ram_gib", OptionGroup::hardware, "GIB",
    "CPU RAM per node, GiB (offload must fit in it)", "the instance's, else unknown",
    nullptr,
    [](Setup& s, std::string_view t) {
      const double value = parse_real("--host-ram", t);
      if (value <= 0 || value > k_max_host_ram_gib) {
        throw Error(fmt::format("--host-ram {} is out of range; use more than 0 and up to {} GiB",
                                t, k_max_host_ram_gib));
      }
      s.host_ram_gib = value;
    },
    [](const OptionContext& c) {
      return c.setup.host_ram_gib ? words_of("--host-ram", *c.setup.host_ram_gib) : Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) {
      return c.setup.host_ram_gib ? SetupValue{*c.setup.host_ram_gib} : SetupValue{nullptr};
    }},
  OptionRow{
    "--mode", "mode", OptionGroup::workload, "NAME",
    "infer, full, lora or qlora", "infer", mode_names,
    [](Setup& s, std::string_view t) {
      s.mode = mode_from_name(choose("--mode", t, mode_names()));
    },
    [](const OptionContext& c) {
      return c.setup.mode != k_default.mode
                 ? words("--mode", std::string(mode_name(c.setup.mode))) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.training() ? std::string(mode_name(s.mode))
                          : fmt::format("{} ({})", mode_name(s.mode), engine_name(s.engine));
    },
    [](const OptionContext& c) { return SetupValue{std::string(mode_name(c.resolved.mode))}; }},
  OptionRow{
    "--engine", "engine", OptionGroup::workload, "NAME",
    "hf (transformers eager generate) or vllm", "hf", engine_names,
    [](Setup& s, std::string_view t) {
      s.engine = engine_from_name(choose("--engine", t, engine_names()));
    },
    [](const OptionContext& c) {
      return c.setup.engine != k_default.engine
                 ? words("--engine", std::string(engine_name(c.setup.engine))) : Words{};
    },
    [](const OptionContext&) { return std::string(); },  // in mode's fragment
    [](const OptionContext& c) { return SetupValue{std::string(engine_name(c.resolved.engine))}; }},
  OptionRow{
    "--seq", "seq", OptionGroup::workload, "INT",
    "tokens per sequence (prompt + generated, or training length)", "4096", nullptr,
    [](Setup& s, std::string_view t) { s.seq = parse_whole("--seq", t, 1, k_max_seq, "tokens"); },
    [](const OptionContext& c) {
      return c.setup.seq != k_default.seq ? words_of("--seq", c.setup.seq) : Words{};
    },
    [](const OptionContext& c) { return fmt::format("seq {}", c.resolved.seq); },
    [](const OptionContext& c) { return SetupValue{c.resolved.seq}; }},
  OptionRow{
    "--batch", "batch", OptionGroup::workload, "INT",
    "sequences per GPU step (training: micro-batch per DP rank)", "1", nullptr,
    [](Setup& s, std::string_view t) {
      s.batch = parse_whole("--batch", t, 1, k_max_batch, "sequences");
    },
    [](const OptionContext& c) {
      return c.setup.batch != k_default.batch ? words_of("--batch", c.setup.batch) : Words{};
    },
    [](const OptionContext& c) { return fmt::format("batch {}", c.resolved.batch); },
    [](const OptionContext& c) { return SetupValue{c.resolved.batch}; }},
  OptionRow{
    "--dtype", "dtype", OptionGroup::workload, "NAME",
    "compute dtype and unquantized weights", "bf16", dtypes,
    [](Setup& s, std::string_view t) {
      s.dtype = dtype_from_name(choose("--dtype", t, dtypes())).value_or(Dtype::bf16);
    },
    [](const OptionContext& c) {
      return c.setup.dtype != k_default.dtype
                 ? words("--dtype", std::string(dtype_name(c.setup.dtype))) : Words{};
    },
    [](const OptionContext& c) { return std::string(dtype_name(c.resolved.dtype)); },
    [](const OptionContext& c) { return SetupValue{std::string(dtype_name(c.resolved.dtype))}; }},
  OptionRow{
    "--quant", "quant", OptionGroup::workload, "NAME",
    "weight format (auto: the checkpoint's own; qlora: nf4)", "auto", quant_names,
    [](Setup& s, std::string_view t) {
      s.quant = quant_from_name(choose("--quant", t, quant_names())).value_or(Quant::automatic);
    },
    [](const OptionContext& c) {
      // `none` on a 16-bit checkpoint and nf4 in qlora are what auto gives.
      const Quant automatic =
          derived(c, [](Setup& t) { t.quant = Quant::automatic; }).quant;
      return c.setup.quant != Quant::automatic && c.setup.quant != automatic
                 ? words("--quant", std::string(quant_name(c.setup.quant))) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return fmt::format("weights {}", s.quant == Quant::none ? dtype_name(s.dtype)
                                                              : quant_name(s.quant));
    },
    [](const OptionContext& c) { return SetupValue{std::string(quant_name(c.resolved.quant))}; }},
  OptionRow{
    "--kv-dtype", "kv_dtype", OptionGroup::workload, "NAME",
    "KV cache dtype (auto = --dtype)", "auto", kv_dtypes,
    [](Setup& s, std::string_view t) {
      const auto name = choose("--kv-dtype", t, kv_dtypes());
      s.kv_dtype = name == "auto" ? std::nullopt : dtype_from_name(name);
    },
    [](const OptionContext& c) {
      return c.setup.kv_dtype ? words("--kv-dtype", std::string(dtype_name(*c.setup.kv_dtype)))
                              : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training() ? std::string()
                                   : fmt::format("kv {}", dtype_name(c.resolved.kv_dtype));
    },
    [](const OptionContext& c) { return SetupValue{std::string(dtype_name(c.resolved.kv_dtype))}; }},
  OptionRow{
    "--tp", "tp", OptionGroup::hardware, "INT",
    "tensor parallel size", "infer: GPUs per node / pp, train: 1", nullptr,
    [](Setup& s, std::string_view t) {
      s.tp = static_cast<int>(parse_whole("--tp", t, 1, k_max_gpus, ""));
    },
    [](const OptionContext& c) {
      const int automatic = derived(c, [](Setup& t) { t.tp.reset(); }).tp;
      return c.setup.tp && *c.setup.tp != automatic ? words_of("--tp", *c.setup.tp) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.split_layers ? std::string("split layers")
                            : fmt::format("tp {}, pp {}, dp {}", s.tp, s.pp, s.dp());
    },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.tp}}; }},
  OptionRow{
    "--pp", "pp", OptionGroup::hardware, "INT",
    "pipeline parallel size", "1", nullptr,
    [](Setup& s, std::string_view t) {
      s.pp = static_cast<int>(parse_whole("--pp", t, 1, k_max_gpus, ""));
    },
    [](const OptionContext& c) {
      return c.setup.pp != k_default.pp ? words_of("--pp", c.setup.pp) : Words{};
    },
    [](const OptionContext&) { return std::string(); },  // in tp's fragment
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.pp}}; }},
  OptionRow{
    "--cp", "cp", OptionGroup::hardware, "INT",
    "context parallel: the training sequence sharded over N GPUs (torchtitan)", "1", nullptr,
    [](Setup& s, std::string_view t) {
      s.cp = static_cast<int>(parse_whole("--cp", t, 1, k_max_gpus, "GPUs"));
    },
    [](const OptionContext& c) {
      return c.setup.cp != k_default.cp ? words_of("--cp", c.setup.cp) : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.cp > 1 ? fmt::format("cp {}", c.resolved.cp) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.cp}}; }},
  OptionRow{
    "", "dp", OptionGroup::hardware, "", "data parallel = GPUs / (tp x pp x cp)", "",
    nullptr, nullptr,
    [](const OptionContext&) { return Words{}; },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.dp()}}; }},
  OptionRow{
    "--split", "split_layers", OptionGroup::hardware, "NAME",
    "layers: whole layers per GPU (transformers device_map=\"auto\")", "", split_values,
    [](Setup& s, std::string_view t) {
      choose("--split", t, split_values());
      s.split_layers = true;
    },
    [](const OptionContext& c) {
      return c.setup.split_layers ? words("--split", "layers") : Words{};
    },
    [](const OptionContext&) { return std::string(); },  // in tp's fragment
    [](const OptionContext& c) { return SetupValue{c.resolved.split_layers}; }},
  OptionRow{
    "--sequence-parallel", "sequence_parallel", OptionGroup::hardware, "",
    "Megatron sequence parallelism (tp > 1)", "", nullptr,
    [](Setup& s, std::string_view t) { s.sequence_parallel = parse_flag("--sequence-parallel", t); },
    [](const OptionContext& c) {
      return c.setup.sequence_parallel ? Words{"--sequence-parallel"} : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.sequence_parallel ? std::string("sequence parallel") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.sequence_parallel}; }},
  OptionRow{
    "--zero", "zero", OptionGroup::training, "INT",
    "ZeRO stage 0-3 (training)", "0 (3 with --fsdp)", nullptr,
    [](Setup& s, std::string_view t) { s.zero = static_cast<int>(parse_whole("--zero", t, 0, 3, "")); },
    [](const OptionContext& c) {
      return !c.setup.fsdp && c.setup.zero && *c.setup.zero != 0 ? words_of("--zero", *c.setup.zero)
                                                                 : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      if (!s.training()) {
        return std::string();
      }
      if (s.fsdp) {
        return std::string(s.fsdp_version == 1 ? "fsdp1" : "fsdp");
      }
      return fmt::format("zero {}", s.zero);
    },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.zero}}; }},
  OptionRow{
    "--fsdp", "fsdp", OptionGroup::training, "",
    "FSDP FULL_SHARD (ZeRO-3 semantics)", "", nullptr,
    [](Setup& s, std::string_view t) { s.fsdp = parse_flag("--fsdp", t); },
    [](const OptionContext& c) { return c.setup.fsdp ? Words{"--fsdp"} : Words{}; },
    [](const OptionContext&) { return std::string(); },  // in zero's fragment
    [](const OptionContext& c) { return SetupValue{c.resolved.fsdp}; }},
  OptionRow{
    "--fsdp-version", "fsdp_version", OptionGroup::training, "INT",
    "with --fsdp: 1 FullyShardedDataParallel (flat parameters, HF Trainer and "
    "accelerate) or 2 fully_shard (torchtune, torchtitan)", "2", nullptr,
    [](Setup& s, std::string_view t) {
      s.fsdp_version = static_cast<int>(parse_whole("--fsdp-version", t, 1, 2, ""));
    },
    [](const OptionContext& c) {
      return c.setup.fsdp && c.setup.fsdp_version &&
                     *c.setup.fsdp_version != k_default_fsdp_version
                 ? words_of("--fsdp-version", *c.setup.fsdp_version) : Words{};
    },
    [](const OptionContext&) { return std::string(); },  // in zero's fragment
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.fsdp_version}}; }},
  OptionRow{
    "--precision", "precision", OptionGroup::training, "NAME",
    "training: mixed (fp32 master + states), pure (all in --dtype) or amp (fp32 params under autocast)", "mixed", precision_names,
    [](Setup& s, std::string_view t) {
      s.precision = precision_from_name(choose("--precision", t, precision_names()));
    },
    [](const OptionContext& c) {
      return c.setup.precision != k_default.precision
                 ? words("--precision", std::string(precision_name(c.setup.precision))) : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training()
                 ? fmt::format("{} precision", precision_name(c.resolved.precision))
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(precision_name(c.resolved.precision))}; }},
  OptionRow{
    "--optimizer", "optimizer", OptionGroup::training, "NAME",
    "training optimizer", "adamw", optimizer_names,
    [](Setup& s, std::string_view t) {
      s.optimizer = optimizer_from_name(choose("--optimizer", t, optimizer_names()));
    },
    [](const OptionContext& c) {
      return c.setup.optimizer != k_default.optimizer
                 ? words("--optimizer", std::string(optimizer_name(c.setup.optimizer))) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      if (!s.training()) {
        return std::string();
      }
      return fmt::format("{}{}", optimizer_name(s.optimizer),
                         s.optimizer_in_bwd ? " in backward" : "");
    },
    [](const OptionContext& c) { return SetupValue{std::string(optimizer_name(c.resolved.optimizer))}; }},
  OptionRow{
    "--optimizer-in-bwd", "optimizer_in_bwd", OptionGroup::training, "",
    "optimizer step fused into backward (no full gradient buffer)", "", nullptr,
    [](Setup& s, std::string_view t) { s.optimizer_in_bwd = parse_flag("--optimizer-in-bwd", t); },
    [](const OptionContext& c) {
      return c.setup.optimizer_in_bwd ? Words{"--optimizer-in-bwd"} : Words{};
    },
    [](const OptionContext&) { return std::string(); },  // in optimizer's fragment
    [](const OptionContext& c) { return SetupValue{c.resolved.optimizer_in_bwd}; }},
  OptionRow{
    "--lora-rank", "lora_rank", OptionGroup::training, "INT", "LoRA rank", "16", nullptr,
    [](Setup& s, std::string_view t) {
      s.lora_rank = static_cast<int>(parse_whole("--lora-rank", t, 1, k_max_lora_rank, ""));
    },
    [](const OptionContext& c) {
      const bool lora = c.setup.mode == Mode::lora || c.setup.mode == Mode::qlora;
      return lora && c.setup.lora_rank != k_default.lora_rank
                 ? words_of("--lora-rank", c.setup.lora_rank) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.mode == Mode::lora || s.mode == Mode::qlora
                 ? fmt::format("lora rank {} on {}", s.lora_rank, lora_targets_text(s.lora_targets))
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.lora_rank}}; }},
  OptionRow{
    "--lora-targets", "lora_targets", OptionGroup::training, "LIST",
    "qv, attn, all or a comma list of q,k,v,o,gate,up,down", "all", nullptr,
    [](Setup& s, std::string_view t) {
      s.lora_targets = lora_targets_from_text(t);
      if (s.lora_targets == 0) {
        throw Error(fmt::format(
            "--lora-targets '{}' is not a target list; use qv, attn, all or a "
            "comma list of {}",
            t, join_names(lora_target_names(), ",")));
      }
    },
    [](const OptionContext& c) {
      const bool lora = c.setup.mode == Mode::lora || c.setup.mode == Mode::qlora;
      return lora && c.setup.lora_targets != k_default.lora_targets
                 ? words("--lora-targets", lora_targets_text(c.setup.lora_targets)) : Words{};
    },
    [](const OptionContext&) { return std::string(); },  // in lora-rank's fragment
    [](const OptionContext& c) { return SetupValue{lora_targets_text(c.resolved.lora_targets)}; }},
  OptionRow{
    "--lora-dropout", "lora_dropout", OptionGroup::training, "FLOAT",
    "LoRA dropout probability: above 0 each adapted projection keeps a dropped copy of its input and a 1-byte mask", "0", nullptr,
    [](Setup& s, std::string_view t) {
      const double value = parse_real("--lora-dropout", t);
      if (!(value >= 0 && value < 1)) {
        throw Error(fmt::format(
            "--lora-dropout {} is out of range; use a probability from 0 up to (not including) 1, e.g. 0.05", t));
      }
      s.lora_dropout = value;
    },
    [](const OptionContext& c) {
      const bool lora = c.setup.mode == Mode::lora || c.setup.mode == Mode::qlora;
      return lora && c.setup.lora_dropout != k_default.lora_dropout
                 ? words_of("--lora-dropout", c.setup.lora_dropout) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return (s.mode == Mode::lora || s.mode == Mode::qlora) && s.lora_dropout > 0
                 ? fmt::format("lora dropout {}", s.lora_dropout)
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.lora_dropout}; }},
  OptionRow{
    "--untied-head", "untied_head", OptionGroup::training, "",
    "the output head is its own copy of a tied embedding (LitGPT: no weight tying)", "", nullptr,
    [](Setup& s, std::string_view t) { s.untied_head = parse_flag("--untied-head", t); },
    [](const OptionContext& c) {
      return c.setup.untied_head ? Words{"--untied-head"} : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.untied_head ? std::string("untied head") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.untied_head}; }},
  OptionRow{
    "--checkpointing", "checkpointing", OptionGroup::training, "NAME",
    "activation checkpointing: none, selective (Megatron), every-N (every Nth layer), op (torchtitan per-op), full, ds-partition or ds-cpu (DeepSpeed)", "none", checkpointing_names,
    [](Setup& s, std::string_view t) {
      constexpr std::string_view k_every = "every-";
      if (t.substr(0, k_every.size()) == k_every) {
        s.checkpoint_every = static_cast<int>(
            parse_whole("--checkpointing every-N", t.substr(k_every.size()), 1, 1'000, "layers"));
        s.checkpointing = Checkpointing::every;
        return;
      }
      s.checkpointing = checkpointing_from_name(choose("--checkpointing", t, checkpointing_names()));
    },
    [](const OptionContext& c) {
      return c.setup.checkpointing != k_default.checkpointing
                 ? words("--checkpointing", checkpointing_text(c.setup.checkpointing, c.setup.checkpoint_every))
                 : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training()
                 ? fmt::format("checkpointing {}", checkpointing_text(c.resolved.checkpointing, c.resolved.checkpoint_every))
                 : std::string();
    },
    [](const OptionContext& c) {
      return SetupValue{checkpointing_text(c.resolved.checkpointing, c.resolved.checkpoint_every)};
    }},
  OptionRow{
    "--grad-accum", "grad_accum", OptionGroup::training, "INT",
    "gradient accumulation steps", "1", nullptr,
    [](Setup& s, std::string_view t) {
      s.grad_accum = static_cast<int>(parse_whole("--grad-accum", t, 1, k_max_grad_accum, "steps"));
    },
    [](const OptionContext& c) {
      return c.setup.grad_accum != k_default.grad_accum ? words_of("--grad-accum", c.setup.grad_accum)
                                                        : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.grad_accum > 1
                 ? fmt::format("grad-accum {}", c.resolved.grad_accum) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::int64_t{c.resolved.grad_accum}}; }},
  OptionRow{
    "--fsdp-no-sync", "fsdp_no_sync", OptionGroup::training, "",
    "with --fsdp and --grad-accum: micro-batches before the last skip the reduce-scatter (no_sync), so each GPU keeps unsharded gradients (HF Trainer, accelerate, Lightning)", "", nullptr,
    [](Setup& s, std::string_view t) { s.fsdp_no_sync = parse_flag("--fsdp-no-sync", t); },
    [](const OptionContext& c) {
      return c.resolved.fsdp_no_sync ? Words{"--fsdp-no-sync"} : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.fsdp_no_sync ? std::string("no_sync accumulation") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.fsdp_no_sync}; }},
  OptionRow{
    "--nf4-backend", "nf4_backend", OptionGroup::training, "NAME",
    "QLoRA's NF4 matmul: bnb (bitsandbytes MatMul4Bit, saves each frozen projection's input: PEFT, LitGPT) or torchao (linear_nf4: torchtune)", "", nf4_backend_names,
    [](Setup& s, std::string_view t) {
      s.nf4_backend = choose("--nf4-backend", t, nf4_backend_names()) == "bnb"
                          ? Nf4Backend::bnb : Nf4Backend::torchao;
    },
    [](const OptionContext& c) {
      return c.setup.nf4_backend && c.resolved.mode == Mode::qlora
                 ? words("--nf4-backend", std::string(nf4_backend_name(*c.setup.nf4_backend))) : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.mode == Mode::qlora
                 ? fmt::format("nf4 {}", nf4_backend_name(c.resolved.nf4_backend)) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(nf4_backend_name(c.resolved.nf4_backend))}; }},
  OptionRow{
    "--use-cache", "use_cache", OptionGroup::training, "",
    "training: transformers' forward keeps its KV cache (use_cache=True under FSDP or llama-recipes activation checkpointing; gradient_checkpointing_enable turns it off)", "", nullptr,
    [](Setup& s, std::string_view t) { s.use_cache = parse_flag("--use-cache", t); },
    [](const OptionContext& c) {
      return c.resolved.use_cache ? Words{"--use-cache"} : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.use_cache ? std::string("use_cache") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.use_cache}; }},
  OptionRow{
    "--fsdp-frozen-grads", "fsdp_frozen_grads", OptionGroup::training, "",
    "LoRA under --fsdp-version 1: adapters flattened with their frozen layer (use_orig_params=True), so the whole layer gets gradients (LitGPT <= 0.5.7)", "", nullptr,
    [](Setup& s, std::string_view t) { s.fsdp_frozen_grads = parse_flag("--fsdp-frozen-grads", t); },
    [](const OptionContext& c) {
      return c.setup.fsdp_frozen_grads ? Words{"--fsdp-frozen-grads"} : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.fsdp_frozen_grads ? std::string("frozen-weight grads") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.fsdp_frozen_grads}; }},
  OptionRow{
    "--objective", "objective", OptionGroup::training, "NAME",
    "training objective: sft, or preference training dpo, orpo, kto or simpo (chosen and rejected sequences; dpo and kto full fine-tuning hold a frozen reference model)", "sft", objective_names,
    [](Setup& s, std::string_view t) {
      s.objective = objective_from_name(choose("--objective", t, objective_names()));
    },
    [](const OptionContext& c) {
      return c.setup.objective != k_default.objective
                 ? words("--objective", std::string(objective_name(c.setup.objective)))
                 : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.objective != TrainObjective::sft
                 ? std::string(objective_name(c.resolved.objective)) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(objective_name(c.resolved.objective))}; }},
  OptionRow{
    "--precompute-ref", "precompute_ref", OptionGroup::training, "",
    "dpo/kto: reference log-probs computed before training (TRL precompute_ref_log_probs), no reference model held", "", nullptr,
    [](Setup& s, std::string_view t) { s.precompute_ref = parse_flag("--precompute-ref", t); },
    [](const OptionContext& c) { return c.setup.precompute_ref ? Words{"--precompute-ref"} : Words{}; },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.precompute_ref &&
                     c.resolved.objective != TrainObjective::sft
                 ? std::string("precomputed reference") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.precompute_ref}; }},
  OptionRow{
    "--loss", "loss", OptionGroup::training, "NAME",
    "cross-entropy: full (fp32 logits kept), chunked, upcast, upcast-shift or fp32-shift (transformers by version)", "full", loss_names,
    [](Setup& s, std::string_view t) { s.loss = loss_from_name(choose("--loss", t, loss_names())); },
    [](const OptionContext& c) {
      return c.setup.loss != k_default.loss ? words("--loss", std::string(loss_name(c.setup.loss)))
                                            : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.loss != Loss::full
                 ? fmt::format("{} loss", loss_name(c.resolved.loss)) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(loss_name(c.resolved.loss))}; }},
  OptionRow{
    "--activation-offload", "activation_offload", OptionGroup::training, "",
    "activations moved to CPU RAM during forward", "", nullptr,
    [](Setup& s, std::string_view t) { s.activation_offload = parse_flag("--activation-offload", t); },
    [](const OptionContext& c) {
      return c.setup.activation_offload ? Words{"--activation-offload"} : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.activation_offload
                 ? std::string("activation offload") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.activation_offload}; }},
  OptionRow{
    "--compile", "compile", OptionGroup::training, "", "torch.compile on", "", nullptr,
    [](Setup& s, std::string_view t) { s.compile = parse_flag("--compile", t); },
    [](const OptionContext& c) { return c.setup.compile ? Words{"--compile"} : Words{}; },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.compile ? std::string("compiled") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.compile}; }},
  OptionRow{
    "--float8", "float8", OptionGroup::training, "",
    "torchao float8 linears (torchtitan converters float8)", "", nullptr,
    [](Setup& s, std::string_view t) { s.float8 = parse_flag("--float8", t); },
    [](const OptionContext& c) { return c.setup.float8 ? Words{"--float8"} : Words{}; },
    [](const OptionContext& c) {
      return c.resolved.training() && c.resolved.float8 ? std::string("float8") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.float8}; }},
  OptionRow{
    "--prepare-kbit", "prepare_kbit", OptionGroup::training, "",
    "QLoRA: PEFT prepare_model_for_kbit_training (fp32 norms, embeddings, lm_head)", "", nullptr,
    [](Setup& s, std::string_view t) { s.prepare_kbit = parse_flag("--prepare-kbit", t); },
    [](const OptionContext& c) { return c.setup.prepare_kbit ? Words{"--prepare-kbit"} : Words{}; },
    [](const OptionContext& c) {
      return c.resolved.prepare_kbit ? std::string("fp32 upcast (prepare_model_for_kbit_training)")
                                     : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.prepare_kbit}; }},
  OptionRow{
    "--offload", "offload", OptionGroup::training, "NAME",
    "to CPU RAM: none, optimizer, params or all", "none", offload_names,
    [](Setup& s, std::string_view t) {
      s.offload = offload_from_name(choose("--offload", t, offload_names()));
    },
    [](const OptionContext& c) {
      return c.setup.offload != k_default.offload
                 ? words("--offload", std::string(offload_name(c.setup.offload))) : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.offload != Offload::none
                 ? fmt::format("offload {}", offload_name(c.resolved.offload)) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(offload_name(c.resolved.offload))}; }},
  OptionRow{
    "--attn", "attn", OptionGroup::workload, "NAME",
    "attention kernel: eager, sdpa or flash", "flash", attn_names,
    [](Setup& s, std::string_view t) { s.attn = attn_from_name(choose("--attn", t, attn_names())); },
    [](const OptionContext& c) {
      return c.setup.attn != k_default.attn ? words("--attn", std::string(attn_name(c.setup.attn)))
                                            : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::hf || s.training() ? fmt::format("attn {}", attn_name(s.attn))
                                                    : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(attn_name(c.resolved.attn))}; }},
  OptionRow{
    "--transformers-version", "transformers_version", OptionGroup::workload, "X.Y",
    "transformers release that runs generate (engine hf: before 4.45 the prefill's logits "
    "cover every position in fp32; before 4.42 decoding holds two copies of the KV cache)",
    "5.17", nullptr,
    [](Setup& s, std::string_view t) {
      const auto release = release_from_text(t);
      if (!release) {
        throw Error(fmt::format(
            "--transformers-version '{}' is not a version; use X.Y such as 4.41 or 4.46", t));
      }
      s.transformers_release = *release;
    },
    [](const OptionContext& c) {
      return c.setup.transformers_release && c.setup.engine == Engine::hf && !c.setup.training() &&
                     *c.setup.transformers_release != k_transformers_default
                 ? words("--transformers-version", release_text(*c.setup.transformers_release))
                 : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::hf && !s.training() &&
                     s.transformers_release != k_transformers_default
                 ? fmt::format("transformers {}", release_text(s.transformers_release))
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{release_text(c.resolved.transformers_release)}; }},
  OptionRow{
    "--torchtitan-version", "torchtitan_version", OptionGroup::workload, "X.Y",
    "torchtitan release (training): before 0.1 (#1033) torch.compile covers each "
    "TransformerBlock only and the loss runs eager",
    "0.2.2", nullptr,
    [](Setup& s, std::string_view t) {
      const auto release = release_from_text(t);
      if (!release) {
        throw Error(fmt::format(
            "--torchtitan-version '{}' is not a version; use X.Y such as 0.0 or 0.2.2", t));
      }
      s.torchtitan_release = *release;
    },
    [](const OptionContext& c) {
      return c.setup.torchtitan_release && c.setup.training() &&
                     *c.setup.torchtitan_release != k_torchtitan_default
                 ? words("--torchtitan-version", release_text(*c.setup.torchtitan_release))
                 : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.training() && s.torchtitan_release != k_torchtitan_default
                 ? fmt::format("torchtitan {}", release_text(s.torchtitan_release))
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{release_text(c.resolved.torchtitan_release)}; }},
  OptionRow{
    "--litgpt-version", "litgpt_version", OptionGroup::workload, "X.Y.Z",
    "LitGPT release (--framework litgpt): from 0.5.0 QLoRA trains a StableEmbedding outside the "
    "optimizer; on several GPUs LoRA shards Blocks with FSDP1 before 0.5.11 (adapters flattened "
    "with their Block before 0.5.8), FSDP2 from 0.5.11",
    "0.5.13", nullptr,
    [](Setup& s, std::string_view t) {
      const auto release = release_from_text(t);
      if (!release) {
        throw Error(fmt::format(
            "--litgpt-version '{}' is not a version; use X.Y.Z such as 0.4.13 or 0.5.13", t));
      }
      s.litgpt_release = *release;
    },
    [](const OptionContext& c) {
      // LitGPT's layouts follow its scripts, not options (resolve.cpp
      // resolve_litgpt): a re-run names the framework.
      if (c.setup.framework != Framework::litgpt) {
        return Words{};
      }
      Words out = words("--framework", "litgpt");
      if (c.setup.litgpt_release && *c.setup.litgpt_release != k_litgpt_default) {
        const Words version = words("--litgpt-version", release_text(*c.setup.litgpt_release));
        out.insert(out.end(), version.begin(), version.end());
      }
      return out;
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return c.setup.framework == Framework::litgpt && s.training() &&
                     s.litgpt_release != k_litgpt_default
                 ? fmt::format("litgpt {}", release_text(s.litgpt_release))
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{release_text(c.resolved.litgpt_release)}; }},
  OptionRow{
    "--lm-head-chunk", "lm_head_chunk", OptionGroup::training, "INT",
    "training: tokens of the sequence per lm_head call (LitGPT finetune_lora "
    "lm_head_chunk_size=128); under amp each call saves its own 16-bit copy of a frozen head; "
    "0: one call",
    "0", nullptr,
    [](Setup& s, std::string_view t) {
      s.lm_head_chunk = parse_whole("--lm-head-chunk", t, 0, k_max_seq, "tokens");
    },
    [](const OptionContext& c) {
      return c.setup.lm_head_chunk > 0 && c.setup.training()
                 ? words_of("--lm-head-chunk", c.setup.lm_head_chunk)
                 : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.lm_head_chunk > 0
                 ? fmt::format("lm_head per {} tokens", c.resolved.lm_head_chunk)
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.lm_head_chunk}; }},
  OptionRow{
    "--awq-fused-len", "awq_fused_len", OptionGroup::workload, "INT",
    "AutoAWQ fused layers (engine hf, AWQ weights): tokens of the fp16 K/V cache each layer "
    "allocates at load, batch x INT (from_quantized(fuse_layers=True, max_seq_len=INT), whose "
    "default is max_position_embeddings; AwqConfig(do_fuse=True, fuse_max_seq_len=INT)); 0: unfused",
    "0", nullptr,
    [](Setup& s, std::string_view t) {
      s.awq_fused_len = parse_whole("--awq-fused-len", t, 0, k_max_seq, "tokens");
    },
    [](const OptionContext& c) {
      return c.setup.awq_fused_len > 0 ? words_of("--awq-fused-len", c.setup.awq_fused_len)
                                       : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.awq_fused_len > 0
                 ? fmt::format("AutoAWQ fused cache {}", c.resolved.awq_fused_len)
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.awq_fused_len}; }},
  OptionRow{
    "--gptq-kernel", "gptq_kernel", OptionGroup::workload, "NAME",
    "the kernel transformers runs GPTQ weights with (engine hf): exllama (AutoGPTQ, a "
    "dequantization buffer of the largest layer), exllamav2 (also 2048 x 8 rows of "
    "scratch per output column), marlin, cuda-old (dequantizes each layer in the "
    "prefill), torch (in every forward) or triton; default: exllama before "
    "transformers 4.49, then GPTQModel's choice (marlin from compute capability 8.0, "
    "exllamav2 below)",
    "", gptq_kernel_names,
    [](Setup& s, std::string_view t) {
      const auto names = gptq_kernel_names();
      const auto name = choose("--gptq-kernel", t, names);
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name) {
          s.gptq_kernel = static_cast<GptqKernel>(i + 1);
        }
      }
    },
    [](const OptionContext& c) {
      return c.setup.gptq_kernel && c.resolved.gptq_kernel != GptqKernel::none
                 ? words("--gptq-kernel", std::string(gptq_kernel_name(*c.setup.gptq_kernel)))
                 : Words{};
    },
    [](const OptionContext& c) {
      return c.resolved.gptq_kernel != GptqKernel::none
                 ? fmt::format("GPTQ {}", gptq_kernel_name(c.resolved.gptq_kernel))
                 : std::string();
    },
    [](const OptionContext& c) {
      return SetupValue{std::string(gptq_kernel_name(c.resolved.gptq_kernel))};
    }},
  OptionRow{
    "--gpu-util", "gpu_util", OptionGroup::serving, "FLOAT",
    "vLLM gpu_memory_utilization, above 0 and at most 1", "0.9", nullptr,
    [](Setup& s, std::string_view t) {
      const double value = parse_real("--gpu-util", t);
      if (!(value > 0 && value <= 1)) {
        throw Error(fmt::format(
            "--gpu-util {} is out of range; use a fraction above 0 and at most 1, e.g. 0.9", t));
      }
      s.gpu_util = value;
    },
    [](const OptionContext& c) {
      return c.setup.engine == Engine::vllm && c.setup.gpu_util != k_default.gpu_util
                 ? words_of("--gpu-util", c.setup.gpu_util) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::vllm && !s.training() ? fmt::format("gpu-util {}", s.gpu_util)
                                                       : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.gpu_util}; }},
  OptionRow{
    "--max-model-len", "max_model_len", OptionGroup::serving, "INT",
    "vLLM max model length", "--seq, within the model's context", nullptr,
    [](Setup& s, std::string_view t) {
      s.max_model_len = parse_whole("--max-model-len", t, 1, k_max_seq, "tokens");
    },
    [](const OptionContext& c) {
      // Left out it derives to min(--seq, context): written whenever it differs
      // from that (an explicit length past the context makes vLLM refuse).
      if (!c.setup.max_model_len) {
        return Words{};
      }
      const std::int64_t automatic =
          derived(c, [](Setup& t) { t.max_model_len.reset(); }).max_model_len;
      return *c.setup.max_model_len != automatic
                 ? words_of("--max-model-len", *c.setup.max_model_len) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::vllm && !s.training()
                 ? fmt::format("max-model-len {}", s.max_model_len) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.max_model_len}; }},
  OptionRow{
    "--max-num-seqs", "max_num_seqs", OptionGroup::serving, "INT",
    "vLLM max concurrent sequences", "vLLM's, by version and card (256; 1024 on "
    "70 GiB+ cards)", nullptr,
    [](Setup& s, std::string_view t) {
      s.max_num_seqs = parse_whole("--max-num-seqs", t, 1, k_max_num_seqs, "sequences");
    },
    [](const OptionContext& c) {
      if (c.setup.engine != Engine::vllm || !c.setup.max_num_seqs) {
        return Words{};
      }
      const std::int64_t automatic =
          derived(c, [](Setup& t) { t.max_num_seqs.reset(); }).max_num_seqs;
      return *c.setup.max_num_seqs != automatic
                 ? words_of("--max-num-seqs", *c.setup.max_num_seqs) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::vllm && !s.training()
                 ? fmt::format("max-num-seqs {}", s.max_num_seqs) : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.max_num_seqs}; }},
  OptionRow{
    "--enforce-eager", "enforce_eager", OptionGroup::serving, "",
    "vLLM without CUDA graphs", "", nullptr,
    [](Setup& s, std::string_view t) { s.enforce_eager = parse_flag("--enforce-eager", t); },
    [](const OptionContext& c) {
      return c.setup.engine == Engine::vllm && c.setup.enforce_eager ? Words{"--enforce-eager"}
                                                                     : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::vllm && !s.training() && s.enforce_eager
                 ? std::string("enforce-eager") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.enforce_eager}; }},
  OptionRow{
    "--max-num-batched-tokens", "max_num_batched_tokens", OptionGroup::serving, "INT",
    "vLLM scheduler token budget", "vLLM's, by version and card", nullptr,
    [](Setup& s, std::string_view t) {
      s.max_num_batched_tokens = parse_whole("--max-num-batched-tokens", t, 1, k_max_seq, "tokens");
    },
    [](const OptionContext& c) {
      if (c.setup.engine != Engine::vllm || !c.setup.max_num_batched_tokens) {
        return Words{};
      }
      const std::int64_t automatic =
          derived(c, [](Setup& t) { t.max_num_batched_tokens.reset(); }).max_num_batched_tokens;
      return *c.setup.max_num_batched_tokens != automatic
                 ? words_of("--max-num-batched-tokens", *c.setup.max_num_batched_tokens)
                 : Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) { return SetupValue{c.resolved.max_num_batched_tokens}; }},
  OptionRow{
    "--vllm-version", "vllm_version", OptionGroup::serving, "X.Y",
    "vLLM release, X.Y or X.Y.Z (engine, profiler and defaults differ by release)",
    "0.19", nullptr,
    [](Setup& s, std::string_view t) {
      const auto release = release_from_text(t);
      if (!release) {
        throw Error(fmt::format(
            "--vllm-version '{}' is not a version; use X.Y such as 0.6 or 0.11", t));
      }
      s.vllm_release = *release;
      s.vllm_version = vllm_era_of(*release);
    },
    [](const OptionContext& c) {
      if (c.setup.engine != Engine::vllm) {
        return Words{};
      }
      if (c.setup.vllm_release) {
        return *c.setup.vllm_release != k_vllm_default_version
                   ? words("--vllm-version", release_text(*c.setup.vllm_release))
                   : Words{};
      }
      return c.setup.vllm_version != k_default.vllm_version
                 ? words("--vllm-version", std::string(vllm_era_version(c.setup.vllm_version)))
                 : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::vllm && !s.training()
                 ? fmt::format("vLLM {} ({})", release_text(s.vllm_release),
                               vllm_engine_name(s.vllm_engine))
                 : std::string();
    },
    [](const OptionContext& c) { return SetupValue{std::string(vllm_era_name(c.resolved.vllm_version))}; }},
  OptionRow{
    "", "vllm_release", OptionGroup::serving, "", "the vLLM release planned", "",
    nullptr, nullptr,
    [](const OptionContext&) { return Words{}; },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) { return SetupValue{release_text(c.resolved.vllm_release)}; }},
  OptionRow{
    "", "vllm_engine", OptionGroup::serving, "",
    "the engine that release runs here: v0 or v1", "", nullptr, nullptr,
    [](const OptionContext&) { return Words{}; },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) {
      return SetupValue{std::string(c.resolved.vllm_engine == VllmEngine::v0 ? "v0" : "v1")};
    }},
  OptionRow{
    "--p2p", "p2p", OptionGroup::serving, "NAME",
    "peer-to-peer between a node's GPUs (vLLM custom all-reduce, NCCL's P2P "
    "transport): auto (NVLink inside one node), on or off", "auto", p2p_names,
    [](Setup& s, std::string_view t) { s.p2p = p2p_from_name(choose("--p2p", t, p2p_names())); },
    [](const OptionContext& c) {
      return c.setup.engine == Engine::vllm && c.setup.p2p != k_default.p2p
                 ? words("--p2p", std::string(p2p_name(c.setup.p2p))) : Words{};
    },
    [](const OptionContext& c) {
      const Resolved& s = c.resolved;
      return s.engine == Engine::vllm && !s.training() && s.tp > 1
                 ? std::string(s.p2p ? "P2P" : "no P2P") : std::string();
    },
    [](const OptionContext& c) { return SetupValue{c.resolved.p2p}; }},
  OptionRow{
    "--overhead-gib", "overhead_gib", OptionGroup::overrides, "FLOAT",
    "CUDA context + workspaces per GPU, GiB", "measured", nullptr,
    [](Setup& s, std::string_view t) {
      const double value = parse_real("--overhead-gib", t);
      if (value < 0 || value > k_max_overhead_gib) {
        throw Error(fmt::format("--overhead-gib {} is out of range; use 0 to {} GiB", t,
                                k_max_overhead_gib));
      }
      s.overhead_gib = value;
    },
    [](const OptionContext& c) {
      return c.setup.overhead_gib ? words_of("--overhead-gib", *c.setup.overhead_gib) : Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) {
      return c.resolved.overhead_gib ? SetupValue{*c.resolved.overhead_gib} : SetupValue{nullptr};
    }},
  OptionRow{
    "--reserve", "reserve", OptionGroup::overrides, "FLOAT",
    "caching-allocator fragmentation as a fraction of the allocated bytes, 0 to <1",
    "measured", nullptr,
    [](Setup& s, std::string_view t) {
      const double value = parse_real("--reserve", t);
      if (value < 0 || value >= 1) {
        throw Error(fmt::format(
            "--reserve {} is out of range; use a fraction of the allocated "
            "bytes from 0 to below 1, e.g. 0.05",
            t));
      }
      s.reserve = value;
    },
    [](const OptionContext& c) {
      return c.setup.reserve ? words_of("--reserve", *c.setup.reserve) : Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) {
      return c.resolved.reserve ? SetupValue{*c.resolved.reserve} : SetupValue{nullptr};
    }},
  OptionRow{
    "--price", "price", OptionGroup::overrides, "FLOAT",
    "USD per GPU-hour, for cost estimates", "unknown", nullptr,
    [](Setup& s, std::string_view t) {
      const double value = parse_real("--price", t);
      if (value < 0 || value > k_max_price) {
        throw Error(fmt::format("--price {} is out of range; use 0 to {} USD per GPU-hour", t,
                                k_max_price));
      }
      s.price = value > 0 ? std::optional<double>(value) : std::nullopt;
    },
    [](const OptionContext& c) {
      return c.setup.price ? words_of("--price", *c.setup.price) : Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) {
      return c.resolved.price ? SetupValue{*c.resolved.price} : SetupValue{nullptr};
    }},
  OptionRow{
    "--min-headroom", "min_headroom_bytes", OptionGroup::overrides, "GIB|PCT%",
    "free memory a plan should keep, in GiB or as a share such as 10%: below it plan warns (low headroom) and check fails the plan",
    "5% of the card (vLLM: none)", nullptr,
    [](Setup& s, std::string_view t) {
      if (!t.empty() && t.back() == '%') {
        const double pct = parse_real("--min-headroom", t.substr(0, t.size() - 1));
        if (pct < 0 || pct >= 100) {
          throw Error(fmt::format("--min-headroom {} is out of range; use 0% to below 100%", t));
        }
        s.min_headroom_share = pct / 100;
        s.min_headroom_gib.reset();
        return;
      }
      const double gib = parse_real("--min-headroom", t);
      if (gib < 0 || gib > k_max_overhead_gib) {
        throw Error(fmt::format(
            "--min-headroom {} is out of range; use 0 to {} GiB, or a share such as 10%", t,
            k_max_overhead_gib));
      }
      s.min_headroom_gib = gib;
      s.min_headroom_share.reset();
    },
    [](const OptionContext& c) {
      if (c.setup.min_headroom_gib) {
        return words_of("--min-headroom", *c.setup.min_headroom_gib);
      }
      if (c.setup.min_headroom_share) {
        return words("--min-headroom", fmt::format("{}%", *c.setup.min_headroom_share * 100));
      }
      return Words{};
    },
    [](const OptionContext&) { return std::string(); },
    [](const OptionContext& c) { return SetupValue{c.resolved.min_headroom_bytes}; }},
};
// clang-format on

}  // namespace

std::string_view option_group_name(OptionGroup group) {
  switch (group) {
    case OptionGroup::hardware:
      return "Hardware";
    case OptionGroup::workload:
      return "Workload";
    case OptionGroup::training:
      return "Training";
    case OptionGroup::serving:
      return "Serving (vLLM)";
    case OptionGroup::overrides:
      return "Overrides";
  }
  return "Options";
}

std::span<const OptionRow> option_rows() {
  return k_rows;
}

const OptionRow* find_option(std::string_view flag_or_key) {
  for (const OptionRow& row : k_rows) {
    if ((!row.flag.empty() && row.flag == flag_or_key) ||
        row.key == flag_or_key) {
      return &row;
    }
  }
  return nullptr;
}

void apply_option(Setup& setup, std::string_view name, std::string_view text) {
  const OptionRow* row = find_option(name);
  if (row == nullptr || row->parse == nullptr) {
    std::vector<std::string> known;
    for (const OptionRow& r : k_rows) {
      if (r.parse != nullptr) {
        known.emplace_back(name.starts_with("--") ? r.flag : r.key);
      }
    }
    const auto near = suggest(name, known);
    throw Error(fmt::format("unknown option '{}'{}", name,
                            near ? fmt::format("; did you mean {}?", *near)
                                 : std::string("; see oomplan plan --help")));
  }
  row->parse(setup, text);
}

std::int64_t parse_whole(std::string_view option, std::string_view text,
                         std::int64_t low, std::int64_t high,
                         std::string_view unit) {
  std::int64_t value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    throw Error(fmt::format("{} '{}' is not a whole number", option, text));
  }
  if (ec == std::errc::result_out_of_range || value < low || value > high) {
    throw Error(fmt::format("{} {} is out of range; use {} to {}{}{}", option,
                            text, low, high, unit.empty() ? "" : " ", unit));
  }
  return value;
}

bool parse_flag(std::string_view flag, std::string_view text) {
  if (text.empty() || text == "true") {
    return true;
  }
  if (text == "false") {
    return false;
  }
  throw Error(fmt::format("{} takes no value, got '{}'", flag, text));
}

double parse_real(std::string_view option, std::string_view text) {
  double value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc{} || ptr != end ||
      !std::isfinite(value)) {
    throw Error(fmt::format("{} '{}' is not a number", option, text));
  }
  return value;
}

std::vector<std::string> plan_argv(const std::string& model_arg,
                                   const Model& model, const Gpu& gpu,
                                   const Setup& setup) {
  const Resolved resolved = resolve(model, gpu, setup);
  const OptionContext context{model, gpu, setup, resolved};
  std::vector<std::string> argv = {model_arg};
  for (const OptionRow& row : option_rows()) {
    for (auto& word : row.args(context)) {
      argv.push_back(std::move(word));
    }
  }
  return argv;
}

std::string plan_args(const std::string& model_arg, const Model& model,
                      const Gpu& gpu, const Setup& setup) {
  std::string out;
  for (const auto& word : plan_argv(model_arg, model, gpu, setup)) {
    if (!out.empty()) {
      out += ' ';
    }
    out += shell_word(word);
  }
  return out;
}

}  // namespace oomplan
