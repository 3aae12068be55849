// What the card, its links and the model give the time model: peak FLOP/s,
// link bandwidths, weights read, FLOPs per token and trainable parameters.

#include "time/internal.hpp"

#include "oomplan/model/capability.hpp"

#include <algorithm>

namespace oomplan::time_terms {
namespace {

// One 200 Gb/s InfiniBand/EFA rail per GPU between nodes, in GB/s.
constexpr double k_internode_gb_s = 25.0;

}  // namespace

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
  WeightShare all{0, all_layers(model), true, true};
  all.unread = false;
  return static_cast<double>(weight_bytes(model, setup, all));
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

}  // namespace oomplan::time_terms
