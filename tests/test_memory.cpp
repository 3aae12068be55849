#include "support.hpp"

#include "oomplan/memory/memory.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>

#include <array>

namespace {

using namespace oomplan;
using test::llama2_7b;
using test::llama3_70b;

Gpu a100() {
  Gpu g;
  g.name = "A100-80";
  g.compute_capability = 80;
  g.capacity_bytes = 85'051'572'224;  // 79.21 GiB
  g.nvlink_gb_s = 600;
  return g;
}

Budget plan(const Model& m, const Gpu& g, Setup s) {
  return test::budget(m, g, s);
}

Bytes all_weights(const Model& m, const Resolved& s) {
  return weight_bytes(m, s, WeightShare{0, m.num_layers, true, true});
}

Resolved resolved(const Model& m, const Setup& s) {
  return resolve(m, a100(), s);
}

}  // namespace

// round_bytes is std::llround without the call: halves away from zero, and
// exact where a double still has a fraction (below 2^53).
TEST_CASE("units: byte counts round half away from zero", "[memory]") {
  CHECK(round_bytes(2.5) == 3);
  CHECK(round_bytes(-2.5) == -3);
  CHECK(round_bytes(2.4999) == 2);
  CHECK(round_bytes(0.49999999999999994) == 0);  // llround gives 0 too
  CHECK(round_bytes(-0.4) == 0);
  CHECK(round_bytes(4503599627370495.5) == 4503599627370496);  // 2^52 - 0.5
  CHECK(round_bytes(1e17) == 100000000000000000);
  for (double x = -1000.0; x <= 1000.0; x += 0.125) {
    CHECK(round_bytes(x) == std::llround(x));
  }
}

TEST_CASE("memory: Llama-3-70B KV cache is 327,680 B per token in bf16",
          "[memory]") {
  const Model m = llama3_70b();
  Resolved s;
  s.tp = 1;
  // 2 (K,V) x 80 layers x 8 KV heads x 128 head_dim x 2 B = 327,680
  CHECK(kv_bytes_per_token(m, s, 0, 80) == 327'680);
  // tp=4: 2 KV heads per GPU -> 81,920
  s.tp = 4;
  CHECK(kv_bytes_per_token(m, s, 0, 80) == 81'920);
  // fp8 KV: 1 B per value -> 163,840 at tp=1
  s.tp = 1;
  s.kv_dtype = Dtype::fp8;
  CHECK(kv_bytes_per_token(m, s, 0, 80) == 163'840);
  // batch 2 x seq 8192 tokens in bf16: 327,680 x 16,384 = 5,368,709,120
  s.kv_dtype = Dtype::bf16;
  CHECK(kv_cache_bytes(m, s, 0, 80, 2, 8192) == 5'368'709'120);
}

TEST_CASE("memory: KV heads are replicated when tp exceeds them", "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 16;
  s.tp = 16;
  // 8 KV heads over 16 GPUs: one head per GPU, 2 x 80 x 1 x 128 x 2 = 40,960
  CHECK(kv_bytes_per_token(m, resolved(m, s), 0, 80) == 40'960);
  const Budget b = plan(m, a100(), s);
  CHECK(b.has(Warning::kv_replicated));
}

TEST_CASE("memory: Llama-3-70B weights per GPU at tp=4 are exact", "[memory]") {
  const Model m = llama3_70b();
  Resolved s;
  s.tp = 4;
  s.quant = Quant::none;
  // Per layer: q 8192^2 + k,v 2 x 8192 x 1024 + o 8192^2 + MLP 3 x 8192 x
  // 28672 = 855,638,016 linear; x 80 = 68,451,041,280, / 4 = 17,112,760,320.
  // Norms 80 x 2 x 8192 + 8192 = 1,318,912, replicated.
  // Embedding + lm_head 2 x 128256 x 8192 = 2,101,346,304, / 4 = 525,336,576.
  // (17,112,760,320 + 1,318,912 + 525,336,576) x 2 B = 35,278,831,616
  CHECK(all_weights(m, s) == 35'278'831'616);
  s.tp = 1;
  // 70,553,706,496 params x 2 B (catalog_facts.md §1d)
  CHECK(all_weights(m, s) == 141'107'412'992);
}

TEST_CASE(
    "memory: NF4 weights carry block-64 constants with double "
    "quantization",
    "[memory]") {
  const Model m = llama2_7b();
  Resolved s;
  s.tp = 1;
  // Linear: 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 params.
  // Norms 266,240 and embedding + lm_head 262,144,000 stay bf16.
  const double linear = 6'476'005'376.0;
  const double rest = (266'240.0 + 262'144'000.0) * 2.0;
  s.quant = Quant::nf4;
  // 0.5 B + 1 B absmax / 64 + 4 B / (64 x 256) per param
  CHECK(all_weights(m, s) ==
        round_bytes(linear * (0.5 + 1.0 / 64 + 4.0 / 16384) + rest));
  s.quant = Quant::nf4_nodq;
  // 0.5 B + fp32 absmax per 64 = 0.5625 B per param
  CHECK(all_weights(m, s) == round_bytes(linear * 0.5625 + rest));
  s.quant = Quant::gptq;
  // 4-bit + fp16 scale and 4-bit zero per group of 128: 0.51953125 B/param
  CHECK(all_weights(m, s) == round_bytes(linear * (0.5 + 2.5 / 128) + rest));
  s.quant = Quant::int8;
  // 1 B + one fp32 scale per output row (linear / h rows)
  CHECK(all_weights(m, s) ==
        round_bytes(linear + 4.0 * linear / 4096.0 + rest));
}

TEST_CASE("memory: gpt-oss MXFP4 weights reproduce the checkpoint bytes",
          "[memory]") {
  const Catalog& cat = test::catalog();
  // safetensors total_size (catalog_facts.md §1d): experts at 4.25 bit,
  // everything else bf16.
  const std::array<std::pair<const char*, Bytes>, 2> cases = {{
      {"gpt-oss-20b", 13'761'264'768},
      {"gpt-oss-120b", 65'248'815'744},
  }};
  for (const auto& [name, bytes] : cases) {
    INFO(name);
    const Model& m = find_model(cat, name);
    const Resolved s = resolved(m, Setup{});
    CHECK(s.quant == Quant::mxfp4);
    CHECK(weight_bytes(m, s, WeightShare{0, m.num_layers, true, true}) ==
          bytes);
  }
}

TEST_CASE(
    "memory: DeepSeek-V3 FP8 checkpoint bytes are reproduced with its "
    "MTP layer",
    "[memory]") {
  const Model& m = find_model(test::catalog(), "deepseek-v3");
  const Resolved s = resolved(m, Setup{});
  CHECK(s.quant == Quant::fp8);
  // Loaded model: 61 layers, fp8 + fp32 128x128 block scales, bf16 embedding
  // and lm_head. The checkpoint (688,586,727,753 B) also holds the MTP module
  // (layer 61): one more MoE layer, eh_proj 2h x h in fp8 and its own
  // embedding and head copies in bf16, which engines do not load.
  const Bytes loaded = all_weights(m, s);
  const Bytes moe_layer = weight_bytes(m, s, WeightShare{60, 61, false, false});
  const double h = static_cast<double>(m.hidden_size);
  const double eh_proj = 2.0 * h * h * (1.0 + 4.0 / 16384.0);
  const double head_copies = 2.0 * static_cast<double>(m.vocab_size) * h * 2.0;
  const double checkpoint =
      static_cast<double>(loaded + moe_layer) + eh_proj + head_copies;
  CHECK(checkpoint == Approx(688'586'727'753.0).epsilon(0.005));
  CHECK(static_cast<double>(loaded) < 688'586'727'753.0);
}

TEST_CASE(
    "memory: tp that does not divide the heads is rejected with the "
    "valid values",
    "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 3;
  s.tp = 3;
  CHECK(check(m, a100(), s) ==
        "--tp 3 does not divide the 64 attention heads of "
        "llama-3-70b; valid: 1, 2, 4, 8, 16, 32, 64");
  s.gpus = 400;
  s.tp = 4;
  s.pp = 100;
  CHECK_THAT(check(m, a100(), s).value_or(""),
             Catch::Contains("--pp 100 exceeds the 80 layers"));
  s.gpus = 6;
  s.tp = 4;
  s.pp = 1;
  CHECK_THAT(check(m, a100(), s).value_or(""),
             Catch::Contains("does not divide the 6 GPUs"));
}

TEST_CASE(
    "plan: resolve fills tp, max_model_len, quant and "
    "batched tokens",
    "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 8;
  s.pp = 2;
  s.seq = 6144;
  Resolved r = resolved(m, s);
  CHECK(r.tp == 4);
  CHECK(r.max_model_len == 6144);
  CHECK(r.quant == Quant::none);
  // vLLM's per-card budget (get_batch_defaults): 2048 on an A100, which it
  // excludes from the 8192 of other >= 70 GiB cards.
  CHECK(r.max_num_batched_tokens == 2048);
  // A --seq past the 8192-token context leaves max_model_len at the context
  // (vLLM's derived default), not at a length vLLM refuses.
  s.seq = 16384;
  CHECK(resolved(m, s).max_model_len == 8192);
  s.max_model_len = 16384;  // explicit: kept, and vLLM's error follows
  CHECK(resolved(m, s).max_model_len == 16384);
  s.max_model_len.reset();
  s.seq = 6144;
  s.vllm_version = VllmEra::v0;
  CHECK(resolved(m, s).max_num_batched_tokens == 6144);
  s.mode = Mode::qlora;
  r = resolved(m, s);
  CHECK(r.tp == 1);
  CHECK(r.quant == Quant::nf4);
}

TEST_CASE("memory: hf budget for Llama-3-70B on 4xA100-80 at seq 8192",
          "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 4;
  s.seq = 8192;
  const Budget b = plan(m, a100(), s);
  CHECK(b.bytes_of("weights") == 35'278'831'616);
  // 81,920 B per token per GPU x 8192 tokens
  CHECK(b.bytes_of("kv_cache") == 671'088'640);
  // logits: 1 x 128256 x (2 + 4) B, last position only
  CHECK(b.bytes_of("logits") == 769'536);
  // overhead: 400 MiB context + 8.125 MiB cuBLAS + 392 MiB NCCL (4 GPUs)
  CHECK(b.bytes_of("overhead") ==
        400 * k_mib + 8 * k_mib + 128 * k_kib + 392 * k_mib);
  CHECK(b.fits());
  CHECK(b.peak.phase == Phase::prefill);
  CHECK(b.peak.device_bytes == b.total_bytes());
  CHECK(b.peak.allocated_bytes < b.peak.reserved_bytes);
  CHECK(b.stages.empty());
  CHECK_FALSE(b.vllm.has_value());
}

TEST_CASE("memory: eager attention holds b x heads x s^2 scores", "[memory]") {
  const Model m = llama2_7b();
  Setup s;
  s.seq = 4096;
  s.attn = Attn::flash;
  const Bytes flash = plan(m, a100(), s).bytes_of("activations");
  s.attn = Attn::eager;
  const Budget eager = plan(m, a100(), s);
  // 32 heads x 4096^2 x (2 + 2 + 4) B = 4 GiB of scores + 32 MiB mask
  CHECK(eager.bytes_of("activations") >= 4 * k_gib + 32 * k_mib);
  // flash: linear in s, far below one GiB for a single 4096-token prompt
  CHECK(flash < k_gib);
  CHECK(eager.has(Warning::eager_attention_s2));
}

TEST_CASE("memory: pipeline stages follow vLLM's layer split", "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 3;
  s.tp = 1;
  s.pp = 3;
  const Budget b = plan(m, a100(), s);
  // get_pp_indices: 80 / 3 = 26, remainder 2 to the stages before the last:
  // 27, 27, 26.
  REQUIRE(b.stages.size() == 3);
  CHECK(b.stages[0].layers == 27);
  CHECK(b.stages[1].layers == 27);
  CHECK(b.stages[2].layers == 26);
  CHECK(b.stages[0].weights_bytes > b.stages[1].weights_bytes);  // embedding
}

TEST_CASE("memory: split layers places whole layers on every GPU", "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 4;
  s.split_layers = true;
  const Budget b = plan(m, a100(), s);
  REQUIRE(b.stages.size() == 4);
  std::int64_t layers = 0;
  Bytes weights = 0;
  for (const Stage& st : b.stages) {
    CHECK(st.layers >= 1);
    layers += st.layers;
    weights += st.weights_bytes;
  }
  CHECK(layers == 80);
  CHECK(weights == 141'107'412'992);
  CHECK(b.bytes_of("weights") < 141'107'412'992 / 3);
}

TEST_CASE("memory: per-GPU weights never rise with more GPUs", "[memory]") {
  for (const Model& m : test::catalog().models) {
    INFO(m.name);
    Bytes previous = -1;
    for (int tp : {1, 2, 4, 8}) {
      if (m.num_heads % tp != 0) {
        continue;
      }
      Setup s;
      s.gpus = tp;
      const Resolved r = resolved(m, s);
      const Bytes w = all_weights(m, r);
      if (previous >= 0) {
        CHECK(w <= previous);
      }
      previous = w;
    }
  }
}

TEST_CASE("memory: KV and activations never shrink with longer sequences",
          "[memory]") {
  const Gpu g = a100();
  for (const Model& m : test::catalog().models) {
    INFO(m.name);
    Bytes kv = 0;
    Bytes act = 0;
    for (std::int64_t seq : {512, 2048, 8192, 32768}) {
      for (Attn attn : {Attn::eager, Attn::flash}) {
        Setup s;
        s.seq = seq;
        s.attn = attn;
        const Budget b = memory(m, g, resolve(m, g, s));
        if (attn == Attn::flash) {
          CHECK(b.bytes_of("kv_cache") >= kv);
          CHECK(b.bytes_of("activations") >= act);
          kv = b.bytes_of("kv_cache");
          act = b.bytes_of("activations");
        }
      }
    }
  }
}

TEST_CASE("memory: quantized weights are below bf16 weights", "[memory]") {
  for (const Model& m : test::catalog().models) {
    INFO(m.name);
    Resolved s;
    s.tp = 1;
    s.quant = Quant::none;
    const Bytes bf16 = all_weights(m, s);
    for (Quant q : {Quant::int8, Quant::fp8, Quant::int4, Quant::nf4,
                    Quant::nf4_nodq, Quant::gptq, Quant::awq, Quant::mxfp4}) {
      s.quant = q;
      INFO(quant_name(q));
      CHECK(all_weights(m, s) < bf16);
    }
    s.quant = Quant::nf4;
    const Bytes nf4 = all_weights(m, s);
    s.quant = Quant::nf4_nodq;
    CHECK(nf4 < all_weights(m, s));
  }
}

TEST_CASE("memory: nothing overflows at the CLI's input bounds", "[memory]") {
  const Model m = llama3_70b();
  Setup s;
  s.gpus = 8;
  s.nodes = 12'500;  // 100k GPUs
  s.seq = 10'000'000;
  s.batch = 1'000'000;
  s.attn = Attn::eager;
  for (Engine e : {Engine::hf, Engine::vllm}) {
    s.engine = e;
    s.max_model_len = 10'000'000;
    s.max_num_batched_tokens = 10'000'000;
    s.max_num_seqs = 1'000'000;
    const Budget b = memory(m, a100(), resolve(m, a100(), s));
    for (std::size_t i = 0; i < b.count; ++i) {
      INFO(b.components[i].name);
      CHECK(b.components[i].bytes >= 0);
    }
    CHECK(b.total_bytes() > 0);
    CHECK_FALSE(b.fits());
  }
}

TEST_CASE("memory: bitsandbytes 4-bit prefill dequantizes one MLP matrix",
          "[memory]") {
  const Model m = llama2_7b();
  Setup s;
  s.seq = 2048;
  s.quant = Quant::none;
  const Bytes plain = plan(m, a100(), s).bytes_of("activations");
  s.quant = Quant::nf4;
  const Budget nf4 = plan(m, a100(), s);
  // 4096 x 11008 x 2 B = 90,177,536 B of dequantized weight
  CHECK(nf4.bytes_of("activations") - plain == 90'177'536);
  CHECK(nf4.bytes_of("weights") < plan(m, a100(), Setup{}).bytes_of("weights"));
}

TEST_CASE("memory: sliding-window layers hold at most the window", "[memory]") {
  const Model& m = find_model(test::catalog(), "gpt-oss-20b");
  Resolved s;
  s.tp = 1;
  // 24 layers alternate sliding (128 tokens) and full attention; one layer
  // holds 2 x 8 KV heads x 64 x 2 B = 2,048 B per token.
  CHECK(kv_bytes_per_token(m, s, 0, 24) == 49'152);
  // seq 8192: (12 x 8192 + 12 x 128) x 2,048 = 204,472,320
  CHECK(kv_cache_bytes(m, s, 0, 24, 1, 8192) == 204'472'320);
  // below the window every layer holds every token: 100 x 49,152
  CHECK(kv_cache_bytes(m, s, 0, 24, 1, 100) == 4'915'200);
}

TEST_CASE("memory: MLA caches the latent, not the heads", "[memory]") {
  const Model& m = find_model(test::catalog(), "deepseek-v3");
  Resolved s;
  s.tp = 8;
  // 61 layers x (512 + 64) x 2 B = 70,272 B per token, the same on every GPU
  CHECK(kv_bytes_per_token(m, s, 0, 61) == 70'272);
}

TEST_CASE(
    "memory: transformers generate by release (logits over the prompt, two "
    "tuple caches while decoding)",
    "[memory]") {
  // Llama-2-7B, 8 sequences of 4,096 tokens in bf16 on an A100-80.
  // KV: 8 x 4,096 x 2 x 32 layers x 32 heads x 128 x 2 B = 17,179,869,184 B.
  const Model m = llama2_7b();
  Setup s;
  s.seq = 4096;
  s.batch = 8;
  const auto plan_at = [&](const char* release) {
    Setup at = s;
    at.transformers_release = release_from_text(release);
    return plan(m, a100(), at);
  };
  const Budget now = plan(m, a100(), s);
  CHECK(now.peak.phase == Phase::prefill);
  CHECK(now.bytes_of("kv_cache") == 17179869184);
  CHECK(now.bytes_of("logits") == 1536000);  // 8 x 32,000 x (2 + 4)
  // 4.44: the prefill's logits over all 32,768 positions, bf16 + fp32:
  // 32,768 x 32,000 x 6 = 6,291,456,000 B; still one cache.
  const Budget v444 = plan_at("4.44");
  CHECK(v444.peak.phase == Phase::prefill);
  CHECK(v444.bytes_of("logits") == 6291456000);
  CHECK(v444.bytes_of("kv_cache") == 17179869184);
  // 4.41: a decode step holds two caches (34,359,738,368 B) and the fp32
  // logits (4,194,304,000 B): 38.55 GB against the prefill's 17.18 GB +
  // 6.29 GB + activations, so the peak moves to decode.
  const Budget v441 = plan_at("4.41");
  CHECK(v441.peak.phase == Phase::decode);
  CHECK(v441.bytes_of("kv_cache") == 34359738368);
  CHECK(v441.bytes_of("logits") == 4194304000);
  CHECK(v441.bytes_of("activations") == 0);
  CHECK(v441.total_bytes() > v444.total_bytes());
}
