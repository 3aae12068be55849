// Alerting rules for the DCGM exporter (render/prometheus.hpp). Every string
// that comes from input (model, file and card names) goes through
// yaml_quoted(), so neither YAML nor Prometheus' Go templates in annotations
// read it as anything but text.

#include "oomplan/render/prometheus.hpp"

#include "render/internal.hpp"

#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace oomplan {
namespace {

// dcgm-exporter's default counters (etc/default-counters.csv): the used
// framebuffer of each GPU, in MiB, labelled gpu, UUID, modelName, Hostname
// (and pod, namespace, container on Kubernetes).
constexpr std::string_view k_metric = "DCGM_FI_DEV_FB_USED";

// Above the plan by this share for 5 minutes: a term the plan does not hold
// (a leak, fragmentation growth, another process), well before the OOM.
constexpr double k_above_plan = 1.05;

std::int64_t mib(Bytes bytes) {
  return (bytes + (Bytes{1} << 20) - 1) >> 20;  // rounded up
}

std::string gib(Bytes bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30));
}

// A YAML double-quoted scalar of `text`: controls, bidi marks and bytes that
// are not UTF-8 made visible (escape_for_message, the one escaping rule of
// error lines), then '\\' and '"' escaped, and "{{" / "}}" broken apart so
// that input never reaches the alert templates.
std::string yaml_quoted(std::string_view text) {
  const std::string visible = escape_for_message(text, std::string_view::npos);
  std::string out = "\"";
  for (std::size_t i = 0; i < visible.size(); ++i) {
    const char ch = visible[i];
    if (ch == '\\' || ch == '"') {
      out += '\\';
    }
    out += ch;
    if ((ch == '{' || ch == '}') && i + 1 < visible.size() &&
        visible[i + 1] == ch) {
      out += ' ';
    }
  }
  out += '"';
  return out;
}

struct RuleText {
  std::string_view alert;
  std::int64_t threshold_mib = 0;
  std::string_view for_duration;
  std::string_view severity;
  std::string summary;
  std::string description;
};

void put_rule(std::string& out, const RuleText& r, const std::string& labels) {
  fmt::format_to(std::back_inserter(out),
                 "      - alert: {}\n"
                 "        expr: {} > {}\n"
                 "        for: {}\n"
                 "        labels:\n"
                 "          severity: {}\n"
                 "{}"
                 "        annotations:\n"
                 "          summary: {}\n"
                 "          description: {}\n",
                 r.alert, k_metric, r.threshold_mib, r.for_duration, r.severity,
                 labels, yaml_quoted(r.summary), yaml_quoted(r.description));
}

// "forward 60.10 GiB, backward 70.20 GiB, optimizer_step 65.00 GiB": the
// largest device memory of each training phase, in timeline order.
std::string phase_peaks(const Budget& b) {
  std::string out;
  for (std::size_t i = 0; i < b.moment_count; ++i) {
    const Moment& m = b.moments[i];
    Bytes peak = 0;
    bool seen_before = false;
    for (std::size_t j = 0; j < b.moment_count; ++j) {
      if (b.moments[j].phase == m.phase) {
        peak = std::max(peak, b.moments[j].device_bytes);
        seen_before = seen_before || j < i;
      }
    }
    if (!seen_before) {
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ",
                         phase_name(m.phase), gib(peak));
    }
  }
  return out;
}

void put_group(std::string& out, const Plan& plan, const std::string& name) {
  const Budget& b = plan.budget;
  const std::string where =
      fmt::format("{} on {} x {}", plan.model->name, plan.setup.total_gpus(),
                  plan.gpu->name);
  // oomplan_plan tells the groups of one file apart (promtool refuses two
  // rules with the same name and labels).
  const std::string labels = fmt::format(
      "          oomplan_plan: {}\n          oomplan_model: {}\n"
      "          oomplan_gpu: {}\n",
      yaml_quoted(name), yaml_quoted(plan.model->name),
      yaml_quoted(plan.gpu->name));
  fmt::format_to(std::back_inserter(out), "  - name: {}\n    rules:\n",
                 yaml_quoted(name));
  const Bytes total = b.total_bytes();
  if (b.vllm) {
    const VllmProfile& v = *b.vllm;
    // vLLM holds gpu-memory-utilization x capacity from start-up (the KV
    // pool is preallocated: vllm/worker/gpu_worker.py determine_available_
    // memory), plus the CUDA graphs captured after it: "above 80 % for
    // 5 minutes" would fire for as long as the server runs.
    put_rule(out,
             {"OomplanVllmAboveReservation", mib(total), "5m", "warning",
              fmt::format("GPU memory above what vLLM reserves for {}", where),
              fmt::format(
                  "vLLM reserves {} per GPU at start-up (gpu-memory-"
                  "utilization x {}) and {} of CUDA graphs, and holds it while "
                  "serving (a plain \"above 80 %\" rule would fire for as "
                  "long as it serves); more than that is another process or "
                  "non-torch memory growing.",
                  gib(v.requested_bytes), gib(b.capacity_bytes),
                  gib(v.cuda_graph_bytes))},
             labels);
  } else if (static_cast<double>(total) * k_above_plan <
             static_cast<double>(b.usable_bytes)) {
    // (A plan that does not fit gets only the capacity rule: the peak
    // rule's threshold is beyond the card.)
    const std::string phases = phase_peaks(b);
    put_rule(
        out,
        {"OomplanAbovePlannedPeak",
         mib(static_cast<Bytes>(static_cast<double>(total) * k_above_plan)),
         "5m", "warning",
         fmt::format("GPU memory above oomplan's planned peak for {}", where),
         fmt::format(
             "planned per GPU: {} at the peak ({}){}; 5 % above it "
             "for 5 minutes means a term the plan does not hold "
             "(fragmentation growth, a leak, another process).",
             gib(total), phase_name(b.peak.phase),
             phases.empty() ? "" : fmt::format("; by phase: {}", phases))},
        labels);
  }
  put_rule(out,
           {"OomplanNearCapacity", mib(b.usable_bytes), "1m", "critical",
            fmt::format("GPU memory at the card's usable limit for {}", where),
            fmt::format(
                "{} usable of {}: the next allocation that does not "
                "fit is a CUDA out-of-memory error{}.",
                gib(b.usable_bytes), gib(b.capacity_bytes),
                b.fits() ? "" : "; oomplan predicted this plan does not fit")},
           labels);
}

constexpr std::string_view k_header =
    "# Prometheus alerting rules from oomplan, on the DCGM exporter's\n"
    "# DCGM_FI_DEV_FB_USED (MiB per GPU). Add a label matcher to each expr\n"
    "# (Hostname, pod, namespace, ...) so it only sees this job's GPUs.\n";

}  // namespace

std::string render_plan_prometheus(const Plan& plan) {
  std::string out(k_header);
  // A comment is one line: escape_for_message turns a newline from input
  // into a visible \n.
  fmt::format_to(
      std::back_inserter(out), "# {}\ngroups:\n",
      escape_for_message(setup_line(*plan.model, plan.origin, plan.gpu,
                                    plan.request, plan.setup),
                         std::string_view::npos));
  put_group(out, plan, "oomplan " + plan.model->name);
  return out;
}

std::string render_check_prometheus(const CheckResult& result) {
  std::string out(k_header);
  out += "groups:\n";
  for (std::size_t i = 0; i < result.rows.size(); ++i) {
    const CheckRow& row = result.rows[i];
    // Group names must be unique in a file: the file, its entry, the index.
    std::string name = "oomplan " + row.file;
    if (row.entry) {
      name += fmt::format(" entry {}", *row.entry);
    }
    put_group(out, row.plan, fmt::format("{} #{}", name, i + 1));
  }
  return out;
}

}  // namespace oomplan
