// Benchmark (built, not run as a test, like ninja's perftests):
//   1. core evaluations per second: memory() on the README setup, inference and
//   training;
//   2. the CPU time (user + system) of whole oomplan processes, the median of
//   repeated runs: --version, the README plan, a 70B training plan that does
//   not fit (the advisor's searches included), and `fit` for 70B full
//   fine-tuning over the common cards up to 64 GPUs;
//   3. `oomplan diagnose` scanner throughput: 1 GiB of training/serving log
//   lines fed from memory in 1 MiB chunks, an OOM in the middle and at the
//   end; and the whole `oomplan diagnose LOG` process on a 256 MiB log file
//   (CPU and wall time, peak RSS via wait4).
// CPU time, not wall time: it does not depend on what else the machine runs.
// Usage: oomplan_bench [path/to/oomplan]
//        oomplan_bench --diagnose LOG   (scan a file in 1 MiB chunks: time,
//                                        MB/s and peak RSS)

#include "oomplan/advice/search.hpp"
#include "oomplan/diagnose/diagnose.hpp"
#include "oomplan/memory/memory.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/plan/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <iterator>
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

// One finished process: its CPU time (user + system), wall time and peak
// resident memory, as wait4() reports them.
struct ProcessRun {
  double cpu_seconds = 0;
  double wall_seconds = 0;
  long max_rss_kib = 0;
};

// `runs` runs of `argv`, stdout and stderr to /dev/null; empty when a spawn
// fails.
std::vector<ProcessRun> run_processes(const std::vector<std::string>& args,
                                      int runs) {
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
  std::vector<ProcessRun> out;
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) !=
        0) {
      out.clear();
      break;
    }
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    const auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) +
             static_cast<double>(t.tv_usec) * 1e-6;
    };
    out.push_back({seconds(usage.ru_utime) + seconds(usage.ru_stime),
                   seconds_since(start), usage.ru_maxrss});
  }
  posix_spawn_file_actions_destroy(&actions);
  return out;
}

// Median CPU time (user + system) of `runs` runs of `argv`.
double median_process_seconds(const std::vector<std::string>& args, int runs) {
  std::vector<double> times;
  for (const ProcessRun& run : run_processes(args, runs)) {
    times.push_back(run.cpu_seconds);
  }
  if (times.empty()) {
    return -1;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// A 1 MiB block of typical log lines (DeepSpeed, HF Trainer, tqdm, vLLM
// metrics, a traceback frame, a CRI-prefixed line).
std::string log_block() {
  static const char* const k_lines[] = {
      "[2024-05-11 14:10:52,224] [INFO] [logging.py:96:log_dist] [Rank 0] "
      "step=1234, skipped=0, lr=[1.9e-05], mom=[(0.9, 0.95)]\n",
      "{'loss': 1.2345, 'grad_norm': 0.8123, 'learning_rate': 1.9e-05, "
      "'epoch': 0.42}\n",
      " 42%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88     | "
      "4200/10000 [1:02:03<1:25:43,  1.13it/s]\n",
      "INFO 11-21 10:13:05 metrics.py:349] Avg prompt throughput: 1234.5 "
      "tokens/s, Running: 12 reqs, GPU KV cache usage: 45.6%, CPU KV cache "
      "usage: 0.0%.\n",
      "INFO:     127.0.0.1:57641 - \"POST /v1/chat/completions HTTP/1.1\" 200 "
      "OK\n",
      "  File \"/usr/local/lib/python3.10/dist-packages/torch/nn/modules/"
      "module.py\", line 1518, in _wrapped_call_impl\n",
      "2024-05-11T14:10:52.227Z stdout F Memory usage is nominal; nothing to "
      "report for this query on every directory entry.\n",
  };
  std::string block;
  for (std::size_t i = 0; block.size() < (std::size_t{1} << 20); ++i) {
    block += k_lines[(i * 5 + i / 7) % std::size(k_lines)];
  }
  return block;
}

const char* const k_oom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. "
    "GPU 0 has a total capacity of 23.65 GiB of which 1.66 GiB is free. "
    "Including non-PyTorch memory, this process has 20.81 GiB memory in use. "
    "Of the allocated memory 12.09 GiB is allocated by PyTorch, and 4.84 GiB "
    "is reserved by PyTorch but unallocated.\n";

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void report_diagnosis(const oomplan::Diagnosis& d, double seconds) {
  std::printf(
      "diagnose: %.2f GiB, %lld lines in %.2f s (%.0f MB/s), %lld messages, "
      "first at line %lld (%s), peak RSS %.1f MiB\n",
      static_cast<double>(d.bytes) / (1 << 30), static_cast<long long>(d.lines),
      seconds, static_cast<double>(d.bytes) / seconds / 1e6,
      static_cast<long long>(d.count),
      d.messages.empty() ? -1LL : static_cast<long long>(d.messages[0].line),
      std::string(oomplan::oom_cause_name(d.cause)).c_str(),
      static_cast<double>(peak_rss_kib()) / 1024);
}

// Scans a file the way the CLI does: 1 MiB reads fed to a LogScanner.
int diagnose_file(const char* path) {
  std::FILE* file = std::fopen(path, "rb");
  if (file == nullptr) {
    std::perror(path);
    return 2;
  }
  std::vector<char> chunk(std::size_t{1} << 20);
  oomplan::LogScanner scanner;
  const auto start = Clock::now();
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), file)) > 0) {
    scanner.feed({chunk.data(), n});
  }
  std::fclose(file);
  const oomplan::Diagnosis d = scanner.finish();
  report_diagnosis(d, seconds_since(start));
  return 0;
}

// The whole `oomplan diagnose LOG` process on a generated 256 MiB log (an
// OOM in the middle and at the end), written to the temp folder and removed:
// the median of 3 runs' CPU and wall time, and the largest peak RSS.
void diagnose_binary(const std::string& binary, const std::string& block) {
  char path[] = "/tmp/oomplan_bench_XXXXXX.log";
  const int fd = mkstemps(path, 4);
  if (fd < 0) {
    std::perror("mkstemps");
    return;
  }
  std::FILE* file = fdopen(fd, "wb");
  constexpr int k_blocks = 256;
  for (int i = 0; i < k_blocks; ++i) {
    std::fwrite(block.data(), 1, block.size(), file);
    if (i == k_blocks / 2 - 1 || i == k_blocks - 1) {
      std::fputs(k_oom, file);
    }
  }
  std::fclose(file);
  const std::vector<ProcessRun> runs =
      run_processes({binary, "diagnose", path}, 3);
  std::remove(path);
  if (runs.empty()) {
    return;
  }
  std::vector<double> cpu;
  std::vector<double> wall;
  long rss = 0;
  for (const ProcessRun& run : runs) {
    cpu.push_back(run.cpu_seconds);
    wall.push_back(run.wall_seconds);
    rss = std::max(rss, run.max_rss_kib);
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  std::printf(
      "`oomplan diagnose` on a 256 MiB log: %.2f s CPU, %.2f s wall (median "
      "of 3), peak RSS %.1f MiB (goal: 1 GiB in < 2 s, < 20 MB)\n",
      cpu[1], wall[1], static_cast<double>(rss) / 1024);
}

// A --catalog folder with `count` extra GPUs (the fields a user's entry
// has), in the temp folder; returns its path ("" on failure).
std::string extra_gpus_folder(int count) {
  char dir[] = "/tmp/oomplan_bench_catalog_XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::perror("mkdtemp");
    return "";
  }
  const std::string path = std::string(dir) + "/gpus.json";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    std::perror("fopen");
    return "";
  }
  std::fputs("{\"gpus\": [", file);
  for (int i = 0; i < count; ++i) {
    std::fprintf(file,
                 "%s{\"name\": \"BENCH%d-80\", \"vendor\": \"NVIDIA\", "
                 "\"compute_capability\": 80, \"capacity_bytes\": "
                 "84987740160, \"bandwidth_gb_s\": 2039, \"bf16_tflops\": "
                 "312, \"nvlink_gb_s\": 600, \"pcie_gb_s\": 32}\n",
                 i > 0 ? "," : "", i);
  }
  std::fputs("]}\n", file);
  std::fclose(file);
  return dir;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--diagnose") {
    return diagnose_file(argv[2]);
  }
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
  const std::string extra = extra_gpus_folder(1000);
  const std::vector<Process> processes = {
      {"the process floor", {"/bin/true"}},
      {"near /bin/true", {binary, "--version"}},
      {"<= 1.5 ms",
       {binary, "llama3-70b", "--gpus", "4xA100-80", "--seq", "8192"}},
      {"<= 10 ms",
       {binary, "llama3-70b", "--gpus", "8xH100", "--mode", "full", "--seq",
        "4096", "--zero", "3"}},
      {"<= 10 ms",
       {binary, "fit", "llama3-70b", "--mode", "full", "--seq", "8192"}},
      {"<= 5 ms, DIR holding 1,000 extra GPUs",
       {binary, "llama3-70b", "--gpus", "4xA100-80", "--seq", "8192",
        "--catalog", extra}},
  };
  for (const Process& p : processes) {
    std::string line = p.args[0] == binary ? "oomplan" : p.args[0];
    for (std::size_t i = 1; i < p.args.size(); ++i) {
      line += " " + (p.args[i] == extra ? std::string("DIR") : p.args[i]);
    }
    const double s = median_process_seconds(p.args, 51);
    std::printf("CPU time of `%s`: %.2f ms median of 51 runs (goal %s)\n",
                line.c_str(), s * 1e3, p.goal);
  }
  std::remove((extra + "/gpus.json").c_str());
  std::remove(extra.c_str());

  const std::string block = log_block();
  diagnose_binary(binary, block);
  oomplan::LogScanner scanner;
  const auto scan_start = Clock::now();
  for (int i = 0; i < 1024; ++i) {
    scanner.feed(block);
    if (i == 511) {
      scanner.feed(k_oom);
    }
  }
  scanner.feed(k_oom);
  const oomplan::Diagnosis d = scanner.finish();
  report_diagnosis(d, seconds_since(scan_start));
  return 0;
}
