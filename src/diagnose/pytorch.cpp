#include "diagnose/grammars.hpp"

#include <algorithm>

// PyTorch's allocators. Where the wordings come from:
// - c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc
//   (OutOfMemoryError text per version: 1.0-1.3 "... free; X cached)", 1.4-2.0
//   "... free; [X allowed; ]X reserved in total by PyTorch)", 2.1 "GPU N has a
//   total capacty of ...", 2.2+ "capacity", "Including non-PyTorch memory,
//   this process has", "with X allocated in private pools"); sizes printed by
//   format_size(): "N bytes" up to 1 KiB, then "%.2f KiB/MiB/GiB" (2^10..).
//   ROCm builds are hipified: "HIP out of memory", PYTORCH_HIP_ALLOC_CONF.
//   c10/xpu/XPUCachingAllocator.cpp prints "XPU out of memory".
// - aten/src/ATen/mps/MPSAllocator.mm: "MPS backend out of memory (MPS
//   allocated: X, other allocations: Y, max allowed: Z). Tried to allocate W
//   on private pool." with 2^10-based "KB/MB/GB" (later KiB...).

namespace oomplan::diag {
namespace {

constexpr std::size_t k_max_processes = 32;

void add_process(OomMessage& m, std::int64_t pid, Bytes bytes) {
  m.other_processes_bytes =
      std::min(k_max_size, m.other_processes_bytes.value_or(0) + bytes);
  if (m.processes.size() < k_max_processes) {
    m.processes.push_back({pid, bytes});
  }
}

// "If reserved but unallocated memory is large try setting
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.
// See documentation for Memory Management (https://...)" and the 1.x / 2.1
// "max_split_size_mb" forms.
void pytorch_suggestion(Cursor& c, OomMessage& m) {
  if (c.lit("If reserved but unallocated memory is large try setting") ||
      c.lit("If reserved memory is >> allocated memory try setting")) {
    const std::string_view env = c.word();
    if (env == "PYTORCH_CUDA_ALLOC_CONF") {
      m.alloc_conf_env = "PYTORCH_CUDA_ALLOC_CONF";
    } else if (env == "PYTORCH_HIP_ALLOC_CONF") {
      m.alloc_conf_env = "PYTORCH_HIP_ALLOC_CONF";
    } else if (env == "PYTORCH_ALLOC_CONF") {
      m.alloc_conf_env = "PYTORCH_ALLOC_CONF";
    }
    c.skip_past("fragmentation.", 80);
  }
  if (c.lit("See documentation for Memory Management")) {
    if (c.lit("and PYTORCH_CUDA_ALLOC_CONF")) {
      return;
    }
    if (c.peek() == '(') {
      c.skip_past(")", 160);
    }
  }
  c.lit("Please use `empty_cache` to release all unoccupied cached memory.");
}

// The device index of "GPU N" (a larger N is not a device index).
void set_gpu_index(OomMessage& m, std::int64_t index) {
  if (index < 4096) {
    m.gpu_index = static_cast<int>(index);
  }
}

// "CUDA out of memory." (or HIP, XPU). Prose ("a CUDA out of memory error",
// "CUDA out of memory: https://...") is not a message: the message's first
// sentence ends with '.', and only a message cut off there may lack "Tried
// to allocate". A rejected candidate has no source. Returns whether the
// clauses follow.
bool caching_allocator_head(Cursor& c, OomMessage& m) {
  bool head = false;
  for (const std::string_view dev : {"CUDA", "HIP", "XPU"}) {
    if (c.lit(std::string(dev) + " out of memory")) {
      m.device = dev == "CUDA" ? "cuda" : dev == "HIP" ? "hip" : "xpu";
      head = true;
      break;
    }
  }
  if (head && !c.lit(".")) {
    m.source = {};
    return false;
  }
  if (!c.lit("Tried to allocate")) {
    if (!head || !c.at_line_end()) {
      m.source = {};
    }
    return false;
  }
  return true;
}

// 1.x: "(GPU 0; 15.78 GiB total capacity; 14.01 GiB already allocated;
// 19.69 MiB free; [1.50 GiB allowed; ]14.43 GiB reserved in total by
// PyTorch)" or, in 1.0-1.3, "...; 4.68 MiB cached)", after the "(".
void pytorch1_clauses(Cursor& c, OomMessage& m) {
  m.format = OomFormat::pytorch1;
  if (m.device.empty()) {
    m.device = "cuda";
  }
  if (!c.lit("GPU")) {
    return;
  }
  const auto idx = c.integer();
  if (!idx || !c.lit(";")) {
    return;
  }
  set_gpu_index(m, *idx);
  const auto capacity = c.size();
  if (!capacity || !c.lit("total capacity") || !c.lit(";")) {
    return;
  }
  m.capacity_bytes = capacity;
  const auto allocated = c.size();
  if (!allocated || !c.lit("already allocated") || !c.lit(";")) {
    return;
  }
  m.allocated_bytes = allocated;
  // Intel's XPU allocator (intel-extension-for-pytorch) prints no "free"
  // clause: "...; 0 bytes already allocated; 0 bytes reserved in total by
  // PyTorch)".
  for (int clause = 0; clause < 4 && (clause == 0 || c.lit(";")); ++clause) {
    const auto value = c.size();
    if (!value) {
      return;
    }
    if (c.lit("free")) {
      m.free_bytes = value;
    } else if (c.lit("allowed")) {
      m.allowed_bytes = value;
    } else if (c.lit("reserved in total by PyTorch")) {
      m.reserved_total_bytes = value;
    } else if (c.lit("cached")) {
      m.reserved_unallocated_bytes = value;
    } else {
      return;
    }
  }
  if (c.lit(")")) {
    pytorch_suggestion(c, m);
  }
}

// 2.x: "GPU 0 has a total capacity of X of which Y is free." (PyTorch 2.1
// printed "capacty"); false when the sentence is not all there.
bool pytorch2_capacity(Cursor& c, OomMessage& m) {
  if (!c.lit(".") || !c.lit("GPU")) {
    return false;
  }
  const auto idx = c.integer();
  if (!idx || !c.lit("has a total capac")) {
    return false;
  }
  set_gpu_index(m, *idx);
  c.lit("i");
  if (!c.lit("ty of")) {
    return false;
  }
  m.capacity_bytes = c.size();
  if (!m.capacity_bytes || !c.lit("of which")) {
    return false;
  }
  m.free_bytes = c.size();
  return m.free_bytes && c.lit("is free.");
}

// 2.x: "[Process N has Z memory in use. ][Including non-PyTorch memory, this
// process has P memory in use. ][X allowed; ]", in any order; false when a
// clause is cut off.
bool pytorch2_processes(Cursor& c, OomMessage& m) {
  for (int clause = 0; clause < 256; ++clause) {
    if (c.lit("Process")) {
      const auto pid = c.integer();
      if (!pid || !c.lit("has")) {
        return false;
      }
      const auto bytes = c.size();
      if (!bytes || !c.lit("memory in use.")) {
        return false;
      }
      add_process(m, *pid, *bytes);
    } else if (c.lit("Including non-PyTorch memory, this process has")) {
      m.process_bytes = c.size();
      if (!m.process_bytes || !c.lit("memory in use.")) {
        return false;
      }
    } else {
      const std::size_t save = c.pos();
      const auto allowed = c.size();
      if (allowed && c.lit("allowed;")) {
        m.allowed_bytes = allowed;
        continue;
      }
      c.set(save);
      break;
    }
  }
  return true;
}

// 2.x: "Of the allocated memory A is allocated by PyTorch, [with Q allocated
// in private pools (e.g., CUDA Graphs), ]and U is reserved by PyTorch but
// unallocated."
void pytorch2_allocated(Cursor& c, OomMessage& m) {
  if (!c.lit("Of the allocated memory")) {
    return;
  }
  m.allocated_bytes = c.size();
  if (!m.allocated_bytes || !c.lit("is allocated by PyTorch,")) {
    return;
  }
  if (c.lit("with")) {
    // "with 314.00 MiB allocated in private pools (e.g., CUDA Graphs), and".
    if (!c.skip_past("), and", 80)) {
      return;
    }
  } else if (!c.lit("and")) {
    return;
  }
  m.reserved_unallocated_bytes = c.size();
  if (!m.reserved_unallocated_bytes ||
      !c.lit("is reserved by PyTorch but unallocated.")) {
    return;
  }
  pytorch_suggestion(c, m);
}

void pytorch2_clauses(Cursor& c, OomMessage& m) {
  m.format = OomFormat::pytorch2;
  if (m.device.empty()) {
    m.device = "cuda";
  }
  if (pytorch2_capacity(c, m) && pytorch2_processes(c, m)) {
    pytorch2_allocated(c, m);
  }
}

}  // namespace

void parse_caching_allocator(Cursor& c, OomMessage& m,
                             bool raised_as_runtime_error) {
  m.kind = OomKind::caching_allocator;
  m.source = "pytorch";
  m.format =
      raised_as_runtime_error ? OomFormat::pytorch1 : OomFormat::pytorch2;
  if (!caching_allocator_head(c, m)) {
    return;
  }
  if (c.lit("more than 1EB memory")) {
    m.requested_bytes = k_max_size;
    m.format = OomFormat::pytorch2;
    c.lit(".");
    return;
  }
  m.requested_bytes = c.size();
  if (!m.requested_bytes) {
    return;
  }
  if (c.lit("(")) {
    pytorch1_clauses(c, m);
  } else {
    pytorch2_clauses(c, m);
  }
}

// "MPS backend out of memory (MPS allocated: X, other allocations: Y, max
// allowed: Z). Tried to allocate W on private pool."
void parse_mps(Cursor& c, OomMessage& m) {
  m.kind = OomKind::mps_allocator;
  m.format = OomFormat::other;
  m.source = "pytorch";
  m.device = "mps";
  if (!c.lit("MPS backend out of memory") || !c.lit("(MPS allocated:")) {
    return;
  }
  m.allocated_bytes = c.size();
  if (!m.allocated_bytes) {
    return;
  }
  if (c.lit(", other allocations:")) {
    if (const auto other = c.size()) {
      m.process_bytes = std::min(k_max_size, *m.allocated_bytes + *other);
    }
  }
  if (c.lit(", max allowed:")) {
    // The allocator's limit (recommendedMaxWorkingSetSize x the watermark
    // ratio): the capacity it works against.
    m.allowed_bytes = c.size();
    m.capacity_bytes = m.allowed_bytes;
  }
  if (c.lit(").") && c.lit("Tried to allocate")) {
    m.requested_bytes = c.size();
    if (c.lit("on private pool") || c.lit("on shared pool")) {
      c.lit(".");
    }
  }
  c.skip_past("(may cause system failure).", 140);
}

// "CUDA error: out of memory" and its boilerplate; "cuda runtime error (2) :

}  // namespace oomplan::diag
