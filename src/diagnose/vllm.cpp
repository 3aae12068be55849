#include "diagnose/grammars.hpp"

// vLLM's KV-cache and start-up checks. Where the wordings come from:
// vllm/worker/worker.py raise_if_cache_size_invalid (V0: "No available
// memory for the cache blocks", "The model's max seq len (N) is larger than
// the maximum number of tokens that can be stored in KV cache (M)"),
// vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (V1: "To serve
// at least one request with the models's [later model's] max seq len (N), (X
// GiB KV cache is needed, ... (Y GiB). Based on the available memory, the
// estimated maximum model length is E."), format_gib() = "%.2f" of bytes /
// 1024**3, and vllm/v1/worker/gpu_worker.py (later worker/utils.py
// request_memory): "Free memory on device [cuda:0 ](F/C GiB) on startup is
// less than desired GPU memory utilization (U, R GiB)" with GiB = 2^30
// (GiB_bytes). vLLM's "Loading model weights took X GB" divides by GiB_bytes
// too: its "GB" is 2^30.

namespace oomplan::diag {
namespace {

// "Try increasing `gpu_memory_utilization` ... when initializing the
// engine." and the docs link after it.
void vllm_try_increasing(Cursor& c) {
  if (c.lit("Try increasing")) {
    c.skip_past("when initializing the engine.", 160);
  }
  if (c.lit("See https://docs.vllm.ai/")) {
    c.skip_past("for more details.", 120);
  }
}

}  // namespace

void parse_vllm_no_blocks(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_no_cache_blocks;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  c.lit("No available memory for the cache blocks.");
  if (c.lit("Try increasing `gpu_memory_utilization` when initializing the "
            "engine")) {
    c.skip_past(".", 120);
  }
  if (c.lit("See https://docs.vllm.ai/")) {
    c.skip_past("for more details.", 120);
  }
}

// V0: "The model's max seq len (N) is larger than the maximum number of
// tokens that can be stored in KV cache (M)."
void parse_vllm_v0(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_max_seq_len;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  if (!c.lit("The model's max seq len (")) {
    return;
  }
  const auto seq = c.integer();
  if (!seq ||
      !c.lit(") is larger than the maximum number of tokens that can be "
             "stored in KV cache (")) {
    return;
  }
  m.max_seq_len = seq;
  const auto tokens = c.integer();
  if (tokens && c.lit(")")) {
    m.kv_tokens = tokens;
    c.lit(".");
    vllm_try_increasing(c);
  }
}

// V1: "To serve at least one request with the models's max seq len (N), (X
// GiB KV cache is needed, which is larger than the available KV cache memory
// (Y GiB). Based on the available memory, the estimated maximum model length
// is E."
void parse_vllm_v1(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_max_seq_len;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  if (!c.lit("To serve at least one request with the")) {
    return;
  }
  if (!c.lit("models's") && !c.lit("model's")) {
    return;
  }
  if (!c.lit("max seq len")) {
    return;
  }
  c.lit("(");
  const auto seq = c.integer();
  if (!seq || !(c.lit(")") || c.lit(","))) {
    return;
  }
  m.max_seq_len = seq;
  c.lit(",");
  c.lit("(");
  m.requested_bytes = c.size();
  if (!m.requested_bytes ||
      !c.lit("KV cache is needed, which is larger than the available KV cache "
             "memory")) {
    return;
  }
  c.lit("(");
  m.free_bytes = c.size();
  if (!m.free_bytes) {
    return;
  }
  c.lit(")");
  c.lit(".");
  if (c.lit("Based on the available memory, the estimated maximum model length "
            "is")) {
    const auto estimate = c.integer();
    if (estimate && c.lit(".")) {
      m.estimated_max_model_len = estimate;
    }
  }
  vllm_try_increasing(c);
}

// "Free memory on device [cuda:0 ](F/C GiB) on startup is less than desired
// GPU memory utilization (U, R GiB). Decrease GPU memory utilization or
// reduce GPU memory used by other processes."
void parse_vllm_startup(Cursor& c, OomMessage& m) {
  m.kind = OomKind::vllm_startup_free_memory;
  m.format = OomFormat::vllm;
  m.source = "vllm";
  if (!c.lit("Free memory on device")) {
    return;
  }
  if (c.peek() != '(') {
    // "cuda:0", "xpu:0"
    const std::string_view dev = c.word();
    const std::size_t colon = dev.find(':');
    const std::string_view name = dev.substr(0, colon);
    if (name == "cuda") {
      m.device = "cuda";
    } else if (name == "xpu") {
      m.device = "xpu";
    } else if (name == "hip" || name == "rocm") {
      m.device = "hip";
    }
    if (colon != k_npos) {
      Cursor idx(dev, colon + 1);
      if (const auto n = idx.integer(); n && *n < 4096) {
        m.gpu_index = static_cast<int>(*n);
      }
    }
    c.skip_word();
  }
  if (!c.lit("(")) {
    return;
  }
  // "(F/C GiB)": both figures share the unit.
  const auto free = c.number(false);
  if (!free || !c.lit("/")) {
    return;
  }
  const auto total = c.number(false);
  const Bytes unit = total ? c.unit() : 0;
  if (unit == 0) {
    return;
  }
  m.free_bytes = to_bytes(*free, unit);
  m.capacity_bytes = to_bytes(*total, unit);
  if (!c.lit(")") ||
      !c.lit("on startup is less than desired GPU memory utilization (")) {
    return;
  }
  m.gpu_util = c.decimal();
  if (!m.gpu_util || !c.lit(",")) {
    return;
  }
  m.requested_bytes = c.size();
  if (c.lit(").")) {
    c.lit(
        "Decrease GPU memory utilization or reduce GPU memory used by other "
        "processes.");
  }
}

}  // namespace oomplan::diag
