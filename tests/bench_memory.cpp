// Benchmark (built, not run as a test, like ninja's perftests):
//   1. core evaluations per second: memory() on the README setup, inference and
//   training;
//   2. the CPU time (user + system) of whole oomplan processes, the median of
//   repeated runs: --version, the README plan, a 70B training plan that does
//   not fit (the advisor's searches included), and `fit` for 70B full
//   fine-tuning over the common cards up to 64 GPUs.
// CPU time, not wall time: it does not depend on what else the machine runs.
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
#include <sys/resource.h>
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

// Median CPU time (user + system) of `runs` runs of `argv`, stdout and
// stderr to /dev/null.
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
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) !=
        0) {
      return -1;
    }
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    const auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) +
             static_cast<double>(t.tv_usec) * 1e-6;
    };
    times.push_back(seconds(usage.ru_utime) + seconds(usage.ru_stime));
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

  struct Process {
    const char* goal;
    std::vector<std::string> args;
  };
  const std::vector<Process> processes = {
      {"near /bin/true", {binary, "--version"}},
      {"<= 1.5 ms",
       {binary, "llama3-70b", "--gpus", "4xA100-80", "--seq", "8192"}},
      {"<= 10 ms",
       {binary, "llama3-70b", "--gpus", "8xH100", "--mode", "full", "--seq",
        "4096", "--zero", "3"}},
      {"<= 10 ms",
       {binary, "fit", "llama3-70b", "--mode", "full", "--seq", "8192"}},
  };
  for (const Process& p : processes) {
    std::string line;
    for (std::size_t i = 1; i < p.args.size(); ++i) {
      line += (i > 1 ? " " : "") + p.args[i];
    }
    const double s = median_process_seconds(p.args, 51);
    std::printf(
        "CPU time of `oomplan %s`: %.2f ms median of 51 runs (goal %s)\n",
        line.c_str(), s * 1e3, p.goal);
  }
  return 0;
}
