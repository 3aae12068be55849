#include "oomplan/render/check.hpp"

#include "render/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/setup/options.hpp"
#include "oomplan/util/units.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>

// `oomplan check` output. Formatting only: every number comes from each
// row's Plan (make_plan); bytes become GiB for display.

namespace oomplan {
namespace {

using Json = nlohmann::ordered_json;

std::string gib(Bytes bytes) {
  return fmt::format("{:.2f}", to_gib(bytes));
}

// The row's name in the table: the file, with the entry of a plan list.
std::string label(const CheckRow& row) {
  return row.entry ? fmt::format("{}[{}]", row.file, *row.entry) : row.file;
}

// "8 x H100", "8 x H100 (2 nodes)".
std::string gpus_text(const CheckRow& row) {
  const Resolved& s = row.plan.setup;
  std::string out = fmt::format("{} x {}", s.total_gpus(), row.plan.gpu->name);
  if (s.nodes > 1) {
    fmt::format_to(std::back_inserter(out), " ({} nodes)", s.nodes);
  }
  return out;
}

std::size_t failures(const CheckResult& result) {
  return static_cast<std::size_t>(std::count_if(
      result.rows.begin(), result.rows.end(),
      [](const CheckRow& row) { return row.verdict != CheckVerdict::fits; }));
}

std::string plans_word(std::size_t n) {
  return n == 1 ? "plan" : "plans";
}

// "every plan fits with the required headroom (3 plans)",
// "1 of 3 plans does not fit with the required headroom".
std::string gate_text(const CheckResult& result) {
  const std::size_t n = result.rows.size();
  const std::size_t failed = failures(result);
  if (failed == 0) {
    return n == 1
               ? std::string("the plan fits with the required headroom")
               : fmt::format("all {} plans fit with the required headroom", n);
  }
  if (n == 1) {
    return "the plan does not fit with the required headroom";
  }
  return fmt::format("{} of {} {} {} not fit with the required headroom",
                     failed, n, plans_word(n), failed == 1 ? "does" : "do");
}

std::string fix_args(const CheckRow& row, const Fix& fix) {
  const Gpu& gpu = fix.gpu != nullptr ? *fix.gpu : *row.plan.gpu;
  return plan_args(row.plan.model_arg, *row.plan.model, gpu, fix.request);
}

std::string plan_command(const CheckRow& row) {
  return plan_args(row.plan.model_arg, *row.plan.model, *row.plan.gpu,
                   row.plan.request);
}

struct Lines {
  std::string out;
  void operator()(std::string_view text) {
    out += text;
    out += '\n';
  }
};

bool any_notes(const CheckResult& result) {
  return std::any_of(result.rows.begin(), result.rows.end(),
                     [](const CheckRow& row) { return !row.notes.empty(); });
}

bool any_fixes(const CheckResult& result) {
  return std::any_of(
      result.rows.begin(), result.rows.end(),
      [](const CheckRow& row) { return row.first_fix() != nullptr; });
}

}  // namespace

std::string render_check_text(const CheckResult& result,
                              const RenderOptions& options) {
  const std::vector<TableColumn> columns = {{"file"},
                                            {"reader"},
                                            {"model"},
                                            {"GPUs"},
                                            {"peak/GPU GiB", true},
                                            {"headroom GiB", true},
                                            {"verdict"}};
  std::vector<std::vector<std::string>> rows;
  for (const CheckRow& row : result.rows) {
    const Budget& b = row.plan.budget;
    rows.push_back({label(row), row.reader, row.plan.model->name,
                    gpus_text(row), gib(b.total_bytes()),
                    gib(b.headroom_bytes()),
                    std::string(check_verdict_name(row.verdict))});
  }
  Lines put;
  put.out = text_table(columns, rows);
  if (any_notes(result)) {
    put("");
    put("notes:");
    for (const CheckRow& row : result.rows) {
      for (const std::string& note : row.notes) {
        put(fmt::format("  {}: {}", label(row), note));
      }
    }
  }
  bool heading = false;
  for (const CheckRow& row : result.rows) {
    if (row.verdict == CheckVerdict::fits) {
      continue;
    }
    if (!heading) {
      put("");
      put("first fixes:");
      heading = true;
    }
    const Fix* fix = row.first_fix();
    if (fix == nullptr) {
      put(fmt::format("  {}: no fix found; oomplan {} lists the options",
                      label(row), plan_command(row)));
      continue;
    }
    put(fmt::format("  {}: {} (new peak {} GiB, {})", label(row), fix->title,
                    gib(fix->total_bytes), fix->fits ? "fits" : "not enough"));
    put(fmt::format("    oomplan {}", fix_args(row, *fix)));
  }
  put("");
  const bool pass = result.fits();
  const std::string verdict = pass ? "PASS:" : "FAIL:";
  const std::string_view code = pass ? "1;32" : "1;31";
  put(fmt::format(
      "{} {}",
      options.color ? fmt::format("\x1b[{}m{}\x1b[0m", code, verdict) : verdict,
      gate_text(result)));
  return put.out;
}

std::string render_check_json(const CheckResult& result) {
  Json plans = Json::array();
  for (const CheckRow& row : result.rows) {
    const Plan& plan = row.plan;
    const Budget& b = plan.budget;
    const Fix* fix = row.first_fix();
    plans.push_back(
        {{"file", row.file},
         {"entry", row.entry ? Json(*row.entry) : Json(nullptr)},
         {"reader", row.reader},
         {"framework", row.framework},
         {"included_files", row.included_files},
         {"model", model_json(*plan.model, plan.origin)},
         {"gpu",
          {{"name", plan.gpu->name},
           {"count", plan.setup.total_gpus()},
           {"capacity_bytes", plan.gpu->capacity_bytes}}},
         {"args", plan_command(row)},
         {"setup",
          setup_json(*plan.model, *plan.gpu, plan.request, plan.setup)},
         {"total_bytes", b.total_bytes()},
         {"usable_bytes", b.usable_bytes},
         {"headroom_bytes", b.headroom_bytes()},
         {"margin_bytes", b.margin_bytes},
         {"fits", row.verdict == CheckVerdict::fits},
         {"verdict", check_verdict_name(row.verdict)},
         {"unused_keys", row.unused_keys},
         {"unknown_keys", row.unknown_keys},
         {"notes", row.notes},
         {"first_fix", fix != nullptr ? fix_json(plan, *fix) : Json(nullptr)}});
  }
  Json doc;
  doc["schema"] = "oomplan.check/1";
  doc["fits"] = result.fits();
  doc["plans"] = plans;
  return json_text(doc, 2) + "\n";
}

std::string render_check_markdown(const CheckResult& result) {
  const bool pass = result.fits();
  Lines put;
  put(fmt::format("### oomplan check: {} {}", pass ? "✅" : "❌",
                  gate_text(result)));
  put("");
  const std::vector<TableColumn> columns = {{""},
                                            {"file", false, true},
                                            {"reader"},
                                            {"model"},
                                            {"GPUs"},
                                            {"peak per GPU (GiB)", true},
                                            {"headroom (GiB)", true},
                                            {"verdict"},
                                            {"first fix"}};
  std::vector<std::vector<std::string>> rows;
  for (const CheckRow& row : result.rows) {
    const Budget& b = row.plan.budget;
    const Fix* fix = row.first_fix();
    rows.push_back({row.verdict == CheckVerdict::fits ? "✅" : "❌", label(row),
                    row.reader, row.plan.model->name, gpus_text(row),
                    gib(b.total_bytes()), gib(b.headroom_bytes()),
                    std::string(check_verdict_name(row.verdict)),
                    fix != nullptr ? fix->title : ""});
  }
  put.out += markdown_table(columns, rows);
  if (any_notes(result)) {
    put("");
    put("**Notes**");
    put("");
    for (const CheckRow& row : result.rows) {
      for (const std::string& note : row.notes) {
        put(fmt::format("- {}: {}", md_code(label(row), false), md_cell(note)));
      }
    }
  }
  if (any_fixes(result)) {
    put("");
    put("**First fixes**");
    put("");
    for (const CheckRow& row : result.rows) {
      if (const Fix* fix = row.first_fix()) {
        put(fmt::format("- {}: {} (new peak {} GiB): {}",
                        md_code(label(row), false), md_cell(fix->title),
                        gib(fix->total_bytes),
                        md_code("oomplan " + fix_args(row, *fix), false)));
      }
    }
  }
  return put.out;
}

}  // namespace oomplan
