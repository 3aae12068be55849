// The parts of the diagnose scanner, one seam at a time: sizes as printed
// (cursor.hpp), a window with its line prefixes removed (window.hpp), and
// one grammar per log format family (grammars.hpp) on messages quoted from
// the engines' sources. End to end, the scanner is test_diagnose.cpp's.

#include "diagnose/cursor.hpp"
#include "diagnose/grammars.hpp"
#include "diagnose/window.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

namespace {

using namespace oomplan;
using namespace oomplan::diag;

// The message `grammar` parses from the start of `text`, and where the
// cursor stopped.
template <typename Grammar>
std::pair<OomMessage, std::size_t> parse(std::string_view text,
                                         Grammar grammar) {
  OomMessage m;
  Cursor c(text, 0);
  grammar(c, m);
  return {m, c.pos()};
}

}  // namespace

TEST_CASE("cursor: a printed size is exact to the byte, not a binary double",
          "[grammars]") {
  // 19.95 GiB = 1995 x 2^30 / 100 = 21,421,149,388.8 -> 21,421,149,389.
  CHECK(to_bytes({1995, 2}, k_gib) == 21'421'149'389);
  // XLA:TPU's "15.48G" (G = 2^30): 1548 x 2^30 / 100 = 16,621,523,435.52.
  CHECK(to_bytes({1548, 2}, k_gib) == 16'621'523'436);
  // 2 EiB saturates at 1 EiB (2^60), beyond any device.
  CHECK(to_bytes({2, 0}, k_gib << 30) == Bytes{1} << 60);
}

TEST_CASE("cursor: a size wrapped inside its number or unit reads whole",
          "[grammars]") {
  // 4.26 GiB = 426 x 2^30 / 100 = 4,574,140,170.24.
  Cursor wrapped_number("4.2\n6 GiB", 0);
  CHECK(wrapped_number.size() == 4'574'140'170);
  Cursor wrapped_unit("4.26 Gi\nB free", 0);
  CHECK(wrapped_unit.size() == 4'574'140'170);
  CHECK(wrapped_unit.lit("free"));
  Cursor no_unit("4.26 apples", 0);
  CHECK_FALSE(no_unit.size());
  CHECK(no_unit.pos() == 0);  // a failed read leaves the position
}

TEST_CASE("window: line prefixes go, the raw offsets stay", "[grammars]") {
  // A Ray worker tag, vLLM's log header and a torchrun rank prefix.
  const std::string raw =
      "(VllmWorker rank=1 pid=254) ERROR 03-10 08:07:20 [core.py:302] "
      "ValueError: No available memory for the cache blocks.\n"
      "[rank0]: torch.OutOfMemoryError: CUDA out of memory.";
  Window w;
  normalize(raw, true, w);
  CHECK(w.view() ==
        "ValueError: No available memory for the cache blocks.\n"
        "torch.OutOfMemoryError: CUDA out of memory.");
  REQUIRE(w.prefixes.size() == 2);
  CHECK(raw.substr(w.prefixes[0].raw_begin,
                   w.prefixes[0].raw_end - w.prefixes[0].raw_begin) ==
        "(VllmWorker rank=1 pid=254) ERROR 03-10 08:07:20 [core.py:302] ");
  // The text's first character is raw byte 63, after the 63-byte prefix.
  CHECK(w.raw_offset(0) == 63);
  CHECK(raw[w.raw_offset(0)] == 'V');
}

TEST_CASE("grammars: PyTorch 1.x reads every clause of its parenthesis",
          "[grammars]") {
  // 20 MiB = 20,971,520; 15.78 GiB = 16,943,645,982.72; 14.01 GiB =
  // 15,043,122,954.24; 19.69 MiB = 20,646,461.44; 14.43 GiB =
  // 15,494,094,520.32.
  const std::string_view text =
      "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB "
      "total capacity; 14.01 GiB already allocated; 19.69 MiB free; 14.43 "
      "GiB reserved in total by PyTorch) trailing words";
  const auto [m, end] = parse(text, [](Cursor& c, OomMessage& out) {
    parse_caching_allocator(c, out, true);
  });
  CHECK(m.format == OomFormat::pytorch1);
  CHECK(m.device == "cuda");
  CHECK(m.gpu_index == 0);
  CHECK(m.requested_bytes == 20'971'520);
  CHECK(m.capacity_bytes == 16'943'645'983);
  CHECK(m.allocated_bytes == 15'043'122'954);
  CHECK(m.free_bytes == 20'646'461);
  CHECK(m.reserved_total_bytes == 15'494'094'520);
  CHECK(text.substr(end) == " trailing words");
}

TEST_CASE("grammars: PyTorch 2.x takes its process clauses in any order",
          "[grammars]") {
  const std::string_view text =
      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
      "capacity of 79.15 GiB of which 1.00 GiB is free. Including non-PyTorch "
      "memory, this process has 60.00 GiB memory in use. Process 4242 has "
      "18.00 GiB memory in use. Of the allocated memory 50.00 GiB is "
      "allocated by PyTorch, and 9.00 GiB is reserved by PyTorch but "
      "unallocated.";
  const auto [m, end] = parse(text, [](Cursor& c, OomMessage& out) {
    parse_caching_allocator(c, out, false);
  });
  CHECK(m.format == OomFormat::pytorch2);
  CHECK(m.gpu_index == 1);
  CHECK(m.requested_bytes == 2 * k_gib);
  CHECK(m.free_bytes == 1 * k_gib);
  CHECK(m.process_bytes == 60 * k_gib);
  CHECK(m.other_processes_bytes == 18 * k_gib);
  REQUIRE(m.processes.size() == 1);
  CHECK(m.processes[0].pid == 4242);
  CHECK(m.allocated_bytes == 50 * k_gib);
  CHECK(m.reserved_unallocated_bytes == 9 * k_gib);
  CHECK(end == text.size());
}

TEST_CASE("grammars: prose about a CUDA OOM is not a message", "[grammars]") {
  const auto [m, end] =
      parse("CUDA out of memory errors are common when fine-tuning",
            [](Cursor& c, OomMessage& out) {
              parse_caching_allocator(c, out, false);
            });
  CHECK(m.source.empty());
}

TEST_CASE("grammars: TensorFlow's tensor shape gives the request's bytes",
          "[grammars]") {
  // 8 x 4096 x 4096 floats of 4 bytes = 536,870,912 bytes.
  const std::string_view text =
      "OOM when allocating tensor with shape[8,4096,4096] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc";
  const auto [m, end] = parse(
      text, [&](Cursor& c, OomMessage& out) { parse_xla(text, c, out, {}); });
  CHECK(m.source == "tensorflow");
  CHECK(m.format == OomFormat::xla);
  CHECK(m.requested_bytes == 536'870'912);
  CHECK(m.gpu_index == 1);
}

TEST_CASE("grammars: the XLA:TPU compiler's G is 2^30", "[grammars]") {
  // 21.95 G = 23,568,633,036.8 bytes; 15.48 G = 16,621,523,435.52.
  const std::string_view text =
      "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
      "in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity "
      "by 6.47G.";
  const auto [m, end] = parse(
      text, [&](Cursor& c, OomMessage& out) { parse_xla(text, c, out, {}); });
  CHECK(m.source == "xla");
  CHECK(m.kind == OomKind::xla_compile);
  CHECK(m.device == "tpu");
  CHECK(m.requested_bytes == 23'568'633'037);
  CHECK(m.capacity_bytes == 16'621'523'436);
  CHECK(end == text.size());
}

TEST_CASE("grammars: vLLM V1's KV-cache check names its estimate",
          "[grammars]") {
  // 4.00 GiB needed, 2.50 GiB = 2,684,354,560 bytes available.
  const auto [m, end] = parse(
      "To serve at least one request with the models's max seq len (131072), "
      "(4.00 GiB KV cache is needed, which is larger than the available KV "
      "cache memory (2.50 GiB). Based on the available memory, the estimated "
      "maximum model length is 81920.",
      parse_vllm_v1);
  CHECK(m.kind == OomKind::vllm_max_seq_len);
  CHECK(m.max_seq_len == 131072);
  CHECK(m.requested_bytes == 4 * k_gib);
  CHECK(m.free_bytes == 2'684'354'560);
  CHECK(m.estimated_max_model_len == 81920);
}

TEST_CASE("grammars: NCCL's calloc line on the next line gives the bytes",
          "[grammars]") {
  const std::string_view text =
      "node1:1234:1300 [3] misc.cc:10 NCCL WARN Cuda failure 'out of memory'\n"
      "node1:1234:1300 [3] alloc.h:20 NCCL WARN Failed to CUDA calloc "
      "10485760 bytes";
  const std::size_t start = text.find("Cuda failure");
  OomMessage m;
  Cursor c(text, start);
  parse_nccl(text, c, m);
  CHECK(m.kind == OomKind::nccl);
  CHECK(m.gpu_index == 3);  // the "[3]" device column
  CHECK(m.requested_bytes == 10'485'760);
}
