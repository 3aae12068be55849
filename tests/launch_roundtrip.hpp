#pragma once

// The launch round trip (tests/test_launch_roundtrip.cpp, fuzz_cli): a fix's
// launch blocks, read back by oomplan's own readers through the path `oomplan
// check` takes (read_launch_files, check_setup), re-priced on the fix's card
// and count, give the fix's total within 0.5 %.

#include "oomplan/check/check.hpp"
#include "oomplan/launch/launch.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan::test {

// The tolerance of the round trip, as a share of the fix's total.
inline constexpr double k_roundtrip_tolerance = 0.005;

// Options of the run, not of a launch file: `oomplan check` takes them on
// its command line (and so does the round trip). For inference the workload
// (sequence length, concurrent sequences) is the run's too.
inline bool run_option(std::string_view flag, bool inference) {
  static constexpr std::array<std::string_view, 10> k_run = {
      "--nodes",        "--vllm-version", "--overhead-gib", "--reserve",
      "--min-headroom", "--host-ram",     "--price",        "--p2p",
      "--prompt",       "--output"};
  if (std::find(k_run.begin(), k_run.end(), flag) != k_run.end()) {
    return true;
  }
  return inference && (flag == "--seq" || flag == "--batch");
}

// The (flag, value) pairs of an argv from plan_argv (after MODEL).
inline std::vector<std::pair<std::string, std::string>> argv_options(
    const std::vector<std::string>& argv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i].rfind("--", 0) != 0) {
      continue;
    }
    const std::string& flag = argv[i];
    std::string value;
    if (i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0) {
      value = argv[++i];
    }
    out.emplace_back(flag, value);
  }
  return out;
}

// The files of a fix's blocks, as `oomplan check` would be given them: every
// block that is a file, and the vLLM and LitGPT command lines. Empty when
// none is.
inline std::vector<LaunchFile> roundtrip_files(const Fix& fix) {
  std::vector<LaunchFile> files;
  for (const LaunchBlock& b : fix.launch) {
    if (!b.file.empty()) {
      files.push_back({b.file, b.text});
    } else if (b.framework == "vLLM") {
      files.push_back({"serve.sh", b.text});
    } else if (b.framework == "LitGPT") {
      files.push_back({"finetune.sh", b.text});
    }
  }
  return files;
}

// nullopt when the blocks plan the fix; else what differs, for a message.
inline std::optional<std::string> roundtrip_problem(const Model& model,
                                                    const Fix& fix) {
  const std::vector<LaunchFile> files = roundtrip_files(fix);
  if (files.empty() || fix.gpu == nullptr) {
    return std::nullopt;
  }
  std::string blocks;
  for (const LaunchBlock& b : fix.launch) {
    blocks += fmt::format("\n    {} {}: {}", b.framework, b.file, b.text);
  }
  const std::vector<std::string> want =
      plan_argv(model.name, model, *fix.gpu, fix.request);
  const auto where = [&](const std::string& what) {
    return fmt::format("fix {} ({}): {}\n  blocks:{}\n  fix:    {}", fix.id,
                       fix.title, what, blocks,
                       plan_args(model.name, model, *fix.gpu, fix.request));
  };
  const FileLoader load =
      [&files](const std::string& path,
               const std::string& /*from*/) -> std::optional<std::string> {
    for (const LaunchFile& f : files) {
      if (f.origin == path) {
        return f.text;
      }
    }
    return std::nullopt;
  };
  try {
    const std::vector<LaunchPlan> plans = read_launch_files(files, load);
    if (plans.size() != 1) {
      return where(fmt::format("read back as {} plans, not 1", plans.size()));
    }
    CheckOptions options;
    options.gpus = fix.setup.gpus;
    options.gpus_text = fmt::format("{}x{}", fix.setup.gpus, fix.gpu->name);
    for (const auto& [flag, value] : argv_options(want)) {
      if (run_option(flag, !fix.setup.training())) {
        options.given.emplace_back(flag, value);
      }
    }
    const CheckSetup back = check_setup(plans.front(), options);
    const Pricing p = price(model, *fix.gpu, back.setup);
    const std::string got = plan_args(model.name, model, *fix.gpu, back.setup);
    if (!p.priced) {
      return where(fmt::format(
          "read back as an invalid plan ({})\n  read:   {}", p.problem, got));
    }
    const double a = static_cast<double>(fix.total_bytes);
    const double b = static_cast<double>(p.priced->budget.total_bytes());
    if (std::abs(a - b) > k_roundtrip_tolerance * a) {
      return where(
          fmt::format("total {:.2f} GiB, read back {:.2f} GiB\n  "
                      "read:   {}",
                      a / (1U << 30), b / (1U << 30), got));
    }
  } catch (const Error& e) {
    return where(fmt::format("the readers refuse the blocks: {}", e.what()));
  }
  return std::nullopt;
}

}  // namespace oomplan::test
