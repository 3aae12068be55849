// vLLM's start-up refusals, in its order and in its words: the model or
// length it will not take, a weight format or dtype the card cannot run, and
// the memory checks of init_device and determine_available_memory.

#include "memory/internal.hpp"

#include "oomplan/model/capability.hpp"

#include <cstdio>
#include <string>

namespace oomplan::memory_terms {
namespace {

std::string fixed2(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

std::string gib_text(double bytes) {
  return fixed2(bytes / as_double(k_gib));
}

}  // namespace

// The oldest card a weight format's vLLM kernels run on (each quantization
// config's get_min_capability): fp8 and mxfp4 80 (Marlin weight-only on
// Ampere), awq 75, gptq 60, bitsandbytes 70; 0 when unquantized.
int vllm_min_capability(Quant quant) {
  switch (quant) {
    case Quant::fp8:
    case Quant::mxfp4:
      return 80;
    case Quant::awq:
      return 75;
    case Quant::gptq:
      return 60;
    case Quant::int8:
    case Quant::nf4:
    case Quant::nf4_nodq:
      return 70;
    default:
      return 0;
  }
}

std::string vllm_quant_method(Quant quant) {
  switch (quant) {
    case Quant::int8:
    case Quant::nf4:
    case Quant::nf4_nodq:
      return "bitsandbytes";
    default:
      return std::string(quant_name(quant));
  }
}

double vllm_free_at_start(const Gpu& gpu, const Resolved& s) {
  // Free memory at init_device is the card less this process's CUDA context,
  // and from 0.11 less what the distributed environment set up before the
  // snapshot (gpu_worker.py init_device).
  const VllmComm comm =
      vllm_comm(gpu, s.vllm_release, s.tp, s.pp, s.gpus, s.p2p);
  return as_double(gpu.capacity_bytes) -
         k_vllm_cuda_context_gib * as_double(k_gib) -
         (vllm_snapshot_after_distributed_init(s.vllm_release, s.vllm_engine)
              ? as_double(comm.init_bytes())
              : 0.0);
}

std::string vllm_config_error(const Model& m, const Gpu& gpu,
                              const Resolved& s) {
  if (std::string removed = vllm_removed_error(m, s.vllm_release);
      !removed.empty()) {
    return removed;
  }
  if (std::string refused = vllm_max_model_len_error(m, s.max_model_len);
      !refused.empty()) {
    return refused;
  }
  if (const int need_cc = vllm_min_capability(s.quant);
      gpu.compute_capability > 0 && gpu.compute_capability < need_cc) {
    // VllmConfig._get_quantization_config: the method's get_min_capability.
    return "The quantization method " + vllm_quant_method(s.quant) +
           " is not supported for the current GPU. Minimum capability: " +
           std::to_string(need_cc) +
           ". Current capability: " + std::to_string(gpu.compute_capability) +
           ".";
  }
  if (!runs_bf16(gpu) && s.dtype == Dtype::bf16) {
    // platforms/cuda.py check_if_supports_dtype, at worker start-up.
    return "Bfloat16 is only supported on GPUs with compute capability of at "
           "least 8.0. Your " +
           gpu.full_name + " GPU has compute capability " +
           std::to_string(gpu.compute_capability / 10) + "." +
           std::to_string(gpu.compute_capability % 10) +
           ". You can use float16 instead by explicitly setting the `dtype` "
           "flag in CLI, for example: --dtype=half.";
  }
  return "";
}

std::string vllm_max_len_kv_error(const Resolved& s, double need,
                                  Bytes available, std::int64_t kv_tokens,
                                  std::int64_t max_len_fit) {
  if (s.vllm_engine == VllmEngine::v0) {
    return "The model's max seq len (" + std::to_string(s.max_model_len) +
           ") is larger than the maximum number of tokens that can be "
           "stored in KV cache (" +
           std::to_string(kv_tokens) +
           "). Try increasing `gpu_memory_utilization` or decreasing "
           "`max_model_len` when initializing the engine.";
  }
  return "To serve at least one request with the models's max seq len (" +
         std::to_string(s.max_model_len) + "), (" + gib_text(need) +
         " GiB KV cache is needed, which is larger than the available "
         "KV cache memory (" +
         gib_text(as_double(available)) +
         " GiB). Based on the available memory, the estimated maximum "
         "model length is " +
         std::to_string(max_len_fit) +
         ". Try increasing `gpu_memory_utilization` or decreasing "
         "`max_model_len` when initializing the engine.";
}

std::string vllm_memory_error(const Model& m, const Gpu& gpu, const Resolved& s,
                              const VllmStage& worst, std::int64_t kv_tokens,
                              std::int64_t max_len_fit) {
  const double free = vllm_free_at_start(gpu, s);
  const Bytes requested = vllm_requested_bytes(gpu, s);
  // The free-memory check exists in V1 from 0.9.1 (#18974); before, V1 and
  // V0 went on and ran out of cache blocks instead.
  const bool free_check =
      s.vllm_engine == VllmEngine::v1 && s.vllm_release >= VllmVersion{0, 9, 1};
  if (as_double(worst.weights) > free) {
    // The load itself runs out of memory before any profiling.
    return "torch.OutOfMemoryError: CUDA out of memory while loading the "
           "model weights (" +
           gib_text(as_double(worst.weights)) + " GiB per GPU, " +
           gib_text(free) + " GiB free)";
  }
  if (free_check && as_double(requested) > free) {
    return "Free memory on device (" + gib_text(free) + "/" +
           gib_text(as_double(gpu.capacity_bytes)) +
           " GiB) on startup is less than desired GPU memory utilization (" +
           fixed2(s.gpu_util) + ", " + gib_text(as_double(requested)) +
           " GiB). Decrease GPU memory utilization or reduce GPU memory "
           "used by other processes.";
  }
  if (worst.available <= 0 || kv_tokens == 0) {
    return "No available memory for the cache blocks. Try increasing "
           "`gpu_memory_utilization` when initializing the engine.";
  }
  if (const double need = vllm_needed(m, s, worst, s.max_model_len);
      need > as_double(worst.available)) {
    return vllm_max_len_kv_error(s, need, worst.available, kv_tokens,
                                 max_len_fit);
  }
  return "";
}

std::string vllm_startup_error(const Model& m, const Gpu& gpu,
                               const Resolved& s, const VllmStage& worst,
                               std::int64_t kv_tokens,
                               std::int64_t max_len_fit) {
  std::string error = vllm_config_error(m, gpu, s);
  if (error.empty()) {
    error = vllm_memory_error(m, gpu, s, worst, kv_tokens, max_len_fit);
  }
  return error;
}

}  // namespace oomplan::memory_terms
