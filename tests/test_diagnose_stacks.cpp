// `oomplan diagnose` on the stacks beside PyTorch: TensorFlow 1 and 2,
// llama.cpp / ollama (ggml), XLA's asynchronous allocator, and the cause
// rules that read them. The messages are the wordings quoted from real
// threads (tests/data/oom holds whole logs with their sources); the sizes
// are worked out by hand in the comments.

#include "oomplan/diagnose/diagnose.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace oomplan;

const OomMessage& first(const Diagnosis& d) {
  REQUIRE(d.count >= 1);
  return d.messages.front();
}

bool has_fix(const Diagnosis& d, std::string_view id) {
  for (const OomFix& f : d.fixes) {
    if (f.id == id) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("diagnose: TensorFlow 1's wrappings of the tensor OOM are found",
          "[diagnose]") {
  // 128·128·109·109 = 194,658,304 floats × 4 B = 778,633,216 B.
  const std::string tail =
      "OOM when allocating tensor with shape[128,128,109,109] and type float "
      "on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
      "GPU_0_bfc\n";
  for (const std::string head :
       {"ResourceExhaustedError (see above for traceback): ",
        "INFO:tensorflow:Error reported to Coordinator: <class "
        "'tensorflow.python.framework.errors_impl.ResourceExhaustedError'>, ",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: ",
        "ResourceExhaustedError: "}) {
    CAPTURE(head);
    const Diagnosis d = diagnose(head + tail);
    const OomMessage& m = first(d);
    CHECK(m.source == "tensorflow");
    CHECK(m.format == OomFormat::xla);
    CHECK(m.requested_bytes == std::optional<Bytes>(778'633'216));
    CHECK(m.gpu_index == std::optional<int>(0));
  }
}

TEST_CASE("diagnose: a tensor shape is dimensions times the dtype's size",
          "[diagnose]") {
  // shape[128,3,8,128,8,128] = 402,653,184 elements; ×4 B = 1,610,612,736 B
  // (the 101 GB of a reading with thousands separators is wrong).
  struct Case {
    const char* type;
    Bytes bytes;
  };
  for (const Case& c :
       {Case{"float", 1'610'612'736}, Case{"half", 805'306'368},
        Case{"bfloat16", 805'306'368}, Case{"int8", 402'653'184},
        Case{"uint8", 402'653'184}, Case{"bool", 402'653'184},
        Case{"int32", 1'610'612'736}, Case{"int64", 3'221'225'472},
        Case{"double", 3'221'225'472}, Case{"complex64", 3'221'225'472},
        Case{"complex128", 6'442'450'944}, Case{"float8_e4m3fn", 402'653'184},
        Case{"int4", 201'326'592}}) {
    CAPTURE(c.type);
    const Diagnosis d = diagnose(fmt::format(
        "ResourceExhaustedError: OOM when allocating tensor with "
        "shape[128,3,8,128,8,128] and type {} on "
        "/job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc\n",
        c.type));
    CHECK(first(d).requested_bytes == std::optional<Bytes>(c.bytes));
    CHECK(first(d).gpu_index == std::optional<int>(1));
  }
  // A type without a fixed size states no request.
  const Diagnosis s = diagnose(
      "ResourceExhaustedError: OOM when allocating tensor with shape[4] and "
      "type string on /job:localhost/replica:0/task:0/device:GPU:0 by "
      "allocator GPU_0_bfc\n");
  CHECK_FALSE(first(s).requested_bytes);
}

TEST_CASE(
    "diagnose: random shapes printed as TensorFlow prints them read "
    "back exactly",
    "[diagnose][property]") {
  std::mt19937_64 rng(20261205);
  std::uniform_int_distribution<int> rank(1, 6);
  std::uniform_int_distribution<std::int64_t> dim(1, 1500);
  for (int i = 0; i < 500; ++i) {
    const int n = rank(rng);
    // Dimensions up to 1500 (three and four digits, where a thousands
    // reading would go wrong); the product stays below 2^40 elements.
    std::vector<std::int64_t> dims;
    std::int64_t elements = 1;
    for (int k = 0; k < n; ++k) {
      const std::int64_t v = dim(rng);
      if (elements * v > (std::int64_t{1} << 40)) {
        break;
      }
      dims.push_back(v);
      elements *= v;
    }
    if (dims.empty()) {
      continue;
    }
    const std::string text = fmt::format(
        "ResourceExhaustedError: OOM when allocating tensor with shape[{}] and "
        "type half on /job:localhost/replica:0/task:0/device:GPU:0 by "
        "allocator GPU_0_bfc\n",
        fmt::join(dims, ","));
    CAPTURE(text);
    CHECK(first(diagnose(text)).requested_bytes ==
          std::optional<Bytes>(elements * 2));
  }
}

TEST_CASE("diagnose: TensorFlow's cuBLAS handle failure is handle creation",
          "[diagnose]") {
  const Diagnosis d = diagnose(
      "2019-05-01 10:00:00.000000: E "
      "tensorflow/stream_executor/cuda/cuda_blas.cc:238] failed to create "
      "cublas handle: CUBLAS_STATUS_ALLOC_FAILED\n");
  CHECK(first(d).kind == OomKind::cublas_create);
  CHECK(d.cause == OomCause::context_creation);
  REQUIRE_FALSE(d.fixes.empty());
  CHECK(d.fixes.front().id == "tf-memory-growth");
}

TEST_CASE("diagnose: llama.cpp's buffer and pool failures", "[diagnose]") {
  // 35533.34 MiB = 35533.34 × 2^20 = 37,259,407,523.84 → 37,259,407,524 B.
  const Diagnosis load = diagnose(
      "llm_load_tensors: offloaded 81/81 layers to GPU\n"
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 35533.34 MiB on "
      "device 0: cudaMalloc failed: out of memory\n"
      "llama_model_load: error loading model: unable to allocate backend "
      "buffer\n");
  const OomMessage& m = first(load);
  CHECK(m.line == 2);
  CHECK(m.source == "llama.cpp");
  CHECK(m.kind == OomKind::ggml_buffer);
  CHECK(m.device == "cuda");
  CHECK(m.gpu_index == std::optional<int>(0));
  CHECK(m.requested_bytes == std::optional<Bytes>(37'259'407'524));
  REQUIRE(load.fixes.size() >= 2);
  CHECK(load.fixes[0].id == "fewer-gpu-layers");
  CHECK(load.fixes[1].id == "smaller-context");
  CHECK(has_fix(load, "kv-cache-q8"));

  // The pool grows while serving: never context creation.
  const Diagnosis pool = diagnose(
      "slot update_slots: id  0 | task 0 | prompt processing progress\n"
      "CUDA error: out of memory\n"
      "  current device: 0, in function ggml_cuda_pool_malloc_vmm at "
      "ggml/src/ggml-cuda.cu:378\n"
      "  cuMemCreate(&handle, reserve_size, &prop, 0)\n");
  CHECK(first(pool).kind == OomKind::ggml_buffer);
  CHECK(first(pool).source == "llama.cpp");
  CHECK(pool.cause != OomCause::context_creation);
  REQUIRE_FALSE(pool.fixes.empty());
  CHECK(pool.fixes.front().id == "smaller-context");

  // Vulkan: the size is on the line before the exception. 4 GiB.
  const Diagnosis vk = diagnose(
      "ggml_vulkan: Device memory allocation of size 4294967296 failed.\n"
      "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\n");
  CHECK(first(vk).device == "vulkan");
  CHECK(first(vk).requested_bytes == std::optional<Bytes>(4'294'967'296));

  const Diagnosis metal = diagnose(
      "ggml_metal_graph_compute: command buffer 0 failed with status 5\n"
      "error: Insufficient Memory "
      "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\n");
  CHECK(first(metal).device == "metal");
  CHECK(first(metal).kind == OomKind::ggml_buffer);
}

TEST_CASE("diagnose: XLA's async allocator and its Free/Total line",
          "[diagnose]") {
  const Diagnosis d = diagnose(
      "2024-01-01 12:00:00.000000: W external/xla/xla/stream_executor/gpu/"
      "gpu_cudamallocasync_allocator.cc:180] cuMemAllocAsync failed to "
      "allocate 1225195446464 bytes: CUDA error: out of memory "
      "(CUDA_ERROR_OUT_OF_MEMORY)\n"
      " Reported by CUDA: Free memory/Total memory: 22635544576/85095874560\n");
  const OomMessage& m = first(d);
  CHECK(m.format == OomFormat::xla);
  CHECK(m.requested_bytes == std::optional<Bytes>(1'225'195'446'464));
  CHECK(m.free_bytes == std::optional<Bytes>(22'635'544'576));
  CHECK(m.capacity_bytes == std::optional<Bytes>(85'095'874'560));
  // 1.14 TiB on a 79 GiB card: one request larger than the card.
  CHECK(d.cause == OomCause::large_allocation);
}

TEST_CASE(
    "diagnose: a request beyond the allocator's limit is a large "
    "allocation without a capacity line",
    "[diagnose]") {
  // 1.25 TiB against a 25,554,419,712 B (23.8 GiB) BFC limit.
  const Diagnosis d = diagnose(
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of "
      "memory while trying to allocate 1374389534720 bytes.\n"
      "I external/tsl/tsl/framework/bfc_allocator.cc:1112] "
      "total_region_allocated_bytes_: 25554419712 memory_limit_: 25554419712 "
      "available bytes: 0\n");
  CHECK(first(d).allowed_bytes == std::optional<Bytes>(25'554'419'712));
  CHECK(d.cause == OomCause::large_allocation);

  // PyTorch: 30 GiB requested, 10 GiB free, this process 12 GiB, no
  // capacity: 30 > 10 + 12, freeing everything would not make room.
  const Diagnosis p = diagnose(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 "
      "GiB. GPU 0 has a total capacity of 80.00 GiB of which 10.00 GiB is "
      "free. Including non-PyTorch memory, this process has 12.00 GiB memory "
      "in use.\n");
  CHECK(p.cause == OomCause::large_allocation);
}

TEST_CASE("diagnose: a tiny failed request is not a lack of memory",
          "[diagnose]") {
  // 24 B with 21.80 GiB free: unknown, and the first fix finds the real
  // error.
  const Diagnosis d = diagnose(
      "RuntimeError: CUDA out of memory. Tried to allocate 24.00 B (GPU 0; "
      "23.69 GiB total capacity; 1.20 GiB already allocated; 21.80 GiB free; "
      "1.30 GiB reserved in total by PyTorch)\n");
  CHECK(d.cause == OomCause::unknown);
  REQUIRE_FALSE(d.fixes.empty());
  CHECK(d.fixes.front().id == "find-first-error");
  // With less than one 2 MiB segment free, a tiny request can fail: 4 B,
  // 1 MiB free on a 24 GiB card with 23.9 GiB allocated is a shortfall.
  const Diagnosis full = diagnose(
      "RuntimeError: CUDA out of memory. Tried to allocate 4.00 B (GPU 0; "
      "24.00 GiB total capacity; 23.90 GiB already allocated; 1.00 MiB free; "
      "23.95 GiB reserved in total by PyTorch)\n");
  CHECK(full.cause != OomCause::unknown);
}

TEST_CASE("diagnose: a CUDA error inside a model op is not context creation",
          "[diagnose]") {
  const std::string message =
      "RuntimeError: CUDA error: out of memory\n"
      "CUDA kernel errors might be asynchronously reported at some other API "
      "call, so the stacktrace below might be incorrect.\n";
  const Diagnosis bare = diagnose(message);
  CHECK(bare.cause == OomCause::context_creation);
  const Diagnosis in_op = diagnose(
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 88, in <module>\n"
      "    out = model(x)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/nn/functional.py\", line "
      "2546, in layer_norm\n"
      "    return torch.layer_norm(input, normalized_shape, weight, bias, "
      "eps)\n" +
      message);
  CHECK(in_op.cause == OomCause::shortfall);
  REQUIRE_FALSE(in_op.evidence.empty());
  CHECK(in_op.evidence.front().find("line 6") != std::string::npos);
}
