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
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
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
    if (text.rfind("configs/", 0) == 0) {
      text =
          k_dir + "/" +
          text;  // check.py runs with the set's folder as the working directory
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

TEST_CASE("validation: every known gap names a real check and a reason",
          "[validation]") {
  const json set = read_json(k_dir + "/public.json");
  std::set<std::string> ids;
  for (const auto& check : set.at("checks")) {
    ids.insert(check.at("id").get<std::string>());
  }
  const json gaps = read_json(k_dir + "/known_gaps.json");
  for (const auto& gap : gaps.at("gaps")) {
    INFO(gap.dump());
    CHECK(ids.count(gap.at("id").get<std::string>()) == 1);
    CHECK(gap.at("reason").get<std::string>().size() > 10);
  }
}
