// The time of one training step (one optimizer step over the global batch):
// compute at the stated MFU with the pipeline bubble, tensor- and
// data-parallel collectives, and offload traffic over PCIe.

#include "time/internal.hpp"

#include <algorithm>

namespace oomplan::time_terms {
namespace {

// DeepSpeed CPU-Adam (AVX, multi-threaded; Ren et al. 2021, ZeRO-Offload
// §4.2): parameters updated per second per node. An assumed order of magnitude
// for a current multi-core server, stated in docs/time.md, not a measurement.
constexpr double k_cpu_adam_params_per_s = 2e9;
// bitsandbytes 4-bit matmuls dequantize the weight on every forward and
// backward: QLoRA steps run about 30 % slower than 16-bit LoRA (QLoRA paper
// §5 and the peft/bnb benchmarks).
constexpr double k_nf4_train_factor = 1.3;

// Tokens of one micro-batch on one data-parallel rank (preference
// objectives: chosen and rejected rows, Resolved::rows_per_example).
double micro_tokens(const Resolved& setup) {
  return static_cast<double>(setup.batch * setup.rows_per_example()) *
         static_cast<double>(setup.seq);
}

}  // namespace

double training_flops_per_token(const Model& model, const Resolved& setup,
                                const ParamCounts& params) {
  // 6·N per token: forward 2N, backward 4N (activation and weight gradients)
  // (Kaplan et al. 2020 §2.1). LoRA skips the frozen weights' gradients: 4N.
  // Full recomputation adds one more forward (+2N, i.e. 8N; Korthikanti et al.
  // 2022 §5); selective recomputes only the attention core.
  const double n = matmul_params_per_token(model, params);
  const double attn =
      attention_flops_per_token(model, static_cast<double>(setup.seq));
  const bool full = setup.mode == Mode::full;
  double per_token = (full ? 6 : 4) * n + 3 * attn;
  if (setup.checkpointing == Checkpointing::full) {
    per_token += 2 * n + attn;
  } else if (setup.checkpointing == Checkpointing::selective) {
    per_token += attn;
  }
  // DPO/KTO: the reference model's forward over the same rows, under
  // no_grad (TRL compute_ref_log_probs; a PEFT policy runs it with its
  // adapters disabled): one more forward, 2N plus the attention core.
  if (setup.runs_reference_forward()) {
    per_token += 2 * n + attn;
  }
  return per_token;
}

double training_compute_s(const Gpu& gpu, const Resolved& setup,
                          double flops_per_step) {
  const int pp = std::max(setup.pp, 1);
  const int accum = std::max(setup.grad_accum, 1);
  const int gpus = setup.total_gpus();
  double compute = flops_per_step / gpus / (peak_flops(gpu, setup) * k_mfu);
  if (quant_bits(setup.quant) == 4 && setup.mode != Mode::full) {
    compute *= k_nf4_train_factor;
  }
  // 1F1B pipeline bubble: (pp - 1) idle slots per `accum` micro-batches
  // (Narayanan et al. 2021, §2.2).
  compute *= 1 + static_cast<double>(pp - 1) / accum;
  return compute;
}

double training_tp_comm_s(const Model& model, const Gpu& gpu,
                          const Resolved& setup) {
  // Tensor parallel: 2 all-reduces of b·s·h per layer forward and 2 backward
  // (Megatron-LM, Shoeybi et al. 2019 §3), 2 more when recomputing; a ring
  // all-reduce sends 2 (n - 1) / n of the tensor per GPU. On the critical path.
  const int tp = setup.tp;
  if (tp <= 1) {
    return 0;
  }
  const int pp = std::max(setup.pp, 1);
  const int accum = std::max(setup.grad_accum, 1);
  const double layers_here = static_cast<double>(all_layers(model)) / pp;
  const double reduces = setup.checkpointing == Checkpointing::full ? 6.0 : 4.0;
  const double tensor = micro_tokens(setup) *
                        static_cast<double>(model.hidden_size) *
                        dtype_bytes(setup.dtype);
  return layers_here * reduces * 2.0 * (tp - 1) / tp * tensor /
         intra_node_bytes_s(gpu) * accum;
}

double training_dp_comm_s(const Model& model, const Gpu& gpu,
                          const Resolved& setup, const ParamCounts& params) {
  // Data parallel: gradients all-reduced once per optimizer step (ZeRO-1/2
  // reduce-scatter + all-gather move the same volume); ZeRO-3/FSDP all-gathers
  // the weights in forward and again in backward and reduce-scatters the
  // gradients, every micro-batch (Rajbhandari et al. 2020, §7: 1.5x DP volume).
  const int dp = std::max(setup.dp(), 1);
  if (dp <= 1) {
    return 0;
  }
  const int tp = setup.tp;
  const int pp = std::max(setup.pp, 1);
  const int accum = std::max(setup.grad_accum, 1);
  const double dtype_b = dtype_bytes(setup.dtype);
  const double dp_link =
      setup.nodes > 1 ? inter_node_bytes_s(gpu) : intra_node_bytes_s(gpu);
  const double weights = weight_read_bytes(model, setup) / pp;
  const double grads =
      trainable_params(model, setup, params) / (tp * pp) * dtype_b;
  const double ring = static_cast<double>(dp - 1) / dp;
  if (setup.zero >= 3) {
    // Under no_sync the gradients are reduce-scattered once per step.
    const int reductions = setup.fsdp_no_sync ? 1 : accum;
    return (2 * ring * weights * accum + ring * grads * reductions) / dp_link;
  }
  return 2 * ring * grads / dp_link;
}

// Offload traffic over each GPU's PCIe link (ZeRO-Offload / ZeRO-Infinity):
// optimizer offload sends the gradient shard down and the updated 16-bit
// weights back once per step and runs Adam on the CPU; parameter offload
// fetches the weight shard for forward and backward every micro-batch.
double optimizer_offload_s(const Model& model, const Gpu& gpu,
                           const Resolved& setup, const ParamCounts& params) {
  if (setup.offload != Offload::optimizer && setup.offload != Offload::all) {
    return 0;
  }
  const int tp = setup.tp;
  const int pp = std::max(setup.pp, 1);
  const int dp = std::max(setup.dp(), 1);
  const double shard = setup.zero >= 1 ? dp : 1;
  const double state_params =
      trainable_params(model, setup, params) / (tp * pp) / shard;
  double offload =
      state_params * dtype_bytes(setup.dtype) / gb_s(gpu.pcie_gb_s);
  offload += state_params * setup.gpus / k_cpu_adam_params_per_s;
  return offload;
}

double param_offload_s(const Model& model, const Gpu& gpu,
                       const Resolved& setup) {
  if (setup.offload != Offload::params && setup.offload != Offload::all) {
    return 0;
  }
  const int pp = std::max(setup.pp, 1);
  const int dp = std::max(setup.dp(), 1);
  const int accum = std::max(setup.grad_accum, 1);
  const double weights = weight_read_bytes(model, setup) / pp;
  const double fetched = setup.zero >= 3 ? weights / dp : weights;
  return 2 * fetched / gb_s(gpu.pcie_gb_s) * accum;
}

double activation_offload_s(const Model& model, const Gpu& gpu,
                            const Resolved& setup, double compute_s) {
  if (!setup.activation_offload) {
    return 0;
  }
  // Activation offload (torchtune): each layer's saved input goes to the host
  // and back, overlapped with compute on a side stream; only the excess shows.
  const int tp = setup.tp;
  const int pp = std::max(setup.pp, 1);
  const int accum = std::max(setup.grad_accum, 1);
  const double layers_here = static_cast<double>(all_layers(model)) / pp;
  const double per_layer =
      micro_tokens(setup) * static_cast<double>(model.hidden_size) *
      dtype_bytes(setup.dtype) / (setup.sequence_parallel ? tp : 1);
  const double moved =
      2 * layers_here * per_layer * accum / gb_s(gpu.pcie_gb_s);
  return std::max(0.0, moved - compute_s);
}

StepTime training_time(const Model& model, const Gpu& gpu,
                       const Resolved& setup, const ParamCounts& params) {
  StepTime t;
  const int dp = std::max(setup.dp(), 1);
  const int accum = std::max(setup.grad_accum, 1);
  t.tokens_per_step = micro_tokens(setup) * dp * accum;
  t.flops_per_step =
      training_flops_per_token(model, setup, params) * t.tokens_per_step;
  const double compute = training_compute_s(gpu, setup, t.flops_per_step);
  t.compute_s = compute;
  const double tp_comm = training_tp_comm_s(model, gpu, setup);
  const double dp_comm = training_dp_comm_s(model, gpu, setup, params);
  t.comm_s = tp_comm + dp_comm;
  double offload = 0;
  offload += optimizer_offload_s(model, gpu, setup, params);
  offload += param_offload_s(model, gpu, setup);
  offload += activation_offload_s(model, gpu, setup, compute);
  t.offload_s = offload;
  // FSDP prefetch and DDP bucketing overlap data-parallel traffic with
  // compute; tensor-parallel and offload traffic are exposed.
  t.step_s = std::max(compute, dp_comm) + tp_comm + offload;
  t.comm_bound = t.comm_s > compute;
  t.no_nvlink = gpu.nvlink_gb_s <= 0 && setup.total_gpus() > 1 &&
                (setup.tp > 1 || setup.pp > 1 || dp > 1);
  return t;
}

}  // namespace oomplan::time_terms
