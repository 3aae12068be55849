#pragma once

// Private to the renderers: what the plan, sizing and fit reports share.

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/setup.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// The report's setup line: "llama-3-70b (70.55B params) on 4 x A100-80:
// infer (hf), seq 8192, ...", each fragment from its option-table row;
// without a card (`gpu` null) the hardware rows are left out.
std::string setup_line(const Model& model, const Gpu* gpu, const Setup& request,
                       const Resolved& setup);

// The JSON `setup` object: every row's resolved value under its key.
nlohmann::ordered_json setup_json(const Model& model, const Gpu& gpu,
                                  const Setup& request, const Resolved& setup);

// The verdict sentence after "FITS:" / "DOES NOT FIT:": the total against
// usable memory and, when the plan does not fit, each reason (over the card,
// vLLM refusing to start, over the node's CPU RAM). The text, Markdown and
// SVG reports print it word for word.
std::string verdict_text(const Budget& budget);

// One entry of the JSON `fixes` array (oomplan.plan/1); `check` prints the
// first as `first_fix`.
nlohmann::ordered_json fix_json(const Plan& plan, const Fix& fix);

// The settings that tell `oomplan fit` plans apart: "tp 2 pp 1 dp 4, ZeRO-3,
// micro-batch 1, full checkpointing".
std::string fit_layout(const Resolved& setup);

// "70.55B"
std::string billions(std::int64_t params);

// A Markdown table cell: '|' escaped (it would end the cell), line breaks as
// spaces (they would end the table).
std::string md_cell(std::string_view text);

// A table: each column as wide as its widest cell (counted in characters,
// not bytes), numbers right-aligned; text for a terminal, or GitHub Markdown.
struct TableColumn {
  std::string_view title;
  bool right = false;
};
std::string text_table(const std::vector<TableColumn>& columns,
                       const std::vector<std::vector<std::string>>& rows);
std::string markdown_table(const std::vector<TableColumn>& columns,
                           const std::vector<std::vector<std::string>>& rows);

}  // namespace oomplan
