#include "oomplan/render/svg.hpp"

#include "render/internal.hpp"

#include "oomplan/advice/sizing.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/util/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// SVG rendering. Drawing only: the one piece of arithmetic on the plan's
// numbers is bytes -> GiB and byte counts -> pixels. Every label is formatted
// as render/report.cpp formats the same number ("{:.2f}" GiB, "{:.1f} %"),
// which tests/test_svg.cpp checks against the text report. Layout uses fixed
// sizes and an estimate of text width (0.6 em per character, the average
// advance of DejaVu Sans and Verdana), so the output does not depend on the
// fonts of the machine that renders it beyond that estimate.

namespace oomplan {
namespace {

constexpr double k_width = 760;      // plan and sizing pictures
constexpr double k_fit_width = 900;  // the fit front and its list
constexpr double k_margin = 20;
constexpr double k_char_em = 0.6;
constexpr double k_bold_char_em = 0.64;  // DejaVu Sans Bold is wider

constexpr std::string_view k_ink = "#222222";
constexpr std::string_view k_muted = "#5f6368";
constexpr std::string_view k_grid = "#e2e2e2";
constexpr std::string_view k_good = "#1a7f37";
constexpr std::string_view k_bad = "#c62828";
constexpr std::string_view k_headroom_fill = "#e6f4ea";

// One colour per DESIGN §2 component name (Tableau 10, which stays
// distinguishable for the common colour-vision deficiencies), with the text
// colour that reads on it.
struct ComponentColour {
  std::string_view name;
  std::string_view fill;
  std::string_view text;
};
constexpr std::array k_component_colours = {
    ComponentColour{"weights", "#4e79a7", "#ffffff"},
    ComponentColour{"reference_weights", "#a0cbe8", "#222222"},
    ComponentColour{"kv_cache", "#f28e2b", "#222222"},
    ComponentColour{"activations", "#59a14f", "#ffffff"},
    ComponentColour{"logits", "#b07aa1", "#ffffff"},
    ComponentColour{"gradients", "#e15759", "#ffffff"},
    ComponentColour{"optimizer", "#9c755f", "#ffffff"},
    ComponentColour{"buffers", "#76b7b2", "#222222"},
    ComponentColour{"cuda_graphs", "#ff9da7", "#222222"},
    ComponentColour{"overhead", "#bab0ac", "#222222"},
    ComponentColour{"fragmentation", "#dcd6d2", "#222222"},
};
constexpr ComponentColour k_other_colour{"", "#edc948", "#222222"};

const ComponentColour& colour_of(std::string_view name) {
  for (const ComponentColour& c : k_component_colours) {
    if (c.name == name) {
      return c;
    }
  }
  return k_other_colour;
}

// --- Numbers as the text report prints them.

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

// Step time in the unit that reads best (as `oomplan fit` prints it).
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

// A coordinate: one decimal, never "-0.0".
std::string px(double v) {
  if (std::abs(v) < 0.05) {
    v = 0;
  }
  return fmt::format("{:.1f}", v);
}

double text_width(std::string_view text, double font_size, bool bold = false) {
  // Counts code points, not bytes (a UTF-8 continuation byte starts 10xxxxxx).
  double chars = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) {
      chars += 1;
    }
  }
  return chars * font_size * (bold ? k_bold_char_em : k_char_em);
}

// Splits `text` at spaces into lines of at most `max_chars` characters (a
// longer word stays whole on its own line).
std::vector<std::string> wrap(std::string_view text, std::size_t max_chars) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view word = text.substr(pos, end - pos);
    if (!line.empty() && line.size() + 1 + word.size() > max_chars) {
      lines.push_back(line);
      line.clear();
    }
    if (!word.empty()) {
      if (!line.empty()) {
        line += ' ';
      }
      line += word;
    }
    pos = end + 1;
  }
  if (!line.empty()) {
    lines.push_back(line);
  }
  return lines;
}

// A step of 1, 2 or 5 x 10^k that cuts `range` into about `ticks` parts.
double nice_step(double range, double ticks) {
  if (!(range > 0)) {
    return 1;
  }
  const double raw = range / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  const double unit = r <= 1 ? 1 : (r <= 2 ? 2 : (r <= 5 ? 5 : 10));
  return unit * magnitude;
}

// The tick label for a GiB value on a `step` grid: as few decimals as the
// step needs.
std::string tick_label(double value, double step) {
  if (step >= 1) {
    return fmt::format("{:.0f}", value);
  }
  if (step >= 0.1) {
    return fmt::format("{:.1f}", value);
  }
  return fmt::format("{:.2f}", value);
}

std::string display_phase(Phase phase) {
  std::string name(phase_name(phase));
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

// --- The document, element by element. Attribute text written here is
// constant or numeric; user text goes through xml_escape().

class Svg {
 public:
  void rect(double x, double y, double w, double h, std::string_view style,
            std::string_view tooltip = {}) {
    fmt::format_to(out(), R"(<rect x="{}" y="{}" width="{}" height="{}" {})",
                   px(x), px(y), px(std::max(0.0, w)), px(std::max(0.0, h)),
                   style);
    close_with_tooltip("rect", tooltip);
  }

  void line(double x1, double y1, double x2, double y2,
            std::string_view style) {
    fmt::format_to(out(), R"(<line x1="{}" y1="{}" x2="{}" y2="{}" {}/>)",
                   px(x1), px(y1), px(x2), px(y2), style);
    m_body += '\n';
  }

  void circle(double cx, double cy, double r, std::string_view style,
              std::string_view tooltip = {}) {
    fmt::format_to(out(), R"(<circle cx="{}" cy="{}" r="{}" {})", px(cx),
                   px(cy), px(r), style);
    close_with_tooltip("circle", tooltip);
  }

  void polygon(const std::vector<std::pair<double, double>>& points,
               std::string_view style) {
    std::string list;
    for (const auto& [x, y] : points) {
      if (!list.empty()) {
        list += ' ';
      }
      list += px(x) + "," + px(y);
    }
    fmt::format_to(out(), R"(<polygon points="{}" {}/>)", list, style);
    m_body += '\n';
  }

  // `anchor`: start, middle or end; `style`: extra attributes.
  void text(double x, double y, std::string_view content,
            std::string_view style = {}, std::string_view anchor = "start") {
    fmt::format_to(out(), R"(<text x="{}" y="{}")", px(x), px(y));
    if (anchor != "start") {
      fmt::format_to(out(), R"( text-anchor="{}")", anchor);
    }
    if (!style.empty()) {
      fmt::format_to(out(), " {}", style);
    }
    fmt::format_to(out(), ">{}</text>\n", xml_escape(content));
  }

  void raw(std::string_view markup) { m_body += markup; }

  std::string finish(double width, double height,
                     std::string_view title) const {
    std::string doc;
    fmt::format_to(std::back_inserter(doc),
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
                   "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                   "font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" "
                   "font-size=\"12\" fill=\"{2}\">\n"
                   "<title>{3}</title>\n"
                   "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" "
                   "fill=\"#ffffff\"/>\n",
                   px(width), px(std::ceil(height)), k_ink, xml_escape(title));
    doc += m_body;
    doc += "</svg>\n";
    return doc;
  }

 private:
  std::back_insert_iterator<std::string> out() {
    return std::back_inserter(m_body);
  }
  void close_with_tooltip(std::string_view element, std::string_view tooltip) {
    if (tooltip.empty()) {
      m_body += "/>\n";
      return;
    }
    fmt::format_to(out(), "><title>{}</title></{}>\n", xml_escape(tooltip),
                   element);
  }

  std::string m_body;
};

std::string fill(std::string_view colour) {
  return fmt::format(R"(fill="{}")", colour);
}

// Wrapped lines of `text` from `y` on, `line_height` apart; returns the y
// after the last line. Bold text (in `style`) wraps sooner.
double paragraph(Svg& svg, double x, double y, std::string_view text,
                 double font_size, double max_width, std::string_view style) {
  const bool bold = style.find("bold") != std::string_view::npos;
  const double em = bold ? k_bold_char_em : k_char_em;
  const auto max_chars = static_cast<std::size_t>(
      std::max(8.0, std::floor(max_width / (font_size * em))));
  const double line_height = font_size * 1.35;
  for (const std::string& line : wrap(text, max_chars)) {
    svg.text(x, y, line,
             fmt::format(R"(font-size="{}"{}{})", px(font_size),
                         style.empty() ? "" : " ", style));
    y += line_height;
  }
  return y;
}

// --- The plan.

std::string gpu_line(const Resolved& s, const Gpu& gpu) {
  if (s.nodes > 1) {
    return fmt::format("{} nodes x {} {}", s.nodes, s.gpus, gpu.name);
  }
  return fmt::format("{} x {}", s.gpus, gpu.name);
}

std::string peak_text(const Peak& p) {
  return fmt::format(
      "peak at {}: {} GiB allocated (torch max_memory_allocated), {} GiB "
      "reserved (max_memory_reserved), {} GiB on the device (nvidia-smi)",
      phase_name(p.phase), gib(p.allocated_bytes), gib(p.reserved_bytes),
      gib(p.device_bytes));
}

// A horizontal GiB axis under a bar: ticks and labels from 0 to `scale`.
void gib_axis(Svg& svg, double x0, double width, double y, Bytes scale) {
  const double scale_gib = to_gib(scale);
  const double step = nice_step(scale_gib, 8);
  svg.line(x0, y, x0 + width, y, R"(stroke="#999999" stroke-width="1")");
  for (double v = 0; v <= scale_gib * (1 + 1e-9); v += step) {
    const double x = x0 + width * v / scale_gib;
    svg.line(x, y, x, y + 4, R"(stroke="#999999" stroke-width="1")");
    svg.text(x, y + 15, tick_label(v, step),
             fmt::format(R"(font-size="10" {})", fill(k_muted)), "middle");
  }
  svg.text(x0 + width, y + 28, "GiB per GPU",
           fmt::format(R"(font-size="10" {})", fill(k_muted)), "end");
}

// --- The budget bar.

// Where the stacked bar lies, and its bytes-to-x scale.
struct Bar {
  double top = 0;
  Bytes scale = 1;
  double x0 = k_margin;
  double width = k_width - 2 * k_margin;
  double height = 40;

  double x_of(Bytes bytes) const {
    return x0 + width * static_cast<double>(bytes) / static_cast<double>(scale);
  }
  double bottom() const { return top + height; }
};

// The capacity label above the bar, which the headroom label avoids.
struct CapacityLabel {
  std::string text;
  double x = 0;        // the capacity line
  bool right = false;  // starts at the line (else ends there)
};

// The headroom behind the segments, dashed in green.
void headroom_region(Svg& svg, const Bar& bar, const Budget& b) {
  const Bytes total = b.total_bytes();
  svg.rect(bar.x_of(total), bar.top, bar.x_of(b.usable_bytes) - bar.x_of(total),
           bar.height,
           fmt::format(R"({} stroke="{}" stroke-dasharray="4 3")",
                       fill(k_headroom_fill), k_good),
           fmt::format("headroom {} GiB", gib(b.usable_bytes - total)));
}

// One segment per component, its GiB inside it, clear of the capacity line:
// centred in the segment, else in its wider side of the line, else left out.
void bar_segments(Svg& svg, const Bar& bar, const Budget& b) {
  const double cap_x = bar.x_of(b.capacity_bytes);
  Bytes at = 0;
  for (std::size_t i = 0; i < b.count; ++i) {
    const Component& c = b.components[i];
    const ComponentColour& colour = colour_of(c.name);
    const double x = bar.x_of(at);
    const double w = bar.x_of(at + c.bytes) - x;
    svg.rect(
        x, bar.top, w, bar.height,
        fmt::format(R"({} stroke="#ffffff" stroke-width="0.5")",
                    fill(colour.fill)),
        fmt::format("{}: {} GiB ({} of the card) = {}", c.name, gib(c.bytes),
                    percent(c.bytes, b.capacity_bytes), c.formula));
    const std::string label = gib(c.bytes);
    const double need = text_width(label, 11) + 6;
    double left = x;
    double right = x + w;
    if (cap_x > left && cap_x < right &&
        std::abs(cap_x - (left + right) / 2) < need / 2) {
      if (cap_x - left > right - cap_x) {
        right = cap_x;
      } else {
        left = cap_x;
      }
    }
    if (right - left >= need) {
      svg.text((left + right) / 2, bar.top + bar.height / 2 + 4, label,
               fmt::format(R"(font-size="11" {})", fill(colour.text)),
               "middle");
    }
    at += c.bytes;
  }
}

// The overshoot beyond usable memory, outlined in red.
void overshoot_region(Svg& svg, const Bar& bar, const Budget& b) {
  const Bytes total = b.total_bytes();
  svg.rect(bar.x_of(b.usable_bytes), bar.top - 4,
           bar.x_of(total) - bar.x_of(b.usable_bytes), bar.height + 8,
           fmt::format(R"(fill="none" stroke="{}" stroke-width="2")", k_bad),
           fmt::format("over by {} GiB", gib(total - b.usable_bytes)));
}

// The card: capacity (solid) and, when a reserve is set, usable (dashed).
CapacityLabel card_lines(Svg& svg, const Bar& bar, const Budget& b) {
  const double top = bar.top;
  CapacityLabel cap{fmt::format("capacity {} GiB", gib(b.capacity_bytes)),
                    bar.x_of(b.capacity_bytes)};
  svg.line(cap.x, top - 8, cap.x, bar.bottom() + 8,
           fmt::format(R"(stroke="{}" stroke-width="2")", k_ink));
  cap.right = cap.x - text_width(cap.text, 11) < bar.x0;
  svg.text(cap.x, top - 11, cap.text, R"(font-size="11")",
           cap.right ? "start" : "end");
  if (b.usable_bytes != b.capacity_bytes) {
    const double use_x = bar.x_of(b.usable_bytes);
    svg.line(use_x, top - 4, use_x, bar.bottom() + 8,
             fmt::format(R"(stroke="{}" stroke-width="1.5" )"
                         R"(stroke-dasharray="5 3")",
                         k_ink));
    svg.text(use_x, bar.bottom() + 44,
             fmt::format("usable {} GiB", gib(b.usable_bytes)),
             R"(font-size="11")", use_x < k_width / 2 ? "start" : "end");
  }
  return cap;
}

// Headroom in words inside its region when it fits there; otherwise (and
// always for an overshoot, whose region holds segments) above the bar,
// a line higher when it would cover the capacity label.
void gap_label(Svg& svg, const Bar& bar, const Budget& b,
               const CapacityLabel& cap) {
  const Bytes total = b.total_bytes();
  const bool fits = total <= b.usable_bytes;
  const Bytes gap = fits ? b.usable_bytes - total : total - b.usable_bytes;
  const std::string label = fits ? fmt::format("headroom {} GiB", gib(gap))
                                 : fmt::format("over by {} GiB", gib(gap));
  const std::string style = fmt::format(
      R"(font-size="11" font-weight="bold" {})", fill(fits ? k_good : k_bad));
  const double gap_x0 = bar.x_of(std::min(total, b.usable_bytes));
  const double gap_x1 = bar.x_of(std::max(total, b.usable_bytes));
  const double gap_w = text_width(label, 11, true);
  if (fits && gap_x1 - gap_x0 >= gap_w + 8) {
    svg.text((gap_x0 + gap_x1) / 2, bar.top + bar.height / 2 + 4, label, style,
             "middle");
    return;
  }
  // Right-aligned to the region's right end, or starting there when the
  // region is at the left.
  const bool right_aligned = gap_x1 - gap_w >= bar.x0;
  const double lx0 = right_aligned ? gap_x1 - gap_w : gap_x1 + 4;
  const double cap_w = text_width(cap.text, 11);
  const double cap_x0 = cap.right ? cap.x : cap.x - cap_w;
  const bool covers = lx0 < cap_x0 + cap_w + 6 && cap_x0 < lx0 + gap_w + 6;
  svg.text(right_aligned ? gap_x1 : lx0, covers ? bar.top - 25 : bar.top - 11,
           label, style, right_aligned ? "end" : "start");
}

// The legend: the text report's table, one row per component, in two
// columns, then the total and the capacity; returns the y below.
double budget_legend(Svg& svg, const Budget& b, double y) {
  const double x0 = k_margin;
  const double width = k_width - 2 * k_margin;
  const double row_h = 17;
  const double col_w = width / 2;
  const std::size_t rows = (b.count + 1) / 2;
  for (std::size_t i = 0; i < b.count; ++i) {
    const Component& c = b.components[i];
    const double cx = x0 + (i < rows ? 0 : col_w);
    const double cy = y + row_h * static_cast<double>(i % rows);
    svg.rect(cx, cy - 10, 12, 12,
             fmt::format(R"({} stroke="#888888" stroke-width="0.5")",
                         fill(colour_of(c.name).fill)));
    svg.text(cx + 18, cy, c.name);
    svg.text(cx + 210, cy, fmt::format("{} GiB", gib(c.bytes)), {}, "end");
    svg.text(cx + 280, cy, percent(c.bytes, b.capacity_bytes), fill(k_muted),
             "end");
  }
  y += row_h * static_cast<double>(rows) + 4;
  const Bytes total = b.total_bytes();
  svg.line(x0, y - 12, x0 + width, y - 12,
           fmt::format(R"(stroke="{}")", k_grid));
  svg.text(x0 + 18, y + 2, "total", R"(font-weight="bold")");
  svg.text(x0 + 210, y + 2, fmt::format("{} GiB", gib(total)),
           R"(font-weight="bold")", "end");
  svg.text(x0 + 280, y + 2, percent(total, b.capacity_bytes), fill(k_muted),
           "end");
  svg.text(x0 + col_w + 18, y + 2, "capacity");
  svg.text(x0 + col_w + 210, y + 2,
           fmt::format("{} GiB", gib(b.capacity_bytes)), {}, "end");
  return y + 30;
}

// The stacked bar, its markers and the legend table; returns the y below.
double budget_bar(Svg& svg, const Budget& b, double y) {
  svg.text(k_margin, y, "per-GPU memory (the most loaded GPU)",
           R"(font-size="13" font-weight="bold")");
  y += 24;  // room for the capacity and usable labels above the bar
  const Bytes total = b.total_bytes();
  const Bar bar{y,
                std::max({b.capacity_bytes, total, b.usable_bytes, Bytes{1}})};
  if (total <= b.usable_bytes) {
    headroom_region(svg, bar, b);
  }
  bar_segments(svg, bar, b);
  if (total > b.usable_bytes) {
    overshoot_region(svg, bar, b);
  }
  const CapacityLabel cap = card_lines(svg, bar, b);
  gap_label(svg, bar, b, cap);
  gib_axis(svg, bar.x0, bar.width, bar.bottom() + 10, bar.scale);
  return budget_legend(svg, b, bar.bottom() + 66);
}

// --- The step chart.

// A white card behind a label that crosses other drawing.
void label_backdrop(Svg& svg, double x, double y, double w, double h) {
  svg.rect(x - 2, y, w + 4, h, R"(fill="#ffffff" fill-opacity="0.85")");
}

// Where the chart of one step's moments lies, and its GiB-to-y scale.
struct Chart {
  double x0 = k_margin + 44;
  double width = k_width - k_margin - (k_margin + 44);
  double top = 0;
  double height = 190;
  double scale_gib = 1;
  double slot = 0;  // the width each moment's column stands in

  double bottom() const { return top + height; }
  double y_of(Bytes bytes) const {
    return bottom() - height * to_gib(bytes) / scale_gib;
  }
  double centre(std::size_t i) const {
    return x0 + slot * (static_cast<double>(i) + 0.5);
  }
};

// The moment with the most device memory (the first of equals).
std::size_t peak_moment(const Budget& b) {
  Bytes highest = 0;
  std::size_t peak = 0;
  for (std::size_t i = 0; i < b.moment_count; ++i) {
    if (b.moments[i].device_bytes > highest) {
      highest = b.moments[i].device_bytes;
      peak = i;
    }
  }
  return peak;
}

// Grid lines and the y axis's GiB labels.
void chart_grid(Svg& svg, const Chart& chart) {
  const double step = nice_step(chart.scale_gib, 5);
  for (double v = 0; v <= chart.scale_gib; v += step) {
    const double gy = chart.bottom() - chart.height * v / chart.scale_gib;
    svg.line(chart.x0, gy, chart.x0 + chart.width, gy,
             fmt::format(R"(stroke="{}")", k_grid));
    svg.text(chart.x0 - 6, gy + 4, tick_label(v, step),
             fmt::format(R"(font-size="10" {})", fill(k_muted)), "end");
  }
  svg.text(k_margin, chart.top - 6, "GiB",
           fmt::format(R"(font-size="10" {})", fill(k_muted)));
}

// One column per moment: tensors below, the rest of the device above, the
// peak outlined and marked, the moment's name in up to two lines under it.
void chart_columns(Svg& svg, const Chart& chart, const Budget& b) {
  const std::size_t peak = peak_moment(b);
  const double col_w = chart.slot * 0.5;
  const double bottom = chart.bottom();
  for (std::size_t i = 0; i < b.moment_count; ++i) {
    const Moment& m = b.moments[i];
    const double cx = chart.centre(i);
    const double y_alloc = chart.y_of(m.allocated_bytes);
    const double y_dev = chart.y_of(m.device_bytes);
    const std::string tip = fmt::format(
        "{} ({}): {} GiB allocated, {} GiB on the device", m.name,
        display_phase(m.phase), gib(m.allocated_bytes), gib(m.device_bytes));
    svg.rect(cx - col_w / 2, y_alloc, col_w, bottom - y_alloc, fill("#4e79a7"),
             tip);
    svg.rect(cx - col_w / 2, y_dev, col_w, y_alloc - y_dev, fill("#bab0ac"),
             tip);
    if (i == peak) {
      svg.rect(
          cx - col_w / 2, y_dev, col_w, bottom - y_dev,
          fmt::format(R"(fill="none" stroke="{}" stroke-width="2.5")", k_bad));
      svg.polygon(
          {{cx - 6, y_dev - 22}, {cx + 6, y_dev - 22}, {cx, y_dev - 14}},
          fill(k_bad));
      svg.text(
          cx, y_dev - 26, fmt::format("peak {} GiB", gib(m.device_bytes)),
          fmt::format(R"(font-size="11" font-weight="bold" {})", fill(k_bad)),
          "middle");
    } else {
      svg.text(cx, y_dev - 5, gib(m.device_bytes), R"(font-size="11")",
               "middle");
    }
    const auto lines = wrap(m.name, 14);
    for (std::size_t l = 0; l < lines.size() && l < 2; ++l) {
      svg.text(cx, bottom + 15 + 13 * static_cast<double>(l), lines[l],
               R"(font-size="11")", "middle");
    }
  }
}

// The card's lines across the chart, their labels on white, and the axis.
void chart_card_lines(Svg& svg, const Chart& chart, const Budget& b) {
  const double x0 = chart.x0;
  const double x1 = chart.x0 + chart.width;
  const double cap_y = chart.y_of(b.capacity_bytes);
  svg.line(x0, cap_y, x1, cap_y,
           fmt::format(R"(stroke="{}" stroke-width="1.5")", k_ink));
  const std::string cap_label =
      fmt::format("capacity {} GiB", gib(b.capacity_bytes));
  label_backdrop(svg, x1 - text_width(cap_label, 11), cap_y - 15,
                 text_width(cap_label, 11), 14);
  svg.text(x1, cap_y - 4, cap_label, R"(font-size="11")", "end");
  if (b.usable_bytes != b.capacity_bytes) {
    const double use_y = chart.y_of(b.usable_bytes);
    svg.line(x0, use_y, x1, use_y,
             fmt::format(R"(stroke="{}" stroke-dasharray="5 3")", k_ink));
    const std::string use_label =
        fmt::format("usable {} GiB", gib(b.usable_bytes));
    label_backdrop(svg, x1 - text_width(use_label, 11), use_y + 2,
                   text_width(use_label, 11), 14);
    svg.text(x1, use_y + 13, use_label, R"(font-size="11")", "end");
  }
  svg.line(x0, chart.bottom(), x1, chart.bottom(), R"(stroke="#999999")");
}

// Phase bands: consecutive moments of one phase share a bracket; returns
// the bands' y.
double phase_bands(Svg& svg, const Chart& chart, const Budget& b) {
  const std::size_t n = b.moment_count;
  const double band_y = chart.bottom() + 44;
  const std::string stroke =
      fmt::format(R"(stroke="{}" stroke-width="1.5")", k_muted);
  std::size_t first = 0;
  while (first < n) {
    std::size_t last = first;
    while (last + 1 < n &&
           b.moments[last + 1].phase == b.moments[first].phase) {
      ++last;
    }
    const double bx0 = chart.x0 + chart.slot * static_cast<double>(first) + 6;
    const double bx1 =
        chart.x0 + chart.slot * static_cast<double>(last + 1) - 6;
    svg.line(bx0, band_y, bx1, band_y, stroke);
    svg.line(bx0, band_y - 4, bx0, band_y, stroke);
    svg.line(bx1, band_y - 4, bx1, band_y, stroke);
    svg.text((bx0 + bx1) / 2, band_y + 15,
             display_phase(b.moments[first].phase),
             fmt::format(R"(font-weight="bold" {})", fill(k_muted)), "middle");
    first = last + 1;
  }
  return band_y;
}

// Device memory at each moment of one training step, the peak marked;
// returns the y below. REQUIRES: b.moment_count > 0.
double step_chart(Svg& svg, const Budget& b, double y) {
  svg.text(k_margin, y, "memory over one training step (the most loaded GPU)",
           R"(font-size="13" font-weight="bold")");
  y += 12;
  Chart chart;
  chart.top = y + 16;
  // The peak's bytes (none below zero).
  const Bytes highest =
      std::max(Bytes{0}, b.moments[peak_moment(b)].device_bytes);
  chart.scale_gib =
      std::max(to_gib(std::max(highest, b.capacity_bytes)) * 1.12, 1e-9);
  chart.slot = chart.width /
               static_cast<double>(std::max<std::size_t>(b.moment_count, 1));
  chart_grid(svg, chart);
  chart_columns(svg, chart, b);
  chart_card_lines(svg, chart, b);
  const double band_y = phase_bands(svg, chart, b);
  // Legend of the two parts of a column.
  const double ly = band_y + 38;
  svg.rect(chart.x0, ly - 10, 12, 12, fill("#4e79a7"));
  svg.text(chart.x0 + 18, ly, "tensors (torch max_memory_allocated)");
  svg.rect(chart.x0 + 300, ly - 10, 12, 12, fill("#bab0ac"));
  svg.text(chart.x0 + 318, ly,
           "fragmentation, CUDA context, NCCL, paged states");
  return ly + 26;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  constexpr std::string_view k_replacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          // XML 1.0 allows tab, newline and carriage return below 0x20.
          if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
            out += k_replacement;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation
    // bytes; overlong forms, surrogates and values above U+10FFFF are
    // rejected (RFC 3629 §4).
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1FU;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0FU;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07U;
    }
    bool valid = len > 0 && i + len <= text.size();
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0U) != 0x80U) {
        valid = false;
      } else {
        cp = (cp << 6U) | (cc & 0x3FU);
      }
    }
    if (valid) {
      const bool overlong =
          (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
      const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
      // U+FFFE and U+FFFF are not XML characters either.
      const bool nonchar = cp == 0xFFFE || cp == 0xFFFF;
      valid = !overlong && !surrogate && !nonchar && cp <= 0x10FFFF;
    }
    if (valid) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += k_replacement;
      ++i;
    }
  }
  return out;
}

std::string render_plan_svg(const Plan& plan) {
  const Budget& b = plan.budget;
  const Model& model = *plan.model;
  const Gpu& gpu = *plan.gpu;
  Svg svg;
  double y = 30;
  const std::string title =
      fmt::format("{} on {}", model.name, gpu_line(plan.setup, gpu));
  svg.text(k_margin, y, title, R"(font-size="17" font-weight="bold")");
  y += 20;
  y = paragraph(svg, k_margin, y,
                setup_line(model, plan.origin, &gpu, plan.request, plan.setup),
                12, k_width - 2 * k_margin, fill(k_muted));
  y += 14;

  y = budget_bar(svg, b, y);

  y = paragraph(
      svg, k_margin, y,
      fmt::format("{} {}",
                  b.fits() ? "FITS:" : "DOES NOT FIT:", verdict_text(b)),
      14, k_width - 2 * k_margin,
      fmt::format(R"(font-weight="bold" {})", fill(b.fits() ? k_good : k_bad)));
  if (b.headroom_bytes() < 0 && b.vllm && !b.vllm->error.empty()) {
    // Over the card and refused by vLLM: the verdict gives the shortfall,
    // this line vLLM's own reason (the text report's profile section).
    y = paragraph(svg, k_margin, y,
                  fmt::format("vLLM would not start: {}", b.vllm->error), 11,
                  k_width - 2 * k_margin, fill(k_bad));
  }
  y = paragraph(svg, k_margin, y, peak_text(b.peak), 11, k_width - 2 * k_margin,
                fill(k_muted));
  if (b.host_bytes > 0) {
    y = paragraph(svg, k_margin, y,
                  fmt::format("host RAM: {} GiB per node", gib(b.host_bytes)),
                  11, k_width - 2 * k_margin, fill(k_muted));
  }
  const auto warnings = warning_texts(plan);
  if (!warnings.empty()) {
    y += 6;
    svg.text(k_margin, y, "warnings:", R"(font-weight="bold")");
    y += 16;
    for (const std::string& w : warnings) {
      y = paragraph(svg, k_margin + 12, y, "- " + w, 11,
                    k_width - 2 * k_margin - 12, {});
    }
  }
  if (b.moment_count > 0) {
    y += 18;
    y = step_chart(svg, b, y);
  }
  return svg.finish(k_width, y + 6, fmt::format("oomplan: {}", title));
}

std::string render_sizing_svg(const Sizing& sizing) {
  const Model& model = *sizing.model;
  Svg svg;
  double y = 30;
  const std::string title =
      fmt::format("{}: the fewest GPUs that fit, per common GPU", model.name);
  svg.text(k_margin, y, title, R"(font-size="17" font-weight="bold")");
  y += 20;
  y = paragraph(
      svg, k_margin, y,
      fmt::format("{} (up to {} GPUs)",
                  setup_line(model, sizing.origin, nullptr, sizing.setup,
                             resolve(model, Gpu{}, sizing.setup)),
                  sizing.max_gpus),
      12, k_width - 2 * k_margin, fill(k_muted));
  y += 16;

  const double name_w = 110;
  const double x0 = k_margin + name_w;
  const double bar_w = 220;
  Bytes scale = 1;
  for (const SizingRow& row : sizing.rows) {
    scale = std::max(
        {scale, row.usable_bytes, row.total_bytes, row.gpu->capacity_bytes});
  }
  auto x_of = [&](Bytes bytes) {
    return x0 + bar_w * static_cast<double>(bytes) / static_cast<double>(scale);
  };
  const double row_h = 26;
  for (const SizingRow& row : sizing.rows) {
    svg.text(k_margin, y + 13, row.gpu->name, R"(font-weight="bold")");
    svg.rect(x0, y, x_of(row.usable_bytes) - x0, 18,
             R"(fill="#f1f1f1" stroke="#999999")");
    const std::string_view colour = row.fits ? "#4e79a7" : "#bab0ac";
    svg.rect(x0, y + 3, x_of(std::min(row.total_bytes, scale)) - x0, 12,
             fill(colour));
    std::string label;
    if (row.fits) {
      label =
          fmt::format("{} GPUs: {} of {} GiB per GPU, {} GiB headroom",
                      row.count, gib(row.total_bytes), gib(row.usable_bytes),
                      gib(row.usable_bytes - row.total_bytes));
    } else {
      label = fmt::format("does not fit on {} or fewer", sizing.max_gpus);
    }
    svg.text(
        x0 + bar_w + 10, y + 13, label,
        fmt::format(R"(font-size="11" {})", fill(row.fits ? k_ink : k_muted)));
    y += row_h;
  }
  gib_axis(svg, x0, bar_w, y, scale);
  return svg.finish(k_width, y + 40, fmt::format("oomplan: {}", title));
}

namespace {

// --- The fit front.

// Headroom as a share of the card, in bins a reader can name.
struct Bin {
  double below;  // share of capacity
  std::string_view colour;
  std::string_view label;
};
constexpr std::array k_bins = {
    Bin{0.05, "#d62728", "under 5 %"},    Bin{0.10, "#ff7f0e", "5 to 10 %"},
    Bin{0.20, "#e6c229", "10 to 20 %"},   Bin{0.40, "#8cc665", "20 to 40 %"},
    Bin{2.00, "#2ca02c", "40 % or more"},
};

std::string_view colour_of_plan(const FitPlan& p) {
  if (!p.fits) {
    return "#bab0ac";
  }
  const double s = share(p.headroom_bytes, p.gpu->capacity_bytes);
  for (const Bin& bin : k_bins) {
    if (s < bin.below) {
      return bin.colour;
    }
  }
  return k_bins.back().colour;
}

// The plot: GPUs on powers of two, time on a log scale, each range padded
// so no point sits on the frame.
struct FitAxes {
  double px0 = k_margin + 60;
  double pw = 620;
  double ptop = 0;
  double ph = 260;
  double gmin = 1e300;  // log2 of GPUs
  double gmax = 0;
  double tmin = 1e300;  // log10 of seconds
  double tmax = -1e300;

  double pbottom() const { return ptop + ph; }
  double x_of(int gpus) const {
    return px0 +
           pw * (std::log2(static_cast<double>(gpus)) - gmin) / (gmax - gmin);
  }
  double y_of(double seconds) const {
    const double t = seconds > 0 ? std::log10(seconds) : tmin;
    return pbottom() - ph * (t - tmin) / (tmax - tmin);
  }
};

FitAxes fit_axes(const FitResult& result, double top) {
  FitAxes a;
  a.ptop = top;
  for (const FitPlan& p : result.plans) {
    const double g = std::log2(static_cast<double>(p.setup.total_gpus()));
    a.gmin = std::min(a.gmin, g);
    a.gmax = std::max(a.gmax, g);
    if (p.time.step_s > 0) {
      const double t = std::log10(p.time.step_s);
      a.tmin = std::min(a.tmin, t);
      a.tmax = std::max(a.tmax, t);
    }
  }
  if (a.tmax < a.tmin) {  // no plan has a time estimate
    a.tmin = -1;
    a.tmax = 1;
  }
  a.gmin = std::floor(a.gmin) - 0.5;
  a.gmax = std::ceil(a.gmax) + 0.5;
  if (a.tmax - a.tmin < 0.3) {
    const double mid = (a.tmax + a.tmin) / 2;
    a.tmin = mid - 0.15;
    a.tmax = mid + 0.15;
  }
  a.tmin -= 0.1;
  a.tmax += 0.1;
  return a;
}

// The frame, the GPU ticks and the 1-2-5 time grid, with their labels.
void draw_fit_axes(Svg& svg, const FitAxes& a, bool training) {
  const double pbottom = a.pbottom();
  svg.rect(a.px0, a.ptop, a.pw, a.ph, R"(fill="none" stroke="#999999")");
  for (int k = static_cast<int>(std::ceil(a.gmin)); k <= a.gmax; ++k) {
    const int gpus = 1 << k;
    const double x = a.x_of(gpus);
    svg.line(x, a.ptop, x, pbottom, fmt::format(R"(stroke="{}")", k_grid));
    svg.text(x, pbottom + 15, fmt::format("{}", gpus),
             fmt::format(R"(font-size="10" {})", fill(k_muted)), "middle");
  }
  svg.text(a.px0 + a.pw / 2, pbottom + 32, "GPUs in total",
           fmt::format(R"(font-size="11" {})", fill(k_muted)), "middle");
  for (int e = static_cast<int>(std::floor(a.tmin)); e <= std::ceil(a.tmax);
       ++e) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, e);
      const double t = std::log10(v);
      if (t < a.tmin || t > a.tmax) {
        continue;
      }
      const double gy = a.y_of(v);
      svg.line(a.px0, gy, a.px0 + a.pw, gy,
               fmt::format(R"(stroke="{}")", k_grid));
      svg.text(a.px0 - 6, gy + 4, duration(v),
               fmt::format(R"(font-size="10" {})", fill(k_muted)), "end");
    }
  }
  svg.text(a.px0, a.ptop - 6,
           training ? "time per optimizer step" : "time per output token",
           fmt::format(R"(font-size="11" {})", fill(k_muted)));
}

// Point centres; a plan on the spot of a better one moves right by a
// point's width so both stay visible.
std::vector<std::pair<double, double>> point_centres(const FitResult& result,
                                                     const FitAxes& a) {
  std::vector<std::pair<double, double>> centres;
  for (const FitPlan& p : result.plans) {
    double cx = a.x_of(p.setup.total_gpus());
    const double cy = a.y_of(p.time.step_s);
    for (const auto& [ox, oy] : centres) {
      if (std::abs(ox - cx) < 10 && std::abs(oy - cy) < 10) {
        cx = ox + 13;
      }
    }
    centres.emplace_back(cx, cy);
  }
  return centres;
}

struct Box {
  double x0, y0, x1, y1;
};

// The points, best last so the best is on top, each with its command as a
// tooltip; returns the boxes they cover.
std::vector<Box> draw_points(
    Svg& svg, const FitResult& result,
    const std::vector<std::pair<double, double>>& centres, const Model& model,
    const std::string& model_arg) {
  std::vector<Box> placed;
  for (std::size_t i = result.plans.size(); i-- > 0;) {
    const FitPlan& p = result.plans[i];
    const auto [cx, cy] = centres[i];
    svg.circle(cx, cy, 6,
               fmt::format(R"({} stroke="{}" stroke-width="1")",
                           fill(colour_of_plan(p)), k_ink),
               fmt::format("#{} oomplan {}", i + 1,
                           plan_args(model_arg, model, *p.gpu, p.request)));
    placed.push_back({cx - 6, cy - 6, cx + 6, cy + 6});
  }
  return placed;
}

// Labels: "#1 8x H100-80" beside its point where that covers nothing, else
// "#1" alone (the list below names every plan); `placed` holds what is
// drawn already.
void draw_point_labels(Svg& svg, const FitResult& result,
                       const std::vector<std::pair<double, double>>& centres,
                       const FitAxes& a, std::vector<Box>& placed) {
  const auto overlaps = [&](const Box& b) {
    return std::any_of(placed.begin(), placed.end(), [&](const Box& o) {
      return b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1;
    });
  };
  const auto inside = [&](const Box& b) {
    return b.x0 >= a.px0 && b.x1 <= a.px0 + a.pw && b.y0 >= a.ptop &&
           b.y1 <= a.pbottom();
  };
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    const FitPlan& p = result.plans[i];
    const auto [cx, cy] = centres[i];
    const std::array<std::string, 2> labels = {
        fmt::format("#{} {}x {}", i + 1, p.setup.total_gpus(), p.gpu->name),
        fmt::format("#{}", i + 1)};
    std::optional<std::pair<Box, std::size_t>> chosen;
    for (std::size_t l = 0; l < labels.size() && !chosen; ++l) {
      const double w = text_width(labels[l], 10);
      for (const double dy : {0.0, 10.0, -10.0}) {
        for (const bool right : {true, false}) {
          const double bx = right ? cx + 9 : cx - 9 - w;
          const Box box{bx, cy - 8 + dy, bx + w, cy + 4 + dy};
          if (!chosen && inside(box) && !overlaps(box)) {
            chosen = std::make_pair(box, l);
          }
        }
      }
    }
    if (!chosen) {
      const double w = text_width(labels[1], 10);
      chosen = std::make_pair(Box{cx + 9, cy - 8, cx + 9 + w, cy + 4},
                              std::size_t{1});
    }
    placed.push_back(chosen->first);
    svg.text(chosen->first.x0, chosen->first.y1 - 2, labels[chosen->second],
             R"(font-size="10")");
  }
}

// The colour legend right of the plot.
void headroom_legend(Svg& svg, const FitAxes& a) {
  double ly = a.ptop + 10;
  const double lx = a.px0 + a.pw + 20;
  svg.text(lx, ly, "headroom", R"(font-weight="bold")");
  ly += 6;
  svg.text(lx, ly + 10, "(share of the card)",
           fmt::format(R"(font-size="10" {})", fill(k_muted)));
  ly += 22;
  for (const Bin& bin : k_bins) {
    svg.circle(lx + 6, ly - 4, 6,
               fmt::format(R"({} stroke="{}" stroke-width="1")",
                           fill(bin.colour), k_ink));
    svg.text(lx + 18, ly, bin.label, R"(font-size="11")");
    ly += 18;
  }
}

// The plans as a list from `y` on: the numbers of `oomplan fit`'s table;
// returns the y below.
double fit_list(Svg& svg, const FitResult& result, double y, bool training) {
  const double c_gpus = k_margin + 30;
  const double c_per_gpu = k_margin + 250;
  const double c_headroom = k_margin + 340;
  const double c_step = k_margin + 420;
  const double c_rate = k_margin + 500;
  const double c_layout = k_margin + 520;
  const std::string_view bold = R"(font-weight="bold")";
  svg.text(k_margin, y, "#", bold);
  svg.text(c_gpus, y, "GPUs", bold);
  svg.text(c_per_gpu, y, "per GPU", bold, "end");
  svg.text(c_headroom, y, "headroom", bold, "end");
  svg.text(c_step, y, training ? "step" : "decode", bold, "end");
  svg.text(c_rate, y, "tokens/s", bold, "end");
  svg.text(c_layout, y, "layout", bold);
  y += 17;
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    const FitPlan& p = result.plans[i];
    const Resolved& s = p.setup;
    svg.circle(k_margin + 4, y - 4, 4, fill(colour_of_plan(p)));
    svg.text(k_margin + 12, y, fmt::format("{}", i + 1));
    svg.text(c_gpus, y, fmt::format("{}x {}", s.total_gpus(), p.gpu->name));
    svg.text(c_per_gpu, y, format_gib(p.total_bytes), {}, "end");
    svg.text(c_headroom, y, format_gib(p.headroom_bytes), {}, "end");
    svg.text(c_step, y, duration(p.time.step_s), {}, "end");
    svg.text(c_rate, y, rate(p.time.tokens_per_s), {}, "end");
    const double next =
        paragraph(svg, c_layout, y, fit_layout(s), 11,
                  k_fit_width - k_margin - c_layout, fill(k_muted));
    y = std::max(y + 17, next + 2);
  }
  return y;
}

}  // namespace

std::string render_fit_svg(const FitResult& result, const Model& model,
                           const std::string& model_arg) {
  const Setup& base = result.base;
  const double width = k_fit_width;
  Svg svg;
  double y = 30;
  const std::string title =
      fmt::format("oomplan fit {}: {}, {} tokens per sequence, up to {} GPUs",
                  model.name, mode_name(base.mode), base.seq, result.max_gpus);
  svg.text(k_margin, y, title, R"(font-size="17" font-weight="bold")");
  y += 20;
  y = paragraph(
      svg, k_margin, y,
      fmt::format("{} configurations priced, {} on the Pareto front (GPUs, "
                  "time, headroom); the best {} shown",
                  result.evaluated, result.front, result.plans.size()),
      12, width - 2 * k_margin, fill(k_muted));
  y += 10;
  if (result.plans.empty()) {
    y = paragraph(svg, k_margin, y + 10,
                  fmt::format("no configuration fits within {} GPUs; raise "
                              "--max-gpus, lower --seq or allow quantization "
                              "and offload",
                              result.max_gpus),
                  14, width - 2 * k_margin,
                  fmt::format(R"(font-weight="bold" {})", fill(k_bad)));
    return svg.finish(width, y + 10, title);
  }
  const FitAxes axes = fit_axes(result, y + 10);
  draw_fit_axes(svg, axes, base.training());
  const auto centres = point_centres(result, axes);
  std::vector<Box> placed = draw_points(svg, result, centres, model, model_arg);
  draw_point_labels(svg, result, centres, axes, placed);
  headroom_legend(svg, axes);
  y = fit_list(svg, result, axes.pbottom() + 56, base.training());
  return svg.finish(width, y + 8, title);
}

}  // namespace oomplan
