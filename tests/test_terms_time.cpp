// The time terms one by one (src/time/rates.cpp, train_time.cpp,
// infer_time.cpp), each against a hand calculation in its comment. Where a
// term divides by a bandwidth the expected value is written as the same
// quotient, the numerator counted by hand.

#include "support.hpp"
#include "time/internal.hpp"

#include <catch2/catch.hpp>

namespace {

using namespace oomplan;
using namespace oomplan::time_terms;

// Two layers of h 1,024, 8 heads of 128, I 4,096, 1,000-token vocabulary:
// embedding and lm_head 1,024,000 each, attention 2 x 4 x 1,024^2 =
// 8,388,608, MLP 2 x 3 x 1,024 x 4,096 = 25,165,824, norms 5,120: 35,607,552
// parameters, 71,215,104 B in bf16.
Model toy() {
  Model m;
  m.name = "toy";
  m.hidden_size = 1024;
  m.num_layers = 2;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 4096;
  m.vocab_size = 1000;
  m.max_position_embeddings = 4096;
  return m;
}

// 100 bf16 TFLOP/s, 2,000 GB/s HBM, 25 GB/s PCIe, NVLink 900 GB/s (450 GB/s
// one way: 337.5 GB/s at 75 %).
Gpu toy_gpu(double nvlink_gb_s = 900) {
  Gpu g;
  g.compute_capability = 90;
  g.capacity_bytes = 80 * k_gib;
  g.bandwidth_gb_s = 2000;
  g.bf16_tflops = 100;
  g.nvlink_gb_s = nvlink_gb_s;
  g.pcie_gb_s = 25;
  return g;
}

Resolved train(int gpus = 1) {
  Resolved s;
  s.mode = Mode::full;
  s.gpus = gpus;
  s.seq = 4096;
  return s;
}

}  // namespace

// --- rates.cpp

TEST_CASE("time terms: layers, peak FLOP/s and link bandwidths", "[terms]") {
  Model t5 = toy();
  t5.num_decoder_layers = 3;
  CHECK(all_layers(toy()) == 2);
  CHECK(all_layers(t5) == 5);
  CHECK(gb_s(25) == 25e9);
  Resolved s;
  CHECK(peak_flops(toy_gpu(), s) == 1e14);
  s.dtype = Dtype::fp32;  // TF32: half the bf16 rate
  CHECK(peak_flops(toy_gpu(), s) == 5e13);
  // NVLink 900 GB/s both ways: 450e9 x 0.75 = 337.5e9 B/s; PCIe 25e9 x
  // 0.75 = 18.75e9 B/s.
  CHECK(intra_node_bytes_s(toy_gpu()) == 337.5e9);
  CHECK(intra_node_bytes_s(toy_gpu(0)) == 18.75e9);
  // Between nodes: one 25 GB/s rail at 75 % = 18.75e9 B/s.
  CHECK(inter_node_bytes_s(toy_gpu()) == 18.75e9);
}

TEST_CASE("time terms: weights read and FLOPs per token", "[terms]") {
  // 35,607,552 parameters x 2 B = 71,215,104 B.
  CHECK(weight_read_bytes(toy(), Resolved{}) == 71215104.0);
  // Every matmul: attention 8,388,608 + MLP 25,165,824 + lm_head 1,024,000 =
  // 34,578,432 (the embedding lookup is free).
  const ParamCounts p = count_params(toy());
  CHECK(matmul_params_per_token(toy(), p) == 34578432.0);
  // Causal average context: s / 2 = 2,048 for a global layer; a 1,024
  // window at 4,096 tokens: 1,024 - 1,024^2 / 8,192 = 896.
  CHECK(average_context(toy(), 0, 4096) == 2048.0);
  Model local = toy();
  local.sliding_window = 1024;
  CHECK(average_context(local, 0, 4096) == 896.0);
  // 2 x 8 heads x (128 + 128) x (2 layers x 2,048) = 16,777,216 FLOPs.
  CHECK(attention_flops_per_token(toy(), 4096) == 16777216.0);
}

TEST_CASE("time terms: trainable_params of full training and LoRA", "[terms]") {
  const ParamCounts p = count_params(toy());
  CHECK(trainable_params(toy(), train(), p) == 35607552.0);
  // r 16, all targets: q, k, v, o 4 x (1,024 + 1,024) + gate, up, down 3 x
  // (1,024 + 4,096) = 23,552 per layer x 16 x 2 layers = 753,664.
  Resolved lora = train();
  lora.mode = Mode::lora;
  CHECK(trainable_params(toy(), lora, p) == 753664.0);
}

// --- train_time.cpp

TEST_CASE("time terms: training_flops_per_token is 6N + 3 attention",
          "[terms]") {
  const ParamCounts p = count_params(toy());
  Resolved s = train();
  // 6 x 34,578,432 + 3 x 16,777,216 = 257,802,240.
  CHECK(training_flops_per_token(toy(), s, p) == 257802240.0);
  // Full recomputation: + 2N + attention = 343,736,320.
  s.checkpointing = Checkpointing::full;
  CHECK(training_flops_per_token(toy(), s, p) == 343736320.0);
  // LoRA: 4N + 3 attention = 188,645,376; selective: + attention =
  // 205,422,592.
  s.mode = Mode::lora;
  s.checkpointing = Checkpointing::selective;
  CHECK(training_flops_per_token(toy(), s, p) == 205422592.0);
}

TEST_CASE("time terms: training_compute_s at 40 % MFU with the bubble",
          "[terms]") {
  // 8e13 FLOPs over 2 GPUs at 1e14 x 0.4: 1 s; pp 2 with 4 micro-batches
  // idles 1 / 4 more: 1.25 s.
  Resolved s = train(2);
  CHECK(training_compute_s(toy_gpu(), s, 8e13) == 1.0);
  s.pp = 2;
  s.grad_accum = 4;
  CHECK(training_compute_s(toy_gpu(), s, 8e13) == 1.25);
  // QLoRA's 4-bit matmuls: x 1.3.
  Resolved q = train(1);
  q.mode = Mode::qlora;
  q.quant = Quant::nf4;
  CHECK(training_compute_s(toy_gpu(), q, 4e13) == 1.3);
}

TEST_CASE("time terms: tensor- and data-parallel traffic of a step",
          "[terms]") {
  const ParamCounts p = count_params(toy());
  Resolved s = train(2);
  CHECK(training_tp_comm_s(toy(), toy_gpu(), s) == 0.0);
  // tp 2: 2 layers x 4 all-reduces x 2 (2 - 1) / 2 of 4,096 x 1,024 x 2 B =
  // 8 x 8,388,608 = 67,108,864 B at 337.5e9 B/s.
  s.tp = 2;
  CHECK(training_tp_comm_s(toy(), toy_gpu(), s) == 67108864.0 / 337.5e9);
  // dp 4: the gradients (71,215,104 B) all-reduced, 2 x 3/4 of them =
  // 106,822,656 B.
  Resolved d = train(4);
  CHECK(training_dp_comm_s(toy(), toy_gpu(), d, p) == 106822656.0 / 337.5e9);
  // ZeRO-3 gathers the weights twice and reduce-scatters the gradients:
  // (2 x 3/4 + 3/4) x 71,215,104 = 160,233,984 B.
  d.zero = 3;
  CHECK(training_dp_comm_s(toy(), toy_gpu(), d, p) == 160233984.0 / 337.5e9);
}

TEST_CASE("time terms: offload traffic over PCIe", "[terms]") {
  const ParamCounts p = count_params(toy());
  Resolved s = train();
  CHECK(optimizer_offload_s(toy(), toy_gpu(), s, p) == 0.0);
  // Optimizer offload: 35,607,552 gradients x 2 B over 25e9 B/s, and CPU
  // Adam over 35,607,552 parameters at 2e9 per second.
  s.offload = Offload::optimizer;
  CHECK(optimizer_offload_s(toy(), toy_gpu(), s, p) ==
        71215104.0 / 25e9 + 35607552.0 / 2e9);
  // Parameter offload, ZeRO-3 over 4: 71,215,104 / 4 B fetched twice =
  // 35,607,552 B.
  Resolved z = train(4);
  z.zero = 3;
  z.offload = Offload::params;
  CHECK(param_offload_s(toy(), toy_gpu(), z) == 35607552.0 / 25e9);
  // Activation offload: 2 layers x 4,096 x 1,024 x 2 B there and back =
  // 33,554,432 B, less what 1 s of compute hides.
  s.activation_offload = true;
  CHECK(activation_offload_s(toy(), toy_gpu(), s, 0) == 33554432.0 / 25e9);
  CHECK(activation_offload_s(toy(), toy_gpu(), s, 1) == 0.0);
}

TEST_CASE("time terms: training_time of one GPU is its compute", "[terms]") {
  // 4,096 tokens x 257,802,240 = 1,055,957,975,040 FLOPs at 4e13 FLOP/s.
  const StepTime t =
      training_time(toy(), toy_gpu(), train(), count_params(toy()));
  CHECK(t.tokens_per_step == 4096.0);
  CHECK(t.flops_per_step == 1055957975040.0);
  CHECK(t.step_s == 1055957975040.0 / 4e13);
  CHECK(t.comm_s == 0.0);
}

// --- infer_time.cpp

TEST_CASE("time terms: decode_weight_bytes for LLM.int8() and MoE", "[terms]") {
  const ParamCounts p = count_params(toy());
  Resolved s;
  CHECK(decode_weight_bytes(toy(), s, p, 1) == 71215104.0);
  // LLM.int8(): the 16-bit bytes x 1.2.
  s.quant = Quant::int8;
  CHECK(decode_weight_bytes(toy(), s, p, 1) == 71215104.0 * 1.2);
  // 2 experts of 4,096, top-1: 2 layers x 2 x 3 x 1,024 x 4,096 =
  // 50,331,648 expert params (100,663,296 B). One token leaves one expert
  // idle (1 - 1/2)^1: half of them, 50,331,648 B, unread of 121,554,944 B.
  Model moe = toy();
  moe.num_experts = 2;
  moe.experts_per_tok = 1;
  moe.moe_intermediate_size = 4096;
  const ParamCounts pm = count_params(moe);
  REQUIRE(weight_read_bytes(moe, Resolved{}) == 121554944.0);
  CHECK(decode_weight_bytes(moe, Resolved{}, pm, 1) ==
        Approx(121554944.0 - 50331648.0).epsilon(1e-12));
}

TEST_CASE("time terms: decode_comm_s and decode_launch_s", "[terms]") {
  Resolved s;
  CHECK(decode_comm_s(toy(), toy_gpu(), s, 8) == 0.0);
  // tp 2, 8 sequences: 2 layers x 2 all-reduces of (10 us + 2 (2 - 1) / 2
  // x 8 x 1,024 x 2 B = 16,384 B at 337.5e9 B/s).
  s.tp = 2;
  CHECK(decode_comm_s(toy(), toy_gpu(), s, 8) ==
        4 * (10e-6 + 16384.0 / 337.5e9));
  // pp 2: one hop of 16,384 B.
  s.tp = 1;
  s.pp = 2;
  CHECK(decode_comm_s(toy(), toy_gpu(), s, 8) == 10e-6 + 16384.0 / 337.5e9);
  // Launches: 2 layers x 30 us eager, x 5 us with vLLM's CUDA graphs.
  CHECK(decode_launch_s(toy(), Resolved{}) == 2 * 30e-6);
  Resolved v;
  v.engine = Engine::vllm;
  CHECK(decode_launch_s(toy(), v) == 2 * 5e-6);
  v.enforce_eager = true;
  CHECK(decode_launch_s(toy(), v) == 2 * 30e-6);
}

TEST_CASE("time terms: inference_time of a small model is its launches",
          "[terms]") {
  // Reads 71,215,104 B of weights + 2,048 average context x 8,192 B KV per
  // token = 87,992,320 B at 2,000e9 x 0.8 B/s (55 us), under the 60 us of
  // eager launches.
  Resolved s;
  const StepTime t =
      inference_time(toy(), toy_gpu(), s, count_params(toy()), s.batch);
  CHECK(t.memory_s == 87992320.0 / 1.6e12);
  CHECK(t.step_s == 2 * 30e-6);
  CHECK(t.tokens_per_step == 1.0);
}
