#include "diagnose/anchors.hpp"

#include "diagnose/grammars.hpp"

#include <algorithm>
#include <array>

// From a verified anchor to its grammar. Each hit looks back over its own
// line (or a bounded distance) for its message's first word, and runs one
// grammar from there, once; what the grammar parses is a message only when
// it names its source and is not a line of quoted source code.

namespace oomplan::diag {
namespace {

// The window as the grammars read it: the normalized text, and the raw
// prefix each line lost.
struct Text {
  std::string_view t;
  const Window& window;
  std::string_view raw;

  // The raw prefix removed from the line holding text offset `at`.
  std::string_view prefix_at(std::size_t at) const {
    const std::size_t b = line_begin(t, at);
    for (const Window::Prefix& p : window.prefixes) {
      if (p.text_line == b) {
        return raw.substr(p.raw_begin, p.raw_end - p.raw_begin);
      }
    }
    return {};
  }
};

// Runs `grammar(cursor, message)` from text offset `s`.
template <typename Grammar>
std::optional<Parsed> run(std::string_view t, std::size_t s,
                          Grammar&& grammar) {
  if (s >= t.size()) {
    return std::nullopt;
  }
  Parsed r;
  r.start = s;
  Cursor c(t, s);
  grammar(c, r.message);
  r.end = std::max(c.pos(), s + 1);
  return r;
}

auto cuda_error(std::string_view device) {
  return [device](Cursor& c, OomMessage& m) { parse_cuda_error(c, m, device); };
}

std::optional<Parsed> run_xla(const Text& x, std::size_t s) {
  return run(x.t, s, [&](Cursor& c, OomMessage& m) {
    parse_xla(x.t, c, m, x.prefix_at(c.pos()));
  });
}

std::optional<Parsed> run_nccl(std::string_view t, std::size_t s) {
  return run(t, s, [t](Cursor& c, OomMessage& m) { parse_nccl(t, c, m); });
}

// "CUDA out of memory" (HIP, XPU) at `oom`: PyTorch's caching allocator,
// raised as a RuntimeError by 1.x.
std::optional<Parsed> at_caching_allocator(std::string_view t,
                                           std::size_t oom) {
  const std::size_t s = oom - (ends_before_ci(t, oom, "CUDA ") ? 5 : 4);
  const bool runtime_error = ends_before_ci(t, s, "RuntimeError: ");
  return run(t, s, [runtime_error](Cursor& c, OomMessage& m) {
    parse_caching_allocator(c, m, runtime_error);
  });
}

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" (and the runtime's and HIP's
// names): TensorFlow's stream executor when "failed to alloc" leads the
// line, else the driver error itself.
std::optional<Parsed> at_driver_error(const Text& x, std::size_t oom,
                                      std::size_t lb) {
  const std::string_view t = x.t;
  const std::size_t failed = rfind_in(t, "failed to alloc", lb, oom);
  if (failed != k_npos) {
    return run_xla(x, failed);
  }
  const std::size_t s =
      rfind_in(t, "CUDA_ERROR_OUT_OF_MEMORY", lb, oom) != k_npos
          ? rfind_in(t, "CUDA_ERROR_OUT_OF_MEMORY", lb, oom)
          : line_begin(t, oom);
  return run(t, s, cuda_error("cuda"));
}

// "out of memory": the words before it, on its line, name the grammar.
std::optional<Parsed> at_out_of_memory(const Text& x, std::size_t np) {
  const std::string_view t = x.t;
  // np is the 'y' of "memory"; "out of memory" starts 12 before.
  if (np < 12) {
    return std::nullopt;
  }
  const std::size_t oom = np - 12;
  const std::size_t lb = line_begin(t, np);
  // XLA's cuMemAllocAsync allocator quotes the CUDA error on its line.
  if (const std::size_t async =
          rfind_in(t, "cuMemAllocAsync failed to allocate", lb, oom);
      async != k_npos) {
    return run_xla(x, async);
  }
  if (const std::size_t ggml = find_in(t, "ggml_", lb, oom); ggml != k_npos) {
    return run(t, ggml, parse_ggml);
  }
  if (ends_before_ci(t, oom, "MPS backend ")) {
    return run(t, oom - 12, parse_mps);
  }
  if (ends_before_ci(t, oom, "CUDA error: ") ||
      ends_before_ci(t, oom, "HIP error: ")) {
    const bool hip = ends_before_ci(t, oom, "HIP error: ");
    return run(t, oom - (hip ? 11 : 12), cuda_error(hip ? "hip" : "cuda"));
  }
  if (ends_before_ci(t, oom, "CUDA ") || ends_before_ci(t, oom, "HIP ") ||
      ends_before_ci(t, oom, "XPU ")) {
    return at_caching_allocator(t, oom);
  }
  if (const std::size_t failure = rfind_in(t, "Cuda failure", lb, oom);
      failure != k_npos && oom > 0 && t[oom - 1] == '\'') {
    return run_nccl(t, failure);
  }
  if (ends_before_ci(t, oom, "Error ") &&
      starts_with_ci(t, np + 1, " at line")) {
    return run(t, oom - 6, parse_bitsandbytes);
  }
  if (const std::size_t thc = rfind_in(t, "THCudaCheck FAIL", lb, oom);
      thc != k_npos && ends_before_ci(t, oom, ": ")) {
    // PyTorch 0.x logs the CUDA error before raising it.
    return run(t, thc, cuda_error("cuda"));
  }
  if (const std::size_t rt = rfind_in(t, "runtime error (", lb, oom);
      rt != k_npos && ends_before_ci(t, oom, ": ")) {
    const std::size_t s =
        rt >= 5 && ends_before_ci(t, rt, "cuda ") ? rt - 5 : rt;
    return run(t, s, cuda_error("cuda"));
  }
  if (ends_before_ci(t, oom, "Ran ") ||
      starts_with_at(t, oom, "Out of memory while trying") ||
      starts_with_at(t, oom, "Out of memory allocating")) {
    // XLA; start at RESOURCE_EXHAUSTED / "Resource exhausted" when it
    // leads the line (an exhausted hit would have parsed it already).
    return run_xla(x, ends_before_ci(t, oom, "Ran ") ? oom - 4 : oom);
  }
  if (ends_before_ci(t, oom, ": ") &&
      (ends_before_ci(t, oom - 2, "CUDA_ERROR_OUT_OF_MEMORY") ||
       ends_before_ci(t, oom - 2, "cudaErrorMemoryAllocation") ||
       ends_before_ci(t, oom - 2, "hipErrorOutOfMemory"))) {
    return at_driver_error(x, oom, lb);
  }
  if (contains_gpu_word(t.substr(lb, line_finish(t, np) - lb))) {
    return run(t, oom, parse_generic);
  }
  return std::nullopt;
}

// torch.OutOfMemoryError / CUDA_ERROR_OUT_OF_MEMORY with the words "out of
// memory" close after: that hit parses it. The words follow on the same
// line, or on the next one when the exception name ends its line
// ("torch.OutOfMemoryError:\nCUDA out of memory.", huggingface/trl#3172).
std::optional<Parsed> at_camel_oom(const Text& x, std::size_t np) {
  const std::string_view t = x.t;
  const std::size_t lb = line_begin(t, np);
  std::size_t to = line_finish(t, np);
  if (starts_with_at(t, np + 1, "Error:")) {
    std::size_t rest = np + 7;
    while (rest < to && t[rest] == ' ') {
      ++rest;
    }
    if (rest == to && to < t.size()) {
      to = line_finish(t, to + 1);
    }
  }
  if (find_ci(t, "out of memory", np, to) != k_npos) {
    return std::nullopt;
  }
  const std::string_view line = t.substr(lb, line_finish(t, np) - lb);
  const std::size_t failed = rfind_in(t, "failed to alloc", lb, np);
  if (failed != k_npos) {
    return run_xla(x, failed);
  }
  if (line.find("HIP_ERROR_OutOfMemory") != k_npos ||
      line.find("hipErrorOutOfMemory") != k_npos) {
    return run(t, word_begin(t, np), cuda_error("hip"));
  }
  if (line.find("CUDA_ERROR_OUT_OF_MEMORY") != k_npos) {
    return run(t, lb + line.find("CUDA_ERROR_OUT_OF_MEMORY"),
               cuda_error("cuda"));
  }
  // Vulkan's vk::Device::allocateMemory and Metal's command buffer, as
  // llama.cpp's ggml logs them: what failed is on the line before.
  if (line.find("ErrorOutOfDeviceMemory") != k_npos ||
      line.find("kIOGPUCommandBufferCallbackErrorOutOfMemory") != k_npos) {
    const std::size_t from = lb > 400 ? lb - 400 : 0;
    std::size_t s = rfind_in(t, "Device memory allocation of size", from, lb);
    if (s == k_npos) {
      s = rfind_in(t, "Failed to allocate pinned memory", from, lb);
    }
    return run(t, s != k_npos ? s : lb, parse_ggml);
  }
  return std::nullopt;
}

// The KV-cache checks of vLLM V1 and V0, from the start of their sentence.
std::optional<Parsed> at_kv_cache(std::string_view t, std::size_t np) {
  const std::size_t from = np > 480 ? np - 480 : 0;
  if (const std::size_t s =
          rfind_ws(t, "To serve at least one request", from, np);
      s != k_npos) {
    auto r = run(t, s, parse_vllm_v1);
    if (!r || !r->message.requested_bytes) {
      return std::nullopt;
    }
    return r;
  }
  std::size_t s = rfind_in(t, "The model's max seq len (", from, np);
  if (s == k_npos) {
    s = rfind_ws(t, "The model's max seq len (", from, np);
  }
  if (s == k_npos) {
    return std::nullopt;
  }
  auto r = run(t, s, parse_vllm_v0);
  if (!r || !r->message.kv_tokens) {
    return std::nullopt;
  }
  return r;
}

// The word before "xhausted" (RESOURCE_EXHAUSTED, Resource exhausted,
// ResourceExhaustedError), when an XLA or TensorFlow phrase follows it.
std::optional<Parsed> at_exhausted(const Text& x, std::size_t np) {
  const std::string_view t = x.t;
  const std::size_t lb = line_begin(t, np);
  std::size_t s = np;
  while (s > lb && (is_alpha(t[s - 1]) || t[s - 1] == '_')) {
    --s;
  }
  if (ends_before_ci(t, s, "Resource ")) {
    s -= 9;
  }
  Cursor probe(t, s);
  probe.skip_word();
  probe.lit("exhausted");
  probe.lit("Error");
  skip_exhausted_tail(probe);
  static constexpr std::array<std::string_view, 8> k_next{
      "Out of memory",
      "Failed to allocate request",
      "XLA:TPU compile permanent error",
      "Ran out of memory",
      "OOM when allocating",
      "failed to allocate",
      "failed to alloc",
      "ran out of memory"};
  const bool ours =
      std::any_of(k_next.begin(), k_next.end(),
                  [&](std::string_view p) { return probe.peek_lit(p); });
  if (!ours) {
    return std::nullopt;
  }
  return run_xla(x, s);
}

// The message starting at `phrase`, found back from `np` to `from`.
template <typename Grammar>
std::optional<Parsed> run_from(std::string_view t, std::string_view phrase,
                               std::size_t from, std::size_t np,
                               Grammar&& grammar) {
  const std::size_t s = rfind_in(t, phrase, from, np);
  if (s == k_npos) {
    return std::nullopt;
  }
  return run(t, s, grammar);
}

std::optional<Parsed> parse_hit(const Text& x, std::size_t np, Hit hit) {
  const std::string_view t = x.t;
  const std::size_t lb = line_begin(t, np);
  switch (hit) {
    case Hit::out_of_memory:
      return at_out_of_memory(x, np);
    case Hit::camel_oom:
      return at_camel_oom(x, np);
    case Hit::cache_blocks:
      return run_from(t, "No available memory", lb, np, parse_vllm_no_blocks);
    case Hit::startup:
      return run_from(t, "Free memory on device", np > 200 ? np - 200 : 0, np,
                      parse_vllm_startup);
    case Hit::enough_memory:
      return run_from(t, "Workspace can't be allocated", lb, np,
                      parse_deepspeed_workspace);
    case Hit::kv_cache:
      return at_kv_cache(t, np);
    case Hit::cuda_calloc: {
      const std::size_t s = rfind_in(t, "Failed to CUDA calloc", lb, np);
      return s == k_npos ? std::nullopt : run_nccl(t, s);
    }
    case Hit::blas_alloc: {
      std::size_t s = np >= 3 && ends_before_ci(t, np, "HIP")
                          ? np - 3
                          : (np >= 2 ? np - 2 : np);
      // TensorFlow's stream executor: "failed to create cublas handle:
      // CUBLAS_STATUS_ALLOC_FAILED" (cuda_blas.cc).
      constexpr std::string_view k_tf_create =
          "failed to create cublas handle: ";
      if (ends_before_ci(t, s, k_tf_create)) {
        s -= k_tf_create.size();
      }
      return run(t, s, parse_cublas);
    }
    case Hit::dnn_handle: {
      // From "Could not create cudnn handle:" when it leads, else the
      // status ('U' of CUDNN at np).
      const std::size_t create =
          rfind_in(t, "Could not create cudnn handle:", lb, np);
      return run(t, create != k_npos ? create : np - 1, parse_cudnn);
    }
    case Hit::exhausted:
      return at_exhausted(x, np);
    case Hit::tried_to_allocate: {
      // A fragment pasted without its "CUDA out of memory." head.
      auto r = run(t, np, [](Cursor& c, OomMessage& m) {
        parse_caching_allocator(c, m, false);
      });
      if (!r || !r->message.capacity_bytes) {
        return std::nullopt;
      }
      // Intel's XPU allocator (intel-extension-for-pytorch) refuses one
      // block above 4 GB whatever is free: "Current platform can NOT
      // allocate memory block with size larger than 4GB! Tried to ...".
      if (find_in(t, "larger than 4GB!", lb, np) != k_npos) {
        r->message.device = "xpu";
        r->message.allowed_bytes = 4 * k_gib;
      }
      return r;
    }
    default:
      return std::nullopt;
  }
}

// An earlier CUDA error in the window that leaves the context unusable:
// every later allocation fails, whatever is free.
bool after_cuda_fault(std::string_view t, std::size_t start) {
  for (const std::string_view fault :
       {"CUDA_ERROR_ILLEGAL_ADDRESS", "illegal memory access",
        "device-side assert triggered", "cudaErrorIllegalAddress"}) {
    if (find_in(t, fault, 0, start) != k_npos) {
      return true;
    }
  }
  return false;
}

// A traceback quoting the engine's source ("raise ValueError(\"No
// available memory for the cache blocks. \"") is not a message.
bool in_source_line(std::string_view t, std::size_t start) {
  const std::size_t b = line_begin(t, start);
  std::size_t q = start;
  while (q > b && t[q - 1] == ' ') {
    --q;
  }
  if (q == b || (t[q - 1] != '"' && t[q - 1] != '\'')) {
    return false;
  }
  return t.substr(b, q - b).find("raise ") != k_npos;
}

}  // namespace

std::optional<Parsed> parse_at_anchor(const Window& window,
                                      std::string_view raw, std::size_t np,
                                      Hit hit) {
  const Text x{window.view(), window, raw};
  if (np >= x.t.size()) {
    return std::nullopt;
  }
  std::optional<Parsed> r = parse_hit(x, np, hit);
  if (!r || r->message.source.empty() || in_source_line(x.t, r->start)) {
    return std::nullopt;
  }
  r->message.after_fault = after_cuda_fault(x.t, r->start);
  return r;
}

}  // namespace oomplan::diag
