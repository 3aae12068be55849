// Published measurements (tests/data/validation/public.json, a copy of the
// shared validation set) run through the in-process CLI exactly as
// ../shared/validation/check.py runs the binary. Every check must pass within
// its tolerance unless tests/data/validation/known_gaps.json lists it with the
// reason; a listed check that starts passing is reported so the list can
// shrink.

#include "support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using nlohmann::json;

const std::string k_dir = std::string(OOMPLAN_TEST_DATA) + "/validation";

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

// check.py's metric path: dots walk objects; on a list a number indexes it and
// a word picks the element whose "name" equals it; "+" sums several paths.
// Returns nullptr when absent.
const json* resolve(const json& doc, const std::string& path) {
  const json* node = &doc;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (node->is_object() && node->contains(part)) {
      node = &(*node)[part];
    } else if (node->is_array() && !part.empty() &&
               std::all_of(part.begin(), part.end(),
                           [](char c) { return c >= '0' && c <= '9'; })) {
      const auto index = std::stoul(part);
      if (index >= node->size()) {
        return nullptr;
      }
      node = &(*node)[index];
    } else if (node->is_array()) {
      const json* found = nullptr;
      for (const auto& element : *node) {
        if (element.is_object() && element.value("name", "") == part) {
          found = &element;
          break;
        }
      }
      if (found == nullptr) {
        return nullptr;
      }
      node = found;
    } else {
      return nullptr;
    }
  }
  return node->is_null() ? nullptr : node;
}

struct Outcome {
  std::string id;
  std::string category;
  bool passed = false;
  bool ran = false;
  double error = 0;  // signed relative error of numeric checks
  bool numeric = false;
  std::string detail;
};

Outcome evaluate(const json& check,
                 std::map<std::string, oomplan::test::CliResult>& cache) {
  Outcome outcome;
  outcome.id = check.at("id").get<std::string>();
  outcome.category = check.at("category").get<std::string>();
  std::vector<std::string> args;
  std::string key;
  for (const auto& arg : check.at("args")) {
    auto text = arg.get<std::string>();
    // check.py runs with the set's folder as the working directory: a
    // config path is relative to it (configs/..., ../hf/...).
    if (text.rfind("configs/", 0) == 0 || text.rfind("../", 0) == 0) {
      text = k_dir + "/" + text;
    }
    key += text + ' ';
    args.push_back(text);
  }
  if (cache.find(key) == cache.end()) {
    cache[key] = oomplan::test::run_cli(args);
  }
  const auto& result = cache[key];
  if (result.code == 2) {
    outcome.detail = "unsupported: " + result.err;
    return outcome;
  }
  json doc;
  try {
    doc = json::parse(result.out);
  } catch (const json::exception& e) {
    outcome.detail = std::string("stdout is not JSON: ") + e.what();
    return outcome;
  }
  double predicted = 0;
  const auto metric = check.at("metric").get<std::string>();
  const auto& expected = check.at("expected");
  std::stringstream paths(metric);
  std::string path;
  while (std::getline(paths, path, '+')) {
    const json* value = resolve(doc, path);
    if (value == nullptr) {
      outcome.detail = "no " + path + " in the plan";
      return outcome;
    }
    if (expected.is_boolean()) {
      outcome.ran = true;
      outcome.passed =
          value->is_boolean() && value->get<bool>() == expected.get<bool>();
      outcome.detail = value->dump();
      return outcome;
    }
    predicted += value->get<double>();
  }
  outcome.ran = true;
  outcome.numeric = true;
  const double want = expected.get<double>();
  outcome.error = (predicted - want) / want;
  const double slack =
      std::max(check.at("tolerance").get<double>() * std::abs(want),
               check.value("abs_tolerance", 0.0));
  outcome.passed = std::abs(predicted - want) <= slack;
  outcome.detail =
      fmt::format("expected {:.4g}, predicted {:.4g}", want, predicted);
  return outcome;
}

}  // namespace

TEST_CASE(
    "validation: published measurements are predicted within their tolerance",
    "[validation]") {
  const json set = read_json(k_dir + "/public.json");
  const json gaps = read_json(k_dir + "/known_gaps.json");
  std::set<std::string> known;
  for (const auto& gap : gaps.at("gaps")) {
    known.insert(gap.at("id").get<std::string>());
  }

  std::map<std::string, oomplan::test::CliResult> cache;
  std::map<std::string, std::vector<Outcome>> by_category;
  for (const auto& check : set.at("checks")) {
    auto outcome = evaluate(check, cache);
    by_category[outcome.category].push_back(outcome);
  }

  // The table the closing note quotes: per category, median |error|, share
  // within tolerance.
  std::string table =
      fmt::format("{:<14} {:>4} {:>12} {:>8} {:>9}\n", "category", "n",
                  "median|err|", "in-tol", "verdicts");
  for (const auto& [category, outcomes] : by_category) {
    std::vector<double> errors;
    int numeric_pass = 0;
    int numeric = 0;
    int verdicts = 0;
    int verdicts_right = 0;
    for (const auto& o : outcomes) {
      if (o.numeric) {
        ++numeric;
        numeric_pass += o.passed ? 1 : 0;
        errors.push_back(std::abs(o.error));
      } else if (o.ran) {
        ++verdicts;
        verdicts_right += o.passed ? 1 : 0;
      }
    }
    std::sort(errors.begin(), errors.end());
    const std::string median =
        errors.empty()
            ? "-"
            : fmt::format("{:.1f}%",
                          100 * (errors.size() % 2 == 1
                                     ? errors[errors.size() / 2]
                                     : (errors[errors.size() / 2 - 1] +
                                        errors[errors.size() / 2]) /
                                           2));
    table += fmt::format("{:<14} {:>4} {:>12} {:>8} {:>9}\n", category,
                         outcomes.size(), median,
                         fmt::format("{}/{}", numeric_pass, numeric),
                         fmt::format("{}/{}", verdicts_right, verdicts));
  }
  WARN(table);

  for (const auto& [category, outcomes] : by_category) {
    for (const auto& o : outcomes) {
      INFO(o.id << ": " << o.detail);
      if (known.count(o.id) != 0) {
        if (o.passed) {
          WARN(o.id << " is listed in known_gaps.json but now passes");
        }
        continue;
      }
      CHECK(o.passed);
    }
  }
}

TEST_CASE(
    "validation: the development set's measurements (development.json) are "
    "predicted within their tolerance",
    "[validation]") {
  // Published measurements of the mechanisms modelled for issue 28 (each
  // with its source and quote), beyond shared/validation's public set.
  const json set = read_json(k_dir + "/development.json");
  REQUIRE(set.at("checks").size() >= 2);
  std::set<std::string> known;
  const json gaps = read_json(k_dir + "/known_gaps.json");
  for (const auto& gap : gaps.at("gaps")) {
    known.insert(gap.at("id").get<std::string>());
  }
  std::map<std::string, oomplan::test::CliResult> cache;
  for (const auto& check : set.at("checks")) {
    const Outcome o = evaluate(check, cache);
    INFO(o.id << ": " << o.detail);
    // A figure, or a run that went out of memory (a verdict).
    CHECK((o.numeric || check.at("metric") == "fits"));
    if (known.count(o.id) != 0) {
      if (o.passed) {
        WARN(o.id << " is listed in known_gaps.json but now passes");
      }
      continue;
    }
    CHECK(o.passed);
  }
}

TEST_CASE("validation: every known gap names a real check and a reason",
          "[validation]") {
  std::set<std::string> ids;
  for (const char* file : {"/public.json", "/development.json"}) {
    const json set = read_json(k_dir + file);
    for (const auto& check : set.at("checks")) {
      ids.insert(check.at("id").get<std::string>());
    }
  }
  const json gaps = read_json(k_dir + "/known_gaps.json");
  for (const auto& gap : gaps.at("gaps")) {
    INFO(gap.dump());
    CHECK(ids.count(gap.at("id").get<std::string>()) == 1);
    CHECK(gap.at("reason").get<std::string>().size() > 10);
  }
}

// --- Recorded GPU measurements (tests/data/measured/*.json, written by
// tests/measure/measure.py --matrix; schema oomplan.measured/1). Each result
// carries the Hugging Face config it ran, the oomplan arguments that plan it
// (predicted.args) and what PyTorch measured; it is re-planned here with the
// current code.

namespace {

struct MeasuredOutcome {
  bool ran = false;  // false: the run failed on the device, nothing to check
  bool passed = false;
  bool known = false;  // "known_gap": reason
  double error = 0;
  std::string detail;
};

// A fresh folder for one config.json.
std::string temp_dir() {
  std::string path = "/tmp/oomplan_measured_XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    return {};
  }
  return path;
}

MeasuredOutcome evaluate_measured(const json& result) {
  MeasuredOutcome out;
  if (result.contains("failed") || !result.contains("config") ||
      !result.contains("predicted") || !result.contains("measured")) {
    out.detail = "no run recorded";
    return out;
  }
  out.known = result.contains("known_gap");
  const std::string dir = temp_dir();
  REQUIRE(!dir.empty());
  const std::string config = dir + "/config.json";
  {
    std::ofstream file(config);
    file << result.at("config").dump();
  }
  std::vector<std::string> args{dir};
  for (const auto& arg : result.at("predicted").at("args")) {
    args.push_back(arg.get<std::string>());
  }
  args.emplace_back("--json");
  const auto run = oomplan::test::run_cli(args);
  std::remove(config.c_str());
  rmdir(dir.c_str());
  if (run.code == 2) {
    out.detail = "oomplan rejects the setup: " + run.err;
    return out;
  }
  const json plan = json::parse(run.out);
  const json& measured = result.at("measured");
  out.ran = true;
  if (measured.value("oom", false)) {
    out.passed = !plan.at("fits").get<bool>();
    out.detail = out.passed ? "OOM, planned not to fit" : "OOM, planned to fit";
    return out;
  }
  const double want = measured.at("allocated_bytes").get<double>();
  const double got = plan.at("peak").at("allocated_bytes").get<double>();
  const double tolerance = result.value("tolerance", 0.15);
  out.error = (got - want) / want;
  out.passed = std::abs(got - want) <= tolerance * want;
  out.detail = fmt::format("measured {:.2f} GiB allocated, planned {:.2f} GiB",
                           want / 1073741824.0, got / 1073741824.0);
  return out;
}

}  // namespace

TEST_CASE("validation: a recorded GPU measurement is checked against a plan",
          "[validation][measured]") {
  // A result as measure.py writes it, around what oomplan plans for it.
  std::ifstream in(std::string(OOMPLAN_TEST_DATA) + "/hf/llama-7b/config.json");
  REQUIRE(in.good());
  json result;
  result["config"] = json::parse(in);
  result["predicted"]["args"] = {"--gpus", "1xH100", "--mode",          "lora",
                                 "--seq",  "2048",   "--checkpointing", "full",
                                 "--loss", "upcast"};
  std::vector<std::string> args{std::string(OOMPLAN_TEST_DATA) +
                                "/hf/llama-7b"};
  for (const auto& arg : result["predicted"]["args"]) {
    args.push_back(arg.get<std::string>());
  }
  args.emplace_back("--json");
  const double planned = json::parse(oomplan::test::run_cli(args).out)
                             .at("peak")
                             .at("allocated_bytes")
                             .get<double>();
  result["tolerance"] = 0.15;
  result["measured"] = {{"allocated_bytes", planned * 1.10}, {"oom", false}};
  CHECK(evaluate_measured(result).passed);
  result["measured"]["allocated_bytes"] = planned * 1.25;
  const auto off = evaluate_measured(result);
  CHECK(off.ran);
  CHECK_FALSE(off.passed);
  CHECK(off.error == Approx(1.0 / 1.25 - 1.0));
  // A run that went out of memory must be planned not to fit.
  result["measured"] = {{"allocated_bytes", nullptr}, {"oom", true}};
  CHECK_FALSE(evaluate_measured(result).passed);
  result["predicted"]["args"] = {"--gpus", "1xRTX4090", "--mode",
                                 "full",   "--seq",     "8192"};
  CHECK(evaluate_measured(result).passed);
  // A failed device run is not a check.
  CHECK_FALSE(evaluate_measured(json{{"failed", "Traceback ..."}}).ran);
}

TEST_CASE(
    "validation: recorded GPU measurements are predicted within their "
    "tolerance",
    "[validation][measured]") {
  const std::filesystem::path dir =
      std::filesystem::path(OOMPLAN_TEST_DATA) / "measured";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".json") {
        files.push_back(entry.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    WARN(
        "no GPU measurements recorded in tests/data/measured (run "
        "tests/measure/measure.py --matrix on a GPU)");
  }
  for (const auto& file : files) {
    const json doc = read_json(file.string());
    REQUIRE(doc.at("schema") == "oomplan.measured/1");
    std::vector<double> errors;
    int passed = 0;
    int ran = 0;
    for (const auto& result : doc.at("results")) {
      const MeasuredOutcome o = evaluate_measured(result);
      if (!o.ran) {
        continue;
      }
      ++ran;
      passed += o.passed ? 1 : 0;
      errors.push_back(std::abs(o.error));
      INFO(file.filename().string()
           << " " << result.value("entry", json()) << ": " << o.detail);
      if (o.known) {
        if (o.passed) {
          WARN("a result marked known_gap now passes");
        }
        continue;
      }
      CHECK(o.passed);
    }
    std::sort(errors.begin(), errors.end());
    WARN(fmt::format("{}: {}/{} within tolerance, median |error| {:.1f}%",
                     file.filename().string(), passed, ran,
                     errors.empty() ? 0.0 : 100 * errors[errors.size() / 2]));
  }
}
