// --format prometheus (render/prometheus.hpp): thresholds from the plan, in
// the DCGM exporter's MiB; the structure promtool checks is in
// tests/test_prometheus.sh.

#include "support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace {

using oomplan::test::run_cli;

// "expr: DCGM_FI_DEV_FB_USED > N" of the alert `name`, or -1.
std::int64_t threshold(const std::string& rules, const std::string& name) {
  const auto at = rules.find("alert: " + name + "\n");
  if (at == std::string::npos) {
    return -1;
  }
  const std::string expr = "expr: DCGM_FI_DEV_FB_USED > ";
  const auto e = rules.find(expr, at);
  return std::stoll(rules.substr(e + expr.size()));
}

std::int64_t mib_up(std::int64_t bytes) {
  return (bytes + (1 << 20) - 1) / (1 << 20);
}

}  // namespace

TEST_CASE("prometheus: the capacity rule is the card's usable MiB",
          "[prometheus]") {
  const auto r = run_cli({"llama3-8b", "--gpus", "1xH100", "--engine", "vllm",
                          "--format", "prometheus"});
  REQUIRE(r.code == 0);
  // H100-80: 85,028,896,768 B / 1,048,576 = 81,089.06 MiB -> 81,090.
  CHECK(threshold(r.out, "OomplanNearCapacity") == 81090);
  // vLLM: what it reserves (gpu-util x capacity) plus the CUDA graphs, the
  // plan's per-GPU total, not 80 % of the card (which it always exceeds).
  const auto doc = nlohmann::json::parse(
      run_cli({"llama3-8b", "--gpus", "1xH100", "--engine", "vllm", "--json"})
          .out);
  const std::int64_t total = doc["total_bytes"];
  CHECK(threshold(r.out, "OomplanVllmAboveReservation") == mib_up(total));
  // 0.9 x 81,089 MiB = 72,980 MiB: the reservation alone is above 80 %.
  CHECK(threshold(r.out, "OomplanVllmAboveReservation") > 72980);
  CHECK(threshold(r.out, "OomplanAbovePlannedPeak") == -1);
}

TEST_CASE("prometheus: training alerts 5 % above the planned peak",
          "[prometheus]") {
  const std::vector<std::string> args = {"llama3-8b", "--gpus", "8xH100",
                                         "--mode",    "full",   "--zero",
                                         "3",         "--seq",  "2048"};
  auto with = args;
  with.insert(with.end(), {"--format", "prometheus"});
  const auto r = run_cli(with);
  REQUIRE(r.code == 0);
  with = args;
  with.push_back("--json");
  const auto doc = nlohmann::json::parse(run_cli(with).out);
  const double total = doc["total_bytes"];
  CHECK(threshold(r.out, "OomplanAbovePlannedPeak") ==
        mib_up(static_cast<std::int64_t>(total * 1.05)));
  // Each phase of the step is named with its own peak.
  CHECK(r.out.find("by phase: forward ") != std::string::npos);
  CHECK(r.out.find("backward ") != std::string::npos);
  // A plan that does not fit gets no peak rule beyond the card.
  const auto over = run_cli({"llama3-70b", "--gpus", "1xH100", "--mode", "full",
                             "--format", "prometheus"});
  CHECK(over.code == 1);
  CHECK(threshold(over.out, "OomplanAbovePlannedPeak") == -1);
  CHECK(over.out.find("oomplan predicted this plan does not fit") !=
        std::string::npos);
}

TEST_CASE("prometheus: only plan with --gpus and check print rules",
          "[prometheus]") {
  const auto sizing = run_cli({"llama3-8b", "--format", "prometheus"});
  CHECK(sizing.code == 2);
  CHECK(sizing.err ==
        "oomplan: error: --format prometheus needs --gpus NxNAME: alerting "
        "rules are for the cards a job runs on\n");
  CHECK(run_cli({"fit", "llama3-8b", "--format", "prometheus"}).code == 2);
  CHECK(run_cli({"diagnose", "-", "--format", "prometheus"}).code == 2);
}
