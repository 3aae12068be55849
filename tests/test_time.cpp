// The time and cost model (time.hpp): each estimate against hand-counted
// FLOPs and bytes on toy models, and its properties on catalog models.

#include "support.hpp"

#include "oomplan/plan/plan.hpp"
#include "oomplan/time/time.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

namespace {

using namespace oomplan;

struct Planned {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Resolved setup;
  Budget budget;
};

Planned plan_on(const char* model, const char* gpus, Setup s) {
  const auto& cat = test::catalog();
  Planned p;
  p.model = &find_model(cat, model);
  const auto spec = parse_gpu_spec(cat, gpus);
  p.gpu = spec.gpu;
  s.gpus = spec.count;
  p.setup = resolve(*p.model, *p.gpu, s);
  p.budget = test::budget(*p.model, *p.gpu, s);
  return p;
}

// A two-layer toy transformer whose FLOPs are easy to count by hand.
oomplan::Model toy_model() {
  oomplan::Model m;
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

oomplan::Gpu toy_gpu(double nvlink_gb_s) {
  oomplan::Gpu g;
  g.name = "toy";
  g.compute_capability = 90;
  g.capacity_bytes = 80 * oomplan::k_gib;
  g.bandwidth_gb_s = 2000;
  g.bf16_tflops = 100;
  g.nvlink_gb_s = nvlink_gb_s;
  g.pcie_gb_s = 25;
  return g;
}

}  // namespace
TEST_CASE("time: training compute is 6 N per token plus attention at 40 % MFU",
          "[time]") {
  const Model m = toy_model();
  const Gpu g = toy_gpu(0);
  const Resolved s = resolve(m, g, Setup{.mode = Mode::full, .seq = 1024});
  const StepTime t = estimate_time(m, g, s);
  // N (matmul parameters per token) = 2 layers x (attention 4 x 1024^2 =
  // 4,194,304 + SwiGLU 3 x 1024 x 4096 = 12,582,912) + lm_head 1000 x 1024
  // = 34,578,432. Attention: 2 x 8 heads x (128 + 128) x (2 layers x 512
  // average causal context) = 4,194,304 FLOPs per token forward.
  // Per token 6 N + 3 x attention = 220,053,504; x 1024 tokens
  // = 225,334,788,096 FLOPs over 100 TFLOPS x 0.40 = 5.6334 ms.
  CHECK(t.flops_per_step == Approx(225334788096.0));
  CHECK(t.compute_s == Approx(225334788096.0 / 40e12));
  CHECK(t.tokens_per_step == 1024);
  CHECK(t.comm_s == 0);
  CHECK(t.step_s == Approx(t.compute_s));
  CHECK(t.tokens_per_s == Approx(1024 / t.step_s));
  CHECK(t.usd_per_mtok == 0);  // no price

  // Full recomputation adds a forward: (8 N + 4 a) / (6 N + 3 a) = 4/3.
  Resolved ckpt = s;
  ckpt.checkpointing = Checkpointing::full;
  CHECK(estimate_time(m, g, ckpt).compute_s / t.compute_s == Approx(4.0 / 3.0));
  // LoRA computes no weight gradients for the frozen base: 4 N + 3 a.
  Resolved lora = s;
  lora.mode = Mode::lora;
  CHECK(estimate_time(m, g, lora).flops_per_step ==
        Approx((4.0 * 34578432 + 3.0 * 4194304) * 1024));
  // Two micro-batches of gradient accumulation: twice the tokens and time.
  Resolved accum = s;
  accum.grad_accum = 2;
  const StepTime ta = estimate_time(m, g, accum);
  CHECK(ta.tokens_per_step == 2048);
  CHECK(ta.step_s == Approx(2 * t.step_s));
}

TEST_CASE("time: decode reads the weights and the KV cache at 80 % bandwidth",
          "[time]") {
  const Model m = toy_model();
  const Gpu g = toy_gpu(0);
  const Resolved s = resolve(m, g, Setup{.seq = 1024, .batch = 4});
  const StepTime t = estimate_time(m, g, s);
  // KV per token: 2 (K, V) x 2 layers x 8 heads x 128 x 2 B = 8,192 B; four
  // sequences at the average context of 512 tokens read 16 MiB per step.
  const Bytes kv = kv_bytes_per_token(m, s, 0, 2);
  CHECK(kv == 8192);
  const double weights =
      static_cast<double>(weight_bytes(m, s, WeightShare{0, 2, true, true}));
  CHECK(t.memory_s == Approx((weights + 4 * 512 * 8192.0) / (2000e9 * 0.8)));
  // Compute per step: 4 tokens x (2 N + attention) over 40 TFLOPS.
  CHECK(t.compute_s == Approx(4 * (2.0 * 34578432 + 4194304) / 40e12));
  CHECK(t.memory_s > t.compute_s);  // decode is memory-bound
  // ... but this toy is so small that eager transformers' per-layer launch
  // overhead (2 layers x 30 us) is the floor.
  CHECK(t.memory_s < 60e-6);
  CHECK(t.step_s == Approx(60e-6));
  CHECK(t.tokens_per_s == Approx(4 / t.step_s));
  // A 70B model reads 141 GB per step: memory-bound, far above the floor.
  const auto& cat = test::catalog();
  const Model& big = find_model(cat, "llama3-70b");
  const Gpu& h100 = find_gpu(cat, "H100");
  const StepTime bt =
      estimate_time(big, h100, resolve(big, h100, Setup{.gpus = 2}));
  CHECK(bt.step_s == Approx(bt.memory_s + bt.comm_s));
}

TEST_CASE("time: a price gives the cost per million tokens", "[time]") {
  const Model m = toy_model();
  const Gpu g = toy_gpu(0);
  const Resolved s = resolve(m, g, Setup{.gpus = 2, .seq = 1024, .price = 2.5});
  const StepTime t = estimate_time(m, g, s);
  // $2.50 per GPU-hour x 2 GPUs / (tokens per hour) x 1e6.
  CHECK(t.usd_per_mtok == Approx(2.5 * 2 / (t.tokens_per_s * 3600) * 1e6));
  CHECK(t.usd_per_mtok > 0);
}

TEST_CASE("time: mixture of experts counts only the active experts' FLOPs",
          "[time]") {
  Model moe = toy_model();
  moe.num_experts = 8;
  moe.experts_per_tok = 2;
  moe.moe_intermediate_size = 1024;
  const Gpu g = toy_gpu(0);
  const Resolved s = resolve(moe, g, Setup{.seq = 1024});
  const ParamCounts p = count_params(moe);
  // Routed experts: 2 layers x 8 x 3 x 1024 x 1024 = 50,331,648, of which a
  // token uses 2 of 8.
  REQUIRE(p.experts == 50331648);
  const double n =
      static_cast<double>(p.attention + p.mlp + p.shared_experts + p.router) +
      50331648.0 * 2 / 8 + 1000.0 * 1024;
  CHECK(estimate_time(moe, g, s).flops_per_step == Approx(2 * n + 4194304.0));
}

TEST_CASE("time: FSDP over PCIe is communication-bound, over NVLink it is not",
          "[time]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-8b");
  const Resolved s = resolve(model, Gpu{},
                             Setup{.gpus = 8,
                                   .mode = Mode::full,
                                   .seq = 1024,
                                   .zero = 3,
                                   .checkpointing = Checkpointing::full});
  // Every micro-batch all-gathers 16 GB of bf16 weights twice and
  // reduce-scatters 16 GB of gradients: 7/8 x 48 = 42 GB per GPU. PCIe 4 moves
  // 24 GB/s (75 % of 32): 1.75 s; NVLink 4 340 GB/s: 0.12 s. Compute per GPU:
  // 8 N x 1024 tokens = 6.6e13 FLOPs: 1.0 s at 40 % of the RTX 4090's 165
  // TFLOPS, 0.17 s on an H100.
  const StepTime pcie = estimate_time(model, find_gpu(cat, "RTX4090"), s);
  const StepTime nvlink = estimate_time(model, find_gpu(cat, "H100"), s);
  INFO("PCIe: compute " << pcie.compute_s << " s, comm " << pcie.comm_s
                        << " s; NVLink: compute " << nvlink.compute_s
                        << " s, comm " << nvlink.comm_s << " s");
  CHECK(pcie.no_nvlink);
  CHECK(pcie.comm_bound);
  CHECK_FALSE(nvlink.no_nvlink);
  CHECK_FALSE(nvlink.comm_bound);
  CHECK(pcie.comm_s > 5 * nvlink.comm_s);
}

TEST_CASE("time: vLLM decodes only as many sequences as its KV cache holds",
          "[time]") {
  const Planned p =
      plan_on("llama3-70b", "2xH100",
              Setup{.engine = Engine::vllm, .seq = 8192, .batch = 32});
  REQUIRE(p.budget.vllm.has_value());
  const std::int64_t held = p.budget.vllm->kv_tokens / 8192;
  REQUIRE(held < 32);  // 141 GB of weights leave a few GiB of KV per GPU
  const StepTime capped = estimate_time(*p.model, *p.gpu, p.setup, p.budget);
  const StepTime uncapped = estimate_time(*p.model, *p.gpu, p.setup);
  CHECK(capped.tokens_per_step ==
        static_cast<double>(std::max<std::int64_t>(1, held)));
  CHECK(uncapped.tokens_per_step == 32);
  CHECK(capped.tokens_per_s < uncapped.tokens_per_s);
  // Training ignores the budget.
  const Planned t = plan_on("llama3-8b", "1xH100", Setup{.mode = Mode::lora});
  CHECK(estimate_time(*t.model, *t.gpu, t.setup, t.budget).step_s ==
        estimate_time(*t.model, *t.gpu, t.setup).step_s);
}

TEST_CASE("time: MoE decode reads only the experts its tokens route to",
          "[time]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "mixtral-8x7b");
  const Gpu& gpu = find_gpu(cat, "H100");
  const Resolved one = resolve(model, gpu, Setup{.gpus = 2, .seq = 1024});
  Resolved many = one;
  many.batch = 256;
  const ParamCounts p = count_params(model);
  const double weights = static_cast<double>(
      weight_bytes(model, one, WeightShare{0, model.num_layers, true, true}));
  const double share =
      static_cast<double>(p.experts) / static_cast<double>(p.total());
  const double kv =
      static_cast<double>(kv_bytes_per_token(model, one, 0, model.num_layers));
  // Batch 1: 2 of 8 experts per layer, so 3/4 of the expert bytes stay idle.
  CHECK(estimate_time(model, gpu, one).memory_s ==
        Approx((weights * (1 - share * 0.75) + 512 * kv) /
               (gpu.bandwidth_gb_s * 1e9 * 0.8))
            .epsilon(0.01));
  // Batch 256: every expert is touched, all weights are read.
  CHECK(estimate_time(model, gpu, many).memory_s ==
        Approx((weights + 256 * 512 * kv) / (gpu.bandwidth_gb_s * 1e9 * 0.8))
            .epsilon(0.01));
}

TEST_CASE("time: preference training runs 2 x rows and the reference forward",
          "[time][preference]") {
  const Model m = toy_model();
  const Gpu g = toy_gpu(0);
  const Resolved s = resolve(m, g, Setup{.mode = Mode::full, .seq = 1024});
  // N = 34,578,432 and a = 4,194,304 as in the case above. ORPO: chosen and
  // rejected, 2 x 1024 tokens of (6 N + 3 a) each.
  Resolved orpo = s;
  orpo.objective = TrainObjective::orpo;
  const StepTime to = estimate_time(m, g, orpo);
  CHECK(to.tokens_per_step == 2048);
  CHECK(to.flops_per_step == Approx((6.0 * 34578432 + 3.0 * 4194304) * 2048));
  // DPO adds the reference's forward under no_grad (2 N + a per token):
  // (8 N + 4 a) x 2048.
  Resolved dpo = s;
  dpo.objective = TrainObjective::dpo;
  CHECK(estimate_time(m, g, dpo).flops_per_step ==
        Approx((8.0 * 34578432 + 4.0 * 4194304) * 2048));
  // Precomputed log-probs: no reference forward in the step.
  dpo.precompute_ref = true;
  CHECK(estimate_time(m, g, dpo).flops_per_step == Approx(to.flops_per_step));
}
