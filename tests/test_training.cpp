#include "support.hpp"

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/setup/resolve.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// Training memory (src/memory/train*.cpp): hand-derived values, published
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

TEST_CASE("training: pipeline stages hold the whole model, hybrid layers too",
          "[training]") {
  // Qwen3-Next interleaves Gated DeltaNet and full-attention layers (3:1),
  // each with a routed MoE: the two layer kinds differ in parameters, so the
  // stages' weights add up to the unsplit model's only when each layer is
  // counted as its own kind (full mode, bf16 weights, no ZeRO, tp 1).
  const Model next = import_hf_config(
      test::read_required_file(std::string(OOMPLAN_TEST_DATA) +
                               "/hf/qwen3-next-80b-a3b/config.json"),
      "hf/qwen3-next-80b-a3b/config.json");
  const Gpu g = card("H200", 139.8);
  for (const Model& m : {next, llama3_70b()}) {
    const Setup one{.gpus = 8, .mode = Mode::full, .seq = 1024, .tp = 1};
    const Bytes whole = plan(m, g, one).bytes_of("weights");
    for (const int pp : {2, 4, 8}) {
      INFO(m.name << " pp " << pp);
      Setup s = one;
      s.pp = pp;
      const Budget b = plan(m, g, s);
      Bytes sum = 0;
      for (const Stage& st : b.stages) {
        sum += st.weights_bytes;
      }
      CHECK(std::abs(sum - whole) <= pp);  // per-stage rounding
    }
  }
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

// --- Checkpointing policies, loss implementations, PEFT copies (issue 12).

TEST_CASE("training: torchtitan per-op SAC keeps wq, wv, w1, w2 and SDPA",
          "[training][policy]") {
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  Setup s{.mode = Mode::full,
          .seq = 8192,
          .checkpointing = Checkpointing::op,
          .precision = Precision::pure};
  // torchtitan _save_list: every second mm recomputed, so of wq, wk, wv,
  // wo, w1, w3, w2 the outputs of wq, wv, w1 and w2 stay; SDPA keeps its
  // output and fp32 logsumexp; the block input is the checkpoint's.
  // Per token and layer, bf16 (h 4096, 32 heads = 32 KV heads, I 11008):
  //   input 8,192 + wq 8,192 + wv 8,192 + SDPA out 8,192 + lse 4 x 32 = 128
  //   + w1 2 x 11,008 = 22,016 + w2 8,192 = 63,104 B
  // x 8192 tokens x 32 layers = 16,542,334,976; the final norm keeps
  // (4 + 2 + 2) B x h x 8192 = 268,435,456. The peak is the start of
  // backward (16 B logits), before any layer is recomputed.
  const Budget op = plan(m, g, s);
  REQUIRE(op.peak.phase == Phase::backward);
  CHECK(op.bytes_of("activations") == 16'542'334'976 + 268'435'456);
  // TP 2 with sequence parallelism: the input is sequence-sharded (4,096),
  // w2's rowwise product is a full partial sum (8,192) and both
  // reduce-scatter outputs are saved (2 x 4,096); the rest halves:
  // (8,192 x 3 + 128 + 22,016) / 2 = 23,360. 43,840 B x 8192 x 32 =
  // 11,492,392,960, final norm / 2 = 134,217,728.
  s.gpus = 2;
  s.tp = 2;
  s.sequence_parallel = true;
  const Budget tp = plan(m, g, s);
  REQUIRE(tp.peak.phase == Phase::backward);
  CHECK(tp.bytes_of("activations") == 11'492'392'960 + 134'217'728);
}

TEST_CASE("training: DeepSpeed checkpointing partitions inputs over TP ranks",
          "[training][policy]") {
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  // LoRA keeps the gradients small, so the peak is where the checkpoints
  // are: the start of backward.
  Setup s{.gpus = 4,
          .mode = Mode::lora,
          .seq = 4096,
          .tp = 4,
          .checkpointing = Checkpointing::full,
          .precision = Precision::pure};
  // torch checkpoint keeps each layer's whole input: 32 x 4096 x 2 B x 4096
  // = 1,073,741,824; partition_activations keeps a quarter per TP rank:
  // 268,435,456, so 805,306,368 less at the same moment.
  const Budget full = plan(m, g, s);
  s.checkpointing = Checkpointing::ds_partition;
  const Budget part = plan(m, g, s);
  REQUIRE(full.peak.phase == Phase::backward);
  REQUIRE(part.peak.phase == full.peak.phase);
  CHECK(full.bytes_of("activations") - part.bytes_of("activations") ==
        805'306'368);
  CHECK(part.host_bytes == 0);
  // cpu_checkpointing moves the partitions to host RAM: 268,435,456 per
  // GPU, x 4 GPUs of the node = 1,073,741,824.
  s.checkpointing = Checkpointing::ds_cpu;
  const Budget cpu = plan(m, g, s);
  CHECK(cpu.host_bytes == 1'073'741'824);
  CHECK(cpu.peak.allocated_bytes < part.peak.allocated_bytes);
}

TEST_CASE("training: checkpointing policies keep less in their order",
          "[training][policy]") {
  const Gpu g = card("H100", 79.19);
  for (const Model& m : {llama3_70b(), llama2_7b(), llama32_1b()}) {
    for (Mode mode : {Mode::full, Mode::lora, Mode::qlora}) {
      for (std::int64_t seq : {512, 8192}) {
        INFO(m.name << " mode " << mode_name(mode) << " seq " << seq);
        Setup s{.gpus = 8, .mode = mode, .seq = seq, .tp = 8};
        const auto peak = [&](Checkpointing c) {
          s.checkpointing = c;
          return plan(m, g, s).peak.allocated_bytes;
        };
        const Bytes selective = peak(Checkpointing::selective);
        s.checkpoint_every = 2;
        const Bytes every2 = peak(Checkpointing::every);
        const Bytes op = peak(Checkpointing::op);
        const Bytes full = peak(Checkpointing::full);
        const Bytes part = peak(Checkpointing::ds_partition);
        const Bytes cpu = peak(Checkpointing::ds_cpu);
        CHECK(every2 <= selective);
        CHECK(op <= every2);
        CHECK(full <= op);
        CHECK(part <= full);
        CHECK(cpu <= part);
      }
    }
  }
}

TEST_CASE("training: the loss holds the bytes per logit its code allocates",
          "[training][loss]") {
  const Model m = llama32_1b();
  const Gpu g = card("H100", 79.19);
  Setup s{.mode = Mode::full,
          .seq = 2048,
          .checkpointing = Checkpointing::full,
          .precision = Precision::pure};
  // 2048 tokens x 128,256 logits = 262,668,288 logits.
  const auto logits = [&](Loss loss, Phase phase) {
    s.loss = loss;
    const Budget b = plan(m, g, s);
    CHECK(b.peak.phase == phase);
    return b.bytes_of("logits");
  };
  // full: fp32 logits kept by the loop, log-softmax output, its gradient
  // and the logits' gradient: 16 B = 4,202,692,608.
  CHECK(logits(Loss::full, Phase::backward) == 4'202'692'608);
  // upcast (torchtitan, transformers >= 4.49): forward 2 + 4 + 4 B, the
  // backward's log-softmax output, NLL gradient and log-softmax gradient
  // 12 B = 3,152,019,456.
  CHECK(logits(Loss::upcast, Phase::backward) == 3'152'019'456);
  // upcast-shift (transformers 4.46-4.48): 2 B + fp32 copy + shifted fp32
  // copy + log-softmax = 14 B in forward = 3,677,356,032.
  CHECK(logits(Loss::upcast_shift, Phase::forward) == 3'677'356'032);
  // fp32-shift (transformers <= 4.45): fp32 logits + shifted copy +
  // log-softmax = 12 B, backward 12 B: 3,152,019,456 (forward first).
  CHECK(logits(Loss::fp32_shift, Phase::forward) == 3'152'019'456);
}

TEST_CASE("training: PEFT adapters each save their own copy of the input",
          "[training][lora]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::lora, .seq = 2048, .lora_targets = k_lora_all};
  // PEFT >= 0.12 (fp32 adapters, Trainer autocast): q, k and v each save a
  // 16-bit copy of the first norm's output, gate and up of the second's;
  // torchtune (pure) saves one shared tensor each. (3 - 1 + 2 - 1) x 2 B x
  // 4096 = 24,576 B per token and layer; x 2048 x 32 = 1,610,612,736.
  const Budget peft = plan(m, g, s);
  s.precision = Precision::pure;
  const Budget torchtune = plan(m, g, s);
  REQUIRE(peft.peak.phase == torchtune.peak.phase);
  CHECK(peft.bytes_of("activations") - torchtune.bytes_of("activations") ==
        1'610'612'736);
  // q and v only: two copies against one: 8,192 B x 2048 x 32.
  s.lora_targets = k_lora_q | k_lora_v;
  const Budget qv_pure = plan(m, g, s);
  s.precision = Precision::mixed;
  const Budget qv_peft = plan(m, g, s);
  REQUIRE(qv_peft.peak.phase == qv_pure.peak.phase);
  CHECK(qv_peft.bytes_of("activations") - qv_pure.bytes_of("activations") ==
        536'870'912);
  // Under FSDP (and DeepSpeed) the adapters run in 16 bits, so the cast is a
  // no-op and the input is shared as in torchtune.
  s.gpus = 8;
  s.fsdp = true;
  const Budget fsdp_peft = plan(m, g, s);
  s.precision = Precision::pure;
  const Budget fsdp_pure = plan(m, g, s);
  REQUIRE(fsdp_peft.peak.phase == fsdp_pure.peak.phase);
  CHECK(fsdp_peft.bytes_of("activations") == fsdp_pure.bytes_of("activations"));
}

TEST_CASE("training: flash attention's backward working set can dominate",
          "[training][long]") {
  // A narrow MLP (I 1024) under Llama-3.2-1B attention (h 2048, 32 heads of
  // 64, 8 KV heads), a small vocabulary (8192) so the logits stay small.
  Model m = llama32_1b();
  m.intermediate_size = 1024;
  m.vocab_size = 8192;
  const Gpu g = card("H100", 79.19);
  // LoRA on every projection (small gradients; the same saved tensors as
  // full fine-tuning once compiled).
  const Setup s{.mode = Mode::lora,
                .seq = 4096,
                .checkpointing = Checkpointing::full,
                .precision = Precision::pure,
                .compile = true,
                .loss = Loss::chunked};
  // Per token, bf16, compiled: 16 checkpointed inputs x 2 B x 2048 =
  // 65,536; final norm (2 + 2) x 2048 = 8,192; the top layer recomputed on
  // its checkpointed input (no second copy of it): the second fused norm's
  // input 2 x 2048 + norm outputs 2 x 2 x 2048 + q 4,096 + k, v 2 x 1,024 +
  // attention output and o_proj input 2 x 4,096 + SwiGLU 3 x 2 x 1024 =
  // 32,768; the attention backward: dout 2 B + dq_accum 4 B + dq 2 B at 2048
  // wide, dk and dv expanded to 2048: 2 x 2 x 2048 = 24,576 (the MLP's
  // 3 x 2 x 1024 = 6,144 is smaller). 131,072 B x 4096.
  const Budget b = plan(m, g, s);
  REQUIRE(b.peak.phase == Phase::backward);
  CHECK(b.bytes_of("activations") == 131'072LL * 4096);
}

TEST_CASE("training: context parallelism shards tokens and model states",
          "[training][cp]") {
  const Model m = llama32_1b();
  const Gpu g = card("H100", 79.19);
  // cp 2 on 2 GPUs with FSDP: each GPU holds half of an 8192-token sequence
  // and half of the model states (torchtitan shards over dp x cp).
  Setup s{.gpus = 2,
          .mode = Mode::full,
          .seq = 8192,
          .fsdp = true,
          .precision = Precision::pure};
  s.cp = 2;
  const Budget cp = plan(m, g, s);
  // The same share without CP: 4096 tokens, FSDP over two data-parallel
  // GPUs. No checkpointing: the peak is the start of backward, where the
  // ring's working set does not count.
  s.cp = 1;
  s.seq = 4096;
  const Budget dp = plan(m, g, s);
  REQUIRE(cp.peak.phase == dp.peak.phase);
  CHECK(cp.bytes_of("activations") == dp.bytes_of("activations"));
  CHECK(cp.bytes_of("logits") == dp.bytes_of("logits"));
  CHECK(cp.bytes_of("weights") == dp.bytes_of("weights"));
  CHECK(cp.bytes_of("optimizer") == dp.bytes_of("optimizer"));
}

TEST_CASE("training: the CP ring gathers every rank's keys and values",
          "[training][cp]") {
  // The narrow-MLP model of the flash-attention test above, cp 2 over
  // 8192 tokens: 4096 per GPU.
  Model m = llama32_1b();
  m.intermediate_size = 1024;
  m.vocab_size = 8192;
  const Gpu g = card("H100", 79.19);
  Setup s{.gpus = 2,
          .mode = Mode::lora,
          .seq = 8192,
          .checkpointing = Checkpointing::full,
          .precision = Precision::pure,
          .compile = true,
          .loss = Loss::chunked};
  s.cp = 2;
  // As there, 65,536 + 8,192 + 32,768 per local token, and the attention
  // backward's 24,576 plus the all-gathered K and V of both ranks with
  // their fp32 gradients: cp 2 x (512 + 512) x (2 + 4) = 12,288.
  // 143,360 B x 4096.
  const Budget b = plan(m, g, s);
  REQUIRE(b.peak.phase == Phase::backward);
  CHECK(b.bytes_of("activations") == 143'360LL * 4096);
}

TEST_CASE("training: float8 linears leave per-op SAC's saves as bf16's",
          "[training][float8]") {
  const Model m = llama2_7b();
  Gpu g = card("H100", 79.19);
  g.compute_capability = 90;
  Setup s{.mode = Mode::full,
          .seq = 8192,
          .checkpointing = Checkpointing::op,
          .precision = Precision::pure};
  s.float8 = true;
  // Float8Linear calls torch.mm on float8 tensors, which SAC counts as
  // aten.mm: the bf16 test's 63,104 B per token and layer; x 8192 x 32 =
  // 16,542,334,976, final norm 268,435,456.
  const Budget b = plan(m, g, s);
  REQUIRE(b.peak.phase == Phase::backward);
  CHECK(b.bytes_of("activations") == 16'542'334'976 + 268'435'456);
  // Under full checkpointing float8 changes nothing that is kept: torchao
  // >= 0.9 saves the high-precision input and weight and re-casts them.
  s.checkpointing = Checkpointing::full;
  const Budget f8 = plan(m, g, s);
  s.float8 = false;
  CHECK(plan(m, g, s).peak.allocated_bytes == f8.peak.allocated_bytes);
}

TEST_CASE("training: prepare_model_for_kbit_training upcasts to fp32",
          "[training][qlora]") {
  const Model m = llama2_7b();
  const Gpu g = card("A100-80", 79.21);
  Setup s{.mode = Mode::qlora, .seq = 2048, .lora_targets = k_lora_all};
  const Budget plain = plan(m, g, s);
  s.prepare_kbit = true;
  const Budget prepared = plan(m, g, s);
  // fp32 embedding and lm_head (32000 x 4096 each) and norms (65 x 4096):
  // (262,144,000 + 266,240) x (4 - 2) B = 524,820,480 more weights.
  CHECK(prepared.bytes_of("weights") - plain.bytes_of("weights") ==
        524'820'480);
  // Per token and layer, no checkpointing: norms keep the fp32 input
  // (2 x 4 x 4096 = 32,768); q, k, v each keep Linear4bit's 16-bit cast and
  // the adapter's (6 x 8,192 = 49,152), gate and up likewise (4 x 8,192 =
  // 32,768); q, k, v, the attention output and o_proj's input 40,960; fp32
  // gate, SiLU and up (3 x 4 x 11,008 = 132,096) and two 16-bit copies of
  // down_proj's input (44,032): 331,776 B; x 2048 x 32 = 21,743,271,936,
  // plus the final norm 6 B x 4096 x 2048 = 50,331,648.
  REQUIRE(prepared.peak.phase == Phase::backward);
  CHECK(prepared.bytes_of("activations") == 21'743'271'936 + 50'331'648);
  // The lm_head's 16-bit cast is saved for backward: 32000 x 4096 x 2 B.
  CHECK(prepared.bytes_of("buffers") - plain.bytes_of("buffers") ==
        262'144'000);
  // Full checkpointing keeps fp32 layer inputs: 32 x 2048 x 4 B x 4096.
  s.checkpointing = Checkpointing::full;
  const Budget ckpt = plan(m, g, s);
  s.prepare_kbit = false;
  const Budget ckpt_plain = plan(m, g, s);
  REQUIRE(ckpt.peak.phase == ckpt_plain.peak.phase);
  CHECK(ckpt.bytes_of("activations") > ckpt_plain.bytes_of("activations"));
}

TEST_CASE("training: the new options are one row each and re-run",
          "[training][options]") {
  using test::run_cli;
  // --cp and --float8 come back in the fix lines and the JSON setup.
  const auto ok =
      run_cli({"llama-3.1-8b", "--gpus", "8xH100", "--mode", "full", "--seq",
               "8192", "--fsdp", "--cp", "2", "--float8", "--checkpointing",
               "op", "--loss", "upcast", "--json"});
  REQUIRE(ok.code <= 1);
  const auto doc = nlohmann::json::parse(ok.out);
  CHECK(doc.at("setup").at("cp") == 2);
  CHECK(doc.at("setup").at("dp") == 4);
  CHECK(doc.at("setup").at("float8") == true);
  CHECK(doc.at("setup").at("checkpointing") == "op");
  CHECK(doc.at("setup").at("loss") == "upcast");
  // Validation, one line each.
  CHECK(run_cli({"llama-3.1-8b", "--gpus", "8xH100", "--mode", "full", "--seq",
                 "8192", "--cp", "3"})
            .err ==
        "oomplan: error: --seq 8192 does not split into 2 x --cp 3 equal "
        "chunks; use a --seq divisible by 6\n");
  CHECK(run_cli({"llama-3.1-8b", "--gpus", "8xH100", "--cp", "2"}).code == 2);
  CHECK(run_cli({"llama-3.1-8b", "--gpus", "1xA100-80", "--mode", "full",
                 "--float8"})
            .code == 2);
  CHECK(run_cli({"llama-3.1-8b", "--gpus", "1xH100", "--mode", "lora",
                 "--prepare-kbit"})
            .code == 2);
}

TEST_CASE("training: amp keeps fp32 parameters and autocast's 16-bit copies",
          "[training][amp]") {
  const Model m = llama2_7b();
  const Gpu g = card("H200", 139.8);
  // Llama-2-7B: 6,738,415,616 parameters; full fine-tuning under amp keeps
  // them, and AdamW's m and v, in fp32: 4 P = 26,953,662,464 B of weights
  // and 8 P = 53,907,324,928 B of states, no master copy.
  Setup s{.mode = Mode::full,
          .seq = 2048,
          .checkpointing = Checkpointing::full,
          .precision = Precision::amp};
  const Budget full = plan(m, g, s);
  CHECK(full.bytes_of("weights") == 26'953'662'464);
  CHECK(full.bytes_of("optimizer") == 53'907'324'928);
  // LoRA over an fp32 base without checkpointing: every frozen linear's
  // 16-bit cast is saved by its matmul until backward (norm weights are not
  // cast). 32 layers x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376
  // linear parameters plus lm_head's 131,072,000 = 6,607,077,376, x 2 B =
  // 13,214,154,752 B of buffers.
  s.mode = Mode::lora;
  s.checkpointing = Checkpointing::none;
  const Budget lora = plan(m, g, s);
  REQUIRE(lora.peak.phase != Phase::optimizer_step);
  CHECK(lora.bytes_of("buffers") == 13'214'154'752);
  // With checkpointing the residual stream is fp32: 32 layer inputs x 2048
  // tokens x 4 B x 4096 = 1,073,741,824, and the final norm's fp32 input and
  // lm_head's 16-bit input (4 + 2) B x 4096 x 2048 = 50,331,648, at the start
  // of backward (16 B logits outweigh one recomputed layer).
  s.checkpointing = Checkpointing::full;
  const Budget lora_ckpt = plan(m, g, s);
  REQUIRE(lora_ckpt.peak.phase == Phase::backward);
  CHECK(lora_ckpt.bytes_of("activations") == 1'073'741'824 + 50'331'648);
  // Under FSDP the parameters are gathered in bf16 (MixedPrecision): no
  // casts, a 16-bit stream, and only the sharded base is larger than
  // mixed's: 2 B x P / 8 = 1,684,603,904.
  s.gpus = 8;
  s.fsdp = true;
  s.checkpointing = Checkpointing::full;
  const Budget amp8 = plan(m, g, s);
  s.precision = Precision::mixed;
  const Budget mixed8 = plan(m, g, s);
  CHECK(amp8.bytes_of("weights") - mixed8.bytes_of("weights") == 1'684'603'904);
  CHECK(amp8.bytes_of("activations") == mixed8.bytes_of("activations"));
}

TEST_CASE("training: layer SAC checkpoints every Nth layer",
          "[training][policy]") {
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  Setup s{.mode = Mode::full,
          .seq = 8192,
          .checkpointing = Checkpointing::every,
          .precision = Precision::pure};
  // torchtitan selective_ac_option "2": blocks 2, 4, ..., 32 keep only their
  // input (8,192 B per token), the other 16 all 194,560 B (the Llama-2-7B
  // per-layer sum above): 16 x 202,752 B x 8192 tokens = 26,575,110,144,
  // plus the final norm 268,435,456.
  s.checkpoint_every = 2;
  const Budget two = plan(m, g, s);
  REQUIRE(two.peak.phase == Phase::backward);
  CHECK(two.bytes_of("activations") == 26'575'110'144 + 268'435'456);
  // "3": floor(32 / 3) = 10 checkpointed, 22 kept whole:
  // (22 x 194,560 + 10 x 8,192) x 8192 = 35,735,470,080.
  s.checkpoint_every = 3;
  const Budget three = plan(m, g, s);
  REQUIRE(three.peak.phase == Phase::backward);
  CHECK(three.bytes_of("activations") == 35'735'470'080 + 268'435'456);
  // "1" is full checkpointing.
  s.checkpoint_every = 1;
  const Bytes one = plan(m, g, s).peak.allocated_bytes;
  s.checkpointing = Checkpointing::full;
  CHECK(one == plan(m, g, s).peak.allocated_bytes);
  // The option reads and writes every-N.
  const auto run =
      test::run_cli({"llama-2-7b", "--gpus", "1xH100", "--mode", "full",
                     "--checkpointing", "every-3", "--json"});
  CHECK(nlohmann::json::parse(run.out).at("setup").at("checkpointing") ==
        "every-3");
}

namespace {

// The activations of a budget's moment named `name` (the step's timeline).
Bytes moment_allocated(const Budget& b, std::string_view name) {
  for (std::size_t i = 0; i < b.moment_count; ++i) {
    if (b.moments[i].name == name) {
      return b.moments[i].allocated_bytes;
    }
  }
  FAIL("no moment " << name);
  return 0;
}

}  // namespace

TEST_CASE(
    "training: a recomputed layer reuses its checkpointed input, so one "
    "checkpointed layer costs nothing over none",
    "[training][policy]") {
  // Llama-2-7B, seq 8192 on one GPU: every layer saves 194,560 B per token
  // (the per-layer sum above), its input among them (8,192 B). every-32
  // checkpoints only block 32, the top one: 31 layers keep all, the top keeps
  // its input. torch.utils.checkpoint re-runs the top layer's forward on that
  // saved input (detach_variable shares its storage), so the recompute adds
  // 194,560 - 8,192 B per token, and the moment backward reaches the top
  // layer holds what no checkpointing holds there: 32 x 194,560 B per token.
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  Setup s{.mode = Mode::full, .seq = 8192, .precision = Precision::pure};
  const Budget none = plan(m, g, s);
  s.checkpointing = Checkpointing::every;
  s.checkpoint_every = 32;
  const Budget one = plan(m, g, s);
  CHECK(moment_allocated(one, "top layer") ==
        moment_allocated(none, "top layer"));
  CHECK(one.total_bytes() <= none.total_bytes());
}

TEST_CASE(
    "training: with activation offload, every-N holds no more on the GPU "
    "than no checkpointing",
    "[training][policy]") {
  // torchtune OffloadActivations brings each layer's saved tensors back one
  // layer ahead of backward: without checkpointing the top two layers' (2 x
  // 194,560 B per token for Llama-2-7B). With every-2 the top layer (block
  // 32) is checkpointed: its input (8,192 B) comes back, its forward re-runs
  // on it (194,560 - 8,192 B) and the layer below comes back whole (194,560
  // B): the same 2 x 194,560 B per token.
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  Setup s{.mode = Mode::full,
          .seq = 8192,
          .precision = Precision::pure,
          .activation_offload = true};
  const Budget none = plan(m, g, s);
  s.checkpointing = Checkpointing::every;
  s.checkpoint_every = 2;
  const Budget two = plan(m, g, s);
  CHECK(moment_allocated(two, "top layer") ==
        moment_allocated(none, "top layer"));
  CHECK(two.total_bytes() <= none.total_bytes());
  // The host holds what was offloaded: 16 layers whole and 16 inputs, x 8192
  // tokens, instead of 32 layers whole.
  CHECK(none.host_bytes - two.host_bytes ==
        16 * (194'560 - 8'192) * std::int64_t{8192});
}

TEST_CASE(
    "training: offloaded states need the host RAM of every stage on the node, "
    "not the device-heaviest stage's times the GPUs",
    "[training][offload]") {
  // Llama-2-7B over pp 3 on one node of 3 GPUs: 32 layers split 11, 11, 10
  // (202,383,360 parameters each), embedding (131,072,000) on the first
  // stage, lm_head (131,072,000) and the final norm (4,096) on the last:
  // 2,357,288,960, 2,226,216,960 and 2,154,909,696 parameters. --offload
  // optimizer keeps each GPU's fp32 master, m, v and fp32 gradient copy on the
  // host: 16 B per parameter (ZeRO-1, which DeepSpeed's pipeline engine
  // runs and offload_optimizer needs, shards nothing at dp 1). The node holds
  // all three stages' states, not three times one stage's.
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  const Setup s{.gpus = 3,
                .mode = Mode::full,
                .seq = 8192,
                .pp = 3,
                .zero = 1,
                .offload = Offload::optimizer,
                .checkpointing = Checkpointing::full};
  const Budget b = plan(m, g, s);
  REQUIRE(b.stages.size() == 3);
  CHECK(b.host_bytes ==
        16 * (std::int64_t{2'357'288'960} + 2'226'216'960 + 2'154'909'696));

  // Two nodes of 3 GPUs, pp 3 (dp 2): stages are the outermost rank
  // dimension (torchtitan, Megatron, DeepSpeed), so node 0 holds ranks 0-2
  // (stage 0 twice, stage 1 once) and node 1 ranks 3-5 (stage 1, stage 2
  // twice), each rank a half of its stage's states (ZeRO-1 over dp 2). The
  // busier node is node 0: 2 x 2,357,288,960 / 2 + 2,226,216,960 / 2.
  const Setup two{.gpus = 3,
                  .nodes = 2,
                  .mode = Mode::full,
                  .seq = 8192,
                  .pp = 3,
                  .zero = 1,
                  .offload = Offload::optimizer,
                  .checkpointing = Checkpointing::full};
  CHECK(plan(m, g, two).host_bytes ==
        16 * (std::int64_t{2'357'288'960} + 1'113'108'480));
}

TEST_CASE(
    "training: pipeline stages of a full fine-tune hold every parameter once, "
    "the final norm on the last",
    "[training][pp]") {
  // Llama-2-7B has 6,738,415,616 parameters: 32 layers of 202,383,360, the
  // embedding and lm_head (131,072,000 each) and the final RMSNorm (4,096),
  // which sits on the last stage. In bf16 (pure) the two stages' weights are
  // 2 B each: 13,476,831,232 B, as inference's stages hold.
  const Model m = llama2_7b();
  const Gpu g = card("H100", 79.19);
  const Setup s{
      .gpus = 2, .mode = Mode::full, .pp = 2, .precision = Precision::pure};
  const Budget b = plan(m, g, s);
  REQUIRE(b.stages.size() == 2);
  CHECK(b.stages[0].weights_bytes + b.stages[1].weights_bytes ==
        13'476'831'232);
  CHECK(b.stages[1].weights_bytes ==
        2 * (16 * std::int64_t{202'383'360} + 131'072'000 + 4'096));
}

TEST_CASE("training: an MXFP4 checkpoint is planned dequantized to bf16",
          "[training]") {
  // gpt-oss-20b ships MXFP4 experts; the fine-tuning recipe loads it with
  // Mxfp4Config(dequantize=True) (openai cookbook, TRL): LoRA trains over
  // bf16 weights, about 2 B x 20.9B = 39 GiB, not the ~13 GiB of MXFP4.
  const auto& cat = test::catalog();
  const Model& model = find_model(cat, "gpt-oss-20b");
  REQUIRE(model.checkpoint_quant == Quant::mxfp4);
  const Gpu& gpu = find_gpu(cat, "H100");
  Setup s;
  s.mode = Mode::lora;
  s.seq = 4096;
  CHECK(resolve(model, gpu, s).quant == Quant::none);
  const Budget b = test::budget(model, gpu, s);
  CHECK(b.has(Warning::mxfp4_dequantized));
  // Serving keeps MXFP4; an explicit --quant mxfp4 is the user's.
  s.mode = Mode::infer;
  CHECK(resolve(model, gpu, s).quant == Quant::mxfp4);
  s.mode = Mode::lora;
  s.quant = Quant::mxfp4;
  CHECK(resolve(model, gpu, s).quant == Quant::mxfp4);
}

// ---- preference training (issue 25) ----

namespace {

// Llama-3-8B by hand: h 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128,
// I 14336, vocab 128256, untied: embedding and lm_head 2 x 525,336,576, a
// layer 41,943,040 (q, k, v, o) + 176,160,768 (MLP) + 8,192 (norms) =
// 218,112,000, x 32 = 6,979,584,000, + the final norm 4,096:
// 8,030,261,248 parameters (Meta's model card: 8.03B).
Model llama3_8b() {
  Model m = llama3_70b();
  m.name = "llama-3-8b";
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.hidden_size = 4096;
  m.intermediate_size = 14336;
  return m;
}

Setup preference_setup(Mode mode, TrainObjective objective) {
  Setup s;
  s.mode = mode;
  s.objective = objective;
  s.seq = 2048;
  s.batch = 1;
  s.checkpointing = Checkpointing::full;
  return s;
}

}  // namespace

TEST_CASE("training: DPO full fine-tuning holds a frozen reference copy",
          "[training][preference]") {
  const Gpu& gpu = find_gpu(test::catalog(), "H100");
  const Model m = llama3_8b();
  // TRL creates the reference as a second model in the policy's dtype
  // (create_reference_model / from_pretrained): 8,030,261,248 x 2 B =
  // 16,060,522,496 B = 16.06 GB of bf16, no gradients, no optimizer states.
  const Budget dpo =
      test::budget(m, gpu, preference_setup(Mode::full, TrainObjective::dpo));
  CHECK(dpo.bytes_of("reference_weights") == 16'060'522'496);
  const Budget sft =
      test::budget(m, gpu, preference_setup(Mode::full, TrainObjective::sft));
  CHECK(sft.bytes_of("reference_weights") == 0);
  CHECK(dpo.bytes_of("weights") == sft.bytes_of("weights"));
  CHECK(dpo.bytes_of("gradients") == sft.bytes_of("gradients"));
  CHECK(dpo.bytes_of("optimizer") == sft.bytes_of("optimizer"));
  // Under ZeRO-3 TRL's prepare_deepspeed shards the reference like the
  // policy: 16,060,522,496 / 8 = 2,007,565,312 B per GPU.
  Setup z3 = preference_setup(Mode::full, TrainObjective::dpo);
  z3.gpus = 8;
  z3.zero = 3;
  CHECK(test::budget(m, gpu, z3).bytes_of("reference_weights") ==
        2'007'565'312);
  // ZeRO-2: the reference is prepared at stage 0, a full replica per GPU.
  z3.zero = 2;
  CHECK(test::budget(m, gpu, z3).bytes_of("reference_weights") ==
        16'060'522'496);
}

TEST_CASE("training: DPO with LoRA or precomputed log-probs holds no copy",
          "[training][preference]") {
  const Gpu& gpu = find_gpu(test::catalog(), "H100");
  const Model m = llama3_8b();
  // A PEFT policy is its own reference with the adapters disabled (TRL
  // null_ref_context): no extra weights.
  const Budget lora =
      test::budget(m, gpu, preference_setup(Mode::lora, TrainObjective::dpo));
  CHECK(lora.bytes_of("reference_weights") == 0);
  // precompute_ref_log_probs: the reference runs once before training and
  // is freed.
  Setup pre = preference_setup(Mode::full, TrainObjective::dpo);
  pre.precompute_ref = true;
  CHECK(test::budget(m, gpu, pre).bytes_of("reference_weights") == 0);
  // KTO full fine-tuning compares with a reference as DPO does.
  CHECK(test::budget(m, gpu, preference_setup(Mode::full, TrainObjective::kto))
            .bytes_of("reference_weights") == 16'060'522'496);
}

TEST_CASE("training: chosen and rejected are 2 x batch rows in one forward",
          "[training][preference]") {
  const Gpu& gpu = find_gpu(test::catalog(), "H100");
  const Model m = llama3_8b();
  // TRL's concatenated_forward stacks chosen and rejected: a pairwise
  // objective at batch 1 holds what SFT holds at batch 2, activations and
  // logits alike. ORPO is reference-free: nothing else differs.
  for (const auto objective : {TrainObjective::orpo, TrainObjective::simpo}) {
    const Budget pair =
        test::budget(m, gpu, preference_setup(Mode::full, objective));
    Setup two = preference_setup(Mode::full, TrainObjective::sft);
    two.batch = 2;
    const Budget sft2 = test::budget(m, gpu, two);
    CHECK(pair.bytes_of("activations") == sft2.bytes_of("activations"));
    CHECK(pair.bytes_of("logits") == sft2.bytes_of("logits"));
  }
  const Budget orpo =
      test::budget(m, gpu, preference_setup(Mode::full, TrainObjective::orpo));
  CHECK(orpo.bytes_of("reference_weights") == 0);
  // KTO's examples are single completions: SFT's rows.
  const Budget kto =
      test::budget(m, gpu, preference_setup(Mode::lora, TrainObjective::kto));
  const Budget sft =
      test::budget(m, gpu, preference_setup(Mode::lora, TrainObjective::sft));
  CHECK(kto.bytes_of("activations") == sft.bytes_of("activations"));
}

TEST_CASE("training: the reference forward's logits join the policy's",
          "[training][preference]") {
  const Gpu& gpu = find_gpu(test::catalog(), "H100");
  const Model m = llama3_8b();
  // TRL runs the reference (under no_grad) right after the policy's
  // concatenated_forward, whose logits autograd still holds: at the end of
  // the forward DPO holds ORPO's moment plus the reference copy
  // (16,060,522,496 B) and the reference's bf16 logits over the same 2 x 1
  // rows: 2 x 2048 tokens x 128,256 x 2 B = 1,050,673,152 B.
  const Budget dpo =
      test::budget(m, gpu, preference_setup(Mode::full, TrainObjective::dpo));
  const Budget orpo =
      test::budget(m, gpu, preference_setup(Mode::full, TrainObjective::orpo));
  REQUIRE(dpo.moments[1].name == "logits");
  const Bytes diff =
      dpo.moments[1].allocated_bytes - orpo.moments[1].allocated_bytes;
  CHECK(std::abs(diff - (16'060'522'496 + 1'050'673'152)) <= 2);
  // Inside a layer no logits exist: only the reference copy differs.
  CHECK(dpo.moments[0].allocated_bytes - orpo.moments[0].allocated_bytes ==
        16'060'522'496);
}

TEST_CASE("training: the text table keeps its columns with reference_weights",
          "[training]") {
  // "reference_weights" (17 letters) is longer than the 14-wide name column
  // of other plans: every row's GiB figure must still end in the same column.
  const auto r = oomplan::test::run_cli(
      {"llama3.1-8b", "--gpus", "8xH100", "--mode", "full", "--zero", "3",
       "--objective", "dpo", "--seq", "2048"});
  REQUIRE(r.code == 0);
  std::istringstream in(r.out);
  std::string line;
  // The GiB and share columns are right-aligned: the " %" of every row of
  // the table sits in one column.
  std::vector<std::size_t> ends;
  while (std::getline(in, line)) {
    if (line.rfind("  ", 0) == 0 && line.find(" %") != std::string::npos) {
      ends.push_back(line.find(" %"));
    }
    if (line.rfind("  capacity", 0) == 0) {
      break;
    }
  }
  REQUIRE(ends.size() >= 10);
  CHECK(std::all_of(ends.begin(), ends.end(),
                    [&](std::size_t e) { return e == ends.front(); }));
  CHECK(r.out.find("  reference_weights ") != std::string::npos);
}

TEST_CASE("training: torchtitan before 0.1 compiles the blocks, not the loss",
          "[training]") {
  // torchtitan's apply_compile wraps each TransformerBlock in torch.compile;
  // the loss is compiled only from #1033 (0.1.0). Llama-2-7B, 4,096 tokens:
  // 4,096 x 32,000 = 131,072,000 logits. Eager upcast loss at the start of
  // backward: log-softmax's fp32 output, NLL's gradient and log-softmax's
  // (12 B) = 1,572,864,000 B; compiled: the bf16 input and its gradient
  // (4 B) = 524,288,000 B.
  const Gpu& h100 = find_gpu(test::catalog(), "H100");
  Setup s{.mode = Mode::full,
          .seq = 4096,
          .fsdp = true,
          .checkpointing = Checkpointing::full,
          .compile = true,
          .loss = Loss::upcast};
  s.gpus = 8;
  s.framework = Framework::torchtitan;
  s.torchtitan_release = Release{0, 0, 0};
  CHECK(test::budget(llama2_7b(), h100, s).bytes_of("logits") == 1'572'864'000);
  CHECK_FALSE(resolve(llama2_7b(), h100, s).compiled_loss);
  // From 0.1 the loss is compiled too: 524,288,000 B, below the peak's
  // layer backward, so the peak holds no logits.
  s.torchtitan_release = Release{0, 1, 0};
  CHECK(resolve(llama2_7b(), h100, s).compiled_loss);
  CHECK(test::budget(llama2_7b(), h100, s).bytes_of("logits") == 0);
  // The HF Trainer compiles the whole model, its loss included.
  s.torchtitan_release = Release{0, 0, 0};
  s.framework = Framework::hf_trainer;
  CHECK(resolve(llama2_7b(), h100, s).compiled_loss);
}

TEST_CASE("training: --nf4-backend follows the precision unless stated",
          "[training]") {
  // Without --nf4-backend: pure precision is torchtune's torchao path, the
  // rest PEFT's bitsandbytes; --framework torchtune says torchao, the HF
  // frameworks bnb; a bad name is one line naming the choices.
  auto backend = [](std::vector<std::string> args) {
    std::vector<std::string> all{"llama-2-7b", "--gpus", "1xA100-80",
                                 "--mode",     "qlora",  "--json"};
    all.insert(all.end(), args.begin(), args.end());
    const test::CliResult r = test::run_cli(all);
    REQUIRE(r.code <= 1);
    return nlohmann::json::parse(r.out)
        .at("setup")
        .at("nf4_backend")
        .get<std::string>();
  };
  CHECK(backend({}) == "bnb");
  CHECK(backend({"--precision", "pure"}) == "torchao");
  CHECK(backend({"--precision", "pure", "--nf4-backend", "bnb"}) == "bnb");
  CHECK(backend({"--framework", "torchtune"}) == "torchao");
  CHECK(backend({"--framework", "llama-factory", "--precision", "pure"}) ==
        "bnb");
  const test::CliResult bad =
      test::run_cli({"llama-2-7b", "--mode", "qlora", "--nf4-backend", "gptq"});
  CHECK(bad.code == 2);
  CHECK(bad.err ==
        "oomplan: error: --nf4-backend: gptq not in {bnb,torchao}\n");
}

TEST_CASE(
    "training: LitGPT >= 0.5.0 QLoRA keeps its StableEmbedding's "
    "gradient",
    "[training][litgpt]") {
  // litgpt/finetune/lora.py (#1770, ae798aba, first in 0.5.0) swaps
  // transformer.wte for a bitsandbytes StableEmbedding after
  // instantiate_bnb_optimizer: its weight requires grad but no optimizer
  // holds it, so every backward leaves a vocab x hidden bf16 gradient that
  // zero_grad never frees. Llama-3-8B: 128,256 x 4,096 x 2 B =
  // 1,050,673,152 B, at every moment of the step.
  const Gpu& a10g = find_gpu(test::catalog(), "A10G");
  Setup s{.mode = Mode::qlora, .seq = 512, .precision = Precision::pure};
  s.framework = Framework::litgpt;
  s.litgpt_release = Release{0, 4, 13};
  const Budget before = test::budget(llama3_8b(), a10g, s);
  CHECK_FALSE(resolve(llama3_8b(), a10g, s).stable_embedding);
  s.litgpt_release = Release{0, 5, 0};
  CHECK(resolve(llama3_8b(), a10g, s).stable_embedding);
  const Budget after = test::budget(llama3_8b(), a10g, s);
  CHECK(after.bytes_of("gradients") - before.bytes_of("gradients") ==
        1'050'673'152);
  CHECK(after.peak.phase == before.peak.phase);
  // LoRA without quantization keeps the plain embedding (frozen), and so
  // does any other framework.
  s.mode = Mode::lora;
  CHECK_FALSE(resolve(llama3_8b(), a10g, s).stable_embedding);
  s.mode = Mode::qlora;
  s.framework = Framework::hf_trainer;
  CHECK_FALSE(resolve(llama3_8b(), a10g, s).stable_embedding);
}

TEST_CASE(
    "training: LitGPT's chunked lm_head under autocast saves a head "
    "copy per call",
    "[training][litgpt]") {
  // finetune_lora calls lm_head on 128-token slices (lm_head_chunk_size=
  // 128). Under bf16-mixed (amp) the frozen fp32 head is cast afresh at each
  // call (autocast caches only leaves that require grad) and each matmul
  // saves its copy. Llama-2-7B at 1,024 tokens: 8 calls, 7 more copies than
  // one call: 7 x 32,000 x 4,096 x 2 B = 1,835,008,000 B.
  const Gpu& a100 = find_gpu(test::catalog(), "A100-80");
  Setup s{.mode = Mode::lora,
          .seq = 1024,
          .precision = Precision::amp,
          .loss = Loss::chunked};
  const Bytes one_call = test::budget(llama2_7b(), a100, s).bytes_of("buffers");
  s.lm_head_chunk = 128;
  CHECK(test::budget(llama2_7b(), a100, s).bytes_of("buffers") - one_call ==
        1'835'008'000);
  // A partial last slice is a call too: 1,025 tokens make 9.
  s.seq = 1025;
  const Bytes nine = test::budget(llama2_7b(), a100, s).bytes_of("buffers");
  s.lm_head_chunk = 0;
  CHECK(nine - test::budget(llama2_7b(), a100, s).bytes_of("buffers") ==
        8 * 262'144'000LL);
  // Pure bf16 casts nothing; a trained head (full) is cast once and cached.
  s.lm_head_chunk = 128;
  s.precision = Precision::pure;
  CHECK(test::budget(llama2_7b(), a100, s).bytes_of("buffers") == 0);
}

TEST_CASE("training: LitGPT's layouts on several devices, by release",
          "[training][litgpt]") {
  // finetune_full: FSDPStrategy(auto_wrap_policy={Block},
  // activation_checkpointing_policy={Block}) (FSDP1); finetune_lora: the
  // same before 0.5.11 (adapters flattened with their Block before 0.5.8,
  // #1538), FSDP2 fully_shard with checkpoint_wrapper per Block from 0.5.11
  // (#2086). One device: no FSDP, no checkpointing.
  const Gpu& a100 = find_gpu(test::catalog(), "A100-40");
  Setup s{.mode = Mode::lora, .seq = 1024, .fsdp = true};
  s.framework = Framework::litgpt;
  Resolved r = resolve(llama2_7b(), a100, s);
  CHECK(r.checkpointing == Checkpointing::none);
  s.gpus = 4;
  r = resolve(llama2_7b(), a100, s);
  CHECK(r.checkpointing == Checkpointing::full);
  CHECK(r.fsdp_version == 2);
  CHECK_FALSE(r.fsdp_frozen_grads);
  s.litgpt_release = Release{0, 5, 10};
  r = resolve(llama2_7b(), a100, s);
  CHECK(r.fsdp_version == 1);
  CHECK_FALSE(r.fsdp_frozen_grads);
  s.litgpt_release = Release{0, 5, 7};
  CHECK(resolve(llama2_7b(), a100, s).fsdp_frozen_grads);
  s.mode = Mode::full;
  s.litgpt_release.reset();
  r = resolve(llama2_7b(), a100, s);
  CHECK(r.fsdp_version == 1);
  CHECK_FALSE(r.fsdp_frozen_grads);
  // Other frameworks keep the options as given.
  s.framework = Framework::torchtune;
  r = resolve(llama2_7b(), a100, s);
  CHECK(r.checkpointing == Checkpointing::none);
  CHECK(r.fsdp_version == 2);
}

TEST_CASE(
    "training: under checkpointing a frozen head's autocast copies "
    "live from the logits into backward",
    "[training][litgpt]") {
  // Checkpointed layers save nothing and recompute their casts; lm_head is
  // outside them, so each call's 16-bit copy of a frozen fp32 head stays
  // saved until the head's backward. Llama-2-7B LoRA under amp with full
  // checkpointing at 1,024 tokens in 128-token calls: at the logits 7 copies
  // more than one call (7 x 32,000 x 4,096 x 2 B = 1,835,008,000 B), inside a
  // layer of forward none yet, at the bottom layer none any more.
  const Gpu& a100 = find_gpu(test::catalog(), "A100-80");
  Setup s{.mode = Mode::lora,
          .seq = 1024,
          .checkpointing = Checkpointing::full,
          .precision = Precision::amp,
          .loss = Loss::chunked};
  const Budget one = test::budget(llama2_7b(), a100, s);
  s.lm_head_chunk = 128;
  const Budget calls = test::budget(llama2_7b(), a100, s);
  CHECK(moment_allocated(calls, "logits") - moment_allocated(one, "logits") ==
        1'835'008'000);
  CHECK(moment_allocated(calls, "inside a layer") ==
        moment_allocated(one, "inside a layer"));
  CHECK(moment_allocated(calls, "bottom layer") ==
        moment_allocated(one, "bottom layer"));
}

TEST_CASE(
    "training: LitGPT's FSDP2 keeps autocast's casts, its FSDP1 gathers "
    "bf16",
    "[training][litgpt]") {
  // bf16-mixed on several devices: Lightning's FSDPStrategy (FSDP1, LoRA
  // before 0.5.11) takes FSDPPrecision, MixedPrecision(param_dtype=bfloat16);
  // its ModelParallelStrategy (LoRA from 0.5.11) keeps plain torch.autocast
  // and LitGPT's parallelize_fn passes fully_shard no mixed-precision policy
  // (lightning/fabric/connector.py _check_and_init_precision).
  const Gpu& a100 = find_gpu(test::catalog(), "A100-40");
  Setup s{.mode = Mode::lora, .seq = 1024, .precision = Precision::amp};
  s.gpus = 4;
  s.framework = Framework::litgpt;
  CHECK(resolve(llama2_7b(), a100, s).fsdp_autocast);
  s.litgpt_release = Release{0, 5, 10};
  CHECK_FALSE(resolve(llama2_7b(), a100, s).fsdp_autocast);
  s.litgpt_release.reset();
  s.precision = Precision::pure;
  CHECK_FALSE(resolve(llama2_7b(), a100, s).fsdp_autocast);
}
