#include "support.hpp"

#include "oomplan/advice.hpp"
#include "oomplan/catalog.hpp"
#include "oomplan/memory.hpp"
#include "oomplan/report.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace oomplan;

struct Case {
  std::string model;
  std::string gpus;  // NxNAME
  Setup setup;
};

// The setups the fix tests loop over: inference (hf and vLLM), full
// fine-tuning, LoRA and QLoRA, fitting and not.
std::vector<Case> cases() {
  return {
      {"llama3-70b", "1xA100-80", Setup{.seq = 8192}},
      {"llama3-70b", "1xA100-80",
       Setup{.engine = Engine::vllm, .seq = 8192, .batch = 4}},
      {"llama3-70b", "4xA100-80", Setup{.mode = Mode::full}},
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 512}},
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 8192}},
      {"llama3-8b", "1xH100", Setup{.mode = Mode::full, .batch = 8}},
      {"llama3-8b", "1xRTX4090",
       Setup{.mode = Mode::lora, .batch = 4, .attn = Attn::eager}},
      {"llama-3.2-1b", "1xA100-40",
       Setup{.mode = Mode::full, .seq = 2048, .batch = 4}},
      {"mixtral-8x7b", "2xL40S", Setup{.seq = 16384, .batch = 8}},
  };
}

struct Planned {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Setup request;
  Resolved setup;
  Budget budget;
};

Planned plan_case(const Case& c) {
  const auto& cat = test::catalog();
  Planned p;
  p.model = &find_model(cat, c.model);
  const auto spec = parse_gpu_spec(cat, c.gpus);
  p.gpu = spec.gpu;
  p.request = c.setup;
  p.request.gpus = spec.count;
  p.setup = resolve(*p.model, *p.gpu, p.request);
  p.budget = test::budget(*p.model, *p.gpu, p.request);
  return p;
}

// The fix with `id`, or fixes.end().
std::vector<Fix>::const_iterator find_fix(const std::vector<Fix>& fixes,
                                          std::string_view id) {
  return std::find_if(fixes.begin(), fixes.end(),
                      [id](const Fix& f) { return f.id == id; });
}

}  // namespace

TEST_CASE("advice: every fix is re-priced by memory() and lowers the peak",
          "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    const Bytes base_total = p.budget.total_bytes();
    const auto fixes =
        advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
    INFO(c.model << " on " << c.gpus << ": "
                 << plan_args(c.model, *p.model, *p.gpu, p.request));
    for (std::size_t i = 0; i < fixes.size(); ++i) {
      const Fix& f = fixes[i];
      INFO("fix " << f.id << ": " << f.title);
      REQUIRE(f.gpu != nullptr);
      CHECK(f.rank == static_cast<int>(i + 1));
      // The fixed setup is valid; the pipeline reproduces the fix.
      CHECK_FALSE(check(*p.model, *f.gpu, f.request));
      const Budget b = test::budget(*p.model, *f.gpu, f.request);
      CHECK(b.total_bytes() == f.total_bytes);
      CHECK(b.fits() == f.fits);
      CHECK(f.saves_bytes == base_total - f.total_bytes);
      // Either it lowers the peak, or it turns a plan that does not fit into
      // one that does (a bigger card, vLLM's gpu-util or max-model-len).
      const bool lowers = f.total_bytes < base_total;
      const bool rescues = f.fits && !p.budget.fits();
      CHECK((lowers || rescues));
      CHECK(f.setup.total_gpus() >= 1);
      CHECK(!f.cost.empty());
    }
  }
}

TEST_CASE("advice: fixes that fit come first, then by cost class", "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    const auto fixes =
        advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
    INFO(c.model << " on " << c.gpus);
    for (std::size_t i = 1; i < fixes.size(); ++i) {
      const Fix& a = fixes[i - 1];
      const Fix& b = fixes[i];
      INFO(a.id << " before " << b.id);
      CHECK((a.fits || !b.fits));
      if (a.fits == b.fits) {
        CHECK(a.cost_class <= b.cost_class);
      }
    }
    // Deterministic: the same input gives the same list.
    const auto again =
        advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
    REQUIRE(again.size() == fixes.size());
    for (std::size_t i = 0; i < fixes.size(); ++i) {
      CHECK(again[i].id == fixes[i].id);
      CHECK(again[i].total_bytes == fixes[i].total_bytes);
    }
  }
}

TEST_CASE("advice: a free fix beats offload when both fit", "[advice]") {
  // Llama 3.2 1B full fine-tuning on one A100-40: find a micro-batch at which
  // both a smaller micro-batch and CPU offload make it fit.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama-3.2-1b");
  const Gpu& gpu = find_gpu(cat, "A100-40");
  bool found = false;
  for (const std::int64_t batch : {2, 4, 8, 16}) {
    const Setup s{.mode = Mode::full, .seq = 2048, .batch = batch};
    const auto fixes = advise(model, gpu, s, cat.gpus);
    const auto free_fix = std::find_if(
        fixes.begin(), fixes.end(),
        [](const Fix& f) { return f.id == "reduce-batch" && f.fits; });
    const auto offload_fix =
        std::find_if(fixes.begin(), fixes.end(), [](const Fix& f) {
          return f.cost_class == CostClass::offload && f.fits;
        });
    if (free_fix == fixes.end() || offload_fix == fixes.end()) {
      continue;
    }
    found = true;
    INFO("batch " << batch);
    CHECK(free_fix->rank < offload_fix->rank);
    CHECK(free_fix->cost_class == CostClass::free);
    // The micro-batch fix keeps the global batch with gradient accumulation.
    CHECK(free_fix->setup.batch * free_fix->setup.grad_accum == batch);
    // Offload is priced in time: slower than the free fix.
    CHECK(offload_fix->step_factor > free_fix->step_factor);
  }
  CHECK(found);
}

TEST_CASE(
    "advice: 70B inference on one 80 GB card: quantization before more GPUs "
    "(seed checklist)",
    "[advice]") {
  // Seed 000's checklist: free knobs first (batch, sequence length), then
  // quantization, then more GPUs; CPU offload last. 141 GB of bf16 weights do
  // not fit 80 GB, so no free knob fits and both quantization and a second
  // card do.
  const Planned p = plan_case({"llama3-70b", "1xA100-80", Setup{.seq = 8192}});
  REQUIRE_FALSE(p.budget.fits());
  const auto fixes = advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
  auto rank_of = [&fixes](std::string_view id) {
    const auto it = find_fix(fixes, id);
    return it == fixes.end() ? 0 : it->rank;
  };
  for (const Fix& f : fixes) {
    if (f.cost_class == CostClass::free) {
      CHECK_FALSE(f.fits);
    }
  }
  REQUIRE(rank_of("quantize-int8") > 0);
  REQUIRE(rank_of("more-gpus") > 0);
  CHECK(rank_of("quantize-int8") < rank_of("more-gpus"));
  // 8-bit weights carry less accuracy risk than 4-bit: listed first.
  CHECK(rank_of("quantize-int8") < rank_of("quantize-4bit"));
  CHECK(fixes.front().fits);
  // Two A100-80s hold the bf16 model with tensor parallelism (141 GB / 2).
  const auto more = find_fix(fixes, "more-gpus");
  CHECK(more->fits);
  CHECK(more->setup.total_gpus() == 2);
  CHECK(more->setup.tp == 2);
}

TEST_CASE(
    "advice: 70B QLoRA on two 24 GB cards: 512 tokens fit on the same cards, "
    "8k tokens need more hardware or shorter sequences (seed)",
    "[advice]") {
  // Seed 003: "2x24GB can run QLoRA 70B" holds for short sequences; at 4k-8k
  // aim for 4x24GB, 2x48GB or an 80 GB card.
  const Planned short_seq = plan_case(
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 512}});
  const Planned long_seq = plan_case(
      {"llama3-70b", "2xRTX4090", Setup{.mode = Mode::qlora, .seq = 8192}});
  const auto& gpus = test::catalog().gpus;
  const auto short_fixes =
      advise(*short_seq.model, *short_seq.gpu, short_seq.request, gpus);
  const auto long_fixes =
      advise(*long_seq.model, *long_seq.gpu, long_seq.request, gpus);
  REQUIRE_FALSE(short_fixes.empty());
  REQUIRE_FALSE(long_fixes.empty());
  auto same_hardware = [](const Fix& f, const Planned& p) {
    return f.gpu == p.gpu && f.setup.total_gpus() == p.setup.total_gpus();
  };
  // 512 tokens: the best fix fits on the same two cards.
  CHECK(short_fixes.front().fits);
  CHECK(same_hardware(short_fixes.front(), short_seq));
  // 8k tokens: every fix that fits adds hardware, cuts the sequence or leans
  // on CPU offload ("heavy offload", as the seed says).
  for (const Fix& f : long_fixes) {
    if (f.fits) {
      INFO(f.id << ": " << f.title);
      CHECK((!same_hardware(f, long_seq) || f.setup.seq < 8192 ||
             f.cost_class == CostClass::offload));
    }
  }
}

TEST_CASE("advice: a combination is offered when no single fix fits",
          "[advice]") {
  // Llama 3 70B full fine-tuning on 4 x A100-80: 1.13 TB of mixed-precision
  // AdamW states cannot fit 320 GB, so one change is never enough.
  const Planned p =
      plan_case({"llama3-70b", "4xA100-80", Setup{.mode = Mode::full}});
  const auto fixes = advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
  const auto combo = find_fix(fixes, "combination");
  REQUIRE(combo != fixes.end());
  CHECK(combo->fits);
  CHECK(combo->rank == 1);
  CHECK_THAT(combo->title, Catch::Contains(" + "));
  const Budget b = test::budget(*p.model, *combo->gpu, combo->request);
  CHECK(b.total_bytes() == combo->total_bytes);
  CHECK(b.fits());
}

TEST_CASE("advice: no fix is offered for what the setup already does",
          "[advice]") {
  // Flash attention, chunked loss and full checkpointing already on: none of
  // them is proposed again.
  const Planned p = plan_case({"llama3-8b", "1xRTX4090",
                               Setup{.mode = Mode::full,
                                     .checkpointing = Checkpointing::full,
                                     .loss = Loss::chunked}});
  const auto fixes = advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
  for (const Fix& f : fixes) {
    CHECK(f.id != "flash-attention");
    CHECK(f.id != "chunked-loss");
    CHECK(f.id != "checkpointing-full");
    CHECK(f.id != "checkpointing-selective");
  }
}

TEST_CASE("plan_args: writes the GPUs and only the options that differ",
          "[advice]") {
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "llama3-70b");
  const Gpu& a100 = find_gpu(cat, "A100-80");
  CHECK(plan_args("llama3-70b", model, a100, Setup{.gpus = 4, .seq = 8192}) ==
        "llama3-70b --gpus 4xA100-80 --seq 8192");
  CHECK(plan_args("llama3-70b", model, a100,
                  Setup{.gpus = 8,
                        .mode = Mode::full,
                        .zero = 3,
                        .checkpointing = Checkpointing::full}) ==
        "llama3-70b --gpus 8xA100-80 --mode full --zero 3 --checkpointing "
        "full");
  // tp other than the default and the vLLM options are written; a tp equal
  // to its default (4 GPUs: tp 4) and QLoRA's default nf4 are left out.
  CHECK(plan_args("llama3-70b", model, a100,
                  Setup{.gpus = 4,
                        .engine = Engine::vllm,
                        .tp = 2,
                        .gpu_util = 0.85,
                        .max_model_len = 2048}) ==
        "llama3-70b --gpus 4xA100-80 --engine vllm --tp 2 --gpu-util 0.85 "
        "--max-model-len 2048");
  CHECK(plan_args("llama3-70b", model, a100, Setup{.gpus = 4, .tp = 4}) ==
        "llama3-70b --gpus 4xA100-80");
  CHECK(plan_args("llama3-70b", model, a100,
                  Setup{.gpus = 2,
                        .mode = Mode::qlora,
                        .seq = 512,
                        .quant = Quant::nf4}) ==
        "llama3-70b --gpus 2xA100-80 --mode qlora --seq 512");
  // A path with a space is quoted for the shell.
  CHECK(plan_args("my models/config.json", model, a100, Setup{}) ==
        "'my models/config.json' --gpus 1xA100-80");
}

TEST_CASE("plan_args: every fix's command line reproduces its total and fit",
          "[advice]") {
  for (const Case& c : cases()) {
    const Planned p = plan_case(c);
    const auto fixes =
        advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
    for (const Fix& f : fixes) {
      const std::string args = plan_args(c.model, *p.model, *f.gpu, f.request);
      INFO(args);
      auto words = test::words(args);
      words.emplace_back("--json");
      const auto run = test::run_cli(words);
      REQUIRE(run.code != 2);
      const auto doc = nlohmann::json::parse(run.out);
      CHECK(doc.at("total_bytes").get<Bytes>() == f.total_bytes);
      CHECK(doc.at("fits").get<bool>() == f.fits);
      CHECK((run.code == 0) == f.fits);
    }
  }
}

namespace {

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
          "[advice]") {
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
          "[advice]") {
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

TEST_CASE("time: a price gives the cost per million tokens", "[advice]") {
  const Model m = toy_model();
  const Gpu g = toy_gpu(0);
  const Resolved s = resolve(m, g, Setup{.gpus = 2, .seq = 1024, .price = 2.5});
  const StepTime t = estimate_time(m, g, s);
  // $2.50 per GPU-hour x 2 GPUs / (tokens per hour) x 1e6.
  CHECK(t.usd_per_mtok == Approx(2.5 * 2 / (t.tokens_per_s * 3600) * 1e6));
  CHECK(t.usd_per_mtok > 0);
}

TEST_CASE("time: mixture of experts counts only the active experts' FLOPs",
          "[advice]") {
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
          "[advice]") {
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

TEST_CASE("advice: every catalog model gets fixes that memory() reproduces",
          "[advice]") {
  // A sweep: each model, inference and full fine-tuning on one card too small
  // for most of them. No fix may claim what memory() does not say.
  const auto& cat = test::catalog();
  const Gpu& gpu = find_gpu(cat, "RTX4090");
  for (const Model& model : cat.models) {
    for (const Setup& base :
         {Setup{.seq = 8192, .batch = 4}, Setup{.mode = Mode::full},
          Setup{.engine = Engine::vllm, .seq = 4096}}) {
      INFO(model.name << ": " << plan_args(model.name, model, gpu, base));
      const Budget b = test::budget(model, gpu, base);
      const auto fixes = advise(model, gpu, base, cat.gpus);
      if (!b.fits()) {
        CHECK_FALSE(fixes.empty());
      }
      for (const Fix& f : fixes) {
        INFO(f.id);
        const Budget fb = test::budget(model, *f.gpu, f.request);
        CHECK(fb.total_bytes() == f.total_bytes);
        CHECK(fb.fits() == f.fits);
        CHECK((f.total_bytes < b.total_bytes() || (f.fits && !b.fits())));
      }
    }
  }
}

TEST_CASE("advice: vLLM start-up failures get vLLM's own knobs and flags",
          "[advice]") {
  const auto& cat = test::catalog();
  const auto& gpus = cat.gpus;
  SECTION("free memory below gpu-util x capacity: lower gpu-util") {
    // gpu_memory_utilization 1.0 asks for the whole card, which the CUDA
    // context already holds part of.
    const Planned p =
        plan_case({"llama3-8b", "1xRTX4090",
                   Setup{.engine = Engine::vllm, .gpu_util = 1.0}});
    REQUIRE_FALSE(p.budget.fits());
    const auto fixes = advise(*p.model, *p.gpu, p.request, gpus);
    const auto util = find_fix(fixes, "gpu-util");
    REQUIRE(util != fixes.end());
    CHECK(util->fits);
    CHECK(util->setup.gpu_util < 1.0);
    CHECK(util->cost_class == CostClass::free);
    CHECK_THAT(util->engine_flags,
               Catch::StartsWith("--gpu-memory-utilization 0.9"));
  }
  SECTION("KV cache short of one max-model-len request (seed 000)") {
    const Planned p =
        plan_case({"llama-3.1-70b", "4xL40S",
                   Setup{.engine = Engine::vllm, .max_model_len = 131072}});
    REQUIRE_FALSE(p.budget.fits());
    const auto fixes = advise(*p.model, *p.gpu, p.request, gpus);
    REQUIRE_FALSE(fixes.empty());
    // The free knob comes first: the largest max-model-len that fits.
    CHECK(fixes.front().id == "max-model-len");
    CHECK(fixes.front().fits);
    CHECK(fixes.front().setup.max_model_len < 131072);
    CHECK(fixes.front().setup.max_model_len % 256 == 0);
    CHECK_THAT(fixes.front().engine_flags,
               Catch::StartsWith("--max-model-len "));
    // A slightly longer context no longer fits: the search found the edge.
    Setup longer = fixes.front().request;
    *longer.max_model_len += 256;
    CHECK_FALSE(fits(*p.model, *p.gpu, longer));
    const auto kv = find_fix(fixes, "fp8-kv-cache");
    REQUIRE(kv != fixes.end());
    CHECK(kv->fits);
    CHECK(kv->engine_flags == "--kv-cache-dtype fp8");
    const auto more = find_fix(fixes, "more-gpus");
    REQUIRE(more != fixes.end());
    CHECK(more->engine_flags == "--tensor-parallel-size 8");
    CHECK(more->rank > kv->rank);
  }
}

TEST_CASE("plan_args: every option survives the round trip through the CLI",
          "[advice]") {
  // One setup per group of options; each is planned in-process and through
  // `oomplan <plan_args>`: the totals must agree.
  const std::vector<Case> setups = {
      {"llama3-8b", "2xA100-80",
       Setup{.nodes = 2,
             .mode = Mode::full,
             .seq = 2048,
             .batch = 2,
             .dtype = Dtype::fp16,
             .tp = 2,
             .pp = 2,
             .sequence_parallel = true,
             .zero = 1,
             .checkpointing = Checkpointing::selective,
             .attn = Attn::sdpa,
             .grad_accum = 4}},
      {"llama3-8b", "4xH100",
       Setup{.mode = Mode::full,
             .fsdp = true,
             .offload = Offload::optimizer,
             .precision = Precision::pure,
             .optimizer = Optimizer::adamw_8bit,
             .compile = true,
             .loss = Loss::chunked,
             .activation_offload = true}},
      {"llama3-8b", "1xRTX4090",
       Setup{.mode = Mode::lora,
             .seq = 1024,
             .quant = Quant::int8,
             .optimizer = Optimizer::paged_adamw_8bit,
             .lora_rank = 64,
             .lora_targets = k_lora_q | k_lora_v,
             .optimizer_in_bwd = true,
             .overhead_gib = 0.75,
             .reserve = 0.1}},
      {"llama3-70b", "2xRTX4090",
       Setup{.mode = Mode::qlora,
             .seq = 512,
             .quant = Quant::nf4_nodq,
             .lora_targets = k_lora_attn}},
      {"llama3-70b", "4xL40S",
       Setup{.engine = Engine::vllm,
             .seq = 2048,
             .batch = 16,
             .kv_dtype = Dtype::fp8,
             .gpu_util = 0.85,
             .max_num_batched_tokens = 4096,
             .enforce_eager = true,
             .max_model_len = 16384,
             .max_num_seqs = 64}},
      {"llama3-70b", "8xA100-80",
       Setup{.engine = Engine::vllm,
             .tp = 4,
             .pp = 2,
             .vllm_version = VllmEra::v0}},
      {"llama3-70b", "3xA100-80",
       Setup{.seq = 1024, .split_layers = true, .price = 2.5}},
      {"mixtral-8x7b", "2xA100-80",
       Setup{.seq = 8192, .quant = Quant::awq, .kv_dtype = Dtype::bf16}},
  };
  for (const Case& c : setups) {
    const Planned p = plan_case(c);
    const std::string args = plan_args(c.model, *p.model, *p.gpu, p.request);
    INFO(args);
    auto words = test::words(args);
    words.emplace_back("--json");
    const auto run = test::run_cli(words);
    REQUIRE(run.code != 2);
    const auto doc = nlohmann::json::parse(run.out);
    CHECK(doc.at("total_bytes").get<Bytes>() == p.budget.total_bytes());
    CHECK(doc.at("fits").get<bool>() == p.budget.fits());
  }
}

TEST_CASE("time: vLLM decodes only as many sequences as its KV cache holds",
          "[advice]") {
  const Planned p =
      plan_case({"llama3-70b", "2xH100",
                 Setup{.engine = Engine::vllm, .seq = 8192, .batch = 32}});
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
  const Planned t =
      plan_case({"llama3-8b", "1xH100", Setup{.mode = Mode::lora}});
  CHECK(estimate_time(*t.model, *t.gpu, t.setup, t.budget).step_s ==
        estimate_time(*t.model, *t.gpu, t.setup).step_s);
}

TEST_CASE("time: MoE decode reads only the experts its tokens route to",
          "[advice]") {
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

TEST_CASE(
    "advice: a shorter sequence does not hide a fix that keeps the sequence",
    "[advice]") {
  // LoRA on Llama 3 8B at 8k tokens, micro-batch 2, on one L40S: cutting
  // the sequence fits, but so does keeping it with cheap changes
  // (checkpointing, a smaller micro-batch), which must be offered too.
  const Planned p =
      plan_case({"llama3-8b", "1xL40S",
                 Setup{.mode = Mode::lora, .seq = 8192, .batch = 2}});
  REQUIRE_FALSE(p.budget.fits());
  const auto fixes = advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
  const bool keeps_sequence =
      std::any_of(fixes.begin(), fixes.end(), [](const Fix& f) {
        return f.fits && f.setup.seq == 8192 &&
               f.cost_class <= CostClass::compute;
      });
  CHECK(keeps_sequence);
}

TEST_CASE("plan_args: each vLLM era's written version reads back to that era",
          "[advice]") {
  CHECK(vllm_era_version(VllmEra::v0) == "0.6");
  CHECK(vllm_era_version(VllmEra::v1_early) == "0.10");
  CHECK(vllm_era_version(VllmEra::current).empty());  // the default: unwritten
  for (const VllmEra era : {VllmEra::v0, VllmEra::v1_early}) {
    CHECK(vllm_era_from_text(vllm_era_version(era)) == era);
  }
}

TEST_CASE("advice: a bigger card gets that card's vLLM scheduler default",
          "[advice]") {
  // Qwen3-32B on one A100-80 with vLLM: the A100's default budget is 2048
  // batched tokens (arg_utils.py get_batch_defaults); 40960-token requests
  // do not fit its KV pool. On an H200 the default is 8192, and the fix's
  // command line (which leaves the budget out) must price the same setup.
  const Planned p =
      plan_case({"qwen3-32b", "1xA100-80",
                 Setup{.engine = Engine::vllm, .max_model_len = 40960}});
  REQUIRE(p.setup.max_num_batched_tokens == 2048);
  REQUIRE_FALSE(p.budget.fits());
  const auto fixes = advise(*p.model, *p.gpu, p.request, test::catalog().gpus);
  const auto bigger = find_fix(fixes, "bigger-gpu");
  REQUIRE(bigger != fixes.end());
  CHECK(bigger->gpu->name == "H200");
  CHECK(bigger->setup.max_num_batched_tokens == 8192);
  const auto rerun = test::run_cli(test::words(
      "qwen3-32b --gpus 1xH200 --engine vllm --max-model-len 40960 --json"));
  REQUIRE(rerun.code == 0);
  CHECK(nlohmann::json::parse(rerun.out).at("total_bytes").get<Bytes>() ==
        bigger->total_bytes);
}
