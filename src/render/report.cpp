#include "oomplan/render/report.hpp"

#include "render/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/advice/sizing.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/util/units.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <string_view>

// Rendering only: the one piece of arithmetic here is bytes -> GiB (and a
// share of the card for the bar). Every number shown comes from the Budget,
// the fixes or the time estimate the core computed.

namespace oomplan {
namespace {

using Json = nlohmann::ordered_json;

constexpr int k_bar_width = 20;

// ANSI styles, only when RenderOptions::color (the CLI decides: a terminal
// and no NO_COLOR).
struct Style {
  bool on = false;
  std::string wrap(std::string_view code, std::string_view text) const {
    if (!on) {
      return std::string(text);
    }
    return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
  }
  std::string bold(std::string_view t) const { return wrap("1", t); }
  std::string dim(std::string_view t) const { return wrap("2", t); }
  std::string red(std::string_view t) const { return wrap("1;31", t); }
  std::string green(std::string_view t) const { return wrap("1;32", t); }
  std::string yellow(std::string_view t) const { return wrap("33", t); }
};

std::string gib(Bytes bytes) {
  return fmt::format("{:.2f}", to_gib(bytes));
}

double share(Bytes part, Bytes whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole)
                   : 0.0;
}

std::string percent(Bytes part, Bytes whole) {
  return fmt::format("{:.1f} %", 100.0 * share(part, whole));
}

std::string bar(Bytes part, Bytes whole) {
  const double s = std::clamp(share(part, whole), 0.0, 1.0);
  const auto filled = static_cast<int>(std::lround(s * k_bar_width));
  std::string out;
  for (int i = 0; i < k_bar_width; ++i) {
    out += i < filled ? "█" : "░";
  }
  return out;
}

// The exact count from the architecture (the catalog's official figures are
// often rounded, e.g. 70.6B for 70,553,706,496).
std::int64_t total_params(const Model& model) {
  return count_params(model).total();
}

std::string yes_no(bool value) {
  return value ? "yes" : "no";
}

}  // namespace

std::string verdict_text(const Budget& b) {
  if (b.fits()) {
    return fmt::format(
        "{} GiB of {} GiB per GPU, {} GiB headroom ({} of usable)",
        gib(b.total_bytes()), gib(b.usable_bytes), gib(b.headroom_bytes()),
        percent(b.headroom_bytes(), b.usable_bytes));
  }
  // Budget::fits() fails on the card, on vLLM's start-up checks or on the
  // node's CPU RAM: say each that fails, never a negative shortfall.
  const bool over_host = b.host_capacity_bytes.has_value() &&
                         b.host_bytes > *b.host_capacity_bytes;
  const std::string host =
      over_host
          ? fmt::format(
                "offloading needs {} GiB of CPU RAM per node, {} GiB "
                "over the node's {} GiB",
                gib(b.host_bytes), gib(b.host_bytes - *b.host_capacity_bytes),
                gib(*b.host_capacity_bytes))
          : std::string();
  if (b.headroom_bytes() < 0) {
    return fmt::format("needs {} GiB per GPU, {} GiB over the {} GiB usable{}",
                       gib(b.total_bytes()), gib(-b.headroom_bytes()),
                       gib(b.usable_bytes), over_host ? "; " + host : "");
  }
  const std::string within = fmt::format(
      "{} GiB of {} GiB per GPU", gib(b.total_bytes()), gib(b.usable_bytes));
  if (b.vllm && !b.vllm->error.empty()) {
    // Within the card, but vLLM's own start-up check fails.
    return fmt::format("{}, but vLLM would not start: {}", within,
                       b.vllm->error);
  }
  return fmt::format("{}, but {}", within, host);
}

namespace {

std::string peak_text(const Peak& p) {
  return fmt::format(
      "peak at {}: {} GiB allocated (torch max_memory_allocated), {} GiB "
      "reserved (max_memory_reserved), {} GiB on the device (nvidia-smi)",
      phase_name(p.phase), gib(p.allocated_bytes), gib(p.reserved_bytes),
      gib(p.device_bytes));
}

// What vLLM's profile ran through the vision tower before the text dummy.
std::string multimodal_line(const VllmVisionProfile& v) {
  const std::string_view s = v.items == 1 ? "" : "s";
  // V0 (no encoder budget) puts an image and a video in each sequence.
  const std::string item =
      v.video ? fmt::format("{}-frame video{}", v.frames, s)
      : v.encoder_budget == 0 && v.frames > 0
          ? fmt::format("sequence{} of an image and a {}-frame video", s,
                        v.frames)
          : fmt::format("image{}", s);
  std::string text =
      fmt::format("  multimodal dummies: {} {} of {} tokens ({} patches each)",
                  v.items, item, v.tokens_per_item, v.patches_per_item);
  if (v.encoder_budget > 0) {
    text +=
        fmt::format(", encoder cache {} x {} rows", v.items, v.encoder_rows);
  }
  return text;
}

Json multimodal_json(const VllmVisionProfile& v) {
  if (v.items == 0) {
    return nullptr;
  }
  return {{"items", v.items},
          {"video", v.video},
          {"frames", v.frames},
          {"tokens_per_item", v.tokens_per_item},
          {"patches_per_item", v.patches_per_item},
          {"encoder_budget", v.encoder_budget},
          {"encoder_rows", v.encoder_rows},
          {"pixel_bytes", v.pixel_bytes},
          {"tower_bytes", v.tower_bytes},
          {"encoder_cache_bytes", v.encoder_cache},
          {"cross_kv_bytes", v.cross_kv_bytes}};
}

std::string time_text(const Plan& plan) {
  const StepTime& t = plan.time;
  if (t.step_s <= 0) {
    return {};
  }
  std::string text;
  if (plan.setup.training()) {
    text = fmt::format(
        "time: ~{:.2f} s per step (compute {:.2f} s, communication {:.2f} s, "
        "offload {:.2f} s), {:.0f} tokens/s",
        t.step_s, t.compute_s, t.comm_s, t.offload_s, t.tokens_per_s);
  } else {
    text = fmt::format(
        "time: ~{:.1f} ms per output token (memory {:.1f} ms, compute {:.1f} "
        "ms, communication {:.1f} ms), {:.0f} tokens/s",
        t.step_s * 1e3, t.memory_s * 1e3, t.compute_s * 1e3, t.comm_s * 1e3,
        t.tokens_per_s);
  }
  if (t.usd_per_mtok > 0) {
    fmt::format_to(std::back_inserter(text), ", ${:.2f} per million tokens",
                   t.usd_per_mtok);
  }
  return text;
}

std::string fix_args(const Plan& plan, const Fix& fix) {
  const Gpu& gpu = fix.gpu != nullptr ? *fix.gpu : *plan.gpu;
  return plan_args(plan.model_arg, *plan.model, gpu, fix.request);
}

std::vector<std::string> fix_argv(const Plan& plan, const Fix& fix) {
  const Gpu& gpu = fix.gpu != nullptr ? *fix.gpu : *plan.gpu;
  return plan_argv(plan.model_arg, *plan.model, gpu, fix.request);
}

// A group's heading in the text report.
std::string_view group_heading(FixGroup group) {
  switch (group) {
    case FixGroup::same_hardware:
      return "on the same GPUs, the same job:";
    case FixGroup::more_gpus:
      return "on more of the same GPUs:";
    case FixGroup::other_gpus:
      return "on other GPUs:";
    case FixGroup::change_job:
      return "changing the job:";
    case FixGroup::switch_framework:
      return "on the same GPUs, the same job, another framework or engine:";
  }
  return "";
}

// The launch blocks as one line (the JSON's engine_flags).
std::string launch_line(const Fix& fix) {
  std::string out;
  for (const LaunchBlock& b : fix.launch) {
    out += out.empty() ? "" : "; ";
    out += b.file.empty() ? b.framework : b.framework + " " + b.file;
    out += ": " + b.text;
  }
  return out;
}

// Text built line by line: put("...") appends one line.
struct Lines {
  std::string out;
  void operator()(std::string_view text) {
    out += text;
    out += '\n';
  }
};

bool has_stages(const Plan& plan) {
  return !plan.budget.stages.empty() &&
         (plan.setup.pp > 1 || plan.setup.split_layers);
}

}  // namespace

std::string billions(std::int64_t params) {
  return fmt::format("{:.2f}B", static_cast<double>(params) / 1e9);
}

std::string md_cell(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const std::string_view rest = text.substr(i);
    const bool after_www = i >= 3 && (text.substr(i - 3, 3) == "www" ||
                                      text.substr(i - 3, 3) == "WWW");
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '@' || (c == ':' && rest.starts_with("://")) ||
               (c == '.' && after_www)) {
      out += '`';
      out += c;
      out += '`';
    } else if (std::string_view("\\`*_[]!~|#").find(c) !=
               std::string_view::npos) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

std::string md_code(std::string_view text, bool in_table) {
  std::size_t longest = 0;
  std::size_t run = 0;
  std::string body;
  body.reserve(text.size() + 4);
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (c == '\n' || c == '\r') {
      body += ' ';
    } else if (c == '|' && in_table) {
      body += "\\|";
    } else {
      body += c;
    }
  }
  // A span that starts or ends with a backtick, or is only spaces, needs one
  // space inside each fence (CommonMark strips one from each end).
  const bool pad = body.empty() || body.front() == '`' || body.back() == '`' ||
                   body.find_first_not_of(' ') == std::string::npos;
  const std::string fence(longest + 1, '`');
  return pad ? fence + " " + body + " " + fence : fence + body + fence;
}

namespace {

// Characters, not bytes: UTF-8 continuation bytes take no column.
std::size_t columns_of(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(
      text.begin(), text.end(),
      [](char c) { return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U; }));
}

}  // namespace

std::string text_table(const std::vector<TableColumn>& columns,
                       const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    widths[c] = columns_of(columns[c].title);
    for (const auto& row : rows) {
      widths[c] = std::max(widths[c], columns_of(row[c]));
    }
  }
  std::string out;
  auto put_row = [&](auto cell) {
    std::string line;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::string_view text = cell(c);
      const std::string pad(widths[c] - columns_of(text), ' ');
      line += c == 0 ? "" : "  ";
      line +=
          columns[c].right ? pad + std::string(text) : std::string(text) + pad;
    }
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    out += line + "\n";
  };
  put_row([&](std::size_t c) { return columns[c].title; });
  for (const auto& row : rows) {
    put_row([&](std::size_t c) { return std::string_view(row[c]); });
  }
  return out;
}

std::string markdown_table(const std::vector<TableColumn>& columns,
                           const std::vector<std::vector<std::string>>& rows) {
  std::string out = "|";
  std::string rule = "|";
  for (const TableColumn& column : columns) {
    out += fmt::format(" {} |", md_cell(column.title));
    rule += column.right ? "---:|" : "---|";
  }
  out += "\n" + rule + "\n";
  for (const auto& row : rows) {
    out += "|";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool code = i < columns.size() && columns[i].code;
      out +=
          fmt::format(" {} |", code ? md_code(row[i], true) : md_cell(row[i]));
    }
    out += "\n";
  }
  return out;
}

std::string setup_line(const Model& model, const ModelOrigin& origin,
                       const Gpu* gpu, const Setup& request,
                       const Resolved& setup) {
  std::string line =
      fmt::format("{} ({} params, {})", model.name,
                  billions(total_params(model)), origin_phrase(model, origin));
  if (gpu != nullptr) {
    if (setup.nodes > 1) {
      fmt::format_to(std::back_inserter(line), " on {} nodes x {} {}",
                     setup.nodes, setup.gpus, gpu->name);
    } else {
      fmt::format_to(std::back_inserter(line), " on {} x {}", setup.gpus,
                     gpu->name);
    }
  }
  const Gpu none;
  const OptionContext context{model, gpu != nullptr ? *gpu : none, request,
                              setup};
  std::string_view separator = ": ";
  for (const OptionRow& row : option_rows()) {
    if (gpu == nullptr && row.group == OptionGroup::hardware) {
      continue;
    }
    const std::string part = row.describe(context);
    if (!part.empty()) {
      line += separator;
      line += part;
      separator = ", ";
    }
  }
  return line;
}

Json model_json(const Model& model, const ModelOrigin& origin) {
  constexpr std::array<std::string_view, 4> k_steps = {"catalog", "path",
                                                       "hf_cache", "mirror"};
  Json source = {{"step", k_steps.at(static_cast<std::size_t>(origin.step))}};
  if (!origin.detail.empty()) {
    source["detail"] = origin.detail;
  }
  return {{"name", model.name},
          {"params", total_params(model)},
          {"source", source}};
}

Json setup_json(const Model& model, const Gpu& gpu, const Setup& request,
                const Resolved& setup) {
  const OptionContext context{model, gpu, request, setup};
  Json out = Json::object();
  for (const OptionRow& row : option_rows()) {
    std::visit([&](const auto& value) { out[std::string(row.key)] = value; },
               row.json(context));
  }
  return out;
}

namespace {

// The checkpoint's stored format and the run's: "fp8", "bf16".
std::string_view weight_format(Quant quant, Dtype dtype) {
  return quant != Quant::none ? quant_name(quant) : dtype_name(dtype);
}

// Why the safetensors index's metadata.total_size does not set the weights
// (memory.hpp checkpoint_size_use); empty when it does or agrees.
std::string checkpoint_size_text(const Model& m, const Resolved& s) {
  const std::string size =
      fmt::format("the safetensors index's metadata.total_size ({} GiB)",
                  gib(m.checkpoint_bytes));
  switch (checkpoint_size_use(m, s)) {
    case CheckpointSizeUse::converted:
      return fmt::format(
          "{} is not the weights' size here: the checkpoint stores them in "
          "{} and this run loads them in {}, priced per parameter",
          size, weight_format(m.checkpoint_quant, m.checkpoint_dtype),
          weight_format(s.quant, s.dtype));
    case CheckpointSizeUse::mtp_layer:
      return fmt::format(
          "{} counts the multi-token-prediction layer, which is not loaded "
          "for decoding: the weights are priced per parameter",
          size);
    default:
      return {};
  }
}

// The s^2 scores of eager (or AutoAWQ's fused) attention, and a fused cache
// shorter than the sequence.
void attention_texts(const Budget& b, const Resolved& s,
                     std::vector<std::string>& texts) {
  if (b.has(Warning::eager_attention_s2)) {
    texts.push_back(
        s.awq_fused_len > 0
            ? "AutoAWQ's fused attention materialises batch x heads x seq^2 "
              "scores in fp16 and fp32 whatever --attn; unfused AWQ layers "
              "(--awq-fused-len 0) with --attn sdpa or flash avoid them"
            : "eager attention materialises batch x heads x seq^2 attention "
              "scores; --attn sdpa or flash avoids them");
  }
  if (b.has(Warning::awq_cache_rolls)) {
    texts.push_back(fmt::format(
        "--seq {} exceeds AutoAWQ's fused cache of {} tokens, which then "
        "rolls over and drops the oldest tokens; load with max_seq_len={} "
        "(--awq-fused-len {})",
        s.seq, s.awq_fused_len, s.seq, s.seq));
  }
}

}  // namespace

std::vector<std::string> warning_texts(const Plan& plan) {
  std::vector<std::string> texts;
  const Budget& b = plan.budget;
  const Resolved& s = plan.setup;
  const std::string gpu_name = plan.gpu != nullptr ? plan.gpu->name : "GPU";
  if (b.has(Warning::no_nvlink)) {
    texts.push_back(fmt::format(
        "{} cards have no NVLink: tensor, pipeline and sharded-data traffic "
        "goes over PCIe and can dominate the step time",
        gpu_name));
  }
  // Issue 4 §2: the time model says communication dominates (advice engineer).
  if (plan.time.no_nvlink && plan.time.comm_bound) {
    texts.push_back(fmt::format(
        "communication over PCIe ({:.2f} s per step) exceeds compute ({:.2f} "
        "s): NVLink cards or larger micro-batches cut it",
        plan.time.comm_s, plan.time.compute_s));
  }
  if (b.has(Warning::kv_replicated) && plan.model != nullptr) {
    texts.push_back(fmt::format(
        "{} KV heads < tp {}: every GPU keeps a full copy of the KV heads it "
        "needs, so the KV cache does not shrink with more tensor parallelism",
        plan.model->num_kv_heads, s.tp));
  }
  attention_texts(b, s, texts);
  if (b.has(Warning::seq_beyond_context) && plan.model != nullptr) {
    // vLLM sizes for --max-model-len; transformers for --seq.
    const bool vllm = s.engine == Engine::vllm && !s.training();
    texts.push_back(fmt::format(
        "{} {} is beyond the model's {}-token context "
        "(max_position_embeddings)",
        vllm ? "--max-model-len" : "--seq", vllm ? s.max_model_len : s.seq,
        plan.model->max_position_embeddings));
  }
  if (b.has(Warning::paged_unified_memory)) {
    texts.push_back(
        "paged optimizer states live in CUDA unified memory: they count on the "
        "device, not in torch.cuda.max_memory_allocated(), and page to the "
        "host under pressure");
  }
  if (b.has(Warning::fp8_emulated)) {
    texts.push_back(fmt::format(
        "{} has no FP8 tensor cores: fp8 weights or KV are stored in 8 bits "
        "but computed in 16 bits",
        gpu_name));
  }
  if (b.has(Warning::host_memory)) {
    texts.push_back(
        b.host_capacity_bytes
            ? fmt::format("offloading needs {} GiB of CPU RAM per node "
                          "(pinned buffers included) of the node's {} GiB",
                          gib(b.host_bytes), gib(*b.host_capacity_bytes))
            : fmt::format("offloading needs {} GiB of CPU RAM per node "
                          "(pinned buffers included); --host-ram checks it",
                          gib(b.host_bytes)));
  }
  if (b.has(Warning::low_headroom)) {
    texts.push_back(fmt::format(
        "less than the {} GiB margin free ({}): a longer prompt, a larger "
        "batch or allocator fragmentation may still run out of memory",
        gib(b.margin_bytes),
        plan.request.min_headroom_gib || plan.request.min_headroom_share
            ? std::string("--min-headroom")
            : fmt::format("{:.0f} % of the card, the default --min-headroom",
                          k_low_headroom_share * 100)));
  }
  if (b.has(Warning::flash_unsupported)) {
    texts.push_back(fmt::format(
        "flash attention needs compute capability 8.0 or newer; {} falls back "
        "to sdpa",
        gpu_name));
  }
  // The user's own checkpoint (a path or the Hugging Face cache): say why
  // its index's size was not used. The catalog's sizes are its own.
  if (plan.model != nullptr && plan.origin.step != ModelStep::catalog &&
      plan.origin.step != ModelStep::mirror &&
      !b.has(Warning::mxfp4_dequantized)) {
    if (auto why = checkpoint_size_text(*plan.model, s); !why.empty()) {
      texts.push_back(std::move(why));
    }
  }
  if (b.has(Warning::mxfp4_dequantized)) {
    texts.emplace_back(
        "the MXFP4 checkpoint is planned dequantized to bf16, as the usual "
        "recipe loads it for training (Mxfp4Config(dequantize=True)): no "
        "framework trains through MXFP4 weights as stored");
  }
  return texts;
}

namespace {

// The per-GPU table: one row per component with its bar, the total, the
// capacity and (with a reserve) the usable memory.
void text_budget(Lines& put, const Budget& b) {
  // The name column fits the longest name ("reference_weights" of a DPO
  // plan), 14 at least, so the numbers stay aligned.
  std::size_t width = 14;
  for (std::size_t i = 0; i < b.count; ++i) {
    width = std::max(width, b.components[i].name.size() + 1);
  }
  put(fmt::format("{:<{}}{:>9}  {:>8}", "per GPU", width + 2, "GiB",
                  "of card"));
  const auto row = [&](std::string_view name, Bytes bytes, bool with_bar) {
    std::string line =
        fmt::format("  {:<{}}{:>9}  {:>8}", name, width, gib(bytes),
                    percent(bytes, b.capacity_bytes));
    if (with_bar) {
      line += "  " + bar(bytes, b.capacity_bytes);
    }
    put(line);
  };
  for (std::size_t i = 0; i < b.count; ++i) {
    // Formulas are in the JSON and Markdown; here they would wrap the table.
    row(b.components[i].name, b.components[i].bytes, true);
  }
  row("total", b.total_bytes(), true);
  row("capacity", b.capacity_bytes, false);
  if (b.usable_bytes != b.capacity_bytes) {
    row("usable", b.usable_bytes, false);
  }
}

// FITS / DOES NOT FIT, the peak, host RAM and the time estimate.
void text_verdict(Lines& put, const Style& st, const Plan& plan) {
  const Budget& b = plan.budget;
  put(b.fits()
          ? fmt::format("{} {}", st.green("FITS:"), verdict_text(b))
          : fmt::format("{} {}", st.red("DOES NOT FIT:"), verdict_text(b)));
  put(peak_text(b.peak));
  if (b.host_bytes > 0) {
    put(fmt::format("host RAM: {} GiB per node", gib(b.host_bytes)));
  }
  if (const std::string t = time_text(plan); !t.empty()) {
    put(t);
  }
}

// Pipeline stages (or --split layers): the layers and bytes of each.
void text_stages(Lines& put, const Budget& b) {
  put("");
  put(fmt::format("{:<8}{:>8}{:>11}{:>11}{:>13}{:>11}", "stage", "layers",
                  "weights", "kv_cache", "activations", "total GiB"));
  for (const Stage& stage : b.stages) {
    put(fmt::format("  {:<6}{:>8}{:>11}{:>11}{:>13}{:>11}", stage.stage,
                    stage.layers, gib(stage.weights_bytes),
                    gib(stage.kv_cache_bytes), gib(stage.activations_bytes),
                    gib(stage.total_bytes)));
  }
}

// The assumptions and options behind a vLLM profile: version, engine,
// profiler, CUDA graphs, multimodal inputs, tensor-parallel transport.
void text_vllm_assumptions(Lines& put, const VllmProfile& v,
                           const Resolved& s) {
  put(fmt::format("  assumed: vLLM {}, {} engine ({}); profiler: {}", v.version,
                  v.engine, v.engine_reason, v.profiler));
  if (v.graphs > 0) {
    put(fmt::format(
        "  CUDA graphs: {} at {} batch sizes ({} to {}), {} graphs, {}",
        v.cudagraph_mode, v.capture_sizes.size(), v.capture_sizes.front(),
        v.capture_sizes.back(), v.graphs,
        v.graphs_in_budget ? "inside gpu-util"
                           : "captured after the KV cache"));
  }
  if (v.vision.items > 0) {
    put(multimodal_line(v.vision));
  }
  if (s.tp > 1) {
    put(fmt::format(
        "  tensor parallel: {}, custom all-reduce {}",
        v.p2p ? "P2P between the GPUs" : "no P2P (NCCL through host memory)",
        v.custom_all_reduce ? "on" : "off"));
  }
}

// vLLM's start-up profile: what it requests, where it goes, the KV cache.
void text_vllm_profile(Lines& put, const Style& st, const VllmProfile& v,
                       const Resolved& s) {
  put("");
  put("vLLM start-up profile (the GPU that limits the KV cache):");
  auto row = [&put](std::string_view name, Bytes bytes) {
    put(fmt::format("  {:<32}{:>9} GiB", name, gib(bytes)));
  };
  row("requested (gpu-util x capacity)", v.requested_bytes);
  row("weights", v.weights_bytes);
  row("peak activation", v.activation_peak_bytes);
  row("non-torch memory", v.non_torch_bytes);
  row("CUDA graphs", v.cuda_graph_bytes);
  row("KV cache", v.kv_cache_bytes);
  put(fmt::format("  {:<32}{:>9} (at {} B per token per GPU)", "KV tokens",
                  v.kv_tokens, v.kv_bytes_per_token));
  put(fmt::format("  {:<32}{:>9.2f}x (requests of {} tokens)",
                  "max concurrency", v.max_concurrency, s.max_model_len));
  put(fmt::format("  {:<32}{:>9} tokens", "largest max-model-len",
                  v.max_model_len_fit));
  text_vllm_assumptions(put, v, s);
  if (!v.error.empty()) {
    put(st.red(fmt::format("  vLLM would not start: {}", v.error)));
  }
}

void text_warnings(Lines& put, const Style& st,
                   const std::vector<std::string>& warnings) {
  put("");
  put("warnings:");
  for (const auto& w : warnings) {
    put(st.yellow(fmt::format("  - {}", w)));
  }
}

// One fix: its rank, new peak, whether it fits and its title, then its
// cost, its oomplan command and each framework's settings.
void text_fix(Lines& put, const Style& st, const Plan& plan, const Fix& fix) {
  const std::string fits = yes_no(fix.fits);
  put(fmt::format("  {:>2}  {:>9} GiB  {:<5} {}", fix.rank,
                  gib(fix.total_bytes),
                  fix.fits ? st.green(fits) : st.red(fits), fix.title));
  if (!fix.cost.empty()) {
    put(fmt::format("{:27}cost: {}", "", fix.cost));
  }
  put(st.dim(fmt::format("{:27}oomplan {}", "", fix_args(plan, fix))));
  for (const LaunchBlock& block : fix.launch) {
    const std::string name = block.file.empty()
                                 ? block.framework
                                 : block.framework + " " + block.file;
    put(st.dim(fmt::format("{:27}{}: {}", "", name, block.text)));
  }
}

// The fixes, best first, under their groups' headings.
void text_fixes(Lines& put, const Style& st, const Plan& plan) {
  put("");
  put("fixes, best first (each re-priced by the same model):");
  put(fmt::format("  {:>2}  {:>13}  {:<5} {}", "#", "new peak", "fits", "fix"));
  std::optional<FixGroup> group;
  for (const Fix& fix : plan.fixes) {
    if (group != fix.group) {
      group = fix.group;
      put(fmt::format("  {}", group_heading(fix.group)));
    }
    text_fix(put, st, plan, fix);
  }
}

}  // namespace

std::string render_text(const Plan& plan, const RenderOptions& options) {
  const Style st{options.color};
  const Budget& b = plan.budget;
  Lines put;
  put(st.bold(setup_line(*plan.model, plan.origin, plan.gpu, plan.request,
                         plan.setup)));
  put("");
  text_budget(put, b);
  put("");
  text_verdict(put, st, plan);
  if (has_stages(plan)) {
    text_stages(put, b);
  }
  if (b.vllm) {
    text_vllm_profile(put, st, *b.vllm, plan.setup);
  }
  if (const auto warnings = warning_texts(plan); !warnings.empty()) {
    text_warnings(put, st, warnings);
  }
  if (!plan.fixes.empty()) {
    text_fixes(put, st, plan);
  } else if (!b.fits()) {
    put("");
    put("no fix found in the catalog; try oomplan fit for a full search");
  }
  return put.out;
}

Json fix_json(const Plan& plan, const Fix& fix) {
  Json launch = Json::array();
  for (const LaunchBlock& block : fix.launch) {
    Json b = {{"framework", block.framework}, {"text", block.text}};
    if (!block.file.empty()) {
      b["file"] = block.file;
    }
    launch.push_back(std::move(b));
  }
  return {{"rank", fix.rank},
          {"id", fix.id},
          {"title", fix.title},
          {"group", fix_group_name(fix.group)},
          {"args", fix_args(plan, fix)},
          {"argv", fix_argv(plan, fix)},
          {"total_bytes", fix.total_bytes},
          {"fits", fix.fits},
          {"saves_bytes", fix.saves_bytes},
          {"step_factor", fix.step_factor},
          {"host_bytes", fix.host_bytes},
          {"host_capacity_bytes", fix.host_capacity_bytes
                                      ? Json(*fix.host_capacity_bytes)
                                      : Json(nullptr)},
          {"risk", risk_name(fix.risk)},
          {"cost", fix.cost},
          {"launch", launch},
          {"engine_flags", launch_line(fix)}};
}

std::string render_json(const Plan& plan) {
  const Budget& b = plan.budget;
  const Resolved& s = plan.setup;
  const Model& model = *plan.model;
  Json doc;
  doc["schema"] = "oomplan.plan/1";
  doc["model"] = model_json(model, plan.origin);
  doc["gpu"] = {{"name", plan.gpu->name},
                {"count", s.total_gpus()},
                {"capacity_bytes", plan.gpu->capacity_bytes}};
  doc["setup"] = setup_json(model, *plan.gpu, plan.request, s);

  Json components = Json::array();
  for (std::size_t i = 0; i < b.count; ++i) {
    const Component& c = b.components[i];
    components.push_back(
        {{"name", c.name}, {"bytes", c.bytes}, {"formula", c.formula}});
  }
  doc["components"] = components;
  doc["total_bytes"] = b.total_bytes();
  doc["usable_bytes"] = b.usable_bytes;
  doc["fits"] = b.fits();
  doc["headroom_bytes"] = b.headroom_bytes();
  doc["margin_bytes"] = b.margin_bytes;
  doc["host_bytes"] = b.host_bytes;
  doc["host_capacity_bytes"] =
      b.host_capacity_bytes ? Json(*b.host_capacity_bytes) : Json(nullptr);
  doc["warnings"] = warning_texts(plan);

  Json fixes = Json::array();
  for (const Fix& fix : plan.fixes) {
    fixes.push_back(fix_json(plan, fix));
  }
  doc["fixes"] = fixes;
  doc["peak"] = {{"allocated_bytes", b.peak.allocated_bytes},
                 {"reserved_bytes", b.peak.reserved_bytes},
                 {"device_bytes", b.peak.device_bytes},
                 {"phase", phase_name(b.peak.phase)}};
  if (has_stages(plan)) {
    Json stages = Json::array();
    for (const Stage& stage : b.stages) {
      stages.push_back({{"stage", stage.stage},
                        {"layers", stage.layers},
                        {"weights_bytes", stage.weights_bytes},
                        {"kv_cache_bytes", stage.kv_cache_bytes},
                        {"activations_bytes", stage.activations_bytes},
                        {"total_bytes", stage.total_bytes}});
    }
    doc["stages"] = stages;
  }
  if (b.vllm) {
    const VllmProfile& v = *b.vllm;
    doc["vllm"] = {{"requested_bytes", v.requested_bytes},
                   {"weights_bytes", v.weights_bytes},
                   {"activation_peak_bytes", v.activation_peak_bytes},
                   {"non_torch_bytes", v.non_torch_bytes},
                   {"cuda_graph_bytes", v.cuda_graph_bytes},
                   {"kv_cache_bytes", v.kv_cache_bytes},
                   {"kv_bytes_per_token", v.kv_bytes_per_token},
                   {"kv_tokens", v.kv_tokens},
                   {"max_concurrency", v.max_concurrency},
                   {"max_model_len_fit", v.max_model_len_fit},
                   {"version", v.version},
                   {"engine", v.engine},
                   {"engine_reason", v.engine_reason},
                   {"profiler", v.profiler},
                   {"p2p", v.p2p},
                   {"custom_all_reduce", v.custom_all_reduce},
                   {"cudagraph_mode", v.cudagraph_mode},
                   {"cudagraph_capture_sizes", v.capture_sizes},
                   {"cudagraphs", v.graphs},
                   {"cudagraphs_in_budget", v.graphs_in_budget},
                   {"block_size", v.block_size},
                   {"multimodal", multimodal_json(v.vision)},
                   {"error", v.error.empty() ? Json(nullptr) : Json(v.error)}};
  }
  const StepTime& t = plan.time;
  doc["time"] = {{"step_s", t.step_s},
                 {"compute_s", t.compute_s},
                 {"memory_s", t.memory_s},
                 {"comm_s", t.comm_s},
                 {"offload_s", t.offload_s},
                 {"tokens_per_s", t.tokens_per_s},
                 {"usd_per_mtok", t.usd_per_mtok}};
  return json_text(doc, 2) + "\n";
}

std::string render_markdown(const Plan& plan) {
  const Budget& b = plan.budget;
  Lines put;
  put(fmt::format("### oomplan: {} on {} x {}", md_cell(plan.model->name),
                  plan.setup.total_gpus(), md_cell(plan.gpu->name)));
  put("");
  put(md_code(
      setup_line(*plan.model, plan.origin, plan.gpu, plan.request, plan.setup),
      false));
  put("");
  put("| component (per GPU) | GiB | of card | formula |");
  put("|---|---:|---:|---|");
  for (std::size_t i = 0; i < b.count; ++i) {
    const Component& c = b.components[i];
    put(fmt::format("| {} | {} | {} | {} |", c.name, gib(c.bytes),
                    percent(c.bytes, b.capacity_bytes),
                    md_code(c.formula, true)));
  }
  put(fmt::format("| **total** | **{}** | **{}** | |", gib(b.total_bytes()),
                  percent(b.total_bytes(), b.capacity_bytes)));
  put(fmt::format("| capacity | {} | 100.0 % | |", gib(b.capacity_bytes)));
  put("");
  put(fmt::format("**{}** {}",
                  b.fits() ? "Fits:" : "Does not fit:", verdict_text(b)));
  put("");
  put(peak_text(b.peak));
  if (b.host_bytes > 0) {
    put("");
    put(fmt::format("Host RAM: {} GiB per node.", gib(b.host_bytes)));
  }
  if (b.vllm && !b.vllm->error.empty()) {
    put("");
    put(fmt::format("vLLM would not start: {}", md_cell(b.vllm->error)));
  }
  const auto warnings = warning_texts(plan);
  if (!warnings.empty()) {
    put("");
    put("Warnings:");
    put("");
    for (const auto& w : warnings) {
      put(fmt::format("- {}", md_cell(w)));
    }
  }
  if (!plan.fixes.empty()) {
    put("");
    put("| # | group | fix | new peak (GiB) | fits | cost | command |");
    put("|---:|---|---|---:|---|---|---|");
    for (const Fix& fix : plan.fixes) {
      put(fmt::format("| {} | {} | {} | {} | {} | {} | {} |", fix.rank,
                      fix_group_name(fix.group), md_cell(fix.title),
                      gib(fix.total_bytes), yes_no(fix.fits), md_cell(fix.cost),
                      md_code("oomplan " + fix_args(plan, fix), true)));
    }
  }
  return put.out;
}

// --- Sizing: `oomplan MODEL` without --gpus.

namespace {

std::string sizing_args(const Sizing& sizing, const SizingRow& row) {
  return plan_args(sizing.model_arg, *sizing.model, *row.gpu, row.request);
}

// The sizing header: the user's setup, before any card is chosen.
std::string sizing_line(const Sizing& sizing) {
  return setup_line(*sizing.model, sizing.origin, nullptr, sizing.setup,
                    resolve(*sizing.model, Gpu{}, sizing.setup));
}

}  // namespace

std::string render_sizing_text(const Sizing& sizing,
                               const RenderOptions& options) {
  const Style st{options.color};
  Lines put;
  put(st.bold(sizing_line(sizing)));
  put(fmt::format("the fewest GPUs that fit, per common GPU (up to {}):",
                  sizing.max_gpus));
  put("");
  put(fmt::format("  {:<12}{:>5}{:>14}{:>12}{:>12}  {}", "GPU", "GPUs",
                  "per GPU GiB", "usable", "headroom", "command"));
  for (const SizingRow& row : sizing.rows) {
    if (row.fits) {
      put(fmt::format(
          "  {:<12}{:>5}{:>14}{:>12}{:>12}  oomplan {}", row.gpu->name,
          row.count, gib(row.total_bytes), gib(row.usable_bytes),
          gib(row.usable_bytes - row.total_bytes), sizing_args(sizing, row)));
    } else {
      put(st.dim(fmt::format("  {:<12}{:>5}  does not fit on {} or fewer",
                             row.gpu->name, "-", sizing.max_gpus)));
    }
  }
  return put.out;
}

std::string render_sizing_json(const Sizing& sizing) {
  const Model& model = *sizing.model;
  Json doc;
  doc["schema"] = "oomplan.sizing/1";
  doc["model"] = model_json(model, sizing.origin);
  doc["max_gpus"] = sizing.max_gpus;
  Json rows = Json::array();
  for (const SizingRow& row : sizing.rows) {
    rows.push_back(
        {{"gpu", row.gpu->name},
         {"count", row.fits ? Json(row.count) : Json(nullptr)},
         {"args", row.fits ? Json(sizing_args(sizing, row)) : Json(nullptr)},
         {"total_bytes", row.total_bytes},
         {"usable_bytes", row.usable_bytes},
         {"capacity_bytes", row.gpu->capacity_bytes},
         {"headroom_bytes", row.usable_bytes - row.total_bytes},
         {"fits", row.fits}});
  }
  doc["options"] = rows;
  return json_text(doc, 2) + "\n";
}

std::string render_sizing_markdown(const Sizing& sizing) {
  Lines put;
  put(fmt::format("### oomplan: the fewest GPUs for {}",
                  md_cell(sizing.model->name)));
  put("");
  put(md_code(sizing_line(sizing), false));
  put("");
  put("| GPU | GPUs | per GPU (GiB) | usable (GiB) | command |");
  put("|---|---:|---:|---:|---|");
  for (const SizingRow& row : sizing.rows) {
    if (row.fits) {
      put(fmt::format("| {} | {} | {} | {} | {} |", md_cell(row.gpu->name),
                      row.count, gib(row.total_bytes), gib(row.usable_bytes),
                      md_code("oomplan " + sizing_args(sizing, row), true)));
    } else {
      put(fmt::format("| {} | - | does not fit on {} | | |",
                      md_cell(row.gpu->name), sizing.max_gpus));
    }
  }
  return put.out;
}

// --- The catalog.

namespace {

std::vector<TableColumn> model_columns() {
  return {{"model", false},
          {"params", true},
          {"layers", true},
          {"hidden", true},
          {"heads/kv", true},
          {"context", true},
          {"HF id and aliases", false}};
}

std::vector<std::vector<std::string>> model_rows(const Catalog& catalog) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(catalog.models.size());
  for (const Model& m : catalog.models) {
    std::string names = m.hf_id;
    for (const auto& alias : m.aliases) {
      if (alias != m.hf_id) {
        names += ", " + alias;
      }
    }
    rows.push_back({m.name, billions(total_params(m)),
                    std::to_string(m.num_layers), std::to_string(m.hidden_size),
                    fmt::format("{}/{}", m.num_heads, m.num_kv_heads),
                    std::to_string(m.max_position_embeddings), names});
  }
  return rows;
}

std::vector<TableColumn> gpu_columns() {
  return {{"GPU", false},    {"GiB", true},    {"TB/s", true},
          {"bf16 TF", true}, {"NVLink", true}, {"common", true},
          {"aliases", false}};
}

std::vector<std::vector<std::string>> gpu_rows(const Catalog& catalog) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(catalog.gpus.size());
  for (const Gpu& g : catalog.gpus) {
    std::string aliases;
    for (const auto& alias : g.aliases) {
      aliases += aliases.empty() ? alias : ", " + alias;
    }
    rows.push_back({g.name, gib(g.capacity_bytes),
                    fmt::format("{:.2f}", g.bandwidth_gb_s / 1e3),
                    fmt::format("{:.0f}", g.bf16_tflops),
                    g.nvlink_gb_s > 0 ? fmt::format("{:.0f}", g.nvlink_gb_s)
                                      : std::string("PCIe"),
                    g.common ? "yes" : "", aliases});
  }
  return rows;
}

std::vector<TableColumn> instance_columns() {
  return {{"instance", false}, {"GPUs", false}};
}

std::vector<std::vector<std::string>> instance_rows(const Catalog& catalog) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(catalog.instances.size());
  for (const Instance& i : catalog.instances) {
    rows.push_back({i.name, fmt::format("{}x{}", i.count, i.gpu)});
  }
  return rows;
}

}  // namespace

std::string render_models_text(const Catalog& catalog) {
  return text_table(model_columns(), model_rows(catalog));
}

std::string render_models_markdown(const Catalog& catalog) {
  return "### oomplan: the catalog's models\n\n" +
         markdown_table(model_columns(), model_rows(catalog));
}

std::string render_models_json(const Catalog& catalog) {
  Json models = Json::array();
  for (const Model& m : catalog.models) {
    models.push_back({{"name", m.name},
                      {"hf_id", m.hf_id},
                      {"aliases", m.aliases},
                      {"model_type", m.model_type},
                      {"params", total_params(m)},
                      {"num_layers", m.num_layers},
                      {"hidden_size", m.hidden_size},
                      {"num_heads", m.num_heads},
                      {"num_kv_heads", m.num_kv_heads},
                      {"head_dim", m.head_dim},
                      {"intermediate_size", m.intermediate_size},
                      {"vocab_size", m.vocab_size},
                      {"max_position_embeddings", m.max_position_embeddings},
                      {"num_experts", m.num_experts},
                      {"experts_per_tok", m.experts_per_tok},
                      {"checkpoint_quant", quant_name(m.checkpoint_quant)}});
  }
  Json doc;
  doc["schema"] = "oomplan.models/1";
  doc["models"] = models;
  return json_text(doc, 2) + "\n";
}

std::string render_gpus_text(const Catalog& catalog) {
  std::string out = text_table(gpu_columns(), gpu_rows(catalog));
  if (!catalog.instances.empty()) {
    out += '\n';
    out += text_table(instance_columns(), instance_rows(catalog));
  }
  return out;
}

std::string render_gpus_markdown(const Catalog& catalog) {
  std::string out = "### oomplan: the catalog's GPUs\n\n" +
                    markdown_table(gpu_columns(), gpu_rows(catalog));
  if (!catalog.instances.empty()) {
    out += '\n';
    out += markdown_table(instance_columns(), instance_rows(catalog));
  }
  return out;
}

std::string render_gpus_json(const Catalog& catalog) {
  Json gpus = Json::array();
  for (const Gpu& g : catalog.gpus) {
    gpus.push_back({{"name", g.name},
                    {"full_name", g.full_name},
                    {"aliases", g.aliases},
                    {"vendor", g.vendor},
                    {"arch", g.arch},
                    {"compute_capability", g.compute_capability},
                    {"capacity_bytes", g.capacity_bytes},
                    {"smi_bytes", g.smi_bytes},
                    {"bandwidth_gb_s", g.bandwidth_gb_s},
                    {"bf16_tflops", g.bf16_tflops},
                    {"fp8_tflops", g.fp8_tflops},
                    {"nvlink_gb_s", g.nvlink_gb_s},
                    {"pcie_gb_s", g.pcie_gb_s},
                    {"common", g.common}});
  }
  Json instances = Json::array();
  for (const Instance& i : catalog.instances) {
    instances.push_back({{"name", i.name}, {"gpu", i.gpu}, {"count", i.count}});
  }
  Json doc;
  doc["schema"] = "oomplan.gpus/1";
  doc["gpus"] = gpus;
  doc["instances"] = instances;
  return json_text(doc, 2) + "\n";
}

}  // namespace oomplan
