// Which layers each GPU holds when a model is split over GPUs: vLLM's
// pipeline split, transformers' device_map="auto", the training frameworks'
// pipeline split with its micro-batches in flight, and the CPU RAM of the
// busiest node when stages offload.

#include "memory/internal.hpp"

#include <algorithm>

namespace oomplan::memory_terms {

WeightShare share_of(const Range& r) {
  return WeightShare{r.begin, r.end, r.first, r.last};
}

// vLLM's pipeline split (vllm/distributed/utils.py get_pp_indices): L / pp
// layers per stage; the remainder goes one each to the stages before the last,
// counting back from the second to last.
Range pp_range(std::int64_t layers, int pp, int stage) {
  std::int64_t begin = 0;
  std::int64_t count = 0;
  const std::int64_t base = layers / pp;
  const std::int64_t rest = layers % pp;
  for (int i = 0; i <= stage; ++i) {
    begin += count;
    count = base;
    // partitions[-k] += 1 for k in 2 .. rest + 1
    const int from_end = pp - i;
    if (from_end >= 2 && from_end <= rest + 1) {
      ++count;
    }
  }
  return Range{begin, begin + count, stage == 0, stage == pp - 1};
}

// transformers device_map="auto" (accelerate get_balanced_memory +
// infer_auto_device_map): each GPU but the last gets a budget of
// model bytes / n plus the largest layer, filled with whole layers in order;
// the last GPU takes the rest and the lm_head.
std::vector<Range> split_ranges(const Model& m, const Resolved& s) {
  const int n = std::max(1, s.gpus);
  const std::int64_t layers = m.num_layers;
  const Bytes total = weight_bytes(m, s, WeightShare{0, layers, true, true});
  // The buffer is the largest layer: the last one is MoE when the first
  // layers are dense (DeepSeek first_k_dense, Llama 4 interleaving).
  const Bytes layer = std::max(
      weight_bytes(m, s, WeightShare{0, 1, false, false}),
      weight_bytes(m, s, WeightShare{layers - 1, layers, false, false}));
  const Bytes first_extra = weight_bytes(m, s, WeightShare{0, 0, true, false});
  const Bytes budget = total / n + layer;
  auto layer_bytes = [&](std::int64_t i) {
    return weight_bytes(m, s, WeightShare{i, i + 1, false, false});
  };
  std::vector<Range> ranges;
  std::int64_t next = 0;
  for (int g = 0; g < n; ++g) {
    Range r{next, next, g == 0, g == n - 1};
    if (g == n - 1) {
      r.end = layers;
    } else {
      Bytes used = g == 0 ? first_extra : 0;
      // Leave at least one layer for each later GPU.
      const std::int64_t limit = layers - (n - 1 - g);
      while (r.end < limit &&
             (r.end == r.begin || used + layer_bytes(r.end) <= budget)) {
        used += layer_bytes(r.end);
        ++r.end;
      }
    }
    next = r.end;
    ranges.push_back(r);
  }
  return ranges;
}

// transformers' device_map="auto" or an even pipeline split.
std::vector<Range> hf_ranges(const Model& m, const Resolved& s) {
  if (s.split_layers) {
    return split_ranges(m, s);
  }
  std::vector<Range> ranges;
  for (int i = 0; i < s.pp; ++i) {
    ranges.push_back(pp_range(m.num_layers, s.pp, i));
  }
  return ranges;
}

// Decoder layers [begin, end) of pipeline stage `stage` (layers split as
// evenly as possible, earlier stages taking the remainder, as Megatron's
// and torchtune's pipeline splitters do).
std::int64_t train_stage_begin(std::int64_t layers, int pp, int stage) {
  const std::int64_t base = layers / pp;
  const std::int64_t extra = layers % pp;
  return stage * base + std::min<std::int64_t>(stage, extra);
}

double micro_batches_in_flight(const Resolved& setup, int stage) {
  // 1F1B: stage s holds pp - s micro-batches in flight (the first stage pp),
  // fewer when the step has fewer micro-batches (--grad-accum > 1 given).
  double in_flight = static_cast<double>(setup.pp - stage);
  if (setup.grad_accum > 1) {
    in_flight = std::min(in_flight, static_cast<double>(setup.grad_accum));
  }
  return in_flight;
}

// The CPU RAM of the busiest node, from what one GPU of each pipeline stage
// needs (`per_gpu`). Stages are the outermost rank dimension (torchtitan's
// mesh ["pp", "dp_replicate", "dp_shard", "cp", "tp"], Megatron's rank order
// tp-cp-ep-dp-pp, DeepSpeed's PipeModelDataParallelTopology ['pipe', 'data',
// 'model']): stage s holds ranks [s B, (s + 1) B) with B = GPUs / pp, node n
// ranks [n G, (n + 1) G) with G its GPUs. Only nodes at a stage boundary mix
// stages; any other node holds G GPUs of one stage.
double node_host_bytes(const std::vector<double>& per_gpu, int gpus_per_node,
                       int nodes) {
  const auto pp = static_cast<std::int64_t>(per_gpu.size());
  const std::int64_t node = gpus_per_node;
  const std::int64_t per_stage = node * nodes / pp;
  auto node_sum = [&](std::int64_t n) {
    const std::int64_t lo = n * node;
    const std::int64_t hi = lo + node;
    double sum = 0;
    for (std::int64_t s = lo / per_stage; s <= (hi - 1) / per_stage; ++s) {
      const std::int64_t overlap =
          std::min(hi, (s + 1) * per_stage) - std::max(lo, s * per_stage);
      sum +=
          per_gpu[static_cast<std::size_t>(s)] * static_cast<double>(overlap);
    }
    return sum;
  };
  double most = 0;
  for (std::int64_t s = 0; s < pp; ++s) {
    const std::int64_t first = s * per_stage / node;
    const std::int64_t last = ((s + 1) * per_stage - 1) / node;
    most = std::max({most, node_sum(first), node_sum(last)});
    if (last - first >= 2) {
      most = std::max(most, per_gpu[static_cast<std::size_t>(s)] *
                                static_cast<double>(node));
    }
  }
  return most;
}

// One training pipeline stage on one GPU: Megatron's and torchtune's layer
// split, the embedding on the first stage and the head on the last.
TrainLayout train_layout(const Model& model, const Resolved& setup,
                         const ParamCounts& counts, int stage) {
  TrainLayout at;
  at.stage = stage;
  at.pp = setup.pp;
  at.first = stage == 0;
  at.last = stage == setup.pp - 1;
  const std::int64_t n_layers = model.num_layers + model.num_decoder_layers;
  at.begin = train_stage_begin(n_layers, setup.pp, stage);
  at.end = train_stage_begin(n_layers, setup.pp, stage + 1);
  at.t = setup.tp;
  // FSDP and gradient reduction span data and context parallel ranks
  // (torchtitan parallelize: dp_mesh_dim_names ("dp_shard_cp",)).
  at.dp = std::max(1, setup.dp()) * setup.cp;
  at.d = dtype_bytes(setup.dtype);
  at.embed = static_cast<double>(counts.embedding);
  at.head = static_cast<double>(counts.lm_head);
  at.extra = static_cast<double>(counts.extra);
  // One stage holds every layer: the counts have them.
  const LayerSpan here = setup.pp == 1
                             ? LayerSpan{counts.layers(), counts.largest_layer}
                             : span_params(model, at.begin, at.end);
  at.largest_layer = static_cast<double>(here.largest);
  at.layer_params = static_cast<double>(here.params);
  if (at.last) {
    // The model-wide parameters outside the layers and the vocabulary
    // matrices (the final norm, an lm_head bias) sit with the output on the
    // last stage (torchtitan's pipeline split keeps model.norm and
    // model.output on the last stage).
    at.layer_params += static_cast<double>(counts.outside_layers);
  }
  return at;
}

}  // namespace oomplan::memory_terms
