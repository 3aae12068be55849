#include "oomplan/diagnose/diagnose.hpp"

#include "diagnose/internal.hpp"
#include "render/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/plan/plan.hpp"
#include "oomplan/render/diagnose.hpp"
#include "oomplan/setup/options.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Rendering a Diagnosis: text, JSON (oomplan.diagnosis/1) and Markdown. No
// arithmetic beyond showing bytes the way PyTorch prints them.

namespace oomplan {
namespace {

using Json = nlohmann::ordered_json;
using diag::size;

template <typename T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string_view format_title(const OomMessage& m) {
  switch (m.format) {
    case OomFormat::pytorch2:
      return "PyTorch 2.x";
    case OomFormat::pytorch1:
      return "PyTorch 1.x";
    case OomFormat::vllm:
      return "vLLM";
    case OomFormat::cuda_runtime:
      return m.kind == OomKind::cudnn_create ? "cuDNN" : "CUDA runtime";
    case OomFormat::cublas:
      return "cuBLAS";
    case OomFormat::nccl:
      return "NCCL";
    case OomFormat::xla:
      return m.source == "tensorflow" ? "TensorFlow" : "XLA";
    case OomFormat::other:
      break;
  }
  if (m.source == "deepspeed") {
    return "DeepSpeed";
  }
  if (m.source == "bitsandbytes") {
    return "bitsandbytes";
  }
  if (m.kind == OomKind::mps_allocator) {
    return "PyTorch MPS";
  }
  if (m.source == "llama.cpp") {
    return "llama.cpp";
  }
  return "other";
}

std::string where(const OomMessage& m) {
  std::string out(format_title(m));
  std::string dev;
  if (m.device == "cuda") {
    dev = "CUDA";
  } else if (m.device == "hip") {
    dev = "ROCm";
  } else if (m.device == "xpu") {
    dev = "XPU";
  } else if (m.device == "mps") {
    dev = "MPS";
  } else if (m.device == "tpu") {
    dev = "TPU";
  } else if (m.device == "vulkan") {
    dev = "Vulkan";
  } else if (m.device == "metal") {
    dev = "Metal";
  } else if (m.device == "host") {
    dev = "host memory";
  }
  if (m.gpu_index) {
    dev += fmt::format("{}{} {}", dev.empty() ? "" : " ",
                       m.device == "tpu" ? "device" : "GPU", *m.gpu_index);
  }
  if (!dev.empty()) {
    out += ", " + dev;
  }
  return out;
}

// The fields a message states, in schema order, as label / value.
std::vector<std::pair<std::string, std::string>> fields(const OomMessage& m) {
  std::vector<std::pair<std::string, std::string>> out;
  auto bytes = [&](std::string label, const std::optional<Bytes>& v) {
    if (v) {
      out.emplace_back(std::move(label), size(*v));
    }
  };
  auto count = [&](std::string label, const std::optional<std::int64_t>& v) {
    if (v) {
      out.emplace_back(std::move(label), fmt::format("{}", *v));
    }
  };
  bytes("requested", m.requested_bytes);
  bytes("capacity", m.capacity_bytes);
  bytes("free", m.free_bytes);
  bytes("this process", m.process_bytes);
  bytes(m.format == OomFormat::xla ? "in use (allocator)"
                                   : "allocated by PyTorch",
        m.allocated_bytes);
  bytes("reserved, unallocated", m.reserved_unallocated_bytes);
  bytes("reserved in total", m.reserved_total_bytes);
  bytes("other processes", m.other_processes_bytes);
  bytes("allowed", m.allowed_bytes);
  count("max seq len", m.max_seq_len);
  count("KV cache tokens", m.kv_tokens);
  if (m.gpu_util) {
    out.emplace_back("gpu_memory_utilization", fmt::format("{}", *m.gpu_util));
  }
  count("estimated max model len", m.estimated_max_model_len);
  return out;
}

std::string headline(const Diagnosis& d) {
  const OomMessage& m = d.messages.front();
  return fmt::format("out of memory at line {} ({}); {} message{} in {} line{}",
                     m.line, where(m), d.count, d.count == 1 ? "" : "s",
                     d.lines, d.lines == 1 ? "" : "s");
}

struct Style {
  bool on = false;
  std::string wrap(std::string_view code, std::string_view text) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, text)
              : std::string(text);
  }
};

std::string plural(std::int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// "not a text log (N of the [first] M bytes are NUL or invalid UTF-8)"
std::string binary_reason(const Diagnosis& d) {
  return fmt::format("{} of {}{} bytes are NUL or invalid UTF-8",
                     d.nul_bytes + d.invalid_utf8_bytes,
                     d.stopped ? "the first " : "", d.bytes);
}

// Context mode: the plan's setup line and its verdict.
std::string plan_line(const Plan& plan) {
  return setup_line(*plan.model, plan.origin, plan.gpu, plan.request,
                    plan.setup);
}

std::string plan_verdict(const Plan& plan) {
  const Budget& b = plan.budget;
  std::string out =
      fmt::format("{} per GPU of {} usable: {}", size(b.total_bytes()),
                  size(b.usable_bytes), b.fits() ? "fits" : "does not fit");
  if (b.vllm && !b.vllm->error.empty()) {
    out += " (vLLM would not start)";
  }
  return out;
}

// An advisor fix's priced outcome: "new peak 22.99 GiB per GPU, fits".
std::string priced(const OomFix& f) {
  return fmt::format("new peak {} per GPU, {}", size(f.total_bytes.value_or(0)),
                     f.fits.value_or(false) ? "fits" : "does not fit");
}

}  // namespace

std::string render_diagnosis_text(const Diagnosis& d, bool color) {
  const Style s{color};
  std::string out;
  auto put = [&](std::string_view line) {
    out.append(line);
    out.push_back('\n');
  };
  if (d.binary) {
    put(fmt::format("oomplan diagnose: {} — not a text log ({})",
                    s.wrap("1;31", "binary input"), binary_reason(d)));
    return out;
  }
  if (d.messages.empty()) {
    put(fmt::format("oomplan diagnose: no out-of-memory message in {}",
                    plural(d.lines, "line")));
    return out;
  }
  const OomMessage& m = d.messages.front();
  put("oomplan diagnose: " + headline(d));
  const auto rows = fields(m);
  std::size_t width = 0;
  for (const auto& [label, value] : rows) {
    width = std::max(width, label.size());
  }
  for (const auto& [label, value] : rows) {
    put(fmt::format("  {:<{}}  {:>10}", label, width, value));
  }
  if (!m.text.empty()) {
    put(s.wrap("2", "  > " + m.text));
  }
  put("");
  put(fmt::format("cause: {}", s.wrap("1", oom_cause_name(d.cause))));
  for (const std::string& e : d.evidence) {
    put("  - " + e);
  }
  if (d.plan != nullptr) {
    put("");
    put("plan: " + plan_line(*d.plan));
    put("  " + plan_verdict(*d.plan));
    for (const std::string& e : d.plan_evidence) {
      put("  - " + e);
    }
  }
  if (!d.fixes.empty()) {
    put("");
    put("fixes:");
    for (const OomFix& f : d.fixes) {
      put(fmt::format("  {}. {}", f.rank, f.title));
      put("     " + s.wrap("1", f.args));
      for (const std::string& line : f.launch) {
        put("     " + line);
      }
      put(s.wrap("2", "     cost: " + f.cost));
      if (!f.group.empty()) {
        put(s.wrap("2", "     " + priced(f)));
      }
    }
  }
  return out;
}

std::string render_diagnosis_json(const Diagnosis& d) {
  Json doc;
  doc["schema"] = "oomplan.diagnosis/1";
  Json messages = Json::array();
  for (const OomMessage& m : d.messages) {
    Json j;
    j["line"] = m.line;
    j["format"] = oom_format_name(m.format);
    j["device"] = m.device.empty() ? Json(nullptr) : Json(m.device);
    j["gpu_index"] = or_null(m.gpu_index);
    j["requested_bytes"] = or_null(m.requested_bytes);
    j["capacity_bytes"] = or_null(m.capacity_bytes);
    j["free_bytes"] = or_null(m.free_bytes);
    j["process_bytes"] = or_null(m.process_bytes);
    j["allocated_bytes"] = or_null(m.allocated_bytes);
    j["reserved_unallocated_bytes"] = or_null(m.reserved_unallocated_bytes);
    j["other_processes_bytes"] = or_null(m.other_processes_bytes);
    j["reserved_total_bytes"] = or_null(m.reserved_total_bytes);
    j["max_seq_len"] = or_null(m.max_seq_len);
    j["kv_tokens"] = or_null(m.kv_tokens);
    j["gpu_util"] = or_null(m.gpu_util);
    j["estimated_max_model_len"] = or_null(m.estimated_max_model_len);
    j["allowed_bytes"] = or_null(m.allowed_bytes);
    j["source"] = m.source.empty() ? Json(nullptr) : Json(m.source);
    j["text"] = m.text;
    messages.push_back(std::move(j));
  }
  doc["messages"] = std::move(messages);
  doc["count"] = d.count;
  doc["cause"] =
      d.messages.empty() ? Json(nullptr) : Json(oom_cause_name(d.cause));
  doc["evidence"] = d.evidence;
  Json fixes = Json::array();
  for (const OomFix& f : d.fixes) {
    Json j = {{"rank", f.rank},
              {"id", f.id},
              {"title", f.title},
              {"args", f.args},
              {"cost", f.cost}};
    if (!f.group.empty()) {
      j["group"] = f.group;
      j["total_bytes"] = or_null(f.total_bytes);
      j["fits"] = or_null(f.fits);
      j["launch"] = f.launch;
    }
    fixes.push_back(std::move(j));
  }
  doc["fixes"] = std::move(fixes);
  doc["binary"] = d.binary;
  if (d.plan != nullptr) {
    const Plan& plan = *d.plan;
    const Budget& b = plan.budget;
    Json p;
    p["args"] = plan_args(plan.model_arg, *plan.model, *plan.gpu, plan.request);
    p["model"] = plan.model->name;
    p["gpu"] = {{"name", plan.gpu->name},
                {"count", plan.setup.total_gpus()},
                {"capacity_bytes", plan.gpu->capacity_bytes}};
    p["total_bytes"] = b.total_bytes();
    p["usable_bytes"] = b.usable_bytes;
    p["fits"] = b.fits();
    p["peak"] = {{"allocated_bytes", b.peak.allocated_bytes},
                 {"reserved_bytes", b.peak.reserved_bytes},
                 {"device_bytes", b.peak.device_bytes},
                 {"phase", phase_name(b.peak.phase)}};
    if (b.vllm) {
      const VllmProfile& v = *b.vllm;
      p["vllm"] = {{"kv_cache_bytes", v.kv_cache_bytes},
                   {"kv_bytes_per_token", v.kv_bytes_per_token},
                   {"kv_tokens", v.kv_tokens},
                   {"max_model_len_fit", v.max_model_len_fit},
                   {"error", v.error.empty() ? Json(nullptr) : Json(v.error)}};
    } else {
      p["vllm"] = nullptr;
    }
    p["evidence"] = d.plan_evidence;
    doc["plan"] = std::move(p);
  }
  // Every string is valid UTF-8 (the scanner replaces invalid bytes), so
  // dump cannot throw; replace anyway rather than let a library error out.
  return json_text(doc, 2) + "\n";
}

std::string render_diagnosis_markdown(const Diagnosis& d) {
  std::string out;
  auto put = [&](std::string_view line) {
    out.append(line);
    out.push_back('\n');
  };
  if (d.binary) {
    put("### oomplan diagnose: not a text log");
    put("");
    std::string reason = binary_reason(d);
    reason[0] = static_cast<char>(std::toupper(reason[0]));
    put(md_cell(reason + "."));
    return out;
  }
  if (d.messages.empty()) {
    put("### oomplan diagnose: no out-of-memory message");
    put("");
    put(fmt::format("Scanned {}.", plural(d.lines, "line")));
    return out;
  }
  const OomMessage& m = d.messages.front();
  put(fmt::format("### oomplan diagnose: {}", oom_cause_name(d.cause)));
  put("");
  std::string head = headline(d);
  head[0] = 'O';
  put(md_cell(head + "."));
  put("");
  const auto rows = fields(m);
  if (!rows.empty()) {
    put("| field | value |");
    put("|---|---:|");
    for (const auto& [label, value] : rows) {
      put(fmt::format("| {} | {} |", label, md_cell(value)));
    }
    put("");
  }
  if (!m.text.empty()) {
    put("> " + md_cell(m.text));
    put("");
  }
  if (!d.evidence.empty()) {
    put("**Evidence**");
    put("");
    for (const std::string& e : d.evidence) {
      put("- " + md_cell(e));
    }
    put("");
  }
  if (d.plan != nullptr) {
    put("**Plan**");
    put("");
    put(md_cell(plan_line(*d.plan) + ": " + plan_verdict(*d.plan) + "."));
    put("");
    for (const std::string& e : d.plan_evidence) {
      put("- " + md_cell(e));
    }
    if (!d.plan_evidence.empty()) {
      put("");
    }
  }
  if (!d.fixes.empty()) {
    put("**Fixes**");
    put("");
    for (const OomFix& f : d.fixes) {
      std::string line = fmt::format("{}. **{}**: {}", f.rank, md_cell(f.title),
                                     md_code(f.args, false));
      for (const std::string& l : f.launch) {
        line += ", " + md_code(l, false);
      }
      line += fmt::format(" (cost: {}", md_cell(f.cost));
      line += f.group.empty() ? ")" : fmt::format("; {})", md_cell(priced(f)));
      put(line);
    }
  }
  return out;
}

}  // namespace oomplan
