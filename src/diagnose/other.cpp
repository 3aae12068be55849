#include "diagnose/grammars.hpp"

// The messages of format `other` beside PyTorch's MPS allocator. Where the
// wordings come from:
// - DeepSpeed csrc/transformer/inference/includes/inference_context.h
//   GenWorkSpace: printf("Requested:\t%lu\nFree:\t%lu\nTotal:\t%lu\n") in
//   bytes, then "Workspace can't be allocated, no enough memory." (the
//   scanner reads the Requested/Free/Total lines as context);
//   deepspeed/runtime/utils.py see_memory_usage prints "MA x GB ... CA y GB"
//   with x = bytes / (1024 * 1024 * 1024): "GB" is 2^30.
// - bitsandbytes csrc/ops.cuh CUDA_CHECK_RETURN: "Error %s at line %d in
//   file %s" with cudaGetErrorString ("out of memory").

namespace oomplan::diag {

void parse_bitsandbytes(Cursor& c, OomMessage& m) {
  m.kind = OomKind::bitsandbytes;
  m.format = OomFormat::other;
  m.source = "bitsandbytes";
  m.device = "cuda";
  if (c.lit("Error out of memory at line")) {
    c.integer();
    if (c.lit("in file")) {
      c.skip_word();
      // The path runs to the end of the line.
    }
  }
}

void parse_deepspeed_workspace(Cursor& c, OomMessage& m) {
  m.kind = OomKind::deepspeed_workspace;
  m.format = OomFormat::other;
  m.source = "deepspeed";
  m.device = "cuda";
  c.skip_past("no enough memory.", 64);
}

void parse_generic(Cursor& c, OomMessage& m) {
  m.kind = OomKind::generic;
  m.format = OomFormat::other;
  c.lit("out of memory");
}

}  // namespace oomplan::diag
