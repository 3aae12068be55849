#include "oomplan/time/time.hpp"

#include "oomplan/model/capability.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

// The time and cost model (issue 4 §2). Roofline arithmetic, not a simulator:
// compute time from FLOPs at a stated MFU, decode time from the bytes every
// step must read, collectives from ring volumes over the slowest link they
// cross. The constants below are the assumptions; README states them.

namespace oomplan {
namespace {

// One 200 Gb/s InfiniBand/EFA rail per GPU between nodes, in GB/s.
constexpr double k_internode_gb_s = 25.0;
// Launch latency of one small collective (decode-time TP all-reduce).
constexpr double k_collective_latency_s = 10e-6;
// Host overhead per decoder layer per decode step, the floor small models hit:
// eager transformers launches each layer's dozen kernels from Python (~30 us);
// vLLM replays CUDA graphs (~5 us).
constexpr double k_eager_layer_s = 30e-6;
constexpr double k_graph_layer_s = 5e-6;
// DeepSpeed CPU-Adam (AVX, multi-threaded; Ren et al. 2021, ZeRO-Offload
// §4.2): parameters updated per second per node. An assumed order of magnitude
// for a current multi-core server, stated in README, not a measurement.
constexpr double k_cpu_adam_params_per_s = 2e9;
// bitsandbytes 4-bit matmuls dequantize the weight on every forward and
// backward: QLoRA steps run about 30 % slower than 16-bit LoRA (QLoRA paper
// §5 and the peft/bnb benchmarks).
constexpr double k_nf4_train_factor = 1.3;
// bitsandbytes LLM.int8() in transformers splits every matmul into an int8
// part and an fp16 outlier part and dequantizes the result: it runs no
// faster than the 16-bit model, about 15-23 % slower on BLOOM-176B (Dettmers
// et al. 2022, LLM.int8(), §"Inference speed and memory"; the hf-bitsandbytes
// integration blog).
constexpr double k_llm_int8_slowdown = 1.2;

// Every transformer block: decoder-only layers plus an encoder-decoder's
// decoder stack.
std::int64_t all_layers(const Model& model) {
  return model.num_layers + model.num_decoder_layers;
}

double gb_s(double gb) {
  return gb * 1e9;
}

// Tensor-core peak for the compute dtype: fp32 runs as TF32, half the
// bf16 rate on A100/H100.
double peak_flops(const Gpu& gpu, const Resolved& setup) {
  const double bf16 = gpu.bf16_tflops * 1e12;
  return setup.dtype == Dtype::fp32 ? bf16 / 2 : bf16;
}

// Bandwidth of one GPU's link to its peers inside a node, one direction:
// NVLink figures are bidirectional per GPU, PCIe one direction.
double intra_node_bytes_s(const Gpu& gpu) {
  if (gpu.nvlink_gb_s > 0) {
    return gb_s(gpu.nvlink_gb_s / 2) * k_link_util;
  }
  return gb_s(gpu.pcie_gb_s) * k_link_util;
}

double inter_node_bytes_s(const Gpu& gpu) {
  return std::min(intra_node_bytes_s(gpu),
                  gb_s(k_internode_gb_s) * k_link_util);
}

// Weights read per forward pass (all layers, split by tp), in bytes.
double weight_read_bytes(const Model& model, const Resolved& setup) {
  return static_cast<double>(weight_bytes(
      model, setup, WeightShare{0, all_layers(model), true, true}));
}

// Multiply-accumulate parameters one token touches: every linear layer that
// runs (MoE: shared experts plus the routed top-k share), and the lm_head
// matmul (the tied embedding when there is no separate head). The embedding
// lookup is free.
double matmul_params_per_token(const Model& model, const ParamCounts& p) {
  double experts = static_cast<double>(p.experts);
  if (model.num_experts > 0) {
    experts *= static_cast<double>(model.experts_per_tok) /
               static_cast<double>(model.num_experts);
  }
  const double head =
      p.lm_head > 0 ? static_cast<double>(p.lm_head)
                    : static_cast<double>(model.vocab_size * model.hidden_size);
  return static_cast<double>(p.attention + p.mlp + p.shared_experts +
                             p.router) +
         experts + head;
}

// Average attended context per query with causal masking: s/2 for a global
// layer, about the window for a sliding one.
double average_context(const Model& model, std::int64_t layer, double seq) {
  if (is_local_layer(model, layer) && model.sliding_window > 0) {
    const auto w = static_cast<double>(model.sliding_window);
    if (seq > w) {
      return w - w * w / (2 * seq);
    }
  }
  return seq / 2;
}

// Attention score and value FLOPs per token, forward: 2 (QK^T) + 2 (AV)
// multiply-adds per head dimension per attended position (Kaplan et al. 2020,
// Table 1: 2 n_layer n_ctx d_attn, here with the causal average context).
double attention_flops_per_token(const Model& model, double seq) {
  const std::int64_t layers = all_layers(model);
  const double qk_dim =
      model.kv_lora_rank > 0
          ? static_cast<double>(model.qk_nope_head_dim + model.qk_rope_head_dim)
          : static_cast<double>(model.head_dim);
  const double v_dim = model.kv_lora_rank > 0
                           ? static_cast<double>(model.v_head_dim)
                           : static_cast<double>(model.head_dim);
  double total = 0;
  if (model.sliding_window <= 0) {
    total = static_cast<double>(layers) * seq / 2;  // all global (fast path)
  } else {
    for (std::int64_t layer = 0; layer < layers; ++layer) {
      total += average_context(model, layer, seq);
    }
  }
  return 2 * static_cast<double>(model.num_heads) * (qk_dim + v_dim) * total;
}

// Trainable parameters: all of them in full fine-tuning; LoRA adapters
// r x (in + out) per targeted projection per layer (peft LoraLayer A and B).
double trainable_params(const Model& model, const Resolved& setup,
                        const ParamCounts& p) {
  if (setup.mode == Mode::full) {
    return static_cast<double>(p.total());
  }
  const double h = static_cast<double>(model.hidden_size);
  const double q = static_cast<double>(model.num_heads * model.head_dim);
  const double kv = static_cast<double>(model.num_kv_heads * model.head_dim);
  const double inter = static_cast<double>(
      model.num_experts > 0 && model.moe_intermediate_size > 0
          ? model.moe_intermediate_size
          : model.intermediate_size);
  double per_layer = 0;
  const unsigned t = setup.lora_targets;
  per_layer += (t & k_lora_q) != 0 ? h + q : 0;
  per_layer += (t & k_lora_k) != 0 ? h + kv : 0;
  per_layer += (t & k_lora_v) != 0 ? h + kv : 0;
  per_layer += (t & k_lora_o) != 0 ? q + h : 0;
  per_layer += (t & k_lora_gate) != 0 ? h + inter : 0;
  per_layer += (t & k_lora_up) != 0 ? h + inter : 0;
  per_layer += (t & k_lora_down) != 0 ? inter + h : 0;
  return per_layer * setup.lora_rank * static_cast<double>(all_layers(model));
}

StepTime training_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup, const ParamCounts& params) {
  StepTime t;
  const int tp = setup.tp;
  const int pp = std::max(setup.pp, 1);
  const int dp = std::max(setup.dp(), 1);
  const int accum = std::max(setup.grad_accum, 1);
  const double seq = static_cast<double>(setup.seq);
  const double micro_tokens = static_cast<double>(setup.batch) * seq;
  const double layers_here = static_cast<double>(all_layers(model)) / pp;
  t.tokens_per_step = micro_tokens * dp * accum;

  // 6·N per token: forward 2N, backward 4N (activation and weight gradients)
  // (Kaplan et al. 2020 §2.1). LoRA skips the frozen weights' gradients: 4N.
  // Full recomputation adds one more forward (+2N, i.e. 8N; Korthikanti et al.
  // 2022 §5); selective recomputes only the attention core.
  const double n = matmul_params_per_token(model, params);
  const double attn = attention_flops_per_token(model, seq);
  const bool full = setup.mode == Mode::full;
  double per_token = (full ? 6 : 4) * n + 3 * attn;
  if (setup.checkpointing == Checkpointing::full) {
    per_token += 2 * n + attn;
  } else if (setup.checkpointing == Checkpointing::selective) {
    per_token += attn;
  }
  t.flops_per_step = per_token * t.tokens_per_step;
  const int gpus = setup.total_gpus();
  double compute = t.flops_per_step / gpus / (peak_flops(gpu, setup) * k_mfu);
  if (quant_bits(setup.quant) == 4 && !full) {
    compute *= k_nf4_train_factor;
  }
  // 1F1B pipeline bubble: (pp - 1) idle slots per `accum` micro-batches
  // (Narayanan et al. 2021, §2.2).
  compute *= 1 + static_cast<double>(pp - 1) / accum;
  t.compute_s = compute;

  const double dtype_b = dtype_bytes(setup.dtype);
  const double intra = intra_node_bytes_s(gpu);
  const double dp_link = setup.nodes > 1 ? inter_node_bytes_s(gpu) : intra;

  // Tensor parallel: 2 all-reduces of b·s·h per layer forward and 2 backward
  // (Megatron-LM, Shoeybi et al. 2019 §3), 2 more when recomputing; a ring
  // all-reduce sends 2 (n - 1) / n of the tensor per GPU. On the critical path.
  double tp_comm = 0;
  if (tp > 1) {
    const double reduces =
        setup.checkpointing == Checkpointing::full ? 6.0 : 4.0;
    const double tensor =
        micro_tokens * static_cast<double>(model.hidden_size) * dtype_b;
    tp_comm =
        layers_here * reduces * 2.0 * (tp - 1) / tp * tensor / intra * accum;
  }

  // Data parallel: gradients all-reduced once per optimizer step (ZeRO-1/2
  // reduce-scatter + all-gather move the same volume); ZeRO-3/FSDP all-gathers
  // the weights in forward and again in backward and reduce-scatters the
  // gradients, every micro-batch (Rajbhandari et al. 2020, §7: 1.5x DP volume).
  double dp_comm = 0;
  const double weights = weight_read_bytes(model, setup) / pp;
  const double grads =
      trainable_params(model, setup, params) / (tp * pp) * dtype_b;
  if (dp > 1) {
    const double ring = static_cast<double>(dp - 1) / dp;
    if (setup.zero >= 3) {
      dp_comm = (2 * ring * weights + ring * grads) * accum / dp_link;
    } else {
      dp_comm = 2 * ring * grads / dp_link;
    }
  }
  t.comm_s = tp_comm + dp_comm;

  // Offload traffic over each GPU's PCIe link (ZeRO-Offload / ZeRO-Infinity):
  // optimizer offload sends the gradient shard down and the updated 16-bit
  // weights back once per step and runs Adam on the CPU; parameter offload
  // fetches the weight shard for forward and backward every micro-batch.
  const double pcie = gb_s(gpu.pcie_gb_s);
  const double shard = setup.zero >= 1 ? dp : 1;
  double offload = 0;
  if (setup.offload == Offload::optimizer || setup.offload == Offload::all) {
    const double state_params =
        trainable_params(model, setup, params) / (tp * pp) / shard;
    offload += state_params * dtype_b / pcie;
    offload += state_params * setup.gpus / k_cpu_adam_params_per_s;
  }
  if (setup.offload == Offload::params || setup.offload == Offload::all) {
    const double fetched = setup.zero >= 3 ? weights / dp : weights;
    offload += 2 * fetched / pcie * accum;
  }
  // Activation offload (torchtune): each layer's saved input goes to the host
  // and back, overlapped with compute on a side stream; only the excess shows.
  if (setup.activation_offload) {
    const double per_layer = micro_tokens *
                             static_cast<double>(model.hidden_size) * dtype_b /
                             (setup.sequence_parallel ? tp : 1);
    const double moved = 2 * layers_here * per_layer * accum / pcie;
    offload += std::max(0.0, moved - compute);
  }
  t.offload_s = offload;

  // FSDP prefetch and DDP bucketing overlap data-parallel traffic with
  // compute; tensor-parallel and offload traffic are exposed.
  t.step_s = std::max(compute, dp_comm) + tp_comm + offload;
  t.comm_bound = t.comm_s > compute;
  t.no_nvlink = gpu.nvlink_gb_s <= 0 && setup.total_gpus() > 1 &&
                (tp > 1 || pp > 1 || dp > 1);
  return t;
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
  const std::int64_t layers = all_layers(model);
  t.tokens_per_step = batch * replicas;

  // Decode: each step computes 2·N per token plus attention over the cached
  // context; the stages of a pipeline run one after the other for a token.
  const double n = matmul_params_per_token(model, params);
  const double per_token = 2 * n + attention_flops_per_token(model, seq);
  t.flops_per_step = per_token * t.tokens_per_step;
  t.compute_s = per_token * batch / tp / (peak_flops(gpu, setup) * k_mfu);

  // Memory-bound decode: every step reads all weights (split by tp) and each
  // sequence's KV cache at the average context (vLLM paged attention).
  const double kv_per_token =
      static_cast<double>(kv_bytes_per_token(model, setup, 0, layers));
  // MoE: a step reads only the experts its tokens route to; with `batch`
  // tokens each picking k of E, an expert is idle with probability
  // (1 - k/E)^batch. The experts' share of the bytes is their share of the
  // parameters.
  double weights = weight_read_bytes(model, setup);
  if (setup.engine == Engine::hf && setup.quant == Quant::int8) {
    // LLM.int8(): the 16-bit model's time, and then some.
    Resolved sixteen = setup;
    sixteen.quant = Quant::none;
    weights = weight_read_bytes(model, sixteen) * k_llm_int8_slowdown;
  }
  if (model.num_experts > 0 && params.total() > 0) {
    const double share = static_cast<double>(params.experts) /
                         static_cast<double>(params.total());
    const double idle =
        std::pow(1.0 - static_cast<double>(model.experts_per_tok) /
                           static_cast<double>(model.num_experts),
                 batch);
    weights -= weights * share * idle;
  }
  const double read = weights + batch * (seq / 2) * kv_per_token;
  t.memory_s = read / (gb_s(gpu.bandwidth_gb_s) * k_bandwidth_util);

  // Tensor parallel: 2 all-reduces of batch x hidden per layer (attention
  // output and MLP output), latency-bound at decode sizes.
  if (tp > 1) {
    const double tensor = batch * static_cast<double>(model.hidden_size) *
                          dtype_bytes(setup.dtype);
    const double per_reduce =
        k_collective_latency_s +
        2.0 * (tp - 1) / tp * tensor / intra_node_bytes_s(gpu);
    t.comm_s += 2 * static_cast<double>(layers) * per_reduce;
  }
  if (pp > 1) {
    const double link =
        setup.nodes > 1 ? inter_node_bytes_s(gpu) : intra_node_bytes_s(gpu);
    t.comm_s += (pp - 1) * (k_collective_latency_s +
                            batch * static_cast<double>(model.hidden_size) *
                                dtype_bytes(setup.dtype) / link);
  }
  // Offloaded weights (accelerate device_map with CPU, vLLM --cpu-offload-gb)
  // cross PCIe on every step.
  if (setup.offload == Offload::params || setup.offload == Offload::all) {
    t.offload_s = weight_read_bytes(model, setup) / gb_s(gpu.pcie_gb_s);
  }
  const bool graphs = setup.engine == Engine::vllm && !setup.enforce_eager;
  const double launch = static_cast<double>(layers) *
                        (graphs ? k_graph_layer_s : k_eager_layer_s);
  t.step_s =
      std::max({t.compute_s, t.memory_s, launch}) + t.comm_s + t.offload_s;
  t.comm_bound = t.comm_s > std::max(t.compute_s, t.memory_s);
  t.no_nvlink = gpu.nvlink_gb_s <= 0 && (tp > 1 || pp > 1);
  return t;
}

StepTime finish(StepTime t, const Resolved& setup) {
  if (t.step_s > 0) {
    t.tokens_per_s = t.tokens_per_step / t.step_s;
  }
  if (setup.price && t.tokens_per_s > 0) {
    // USD per GPU-hour x GPUs / tokens per hour, per million tokens.
    t.usd_per_mtok =
        *setup.price * setup.total_gpus() / (t.tokens_per_s * 3600.0) * 1e6;
  }
  return t;
}

}  // namespace

StepTime estimate_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup) {
  const ParamCounts params = count_params(model);
  return finish(setup.training()
                    ? training_time(model, gpu, setup, params)
                    : inference_time(model, gpu, setup, params, setup.batch),
                setup);
}

StepTime estimate_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup, const Budget& budget) {
  if (setup.training()) {
    return estimate_time(model, gpu, setup);
  }
  std::int64_t cap = setup.batch;
  if (budget.vllm && budget.vllm->kv_tokens > 0 && setup.seq > 0) {
    // vLLM schedules only as many sequences as their KV blocks fit.
    cap = std::max<std::int64_t>(1, budget.vllm->kv_tokens / setup.seq);
  }
  return finish(inference_time(model, gpu, setup, count_params(model), cap),
                setup);
}

}  // namespace oomplan
