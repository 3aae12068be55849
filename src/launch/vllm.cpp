// The `vllm serve` reader: a file holding the command line (shell words,
// continuations, `python -m vllm.entrypoints.openai.api_server`, `docker run
// vllm/vllm-openai`), and translate_vllm_flag for vLLM's spellings of
// oomplan's options. Flag names and values follow vLLM's EngineArgs
// (vllm/engine/arg_utils.py, add_cli_args) and its config classes
// (vllm/config/cache.py, parallel.py, scheduler.py, model.py).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace oomplan {
namespace {

using launch::echo;

using launch::k_max_gpus;
constexpr std::int64_t k_max_tokens = 10'000'000;
constexpr std::int64_t k_max_seqs = 1 << 20;

// vLLM flags that do not take a value (argparse store_true /
// BooleanOptionalAction in vllm/engine/arg_utils.py and
// vllm/entrypoints/openai/cli_args.py).
constexpr std::array k_vllm_switches = {
    "--allow-credentials",
    "--async-scheduling",
    "--calculate-kv-scales",
    "--disable-custom-all-reduce",
    "--disable-fastapi-docs",
    "--disable-frontend-multiprocessing",
    "--disable-log-requests",
    "--disable-log-stats",
    "--disable-sliding-window",
    "--disable-uvicorn-access-log",
    "--enable-auto-tool-choice",
    "--enable-chunked-prefill",
    "--enable-expert-parallel",
    "--enable-log-requests",
    "--enable-lora",
    "--enable-prefix-caching",
    "--enable-prompt-embeds",
    "--enable-prompt-tokens-details",
    "--enable-request-id-headers",
    "--enable-server-load-tracking",
    "--enable-sleep-mode",
    "--enforce-eager",
    "--headless",
    "--multi-step-stream-outputs",
    "--no-enable-chunked-prefill",
    "--no-enable-prefix-caching",
    "--no-enforce-eager",
    "--ray-workers-use-nsight",
    "--return-tokens-as-token-ids",
    "--skip-tokenizer-init",
    "--trust-remote-code",
};

// vLLM flags that do not change GPU memory (server, tokenizer, logging,
// scheduling policy, host-side swap) or that oomplan's vLLM model already
// takes at vLLM's default (block size, CUDA graph capture, prefix caching).
constexpr std::array k_vllm_unused = {
    "--allow-credentials",
    "--allowed-headers",
    "--allowed-methods",
    "--allowed-origins",
    "--api-key",
    "--api-server-count",
    "--async-scheduling",
    "--block-size",
    "--chat-template",
    "--chat-template-content-format",
    "--code-revision",
    "--collect-detailed-traces",
    "--compilation-config",
    "--config-format",
    "--cuda-graph-sizes",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--data-parallel-size-local",
    "--data-parallel-start-rank",
    "--device",
    "--disable-custom-all-reduce",
    "--disable-fastapi-docs",
    "--disable-frontend-multiprocessing",
    "--disable-log-requests",
    "--disable-log-stats",
    "--disable-uvicorn-access-log",
    "--distributed-executor-backend",
    "--download-dir",
    "--enable-auto-tool-choice",
    "--enable-chunked-prefill",
    "--enable-expert-parallel",
    "--enable-log-requests",
    "--enable-prefix-caching",
    "--enable-prompt-tokens-details",
    "--enable-request-id-headers",
    "--enable-server-load-tracking",
    "--enable-sleep-mode",
    "--generation-config",
    "--guided-decoding-backend",
    "--headless",
    "--host",
    "--ignore-patterns",
    "--kv-events-config",
    "--limit-mm-per-prompt",
    "--load-format",
    "--log-config-file",
    "--lora-modules",
    "--max-log-len",
    "--max-logprobs",
    "--max-long-partial-prefills",
    "--max-num-partial-prefills",
    "--max-parallel-loading-workers",
    "--max-seq-len-to-capture",
    "--middleware",
    "--mm-processor-kwargs",
    "--model-impl",
    "--model-loader-extra-config",
    "--multi-step-stream-outputs",
    "--no-enable-chunked-prefill",
    "--no-enable-prefix-caching",
    "--no-enforce-eager",
    "--num-scheduler-steps",
    "--otlp-traces-endpoint",
    "--override-generation-config",
    "--port",
    "--preemption-mode",
    "--prefix-caching-hash-algo",
    "--ray-workers-use-nsight",
    "--reasoning-parser",
    "--response-role",
    "--return-tokens-as-token-ids",
    "--revision",
    "--root-path",
    "--scheduler-delay-factor",
    "--scheduling-policy",
    "--seed",
    "--served-model-name",
    "--skip-tokenizer-init",
    "--ssl-ca-certs",
    "--ssl-cert-reqs",
    "--ssl-certfile",
    "--ssl-keyfile",
    "--structured-outputs-config",
    "--swap-space",
    "--task",
    "--tokenizer",
    "--tokenizer-mode",
    "--tokenizer-revision",
    "--tool-call-parser",
    "--tool-parser-plugin",
    "--trust-remote-code",
    "--uds",
    "--use-tqdm-on-load",
    "--uvicorn-log-level",
    "-O",
};

// Memory-relevant vLLM flags oomplan does not model: an Error names them.
struct Unmodelled {
  std::string_view flag;
  std::string_view why;
};
constexpr std::array k_vllm_unmodelled = {
    Unmodelled{"--cpu-offload-gb",
               "offloading weights to CPU RAM is not modelled; remove it or "
               "set it to 0"},
    Unmodelled{"--kv-cache-memory-bytes",
               "a fixed KV-cache size is not modelled; use "
               "--gpu-memory-utilization"},
    Unmodelled{"--kv-cache-memory",
               "a fixed KV-cache size is not modelled; use "
               "--gpu-memory-utilization"},
    Unmodelled{"--speculative-config",
               "a speculative draft model's memory is not modelled"},
    Unmodelled{"--speculative-model",
               "a speculative draft model's memory is not modelled"},
    Unmodelled{"--num-speculative-tokens",
               "a speculative draft model's memory is not modelled"},
    Unmodelled{"--enable-lora",
               "LoRA adapter slots (max_loras x max_lora_rank) are not "
               "modelled; plan the base model without --enable-lora"},
    Unmodelled{"--max-loras", "LoRA adapter slots are not modelled"},
    Unmodelled{"--max-lora-rank", "LoRA adapter slots are not modelled"},
    Unmodelled{"--max-cpu-loras", "LoRA adapter slots are not modelled"},
    Unmodelled{"--kv-transfer-config",
               "disaggregated prefill (KV transfer) is not modelled"},
    Unmodelled{"--hf-overrides",
               "overriding the model's config changes its size; plan the "
               "overridden config.json instead"},
    Unmodelled{"--disable-sliding-window",
               "a full-length KV cache for sliding-window layers is not "
               "modelled"},
    Unmodelled{"--rope-scaling",
               "a RoPE-scaled context is not modelled; give --max-model-len"},
};

template <std::size_t N>
bool contains(const std::array<const char*, N>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// "--tensor_parallel_size" and "--tensor-parallel-size" are the same flag to
// vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py).
std::string normalize_flag(std::string_view flag) {
  std::string out(flag);
  if (out.rfind("--", 0) == 0) {
    std::replace(out.begin() + 2, out.end(), '_', '-');
  }
  return out;
}

// vllm/engine/arg_utils.py human_readable_int: "32k" = 32,000, "32K" =
// 32,768 (lowercase decimal, uppercase binary; "Ki" in newer releases).
std::optional<std::int64_t> human_int(std::string_view text, std::int64_t hi) {
  if (text.empty()) {
    return std::nullopt;
  }
  std::int64_t mult = 1;
  std::string_view number = text;
  bool decimal_ok = false;
  const auto ends = [&](std::string_view suffix) {
    return text.size() > suffix.size() &&
           text.substr(text.size() - suffix.size()) == suffix;
  };
  if (ends("Ki") || ends("Mi") || ends("Gi")) {
    mult = text[text.size() - 2] == 'K'   ? 1LL << 10
           : text[text.size() - 2] == 'M' ? 1LL << 20
                                          : 1LL << 30;
    number = text.substr(0, text.size() - 2);
  } else {
    switch (text.back()) {
      case 'k':
        mult = 1000;
        decimal_ok = true;
        break;
      case 'm':
        mult = 1'000'000;
        decimal_ok = true;
        break;
      case 'K':
        mult = 1LL << 10;
        break;
      case 'M':
        mult = 1LL << 20;
        break;
      default:
        break;
    }
    if (mult != 1) {
      number = text.substr(0, text.size() - 1);
    }
  }
  if (const auto whole = launch::parse_int(number, 0, hi)) {
    if (*whole > hi / mult) {
      return std::nullopt;
    }
    return *whole * mult;
  }
  if (decimal_ok &&
      number.find_first_not_of("0123456789.") == std::string_view::npos) {
    if (const auto d = launch::parse_double(number)) {
      const double v = *d * static_cast<double>(mult);
      if (v >= 0 && v <= static_cast<double>(hi)) {
        return static_cast<std::int64_t>(v);
      }
    }
  }
  return std::nullopt;
}

[[noreturn]] void bad_value(std::string_view flag, std::string_view value,
                            std::string_view valid) {
  throw Error(fmt::format("{} {} is not valid; {}", flag, echo(value), valid));
}

std::string whole(std::string_view flag, std::string_view value,
                  std::int64_t lo, std::int64_t hi) {
  const auto v = launch::parse_int(value, lo, hi);
  if (!v) {
    bad_value(flag, value,
              fmt::format("use a whole number from {} to {}", lo, hi));
  }
  return fmt::format("{}", *v);
}

std::optional<std::string> kv_dtype(std::string_view flag,
                                    std::string_view value) {
  // vllm/config/cache.py CacheDType.
  if (value == "auto") {
    return "auto";
  }
  if (value == "fp8" || value == "fp8_e4m3" || value == "fp8_e5m2" ||
      value == "fp8_inc") {
    return "fp8";
  }
  if (value == "bfloat16" || value == "bf16") {
    return "bf16";
  }
  if (value == "float16" || value == "half" || value == "fp16") {
    return "fp16";
  }
  bad_value(flag, value,
            "oomplan models auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2 and "
            "fp8_inc (fp8_ds_mla's layout is not modelled)");
}

std::optional<std::string> quantization(std::string_view flag,
                                        std::string_view value) {
  // vllm/model_executor/layers/quantization/__init__.py
  // QUANTIZATION_METHODS; the Marlin kernels read the same AWQ/GPTQ layouts.
  if (value == "awq" || value == "awq_marlin") {
    return "awq";
  }
  if (value == "gptq" || value == "gptq_marlin") {
    return "gptq";
  }
  if (value == "fp8" || value == "fbgemm_fp8" || value == "ptpc_fp8") {
    return "fp8";
  }
  if (value == "mxfp4") {
    return "mxfp4";
  }
  // bitsandbytes holds NF4 with fp32 absmax per 64-block on the GPU: vLLM
  // quantizes in flight with quantize_4bit(quant_type="nf4",
  // compress_statistics=True) and then dequantize_dq() expands the nested
  // absmax back to fp32 at load, for pre-quantized checkpoints too
  // (vllm/model_executor/model_loader/bitsandbytes_loader.py).
  if (value == "bitsandbytes") {
    return "nf4-nodq";
  }
  // The checkpoint's own quantization_config says the format.
  if (value == "compressed-tensors" || value == "modelopt" ||
      value == "modelopt_fp4" || value == "None" || value == "none") {
    return "auto";
  }
  bad_value(flag, value,
            "oomplan models awq, awq_marlin, gptq, gptq_marlin, fp8, "
            "fbgemm_fp8, ptpc_fp8, mxfp4, bitsandbytes, compressed-tensors and "
            "modelopt");
}

// ---- the flags oomplan translates: one row per spelling ----

std::optional<std::string> gpu_count(std::string_view flag,
                                     std::string_view value) {
  return whole(flag, value, 1, k_max_gpus);
}

// vllm/config/cache.py CacheConfig.gpu_memory_utilization: (0, 1].
std::optional<std::string> memory_fraction(std::string_view flag,
                                           std::string_view value) {
  const auto v = launch::parse_double(value);
  if (!v || !(*v > 0 && *v <= 1)) {
    bad_value(flag, value, "use a fraction above 0 and at most 1, e.g. 0.9");
  }
  return launch::number_text(*v);
}

std::optional<std::string> model_len(std::string_view flag,
                                     std::string_view value) {
  if (value == "auto" || value == "-1") {
    bad_value(flag, value,
              "oomplan plans a stated length; give the length to check "
              "(e.g. 32768), and the plan reports the longest that fits");
  }
  const auto v = human_int(value, k_max_tokens);
  if (!v || *v < 1) {
    bad_value(flag, value,
              "use a token count from 1 to 10000000, e.g. 32768 or 32k");
  }
  return fmt::format("{}", *v);
}

std::optional<std::string> token_count(std::string_view flag,
                                       std::string_view value) {
  const auto v = human_int(value, k_max_tokens);
  if (!v || *v < 1) {
    bad_value(flag, value, "use a token count from 1 to 10000000");
  }
  return fmt::format("{}", *v);
}

std::optional<std::string> seq_count(std::string_view flag,
                                     std::string_view value) {
  return whole(flag, value, 1, k_max_seqs);
}

std::optional<std::string> no_value(std::string_view /*flag*/,
                                    std::string_view /*value*/) {
  return std::string();
}

// vllm/config/model.py ModelDType: auto, half, float16, bfloat16, float,
// float32. "auto" is the checkpoint's dtype, which is what oomplan's own
// --dtype default stands for: nothing to translate.
std::optional<std::string> model_dtype(std::string_view flag,
                                       std::string_view value) {
  if (value == "auto") {
    return std::nullopt;
  }
  if (value == "bfloat16" || value == "bf16") {
    return "bf16";
  }
  if (value == "half" || value == "float16" || value == "fp16") {
    return "fp16";
  }
  if (value == "float" || value == "float32" || value == "fp32") {
    return "fp32";
  }
  bad_value(flag, value, "use auto, bfloat16, float16, half, float32");
}

// One spelling of a vLLM flag: the oomplan option it becomes, how its value
// maps (nullopt: no option), and the vLLM file that defines it.
struct VllmFlag {
  std::string_view flag;
  std::string_view option;
  std::optional<std::string> (*value)(std::string_view flag,
                                      std::string_view value);
  std::string_view source;
};

constexpr std::string_view k_parallel_py = "vllm/config/parallel.py";
constexpr std::string_view k_cache_py = "vllm/config/cache.py";
constexpr std::string_view k_model_py = "vllm/config/model.py";
constexpr std::string_view k_scheduler_py = "vllm/config/scheduler.py";

constexpr std::array k_vllm_flags = {
    VllmFlag{"--tensor-parallel-size", "--tp", gpu_count, k_parallel_py},
    VllmFlag{"-tp", "--tp", gpu_count, k_parallel_py},
    VllmFlag{"--pipeline-parallel-size", "--pp", gpu_count, k_parallel_py},
    VllmFlag{"-pp", "--pp", gpu_count, k_parallel_py},
    VllmFlag{"--gpu-memory-utilization", "--gpu-util", memory_fraction,
             k_cache_py},
    VllmFlag{"--max-model-len", "--max-model-len", model_len, k_model_py},
    VllmFlag{"--max-num-batched-tokens", "--max-num-batched-tokens",
             token_count, k_scheduler_py},
    VllmFlag{"--max-num-seqs", "--max-num-seqs", seq_count, k_scheduler_py},
    VllmFlag{"--kv-cache-dtype", "--kv-dtype", kv_dtype, k_cache_py},
    VllmFlag{"--enforce-eager", "--enforce-eager", no_value, k_model_py},
    VllmFlag{"--quantization", "--quant", quantization, k_model_py},
    VllmFlag{"-q", "--quant", quantization, k_model_py},
    VllmFlag{"--dtype", "--dtype", model_dtype, k_model_py},
};

}  // namespace

namespace launch {

std::vector<ShellCommand> split_commands(std::string_view text,
                                         std::string_view origin) {
  std::vector<ShellCommand> commands(1);
  std::string word;
  bool in_word = false;
  std::int64_t line = 1;  // of text[i]
  auto end_word = [&] {
    if (in_word) {
      if (commands.back().words.empty()) {
        commands.back().line = line;
      }
      commands.back().words.push_back(word);
    }
    word.clear();
    in_word = false;
  };
  auto end_command = [&] {
    end_word();
    if (!commands.back().words.empty()) {
      commands.emplace_back();
    }
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\') {
      if (i + 1 < text.size() && text[i + 1] == '\n') {
        i += 2;
        ++line;
        continue;
      }
      if (i + 2 < text.size() && text[i + 1] == '\r' && text[i + 2] == '\n') {
        i += 3;
        ++line;
        continue;
      }
      if (i + 1 < text.size()) {
        word += text[i + 1];
        in_word = true;
      }
      i += 2;
      continue;
    }
    if (c == '\'' || c == '"') {
      const std::size_t start = i;
      in_word = true;
      ++i;
      while (i < text.size() && text[i] != c) {
        if (c == '"' && text[i] == '\\' && i + 1 < text.size() &&
            std::string_view("\"\\$`\n").find(text[i + 1]) !=
                std::string_view::npos) {
          if (text[i + 1] != '\n') {
            word += text[i + 1];
          }
          i += 2;
          continue;
        }
        line += text[i] == '\n' ? 1 : 0;
        word += text[i];
        ++i;
      }
      if (i >= text.size()) {
        const auto open_line =
            1 + std::count(text.begin(),
                           text.begin() + static_cast<long>(start), '\n');
        throw Error(fmt::format(
            "{}: line {}: a {} quote is not closed; close it or remove it",
            origin, open_line, c == '"' ? "double" : "single"));
      }
      ++i;
      continue;
    }
    if (c == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') {
        ++i;
      }
      continue;
    }
    if (c == '\n' || c == ';' || c == '|' || c == '&') {
      end_command();
      line += c == '\n' ? 1 : 0;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      end_word();
      ++i;
      continue;
    }
    word += c;
    in_word = true;
    ++i;
  }
  end_word();
  if (commands.back().words.empty()) {
    commands.pop_back();
  }
  return commands;
}

bool is_assignment(const std::string& w) {
  const auto eq = w.find('=');
  return eq != std::string::npos && eq > 0 && w[0] != '-' &&
         w.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
             "wxyz0123456789_") == eq;
}

std::size_t program_index(const std::vector<std::string>& words,
                          std::vector<std::string>* env) {
  std::size_t i = 0;
  while (i < words.size() &&
         (is_assignment(words[i]) || words[i] == "exec" ||
          words[i] == "nohup" || words[i] == "env" || words[i] == "time" ||
          words[i] == "uvx" || words[i] == "sudo")) {
    if (is_assignment(words[i]) && env != nullptr) {
      env->push_back(words[i]);
    }
    ++i;
  }
  if (i + 1 < words.size() && words[i] == "uv" && words[i + 1] == "run") {
    i += 2;
  }
  return i;
}

}  // namespace launch

namespace {

using launch::is_assignment;
using launch::program_index;
using launch::split_commands;

struct Entry {
  std::vector<std::string> args;  // after the program
  std::vector<std::string> env;   // NAME=value words before it
  bool serve = false;             // `vllm serve`: the first word may be MODEL
};

// Finds the vLLM server in one command; nullopt when it is something else.
std::optional<Entry> find_entry(const std::vector<std::string>& words) {
  Entry entry;
  const std::size_t i = program_index(words, &entry.env);
  if (i >= words.size()) {
    return std::nullopt;
  }
  const std::string& program = words[i];
  if ((program == "vllm" || program.ends_with("/vllm")) &&
      i + 1 < words.size() && words[i + 1] == "serve") {
    entry.serve = true;
    entry.args.assign(words.begin() + static_cast<long>(i) + 2, words.end());
    return entry;
  }
  const bool python = program.find("python") != std::string::npos;
  if (python) {
    for (std::size_t k = i + 1; k + 1 < words.size(); ++k) {
      if (words[k] == "-m" &&
          (words[k + 1] == "vllm.entrypoints.openai.api_server" ||
           words[k + 1] == "vllm.entrypoints.api_server")) {
        entry.args.assign(words.begin() + static_cast<long>(k) + 2,
                          words.end());
        return entry;
      }
      if (words[k] == "-m" && words[k + 1] == "vllm.entrypoints.cli.main" &&
          k + 2 < words.size() && words[k + 2] == "serve") {
        entry.serve = true;
        entry.args.assign(words.begin() + static_cast<long>(k) + 3,
                          words.end());
        return entry;
      }
    }
    return std::nullopt;
  }
  if (program == "docker" || program == "podman") {
    // The vllm/vllm-openai image's entrypoint is the OpenAI server: the
    // words after the image are its arguments (vLLM docs, deployment/docker).
    for (std::size_t k = i + 1; k < words.size(); ++k) {
      if (words[k].rfind("vllm/vllm-openai", 0) == 0) {
        entry.args.assign(words.begin() + static_cast<long>(k) + 1,
                          words.end());
        return entry;
      }
    }
  }
  return std::nullopt;
}

bool is_redirect(const std::string& w) {
  const std::size_t k = w.find_first_not_of("0123456789");
  return k != std::string::npos && (w[k] == '>' || w[k] == '<');
}

// The vLLM server commands in `text`, each with the line it starts on.
std::vector<std::pair<Entry, std::int64_t>> find_servers(
    std::string_view text, const LaunchPlan& plan) {
  std::vector<std::pair<Entry, std::int64_t>> out;
  for (const auto& command : split_commands(text, plan.file)) {
    if (auto entry = find_entry(command.words)) {
      out.emplace_back(std::move(*entry), command.line);
    }
  }
  if (!out.empty()) {
    return out;
  }
  throw Error(fmt::format(
      "{}: holds no `vllm serve` command; write `vllm serve MODEL "
      "[--flags]` or `python -m vllm.entrypoints.openai.api_server --model "
      "MODEL [--flags]`",
      plan.file));
}

void note_environment(const Entry& entry, LaunchPlan& plan) {
  for (const auto& e : entry.env) {
    if (e.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) {
      plan.notes.push_back(fmt::format(
          "{} selects the GPUs; vLLM uses tensor x pipeline x data parallel "
          "of them",
          e));
    }
  }
}

// One flag of the command and its value: "--flag=value", or the next word
// unless the flag is a switch or the next word is another flag.
struct FlagWord {
  std::string flag;
  std::string value;
  bool has_value = false;
};

FlagWord flag_word(const std::vector<std::string>& args, std::size_t& i) {
  FlagWord w{normalize_flag(args[i]), {}, false};
  if (const auto eq = w.flag.find('='); eq != std::string::npos) {
    w.value = w.flag.substr(eq + 1);
    w.flag.resize(eq);
    w.has_value = true;
  } else if (!contains(k_vllm_switches, w.flag) && i + 1 < args.size() &&
             (args[i + 1].empty() || args[i + 1][0] != '-' ||
              launch::parse_double(args[i + 1]))) {
    w.value = args[++i];
    w.has_value = true;
  }
  return w;
}

// The GPUs one engine uses: tensor x pipeline x data parallel.
struct Parallel {
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t dp = 1;
};

// What one flag does to the plan: the model, a data-parallel degree, an
// option (translate_vllm_flag's table), or an unused or unknown key.
void read_flag(const FlagWord& w, LaunchPlan& plan, Parallel& parallel) {
  const std::string& flag = w.flag;
  if (w.value.find('$') != std::string::npos &&
      !contains(k_vllm_unused, flag)) {
    throw Error(fmt::format(
        "{}: {}: {} is a shell variable; oomplan reads the file as written, "
        "so write the value",
        plan.file, flag, echo(w.value)));
  }
  if (flag == "--model") {
    plan.model = w.value;
    plan.model_key = "--model";
    return;
  }
  if (flag == "--config") {
    throw Error(fmt::format(
        "{}: --config: vLLM's YAML config is not read; put its settings on "
        "the command line",
        plan.file));
  }
  if (flag == "--data-parallel-size" || flag == "-dp") {
    parallel.dp = std::stoll(whole(flag, w.value, 1, k_max_gpus));
    return;
  }
  if (!w.has_value && !contains(k_vllm_switches, flag) &&
      (flag == "--tensor-parallel-size" || flag == "-tp" ||
       flag == "--gpu-memory-utilization" || flag == "--max-model-len")) {
    throw Error(fmt::format("{}: {}: the flag needs a value", plan.file, flag));
  }
  std::optional<LaunchOption> option;
  try {
    option = translate_vllm_flag(flag, w.value);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", plan.file, e.what()));
  }
  if (option) {
    if (option->flag == "--tp") {
      parallel.tp = std::stoll(option->value);
    } else if (option->flag == "--pp") {
      parallel.pp = std::stoll(option->value);
    }
    launch::set_option(plan, option->flag, option->value, flag);
  } else if (flag == "--dtype" || flag == "--cpu-offload-gb" ||
             contains(k_vllm_unused, flag)) {
    plan.unused_keys.push_back(flag);
  } else {
    plan.unknown_keys.push_back(flag);
  }
}

// A word that is not a flag: a redirection (skipped with its file), the
// model right after `vllm serve`, or an error.
void read_word(const Entry& entry, const std::vector<std::string>& args,
               std::size_t& i, LaunchPlan& plan) {
  const std::string& word = args[i];
  if (is_redirect(word)) {
    if (word.find_first_not_of("0123456789<>&") == std::string::npos &&
        word.back() != '1' && word.back() != '2') {
      ++i;  // `> file`: the next word is the file
    }
    return;
  }
  if (i == 0 && entry.serve && plan.model.empty()) {
    plan.model = word;
    plan.model_key = "MODEL";
    return;
  }
  throw Error(fmt::format(
      "{}: {}: a word that is not a flag or the model; vLLM would refuse "
      "it too",
      plan.file, echo(word)));
}

void check_engine(const Parallel& p, LaunchPlan& plan) {
  if (plan.model.empty()) {
    throw Error(fmt::format(
        "{}: names no model; give it after `vllm serve` or with --model",
        plan.file));
  }
  const std::int64_t gpus = p.tp * p.pp * p.dp;
  if (gpus > k_max_gpus) {
    throw Error(fmt::format(
        "{}: tensor x pipeline x data parallel = {} GPUs is more than {}",
        plan.file, gpus, k_max_gpus));
  }
  // A node holds at most launch::k_node_gpus cards: a larger engine spans
  // nodes, its pipeline stages (and data-parallel replicas) on different nodes
  // (vLLM docs, serving/distributed_serving: tensor parallel within a node,
  // pipeline parallel across nodes, over Ray or the mp backend).
  if (gpus > launch::k_node_gpus && p.tp <= launch::k_node_gpus &&
      gpus % launch::k_node_gpus == 0) {
    plan.gpus = static_cast<int>(launch::k_node_gpus);
    plan.nodes = static_cast<int>(gpus / launch::k_node_gpus);
    plan.notes.push_back(fmt::format(
        "tensor x pipeline x data parallel = {} GPUs: {} nodes x {} GPUs (a "
        "node holds at most {}; vLLM runs pipeline stages across nodes)",
        gpus, *plan.nodes, launch::k_node_gpus, launch::k_node_gpus));
  } else {
    plan.gpus = static_cast<int>(gpus);
  }
  if (p.dp > 1) {
    plan.notes.push_back(fmt::format(
        "--data-parallel-size {}: {} engine replicas of {} GPUs each; each "
        "GPU holds what one replica's GPU holds",
        p.dp, p.dp, p.tp * p.pp));
  }
}

}  // namespace

std::vector<std::string> split_shell_words(std::string_view text,
                                           std::string_view origin) {
  auto commands = split_commands(text, origin);
  if (commands.empty()) {
    return {};
  }
  return commands.front().words;
}

bool vllm_flag_takes_value(std::string_view flag) {
  const std::string f = normalize_flag(flag);
  if (f.find('=') != std::string::npos) {
    return false;
  }
  return !contains(k_vllm_switches, f);
}

std::optional<LaunchOption> translate_vllm_flag(std::string_view flag_in,
                                                std::string_view value_in) {
  std::string flag = normalize_flag(flag_in);
  std::string value(value_in);
  if (const auto eq = flag.find('='); eq != std::string::npos) {
    value = flag.substr(eq + 1);
    flag.resize(eq);
  }
  const auto row =
      std::find_if(k_vllm_flags.begin(), k_vllm_flags.end(),
                   [&](const VllmFlag& f) { return f.flag == flag; });
  if (row != k_vllm_flags.end()) {
    const auto v = row->value(flag, value);
    if (!v) {
      return std::nullopt;
    }
    return LaunchOption{std::string(row->option), *v, ""};
  }
  for (const auto& u : k_vllm_unmodelled) {
    if (flag == u.flag) {
      if (flag == "--cpu-offload-gb" && launch::parse_double(value) &&
          *launch::parse_double(value) == 0) {
        return std::nullopt;
      }
      throw Error(fmt::format("{}: {}", flag, u.why));
    }
  }
  return std::nullopt;
}

namespace launch {

namespace {

void read_entry(const Entry& entry, LaunchPlan& plan) {
  note_environment(entry, plan);
  Parallel parallel;
  const auto& args = entry.args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (is_redirect(word) || word.empty() || word[0] != '-' || word == "-") {
      read_word(entry, args, i, plan);
    } else {
      read_flag(flag_word(args, i), plan, parallel);
    }
  }
  check_engine(parallel, plan);
}

}  // namespace

void read_vllm(std::string_view text, LaunchPlan& plan) {
  read_entry(find_servers(text, plan).front().first, plan);
}

namespace {

// One compose service's command as words: a string is split as a shell
// would, a list is the words.
std::optional<std::vector<std::string>> compose_words(
    const Json& command, const std::string& where) {
  if (command.is_string()) {
    const auto commands = split_commands(command.get<std::string>(), where);
    return commands.empty() ? std::vector<std::string>{}
                            : commands.front().words;
  }
  if (!command.is_array()) {
    return std::nullopt;
  }
  std::vector<std::string> words;
  for (const Json& w : command) {
    if (w.is_string()) {
      words.push_back(w.get<std::string>());
    } else if (w.is_number()) {
      words.push_back(number_text(w.get<double>()));
    } else {
      return std::nullopt;
    }
  }
  return words;
}

}  // namespace

std::vector<LaunchPlan> read_compose(const Json& doc, const LaunchPlan& base) {
  std::vector<LaunchPlan> plans;
  const Json& services = doc["services"];
  for (const auto& [name, service] : services.items()) {
    if (!service.is_object() ||
        (!service.contains("command") && !service.contains("entrypoint"))) {
      continue;
    }
    const std::string where = fmt::format("{}: services.{}", base.file, name);
    // The container runs entrypoint + command; an entrypoint replaces the
    // image's own (compose-spec, "entrypoint": `entrypoint: ["vllm"]` with
    // `command: [serve, MODEL, ...]` is `vllm serve MODEL ...`).
    std::vector<std::string> words;
    for (const char* key : {"entrypoint", "command"}) {
      if (!service.contains(key)) {
        continue;
      }
      const auto part = compose_words(service[key], where);
      if (!part) {
        throw Error(fmt::format("{}.{}: is not a string or a list of words",
                                where, key));
      }
      words.insert(words.end(), part->begin(), part->end());
    }
    // The vllm/vllm-openai image's entrypoint is the server: command holds
    // its arguments (vLLM docs, deployment/docker); another image's command
    // runs `vllm serve` itself.
    const bool image =
        !service.contains("entrypoint") && service.contains("image") &&
        service["image"].is_string() &&
        service["image"].get<std::string>().find("vllm/vllm-openai") !=
            std::string::npos;
    std::optional<Entry> entry = find_entry(words);
    if (!entry && image) {
      entry = Entry{words, {}, true};
    }
    if (!entry) {
      continue;
    }
    LaunchPlan plan = base;
    plan.file = where;
    read_entry(*entry, plan);
    plans.push_back(std::move(plan));
  }
  if (plans.empty()) {
    throw Error(fmt::format(
        "{}: no compose service runs vLLM; oomplan reads a service whose "
        "image is vllm/vllm-openai or whose command is `vllm serve`",
        base.file));
  }
  return plans;
}

std::vector<LaunchPlan> read_vllm_commands(std::string_view text,
                                           const LaunchPlan& base) {
  const auto servers = find_servers(text, base);
  std::vector<LaunchPlan> plans;
  plans.reserve(servers.size());
  for (const auto& [entry, line] : servers) {
    LaunchPlan plan = base;
    // Every server command is a plan of its own, named by its line when the
    // file holds several ("serve.sh:3").
    if (servers.size() > 1) {
      plan.file = fmt::format("{}:{}", base.file, line);
    }
    read_entry(entry, plan);
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace launch
}  // namespace oomplan
