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

// The report's setup line: "llama-3-70b (70.55B params, catalog) on 4 x
// A100-80: infer (hf), seq 8192, ...", how the model was found
// (origin_phrase), then each fragment from its option-table row; without a
// card (`gpu` null) the hardware rows are left out.
std::string setup_line(const Model& model, const ModelOrigin& origin,
                       const Gpu* gpu, const Setup& request,
                       const Resolved& setup);

// The JSON `model` object: name, params and source (how MODEL was found:
// {"step": "catalog" | "path" | "hf_cache" | "mirror", "detail": ...}).
nlohmann::ordered_json model_json(const Model& model,
                                  const ModelOrigin& origin);

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

// Markdown for GitHub (PR comments, step summaries), the one escaping rule
// of the Markdown renderers: every string that may hold input (a name, a
// file, a value a config or log holds) goes through md_cell or md_code.
//
// md_cell: prose, safe in a table cell, a list item or a heading. HTML's
// specials become entities (no tag, no `<!--` that hides the rest), Markdown
// punctuation is backslash-escaped (no emphasis, link, image or code span),
// '|' cannot end a cell and line breaks become spaces; what GitHub links
// without any syntax is broken by a code span: '@' (mentions and e-mail
// autolinks) and the ':' of "://" and the '.' of "www." (URL autolinks).
std::string md_cell(std::string_view text);
// md_code: `text` as one inline code span whatever backticks it holds (the
// fence is one longer than its longest run; CommonMark spans), line breaks
// as spaces; `in_table`: its '|' escaped, as GitHub's tables require.
std::string md_code(std::string_view text, bool in_table);

// A table: each column as wide as its widest cell (counted in characters,
// not bytes), numbers right-aligned; text for a terminal, or GitHub Markdown.
struct TableColumn {
  std::string_view title;
  bool right = false;
  bool code = false;  // Markdown: the cells as code spans (md_code)
};
std::string text_table(const std::vector<TableColumn>& columns,
                       const std::vector<std::vector<std::string>>& rows);
std::string markdown_table(const std::vector<TableColumn>& columns,
                           const std::vector<std::vector<std::string>>& rows);

}  // namespace oomplan
