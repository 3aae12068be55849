// libFuzzer target for the command line, run in-process (cli::run).
//
// The input is the argument list, one argument per line. The contract every
// run keeps: exit code 0, 1 or 2 (3, an internal error, is a bug); on 2,
// stdout is empty and stderr ends with one `oomplan: error:` line; JSON on
// stdout parses, holds only finite numbers and no negative byte count but a
// difference (headroom, saves); a plan's total is the sum of its components and
// its `fits` is the exit code; every fix's launch blocks, read back by
// `oomplan check`'s readers, plan the fix's total within 0.5 %
// (tests/launch_roundtrip.hpp).
//
// Arguments that would write files (--svg) are dropped: the fuzzer must not
// write where its input points.
//   CXX=clang++ cmake -B build-fuzz -DOOMPLAN_FUZZ=ON -DOOMPLAN_TESTS=OFF
//   cmake --build build-fuzz --target fuzz_cli
//   build-fuzz/fuzz_cli build-fuzz/corpus/cli tests/fuzz/corpus/cli

#include "../launch_roundtrip.hpp"
#include "cli/cli.hpp"
#include "fuzz_support.hpp"

#include "oomplan/model/catalog.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using oomplan::fuzz::require;

constexpr std::size_t k_max_args = 32;

// The schemas' two signed byte fields are differences, not sizes: a headroom
// (usable - total, negative when over) and a fix's saves_bytes (plan total -
// fix total, negative when a fix moves to fewer, larger cards).
bool is_byte_count(std::string_view key) {
  return key.size() > 6 && key.substr(key.size() - 6) == "_bytes" &&
         key.find("headroom") == std::string_view::npos && key != "saves_bytes";
}

// Every number finite; every byte count but a difference non-negative.
void check_numbers(const nlohmann::json& j, std::string_view key) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      check_numbers(v, k);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      check_numbers(v, key);
    }
  } else if (j.is_number_float()) {
    require(std::isfinite(j.get<double>()), "non-finite number in JSON", key);
    require(!is_byte_count(key) || j.get<double>() >= 0,
            "negative byte count in JSON", key);
  } else if (j.is_number_integer() && is_byte_count(key)) {
    require(j.get<std::int64_t>() >= 0, "negative byte count in JSON", key);
  }
}

void check_plan(const nlohmann::json& plan, int code) {
  std::int64_t sum = 0;
  for (const auto& component : plan.at("components")) {
    sum += component.at("bytes").get<std::int64_t>();
  }
  require(sum == plan.at("total_bytes").get<std::int64_t>(),
          "total is not the sum of the components");
  require(plan.at("fits").get<bool>() == (code == 0),
          "exit code is not the verdict");
}

// The fix of a plan's JSON as the round trip needs it: its argv planned
// again (catalog models only), its blocks and its total.
std::optional<oomplan::Fix> json_fix(const nlohmann::json& f,
                                     const oomplan::Catalog& catalog,
                                     const oomplan::Model*& model) {
  using namespace oomplan;
  const auto argv = f.at("argv").get<std::vector<std::string>>();
  Fix fix;
  try {
    model = &find_model(catalog, argv.at(0));
    for (const auto& [flag, value] : test::argv_options(argv)) {
      if (flag == "--gpus") {
        const GpuSpec spec = parse_gpu_spec(catalog, value);
        fix.gpu = spec.gpu;
        fix.request.gpus = spec.count;
      } else {
        apply_option(fix.request, flag, value);
      }
    }
  } catch (const std::exception&) {
    return std::nullopt;  // a local config.json model: not in the catalog
  }
  fix.id = f.at("id").get<std::string>();
  fix.title = f.at("title").get<std::string>();
  fix.total_bytes = f.at("total_bytes").get<Bytes>();
  fix.setup.gpus = fix.request.gpus;
  fix.setup.mode = fix.request.mode;
  for (const auto& b : f.at("launch")) {
    fix.launch.push_back({b.at("framework").get<std::string>(),
                          b.at("text").get<std::string>(),
                          b.value("file", std::string())});
  }
  return fix;
}

// Every fix's launch blocks plan the fix (tests/launch_roundtrip.hpp).
void check_launch(const nlohmann::json& plan) {
  static const oomplan::Catalog k_catalog = oomplan::builtin_catalog();
  for (const auto& f : plan.value("fixes", nlohmann::json::array())) {
    const oomplan::Model* model = nullptr;
    const auto fix = json_fix(f, k_catalog, model);
    if (!fix || fix->gpu == nullptr) {
      continue;
    }
    const auto problem = oomplan::test::roundtrip_problem(*model, *fix);
    require(!problem, "a fix's launch blocks plan another total",
            problem.value_or(""));
  }
}

void check_json(const std::string& out, int code) {
  const auto j = nlohmann::json::parse(out, nullptr, false);
  require(!j.is_discarded(), "stdout starts with { but is not JSON", out);
  check_numbers(j, "");
  if (j.is_object() && j.value("schema", "") == "oomplan.plan/1") {
    check_plan(j, code);
    check_launch(j);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start <= input.size() && args.size() < k_max_args) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    args.emplace_back(input.substr(start, end - start));
    if (args.back().find("--svg") != std::string::npos) {
      return 0;
    }
    start = end + 1;
  }
  std::istringstream in;
  oomplan::cli::Environment env;
  env.in = &in;
  std::ostringstream out;
  std::ostringstream err;
  const int code = oomplan::cli::run(args, out, err, env);
  require(code >= 0 && code <= 2, "exit code outside 0, 1, 2", err.str());
  const std::string text = out.str();
  const std::string errors = err.str();
  if (code == 2) {
    require(text.empty(), "output on stdout with exit code 2", text);
    require(!errors.empty() && errors.back() == '\n',
            "exit code 2 without an error line");
    const std::size_t last = errors.rfind('\n', errors.size() - 2);
    const std::string_view line = std::string_view(errors).substr(
        last == std::string::npos ? 0 : last + 1);
    require(line.substr(0, 16) == "oomplan: error: ",
            "the last stderr line is not an error line", line);
  } else if (!text.empty() && text.front() == '{') {
    check_json(text, code);
  }
  return 0;
}
