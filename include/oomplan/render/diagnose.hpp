#pragma once

// How a Diagnosis (diagnose/diagnose.hpp) is shown.

#include "oomplan/diagnose/diagnose.hpp"

#include <string>

namespace oomplan {

// Rendering: text for a terminal (ANSI styles when
// `color`), JSON exactly `oomplan.diagnosis/1` (plus `source`,
// `allowed_bytes` per message, `binary` and, in context mode, `plan` and the
// advisor fixes' `group`, `total_bytes`, `fits` and `launch`; `cause` is null
// when `count` is 0), and Markdown.
std::string render_diagnosis_text(const Diagnosis& diagnosis,
                                  bool color = false);
std::string render_diagnosis_json(const Diagnosis& diagnosis);
std::string render_diagnosis_markdown(const Diagnosis& diagnosis);

}  // namespace oomplan
