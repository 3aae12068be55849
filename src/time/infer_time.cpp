// The time of one decode step (one token per sequence): the larger of
// compute, the bytes every step reads (weights and KV cache) and the host's
// kernel launches, plus tensor- and pipeline-parallel traffic and offload.

#include "time/internal.hpp"

#include <algorithm>
#include <cmath>

namespace oomplan::time_terms {
namespace {

// Launch latency of one small collective (decode-time TP all-reduce).
constexpr double k_collective_latency_s = 10e-6;
// Host overhead per decoder layer per decode step, the floor small models hit:
// eager transformers launches each layer's dozen kernels from Python (~30 us);
// vLLM replays CUDA graphs (~5 us).
constexpr double k_eager_layer_s = 30e-6;
constexpr double k_graph_layer_s = 5e-6;
// bitsandbytes LLM.int8() in transformers splits every matmul into an int8
// part and an fp16 outlier part and dequantizes the result: it runs no
// faster than the 16-bit model, about 15-23 % slower on BLOOM-176B (Dettmers
// et al. 2022, LLM.int8(), §"Inference speed and memory"; the hf-bitsandbytes
// integration blog).
constexpr double k_llm_int8_slowdown = 1.2;

}  // namespace

double decode_weight_bytes(const Model& model, const Resolved& setup,
                           const ParamCounts& params, double batch) {
  double weights = weight_read_bytes(model, setup);
  if (setup.engine == Engine::hf && setup.quant == Quant::int8) {
    // LLM.int8(): the 16-bit model's time, and then some.
    Resolved sixteen = setup;
    sixteen.quant = Quant::none;
    weights = weight_read_bytes(model, sixteen) * k_llm_int8_slowdown;
  }
  // MoE: a step reads only the experts its tokens route to; with `batch`
  // tokens each picking k of E, an expert is idle with probability
  // (1 - k/E)^batch. The experts' share of the bytes is their share of the
  // parameters.
  if (model.num_experts > 0 && params.total() > 0) {
    const double share = static_cast<double>(params.experts) /
                         static_cast<double>(params.total());
    const double idle =
        std::pow(1.0 - static_cast<double>(model.experts_per_tok) /
                           static_cast<double>(model.num_experts),
                 batch);
    weights -= weights * share * idle;
  }
  return weights;
}

double decode_comm_s(const Model& model, const Gpu& gpu, const Resolved& setup,
                     double batch) {
  const int tp = setup.tp;
  const int pp = std::max(setup.pp, 1);
  const double layers = static_cast<double>(all_layers(model));
  double comm = 0;
  // Tensor parallel: 2 all-reduces of batch x hidden per layer (attention
  // output and MLP output), latency-bound at decode sizes.
  if (tp > 1) {
    const double tensor = batch * static_cast<double>(model.hidden_size) *
                          dtype_bytes(setup.dtype);
    const double per_reduce =
        k_collective_latency_s +
        2.0 * (tp - 1) / tp * tensor / intra_node_bytes_s(gpu);
    comm += 2 * layers * per_reduce;
  }
  // Pipeline parallel: one hidden state per sequence to the next stage.
  if (pp > 1) {
    const double link =
        setup.nodes > 1 ? inter_node_bytes_s(gpu) : intra_node_bytes_s(gpu);
    comm += (pp - 1) * (k_collective_latency_s +
                        batch * static_cast<double>(model.hidden_size) *
                            dtype_bytes(setup.dtype) / link);
  }
  return comm;
}

double decode_launch_s(const Model& model, const Resolved& setup) {
  const bool graphs = setup.engine == Engine::vllm && !setup.enforce_eager;
  return static_cast<double>(all_layers(model)) *
         (graphs ? k_graph_layer_s : k_eager_layer_s);
}

StepTime inference_time(const Model& model, const Gpu& gpu,
                        const Resolved& setup, const ParamCounts& params,
                        std::int64_t batch_cap) {
  StepTime t;
  const int tp = setup.tp;
  const int pp = std::max(setup.pp, 1);
  // --split layers: one process holds all GPUs (transformers device_map).
  const int replicas =
      setup.split_layers ? 1 : std::max(setup.total_gpus() / (tp * pp), 1);
  const double batch = static_cast<double>(
      std::max<std::int64_t>(1, std::min(setup.batch, batch_cap)));
  const double seq = static_cast<double>(setup.seq);
  t.tokens_per_step = batch * replicas;

  // Decode: each step computes 2·N per token plus attention over the cached
  // context; the stages of a pipeline run one after the other for a token.
  const double n = matmul_params_per_token(model, params);
  const double per_token = 2 * n + attention_flops_per_token(model, seq);
  t.flops_per_step = per_token * t.tokens_per_step;
  t.compute_s = per_token * batch / tp / (peak_flops(gpu, setup) * k_mfu);

  // Memory-bound decode: every step reads all weights (split by tp) and each
  // sequence's KV cache at the average context (vLLM paged attention).
  const double kv_per_token = static_cast<double>(
      kv_bytes_per_token(model, setup, 0, all_layers(model)));
  const double read = decode_weight_bytes(model, setup, params, batch) +
                      batch * (seq / 2) * kv_per_token;
  t.memory_s = read / (gb_s(gpu.bandwidth_gb_s) * k_bandwidth_util);
  t.comm_s = decode_comm_s(model, gpu, setup, batch);
  // Offloaded weights (accelerate device_map with CPU, vLLM --cpu-offload-gb)
  // cross PCIe on every step.
  if (setup.offload == Offload::params || setup.offload == Offload::all) {
    t.offload_s = weight_read_bytes(model, setup) / gb_s(gpu.pcie_gb_s);
  }
  t.step_s =
      std::max({t.compute_s, t.memory_s, decode_launch_s(model, setup)}) +
      t.comm_s + t.offload_s;
  t.comm_bound = t.comm_s > std::max(t.compute_s, t.memory_s);
  t.no_nvlink = gpu.nvlink_gb_s <= 0 && (tp > 1 || pp > 1);
  return t;
}

}  // namespace oomplan::time_terms
