// `oomplan diagnose`: the OOM-log scanner, the cause rules and the renderings.
//
// The corpus (tests/data/oom/index.json) holds real messages from public
// issue trackers with the fields read off their text by hand; the rule tests
// build messages with round numbers whose arithmetic is written out; the
// property tests wrap, truncate, prefix, escape, chunk and bury messages and
// check that the facts do not change.

#include "support.hpp"

#include "oomplan/diagnose/diagnose.hpp"
#include "oomplan/render/diagnose.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace oomplan;
using nlohmann::json;

std::string data_dir() {
  return std::string(OOMPLAN_TEST_DATA) + "/oom/";
}

std::string read_file(const std::string& path) {
  return oomplan::test::read_required_file(path);
}

json corpus_index() {
  return json::parse(read_file(data_dir() + "index.json"));
}

// "3.00 GiB" -> bytes, the way DESIGN §2 says sizes are read: as printed,
// GiB = 2^30, MiB = 2^20, KiB = 2^10, rounded half up to the byte. Written
// independently of the scanner's parser.
std::int64_t printed_bytes(const std::string& printed) {
  const auto space = printed.find(' ');
  const std::string number = printed.substr(0, space);
  const std::string unit = printed.substr(space + 1);
  std::int64_t mult = 0;
  if (unit == "bytes") {
    mult = 1;
  } else if (unit == "KiB") {
    mult = std::int64_t{1} << 10;
  } else if (unit == "MiB") {
    mult = std::int64_t{1} << 20;
  } else if (unit == "GiB") {
    mult = std::int64_t{1} << 30;
  }
  REQUIRE(mult > 0);
  const auto dot = number.find('.');
  std::int64_t mantissa = 0;
  std::int64_t scale = 1;
  for (std::size_t i = 0; i < number.size(); ++i) {
    if (i == dot) {
      continue;
    }
    mantissa = mantissa * 10 + (number[i] - '0');
    if (dot != std::string::npos && i > dot) {
      scale *= 10;
    }
  }
  return (mantissa * mult + scale / 2) / scale;
}

json diagnose_json(std::string_view log) {
  return json::parse(render_diagnosis_json(diagnose(log)));
}

// The same log fed in pieces of `step` bytes.
std::string streamed_json(std::string_view log, std::size_t step) {
  LogScanner scanner;
  for (std::size_t i = 0; i < log.size(); i += step) {
    scanner.feed(log.substr(i, step));
  }
  return render_diagnosis_json(scanner.finish());
}

const OomMessage& first(const Diagnosis& d) {
  REQUIRE(!d.messages.empty());
  return d.messages.front();
}
// A temporary Diagnosis gives a copy: a reference into it would dangle.
OomMessage first(Diagnosis&& d) {
  return first(d);
}

// A PyTorch 2.2+ message with chosen numbers (MiB), as
// c10/cuda/CUDACachingAllocator.cpp prints it.
std::string pytorch2(const std::string& r, const std::string& c,
                     const std::string& f, const std::string& p,
                     const std::string& a, const std::string& u,
                     const std::string& processes = "") {
  return fmt::format(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {}. GPU 0 "
      "has a total capacity of {} of which {} is free. {}{}Of the allocated "
      "memory {} is allocated by PyTorch, and {} is reserved by PyTorch but "
      "unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
      "fragmentation.  See documentation for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-"
      "variables)\n",
      r, c, f, processes,
      p.empty() ? std::string()
                : fmt::format("Including non-PyTorch memory, this process has "
                              "{} memory in use. ",
                              p),
      a, u);
}

// kerrj/lerf#73 (PyTorch 2.1), the example the brief quotes.
const std::string k_lerf =
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 "
    "GiB. GPU 0 has a total capacty of 23.65 GiB of which 1.66 GiB is free. "
    "Including non-PyTorch memory, this process has 20.81 GiB memory in use. "
    "Of the allocated memory 12.09 GiB is allocated by PyTorch, and 4.84 GiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated "
    "memory is large try setting max_split_size_mb to avoid fragmentation.  "
    "See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF";

// vllm-project/vllm#34076 (V1, "models's"), completed with vLLM's own tail.
const std::string k_vllm_v1 =
    "(EngineCore_DP0 pid=1094) ValueError: To serve at least one request with "
    "the models's max seq len (262144), (24.0 GiB KV cache is needed, which is "
    "larger than the available KV cache memory (3.18 GiB). Based on the "
    "available memory, the estimated maximum model length is 34736. Try "
    "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    "initializing the engine.";

}  // namespace

// --- the corpus -------------------------------------------------------------

TEST_CASE(
    "diagnose: every corpus message parses to its hand-read fields and "
    "cause",
    "[diagnose]") {
  const json index = corpus_index();
  const std::map<std::string, std::string> sizes{
      {"requested", "requested_bytes"},
      {"capacity", "capacity_bytes"},
      {"free", "free_bytes"},
      {"process", "process_bytes"},
      {"allocated", "allocated_bytes"},
      {"reserved_unallocated", "reserved_unallocated_bytes"},
      {"reserved_total", "reserved_total_bytes"},
      {"allowed", "allowed_bytes"}};
  const std::vector<std::string> plain{
      "line",   "format",      "device",    "gpu_index",
      "source", "max_seq_len", "kv_tokens", "estimated_max_model_len"};
  for (const json& entry : index.at("messages")) {
    const std::string file = entry.at("file").get<std::string>();
    INFO(file);
    const std::string log = read_file(data_dir() + file);
    const json out = diagnose_json(log);
    CHECK(out.at("schema") == "oomplan.diagnosis/1");
    CHECK(out.at("count") == entry.at("count"));
    CHECK(out.at("cause") == entry.at("cause"));
    CHECK(out.at("binary") == false);
    REQUIRE(!out.at("messages").empty());
    const json& got = out.at("messages").at(0);
    const json& want = entry.at("first");
    for (const std::string& key : plain) {
      INFO(key);
      CHECK(got.at(key) == (want.contains(key) ? want.at(key) : json()));
    }
    for (const auto& [key, field] : sizes) {
      INFO(field);
      if (want.contains(key)) {
        CHECK(got.at(field) == printed_bytes(want.at(key).get<std::string>()));
      } else {
        CHECK(got.at(field).is_null());
      }
    }
    if (want.contains("other_processes")) {
      std::int64_t sum = 0;
      for (const json& p : want.at("other_processes")) {
        sum += printed_bytes(p.get<std::string>());
      }
      CHECK(got.at("other_processes_bytes") == sum);
    } else {
      CHECK(got.at("other_processes_bytes").is_null());
    }
    if (want.contains("gpu_util")) {
      CHECK(got.at("gpu_util").get<double>() ==
            Approx(want.at("gpu_util").get<double>()));
    } else {
      CHECK(got.at("gpu_util").is_null());
    }
    CHECK(!got.at("text").get<std::string>().empty());
    CHECK(out.at("fixes").size() >= 2);
    CHECK(!out.at("evidence").empty());
    // Any split of the input gives the same answer.
    const std::string whole = render_diagnosis_json(diagnose(log));
    CHECK(streamed_json(log, 1) == whole);
    CHECK(streamed_json(log, 7) == whole);
  }
}

TEST_CASE(
    "diagnose: the corpus has 40+ real messages covering every format "
    "and every cause",
    "[diagnose]") {
  const json index = corpus_index();
  std::map<std::string, int> formats;
  std::map<std::string, int> causes;
  for (const json& entry : index.at("messages")) {
    INFO(entry.at("file"));
    CHECK(entry.at("url").get<std::string>().rfind("https://github.com/", 0) ==
          0);
    ++formats[entry.at("first").at("format").get<std::string>()];
    ++causes[entry.at("cause").get<std::string>()];
  }
  CHECK(index.at("messages").size() >= 40);
  for (const OomFormat f :
       {OomFormat::pytorch2, OomFormat::pytorch1, OomFormat::vllm,
        OomFormat::cuda_runtime, OomFormat::cublas, OomFormat::nccl,
        OomFormat::xla, OomFormat::other}) {
    INFO(oom_format_name(f));
    CHECK(formats[std::string(oom_format_name(f))] >= 2);
  }
  for (const OomCause c :
       {OomCause::vllm_startup_free_memory, OomCause::vllm_kv_cache,
        OomCause::context_creation, OomCause::fragmentation, OomCause::unknown,
        OomCause::large_allocation, OomCause::other_processes,
        OomCause::shortfall}) {
    INFO(oom_cause_name(c));
    CHECK(causes[std::string(oom_cause_name(c))] >= 2);
  }
}

TEST_CASE("diagnose: vLLM's start-up profile lines become context",
          "[diagnose]") {
  // vllm-project/vllm#10517: "total_gpu_memory=23.58GiB ...
  // kv_cache_size=2.89GiB gpu_memory_utilization=0.90".
  const Diagnosis d =
      diagnose(read_file(data_dir() + "vllm-v0-profile-10517.log"));
  REQUIRE(d.context.vllm_total_bytes);
  CHECK(*d.context.vllm_total_bytes == printed_bytes("23.58 GiB"));
  CHECK(*d.context.vllm_kv_cache_bytes == printed_bytes("2.89 GiB"));
  CHECK(*d.context.vllm_gpu_util == Approx(0.90));
}

// --- exact renderings -------------------------------------------------------

TEST_CASE("diagnose: JSON of the lerf fragmentation message, exactly",
          "[diagnose]") {
  const std::string expected = R"json({
  "schema": "oomplan.diagnosis/1",
  "messages": [
    {
      "line": 1,
      "format": "pytorch2",
      "device": "cuda",
      "gpu_index": 0,
      "requested_bytes": 3221225472,
      "capacity_bytes": 25393994138,
      "free_bytes": 1782411428,
      "process_bytes": 22344567357,
      "allocated_bytes": 12981538652,
      "reserved_unallocated_bytes": 5196910428,
      "other_processes_bytes": null,
      "reserved_total_bytes": null,
      "max_seq_len": null,
      "kv_tokens": null,
      "gpu_util": null,
      "estimated_max_model_len": null,
      "allowed_bytes": null,
      "source": "pytorch",
      "text": "CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacty of 23.65 GiB of which 1.66 GiB is free. Including non-PyTorch memory, this process has 20.81 GiB memory in use. Of the allocated memory 12.09 GiB is allocated by PyTorch, and 4.84 GiB is reserved by PyTorch but unallocated. If"
    }
  ],
  "count": 1,
  "cause": "fragmentation",
  "evidence": [
    "4.84 GiB reserved but unallocated ≥ the 3.00 GiB request while 1.66 GiB is free",
    "the cached 4.84 GiB is 20 % of the 23.65 GiB card (≥ 5 %), but no free block in it is large enough for 3.00 GiB"
  ],
  "fixes": [
    {
      "rank": 1,
      "id": "expandable-segments",
      "title": "Let the caching allocator grow segments instead of splitting them",
      "args": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
      "cost": "none on Linux; first allocations slightly slower, and CUDA IPC of these tensors is unsupported"
    },
    {
      "rank": 2,
      "id": "empty-cache-between-phases",
      "title": "Release cached blocks between phases (after evaluation, generation or loading)",
      "args": "torch.cuda.empty_cache()",
      "cost": "the next allocations go back to cudaMalloc (milliseconds)"
    },
    {
      "rank": 3,
      "id": "max-split-size",
      "title": "Keep the allocator from splitting large cached blocks",
      "args": "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512",
      "cost": "more cudaMalloc calls for large tensors"
    },
    {
      "rank": 4,
      "id": "reduce-batch",
      "title": "Halve the micro-batch and double gradient accumulation",
      "args": "per_device_train_batch_size ÷ 2, gradient_accumulation_steps × 2",
      "cost": "same global batch; smaller matrix multiplies run a little slower"
    },
    {
      "rank": 5,
      "id": "gradient-checkpointing",
      "title": "Recompute activations in the backward pass instead of storing them",
      "args": "gradient_checkpointing=True",
      "cost": "about one extra forward pass per step (~30 % more compute)"
    },
    {
      "rank": 6,
      "id": "shorter-sequence",
      "title": "Train on shorter sequences (or serve a shorter --max-model-len)",
      "args": "max_seq_length ÷ 2",
      "cost": "long inputs are truncated or rejected"
    }
  ],
  "binary": false
}
)json";
  CHECK(render_diagnosis_json(diagnose(k_lerf)) == expected);
}

TEST_CASE("diagnose: text of a vLLM KV-cache message, exactly", "[diagnose]") {
  // The fix echoes vLLM's estimate; the quoted text stops at 300 characters.
  const std::string expected =
      "oomplan diagnose: out of memory at line 1 (vLLM); 1 message in 1 line\n"
      "  requested                 24.00 GiB\n"
      "  free                       3.18 GiB\n"
      "  max seq len                  262144\n"
      "  estimated max model len       34736\n"
      "  > To serve at least one request with the models's max seq len "
      "(262144), (24.0 GiB KV cache is needed, which is larger than the "
      "available KV cache memory (3.18 GiB). Based on the available memory, "
      "the estimated maximum model length is 34736. Try increasing "
      "`gpu_memory_utilization` or decreasing `max_mo\n"
      "\n"
      "cause: vllm_kv_cache\n"
      "  - one 262144-token sequence needs 24.00 GiB of KV cache; 3.18 GiB is "
      "available\n"
      "  - vLLM estimates that 34736 tokens fit\n"
      "\n"
      "fixes:\n"
      "  1. Cap the context at what the KV cache holds\n"
      "     --max-model-len 34736\n"
      "     cost: longer requests are rejected\n"
      "  2. Give vLLM more of the card (the default is 0.9)\n"
      "     --gpu-memory-utilization 0.95\n"
      "     cost: less room for other processes on the GPU\n"
      "  3. Store the KV cache in FP8\n"
      "     --kv-cache-dtype fp8\n"
      "     cost: half the KV bytes per token; a small accuracy cost\n"
      "  4. Split the model and its KV cache over GPUs\n"
      "     --tensor-parallel-size 2\n"
      "     cost: twice the GPUs\n";
  CHECK(render_diagnosis_text(diagnose(k_vllm_v1)) == expected);
}

TEST_CASE("diagnose: no message and binary input render their own lines",
          "[diagnose]") {
  const Diagnosis none = diagnose("step 1 loss 2.0\nstep 2 loss 1.9\n");
  CHECK(none.count == 0);
  CHECK(!none.binary);
  CHECK(render_diagnosis_text(none) ==
        "oomplan diagnose: no out-of-memory message in 2 lines\n");
  const json j = json::parse(render_diagnosis_json(none));
  CHECK(j.at("cause").is_null());
  CHECK(j.at("messages").empty());
  CHECK(j.at("count") == 0);

  // 64 bytes of which 3 NUL (4.7 % > 1 %).
  std::string bin(61, 'a');
  bin += std::string(3, '\0');
  const Diagnosis b = diagnose(bin);
  CHECK(b.binary);
  CHECK(b.nul_bytes == 3);
  CHECK(render_diagnosis_text(b) ==
        "oomplan diagnose: binary input — not a text log (3 of 64 bytes are "
        "NUL or invalid UTF-8)\n");
  CHECK(render_diagnosis_markdown(b) ==
        "### oomplan diagnose: not a text log\n\n3 of 64 bytes are NUL or "
        "invalid UTF-8.\n");
}

TEST_CASE("diagnose: Markdown shows the fields, the evidence and the fixes",
          "[diagnose]") {
  const std::string md = render_diagnosis_markdown(diagnose(k_lerf));
  CHECK(md.rfind("### oomplan diagnose: fragmentation\n\nOut of memory at line "
                 "1 (PyTorch 2.x, CUDA GPU 0); 1 message in 1 line.\n",
                 0) == 0);
  CHECK_THAT(md, Catch::Contains("| requested | 3.00 GiB |"));
  CHECK_THAT(
      md, Catch::Contains("- 4.84 GiB reserved but unallocated ≥ the 3.00 GiB "
                          "request while 1.66 GiB is free"));
  CHECK_THAT(md, Catch::Contains(
                     "1. **Let the caching allocator grow segments instead of "
                     "splitting them**: "
                     "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`"));
}

// --- sizes ------------------------------------------------------------------

TEST_CASE("diagnose: sizes are read as printed, in every unit", "[diagnose]") {
  struct Case {
    std::string printed;
    std::int64_t bytes;
  };
  // PyTorch format_size: "N bytes" to 1 KiB, then two decimals.
  const std::vector<Case> cases{
      {"0 bytes", 0},
      {"512 bytes", 512},
      {"1024 bytes", 1024},
      {"1.50 KiB", 1536},            // 1.5 x 1024
      {"19.69 MiB", 20646461},       // 19.69 x 1048576 = 20646461.44
      {"1017.01 MiB", 1066412278},   // 1017.01 x 1048576 = 1066412277.76
      {"4.84 GiB", 5196910428},      // 4.84 x 2^30 = 5196910428.16
      {"287.98 GiB", 309216170476},  // 287.98 x 2^30 = 309216170475.52
  };
  for (const Case& c : cases) {
    INFO(c.printed);
    const Diagnosis d = diagnose(pytorch2(c.printed, "80.00 GiB", "1.00 GiB",
                                          "", "70.00 GiB", "0 bytes"));
    CHECK(first(d).requested_bytes == c.bytes);
  }
  // XLA's exact bytes win over its rounded figure: 2.99 x 2^30 would be
  // 3210488054, the message says 3206250496B.
  CHECK(first(diagnose("RESOURCE_EXHAUSTED: Failed to allocate request for "
                       "2.99GiB (3206250496B) on device ordinal 1\n"))
            .requested_bytes == 3206250496);
  // XLA:TPU "G" is 2^30: 15.48 x 2^30 = 16621523435.52.
  // A copy: the Diagnosis is a temporary.
  const OomMessage tpu =
      first(diagnose("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran "
                     "out of memory in memory space hbm. Used 21.95G of 15.48G "
                     "hbm. Exceeded hbm capacity by 6.47G.\n"));
  CHECK(tpu.capacity_bytes == 16621523436);
  CHECK(tpu.device == "tpu");
  // TF's stream executor: "890.06M (933298432 bytes)".
  CHECK(first(diagnose("failed to allocate 890.06M (933298432 bytes) from "
                       "device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"))
            .requested_bytes == 933298432);
  // BFC: "16.00GiB (rounded to 17179869184)", GPU from GPU_3_bfc.
  const OomMessage& bfc = first(diagnose(
      "W external/xla/xla/tsl/framework/bfc_allocator.cc:291] Allocator "
      "(GPU_3_bfc) ran out of memory trying to allocate 16.00GiB (rounded to "
      "17179869184)requested by op\n"));
  CHECK(bfc.requested_bytes == 17179869184);
  CHECK(bfc.gpu_index == 3);
  // TF: shape [32,1024,1024] float = 32 x 1024 x 1024 x 4 B = 134217728 B.
  const OomMessage& tf = first(diagnose(
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM "
      "when allocating tensor with shape[32,1024,1024] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc\n"));
  CHECK(tf.requested_bytes == 134217728);
  CHECK(tf.gpu_index == 1);
  CHECK(tf.source == "tensorflow");
}

TEST_CASE("diagnose: PyTorch on MPS reads against its memory limit",
          "[diagnose]") {
  // aten/src/ATen/mps/MPSAllocator.mm: allocated 7.80 GiB + other 6.94 GiB =
  // 14.74 GiB in use; + the 3.46 GiB request = 18.20 GiB > the 18.13 GiB
  // limit; 3.46 < 25 % of 18.13 (4.53): a shortfall.
  const Diagnosis d = diagnose(
      "RuntimeError: MPS backend out of memory (MPS allocated: 7.80 GiB, other "
      "allocations: 6.94 GiB, max allowed: 18.13 GiB). Tried to allocate 3.46 "
      "GiB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to "
      "disable upper limit for memory allocations (may cause system "
      "failure).\n");
  const OomMessage& m = first(d);
  CHECK(m.device == "mps");
  CHECK(m.format == OomFormat::other);
  CHECK(m.allocated_bytes == printed_bytes("7.80 GiB"));
  CHECK(m.process_bytes ==
        printed_bytes("7.80 GiB") + printed_bytes("6.94 GiB"));
  CHECK(m.capacity_bytes == printed_bytes("18.13 GiB"));
  CHECK(m.allowed_bytes == printed_bytes("18.13 GiB"));
  CHECK(m.requested_bytes == printed_bytes("3.46 GiB"));
  CHECK(d.cause == OomCause::shortfall);
  CHECK(d.evidence.at(0) ==
        "the 3.46 GiB request on top of the 14.74 GiB in use exceeds the "
        "18.13 GiB limit");
}

// --- the cause rules --------------------------------------------------------

TEST_CASE("diagnose: the cause rules, at their boundaries", "[diagnose]") {
  struct Case {
    std::string name;
    std::string log;
    OomCause cause;
  };
  const std::vector<Case> cases{
      // U = R = 2048 MiB, U >= 5 % of 40960 MiB (2048), F 1024 < R.
      {"fragmentation at U = R and U = 5 % of C",
       pytorch2("2048.00 MiB", "40.00 GiB", "1.00 GiB", "38.00 GiB",
                "30.00 GiB", "2048.00 MiB"),
       OomCause::fragmentation},
      // U 2047 MiB < R 2048 MiB.
      {"not fragmentation one MiB short",
       pytorch2("2048.00 MiB", "40.00 GiB", "1.00 GiB", "38.00 GiB",
                "30.00 GiB", "2047.00 MiB"),
       OomCause::shortfall},
      // margin = max(5 % of 4 GiB = 204.8 MiB, 256 MiB) = 256 MiB; F = R +
      // 256 MiB exactly.
      {"unknown at the 256 MiB floor",
       pytorch2("1.00 GiB", "4.00 GiB", "1.25 GiB", "2.50 GiB", "2.00 GiB",
                "0 bytes"),
       OomCause::unknown},
      {"not unknown one MiB below the floor",
       pytorch2("1.00 GiB", "4.00 GiB", "1279.00 MiB", "2.50 GiB", "2.00 GiB",
                "0 bytes"),
       OomCause::large_allocation},
      // margin = 5 % of 80 GiB = 4 GiB (> 256 MiB); F = 1 + 4 GiB.
      {"unknown at 5 % of a large card",
       pytorch2("1.00 GiB", "80.00 GiB", "5.00 GiB", "70.00 GiB", "60.00 GiB",
                "0 bytes"),
       OomCause::unknown},
      // R = 25 % of C = 20 GiB.
      {"large_allocation at 25 %",
       pytorch2("20.00 GiB", "80.00 GiB", "2.00 GiB", "70.00 GiB", "60.00 GiB",
                "0 bytes"),
       OomCause::large_allocation},
      // C - F - P = 80 - 2 - 62 = 16 GiB = 20 % of 80.
      {"other_processes from P",
       pytorch2("1.00 GiB", "80.00 GiB", "2.00 GiB", "62.00 GiB", "60.00 GiB",
                "0 bytes"),
       OomCause::other_processes},
      // 80 - 2 - 62.01 < 16 GiB.
      {"not other_processes just under 20 %",
       pytorch2("1.00 GiB", "80.00 GiB", "2.00 GiB", "62.01 GiB", "60.00 GiB",
                "0 bytes"),
       OomCause::shortfall},
      // No P; listed 16 GiB = 20 % of 80.
      {"other_processes from the listed processes",
       pytorch2("1.00 GiB", "80.00 GiB", "2.00 GiB", "", "60.00 GiB", "0 bytes",
                "Process 7 has 16.00 GiB memory in use. "),
       OomCause::other_processes},
      // No P; the 61 GiB process holds A + U = 60 GiB: it is this job; the
      // others hold 15 GiB < 16.
      {"the job listed as a process does not count",
       pytorch2(
           "1.00 GiB", "80.00 GiB", "2.00 GiB", "", "60.00 GiB", "0 bytes",
           "Process 7 has 61.00 GiB memory in use. Process 8 has 15.00 GiB "
           "memory in use. "),
       OomCause::shortfall},
      // No P, no list: C - F - A - U = 80 - 2 - 60 - 2 = 16 GiB (20 %, >= 2).
      {"other_processes from the allocator's numbers",
       pytorch2("1.00 GiB", "80.00 GiB", "2.00 GiB", "", "60.00 GiB",
                "2.00 GiB"),
       OomCause::other_processes},
      // 8192 - 400 - 5734.4 MiB = 2057.6 MiB: >= 20 % (1638.4) and >= 2 GiB.
      {"the last clause above its 2 GiB floor",
       pytorch2("100.00 MiB", "8.00 GiB", "400.00 MiB", "", "5.60 GiB",
                "0 bytes"),
       OomCause::other_processes},
      // 8192 - 400 - 5836.8 MiB = 1955.2 MiB: >= 20 % but under 2 GiB.
      {"the last clause under its 2 GiB floor",
       pytorch2("100.00 MiB", "8.00 GiB", "400.00 MiB", "", "5.70 GiB",
                "0 bytes"),
       OomCause::shortfall},
      // P = 10 GiB < A + U = 75 GiB cannot be this process: used, it would
      // say 80 - 2 - 10 = 68 GiB of other processes; ignored, the last
      // clause finds 80 - 2 - 70 - 5 = 3 GiB < 16: a shortfall. (U 5 GiB <
      // R 6 GiB: not fragmentation.)
      {"a P below A + U is not this process",
       pytorch2("6.00 GiB", "80.00 GiB", "2.00 GiB", "10.00 GiB", "70.00 GiB",
                "5.00 GiB"),
       OomCause::shortfall},
      // P = 0 bytes < A + U: NVML's blindness, the last clause decides:
      // 80 - 2 - 10 - 0 = 68 GiB.
      {"a P below A + U is not used",
       pytorch2("100.00 MiB", "80.00 GiB", "2.00 GiB", "0 bytes", "10.00 GiB",
                "0 bytes"),
       OomCause::other_processes},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(oom_cause_name(diagnose(c.log).cause) == oom_cause_name(c.cause));
  }
}

TEST_CASE("diagnose: messages without numbers are classified from the log",
          "[diagnose]") {
  const std::string cuda_error =
      "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be "
      "asynchronously reported at some other API call, so the stacktrace "
      "below might be incorrect.\n";
  // First thing in the log: the context did not fit.
  CHECK(diagnose(cuda_error).cause == OomCause::context_creation);
  // After a tqdm progress bar the job was working: its own memory.
  const Diagnosis after =
      diagnose(" 42%|████▏     | 4200/10000 [1:02:03<1:25:43,  1.13it/s]\n" +
               cuda_error);
  CHECK(after.cause == OomCause::shortfall);
  REQUIRE(after.context.first_activity_line);
  CHECK(*after.context.first_activity_line == 1);
  // A later message with numbers decides: the lerf numbers are fragmentation.
  const Diagnosis later = diagnose(cuda_error + k_lerf + "\n");
  CHECK(later.count == 2);
  CHECK(first(later).format == OomFormat::cuda_runtime);
  CHECK(later.cause == OomCause::fragmentation);
  CHECK(later.evidence.front() ==
        "the message states no numbers; the one at line 3 does");
  // cuBLAS handle creation is context_creation whatever came before.
  CHECK(diagnose(" 1%|| 1/100 [00:01<00:10, 9.00it/s]\nRuntimeError: CUDA "
                 "error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                 "`cublasCreate(handle)`\n")
            .cause == OomCause::context_creation);
}

// --- fixes ------------------------------------------------------------------

TEST_CASE("diagnose: fixes follow the message's engine and version",
          "[diagnose]") {
  // vLLM start-up, 1.53 of 22.05 GiB free: 100 x 1.53 / 22.05 = 6.94 -> 0.06.
  const Diagnosis startup = diagnose(
      "ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on "
      "startup is less than desired GPU memory utilization (0.9, "
      "19.84 GiB).\n");
  CHECK(startup.fixes.at(0).id == "find-other-process");
  CHECK(startup.fixes.at(1).args == "--gpu-memory-utilization 0.06");
  CHECK(startup.evidence.at(0) ==
        "vLLM wants gpu_memory_utilization 0.9 × 22.05 GiB = 19.84 GiB, but "
        "only 1.53 GiB of the card is free at start-up");

  // V1 with the profile in the log: 0.90 + (8.00 - 7.27) / 79.22 = 0.90921
  // -> 0.91.
  const Diagnosis kv = diagnose(
      "INFO 06-17 00:27:10 [worker.py:294] total_gpu_memory (79.22GiB) x "
      "gpu_memory_utilization (0.90) = 71.29GiB\n"
      "ValueError: To serve at least one request with the model's max seq len "
      "(131072), (8.00 GiB KV cache is needed, which is larger than the "
      "available KV cache memory (7.27 GiB). Based on the available memory, "
      "the estimated maximum model length is 119072. Try increasing "
      "`gpu_memory_utilization` or decreasing `max_model_len` when "
      "initializing the engine.\n");
  CHECK(kv.cause == OomCause::vllm_kv_cache);
  CHECK(kv.fixes.at(0).args == "--max-model-len 119072");
  CHECK(kv.fixes.at(1).args == "--gpu-memory-utilization 0.91");

  // PyTorch <= 2.0 (1.x wording): expandable segments do not exist yet.
  const Diagnosis old =
      diagnose(read_file(data_dir() + "pytorch1-maddog-11.log"));
  CHECK(old.cause == OomCause::fragmentation);
  CHECK(old.fixes.at(0).args ==
        "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512");
  CHECK(old.fixes.at(2).cost == "needs PyTorch 2.1 or later");

  // ROCm builds that print PYTORCH_HIP_ALLOC_CONF get it back; PyTorch
  // 2.9's PYTORCH_ALLOC_CONF is not honoured for expandable_segments on CUDA
  // in 2.9.1 (pytorch/pytorch#183387), so the old name is suggested.
  std::string on_rocm = pytorch2("3.00 GiB", "23.65 GiB", "1.66 GiB",
                                 "20.81 GiB", "12.09 GiB", "4.84 GiB");
  on_rocm.replace(on_rocm.find("CUDA out"), 4, "HIP");
  on_rocm.replace(on_rocm.find("PYTORCH_CUDA"), 12, "PYTORCH_HIP");
  const Diagnosis rocm = diagnose(on_rocm);
  CHECK(first(rocm).device == "hip");
  CHECK(rocm.fixes.at(0).args ==
        "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True");
  const std::string renamed =
      read_file(data_dir() + "pytorch2-rank-prefix-keys-values-92.log");
  CHECK(first(diagnose(renamed)).alloc_conf_env == "PYTORCH_ALLOC_CONF");
}

// --- robustness -------------------------------------------------------------

TEST_CASE("diagnose: prefixes, colours and escapes do not change the facts",
          "[diagnose]") {
  const OomMessage plain = first(diagnose(k_lerf));
  const std::vector<std::string> prefixes{
      "[rank0]: ",
      "[rank3]:[W511 14:10:52.227123 ProcessGroupNCCL.cpp:4115] ",
      "2024-05-11T14:10:52.227123456Z stderr F ",
      "[2023-03-13 13:33:25,688] [ERROR] [engine.py:12:step] ",
      "(VllmWorker rank=1 pid=254) ",
      "(RayWorkerWrapper pid=1234, ip=10.0.0.7) ",
      "INFO 04-27 10:13:05 llm_engine.py:275] ",
      "ERROR 03-10 08:07:20 [core.py:302] ",
      "node07: ",
      "vllm-1  | ",
      "2024-04-27 10:13:05 | ERROR | stderr | ",
      "\x1b[31mERROR\x1b[0m ",
      "[1,0]<stderr>:",
      "> ",
  };
  for (const std::string& prefix : prefixes) {
    INFO(prefix);
    const OomMessage m =
        first(diagnose("some earlier line\n" + prefix + k_lerf));
    CHECK(m.line == 2);
    CHECK(m.requested_bytes == plain.requested_bytes);
    CHECK(m.reserved_unallocated_bytes == plain.reserved_unallocated_bytes);
    CHECK(m.text == plain.text);
  }
  // HTML escapes (a log pasted from a web page) and CRLF line endings.
  std::string escaped = read_file(data_dir() + "nccl-calloc-962.log");
  for (std::size_t p = escaped.find('\''); p != std::string::npos;
       p = escaped.find('\'', p)) {
    escaped.replace(p, 1, "&#39;");
  }
  std::string crlf;
  for (const char c : escaped) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  }
  const Diagnosis nccl = diagnose(crlf);
  CHECK(nccl.count == 1);
  CHECK(first(nccl).line == 2);
  CHECK(first(nccl).requested_bytes == 6291456);
  CHECK(first(nccl).gpu_index == 0);
  CHECK(first(diagnose("The model&#39;s max seq len (4096) is larger than the "
                       "maximum number of tokens that can be stored in KV "
                       "cache (3664).\n"))
            .kv_tokens == 3664);
  // An escaped control character (&#10;, &#13;) is no line break: the
  // message stays on the line the log has (fuzz_diagnose found a message
  // numbered line 2 of a one-line log).
  for (const char* control : {"&#10;", "&#13;", "&#x0A;", "&#9;"}) {
    INFO(control);
    const Diagnosis d =
        diagnose(std::string("ggm") + control + "{ ErrorOutOfDeviceMemory fe");
    CHECK(d.lines == 1);
    REQUIRE(d.count == 1);
    CHECK(first(d).line == 1);
  }
}

TEST_CASE("diagnose: a message wrapped at any point reads the same",
          "[diagnose]") {
  const OomMessage plain = first(diagnose(k_lerf));
  // From after "CUDA out of memory." (the phrase that identifies a message
  // must be whole) to the end, break the line there, with and without a
  // prefix on the continuation.
  const std::size_t from = k_lerf.find("Tried");
  for (std::size_t k = from; k < k_lerf.size(); ++k) {
    for (const std::string continuation : {"", "[rank0]: "}) {
      INFO(k << " " << continuation);
      const std::string wrapped =
          k_lerf.substr(0, k) + "\n" + continuation + k_lerf.substr(k);
      const Diagnosis d = diagnose(wrapped);
      REQUIRE(d.count == 1);
      const OomMessage& m = first(d);
      CHECK(m.requested_bytes == plain.requested_bytes);
      CHECK(m.capacity_bytes == plain.capacity_bytes);
      CHECK(m.free_bytes == plain.free_bytes);
      CHECK(m.process_bytes == plain.process_bytes);
      CHECK(m.allocated_bytes == plain.allocated_bytes);
      CHECK(m.reserved_unallocated_bytes == plain.reserved_unallocated_bytes);
      CHECK(d.cause == OomCause::fragmentation);
    }
  }
}

TEST_CASE(
    "diagnose: a truncated message states only what it kept, never a "
    "wrong number",
    "[diagnose]") {
  for (const std::string& full : {k_lerf, k_vllm_v1}) {
    const OomMessage whole = first(diagnose(full));
    auto same_or_null = [](const auto& got, const auto& want) {
      return !got || got == want;
    };
    const std::size_t from = full.find("memory");
    for (std::size_t n = from + 6; n <= full.size(); ++n) {
      INFO(full.substr(0, n));
      const Diagnosis d = diagnose(full.substr(0, n));
      if (d.count == 0) {
        continue;  // cut before a vLLM message states its first number
      }
      const OomMessage& m = first(d);
      CHECK(same_or_null(m.requested_bytes, whole.requested_bytes));
      CHECK(same_or_null(m.capacity_bytes, whole.capacity_bytes));
      CHECK(same_or_null(m.free_bytes, whole.free_bytes));
      CHECK(same_or_null(m.process_bytes, whole.process_bytes));
      CHECK(same_or_null(m.allocated_bytes, whole.allocated_bytes));
      CHECK(same_or_null(m.reserved_unallocated_bytes,
                         whole.reserved_unallocated_bytes));
      CHECK(same_or_null(m.gpu_index, whole.gpu_index));
      CHECK(same_or_null(m.max_seq_len, whole.max_seq_len));
      CHECK(same_or_null(m.estimated_max_model_len,
                         whole.estimated_max_model_len));
    }
  }
}

TEST_CASE("diagnose: garbled bytes stop a message without breaking the scan",
          "[diagnose]") {
  // Invalid UTF-8 and NULs inside the message: the fields before them stand,
  // the text is valid UTF-8 and the JSON renders.
  std::string garbled = k_lerf;
  garbled.insert(garbled.find("Including"), std::string("\xff\xfe\x00\xc3", 4));
  const std::string skipped_garbage =
      "ValueError: No available memory for the cache blocks. Try increasing "
      "`gpu_memory_utilization` when initializing the engine\xff.";
  const Diagnosis d =
      diagnose(garbled + "\n" + k_vllm_v1 + "\n" + skipped_garbage + "\n");
  CHECK(d.count == 3);
  const OomMessage& m = first(d);
  CHECK(m.free_bytes == printed_bytes("1.66 GiB"));
  CHECK(!m.process_bytes);
  CHECK(d.messages.at(1).estimated_max_model_len == 34736);
  // Invalid bytes inside a message's text come out as U+FFFD.
  CHECK(d.messages.at(2).text.find("\xef\xbf\xbd") != std::string::npos);
  CHECK(d.invalid_utf8_bytes == 4);
  CHECK(d.nul_bytes == 1);
  CHECK(!d.binary);
  CHECK_NOTHROW(json::parse(render_diagnosis_json(d)));
}

TEST_CASE("diagnose: interleaved ranks give one message each, in log order",
          "[diagnose]") {
  std::string log;
  for (int step = 0; step < 3; ++step) {
    log += fmt::format("[rank0]: step {} loss 1.0\n[rank1]: step {} loss 1.1\n",
                       step, step);
  }
  std::string rank1 = pytorch2("2.00 GiB", "80.00 GiB", "1.00 GiB", "79.00 GiB",
                               "70.00 GiB", "5.00 GiB");
  rank1.replace(rank1.find("GPU 0"), 5, "GPU 1");
  log += "[rank1]: " + rank1;
  log += "[rank0]: step 3 loss 0.9\n";
  log += "[rank0]: " + pytorch2("2.00 GiB", "80.00 GiB", "1.00 GiB",
                                "60.00 GiB", "58.00 GiB", "0 bytes");
  const Diagnosis d = diagnose(log);
  CHECK(d.count == 2);
  CHECK(first(d).line == 7);
  CHECK(first(d).gpu_index == 1);
  CHECK(d.messages.at(1).line == 9);
  CHECK(d.messages.at(1).gpu_index == 0);
  // Rank 1: U 5 GiB >= R 2, >= 5 % of 80 (4), F 1 < 2.
  CHECK(d.cause == OomCause::fragmentation);
}

TEST_CASE("diagnose: a huge log in chunks: constant state, exact line numbers",
          "[diagnose]") {
  // 32 MiB of 64-byte lines, an OOM in the middle and at the end, fed in
  // 1 MiB chunks: the scanner keeps a bounded window, and counts every line.
  const std::string line(63, 'x');
  const std::int64_t lines = (std::int64_t{32} << 20) / 64;
  LogScanner scanner;
  std::string chunk;
  std::int64_t written = 0;
  for (std::int64_t i = 0; i < lines; ++i) {
    chunk += line;
    chunk += '\n';
    ++written;
    if (i == lines / 2) {
      chunk += k_lerf + "\n";
      ++written;
    }
    if (chunk.size() >= (std::size_t{1} << 20)) {
      scanner.feed(chunk);
      chunk.clear();
    }
  }
  chunk += k_vllm_v1;  // no final newline
  ++written;
  scanner.feed(chunk);
  const Diagnosis d = scanner.finish();
  CHECK(d.count == 2);
  CHECK(d.lines == written);
  CHECK(first(d).line == lines / 2 + 2);
  CHECK(d.messages.at(1).line == written);
  CHECK(d.cause == OomCause::fragmentation);

  // One 8 MiB line with the message at its very end.
  std::string long_line(std::size_t{8} << 20, 'y');
  long_line += ' ' + k_lerf;
  const Diagnosis one = diagnose(long_line);
  CHECK(one.count == 1);
  CHECK(first(one).line == 1);
  CHECK(first(one).requested_bytes == printed_bytes("3.00 GiB"));
}

TEST_CASE("diagnose: more messages than kept are still counted", "[diagnose]") {
  std::string log;
  for (std::size_t i = 0; i < k_max_messages + 50; ++i) {
    log += "NCCL WARN Cuda failure 'out of memory'\n";
  }
  const Diagnosis d = diagnose(log);
  CHECK(d.count == static_cast<std::int64_t>(k_max_messages + 50));
  CHECK(d.messages.size() == k_max_messages);
  CHECK(d.messages.back().line == static_cast<std::int64_t>(k_max_messages));
}

TEST_CASE("diagnose: binary input is flagged, UTF-8 text is not",
          "[diagnose]") {
  // 2 % invalid bytes: binary. Chinese text and box drawing: valid UTF-8.
  std::string noisy(980, 'a');
  noisy += std::string(20, '\xff');
  CHECK(diagnose(noisy).binary);
  const Diagnosis text = diagnose("这种错误什么原因 ████▏ 1.13it/s\n" + k_lerf);
  CHECK(!text.binary);
  CHECK(text.invalid_utf8_bytes == 0);
  CHECK(text.count == 1);
  // A gzip header is binary: 0x1f 0x8b 0x08 0x00 ... with NULs and high
  // bytes.
  const std::string gz("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xed\xc1\x01",
                       13);
  CHECK(diagnose(gz).binary);
}

TEST_CASE("diagnose: prose and quoted source are not messages", "[diagnose]") {
  CHECK(diagnose("I get a CUDA out of memory error when training.\n").count ==
        0);
  CHECK(diagnose("CUDA out of memory. Is it a matter of data size?\n").count ==
        0);
  CHECK(diagnose("    raise ValueError(\"No available memory for the cache "
                 "blocks. \"\n")
            .count == 0);
  CHECK(diagnose("Out of memory: Killed process 4242 (python3)\n").count == 0);
  CHECK(diagnose("INFO 11-21 10:13:05 metrics.py:349] GPU KV cache usage: "
                 "45.6%, CPU KV cache usage: 0.0%.\n")
            .count == 0);
  // TF/XLA's BFC warning that it recovered from.
  CHECK(diagnose("W tensorflow/core/common_runtime/bfc_allocator.cc:290] "
                 "Allocator (GPU_0_bfc) ran out of memory trying to allocate "
                 "2.00GiB with freed_by_count=0. The caller indicates that "
                 "this is not a failure, but may mean that there could be "
                 "performance gains if more memory were available.\n")
            .count == 0);
  // A message cut right after its first sentence still counts.
  CHECK(diagnose("RuntimeError: CUDA out of memory.\n").count == 1);
}

// --- context mode -----------------------------------------------------------

TEST_CASE("diagnose: compare_with_plan names the gap against the plan's peak",
          "[diagnose]") {
  // A 24 GiB card; the plan: weights 14, activations 4, logits 3 GiB; peak
  // allocated 21 GiB, reserved 22, device 23.
  Budget plan;
  plan.capacity_bytes = 24 * k_gib;
  plan.usable_bytes = 24 * k_gib;
  plan.add("weights", 14 * k_gib, "");
  plan.add("activations", 4 * k_gib, "");
  plan.add("logits", 3 * k_gib, "");
  plan.peak = {.allocated_bytes = 21 * k_gib,
               .reserved_bytes = 22 * k_gib,
               .device_bytes = 23 * k_gib,
               .phase = Phase::forward};
  // The log: 21.00 GiB allocated + a 3.00 GiB request = 24 GiB in tensors,
  // 3 GiB more than the plan: the logits (3 GiB) are the nearest component.
  const OomMessage m =
      first(diagnose(pytorch2("3.00 GiB", "23.99 GiB", "100.00 MiB",
                              "23.80 GiB", "21.00 GiB", "512.00 MiB")));
  const std::vector<std::string> lines = compare_with_plan(m, plan);
  REQUIRE(lines.size() >= 3);
  CHECK(lines.at(0) ==
        "the job tried to hold 24.00 GiB in tensors (21.00 GiB allocated + the "
        "3.00 GiB request); the plan's peak is 21.00 GiB allocated (forward, "
        "22.00 GiB reserved, 23.00 GiB on the device)");
  CHECK(lines.at(1) ==
        "the log needs 3.00 GiB more than the plan; the nearest component is "
        "logits (3.00 GiB): check the setting behind it");
  CHECK(lines.at(2) ==
        "this process held 23.80 GiB on the device; the plan's device peak is "
        "23.00 GiB");
  CHECK(lines.at(3) ==
        "the 3.00 GiB request is the size of the plan's logits (3.00 GiB)");

  // A vLLM KV message against the plan's profile.
  Budget served;
  served.capacity_bytes = 80 * k_gib;
  VllmProfile profile;
  profile.kv_cache_bytes = 4 * k_gib;
  profile.kv_bytes_per_token = 131072;
  profile.max_model_len_fit = 32768;
  served.vllm = profile;
  const OomMessage kv = first(diagnose(k_vllm_v1));
  const std::vector<std::string> v = compare_with_plan(kv, served);
  // 131072 B/token x 262144 tokens = 32 GiB.
  CHECK(v == std::vector<std::string>{
                 "the plan's KV-cache pool is 4.00 GiB; the log has 3.18 GiB "
                 "available",
                 "the plan needs 32.00 GiB for one 262144-token sequence "
                 "(128.00 KiB per token)",
                 "the plan fits 32768 tokens; vLLM in the log 34736"});
}

TEST_CASE(
    "diagnose: a figure of more than 18 digits saturates, leading zeros "
    "do not count",
    "[diagnose]") {
  // The fuzzer's find: 180 zeros then 16397105843297379270 MiB was read as its
  // first 18 digits (the zeros), 0 bytes, and differently when the log came
  // in chunks. Leading zeros are no digits; a 20-digit figure is "too large".
  const std::string zeros(180, '0');
  const std::string message =
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate " +
      zeros +
      "138.00 MiB. GPU 0 has a total capacity of 15.90 GiB of which "
      "8.44 MiB is free. Process 1246069 has " +
      zeros +
      "16397105843297379270.00 MiB memory in use. Including non-PyTorch "
      "memory, this process has 5.32 GiB memory in use.";
  const json m = diagnose_json(message)["messages"][0];
  CHECK(m["requested_bytes"] == 138 * (1 << 20));  // 138.00 MiB, exactly
  // 1.6e19 MiB is beyond any card: the diagnoser's ceiling, 2^60 bytes.
  CHECK(m["other_processes_bytes"] == std::int64_t{1} << 60);
  // The same in 20-byte chunks, as the fuzzer fed it.
  LogScanner scanner;
  for (std::size_t i = 0; i < message.size(); i += 20) {
    scanner.feed(std::string_view(message).substr(i, 20));
  }
  CHECK(render_diagnosis_json(scanner.finish()) ==
        render_diagnosis_json(diagnose(message)));
}

TEST_CASE(
    "diagnose: processes listed at 0 bytes are no listing, and no sum is "
    "quoted for them",
    "[diagnose]") {
  // The fuzzer's find: NVML that cannot see processes lists each at 0 bytes
  // (numbers_of leaves the listed sum unset), but the evidence of "C - F - P
  // held by other processes" still quoted that unset sum: whatever the
  // empty optional held (1 byte here, 131060.35 GiB in the fuzzer's ASan
  // build, where the one-shot and chunked scans then differed).
  const std::string message =
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "
      "138.00 MiB. GPU 0 has a total capacity of 15.90 GiB of which 8.44 MiB "
      "is free. Process 1246069 has 0 MiB memory in use. Including "
      "non-PyTorch memory, this process has 5.32 GiB memory in use.";
  const json d = diagnose_json(message);
  CHECK(d["cause"] == "other_processes");
  // 15.90 GiB - 8.44 MiB - 5.32 GiB = 10.57 GiB, 66 % of the card.
  CHECK(d["evidence"] ==
        json::array({"10.57 GiB of the 15.90 GiB card is neither free (8.44 "
                     "MiB) nor this process's (5.32 GiB): 66 % held by other "
                     "processes"}));
}
