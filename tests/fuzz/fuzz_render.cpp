// libFuzzer target for the renderers' escaping (issue 26): arbitrary bytes
// as a model name, a GPU name, the model argument of the re-run commands, a
// file name, a note a config brought and a log must come out inert:
// - the text report, through the edge every command prints it through
//   (inert_text), holds no control but newline and, with colour, SGR;
// - the Markdown report (plan, check, diagnose, fit header) holds no HTML,
//   mention, autolink or inline link outside its code spans.
// Seeds: tests/fuzz/corpus/render/.

#include "fuzz_support.hpp"
#include "inert.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/check/check.hpp"
#include "oomplan/diagnose/diagnose.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/render/check.hpp"
#include "oomplan/render/diagnose.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/util/text.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

using oomplan::fuzz::require;

const oomplan::Catalog& catalog() {
  static const oomplan::Catalog c = oomplan::builtin_catalog();
  return c;
}

// The input cut into `N` fields at its 0x00 bytes (missing ones empty).
template <std::size_t N>
std::array<std::string, N> fields(std::string_view in) {
  std::array<std::string, N> out{};
  for (std::size_t k = 0; k < N; ++k) {
    const auto cut = in.find('\0');
    out[k] = std::string(in.substr(0, cut));
    if (cut == std::string_view::npos) {
      break;
    }
    in.remove_prefix(cut + 1);
  }
  return out;
}

void check_text(const std::string& rendered, bool colour) {
  const std::string shown = oomplan::inert_text(rendered, colour);
  require(oomplan::inert::controls_in(shown, colour).empty(),
          "text output holds a control", shown);
}

void check_markdown(const std::string& md) {
  require(oomplan::inert::markdown_hazards(md).empty(),
          "Markdown output holds a hazard",
          oomplan::inert::markdown_hazards(md));
  check_text(md, false);  // printed to a terminal too
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const bool colour = (data[0] & 1U) != 0;
  const bool advise = (data[0] & 2U) != 0;  // the fix table (slower)
  const auto f = fields<6>(
      std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  oomplan::Model model = oomplan::find_model(catalog(), "llama3-8b");
  model.name = f[0];
  oomplan::Gpu gpu = oomplan::find_gpu(catalog(), advise ? "RTX4090" : "H100");
  gpu.name = f[1];
  oomplan::Setup setup;
  setup.seq = 4096;
  const oomplan::Plan plan = oomplan::make_plan(
      model, gpu, setup, f[2],
      advise ? oomplan::advisor(catalog().gpus) : oomplan::Advisor{});
  check_text(oomplan::render_text(plan, {.color = colour}), colour);
  check_markdown(oomplan::render_markdown(plan));

  oomplan::CheckResult result;
  oomplan::CheckRow row;
  row.file = f[3];
  row.reader = "axolotl";
  row.notes = {f[4]};
  row.included_files = {f[3]};
  row.plan = plan;
  result.rows.push_back(row);
  check_text(oomplan::render_check_text(result, {.color = colour}), colour);
  check_markdown(oomplan::render_check_markdown(result));

  const oomplan::Diagnosis d = oomplan::diagnose(f[5]);
  check_text(oomplan::render_diagnosis_text(d, colour), colour);
  check_markdown(oomplan::render_diagnosis_markdown(d));
  return 0;
}
