#pragma once

// `oomplan check` output (check.hpp): one row per plan as an aligned text
// table, JSON (schema oomplan.check/1, DESIGN §2) or GitHub Markdown for a
// pull-request comment or $GITHUB_STEP_SUMMARY. No arithmetic beyond bytes ->
// GiB for display.

#include "oomplan/check/check.hpp"
#include "oomplan/render/report.hpp"

#include <string>

namespace oomplan {

// The table (file, reader, model, GPUs, peak per GPU, headroom, verdict),
// then the notes, the first fix of each plan that does not pass, and the
// gate's verdict ("PASS: ..." / "FAIL: ...").
std::string render_check_text(const CheckResult& result,
                              const RenderOptions& options);
// {"schema": "oomplan.check/1", "fits", "plans": [...]}; each plan's `setup`
// and `first_fix` are the objects oomplan.plan/1 prints.
std::string render_check_json(const CheckResult& result);
// A heading with the gate's verdict, a table with a ✅/❌ per plan, then the
// notes and the first fixes.
std::string render_check_markdown(const CheckResult& result);

}  // namespace oomplan
