// Training memory (full fine-tuning, LoRA, QLoRA) for the most loaded GPU.
//
// The model is a timeline of one optimizer step, per GPU:
//   forward         weights + optimizer states (+ gradients that persist:
//                   earlier micro-batches', flat framework buffers) + stored
//                   activations, plus either one layer's working set (inside
//                   the layers) or the logits (after them);
//   backward        at its start the logits' loss gradients (and, chunked,
//                   the output projection's weight gradient) join the stored
//                   activations; then the top layer is recomputed (full
//                   checkpointing); at its end the full gradient buffer
//                   exists and activations are gone (gradients grow linearly
//                   as activations are freed, so the maximum is at an end);
//   optimizer_step  weights + states + gradients + the optimizer's
//                   temporaries (DeepSpeed's fp32 gradient partition, 8-bit
//                   AdamW's dequantized states of one parameter).
// The peak is the largest moment; the components describe it and sum to the
// total. This file composes the moments from the terms of train_states.cpp
// (weights, gradients, optimizer states), train_activations.cpp,
// train_loss.cpp and buffers.cpp. Frameworks differ in what persists; each
// term names the one it follows (DeepSpeed, Megatron, torchtune, PEFT,
// PyTorch FSDP/DDP).
//
// Invariants: no heap allocation unless pp > 1 (stages); every formula names
// its source; byte counts are rounded once per component.

#include "memory/internal.hpp"

#include "oomplan/model/capability.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace oomplan::memory_terms {
namespace {

// Everything one GPU holds, by component, at one phase.
struct Parts {
  double weights = 0;
  double reference = 0;  // DPO/KTO's frozen reference model
  double activations = 0;
  double logits = 0;
  double gradients = 0;
  double optimizer = 0;  // allocated optimizer states and temporaries
  double buffers = 0;    // ZeRO/FSDP gathered layers, DDP buckets, QLoRA
                         // dequantized weight
  double allocated() const {
    return weights + reference + activations + logits + gradients + optimizer +
           buffers;
  }
};

// The timeline's moments in step order; train_stage fills one Parts each.
struct MomentInfo {
  std::string_view name;
  Phase phase;
};
constexpr std::array<MomentInfo, k_max_moments> k_moments = {{
    {"inside a layer", Phase::forward},
    {"logits", Phase::forward},
    {"loss gradients", Phase::backward},
    {"top layer", Phase::backward},
    {"bottom layer", Phase::backward},
    {"update", Phase::optimizer_step},
}};

// The terms one stage's timeline is made of, in bytes on one GPU.
struct StageTerms {
  double weights = 0;    // resident on the GPU
  double reference = 0;  // DPO/KTO's frozen reference model on the GPU
  double optimizer = 0;  // states allocated by PyTorch (not paged)
  double grad_kept = 0;  // gradients alive before backward starts
  double grad_step = 0;  // gradients alive at the end of backward
  double head_grad = 0;  // the output projection's gradient
  // Gradient memory alive through the whole step: DDP's bucket copies, a
  // gradient no optimizer frees (LitGPT's StableEmbedding).
  double lasting_grads = 0;
  double opt_temp = 0;    // 8-bit AdamW's dequantized states of one param
  double fp32_grads = 0;  // DeepSpeed's fp32 gradient partition at the step
  StageActivations acts;
  LogitBytes logits;
  double ref_logits = 0;  // DPO/KTO reference forward's logits (forward end)
  double kv_cache = 0;    // transformers' training KV cache (forward end)
  double buffers = 0;     // ZeRO/FSDP gathers and buckets
  double dequant = 0;     // QLoRA's dequantized weight
  double head_cast = 0;   // the fp32 lm_head's 16-bit cast (kbit)
  AutocastCopies cast;    // amp's 16-bit weight copies
  double held = 0;        // reserved, not allocated: FSDP1 record_stream
  double paged = 0;       // paged optimizer states (unified memory)
  double host = 0;        // CPU RAM this GPU's offload needs
};

StageTerms stage_terms(const Model& model, const Resolved& setup,
                       const TrainLayout& at) {
  const TrainWeights w = trained_weights(model, setup, at);
  const double g_elem = gradient_element_bytes(setup, w);
  const double g_params = gradient_params(setup, at, w);
  const Placed grads = stage_gradients(setup, g_params, g_elem, at.dp);
  const Placed states = optimizer_states(model, setup, w.trainable, at.dp);
  const double largest = largest_trainable_param(model, setup, at);
  const ShardingBuffers sharding = sharding_buffers(model, setup, at, g_elem);
  StageTerms x;
  x.weights = w.gpu;
  const ReferenceWeights ref = reference_weights(setup, at);
  x.reference = ref.gpu;
  x.optimizer = states.gpu;
  x.grad_kept = kept_gradient_bytes(
      setup, accumulated_gradient_bytes(setup, g_params, g_elem, grads.gpu));
  x.grad_step = step_gradient_bytes(setup, grads.gpu, largest, g_elem);
  x.head_grad = output_projection_gradient_bytes(setup, at, grads.gpu, g_elem);
  x.lasting_grads = ddp_bucket_copy_bytes(setup, at.dp, grads.gpu) +
                    stable_embedding_grad_bytes(setup, at);
  x.opt_temp = adamw_8bit_dequant_bytes(setup, largest);
  x.fp32_grads = deepspeed_fp32_grad_bytes(setup, w.trainable, at.dp);
  x.acts = stage_activations(model, setup, at);
  x.kv_cache = training_kv_cache_bytes(model, setup, at);
  if (at.last) {
    const Dims dm = train_dims(model, setup);
    x.logits = logit_bytes(model, setup, dm);
    x.ref_logits = reference_logit_bytes(model, setup, dm);
  }
  x.buffers = sharding.bytes;
  x.dequant = nf4_dequant_bytes(model, setup);
  x.head_cast = kbit_head_cast_bytes(setup, at);
  x.cast = autocast_weight_copies(model, setup, at);
  x.held = sharding.held;
  x.paged = states.paged;
  x.host = w.host + ref.host + grads.host + states.host + x.acts.host;
  return x;
}

// Policies that keep only some layers' inputs: a layer's autocast copies are
// made again when it is recomputed.
bool checkpoints_layers(const Resolved& setup) {
  return setup.checkpointing != Checkpointing::none &&
         setup.checkpointing != Checkpointing::selective;
}

// The forward's last moment: every stored activation and the logits.
Parts forward_end(const Resolved& setup, const StageTerms& x) {
  const bool full = setup.mode == Mode::full;
  Parts p;
  p.weights = x.weights;
  p.reference = x.reference;
  p.optimizer = x.optimizer;
  p.gradients = x.grad_kept + x.lasting_grads;
  p.activations = x.acts.stored + x.kv_cache;
  p.logits = x.logits.fwd + x.ref_logits;
  p.buffers = x.buffers + x.dequant;
  p.buffers += x.head_cast;
  // Checkpointed layers recompute their copies; the head's stay saved.
  p.buffers += (!checkpoints_layers(setup) || full) ? x.cast.all : x.cast.head;
  return p;
}

// Inside the layers, before any logits exist: under full checkpointing a
// layer's forward saves nothing, only its working set lives while it runs
// (and is freed before the output projection).
Parts inside_layer(const Resolved& setup, const StageTerms& x,
                   const Parts& fwd) {
  Parts p = fwd;
  p.buffers -= x.head_cast;
  if (checkpoints_layers(setup) && setup.mode != Mode::full) {
    p.buffers += x.cast.layer - x.cast.head;
  }
  p.logits = 0;
  p.activations =
      x.acts.stored + (recomputes_layers(setup) ? x.acts.backward_layer : 0.0);
  return p;
}

// Backward's start: the loss gradients over the logits. The output
// projection's weight gradient, optimizer-in-backward or not: autograd sums a
// parameter's gradient over all its uses before its accumulate hook fires
// (torch/csrc/autograd/engine.cpp InputBuffer;
// register_post_accumulate_grad_hook). Chunked CE runs the projection's
// backward chunk by chunk, so its gradient grows while the later chunks'
// logits are still held; the whole-sequence loss finishes its backward
// (freeing the fp32 terms) before the projection's runs.
Parts loss_gradients(const Resolved& setup, const StageTerms& x,
                     const Parts& fwd) {
  Parts p = fwd;
  p.activations = x.acts.stored;
  p.logits = x.logits.bwd;
  if (checkpoints_layers(setup) && setup.mode == Mode::full) {
    p.buffers -= x.cast.all;  // the autocast cache is cleared
  }
  const bool chunked = setup.loss == Loss::chunked;
  p.gradients =
      std::max(x.grad_kept, chunked ? x.head_grad : 0.0) + x.lasting_grads;
  return p;
}

// The first layer backward meets: every stored input still there, the top
// layer recomputed, the logits' gradients already consumed, the head's
// gradient formed. With tied embeddings the same parameter is used again at
// the bottom, so under optimizer-in-backward its gradient waits there for the
// embedding's contribution; an untied head has stepped and freed its
// gradient.
Parts top_layer(const Resolved& setup, const TrainLayout& at,
                const StageTerms& x, const Parts& fwd) {
  const bool full = setup.mode == Mode::full;
  Parts p = fwd;
  // The head's backward is done: its copies are freed.
  p.buffers -= x.head_cast + (full ? 0.0 : x.cast.head);
  if (checkpoints_layers(setup)) {
    p.buffers += x.cast.layer - (full ? x.cast.all : 0.0);
  }
  p.logits = 0;
  const bool tied = at.head == 0 && at.pp == 1;
  p.gradients = (setup.optimizer_in_bwd && !tied)
                    ? std::max(x.grad_kept, x.grad_step) + x.lasting_grads
                    : std::max(x.grad_kept, x.head_grad) + x.lasting_grads;
  p.activations = x.acts.stored + x.acts.recompute + x.acts.backward_layer;
  return p;
}

// Backward's end: the full gradient buffer exists. The bottom layer's
// activations (saved or recomputed) live until its own backward is done.
Parts bottom_layer(const Resolved& setup, const StageTerms& x,
                   const Parts& fwd) {
  const bool full = setup.mode == Mode::full;
  Parts p = fwd;
  p.buffers -=
      x.head_cast +
      ((!checkpoints_layers(setup) || full) ? x.cast.all : x.cast.head);
  p.buffers += x.cast.layer;
  p.logits = 0;
  p.gradients = x.grad_step + x.lasting_grads;
  p.activations = x.acts.largest_layer + x.acts.backward_layer;
  if (setup.optimizer_in_bwd) {
    p.optimizer += x.opt_temp;
  }
  return p;
}

// The optimizer step: weights, states, gradients and the optimizer's
// temporaries.
Parts update(const Resolved& setup, const StageTerms& x, const Parts& fwd) {
  Parts p = fwd;
  p.optimizer += setup.optimizer_in_bwd ? 0.0 : x.opt_temp;
  p.activations = 0;
  p.logits = 0;
  p.buffers = 0;
  p.gradients = x.grad_step + x.lasting_grads;
  p.gradients += x.fp32_grads;
  return p;
}

struct StageResult {
  Parts peak;
  Phase phase = Phase::forward;
  std::array<Parts, k_max_moments> moments{};  // in k_moments order
  double paged = 0;    // paged optimizer states (unified memory)
  double held = 0;     // reserved, not allocated: FSDP1 record_stream blocks
  double host = 0;     // CPU RAM this GPU's offload needs
  double weights = 0;  // for the stages table
  double activations = 0;
  std::int64_t layers = 0;
};

// The training timeline of one pipeline stage on one GPU: load, forward
// (inside a layer, then the logits), loss, backward (top layer, bottom
// layer), optimizer step; the peak is the largest moment.
StageResult train_stage(const Model& model, const Resolved& setup,
                        const ParamCounts& counts, int stage) {
  const TrainLayout at = train_layout(model, setup, counts, stage);
  const StageTerms x = stage_terms(model, setup, at);
  const Parts fwd = forward_end(setup, x);
  StageResult out;
  out.moments = {inside_layer(setup, x, fwd),   fwd,
                 loss_gradients(setup, x, fwd), top_layer(setup, at, x, fwd),
                 bottom_layer(setup, x, fwd),   update(setup, x, fwd)};
  std::size_t best = 0;
  for (std::size_t i = 1; i < k_max_moments; ++i) {
    if (out.moments[i].allocated() > out.moments[best].allocated()) {
      best = i;
    }
  }
  out.peak = out.moments[best];
  out.phase = k_moments[best].phase;
  out.paged = x.paged;
  out.held = x.held;
  out.host = x.host;
  out.weights = x.weights;
  out.activations = x.acts.stored + x.acts.recompute;
  out.layers = at.end - at.begin;
  return out;
}

// The most loaded stage and the CPU RAM one GPU of each stage needs.
struct WorstStage {
  StageResult result;
  int stage = 0;
  std::vector<double> stage_host;  // pp > 1 only (no allocation otherwise)
};

// Every stage's timeline; the most loaded decides the plan, and every stage
// is listed in `budget` when pp > 1.
WorstStage most_loaded_stage(const Model& model, const Resolved& setup,
                             double reserve, Bytes overhead, Budget& budget) {
  const ParamCounts counts = count_params(model);
  WorstStage worst;
  double worst_total = -1;
  for (int s = 0; s < setup.pp; ++s) {
    const StageResult r = train_stage(model, setup, counts, s);
    // A stage's device total, as total_bytes counts it (paged states before
    // any spill to the host).
    const double device = r.peak.allocated() * (1.0 + reserve) + r.held +
                          static_cast<double>(overhead);
    const double total = device + r.paged;
    if (setup.pp > 1) {
      // Offloaded bytes plus the paged states that do not fit next to the
      // stage's allocations.
      const double room =
          std::max(0.0, static_cast<double>(budget.usable_bytes) - device);
      worst.stage_host.push_back(r.host + std::max(0.0, r.paged - room));
      budget.stages.push_back(
          Stage{.stage = s,
                .layers = r.layers,
                .weights_bytes = saturated_bytes(r.weights),
                .kv_cache_bytes = 0,
                .activations_bytes = saturated_bytes(r.activations),
                .total_bytes = saturated_bytes(total)});
    }
    if (total > worst_total) {
      worst_total = total;
      worst.result = r;
      worst.stage = s;
    }
  }
  return worst;
}

// A moment's tensors, each part rounded as the components are.
Bytes rounded_allocated(const Parts& p) {
  return saturated_bytes(p.weights) + saturated_bytes(p.reference) +
         saturated_bytes(p.activations) + saturated_bytes(p.logits) +
         saturated_bytes(p.gradients) + saturated_bytes(p.optimizer) +
         saturated_bytes(p.buffers);
}

// The step's timeline, each moment rounded per part as the components are,
// so the peak moment's device bytes equal total_bytes().
void add_moments(Budget& budget, const StageResult& worst, double reserve,
                 Bytes beyond_reserve) {
  for (std::size_t i = 0; i < k_max_moments; ++i) {
    const Bytes allocated = rounded_allocated(worst.moments[i]);
    const Bytes device = allocated +
                         allocator_reserve_bytes(reserve, allocated) +
                         beyond_reserve;
    budget.moments[i] =
        Moment{k_moments[i].name, k_moments[i].phase, allocated, device};
  }
  budget.moment_count = k_max_moments;
}

void add_training_components(Budget& budget, const Resolved& setup,
                             const Parts& p, Bytes optimizer_paged,
                             Bytes overhead, Bytes held, Bytes fragmentation) {
  budget.add("weights", saturated_bytes(p.weights), weights_formula(setup));
  if (const Bytes ref = saturated_bytes(p.reference); ref > 0) {
    budget.add("reference_weights", ref, reference_formula(setup));
  }
  budget.add("activations", saturated_bytes(p.activations),
             activations_formula(setup));
  budget.add("logits", saturated_bytes(p.logits), logits_formula(setup));
  budget.add("gradients", saturated_bytes(p.gradients),
             gradients_formula(setup));
  budget.add("optimizer", saturated_bytes(p.optimizer) + optimizer_paged,
             optimizer_formula(setup));
  if (const Bytes buffers = saturated_bytes(p.buffers); buffers > 0) {
    budget.add("buffers", buffers, buffers_formula(setup));
  }
  budget.add("overhead", overhead, "CUDA context + cuBLAS workspace + NCCL");
  budget.add("fragmentation", fragmentation,
             held > 0 ? "allocated x caching-allocator reserve + FSDP1 blocks "
                        "held by record_stream (an all-gather output, a unit's "
                        "gradient)"
                      : "allocated x caching-allocator reserve");
}

// The CPU RAM one node needs: every GPU's offload (and spilled paged
// states), by node when pipeline stages differ.
Bytes training_host_bytes(const Resolved& setup, WorstStage& worst,
                          Bytes paged_host) {
  const double worst_host = worst.result.host + static_cast<double>(paged_host);
  if (setup.pp > 1) {
    worst.stage_host[static_cast<std::size_t>(worst.stage)] = worst_host;
    return saturated_bytes(
        node_host_bytes(worst.stage_host, setup.gpus, setup.nodes));
  }
  return saturated_bytes(worst_host * setup.gpus);
}

// Conditions the report explains (the same tests as inference, plus sharded
// data parallelism over PCIe).
unsigned training_warnings(const Model& model, const Gpu& gpu,
                           const Resolved& setup) {
  unsigned warnings = 0;
  if (setup.attn == Attn::eager) {
    warnings |= static_cast<unsigned>(Warning::eager_attention_s2);
  }
  if (model.max_position_embeddings > 0 &&
      setup.seq > model.max_position_embeddings) {
    warnings |= static_cast<unsigned>(Warning::seq_beyond_context);
  }
  const bool sharded_dp = setup.dp() > 1 && setup.zero >= 1;
  if ((setup.tp > 1 || setup.pp > 1 || sharded_dp) && gpu.nvlink_gb_s <= 0) {
    warnings |= static_cast<unsigned>(Warning::no_nvlink);
  }
  if (model.checkpoint_quant == Quant::mxfp4 && setup.quant == Quant::none) {
    warnings |= static_cast<unsigned>(Warning::mxfp4_dequantized);
  }
  if (setup.attn == Attn::flash && !runs_flash_attention(gpu)) {
    warnings |= static_cast<unsigned>(Warning::flash_unsupported);
  }
  return warnings;
}

}  // namespace

void add_training(const Model& model, const Gpu& gpu, const Resolved& setup,
                  Budget& budget) {
  const double reserve = training_reserve(setup);
  const Bytes overhead = runtime_overhead_bytes(gpu, setup);
  WorstStage worst = most_loaded_stage(model, setup, reserve, overhead, budget);
  const Parts& p = worst.result.peak;
  const Bytes allocated = rounded_allocated(p);
  const Bytes held = saturated_bytes(worst.result.held);
  const Bytes fragmentation =
      allocator_reserve_bytes(reserve, allocated) + held;

  PagedSplit paged{.device = saturated_bytes(worst.result.paged), .host = 0};
  if (paged.device > 0) {
    budget.warnings |= static_cast<unsigned>(Warning::paged_unified_memory);
    paged = paged_state_split(
        paged.device, std::max<Bytes>(0, budget.usable_bytes - allocated -
                                             fragmentation - overhead));
  }
  add_moments(budget, worst.result, reserve, held + overhead + paged.device);
  add_training_components(budget, setup, p, paged.device, overhead, held,
                          fragmentation);
  budget.host_bytes = training_host_bytes(setup, worst, paged.host);
  if (budget.host_bytes > 0) {
    budget.warnings |= static_cast<unsigned>(Warning::host_memory);
  }
  budget.warnings |= training_warnings(model, gpu, setup);
  budget.peak.allocated_bytes = allocated;
  budget.peak.reserved_bytes = allocated + fragmentation;
  budget.peak.device_bytes = budget.total_bytes();
  budget.peak.phase = worst.result.phase;
}

}  // namespace oomplan::memory_terms
