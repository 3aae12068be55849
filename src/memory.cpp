#include "oomplan/memory.hpp"

#include "memory_internal.hpp"

#include "oomplan/error.hpp"

#include <algorithm>
#include <string>

namespace oomplan {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::load:
      return "load";
    case Phase::prefill:
      return "prefill";
    case Phase::decode:
      return "decode";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer_step:
      return "optimizer_step";
  }
  return "load";
}

void Budget::add(std::string_view name, Bytes bytes, std::string_view formula) {
  if (count < components.size()) {
    components[count++] = Component{name, bytes, formula};
  }
}

Bytes Budget::bytes_of(std::string_view name) const {
  for (std::size_t i = 0; i < count; ++i) {
    if (components[i].name == name) {
      return components[i].bytes;
    }
  }
  return 0;
}

Bytes Budget::total_bytes() const {
  Bytes total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    total += components[i].bytes;
  }
  return total;
}

Setup resolve_setup(const Model& model, const Setup& setup) {
  Setup resolved = setup;
  if (resolved.split_layers) {
    // device_map="auto" runs one process that holds whole layers per GPU.
    resolved.tp = 1;
    resolved.pp = 1;
  }
  if (resolved.tp == 0) {
    resolved.tp =
        resolved.training() ? 1 : std::max(1, resolved.gpus / resolved.pp);
  }
  if (resolved.max_model_len == 0) {
    // --seq, but never past the model's context: vLLM's own default is the
    // derived max_model_len (config.py _get_and_verify_max_len), and an
    // explicit longer one is refused at start-up. The plan warns
    // (seq_beyond_context) when --seq exceeds the context.
    resolved.max_model_len =
        model.max_position_embeddings > 0
            ? std::min(resolved.seq, model.max_position_embeddings)
            : resolved.seq;
  }
  if (resolved.quant == Quant::automatic) {
    resolved.quant =
        resolved.mode == Mode::qlora ? Quant::nf4 : model.checkpoint_quant;
    if (resolved.quant == Quant::automatic) {
      resolved.quant = Quant::none;
    }
  }
  if (resolved.max_num_batched_tokens == 0) {
    if (resolved.vllm_version == VllmEra::v0) {
      // V0 (vllm/config.py SchedulerConfig): chunked prefill only above 32k
      // tokens (512-token chunks); else one prompt of max_model_len, >= 2048.
      resolved.max_num_batched_tokens =
          resolved.max_model_len > 32768
              ? 512
              : std::max<std::int64_t>(resolved.max_model_len, 2048);
    } else {
      // V1: chunked prefill always on; 8192 for the OpenAI server
      // (vllm/engine/arg_utils.py default_max_num_batched_tokens).
      resolved.max_num_batched_tokens = 8192;
    }
  }
  return resolved;
}

std::int64_t vllm_default_batched_tokens(const Gpu& gpu) {
  // vllm/engine/arg_utils.py get_batch_defaults: device_memory >= 70 GiB
  // and "a100" not in the device name -> 8192 for the API server, else
  // 2048 (the A100 is excluded for throughput, vllm PR #17885).
  const bool a100 = gpu.name.find("A100") != std::string::npos ||
                    gpu.full_name.find("A100") != std::string::npos;
  const bool big = gpu.capacity_bytes >= 70 * k_gib;
  return big && !a100 ? 8192 : 2048;
}

Setup resolve_setup(const Model& model, const Gpu& gpu, const Setup& setup) {
  Setup resolved = setup;
  if (resolved.max_num_batched_tokens == 0 &&
      resolved.vllm_version != VllmEra::v0) {
    resolved.max_num_batched_tokens = vllm_default_batched_tokens(gpu);
  }
  return resolve_setup(model, resolved);
}

namespace {

// The tensor-parallel sizes vLLM accepts: tp divides the attention heads, and
// the KV heads divide by tp or tp by them (replication).
std::string valid_tp_text(const Model& model) {
  const std::int64_t n = model.num_heads;
  const std::int64_t kv = model.kv_lora_rank > 0 ? n : model.num_kv_heads;
  std::string text;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0 && (kv <= 0 || kv % d == 0 || d % kv == 0)) {
      text += text.empty() ? "" : ", ";
      text += std::to_string(d);
    }
  }
  return text;
}

}  // namespace

void validate_setup(const Model& model, const Gpu& /*gpu*/,
                    const Setup& setup) {
  const std::string& name = model.name;
  const int tp = setup.tp;
  const int pp = setup.pp;
  if (tp < 1 || pp < 1) {
    throw Error("--tp and --pp must be at least 1");
  }
  if (model.num_heads > 0 && model.num_heads % tp != 0) {
    throw Error("--tp " + std::to_string(tp) + " does not divide the " +
                std::to_string(model.num_heads) + " attention heads of " +
                name + "; valid: " + valid_tp_text(model));
  }
  if (model.kv_lora_rank == 0 && model.num_kv_heads > 0 &&
      model.num_kv_heads % tp != 0 && tp % model.num_kv_heads != 0) {
    throw Error("--tp " + std::to_string(tp) + " does not divide the " +
                std::to_string(model.num_kv_heads) + " KV heads of " + name +
                " (nor do they divide it); valid: " + valid_tp_text(model));
  }
  const std::int64_t layers =
      model.num_layers + std::max<std::int64_t>(0, model.num_decoder_layers);
  if (pp > layers) {
    throw Error("--pp " + std::to_string(pp) + " exceeds the " +
                std::to_string(layers) + " layers of " + name);
  }
  const std::int64_t gpus = std::int64_t{setup.gpus} * setup.nodes;
  const std::int64_t group = std::int64_t{tp} * pp;
  if (group > gpus) {
    throw Error("--tp " + std::to_string(tp) + " x --pp " + std::to_string(pp) +
                " needs " + std::to_string(group) + " GPUs but only " +
                std::to_string(gpus) + " are given");
  }
  if (gpus % group != 0) {
    throw Error("--tp " + std::to_string(tp) + " x --pp " + std::to_string(pp) +
                " = " + std::to_string(group) + " does not divide the " +
                std::to_string(gpus) +
                " GPUs (data parallel = GPUs / (tp x pp))");
  }
  if (setup.split_layers &&
      (setup.engine == Engine::vllm || setup.training())) {
    throw Error(
        "--split layers is transformers' device_map=\"auto\" inference; "
        "use --pp with --engine vllm or training");
  }
  if (setup.split_layers && setup.gpus > layers) {
    throw Error("--split layers puts whole layers on each GPU: " +
                std::to_string(setup.gpus) + " GPUs exceed the " +
                std::to_string(layers) + " layers of " + name);
  }
  if (setup.engine == Engine::vllm && setup.training()) {
    throw Error("--engine vllm serves models; use --mode infer with it");
  }
  if (!(setup.gpu_util > 0.0 && setup.gpu_util <= 1.0)) {
    throw Error("--gpu-util must be in (0, 1], got " +
                std::to_string(setup.gpu_util));
  }
  if (setup.zero_stage() < 0 || setup.zero_stage() > 3) {
    throw Error("--zero must be 0, 1, 2 or 3");
  }
  if (!setup.training() && (setup.zero != 0 || setup.fsdp)) {
    throw Error(
        "--zero and --fsdp apply to training (--mode full, lora or "
        "qlora)");
  }
  if (setup.seq < 1 || setup.batch < 1) {
    throw Error("--seq and --batch must be at least 1");
  }
}

Budget memory(const Model& model, const Gpu& gpu, const Setup& setup) {
  Budget budget;
  budget.capacity_bytes = gpu.capacity_bytes;
  budget.usable_bytes = gpu.capacity_bytes;
  if (setup.training()) {
    add_training(model, gpu, setup, budget);
  } else {
    add_inference(model, gpu, setup, budget);
  }
  return budget;
}

}  // namespace oomplan
