// Benchmark (built, not run as a test, like ninja's perftests):
//   1. core evaluations per second: memory() on the README setup, inference and
//   training;
//   2. `oomplan fit` search time for Llama-3-70B full fine-tuning over every
//   catalog GPU;
//   3. whole-process time of the README command (median of repeated runs of the
//   binary).
// Usage: oomplan_bench [path/to/oomplan]

#include "oomplan/catalog.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/plan.hpp"
#include "oomplan/search.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Evaluates memory() `n` times, varying seq so the compiler cannot hoist the
// work.
double evaluations_per_second(const oomplan::Model& model,
                              const oomplan::Gpu& gpu,
                              const oomplan::Resolved& base, int n) {
  oomplan::Bytes sink = 0;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    oomplan::Resolved setup = base;
    setup.seq = base.seq + (i & 1023);
    sink += oomplan::memory(model, gpu, setup).total_bytes();
  }
  const double elapsed = seconds_since(start);
  if (sink == 42) {
    std::puts("");
  }
  return n / elapsed;
}

// Median wall time of `runs` runs of `argv`, stdout and stderr to /dev/null.
double median_process_seconds(const std::vector<std::string>& args, int runs) {
  std::vector<char*> argv;
  for (const auto& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) !=
        0) {
      return -1;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    times.push_back(seconds_since(start));
  }
  posix_spawn_file_actions_destroy(&actions);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string binary = argc > 1 ? argv[1] : OOMPLAN_BINARY;
  const auto catalog = oomplan::builtin_catalog();
  const auto& model = oomplan::find_model(catalog, "llama3-70b");
  const auto spec = oomplan::parse_gpu_spec(catalog, "4xA100-80");

  const auto& h100 = oomplan::find_gpu(catalog, "H100");
  const oomplan::Resolved infer = oomplan::resolve(
      model, *spec.gpu, oomplan::Setup{.gpus = spec.count, .seq = 8192});
  const oomplan::Resolved train = oomplan::resolve(
      model, h100,
      oomplan::Setup{
          .gpus = 8, .mode = oomplan::Mode::full, .seq = 4096, .zero = 3});

  const int n = 2'000'000;
  std::printf(
      "memory() inference, llama3-70b 4xA100-80 seq 8192: %.2f M "
      "evaluations/s\n",
      evaluations_per_second(model, *spec.gpu, infer, n) / 1e6);
  std::printf(
      "memory() full fine-tune, llama3-70b 8xH100 ZeRO-3:   %.2f M "
      "evaluations/s\n",
      evaluations_per_second(model, h100, train, n) / 1e6);

  std::vector<const oomplan::Gpu*> gpus;
  for (const auto& gpu : catalog.gpus) {
    gpus.push_back(&gpu);
  }
  oomplan::Setup fit_base{.mode = oomplan::Mode::full, .seq = 8192};
  const auto start = Clock::now();
  const auto result =
      oomplan::fit(model, gpus, fit_base, oomplan::FitConstraints{});
  const double fit_s = seconds_since(start);
  std::printf(
      "fit llama3-70b --mode full --seq 8192, %zu GPU types, <= 64 GPUs: %.1f "
      "ms, "
      "%lld candidates (%.2f M/s), %zu plans kept\n",
      gpus.size(), fit_s * 1e3, static_cast<long long>(result.evaluated),
      static_cast<double>(result.evaluated) / fit_s / 1e6, result.plans.size());

  const double process_s = median_process_seconds(
      {binary, "llama3-70b", "--gpus", "4xA100-80", "--seq", "8192"}, 101);
  std::printf(
      "whole process `oomplan llama3-70b --gpus 4xA100-80 --seq 8192`: %.2f ms "
      "median "
      "of 101 runs\n",
      process_s * 1e3);
  return 0;
}
