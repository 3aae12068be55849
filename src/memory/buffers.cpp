// Transient and communication buffers of training: what ZeRO-3 / FSDP
// gather (a layer being computed, one prefetched, their unsharded gradients)
// and what FSDP1's record_stream keeps reserved, ZeRO-1/2 reduce buckets,
// DDP's bucket copies, QLoRA's dequantized weight and autocast's 16-bit
// weight copies.

#include "memory/internal.hpp"

#include <algorithm>
#include <cmath>

namespace oomplan::memory_terms {
namespace {

// FSDP1's rate limiter (limit_all_gathers=True: the default since torch 2.1,
// False in the torch 1.13-2.0 FullyShardedDataParallel signature):
// at most two unsharded flat parameters whose free is still pending on the
// compute stream (torch/distributed/fsdp/_limiter_utils.py _FreeEventQueue
// _max_num_inflight_all_gathers = 2; _runtime_utils.py _unshard
// dequeue_if_needed + event.synchronize() before the next all-gather).
constexpr double k_fsdp1_inflight_all_gathers = 2.0;

}  // namespace

FsdpOneUnits fsdp1_units(double params, double dp, double bytes) {
  FsdpOneUnits u;
  // One FlatParameter per wrapped unit, padded to a multiple of the world
  // size (torch/distributed/fsdp/_flat_param.py FlatParamHandle._get_shard:
  // chunk(world_size), numel_to_pad = world_size * chunk - numel).
  const double padded = std::ceil(params / dp) * dp;
  u.unsharded_bytes = padded * bytes;
  u.grad_bytes = params * bytes;
  u.grad_pad_copy_bytes = padded > params ? padded * bytes : 0.0;
  u.grad_shard_bytes = padded / dp * bytes;
  // record_stream keeps a freed block out of reuse until the stream it was
  // recorded on passes that point (CUDACachingAllocator free: insert_events;
  // allocated_bytes drops at once, reserved does not). Of the frees the rate
  // limiter lets pend, the oldest is synchronized before the next
  // all-gather allocates and serves it; the others stay held.
  u.held_param_bytes = (k_fsdp1_inflight_all_gathers - 1.0) * u.unsharded_bytes;
  // The reduce-scatter of a unit's gradient overlaps the next unit's backward
  // on the compute stream, so that gradient's block is not reusable then.
  u.held_grad_bytes = u.grad_bytes;
  return u;
}

double gathered_layer_bytes(const Model& model, const Resolved& setup,
                            const TrainLayout& at) {
  // One decoder layer unsharded by ZeRO-3 / FSDP, as split by TP. Frozen
  // bases gather in their stored format.
  if (setup.mode == Mode::full) {
    return at.largest_layer / at.t * at.d;
  }
  const WeightShare one{.layer_begin = at.begin,
                        .layer_end = at.begin + 1,
                        .embedding = false,
                        .lm_head = false};
  return as_double(weight_bytes(model, setup, one));
}

double fsdp_root_unit_bytes(const TrainLayout& at) {
  // The root unit (embedding, final norm and lm_head under a transformer-layer
  // wrap: accelerate TRANSFORMER_BASED_WRAP, torchtune 0.1's decoder-layer
  // policy) stays unsharded from forward through backward
  // (torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard frees
  // only `not state._is_root`).
  return at.vocab_params() * at.d / at.t;
}

double fsdp1_gradient_buffers(const FsdpOneUnits& u) {
  // The unit's unsharded flat gradient, the padded copy the reduce-scatter
  // takes when the unit does not divide by the world size and its sharded
  // output (_runtime_utils.py _post_backward_hook: F.pad(unsharded_grad,
  // [0, numel_to_pad]), new_sharded_grad).
  return u.grad_bytes + u.grad_pad_copy_bytes + u.grad_shard_bytes;
}

ShardingBuffers fsdp1_buffers(const Resolved& setup, const TrainLayout& at,
                              double layer_w) {
  const bool full = setup.mode == Mode::full;
  // Frozen grads: the adapters' units get whole-unit gradients, as in full.
  const bool unit_grads = full || setup.fsdp_frozen_grads;
  const FsdpOneUnits u = fsdp1_units(at.largest_layer / at.t, at.dp, at.d);
  ShardingBuffers b;
  b.layer = full ? u.unsharded_bytes : layer_w;
  // The unit computing and the one prefetched (BACKWARD_PRE, the default
  // backward_prefetch) are unsharded next to the root unit.
  b.bytes = 2.0 * b.layer + fsdp_root_unit_bytes(at);
  if (unit_grads) {
    b.bytes += fsdp1_gradient_buffers(u);
  }
  // Blocks the caching allocator holds for a stream after their free:
  // all-gather outputs freed with record_stream on the compute stream
  // (_flat_param.py _free_unsharded_flat_param), and the gradient handed to
  // the post_backward stream (_post_backward_hook
  // _no_dispatch_record_stream(autograd_computed_grad)).
  b.held = u.held_param_bytes + (unit_grads ? u.held_grad_bytes : 0.0);
  return b;
}

double vocab_unit_bytes(const TrainLayout& at) {
  // Embedding and lm_head are gathered as units of their own (torchtune's
  // custom_sharded_layers, DeepSpeed's per-module fetch): a large vocabulary
  // can make them the largest unit. FSDP keeps the root unit unsharded
  // between forward and backward, which is why recipes wrap them separately;
  // HF accelerate's transformer-layer wrap instead keeps them gathered
  // (2 x vocab x hidden x 2 B more).
  return std::max(at.first ? at.embed : 0.0, at.last ? at.head : 0.0) * at.d /
         at.t;
}

double zero3_gather_bytes(const Resolved& setup, const TrainLayout& at,
                          double layer_w) {
  // ZeRO-3 / FSDP2 gather the layer being computed and prefetch the next
  // (FSDP BACKWARD_PRE, DeepSpeed prefetch bucket), and hold one layer of
  // unsharded gradients before reduce-scatter (the DeepSpeed estimator's
  // 4 B x largest layer). DeepSpeed is modelled at the HF "auto" settings
  // (prefetch bucket 0.9 h^2, reduce bucket h^2); its
  // stage3_max_live_parameters (1e9) can keep more gathered parameters alive
  // when layers are reused.
  const double grads =
      setup.mode == Mode::full ? at.largest_layer / at.t * at.d : 0.0;
  return std::max(2.0 * layer_w, layer_w + vocab_unit_bytes(at)) + grads;
}

double fsdp_offload_copy_bytes(double layer_w, double dp) {
  // CPU offload keeps the shard on the CPU and copies it to the GPU for each
  // all-gather (FSDP1 pre_unshard: FlatParamHandle.flat_param_to or
  // _use_low_precision_shard; FSDP2 FSDPParam.all_gather_inputs:
  // sharded_param_data.to(device)), freed once gathered: one unit's shard at
  // a time.
  return layer_w / dp;
}

double zero12_bucket_bytes(const Model& model, double element_bytes) {
  // DeepSpeed ZeRO-1/2 reduce buckets, double-buffered (contiguous gradients
  // ipg_buffer), at the HF "auto" size hidden^2.
  const double h = as_double(model.hidden_size);
  return 2.0 * h * h * element_bytes;
}

ShardingBuffers sharding_buffers(const Model& model, const Resolved& setup,
                                 const TrainLayout& at, double element_bytes) {
  ShardingBuffers b;
  if (setup.zero >= 3 && at.dp > 1) {
    const double layer_w = gathered_layer_bytes(model, setup, at);
    if (setup.fsdp && setup.fsdp_version == 1) {
      b = fsdp1_buffers(setup, at, layer_w);
    } else {
      b.layer = layer_w;
      b.bytes = zero3_gather_bytes(setup, at, layer_w);
    }
    if (setup.fsdp && offloads_params(setup)) {
      b.bytes += fsdp_offload_copy_bytes(b.layer, at.dp);
    }
  } else if (setup.zero >= 1 && at.dp > 1) {
    b.bytes = zero12_bucket_bytes(model, element_bytes);
  }
  return b;
}

double ddp_bucket_copy_bytes(const Resolved& setup, double dp,
                             double gradients) {
  // DDP's Reducer keeps flat bucket copies of every gradient unless
  // gradient_as_bucket_view=True (the default is False): gradient memory
  // that lives for the whole step. Mixed-precision frameworks reduce from
  // their persistent flat gradient buffer instead (Megatron's grad buffer is
  // its bucket), counted as kept gradients (kept_gradient_bytes).
  return (setup.zero == 0 && dp > 1 && setup.mode == Mode::full &&
          setup.precision != Precision::mixed && !setup.fsdp)
             ? gradients
             : 0.0;
}

double nf4_dequant_bytes(const Model& model, const Resolved& setup) {
  if (setup.mode != Mode::qlora) {
    return 0;
  }
  // QLoRA: each NF4 matmul dequantizes its weight to the dtype first
  // (bitsandbytes dequantize_4bit, torchao linear_nf4): the largest matrix.
  const double inter = std::max(as_double(model.intermediate_size),
                                as_double(model.moe_intermediate_size));
  return as_double(model.hidden_size) * inter *
         static_cast<double>(dtype_bytes(setup.dtype)) / setup.tp;
}

double kbit_head_cast_bytes(const Resolved& setup, const TrainLayout& at) {
  // prepare_model_for_kbit_training leaves an fp32 lm_head: under autocast
  // each call casts its weight to 16 bits (not cached: autocast caches leaf
  // parameters that require grad only) and the matmul saves that copy for
  // the backward of its input.
  return (setup.prepare_kbit && at.last)
             ? (at.head > 0 ? at.head : at.embed) * at.d / at.t
             : 0.0;
}

AutocastCopies autocast_weight_copies(const Model& model, const Resolved& setup,
                                      const TrainLayout& at) {
  // amp: autocast's 16-bit copies of the fp32 weights. Trained weights (full)
  // are cached for the whole autocast region (cached_cast: leaf tensors that
  // require grad; cleared when the region exits after the loss) and saved by
  // each matmul for backward; frozen ones (LoRA) are cast at each call and
  // saved by the matmul while its input needs a gradient. Without
  // checkpointing every layer's copies live from forward into backward; with
  // it the trained copies stay cached to the end of forward and each
  // recomputed layer makes its own. FSDP/ZeRO-3 gather the parameters already
  // in 16 bits (MixedPrecision param_dtype): no copies.
  if (!amp_compute(setup)) {
    return {};
  }
  // Norm weights are not cast (RMSNorm's weight * x is no autocast op).
  // LitGPT runs lm_head once per --lm-head-chunk slice of the sequence
  // (model(input_ids, lm_head_chunk_size=128)): a frozen head is cast afresh
  // at every call and each call's matmul saves its own copy.
  const bool frozen_head = setup.mode != Mode::full;
  const double head_calls =
      frozen_head && setup.lm_head_chunk > 0
          ? std::ceil(as_double(setup.seq) / as_double(setup.lm_head_chunk))
          : 1.0;
  const double head =
      at.last ? (at.head > 0 ? at.head : at.embed) * head_calls : 0.0;
  const double linear = at.layer_params - stage_norm_params(model, at) + head;
  return {.all = linear * at.d / at.t,
          .layer = at.largest_layer * at.d / at.t,
          .head = head * at.d / at.t};
}

std::string_view buffers_formula(const Resolved& setup) {
  if (amp_compute(setup)) {
    return "autocast 16-bit copies of the fp32 weights (amp) + buckets";
  }
  if (setup.prepare_kbit) {
    return "dequantized NF4 weight + 16-bit cast of the fp32 lm_head "
           "(prepare_model_for_kbit_training)";
  }
  return setup.zero >= 3 ? "gathered layer + prefetched layer + unsharded "
                           "layer grads (ZeRO-3/FSDP)"
                         : "communication buckets / dequantized NF4 weight";
}

}  // namespace oomplan::memory_terms
