#include "support.hpp"

#include "oomplan/memory.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// Training memory (src/memory_train.cpp): hand-derived values, published
// measurements with their tolerance, and the properties of issue 3 §6.

namespace {

using namespace oomplan;
using test::llama2_7b;
using test::llama3_70b;

constexpr double k_gib_d = 1024.0 * 1024.0 * 1024.0;

// Llama-3.2-1B dimensions by hand: h 2048, 16 layers, 32 heads, 8 KV heads,
// head_dim 64, I 8192, the 128,256-token vocabulary, tied embeddings.
Model llama32_1b() {
  Model m = llama3_70b();
  m.hidden_size = 2048;
  m.num_layers = 16;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 64;
  m.intermediate_size = 8192;
  m.tie_word_embeddings = true;
  return m;
}

// A GPT-2-style model (LayerNorm, GELU MLP of 4h, biases, learned positions,
// dropout, tied embeddings), as validation/configs/{gpt3-175b,
// zero-paper-7.5b} describe.
Model gpt2_style(std::int64_t hidden, std::int64_t layers, std::int64_t heads,
                 std::int64_t positions) {
  Model m;
  m.name = "gpt2-style";
  m.model_type = "gpt2";
  m.hidden_size = hidden;
  m.num_layers = layers;
  m.num_heads = heads;
  m.num_kv_heads = heads;
  m.head_dim = hidden / heads;
  m.intermediate_size = 4 * hidden;
  m.vocab_size = 50257;
  m.max_position_embeddings = positions;
  m.learned_positions = positions;
  m.tie_word_embeddings = true;
  m.mlp = MlpKind::plain;
  m.norm = NormKind::layer_norm;
  m.qkv_bias = true;
  m.o_bias = true;
  m.mlp_bias = true;
  return m;
}

Gpu card(std::string name, double gib) {
  Gpu g;
  g.name = std::move(name);
  g.compute_capability = 80;
  g.capacity_bytes = static_cast<Bytes>(gib * k_gib_d);
  g.nvlink_gb_s = 600;
  return g;
}

Budget plan(const Model& m, const Gpu& g, Setup s) {
  return test::budget(m, g, s);
}

Bytes states(const Budget& b) {
  return b.bytes_of("weights") + b.bytes_of("gradients") +
         b.bytes_of("optimizer");
}

double params_of(const Model& m) {
  return static_cast<double>(count_params(m).total());
}

}  // namespace

TEST_CASE(
    "training: mixed AdamW model states of 70B are 16 B/param and do not "
    "fit 4x80 GB",
    "[training]") {
  const Model m = llama3_70b();
  REQUIRE(count_params(m).total() == 70'553'706'496);
  const Gpu g = card("A100-80", 79.21);
  // One GPU's view without sharding: weights 2 B, optimizer 4 + 4 + 4 B.
  const Budget b = plan(m, g, {.gpus = 4, .mode = Mode::full, .seq = 2048});
  CHECK(b.bytes_of("weights") == 2 * 70'553'706'496);
  CHECK(b.bytes_of("optimizer") == 12 * 70'553'706'496);
  // 70.55e9 x 16 B = 1.13 TB of model states in all: even sharded over 4
  // GPUs (ZeRO-3, 282 GB each) they do not fit 80 GB cards.
  CHECK_FALSE(b.fits());
  const Budget z3 =
      plan(m, g, {.gpus = 4, .mode = Mode::full, .seq = 2048, .zero = 3});
  CHECK(states(z3) >= 16 * 70'553'706'496 / 4 - 16);
  CHECK_FALSE(z3.fits());
  // What does fit: ZeRO-3 with the optimizer (and its fp32 gradients) in
  // CPU RAM and full activation checkpointing.
  const Budget off = plan(m, g,
                          {.gpus = 4,
                           .mode = Mode::full,
                           .seq = 2048,
                           .zero = 3,
                           .offload = Offload::optimizer,
                           .checkpointing = Checkpointing::full});
  CHECK(off.fits());
  CHECK(off.bytes_of("weights") == 2 * 70'553'706'496 / 4);
  CHECK(off.bytes_of("optimizer") == 0);
  CHECK(off.has(Warning::host_memory));
  // Host: 4 GPUs x (12 B states + 4 B fp32 grads + 2 B grads) x N / 4.
  CHECK(off.host_bytes == round_bytes(18.0 * 70'553'706'496.0));
}

TEST_CASE("training: ZeRO stages shard model states as the ZeRO paper states",
          "[training]") {
  // ZeRO paper Figure 1: Psi = 7.5B, N_d = 64, K = 12. A GPT-2-style 36 x
  // 4096 model has 7.46e9 parameters.
  const Model m = gpt2_style(4096, 36, 32, 1024);
  const double psi = params_of(m);
  REQUIRE(psi == Approx(7.5e9).epsilon(0.01));
  const Gpu v100 = card("V100-32", 31.75);
  auto at = [&](int zero) {
    return plan(m, v100,
                {.gpus = 8,
                 .nodes = 8,
                 .mode = Mode::full,
                 .seq = 1024,
                 .dtype = Dtype::fp16,
                 .zero = zero});
  };
  // Stage 0: (2 + 2 + 12) Psi, published 120 GB.
  CHECK(static_cast<double>(states(at(0))) == Approx(16.0 * psi));
  CHECK(static_cast<double>(states(at(0))) == Approx(120e9).epsilon(0.03));
  // Stage 1: 2 Psi + 2 Psi + 12 Psi / 64, published 31.4 GB (fp16: the
  // gradients stay 16-bit and live through the step).
  CHECK(static_cast<double>(states(at(1))) ==
        Approx(4.0 * psi + 12.0 * psi / 64.0));
  CHECK(static_cast<double>(states(at(1))) == Approx(31.4e9).epsilon(0.03));
  // Stage 2: 2 Psi + 14 Psi / 64, published 16.6 GB.
  CHECK(static_cast<double>(states(at(2))) ==
        Approx(2.0 * psi + 14.0 * psi / 64.0));
  CHECK(static_cast<double>(states(at(2))) == Approx(16.6e9).epsilon(0.03));
  // Stage 3: 16 Psi / 64, published 1.9 GB; the gathered layers are a
  // separate component.
  const Budget z3 = at(3);
  CHECK(static_cast<double>(states(z3)) == Approx(16.0 * psi / 64.0));
  CHECK(static_cast<double>(states(z3)) == Approx(1.9e9).epsilon(0.1));
  CHECK(z3.bytes_of("buffers") > 0);
}

TEST_CASE(
    "training: GPT-3 175B activations match Korthikanti et al. Table 2 "
    "exactly",
    "[training]") {
  const Model m = gpt2_style(12288, 96, 96, 2048);
  const Gpu g = card("A100-80", 79.21);
  Setup s{.gpus = 1,
          .mode = Mode::full,
          .seq = 2048,
          .dtype = Dtype::fp16,
          .attn = Attn::eager};
  // sbh = 2048 x 12288 = 25,165,824; 5as/h = 5 x 96 x 2048 / 12288 = 80.
  // L x sbh x (34 + 80) = 275,414,777,856 B; the final LayerNorm adds its
  // input and output, 4 sbh = 100,663,296.
  const Budget none = plan(m, g, s);
  CHECK(none.bytes_of("activations") == 275'414'777'856 + 100'663'296);
  // Tensor parallel 8 without sequence parallelism: sbh (10 + 24/8 + 80/8)
  // = 23 sbh per layer = 55,566,139,392; the final norm is replicated.
  s.gpus = 8;
  s.tp = 8;
  const Budget tp8 = plan(m, g, s);
  CHECK(tp8.bytes_of("activations") == 55'566'139'392 + 100'663'296);
  // With sequence parallelism everything divides by t: 114 / 8 sbh.
  s.sequence_parallel = true;
  const Budget sp = plan(m, g, s);
  CHECK(sp.bytes_of("activations") == (275'414'777'856 + 100'663'296) / 8);
  // Selective recomputation: 34 sbh per layer = 82,141,249,536 stored, plus
  // one layer's attention scores recomputed in backward (5as^2b =
  // 2,013,265,920) while it runs (published: 82.14e9 within 10 %).
  s = {.gpus = 1,
       .mode = Mode::full,
       .seq = 2048,
       .dtype = Dtype::fp16,
       .checkpointing = Checkpointing::selective,
       .attn = Attn::eager};
  const Budget sel = plan(m, g, s);
  CHECK(static_cast<double>(sel.bytes_of("activations")) ==
        Approx(82'141'249'536.0).epsilon(0.1));
  CHECK(sel.bytes_of("activations") >= 82'141'249'536 + 2'013'265'920);
}

TEST_CASE("training: LoRA adapters, grads and states are counted per rule",
          "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  // r 8 on q and v: 32 layers x 2 x 8 x (4096 + 4096) = 4,194,304 params.
  const Budget b = plan(m, g,
                        {.mode = Mode::lora,
                         .seq = 512,
                         .batch = 2,
                         .lora_rank = 8,
                         .lora_targets = k_lora_q | k_lora_v});
  // Frozen bf16 base (6,738,415,616 x 2 B) + fp32 adapters (4 B each).
  CHECK(b.bytes_of("weights") == 2 * 6'738'415'616 + 4 * 4'194'304);
  // AdamW m and v in fp32, no master copy: 8 B per adapter parameter.
  CHECK(b.bytes_of("optimizer") == 8 * 4'194'304);
  // Pure precision keeps adapters and states in bf16 (torchtune).
  const Budget pure = plan(m, g,
                           {.mode = Mode::lora,
                            .seq = 512,
                            .batch = 2,
                            .precision = Precision::pure,
                            .lora_rank = 8,
                            .lora_targets = k_lora_q | k_lora_v});
  CHECK(pure.bytes_of("weights") == 2 * 6'738'415'616 + 2 * 4'194'304);
  CHECK(pure.bytes_of("optimizer") == 4 * 4'194'304);
}

TEST_CASE("training: QLoRA stores the base in NF4 and shards it under FSDP",
          "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::qlora, .seq = 512, .batch = 2};
  const Budget q = plan(m, g, s);
  const Resolved base = resolve(m, g, s);
  REQUIRE(base.quant == Quant::nf4);
  const Bytes nf4 = weight_bytes(m, base, WeightShare{0, 32, true, true});
  // r 16 on all 7 projections: 32 x 16 x (4 x 8192 + 3 x 15104) =
  // 39,976,960 adapter parameters in fp32.
  CHECK(q.bytes_of("weights") == nf4 + 4 * 39'976'960);
  // About a quarter of the bf16 base.
  CHECK(q.bytes_of("weights") < 2 * 6'738'415'616 / 3);
  // The dequantized weight of the largest matrix (4096 x 11008 x 2 B) is a
  // transient buffer.
  CHECK(q.bytes_of("buffers") >= 4096 * 11008 * 2);
  s.gpus = 4;
  s.fsdp = true;
  const Budget sharded = plan(m, g, s);
  CHECK(sharded.bytes_of("weights") < q.bytes_of("weights") / 3);
}

TEST_CASE(
    "training: paged optimizer states are on the device but not in "
    "allocated",
    "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  const Budget b = plan(m, g,
                        {.mode = Mode::full,
                         .seq = 2048,
                         .batch = 4,
                         .checkpointing = Checkpointing::full,
                         .precision = Precision::pure,
                         .optimizer = Optimizer::paged_adamw,
                         .optimizer_in_bwd = true});
  CHECK(b.has(Warning::paged_unified_memory));
  // fp32 m and v: 8 B x 6,738,415,616 = 53.9 GB, in the optimizer
  // component and the device total, not in max_memory_allocated.
  CHECK(b.bytes_of("optimizer") == 8 * 6'738'415'616);
  CHECK(b.peak.allocated_bytes + 8 * 6'738'415'616 <= b.peak.device_bytes);
  CHECK(b.peak.device_bytes == b.total_bytes());
  // On a 24 GB card the pages that do not fit spill to host RAM.
  const Budget small = plan(m, card("RTX4090", 23.99),
                            {.mode = Mode::full,
                             .seq = 2048,
                             .batch = 4,
                             .checkpointing = Checkpointing::full,
                             .precision = Precision::pure,
                             .optimizer = Optimizer::paged_adamw,
                             .optimizer_in_bwd = true});
  CHECK(small.fits());
  CHECK(small.host_bytes > 0);
  CHECK(small.bytes_of("optimizer") < 8 * 6'738'415'616);
}

TEST_CASE(
    "training: Llama 3's 128,256-token vocabulary makes full-loss logits "
    "GiBs",
    "[training]") {
  const Model m = llama3_70b();
  const Gpu g = card("H100", 79.19);
  Setup s{.gpus = 8,
          .mode = Mode::lora,
          .seq = 8192,
          .fsdp = true,
          .checkpointing = Checkpointing::full};
  const Budget full = plan(m, g, s);
  // Backward starts with the fp32 logits the loop still references, the
  // fp32 log-softmax output, its gradient and the logits' gradient:
  // 8192 x 128,256 x 16 B = 16,810,770,432.
  CHECK(full.peak.phase == Phase::backward);
  CHECK(full.bytes_of("logits") == 16'810'770'432);
  s.loss = Loss::chunked;
  const Budget chunked = plan(m, g, s);
  CHECK(chunked.bytes_of("logits") <= full.bytes_of("logits") / 2);
  CHECK(chunked.peak.allocated_bytes < full.peak.allocated_bytes);
}

TEST_CASE(
    "training: compiled chunked cross-entropy keeps the 16-bit logits and "
    "one chunk's 16-bit gradient",
    "[training]") {
  // Llama-3.2-1B dimensions: a small body under a 128,256-token vocabulary,
  // so the start of backward (logits plus their gradient) is the peak.
  const Model m = llama32_1b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::lora,
          .seq = 4096,
          .batch = 2,
          .checkpointing = Checkpointing::full,
          .attn = Attn::sdpa,
          .compile = true,
          .loss = Loss::chunked};
  const Budget b = plan(m, g, s);
  // 8192 x 128,256 = 1,050,673,152 logits. Backward starts with the bf16
  // chunks kept since forward (2 B) plus one chunk's bf16 gradient (inductor
  // writes it in the input dtype, no fp32 chunk): 2 + 2/8 = 2.25 B,
  // 2,364,014,592.
  CHECK(b.peak.phase == Phase::backward);
  CHECK(b.bytes_of("logits") == 2'364'014'592);
}

TEST_CASE(
    "training: under optimizer-in-backward the tied head's gradient lives "
    "from the loss to the embedding",
    "[training]") {
  // Llama-3.2-1B dimensions with tied embeddings, full fine-tuning in bf16.
  const Model m = llama32_1b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::full,
          .seq = 4096,
          .batch = 2,
          .checkpointing = Checkpointing::full,
          .attn = Attn::sdpa,
          .precision = Precision::pure,
          .compile = true,
          .optimizer_in_bwd = true,
          .loss = Loss::chunked};
  const Budget b = plan(m, g, s);
  // Autograd sums the shared weight's gradient over the 8 loss chunks and
  // the embedding before its hook steps it: 128,256 x 2048 x 2 B =
  // 525,336,576 B, already there at the start of backward, the peak here
  // (the logits and one chunk's gradient: 8192 x 128,256 x 2.25 B).
  CHECK(b.peak.phase == Phase::backward);
  CHECK(b.bytes_of("logits") == 2'364'014'592);
  CHECK(b.bytes_of("gradients") == 525'336'576);
}

TEST_CASE("training: optimizer in backward drops the full gradient buffer",
          "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::full,
          .seq = 2048,
          .checkpointing = Checkpointing::full,
          .precision = Precision::pure};
  const Budget b = plan(m, g, s);
  s.optimizer_in_bwd = true;
  const Budget fused = plan(m, g, s);
  // The full bf16 gradient buffer is 2 x 6,738,415,616 B; in backward only
  // the largest parameter's (the 32000 x 4096 embedding) exists.
  CHECK(fused.bytes_of("gradients") <= 32000 * 4096 * 2);
  CHECK(fused.peak.allocated_bytes < b.peak.allocated_bytes - 6'738'415'616);
}

TEST_CASE("training: the first pipeline stage holds pp micro-batches",
          "[training]") {
  const Model m = llama3_70b();
  const Gpu g = card("H100", 79.19);
  const Budget b = plan(m, g,
                        {.gpus = 4,
                         .mode = Mode::full,
                         .seq = 4096,
                         .pp = 4,
                         .checkpointing = Checkpointing::full,
                         .grad_accum = 8});
  REQUIRE(b.stages.size() == 4);
  CHECK(b.stages[0].layers == 20);
  // Stored layer inputs: 20 layers x 4096 x 8192 x 2 B x (pp - stage).
  const Bytes one = 20LL * 4096 * 8192 * 2;
  CHECK(b.stages[0].activations_bytes > 4 * one);
  CHECK(b.stages[3].activations_bytes < 2 * one + 4'000'000'000);
  CHECK(b.stages[0].activations_bytes - b.stages[1].activations_bytes == one);
  // The most loaded stage is the plan's total (up to per-component
  // rounding).
  Bytes most = 0;
  for (const Stage& st : b.stages) {
    most = std::max(most, st.total_bytes);
  }
  CHECK(std::abs(most - b.total_bytes()) <= 8);
}

TEST_CASE("training: checkpointing never raises the peak", "[training]") {
  const Gpu g = card("H100", 79.19);
  for (const Model& m :
       {llama3_70b(), llama2_7b(), gpt2_style(1600, 48, 25, 1024)}) {
    for (Mode mode : {Mode::full, Mode::lora, Mode::qlora}) {
      for (Attn attn : {Attn::eager, Attn::flash}) {
        for (std::int64_t seq : {512, 4096}) {
          INFO(m.name << " mode " << mode_name(mode) << " attn "
                      << attn_name(attn) << " seq " << seq);
          Setup s{.gpus = 8, .mode = mode, .seq = seq, .batch = 2};
          s.fsdp = true;
          s.attn = attn;
          s.checkpointing = Checkpointing::none;
          const Bytes none = plan(m, g, s).peak.allocated_bytes;
          s.checkpointing = Checkpointing::selective;
          const Bytes selective = plan(m, g, s).peak.allocated_bytes;
          s.checkpointing = Checkpointing::full;
          const Bytes full = plan(m, g, s).peak.allocated_bytes;
          CHECK(selective <= none);
          CHECK(full <= selective);
        }
      }
    }
  }
}

TEST_CASE("training: ZeRO stage k+1 never raises per-GPU model states",
          "[training]") {
  const Gpu g = card("H100", 79.19);
  for (const Model& m : {llama3_70b(), llama2_7b()}) {
    for (int gpus : {2, 8}) {
      for (Optimizer opt : {Optimizer::adamw, Optimizer::adamw_8bit}) {
        for (std::int64_t seq : {128, 4096}) {
          for (Precision precision : {Precision::mixed, Precision::pure}) {
            INFO(m.name << " gpus " << gpus << " seq " << seq << " "
                        << precision_name(precision));
            Bytes previous_states = -1;
            Bytes previous_peak = -1;
            for (int zero = 0; zero <= 3; ++zero) {
              Setup s{.gpus = gpus, .mode = Mode::full, .seq = seq};
              s.zero = zero;
              s.optimizer = opt;
              s.precision = precision;
              const Budget b = plan(m, g, s);
              if (previous_states >= 0) {
                CHECK(states(b) <= previous_states);
                CHECK(b.peak.allocated_bytes <= previous_peak);
              }
              previous_states = states(b);
              previous_peak = b.peak.allocated_bytes;
            }
          }
        }
      }
    }
  }
}

TEST_CASE(
    "training: more data-parallel GPUs never raise per-GPU memory under "
    "ZeRO-3",
    "[training]") {
  const Gpu g = card("H100", 79.19);
  for (const Model& m : {llama3_70b(), llama2_7b()}) {
    for (Mode mode : {Mode::full, Mode::lora, Mode::qlora}) {
      for (Offload offload : {Offload::none, Offload::optimizer}) {
        Bytes previous = -1;
        Bytes previous_device = -1;
        for (int nodes : {1, 2, 4}) {
          for (int gpus : {2, 4, 8}) {
            if (nodes > 1 && gpus != 8) {
              continue;
            }
            INFO(m.name << " " << mode_name(mode) << " " << gpus << "x"
                        << nodes);
            Setup s{.gpus = gpus,
                    .nodes = nodes,
                    .mode = mode,
                    .seq = 2048,
                    .zero = 3};
            s.offload = offload;
            const Budget b = plan(m, g, s);
            const Bytes alloc = b.peak.allocated_bytes;
            if (previous >= 0) {
              CHECK(alloc <= previous);
              CHECK(b.peak.device_bytes <= previous_device);
            }
            previous = alloc;
            previous_device = b.peak.device_bytes;
          }
        }
      }
    }
  }
}

TEST_CASE("training: components sum to the total and peaks are ordered",
          "[training]") {
  const Model m = llama3_70b();
  const Gpu g = card("H100", 79.19);
  const Budget b = plan(m, g,
                        {.gpus = 8,
                         .mode = Mode::qlora,
                         .seq = 4096,
                         .fsdp = true,
                         .offload = Offload::all,
                         .checkpointing = Checkpointing::full});
  Bytes sum = 0;
  for (std::size_t i = 0; i < b.count; ++i) {
    CHECK(b.components[i].bytes >= 0);
    CHECK_FALSE(b.components[i].formula.empty());
    sum += b.components[i].bytes;
  }
  CHECK(sum == b.total_bytes());
  CHECK(b.peak.allocated_bytes <= b.peak.reserved_bytes);
  CHECK(b.peak.reserved_bytes <= b.peak.device_bytes);
  CHECK(b.peak.device_bytes == b.total_bytes());
  // Offloaded base: nothing but the adapters' share stays; host RAM holds
  // the rest for all 8 ranks of the node.
  CHECK(b.bytes_of("weights") == 0);
  CHECK(b.host_bytes > 0);
  CHECK(b.has(Warning::host_memory));
}

TEST_CASE("training: extreme sizes do not overflow", "[training]") {
  const Model m = llama3_70b();
  const Gpu g = card("H100", 79.19);
  const Budget b = plan(m, g,
                        {.gpus = 8,
                         .nodes = 12'500,
                         .mode = Mode::full,
                         .seq = 10'000'000,
                         .batch = 1'000'000,
                         .attn = Attn::eager});
  CHECK(b.total_bytes() > 0);
  CHECK_FALSE(b.fits());
}

// Published measurements (tests/data/training_published.json, copied from
// shared/validation/public.json with their tolerance) through the CLI.
TEST_CASE("training: published training peaks are within their tolerance",
          "[training]") {
  std::ifstream file(std::string(OOMPLAN_TEST_DATA) +
                     "/training_published.json");
  REQUIRE(file.good());
  const nlohmann::json cases = nlohmann::json::parse(file);
  REQUIRE(cases.at("checks").size() >= 20);
  for (const nlohmann::json& c : cases.at("checks")) {
    INFO(c.at("id").get<std::string>());
    std::vector<std::string> args =
        c.at("args").get<std::vector<std::string>>();
    for (std::string& arg : args) {
      if (arg.rfind("configs/", 0) == 0) {
        arg = std::string(OOMPLAN_TEST_DATA) + "/hf/" + arg.substr(8);
      }
    }
    const test::CliResult r = test::run_cli(args);
    INFO(r.err);
    REQUIRE(r.code != 2);
    const nlohmann::json plan_json = nlohmann::json::parse(r.out);
    const std::string metric = c.at("metric").get<std::string>();
    if (metric == "fits") {
      CHECK(plan_json.at("fits").get<bool>() == c.at("expected").get<bool>());
      continue;
    }
    double predicted = 0;
    std::stringstream terms(metric);
    std::string term;
    while (std::getline(terms, term, '+')) {
      if (term.rfind("components.", 0) == 0) {
        const std::string name =
            term.substr(11, term.size() - 11 - std::string(".bytes").size());
        for (const nlohmann::json& comp : plan_json.at("components")) {
          if (comp.at("name") == name) {
            predicted += comp.at("bytes").get<double>();
          }
        }
      } else if (term.rfind("peak.", 0) == 0) {
        predicted += plan_json.at("peak").at(term.substr(5)).get<double>();
      } else {
        predicted += plan_json.at(term).get<double>();
      }
    }
    const double expected = c.at("expected").get<double>();
    const double tolerance =
        std::max(c.at("tolerance").get<double>() * expected,
                 c.value("abs_tolerance", 0.0));
    INFO("predicted " << predicted / k_gib_d << " GiB, published "
                      << expected / k_gib_d << " GiB");
    CHECK(std::abs(predicted - expected) <= tolerance);
  }
}

TEST_CASE("training: gradient accumulation keeps gradients through forward",
          "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::full,
          .seq = 2048,
          .batch = 4,
          .checkpointing = Checkpointing::none,
          .precision = Precision::pure};
  const Budget one = plan(m, g, s);
  s.grad_accum = 4;
  const Budget four = plan(m, g, s);
  // pure bf16 frees gradients after each step (set_to_none); with
  // accumulation the 2 B x 6,738,415,616 buffer lives through the next
  // micro-batch's forward and backward.
  CHECK(one.peak.phase == Phase::backward);
  CHECK(four.bytes_of("gradients") == 2 * 6'738'415'616);
  CHECK(four.peak.allocated_bytes > one.peak.allocated_bytes);
}

TEST_CASE("training: warnings name eager scores, PCIe sharding and offload",
          "[training]") {
  const Model m = llama2_7b();
  Gpu pcie = card("RTX4090", 23.99);
  pcie.nvlink_gb_s = 0;
  pcie.compute_capability = 89;
  const Budget b = plan(m, pcie,
                        {.gpus = 4,
                         .mode = Mode::qlora,
                         .seq = 8192,
                         .fsdp = true,
                         .offload = Offload::all,
                         .attn = Attn::eager});
  CHECK(b.has(Warning::eager_attention_s2));
  CHECK(b.has(Warning::no_nvlink));
  CHECK(b.has(Warning::seq_beyond_context));
  CHECK(b.has(Warning::host_memory));
  CHECK_FALSE(b.has(Warning::paged_unified_memory));
}

TEST_CASE("training: sequence parallelism divides the replicated terms",
          "[training]") {
  const Model m = llama3_70b();
  const Gpu g = card("H100", 79.19);
  Setup s{.gpus = 8,
          .mode = Mode::full,
          .seq = 8192,
          .tp = 8,
          .zero = 1,
          .checkpointing = Checkpointing::full};
  const Budget tp = plan(m, g, s);
  s.sequence_parallel = true;
  const Budget sp = plan(m, g, s);
  CHECK(sp.bytes_of("activations") < tp.bytes_of("activations"));
  // Checkpointed layer inputs: 80 x 8192 x 8192 x 2 B, split 8 ways with SP.
  CHECK(sp.bytes_of("activations") <
        80LL * 8192 * 8192 * 2 / 8 + 4'000'000'000);
}

TEST_CASE("training: MoE LoRA puts MLP adapters on every expert",
          "[training]") {
  Model m = llama2_7b();
  m.name = "toy-moe";
  m.num_experts = 8;
  m.experts_per_tok = 2;
  m.moe_intermediate_size = 11008;
  const Gpu g = card("H100", 79.19);
  const Setup s{.mode = Mode::lora,
                .seq = 512,
                .lora_rank = 8,
                .lora_targets = k_lora_down};
  // down_proj adapters: 32 layers x 8 experts x 8 x (11008 + 4096)
  // = 30,932,992 fp32 parameters with 8 B of AdamW states each.
  CHECK(plan(m, g, s).bytes_of("optimizer") == 8 * 30'932'992);
}

TEST_CASE("training: Llama activations per layer follow the saved tensors",
          "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  Setup s{.mode = Mode::full,
          .seq = 8192,
          .attn = Attn::sdpa,
          .precision = Precision::pure};
  // Per token and layer, bf16 (h 4096, I 11008, 32 heads = 32 KV heads):
  //   2 RMSNorms x (fp32 input copy 4 B + normalised copy 2 B) x h = 49,152
  //   norm outputs feeding q/k/v and gate/up: 2 x 2 B x h          = 16,384
  //   q, k, v for sdpa, its output, the o_proj input: 5 x 2 B x h  = 40,960
  //   SwiGLU gate, act, up, product: 4 x 2 B x I                   = 88,064
  // = 194,560 B; x 8192 tokens x 32 layers = 51,002,736,640, plus the
  // final norm (4 + 2 + 2) B x h x 8192 = 268,435,456.
  const Budget eager = plan(m, g, s);
  CHECK(eager.peak.phase == Phase::backward);
  CHECK(eager.bytes_of("activations") == 51'002'736'640 + 268'435'456);
  // torch.compile fuses RMSNorm (keeps only its 2 B input: 16,384) and
  // SiLU x up (recomputes the activation: 3 x 2 B x I = 66,048): 16,384 +
  // 16,384 + 40,960 + 66,048 = 139,776 B per token and layer; final norm
  // (2 + 2) B x h.
  s.compile = true;
  const Budget compiled = plan(m, g, s);
  CHECK(compiled.bytes_of("activations") ==
        139'776LL * 8192 * 32 + 4LL * 4096 * 8192);
}

TEST_CASE(
    "training: bitsandbytes QLoRA keeps the input of every frozen NF4 linear",
    "[training]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::qlora,
          .seq = 2048,
          .attn = Attn::sdpa,
          .lora_targets = k_lora_q | k_lora_v};
  // PEFT (mixed, bitsandbytes MatMul4Bit) saves the inputs of o_proj,
  // gate/up and down_proj although they carry no adapter; torchtune (pure,
  // torchao linear_nf4) does not. Per token and layer, bf16:
  //   o_proj input 2 B x 4096 + gate/up input 2 B x 4096 + down_proj input
  //   2 B x 11008 = 38,400 B; x 2048 tokens x 32 layers = 2,516,582,400.
  const Budget peft = plan(m, g, s);
  s.precision = Precision::pure;
  const Budget torchtune = plan(m, g, s);
  REQUIRE(peft.peak.phase == torchtune.peak.phase);
  CHECK(peft.bytes_of("activations") - torchtune.bytes_of("activations") ==
        2'516'582'400);
  // With every projection adapted both keep the same inputs.
  s.lora_targets = k_lora_all;
  const Budget pure_all = plan(m, g, s);
  s.precision = Precision::mixed;
  const Budget mixed_all = plan(m, g, s);
  CHECK(mixed_all.bytes_of("activations") == pure_all.bytes_of("activations"));
}
