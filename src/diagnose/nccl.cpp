#include "diagnose/grammars.hpp"

#include <algorithm>
#include <string>

// NCCL. Where the wordings come from: src/include/alloc.h / checks.h:
// WARN("Cuda failure '%s'") (newer "Cuda failure %d '%s'") and WARN("Failed
// to CUDA calloc %ld bytes"); the debug prefix is "host:pid:tid [cudaDev]
// file:line NCCL WARN".

namespace oomplan::diag {
namespace {

// The "[N]" device column before `pos` on its line (NCCL's debug prefix).
std::optional<int> bracket_device(std::string_view t, std::size_t pos) {
  const std::size_t b = line_begin(t, pos);
  std::size_t close = rfind_in(t, "] ", b, pos);
  while (close != k_npos && close > b) {
    std::size_t open = close;
    while (open > b && is_digit(t[open - 1])) {
      --open;
    }
    if (open < close && open > b && t[open - 1] == '[' && close - open <= 4) {
      return std::stoi(std::string(t.substr(open, close - open)));
    }
    close = close > b + 1 ? rfind_in(t, "] ", b, close - 1) : k_npos;
  }
  return std::nullopt;
}

}  // namespace

// NCCL: "Cuda failure 'out of memory'" / "Cuda failure 2 'out of memory'",
// merged with a "Failed to CUDA calloc N bytes" within the next 3 lines; or a
// calloc line alone.
void parse_nccl(std::string_view t, Cursor& c, OomMessage& m) {
  m.kind = OomKind::nccl;
  m.format = OomFormat::nccl;
  m.source = "nccl";
  m.device = "cuda";
  m.gpu_index = bracket_device(t, c.pos());
  if (c.lit("Cuda failure")) {
    c.integer();
    c.lit("'out of memory'");
    // Look for NCCL's calloc line right after.
    std::size_t p = c.pos();
    for (int line = 0; line < 3 && p < t.size(); ++line) {
      p = line_finish(t, p);
      const std::size_t next = p < t.size() ? p + 1 : p;
      const std::size_t calloc =
          find_in(t, "Failed to CUDA calloc", next, line_finish(t, next));
      if (calloc != k_npos) {
        c.set(calloc);
        break;
      }
      p = next;
    }
  }
  if (c.lit("Failed to CUDA calloc")) {
    const auto bytes = c.size();
    if (bytes) {
      m.requested_bytes = bytes;
    } else if (const auto n = c.integer()) {
      m.requested_bytes = std::min<Bytes>(k_max_size, *n);
    }
  }
}

}  // namespace oomplan::diag
