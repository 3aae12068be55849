#include "render/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/memory/vllm.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/setup/options.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>

// `oomplan fit` output. Formatting only: every number comes from fit()
// (memory() and estimate_time()); bytes become GiB for display.

namespace oomplan {
namespace {

using Json = nlohmann::ordered_json;

// The settings that tell plans apart, in a few words.
std::string summary(const Resolved& s) {
  std::string out = fmt::format("tp {} pp {} dp {}", s.tp, s.pp, s.dp());
  auto add = [&out](const std::string& word) {
    out += ", ";
    out += word;
  };
  if (s.training()) {
    if (s.zero > 0) {
      add(fmt::format("ZeRO-{}", s.zero));
    }
    add(fmt::format("micro-batch {}", s.batch));
    if (s.grad_accum > 1) {
      add(fmt::format("grad-accum {}", s.grad_accum));
    }
    if (s.checkpointing != Checkpointing::none) {
      add(fmt::format("{} checkpointing",
                      checkpointing_text(s.checkpointing, s.checkpoint_every)));
    }
  } else {
    add(fmt::format("batch {}", s.batch));
  }
  if (s.quant != Quant::none) {
    add(std::string(quant_name(s.quant)));
  }
  if (s.kv_dtype != s.dtype) {
    add(fmt::format("{} KV", dtype_name(s.kv_dtype)));
  }
  if (s.offload != Offload::none) {
    add(fmt::format("offload {}", offload_name(s.offload)));
  }
  return out;
}

// Step time in the unit that reads best.
std::string duration(double seconds) {
  if (seconds <= 0) {
    return "-";
  }
  if (seconds < 1) {
    return fmt::format("{:.1f} ms", seconds * 1e3);
  }
  return fmt::format("{:.1f} s", seconds);
}

std::string rate(double tokens_per_s) {
  if (tokens_per_s <= 0) {
    return "-";
  }
  if (tokens_per_s >= 1e4) {
    return fmt::format("{:.0f}k", tokens_per_s / 1e3);
  }
  return fmt::format("{:.0f}", tokens_per_s);
}

std::string header(const FitResult& result, const Model& model) {
  const Setup& b = result.base;
  return fmt::format(
      "oomplan fit {}: mode {}, {} tokens per sequence, up to {} GPUs; {} "
      "configurations priced, {} plans (per card the fewest GPUs, then each "
      "larger count that is faster)\n",
      model.name, mode_name(b.mode), b.seq, result.max_gpus, result.evaluated,
      result.front);
}

}  // namespace

std::string fit_layout(const Resolved& setup) {
  return summary(setup);
}

std::string render_fit_text(const FitResult& result, const Model& model,
                            const std::string& model_arg) {
  std::string out = header(result, model);
  if (result.plans.empty()) {
    if (result.base.engine == Engine::vllm && result.base.max_model_len) {
      if (const std::string refused =
              vllm_max_model_len_error(model, *result.base.max_model_len);
          !refused.empty()) {
        fmt::format_to(std::back_inserter(out),
                       "no configuration fits: vLLM refuses to start on any "
                       "card: {} Give --max-model-len {} or less\n",
                       refused, model.max_position_embeddings);
        return out;
      }
    }
    fmt::format_to(std::back_inserter(out),
                   "no configuration fits within {} GPUs; raise --max-gpus, "
                   "lower --seq or allow quantization and offload\n",
                   result.max_gpus);
    return out;
  }
  const bool training = result.base.training();
  const bool priced =
      std::any_of(result.plans.begin(), result.plans.end(),
                  [](const FitPlan& p) { return p.time.usd_per_mtok > 0; });
  fmt::format_to(std::back_inserter(out),
                 "\n{:>3}  {:<14} {:>10} {:>10} {:>10} {:>9}{}  {}\n", "#",
                 "GPUs", "per GPU", "headroom", training ? "step" : "decode",
                 "tokens/s", priced ? fmt::format(" {:>8}", "$/Mtok") : "",
                 "layout");
  int rank = 0;
  for (const FitPlan& p : result.plans) {
    ++rank;
    fmt::format_to(std::back_inserter(out),
                   "{:>3}  {:<14} {:>10} {:>10} {:>10} {:>9}{}  {}\n", rank,
                   fmt::format("{}x {}", p.setup.total_gpus(), p.gpu->name),
                   format_gib(p.total_bytes), format_gib(p.headroom_bytes),
                   duration(p.time.step_s), rate(p.time.tokens_per_s),
                   priced ? fmt::format(" {:>8.2f}", p.time.usd_per_mtok) : "",
                   summary(p.setup));
    std::vector<std::string> notes;
    if (p.host_bytes > 0) {
      notes.push_back(
          p.host_capacity_bytes
              ? fmt::format("{} host RAM per node (of {})",
                            format_gib(p.host_bytes),
                            format_gib(*p.host_capacity_bytes))
              : fmt::format("{} host RAM per node", format_gib(p.host_bytes)));
    }
    if (p.max_concurrency > 0) {
      notes.push_back(fmt::format("{} KV tokens, {:.1f} requests of {} at once",
                                  p.kv_tokens, p.max_concurrency,
                                  p.setup.max_model_len));
    }
    if (p.risk != Risk::none) {
      notes.push_back(fmt::format("{} accuracy risk", risk_name(p.risk)));
    }
    if (!notes.empty()) {
      std::string line;
      for (const auto& n : notes) {
        line += line.empty() ? n : "; " + n;
      }
      fmt::format_to(std::back_inserter(out), "     {}\n", line);
    }
    fmt::format_to(std::back_inserter(out), "     oomplan {}\n",
                   plan_args(model_arg, model, *p.gpu, p.request));
  }
  fmt::format_to(std::back_inserter(out),
                 "\nTimes assume {:.0f} % MFU, {:.0f} % of HBM bandwidth in "
                 "decode and {:.0f} % of link bandwidth in collectives.\n",
                 k_mfu * 100, k_bandwidth_util * 100, k_link_util * 100);
  return out;
}

std::string render_fit_json(const FitResult& result, const Model& model,
                            const std::string& model_arg) {
  Json doc;
  doc["schema"] = "oomplan.fit/1";
  doc["model"] = {{"name", model.name},
                  {"params", count_params(model).total()}};
  doc["evaluated"] = result.evaluated;
  doc["front"] = result.front;
  doc["max_gpus"] = result.max_gpus;
  Json plans = Json::array();
  int rank = 0;
  for (const FitPlan& p : result.plans) {
    const StepTime& t = p.time;
    plans.push_back({
        {"rank", ++rank},
        {"args", plan_args(model_arg, model, *p.gpu, p.request)},
        {"gpu",
         {{"name", p.gpu->name},
          {"count", p.setup.total_gpus()},
          {"capacity_bytes", p.gpu->capacity_bytes}}},
        {"setup", setup_json(model, *p.gpu, p.request, p.setup)},
        {"total_bytes", p.total_bytes},
        {"headroom_bytes", p.headroom_bytes},
        {"host_bytes", p.host_bytes},
        {"host_capacity_bytes",
         p.host_capacity_bytes ? Json(*p.host_capacity_bytes) : Json(nullptr)},
        {"fits", p.fits},
        {"risk", risk_name(p.risk)},
        {"kv_tokens", p.kv_tokens},
        {"max_concurrency", p.max_concurrency},
        {"usd_per_gpu_hour",
         p.usd_per_gpu_hour ? Json(*p.usd_per_gpu_hour) : Json(nullptr)},
        {"step_time_s", t.step_s},
        {"tokens_per_s", t.tokens_per_s},
        {"usd_per_mtok",
         t.usd_per_mtok > 0 ? Json(t.usd_per_mtok) : Json(nullptr)},
        {"time",
         {{"compute_s", t.compute_s},
          {"memory_s", t.memory_s},
          {"comm_s", t.comm_s},
          {"offload_s", t.offload_s},
          {"tokens_per_step", t.tokens_per_step},
          {"comm_bound", t.comm_bound}}},
    });
  }
  doc["plans"] = plans;
  return json_text(doc, 2) + "\n";
}

std::string render_fit_markdown(const FitResult& result, const Model& model,
                                const std::string& model_arg) {
  std::string head = header(result, model);
  head.pop_back();  // its newline
  std::string out = "### " + md_cell(head) + "\n\n";
  if (result.plans.empty()) {
    fmt::format_to(std::back_inserter(out),
                   "No configuration fits within {} GPUs.\n", result.max_gpus);
    return out;
  }
  out +=
      "| # | GPUs | per GPU | headroom | step | tokens/s | layout | command "
      "|\n|---:|---|---:|---:|---:|---:|---|---|\n";
  int rank = 0;
  for (const FitPlan& p : result.plans) {
    fmt::format_to(
        std::back_inserter(out),
        "| {} | {}x {} | {} | {} | {} | {} | {} | {} |\n", ++rank,
        p.setup.total_gpus(), md_cell(p.gpu->name), format_gib(p.total_bytes),
        format_gib(p.headroom_bytes), duration(p.time.step_s),
        rate(p.time.tokens_per_s), md_cell(summary(p.setup)),
        md_code("oomplan " + plan_args(model_arg, model, *p.gpu, p.request),
                true));
  }
  return out;
}

}  // namespace oomplan
