#include "cli/cli.hpp"

#include "oomplan/advice.hpp"
#include "oomplan/catalog.hpp"
#include "oomplan/error.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/report.hpp"
#include "oomplan/search.hpp"
#include "oomplan/setup.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace oomplan::cli {
namespace {

namespace fs = std::filesystem;

// The edge bounds every input so no byte count in the core can overflow
// (STYLE 4.2): 10M tokens x 1M sequences x 100k GPUs stay far below 2^63 in
// each term the core computes.
constexpr std::int64_t k_max_seq = 10'000'000;
constexpr std::int64_t k_max_batch = 1'000'000;
constexpr std::int64_t k_max_gpus = 100'000;
constexpr std::int64_t k_max_lora_rank = 65'536;
constexpr std::int64_t k_max_grad_accum = 1'000'000;
constexpr std::int64_t k_max_num_seqs = 1'000'000;
constexpr double k_max_overhead_gib = 1024;
constexpr double k_max_price = 1'000'000;
constexpr std::int64_t k_max_fit_gpus = 4096;
constexpr std::int64_t k_max_top = 1000;

// Without --gpus, counts tried per GPU type: 1, 2, 4, 8, then whole 8-GPU
// nodes up to this many GPUs.
constexpr int k_sizing_max_gpus = 64;
constexpr int k_gpus_per_node = 8;

// Fixes are listed when the plan does not fit or keeps less than this share
// of the card free (a longer prompt or fragmentation would then OOM).
constexpr double k_advise_headroom_share = 0.10;

std::vector<std::string> to_strings(const std::vector<std::string_view>& in) {
  return {in.begin(), in.end()};
}

// --- Options, as typed. Numbers are kept as text and converted here, so every
// bad value gets the same kind of message ("--seq 'abc' is not a whole
// number") instead of CLI11's "Could not convert: --seq = abc".

struct SetupOptions {
  std::string nodes = "1";
  std::string mode = "infer";
  std::string engine = "hf";
  std::string seq = "4096";
  std::string batch = "1";
  std::string dtype = "bf16";
  std::string quant = "auto";
  std::string kv_dtype = "auto";
  std::string tp;
  std::string pp = "1";
  std::string split;
  bool sequence_parallel = false;
  std::string zero;
  bool fsdp = false;
  std::string offload = "none";
  std::string checkpointing = "none";
  std::string attn = "flash";
  std::string precision = "mixed";
  std::string optimizer = "adamw";
  bool compile = false;
  std::string lora_rank = "16";
  std::string lora_targets = "all";
  bool optimizer_in_bwd = false;
  std::string loss = "full";
  bool activation_offload = false;
  std::string grad_accum = "1";
  std::string gpu_util = "0.9";
  std::string max_num_batched_tokens;
  bool enforce_eager = false;
  std::string vllm_version;
  std::string max_model_len;
  std::string max_num_seqs = "256";
  std::string overhead_gib;
  std::string reserve;
  std::string price;
};

struct OutputOptions {
  bool json = false;
  std::string format = "text";
  std::string catalog_dir;
};

struct PlanOptions {
  std::string model;
  std::string gpus;
  SetupOptions setup;
  OutputOptions output;
};

struct FitOptions {
  std::string model;
  std::string gpus;
  SetupOptions setup;
  OutputOptions output;
  std::string min_headroom = "0";
  std::string max_gpus = "64";
  bool no_offload = false;
  bool no_quant = false;
  std::string global_batch;
  std::string top = "10";
};

struct ListOptions {
  OutputOptions output;
};

enum class Format { text, json, markdown };

// --- Number parsing with complete messages.

std::int64_t parse_int(std::string_view option, const std::string& text,
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

int parse_small_int(std::string_view option, const std::string& text,
                    std::int64_t low, std::int64_t high,
                    std::string_view unit) {
  return static_cast<int>(parse_int(option, text, low, high, unit));
}

double parse_number(std::string_view option, const std::string& text) {
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

// --- Binding options to CLI11.

void add_setup_options(CLI::App& app, SetupOptions& o) {
  app.add_option("--nodes", o.nodes, "nodes, each with --gpus GPUs")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--mode", o.mode, "infer, full, lora or qlora")
      ->check(CLI::IsMember(to_strings(mode_names())))
      ->capture_default_str();
  app.add_option("--engine", o.engine,
                 "hf (transformers eager generate) or vllm")
      ->check(CLI::IsMember(to_strings(engine_names())))
      ->capture_default_str();
  app.add_option("--seq", o.seq, "tokens per sequence")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--batch", o.batch,
                 "sequences per GPU step (training: micro-batch per DP rank)")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--dtype", o.dtype, "compute dtype and unquantized weights")
      ->check(CLI::IsMember(std::vector<std::string>{"bf16", "fp16", "fp32"}))
      ->capture_default_str();
  app.add_option("--quant", o.quant,
                 "weight format (auto: the checkpoint's own; qlora: nf4)")
      ->check(CLI::IsMember(to_strings(quant_names())))
      ->capture_default_str();
  app.add_option("--kv-dtype", o.kv_dtype, "KV cache dtype (auto = --dtype)")
      ->check(CLI::IsMember(
          std::vector<std::string>{"auto", "fp8", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--tp", o.tp,
                 "tensor parallel size (infer: GPUs per node, train: 1)")
      ->type_name("INT");
  app.add_option("--pp", o.pp, "pipeline parallel size")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--split", o.split,
                 "layers: whole layers per GPU (transformers "
                 "device_map=\"auto\")")
      ->check(CLI::IsMember(std::vector<std::string>{"layers"}));
  app.add_flag("--sequence-parallel", o.sequence_parallel,
               "Megatron sequence parallelism (tp > 1)");
  app.add_option("--zero", o.zero, "ZeRO stage 0-3 (training)")
      ->type_name("INT");
  app.add_flag("--fsdp", o.fsdp, "FSDP FULL_SHARD (ZeRO-3 semantics)");
  app.add_option("--offload", o.offload,
                 "to CPU RAM: none, optimizer, params or all")
      ->check(CLI::IsMember(to_strings(offload_names())))
      ->capture_default_str();
  app.add_option("--checkpointing", o.checkpointing,
                 "activation checkpointing: none, selective or full")
      ->check(CLI::IsMember(to_strings(checkpointing_names())))
      ->capture_default_str();
  app.add_option("--attn", o.attn, "attention kernel: eager, sdpa or flash")
      ->check(CLI::IsMember(to_strings(attn_names())))
      ->capture_default_str();
  app.add_option("--precision", o.precision,
                 "training: mixed (fp32 master + states) or pure (all in "
                 "--dtype)")
      ->check(CLI::IsMember(to_strings(precision_names())))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "training optimizer")
      ->check(CLI::IsMember(to_strings(optimizer_names())))
      ->capture_default_str();
  app.add_flag("--compile", o.compile, "torch.compile on");
  app.add_option("--lora-rank", o.lora_rank, "LoRA rank")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--lora-targets", o.lora_targets,
                 "qv, attn, all or a comma list of q,k,v,o,gate,up,down")
      ->capture_default_str();
  app.add_flag("--optimizer-in-bwd", o.optimizer_in_bwd,
               "optimizer step fused into backward (no full gradient buffer)");
  app.add_option("--loss", o.loss, "cross-entropy: full or chunked")
      ->check(CLI::IsMember(to_strings(loss_names())))
      ->capture_default_str();
  app.add_flag("--activation-offload", o.activation_offload,
               "activations moved to CPU RAM during forward");
  app.add_option("--grad-accum", o.grad_accum, "gradient accumulation steps")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--gpu-util", o.gpu_util, "vLLM gpu_memory_utilization")
      ->type_name("FLOAT")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                 "vLLM scheduler token budget (default: vLLM's)")
      ->type_name("INT");
  app.add_flag("--enforce-eager", o.enforce_eager, "vLLM without CUDA graphs");
  app.add_option("--vllm-version", o.vllm_version,
                 "vLLM version X.Y (behaviour differs by era; default: "
                 "current)");
  app.add_option("--max-model-len", o.max_model_len,
                 "vLLM max model length (default: --seq)")
      ->type_name("INT");
  app.add_option("--max-num-seqs", o.max_num_seqs, "vLLM max concurrent seqs")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--overhead-gib", o.overhead_gib,
                 "CUDA context + workspaces per GPU, GiB (default: measured)")
      ->type_name("FLOAT");
  app.add_option("--reserve", o.reserve,
                 "caching-allocator fragmentation as a fraction of the "
                 "allocated bytes, 0 to <1 (default: measured)")
      ->type_name("FLOAT");
  app.add_option("--price", o.price, "USD per GPU-hour, for cost estimates")
      ->type_name("FLOAT");
}

void add_output_options(CLI::App& app, OutputOptions& o) {
  app.add_flag("--json", o.json, "same as --format json");
  app.add_option("--format", o.format, "text, json or markdown")
      ->check(
          CLI::IsMember(std::vector<std::string>{"text", "json", "markdown"}))
      ->capture_default_str();
  app.add_option("--catalog", o.catalog_dir,
                 "folder of extra models/GPUs JSON, overriding by name");
}

Format output_format(const OutputOptions& o, const CLI::App& app) {
  if (o.json) {
    if (app.count("--format") > 0 && o.format != "json") {
      throw Error(fmt::format(
          "--json and --format {} contradict; keep one of them", o.format));
    }
    return Format::json;
  }
  if (o.format == "json") {
    return Format::json;
  }
  if (o.format == "markdown") {
    return Format::markdown;
  }
  return Format::text;
}

// --- Files: the CLI is the only place that reads them.

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(fmt::format("cannot read '{}'", path.string()));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Catalog load_catalog(const std::string& dir,
                     std::vector<std::string>& warnings) {
  Catalog catalog = builtin_catalog();
  if (dir.empty()) {
    return catalog;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(fmt::format(
        "--catalog '{}' is not a folder; give a folder of *.json files", dir));
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code file_ec;
    if (entry.is_regular_file(file_ec) && entry.path().extension() == ".json") {
      files.push_back(entry.path());
    }
  }
  if (ec) {
    throw Error(
        fmt::format("cannot list --catalog '{}': {}", dir, ec.message()));
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> names;
  std::vector<std::string> texts;
  for (const auto& file : files) {
    names.push_back(file.string());
    texts.push_back(read_file(file));
  }
  std::vector<CatalogFile> extra;
  for (std::size_t i = 0; i < files.size(); ++i) {
    extra.push_back({names[i], texts[i]});
  }
  warnings = merge_catalog_files(catalog, extra);
  return catalog;
}

// MODEL is a catalog name, alias or HF id, or a path to a config.json or to a
// folder holding one (checked first: a local path wins over a catalog name).
struct LoadedModel {
  Model imported;
  const Model* model = nullptr;
};

void load_model(const Catalog& catalog, const std::string& arg,
                LoadedModel& loaded) {
  std::error_code ec;
  const fs::path path(arg);
  if (fs::exists(path, ec)) {
    fs::path config = path;
    fs::path folder = path.parent_path();
    if (fs::is_directory(path, ec)) {
      config = path / "config.json";
      folder = path;
      if (!fs::exists(config, ec)) {
        throw Error(fmt::format(
            "'{}' is a folder without config.json; give a Hugging Face model "
            "folder or a catalog name (see oomplan models)",
            arg));
      }
    }
    const std::string config_text = read_file(config);
    const fs::path index_path = folder / "model.safetensors.index.json";
    std::optional<std::string> index_text;
    if (fs::exists(index_path, ec)) {
      index_text = read_file(index_path);
    }
    loaded.imported = index_text
                          ? import_hf_config(config_text, config.string(),
                                             std::string_view(*index_text))
                          : import_hf_config(config_text, config.string());
    loaded.model = &loaded.imported;
    return;
  }
  if (path.extension() == ".json") {
    throw Error(fmt::format("no such file '{}'", arg));
  }
  loaded.model = &find_model(catalog, arg);
}

// --- Setup from options.

Setup build_setup(const SetupOptions& o) {
  Setup s;
  s.nodes = parse_small_int("--nodes", o.nodes, 1, k_max_gpus, "nodes");
  s.mode = mode_from_name(o.mode);
  s.engine = engine_from_name(o.engine);
  s.seq = parse_int("--seq", o.seq, 1, k_max_seq, "tokens");
  s.batch = parse_int("--batch", o.batch, 1, k_max_batch, "sequences");
  s.dtype = dtype_from_name(o.dtype).value_or(Dtype::bf16);
  s.quant = quant_from_name(o.quant).value_or(Quant::automatic);
  if (o.kv_dtype != "auto") {
    s.kv_dtype = dtype_from_name(o.kv_dtype);
  }
  if (!o.tp.empty()) {
    s.tp = parse_small_int("--tp", o.tp, 1, k_max_gpus, "");
  }
  s.pp = parse_small_int("--pp", o.pp, 1, k_max_gpus, "");
  s.split_layers = o.split == "layers";
  s.sequence_parallel = o.sequence_parallel;
  if (!o.zero.empty()) {
    s.zero = parse_small_int("--zero", o.zero, 0, 3, "");
  }
  s.fsdp = o.fsdp;
  s.offload = offload_from_name(o.offload);
  s.checkpointing = checkpointing_from_name(o.checkpointing);
  s.attn = attn_from_name(o.attn);
  s.precision = precision_from_name(o.precision);
  s.optimizer = optimizer_from_name(o.optimizer);
  s.compile = o.compile;
  s.lora_rank =
      parse_small_int("--lora-rank", o.lora_rank, 1, k_max_lora_rank, "");
  s.lora_targets = lora_targets_from_text(o.lora_targets);
  if (s.lora_targets == 0) {
    throw Error(fmt::format(
        "--lora-targets '{}' is not a target list; use qv, attn, all or a "
        "comma list of q,k,v,o,gate,up,down",
        o.lora_targets));
  }
  s.optimizer_in_bwd = o.optimizer_in_bwd;
  s.loss = loss_from_name(o.loss);
  s.activation_offload = o.activation_offload;
  s.grad_accum = parse_small_int("--grad-accum", o.grad_accum, 1,
                                 k_max_grad_accum, "steps");
  s.gpu_util = parse_number("--gpu-util", o.gpu_util);
  if (s.gpu_util <= 0 || s.gpu_util > 1) {
    throw Error(fmt::format(
        "--gpu-util {} is out of range; use a fraction above 0 and at most 1, "
        "e.g. 0.9",
        o.gpu_util));
  }
  if (!o.max_num_batched_tokens.empty()) {
    s.max_num_batched_tokens =
        parse_int("--max-num-batched-tokens", o.max_num_batched_tokens, 1,
                  k_max_seq, "tokens");
  }
  s.enforce_eager = o.enforce_eager;
  if (!o.vllm_version.empty()) {
    const auto era = vllm_era_from_text(o.vllm_version);
    if (!era) {
      throw Error(fmt::format(
          "--vllm-version '{}' is not a version; use X.Y such as 0.6 or 0.11",
          o.vllm_version));
    }
    s.vllm_version = *era;
  }
  if (!o.max_model_len.empty()) {
    s.max_model_len =
        parse_int("--max-model-len", o.max_model_len, 1, k_max_seq, "tokens");
  }
  s.max_num_seqs = parse_int("--max-num-seqs", o.max_num_seqs, 1,
                             k_max_num_seqs, "sequences");
  if (!o.overhead_gib.empty()) {
    s.overhead_gib = parse_number("--overhead-gib", o.overhead_gib);
    if (s.overhead_gib < 0 || s.overhead_gib > k_max_overhead_gib) {
      throw Error(
          fmt::format("--overhead-gib {} is out of range; use 0 to {} GiB",
                      o.overhead_gib, k_max_overhead_gib));
    }
  }
  if (!o.reserve.empty()) {
    s.reserve = parse_number("--reserve", o.reserve);
    if (s.reserve < 0 || s.reserve >= 1) {
      throw Error(fmt::format(
          "--reserve {} is out of range; use a fraction of the allocated "
          "bytes from 0 to below 1, e.g. 0.05",
          o.reserve));
    }
  }
  if (!o.price.empty()) {
    s.price = parse_number("--price", o.price);
    if (s.price < 0 || s.price > k_max_price) {
      throw Error(
          fmt::format("--price {} is out of range; use 0 to {} USD per "
                      "GPU-hour",
                      o.price, k_max_price));
    }
  }

  // Options that contradict each other: each message names both and the fix.
  if (s.fsdp && !o.zero.empty() && s.zero != 3) {
    throw Error(fmt::format(
        "--fsdp shards like ZeRO stage 3 and contradicts --zero {}; drop "
        "--zero or use --zero 3",
        s.zero));
  }
  if (s.split_layers && s.tp > 1) {
    throw Error(fmt::format(
        "--split layers puts whole layers on each GPU and contradicts --tp "
        "{}; drop one of them",
        s.tp));
  }
  if (s.split_layers && s.pp > 1) {
    throw Error(fmt::format(
        "--split layers already splits the layers and contradicts --pp {}; "
        "drop one of them",
        s.pp));
  }
  if (s.engine == Engine::vllm && s.training()) {
    throw Error(fmt::format(
        "--engine vllm serves models and cannot train (--mode {}); use "
        "--engine hf for training or --mode infer with vllm",
        mode_name(s.mode)));
  }
  if (s.mode == Mode::full && s.quant != Quant::automatic &&
      s.quant != Quant::none) {
    throw Error(fmt::format(
        "--mode full updates every weight and cannot train --quant {} "
        "weights; drop --quant or use --mode qlora (or lora) over the "
        "quantized base",
        quant_name(s.quant)));
  }
  if (s.mode == Mode::qlora && s.quant == Quant::none) {
    throw Error(
        "--mode qlora trains adapters over a quantized base and contradicts "
        "--quant none; use --mode lora for a 16-bit base");
  }
  if (s.engine == Engine::vllm && s.split_layers) {
    throw Error(
        "--split layers is transformers' device_map=\"auto\" and does not "
        "apply to --engine vllm; use --tp or --pp");
  }
  return s;
}

// Sets the GPUs per node and checks the total against k_max_gpus (tp x pp is
// checked after resolve_setup, in check_parallel_sizes).
void set_gpu_count(Setup& setup, int per_node) {
  setup.gpus = per_node;
  const std::int64_t total = static_cast<std::int64_t>(per_node) * setup.nodes;
  if (total > k_max_gpus) {
    throw Error(fmt::format(
        "{} GPUs per node x {} nodes = {} GPUs is above the {} limit", per_node,
        setup.nodes, total, k_max_gpus));
  }
}

// `user` is the setup before resolve_setup: its tp is 0 unless --tp was given.
void check_parallel_sizes(const Setup& user, const Setup& resolved) {
  const std::int64_t total = resolved.total_gpus();
  const std::int64_t per_replica =
      static_cast<std::int64_t>(resolved.tp) * resolved.pp;
  if (resolved.tp >= 1 && per_replica <= total && total % per_replica == 0) {
    if (resolved.sequence_parallel && resolved.tp == 1) {
      throw Error(
          "--sequence-parallel splits activations over the tensor-parallel "
          "group and needs --tp 2 or more");
    }
    return;
  }
  if (user.tp == 0) {
    throw Error(fmt::format(
        "--pp {} does not divide the {} GPUs; use a --pp that divides {}",
        resolved.pp, total, total));
  }
  throw Error(fmt::format(
      "--tp {} x --pp {} = {} GPUs per replica does not divide the {} GPUs; "
      "choose tp x pp that divides {}",
      resolved.tp, resolved.pp, per_replica, total, total));
}

// --- Subcommands.

struct Runtime {
  std::string out;
  bool color = false;
  std::vector<std::string> warnings;  // printed to stderr before the output
};

// Renders one result in the --format asked for; only that one is built.
template <typename Text, typename Json, typename Markdown>
std::string render(Format format, Text text, Json json, Markdown markdown) {
  switch (format) {
    case Format::json:
      return json();
    case Format::markdown:
      return markdown();
    case Format::text:
      break;
  }
  return text();
}

int run_plan_one(const Catalog& catalog, const Model& model,
                 const PlanOptions& options, Setup setup, Format format,
                 Runtime& rt) {
  const GpuSpec spec = parse_gpu_spec(catalog, options.gpus);
  if (spec.gpu == nullptr || spec.count < 1) {
    throw Error(fmt::format(
        "--gpus '{}' is not NxNAME; use e.g. 4xA100-80, 1xH100 or an "
        "instance name such as p4de.24xlarge",
        options.gpus));
  }
  set_gpu_count(setup, spec.count);
  const Gpu& gpu = *spec.gpu;
  const Setup resolved = resolve_setup(model, gpu, setup);
  check_parallel_sizes(setup, resolved);
  if (setup.tp == 0 && model.num_heads > 0 &&
      model.num_heads % resolved.tp != 0) {
    // The user asked for GPUs, not for this tensor-parallel size: say where
    // it came from and what to change.
    throw Error(fmt::format(
        "{} GPUs per node mean tensor parallel {} by default, which does not "
        "divide the {} attention heads of {}; pass --tp with a divisor of {} "
        "(and --pp so that tp x pp divides the GPUs), or --split layers",
        resolved.gpus, resolved.tp, model.num_heads, model.name,
        model.num_heads));
  }
  validate_setup(model, gpu, resolved);

  Plan plan;
  plan.model = &model;
  plan.gpu = &gpu;
  plan.setup = resolved;
  plan.model_arg = options.model;
  plan.budget = memory(model, gpu, resolved);
  const bool tight =
      static_cast<double>(plan.budget.headroom_bytes()) <
      k_advise_headroom_share * static_cast<double>(plan.budget.usable_bytes);
  if (!plan.budget.fits() || tight) {
    plan.fixes = advise(model, gpu, resolved, catalog.gpus);
  }
  plan.time = estimate_time(model, gpu, resolved, plan.budget);

  rt.out = render(
      format, [&] { return render_text(plan, {.color = rt.color}); },
      [&] { return render_json(plan); }, [&] { return render_markdown(plan); });
  return plan.budget.fits() ? k_exit_fits : k_exit_does_not_fit;
}

// The setups tried for `count` GPUs without --gpus: up to 8 on one node,
// then whole nodes of 8. Inference the user left to the defaults takes the
// largest tensor-parallel size the attention heads allow within a node and
// pipelines the rest (vLLM's multi-node recipe: tp within, pp across nodes);
// anything else keeps the user's layout.
std::vector<Setup> sizing_layouts(const Setup& base, int count) {
  Setup setup = base;
  setup.gpus = std::min(count, k_gpus_per_node);
  setup.nodes = count / setup.gpus;
  if (setup.training() || setup.tp != 0 || setup.pp != 1 ||
      setup.split_layers) {
    return {setup};
  }
  std::vector<Setup> layouts;
  for (int tp = setup.gpus; tp >= 1; tp /= 2) {
    Setup layout = setup;
    layout.tp = tp;
    layout.pp = count / tp;
    layouts.push_back(layout);
  }
  return layouts;
}

// Prices the first valid layout for `count` GPUs; nullopt when none is valid
// (the first reason is kept in `first_error`).
std::optional<std::pair<Setup, Budget>> price_sizing(
    const Model& model, const Gpu& gpu, const Setup& base, int count,
    std::optional<Error>& first_error) {
  for (const Setup& setup : sizing_layouts(base, count)) {
    try {
      const Setup resolved = resolve_setup(model, gpu, setup);
      check_parallel_sizes(setup, resolved);
      validate_setup(model, gpu, resolved);
      return std::make_pair(resolved, memory(model, gpu, resolved));
    } catch (const Error& e) {
      if (!first_error) {
        first_error = e;
      }
    }
  }
  return std::nullopt;
}

int run_sizing(const Catalog& catalog, const Model& model,
               const PlanOptions& options, const Setup& base, Format format,
               Runtime& rt) {
  Sizing sizing;
  sizing.model = &model;
  sizing.setup = base;
  sizing.model_arg = options.model;
  sizing.max_gpus = k_sizing_max_gpus;
  std::optional<Error> first_error;
  bool any_valid = false;
  bool any_fits = false;
  for (const Gpu& gpu : catalog.gpus) {
    if (!gpu.common) {
      continue;
    }
    SizingRow row;
    row.gpu = &gpu;
    for (const int count : gpu_counts(k_sizing_max_gpus)) {
      const auto priced = price_sizing(model, gpu, base, count, first_error);
      if (!priced) {
        continue;
      }
      any_valid = true;
      row.setup = priced->first;
      row.total_bytes = priced->second.total_bytes();
      row.usable_bytes = priced->second.usable_bytes;
      row.fits = priced->second.fits();
      if (row.fits) {
        row.count = count;
        break;
      }
    }
    any_fits = any_fits || row.fits;
    sizing.rows.push_back(row);
  }
  if (!any_valid && first_error) {
    throw *first_error;
  }
  rt.out = render(
      format, [&] { return render_sizing_text(sizing, {.color = rt.color}); },
      [&] { return render_sizing_json(sizing); },
      [&] { return render_sizing_markdown(sizing); });
  return any_fits ? k_exit_fits : k_exit_does_not_fit;
}

int run_plan(const PlanOptions& options, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(options.output, app);
  const Setup setup = build_setup(options.setup);
  const Catalog catalog = load_catalog(options.output.catalog_dir, rt.warnings);
  LoadedModel loaded;
  load_model(catalog, options.model, loaded);
  if (options.gpus.empty()) {
    if (app.count("--gpus") > 0) {
      throw Error(
          "--gpus is empty; give NxNAME such as 4xA100-80, or leave it out "
          "to list the fewest GPUs of each common type");
    }
    return run_sizing(catalog, *loaded.model, options, setup, format, rt);
  }
  return run_plan_one(catalog, *loaded.model, options, setup, format, rt);
}

int run_fit(const FitOptions& options, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(options.output, app);
  const Setup base = build_setup(options.setup);

  FitConstraints constraints;
  constraints.min_headroom_gib =
      parse_number("--min-headroom", options.min_headroom);
  if (constraints.min_headroom_gib < 0 ||
      constraints.min_headroom_gib > k_max_overhead_gib) {
    throw Error(
        fmt::format("--min-headroom {} is out of range; use 0 to {} GiB",
                    options.min_headroom, k_max_overhead_gib));
  }
  constraints.max_gpus = parse_small_int("--max-gpus", options.max_gpus, 1,
                                         k_max_fit_gpus, "GPUs");
  constraints.no_offload = options.no_offload;
  constraints.no_quant = options.no_quant;
  if (!options.global_batch.empty()) {
    constraints.global_batch = parse_int("--global-batch", options.global_batch,
                                         1, k_max_batch, "sequences");
  }
  constraints.top = parse_small_int("--top", options.top, 1, k_max_top, "");

  const Catalog catalog = load_catalog(options.output.catalog_dir, rt.warnings);
  LoadedModel loaded;
  load_model(catalog, options.model, loaded);

  std::vector<const Gpu*> gpus;
  if (options.gpus.empty()) {
    for (const Gpu& gpu : catalog.gpus) {
      gpus.push_back(&gpu);
    }
  } else {
    std::string_view rest = options.gpus;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string word(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{}
                                             : rest.substr(comma + 1);
      if (word.empty()) {
        continue;
      }
      const Gpu* gpu = parse_gpu_spec(catalog, word).gpu;
      if (gpu == nullptr) {
        gpu = &find_gpu(catalog, word);
      }
      if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) {
        gpus.push_back(gpu);
      }
    }
    if (gpus.empty()) {
      throw Error(fmt::format(
          "--gpus '{}' names no GPU; use a name or a comma list such as "
          "A100-80,H100",
          options.gpus));
    }
  }

  const Model& model = *loaded.model;
  const FitResult result = fit(model, gpus, base, constraints);
  rt.out = render(
      format, [&] { return render_fit_text(result, model, options.model); },
      [&] { return render_fit_json(result, model, options.model); },
      [&] { return render_fit_markdown(result, model, options.model); });
  const bool any_fits = std::any_of(result.plans.begin(), result.plans.end(),
                                    [](const FitPlan& p) { return p.fits; });
  return any_fits ? k_exit_fits : k_exit_does_not_fit;
}

// `oomplan models` and `oomplan gpus`: JSON, else the text table.
using CatalogRender = std::string (*)(const Catalog&);
int run_list(const ListOptions& options, const CLI::App& app, Runtime& rt,
             CatalogRender text, CatalogRender json) {
  const Format format = output_format(options.output, app);
  const Catalog catalog = load_catalog(options.output.catalog_dir, rt.warnings);
  rt.out = format == Format::json ? json(catalog) : text(catalog);
  return k_exit_fits;
}

// --- CLI11 errors -> one line.

std::string parse_error_text(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (what == "MODEL is required") {
    return "missing MODEL; give a catalog name (oomplan models), a Hugging "
           "Face id or a path to a config.json";
  }
  constexpr std::string_view k_extras =
      "The following argument was not expected: ";
  constexpr std::string_view k_extras_plural =
      "The following arguments were not expected: ";
  if (what.rfind(k_extras, 0) == 0) {
    return fmt::format("unexpected argument '{}'; see oomplan --help",
                       what.substr(k_extras.size()));
  }
  if (what.rfind(k_extras_plural, 0) == 0) {
    return fmt::format("unexpected arguments '{}'; see oomplan --help",
                       what.substr(k_extras_plural.size()));
  }
  return what;
}

// ccache's rule: "If the first argument isn't an option, then assume we are
// being passed a compiler name" -- here, a model name for `plan`.
bool is_subcommand(CLI::App& app, const std::string& word) {
  return !app.get_subcommands([&](CLI::App* s) { return s->check_name(word); })
              .empty();
}

int dispatch(std::vector<std::string> args, Runtime& rt, std::ostream& out) {
  CLI::App app{
      "oomplan: predicts whether an LLM fits in GPU memory and what to change "
      "if not.\n"
      "  oomplan MODEL [options]  is  oomplan plan MODEL [options]",
      "oomplan"};
  app.set_version_flag("--version", "oomplan 0.1.0");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 fits, 1 does not fit, 2 bad input.\n"
      "Example: oomplan llama3-70b --gpus 4xA100-80 --seq 8192");

  // A repeated option takes its last value, so a script can append overrides
  // to a fix's args.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  PlanOptions plan_options;
  CLI::App* plan = app.add_subcommand(
      "plan", "per-GPU memory budget, verdict and fixes (the default)");
  plan->add_option("MODEL", plan_options.model,
                   "catalog name or alias, Hugging Face id, or a path to "
                   "config.json / a model folder")
      ->required();
  plan->add_option("--gpus", plan_options.gpus,
                   "NxNAME (4xA100-80) or an instance (p4de.24xlarge); "
                   "absent: the fewest of each common GPU");
  add_setup_options(*plan, plan_options.setup);
  add_output_options(*plan, plan_options.output);

  FitOptions fit_options;
  CLI::App* fit_app =
      app.add_subcommand("fit", "search the setups that fit, cheapest first");
  fit_app->add_option("MODEL", fit_options.model, "as for plan")->required();
  fit_app->add_option("--gpus", fit_options.gpus,
                      "GPU types to try: a name or a comma list (default: "
                      "every catalog GPU)");
  add_setup_options(*fit_app, fit_options.setup);
  add_output_options(*fit_app, fit_options.output);
  fit_app
      ->add_option("--min-headroom", fit_options.min_headroom,
                   "GiB that must stay free per GPU")
      ->type_name("FLOAT")
      ->capture_default_str();
  fit_app->add_option("--max-gpus", fit_options.max_gpus, "most GPUs to use")
      ->type_name("INT")
      ->capture_default_str();
  fit_app->add_flag("--no-offload", fit_options.no_offload,
                    "never offload to CPU RAM");
  fit_app->add_flag("--no-quant", fit_options.no_quant,
                    "keep the weights unquantized");
  fit_app
      ->add_option("--global-batch", fit_options.global_batch,
                   "sequences per optimizer step (training)")
      ->type_name("INT");
  fit_app->add_option("--top", fit_options.top, "plans to show")
      ->type_name("INT")
      ->capture_default_str();

  ListOptions models_options;
  CLI::App* models = app.add_subcommand("models", "list the catalog's models");
  add_output_options(*models, models_options.output);
  ListOptions gpus_options;
  CLI::App* gpus = app.add_subcommand("gpus", "list the catalog's GPUs");
  add_output_options(*gpus, gpus_options.output);

  if (args.empty()) {
    throw Error(
        "missing MODEL; usage: oomplan MODEL [--gpus NxNAME] [options], or "
        "oomplan --help");
  }
  const std::string& first = args.front();
  const bool global_flag =
      first == "-h" || first == "--help" || first == "--version";
  if ((first == "diagnose" || first == "check") && !is_subcommand(app, first)) {
    // DESIGN §1 names them; say so rather than "unknown model 'diagnose'".
    throw Error(fmt::format(
        "'oomplan {}' is not part of this build; see oomplan --help", first));
  }
  if (!global_flag && !is_subcommand(app, first)) {
    args.insert(args.begin(), "plan");
  }

  try {
    // CLI11 2.1.2 consumes the vector from the back.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      std::ostringstream help;
      std::ostringstream help_err;
      app.exit(e, help, help_err);
      std::string text = help.str();
      if (!text.empty() && text.back() != '\n') {
        text += '\n';  // CLI11 prints the version without one
      }
      out << text;
      return k_exit_fits;
    }
    throw Error(parse_error_text(e));
  }

  if (plan->parsed()) {
    return run_plan(plan_options, *plan, rt);
  }
  if (fit_app->parsed()) {
    return run_fit(fit_options, *fit_app, rt);
  }
  if (models->parsed()) {
    return run_list(models_options, *models, rt, render_models_text,
                    render_models_json);
  }
  return run_list(gpus_options, *gpus, rt, render_gpus_text, render_gpus_json);
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out,
        std::ostream& err, bool out_is_terminal, bool no_color) {
  Runtime rt;
  rt.color = out_is_terminal && !no_color;
  try {
    const int code = dispatch(args, rt, out);
    for (const auto& warning : rt.warnings) {
      err << "oomplan: warning: " << warning << '\n';
    }
    out << rt.out;
    out.flush();
    return code;
  } catch (const Error& e) {
    for (const auto& warning : rt.warnings) {
      err << "oomplan: warning: " << warning << '\n';
    }
    err << "oomplan: error: " << e.what() << '\n';
  } catch (const std::exception& e) {
    err << "oomplan: internal error: " << e.what() << '\n';
  } catch (...) {
    err << "oomplan: internal error: unknown exception\n";
  }
  return k_exit_bad_input;
}

}  // namespace oomplan::cli
