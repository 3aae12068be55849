#include "support.hpp"
#include "xml_check.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/advice/search.hpp"
#include "oomplan/advice/sizing.hpp"
#include "oomplan/memory/memory.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/render/svg.hpp"
#include "oomplan/setup/options.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace oomplan {
namespace {

using test::catalog;
using test::elements_named;
using test::parse_xml;
using test::XmlDocument;
using test::XmlElement;

// One plan as `oomplan MODEL --gpus SPEC ...` computes it (plan.hpp's
// pipeline).
Plan plan_for(const std::string& model_arg, const std::string& gpus,
              Setup setup) {
  const Model& model = find_model(catalog(), model_arg);
  const GpuSpec spec = parse_gpu_spec(catalog(), gpus);
  REQUIRE(spec.gpu != nullptr);
  setup.gpus = spec.count;
  return make_plan(model, *spec.gpu, setup, model_arg, advisor(catalog().gpus));
}

// README's first example: oomplan llama3-70b --gpus 4xA100-80 --seq 8192.
Plan readme_plan() {
  return plan_for("llama3-70b", "4xA100-80", Setup{.seq = 8192});
}

// DESIGN §1's full fine-tune: --gpus 8xH100 --mode full --seq 4096 --zero 3.
Plan training_plan() {
  return plan_for("llama3-70b", "8xH100",
                  Setup{.mode = Mode::full, .seq = 4096, .zero = 3});
}

XmlDocument parsed(const std::string& svg) {
  XmlDocument doc = parse_xml(svg);
  INFO(doc.error);
  REQUIRE(doc.ok);
  return doc;
}

// The character data of every <text> element, in document order.
std::vector<std::string> texts(const XmlElement& root) {
  std::vector<std::string> out;
  for (const XmlElement* e : elements_named(root, "text")) {
    out.push_back(e->text);
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    out += line;
    out += ' ';
  }
  return out;
}

bool has_text(const std::vector<std::string>& all, const std::string& want) {
  return std::find(all.begin(), all.end(), want) != all.end();
}

// The text report's budget table: component -> GiB as printed.
std::map<std::string, std::string> text_table(const std::string& report) {
  std::map<std::string, std::string> rows;
  const std::regex row(R"(^  ([a-z_]+) +([0-9]+\.[0-9]{2}) )");
  std::istringstream in(report);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      rows[m[1].str()] = m[2].str();
    }
  }
  return rows;
}

// The line of the text report that starts with `prefix`.
std::string report_line(const std::string& report, const std::string& prefix) {
  std::istringstream in(report);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      return line;
    }
  }
  return {};
}

// The <rect> whose tooltip starts with `prefix`.
const XmlElement* rect_with_tooltip(const XmlElement& root,
                                    const std::string& prefix) {
  for (const XmlElement* r : elements_named(root, "rect")) {
    for (const XmlElement& child : r->children) {
      if (child.name == "title" && child.text.rfind(prefix, 0) == 0) {
        return r;
      }
    }
  }
  return nullptr;
}

// An attribute's value; empty when absent.
std::string attr(const XmlElement& e, std::string_view key) {
  const std::string* v = e.attribute(key);
  return v != nullptr ? *v : std::string();
}

double number(const XmlElement& e, std::string_view key) {
  const std::string v = attr(e, key);
  REQUIRE(!v.empty());
  return std::stod(v);
}

TEST_CASE("svg: the README plan's labels carry the text report's GiB",
          "[svg]") {
  const Plan plan = readme_plan();
  const std::string report = render_text(plan, {});
  const XmlDocument doc = parsed(render_plan_svg(plan));
  const auto all = texts(doc.root);

  const auto table = text_table(report);
  // weights, kv_cache, activations, logits, overhead, fragmentation, total,
  // capacity: every row of the text table has its GiB in the legend.
  REQUIRE(table.size() == 8);
  for (const auto& [name, value] : table) {
    INFO(name);
    CHECK(has_text(all, name));
    CHECK(has_text(all, value + " GiB"));
  }
  // The setup line, the verdict and the peak sentence, word for word
  // (wrapped at spaces).
  CHECK_THAT(joined(all), Catch::Contains(report.substr(0, report.find('\n'))));
  const std::string verdict = report_line(report, "FITS: ");
  REQUIRE(!verdict.empty());
  CHECK_THAT(joined(all), Catch::Contains(verdict));
  CHECK_THAT(joined(all), Catch::Contains(report_line(report, "peak at ")));
  CHECK(has_text(all, "capacity 79.15 GiB"));
  CHECK(has_text(all, "headroom 42.48 GiB"));
}

TEST_CASE("svg: each budget segment is as wide as its share of the card",
          "[svg]") {
  const Plan plan = readme_plan();
  const XmlDocument doc = parsed(render_plan_svg(plan));
  // The bar spans 760 - 2 x 20 = 720 px for the card's capacity (the plan
  // fits, so the capacity is the scale): weights 32.86 of 79.15 GiB is
  // 720 x 0.4152 = 298.9 px, drawn from x = 20.
  const XmlElement* weights = rect_with_tooltip(doc.root, "weights: ");
  REQUIRE(weights != nullptr);
  const double expected = 720.0 *
                          static_cast<double>(plan.budget.bytes_of("weights")) /
                          static_cast<double>(plan.budget.capacity_bytes);
  CHECK(number(*weights, "x") == Approx(20.0));
  CHECK(number(*weights, "width") == Approx(expected).margin(0.05));
  CHECK(number(*weights, "width") == Approx(298.9).margin(0.1));
  // The next segment starts where weights end.
  const XmlElement* kv = rect_with_tooltip(doc.root, "kv_cache: ");
  REQUIRE(kv != nullptr);
  CHECK(number(*kv, "x") == Approx(20.0 + expected).margin(0.05));
}

TEST_CASE(
    "svg: a plan that does not fit shows the overshoot of the text "
    "report",
    "[svg]") {
  // README's second example: 70B on one A100-80 at 8192 tokens.
  const Plan plan = plan_for("llama3-70b", "1xA100-80", Setup{.seq = 8192});
  REQUIRE(!plan.budget.fits());
  const std::string report = render_text(plan, {});
  const auto all = texts(parsed(render_plan_svg(plan)).root);
  const std::string verdict = report_line(report, "DOES NOT FIT: ");
  REQUIRE(!verdict.empty());
  CHECK_THAT(joined(all), Catch::Contains(verdict));
  // "needs X GiB per GPU, Y GiB over the Z GiB usable": Y is the overshoot.
  const std::regex over(R"(, ([0-9.]+) GiB over the)");
  std::smatch m;
  REQUIRE(std::regex_search(verdict, m, over));
  CHECK(has_text(all, "over by " + m[1].str() + " GiB"));
}

TEST_CASE(
    "svg: a training plan draws each moment of the step and marks the "
    "peak at the budget's total",
    "[svg]") {
  const Plan plan = training_plan();
  const Budget& b = plan.budget;
  REQUIRE(b.moment_count == 6);
  // The timeline's largest moment is the budget: its device bytes are the
  // total and its tensors the allocated peak, in the peak's phase.
  const auto worst = std::max_element(b.moments.begin(), b.moments.begin() + 6,
                                      [](const Moment& x, const Moment& y) {
                                        return x.device_bytes < y.device_bytes;
                                      });
  CHECK(worst->device_bytes == b.total_bytes());
  CHECK(worst->allocated_bytes == b.peak.allocated_bytes);
  CHECK(worst->phase == b.peak.phase);
  // Steps run forward, then backward, then the optimizer step.
  CHECK(b.moments[0].phase == Phase::forward);
  CHECK(b.moments[5].phase == Phase::optimizer_step);

  const std::string report = render_text(plan, {});
  const auto all = texts(parsed(render_plan_svg(plan)).root);
  const auto table = text_table(report);
  CHECK(has_text(all, "peak " + table.at("total") + " GiB"));
  CHECK(has_text(all, "forward"));
  CHECK(has_text(all, "backward"));
  CHECK(has_text(all, "optimizer step"));
  for (std::size_t i = 0; i < b.moment_count; ++i) {
    if (b.moments[i].device_bytes != worst->device_bytes) {
      CHECK(has_text(all,
                     fmt::format("{:.2f}", to_gib(b.moments[i].device_bytes))));
    }
  }
}

TEST_CASE("svg: inference plans draw no step chart", "[svg]") {
  const Plan plan = readme_plan();
  CHECK(plan.budget.moment_count == 0);
  const auto all = texts(parsed(render_plan_svg(plan)).root);
  CHECK(!has_text(all, "optimizer step"));
}

TEST_CASE("svg: xml_escape escapes markup and replaces what XML cannot hold",
          "[svg]") {
  CHECK(xml_escape(R"(a<b & "c" 'd'>)") ==
        "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  // Multi-byte UTF-8 stays: é (2 bytes), ≥ (3), 🚀 (4).
  CHECK(xml_escape("\xC3\xA9 \xE2\x89\xA5 \xF0\x9F\x9A\x80") ==
        "\xC3\xA9 \xE2\x89\xA5 \xF0\x9F\x9A\x80");
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(xml_escape("a\x01z") == "a" + fffd + "z");  // control character
  CHECK(xml_escape("\xFF") == fffd);                // never a UTF-8 byte
  CHECK(xml_escape("\xC3") == fffd);                // truncated sequence
  CHECK(xml_escape("\xC0\xAF") == fffd + fffd);     // overlong '/'
  // A UTF-16 surrogate (U+D800) encoded in UTF-8: the lead byte is rejected,
  // then each continuation byte.
  CHECK(xml_escape("\xED\xA0\x80") == fffd + fffd + fffd);
  CHECK(xml_escape("tab\tline\n") == "tab\tline\n");
}

TEST_CASE("svg: a hostile model name still gives well-formed XML", "[svg]") {
  Plan plan = readme_plan();
  Model evil = *plan.model;
  evil.name = "</text><script>alert('x')</script> & \"q\" \x01\xFF";
  plan.model = &evil;
  const XmlDocument doc = parsed(render_plan_svg(plan));
  CHECK(elements_named(doc.root, "script").empty());
  const auto all = texts(doc.root);
  CHECK_THAT(joined(all),
             Catch::Contains("</text><script>alert('x')</script> & \"q\""));
}

TEST_CASE("svg: the document is SVG 1.1 with its size and a title", "[svg]") {
  const XmlDocument doc = parsed(render_plan_svg(training_plan()));
  CHECK(doc.root.name == "svg");
  CHECK(attr(doc.root, "xmlns") == "http://www.w3.org/2000/svg");
  CHECK(attr(doc.root, "version") == "1.1");
  const double height = number(doc.root, "height");
  CHECK(number(doc.root, "width") == 760);
  CHECK(attr(doc.root, "viewBox") == "0 0 760.0 " + attr(doc.root, "height"));
  // Nothing is drawn below the bottom edge.
  for (const XmlElement* t : elements_named(doc.root, "text")) {
    CHECK(number(*t, "y") < height);
  }
  REQUIRE(!doc.root.children.empty());
  CHECK(doc.root.children.front().name == "title");
}

TEST_CASE(
    "svg: the sizing picture shows each GPU's count and the text "
    "report's GiB",
    "[svg]") {
  // Three rows of README's `oomplan llama3-70b --seq 8192` (the fewest GPUs
  // that fit), and one card on which nothing fits within 1 GPU.
  Sizing sizing;
  sizing.model = &find_model(catalog(), "llama3-70b");
  sizing.setup = Setup{.seq = 8192};
  sizing.model_arg = "llama3-70b";
  sizing.max_gpus = 64;
  for (const auto& [name, count] : std::vector<std::pair<std::string, int>>{
           {"A100-80", 2}, {"H100", 2}, {"L40S", 4}, {"RTX4090", 1}}) {
    const Plan p = plan_for("llama3-70b", fmt::format("{}x{}", count, name),
                            Setup{.seq = 8192});
    sizing.rows.push_back(SizingRow{.gpu = p.gpu,
                                    .count = p.budget.fits() ? count : 0,
                                    .request = p.request,
                                    .setup = p.setup,
                                    .moves = {},
                                    .total_bytes = p.budget.total_bytes(),
                                    .usable_bytes = p.budget.usable_bytes,
                                    .fits = p.budget.fits()});
  }
  const std::string report = render_sizing_text(sizing, {});
  const auto all = texts(parsed(render_sizing_svg(sizing)).root);
  // "  A100-80         2         72.12       79.15        7.03  oomplan ..."
  const std::regex row(
      R"(^  (\S+) +([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)  oomplan )");
  std::istringstream in(report);
  std::string line;
  int fitting = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      ++fitting;
      INFO(line);
      CHECK(has_text(all, m[1].str()));
      CHECK(has_text(
          all, fmt::format("{} GPUs: {} of {} GiB per GPU, {} GiB "
                           "headroom",
                           m[2].str(), m[3].str(), m[4].str(), m[5].str())));
    }
  }
  CHECK(fitting == 3);
  CHECK(has_text(all, "RTX4090"));
  CHECK(has_text(all, "does not fit on 64 or fewer"));
}

// The fit front of README's search, restricted to three cards to stay fast.
FitResult small_fit(const Model& model) {
  std::vector<FitCard> gpus;
  for (const char* name : {"A100-80", "H100", "L40S"}) {
    gpus.push_back({&find_gpu(catalog(), name), 0, std::nullopt});
  }
  FitConstraints constraints;
  constraints.max_gpus = 16;
  return fit(model, gpus, Setup{.mode = Mode::full, .seq = 4096}, constraints);
}

TEST_CASE(
    "svg: the fit front places plans by GPUs and time and lists the "
    "text table's numbers",
    "[svg]") {
  const Model& model = find_model(catalog(), "llama3-8b");
  const FitResult result = small_fit(model);
  REQUIRE(result.plans.size() >= 2);
  const XmlDocument doc = parsed(render_fit_svg(result, model, "llama3-8b"));
  const auto all = texts(doc.root);
  const std::string table = render_fit_text(result, model, "llama3-8b");

  // Each plan's circle carries its command line; more GPUs lie further
  // right, a longer step higher up (smaller y).
  struct Point {
    double x, y;
  };
  std::map<std::size_t, Point> points;
  for (const XmlElement* c : elements_named(doc.root, "circle")) {
    for (const XmlElement& child : c->children) {
      if (child.name != "title") {
        continue;
      }
      const std::regex tip(R"(^#([0-9]+) oomplan (.*)$)");
      std::smatch m;
      REQUIRE(std::regex_match(child.text, m, tip));
      const std::size_t rank = std::stoul(m[1].str());
      const FitPlan& p = result.plans.at(rank - 1);
      CHECK(m[2].str() == plan_args("llama3-8b", model, *p.gpu, p.request));
      CHECK_THAT(table, Catch::Contains("oomplan " + m[2].str()));
      points[rank - 1] = {number(*c, "cx"), number(*c, "cy")};
    }
  }
  REQUIRE(points.size() == result.plans.size());
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    for (std::size_t j = 0; j < result.plans.size(); ++j) {
      const FitPlan& a = result.plans[i];
      const FitPlan& b = result.plans[j];
      if (a.setup.total_gpus() < b.setup.total_gpus()) {
        CHECK(points[i].x < points[j].x);
      }
      if (a.time.step_s < b.time.step_s * 0.999) {
        CHECK(points[i].y > points[j].y);
      }
    }
  }
  // The list repeats `oomplan fit`'s per-GPU and headroom figures.
  for (const FitPlan& p : result.plans) {
    CHECK(has_text(all, format_gib(p.total_bytes)));
    CHECK(has_text(all, format_gib(p.headroom_bytes)));
    CHECK_THAT(table, Catch::Contains(format_gib(p.total_bytes)));
  }
  CHECK(
      has_text(all, fmt::format("#1 {}x {}", result.plans[0].setup.total_gpus(),
                                result.plans[0].gpu->name)));
}

TEST_CASE("svg: a fit with no plan says so", "[svg]") {
  const Model& model = find_model(catalog(), "llama3-70b");
  FitResult empty;
  empty.base = Setup{.mode = Mode::full, .seq = 8192};
  empty.max_gpus = 1;
  const auto all =
      texts(parsed(render_fit_svg(empty, model, "llama3-70b")).root);
  CHECK_THAT(joined(all),
             Catch::Contains("no configuration fits within 1 GPUs"));
}

// The pictures committed for README stay what the code draws. On a
// difference the fresh rendering is written to the build tree; copy it over
// the committed file when the change is intended.
void check_committed(const std::string& name, const std::string& svg) {
  namespace fs = std::filesystem;
  const fs::path committed = fs::path(OOMPLAN_TEST_DATA) / "readme" / name;
  if (oomplan::test::read_file_text(committed) != svg) {
    const fs::path fresh = fs::path(OOMPLAN_TEST_OUTPUT) / "readme" / name;
    fs::create_directories(fresh.parent_path());
    std::ofstream(fresh, std::ios::binary) << svg;
    FAIL_CHECK(committed.string()
               << " differs from what the code draws; if intended: cp "
               << fresh.string() << " " << committed.string());
  }
}

TEST_CASE("svg: README's pictures are regenerated byte for byte", "[svg]") {
  check_committed("llama3-70b-4xA100-80-seq8192.svg",
                  render_plan_svg(readme_plan()));
  check_committed("llama3-70b-8xH100-full-zero3.svg",
                  render_plan_svg(training_plan()));
}

}  // namespace
}  // namespace oomplan
