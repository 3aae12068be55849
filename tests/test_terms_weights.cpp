// The shared memory terms one by one (src/memory/weights.cpp, kv_cache.cpp,
// overhead.cpp, stages.cpp), each against a hand calculation in its comment.

#include "memory/internal.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <vector>

namespace {

using namespace oomplan;
using namespace oomplan::memory_terms;
using test::llama2_7b;
using test::llama3_70b;

Resolved infer(int tp = 1) {
  Resolved s;
  s.tp = tp;
  return s;
}

Resolved infer_fp8() {
  Resolved s;
  s.quant = Quant::fp8;
  return s;
}

Gpu card(int cc) {
  Gpu g;
  g.compute_capability = cc;
  g.capacity_bytes = 80 * k_gib;
  return g;
}

// A DeepSeek-style MoE skeleton: 10 layers, the first 2 dense.
Model moe_skeleton() {
  Model m = llama2_7b();
  m.num_layers = 10;
  m.num_experts = 8;
  m.experts_per_tok = 2;
  m.moe_intermediate_size = 1024;
  m.first_k_dense = 2;
  return m;
}

}  // namespace

// --- weights.cpp

TEST_CASE("terms: moe_layers_before counts the MoE layers below a layer",
          "[terms]") {
  Model m = moe_skeleton();
  // Layers 2..9 are MoE (first_k_dense 2): 8 of them below layer 10, none
  // below layer 2.
  CHECK(moe_layers_before(m, 10) == 8);
  CHECK(moe_layers_before(m, 2) == 0);
  // Every second layer (moe_every 2, Llama 4): layers 1, 3, ..., 47 = 24.
  m.first_k_dense = 0;
  m.moe_every = 2;
  CHECK(moe_layers_before(m, 48) == 24);
  CHECK(moe_layers_before(llama2_7b(), 32) == 0);
}

TEST_CASE("terms: linear_bytes stores 2^20 weights in each format", "[terms]") {
  const double n = 1048576;  // 2^20 parameters in 1,024 output rows
  // bf16: 2^20 x 2 B = 2,097,152 B.
  CHECK(linear_bytes(Quant::none, n, 1024, 2, false) == 2097152);
  // int8 and per-row fp8: 2^20 x 1 B + 1,024 rows x 4 B = 1,052,672 B.
  CHECK(linear_bytes(Quant::int8, n, 1024, 2, false) == 1052672);
  CHECK(linear_bytes(Quant::fp8, n, 1024, 2, false) == 1052672);
  // DeepSeek block fp8: 2^20 + 2^20 / (128 x 128) x 4 B = 1,048,576 + 256.
  CHECK(linear_bytes(Quant::fp8, n, 1024, 2, true) == 1048832);
  // GPTQ/AWQ group 128: 2^20 x 0.5 + 2^20 / 128 x 2.5 B = 524,288 + 20,480.
  CHECK(linear_bytes(Quant::gptq, n, 1024, 2, false) == 544768);
  CHECK(linear_bytes(Quant::awq, n, 1024, 2, false) == 544768);
  // NF4 + double quantization: 524,288 + 2^20 / 64 x 1 B + 2^20 / 16,384 x
  // 4 B = 524,288 + 16,384 + 256 = 540,928 B.
  CHECK(linear_bytes(Quant::nf4, n, 1024, 2, false) == 540928);
  // NF4 alone: 524,288 + 2^20 / 64 x 4 B = 524,288 + 65,536 = 589,824 B.
  CHECK(linear_bytes(Quant::nf4_nodq, n, 1024, 2, false) == 589824);
  // MXFP4: 524,288 + 2^20 / 32 x 1 B = 524,288 + 32,768 = 557,056 B.
  CHECK(linear_bytes(Quant::mxfp4, n, 1024, 2, false) == 557056);
}

TEST_CASE("terms: block_scaled_fp8 is fp8 on DeepSeek's own fp8 checkpoint",
          "[terms]") {
  Model m = llama2_7b();
  m.model_type = "deepseek_v3";
  m.checkpoint_quant = Quant::fp8;
  CHECK(block_scaled_fp8(m, Quant::fp8));
  CHECK_FALSE(block_scaled_fp8(m, Quant::int8));
  m.model_type = "llama";
  CHECK_FALSE(block_scaled_fp8(m, Quant::fp8));
}

TEST_CASE("terms: layer_share splits a GPU's layers into dense and MoE",
          "[terms]") {
  const Model m = moe_skeleton();  // 10 layers: 2 dense, 8 MoE
  // Layers [0, 5): 5 of 10 (0.5), both dense ones (2 / 2 = 1.0) and MoE
  // layers 2, 3, 4 (3 / 8 = 0.375).
  const LayerShare a = layer_share(m, WeightShare{0, 5, true, false});
  CHECK(a.n == 5);
  CHECK(a.frac == 0.5);
  CHECK(a.dense_frac == 1.0);
  CHECK(a.moe_here == 3);
  CHECK(a.moe_frac == 0.375);
  // [5, 99) is clamped to [5, 10): 5 MoE layers, 5 / 8 = 0.625.
  const LayerShare b = layer_share(m, WeightShare{5, 99, false, true});
  CHECK(b.n == 5);
  CHECK(b.dense_frac == 0.0);
  CHECK(b.moe_frac == 0.625);
}

TEST_CASE("terms: tp_linear_params keeps max(1, kv/tp) KV heads per GPU",
          "[terms]") {
  const Model m7 = llama2_7b();
  const ParamCounts c7 = count_params(m7);
  const LayerShare all7 = layer_share(m7, WeightShare{0, 32, true, true});
  // Llama-2-7B at tp 2: q, o = 2 x 32 x 4096^2 = 1,073,741,824 / 2 and k, v
  // the same x 16 / 32 heads: 536,870,912 + 536,870,912 = 1,073,741,824;
  // MLP 32 x 3 x 4096 x 11008 / 2 = 2,164,260,864.
  const TpParams p7 = tp_linear_params(m7, c7, 2, all7);
  CHECK(p7.attention == 1073741824.0);
  CHECK(p7.mlp == 2164260864.0);
  CHECK(p7.experts == 0.0);
  // Llama-3-70B at tp 16: q, o = 80 x 2 x 8192^2 = 10,737,418,240 / 16 =
  // 671,088,640; k, v = 80 x 2 x 8192 x 1024 = 1,342,177,280 x 1 / 8 heads
  // (8 KV heads < 16 GPUs: one each) = 167,772,160; 838,860,800 in all.
  const Model m70 = llama3_70b();
  const TpParams p70 =
      tp_linear_params(m70, count_params(m70), 16,
                       layer_share(m70, WeightShare{0, 80, true, true}));
  CHECK(p70.attention == 838860800.0);
}

TEST_CASE("terms: mxfp4_padding pads expert columns by kernel", "[terms]") {
  // gpt-oss: 2880 columns per expert. Hopper (Triton, 90; 0 = default):
  // 2880 = 45 x 64 stays, fp32 biases.
  const Mxfp4Padding hopper = mxfp4_padding(2880, 2880, 90);
  CHECK(hopper.inter == 2880);
  CHECK(hopper.hidden == 2880);
  CHECK(hopper.kernel == Mxfp4Kernel::triton);
  CHECK(hopper.fp32_bias());
  CHECK(mxfp4_padding(2880, 2880, 0).inter == 2880);
  // tp 4: 720 columns -> 768 (12 x 64).
  CHECK(mxfp4_padding(720, 2880, 90).inter == 768);
  // Blackwell (FlashInfer, 100): 2880 -> 3072 (12 x 256), both.
  const Mxfp4Padding blackwell = mxfp4_padding(2880, 2880, 100);
  CHECK(blackwell.inter == 3072);
  CHECK(blackwell.hidden == 3072);
  CHECK(blackwell.kernel == Mxfp4Kernel::flashinfer);
  // Ampere and SM120 (Marlin): columns to 128 (2944 = 23 x 128), hidden to
  // 256, biases in dtype.
  for (const int cc : {80, 120}) {
    const Mxfp4Padding marlin = mxfp4_padding(2880, 2880, cc);
    CHECK(marlin.inter == 2944);
    CHECK(marlin.hidden == 3072);
    CHECK(marlin.kernel == Mxfp4Kernel::marlin);
    CHECK_FALSE(marlin.fp32_bias());
  }
}

TEST_CASE(
    "terms: vLLM's Triton MXFP4 backend keeps the checkpoint's scales before "
    "0.21",
    "[terms]") {
  // gpt-oss-120b: 36 layers x 128 experts x (2880 x 5760 gate_up + 2880 x
  // 2880 down) = 114,661,785,600 expert weights; their E8M0 scales, one
  // byte per 32: 3,583,180,800 B (3.34 GiB), what vllm#33155's 64.38 GiB
  // at TP1 on an H100 (0.14.1) holds above the 60.87 GiB of the layout.
  const Model m = find_model(test::catalog(), "gpt-oss-120b");
  Resolved s;
  s.engine = Engine::vllm;
  s.quant = Quant::mxfp4;
  s.vllm_release = vllm_release(0, 14, 1);
  const double experts = 114661785600.0;
  CHECK(mxfp4_retained_scales(m, s, experts, 90) == 3583180800.0);
  CHECK(mxfp4_retained_scales(m, s, experts, 0) == 3583180800.0);
  // Marlin (Ampere) and FlashInfer (Blackwell) convert in place; from 0.21
  // Triton frees them (#46549); transformers never had them.
  CHECK(mxfp4_retained_scales(m, s, experts, 80) == 0);
  CHECK(mxfp4_retained_scales(m, s, experts, 100) == 0);
  s.vllm_release = vllm_release(0, 21);
  CHECK(mxfp4_retained_scales(m, s, experts, 90) == 0);
  s.vllm_release = vllm_release(0, 14, 1);
  s.engine = Engine::hf;
  CHECK(mxfp4_retained_scales(m, s, experts, 90) == 0);
  // They are held, never read: the bytes a decode step reads
  // (WeightShare::unread false, the time model's) leave them out.
  s.engine = Engine::vllm;
  WeightShare read{0, m.num_layers, true, true};
  read.unread = false;
  const WeightShare held{0, m.num_layers, true, true};
  CHECK(weight_bytes(m, s, held) - weight_bytes(m, s, read) ==
        Approx(3583180800.0).margin(2));
}

TEST_CASE("terms: mxfp4_expert_params scales experts by the padded shape",
          "[terms]") {
  Model m = llama2_7b();
  m.hidden_size = 128;
  m.moe_intermediate_size = 128;
  Resolved s = infer();
  s.engine = Engine::vllm;
  // Blackwell pads 128 x 128 to 256 x 256: x 4, 1,000,000 -> 4,000,000.
  CHECK(mxfp4_expert_params(m, s, 1000000, 100) == 4000000.0);
  // Hopper pads 32 columns to 64 (hidden 128 stays): x 2.
  m.moe_intermediate_size = 32;
  CHECK(mxfp4_expert_params(m, s, 1000000, 90) == 2000000.0);
  // transformers loads the checkpoint's shapes.
  s.engine = Engine::hf;
  CHECK(mxfp4_expert_params(m, s, 1000000, 90) == 1000000.0);
}

TEST_CASE("terms: mxfp4_bias_bytes replaces bf16 biases by padded fp32 ones",
          "[terms]") {
  Model m = llama2_7b();
  m.num_experts = 4;
  m.hidden_size = 128;
  m.moe_intermediate_size = 32;
  m.mlp_bias = true;
  Resolved s = infer();
  s.engine = Engine::vllm;
  // Hopper: 2 x 64 padded columns + 128 hidden, 4 experts = 1,024 fp32
  // values (4,096 B) in place of 4 x (2 x 32 + 128) = 768 bf16 (1,536 B):
  // 2 MoE layers x 2,560 B = 5,120 B.
  CHECK(mxfp4_bias_bytes(m, s, 2, 90) == 5120.0);
  m.mlp_bias = false;
  CHECK(mxfp4_bias_bytes(m, s, 2, 90) == 0.0);
}

TEST_CASE("terms: quantized_linear_bytes stores the linear weights",
          "[terms]") {
  Model m = llama2_7b();
  m.hidden_size = 1000;
  Resolved s = infer();
  const LayerShare ls = layer_share(m, WeightShare{0, 32, true, true});
  TpParams p;
  p.attention = 1000;
  p.mlp = 2000;
  // bf16: 3,000 x 2 B = 6,000 B; int8: 3,000 + 3 rows (3,000 / 1,000
  // hidden) x 4 B = 3,012 B.
  CHECK(quantized_linear_bytes(m, s, WeightShare{}, ls, p) == 6000.0);
  s.quant = Quant::int8;
  CHECK(quantized_linear_bytes(m, s, WeightShare{}, ls, p) == 3012.0);
  // gpt-oss style: only the routed experts are MXFP4. (1,000 + 0 + 24
  // shared) x 2 B + 2^20 experts x 0.53125 B = 2,048 + 557,056 = 559,104 B.
  m.num_experts = 4;
  s.quant = Quant::mxfp4;
  p = TpParams{};
  p.attention = 1000;
  p.experts = 1048576;
  p.shared = 24;
  CHECK(quantized_linear_bytes(m, s, WeightShare{}, ls, p) == 559104.0);
}

TEST_CASE("terms: padded_vocab rounds vLLM's vocabulary to 64 x tp",
          "[terms]") {
  Model m = llama2_7b();
  m.vocab_size = 50257;
  Resolved s = infer();
  CHECK(padded_vocab(m, s) == 50257);  // transformers: as is
  s.engine = Engine::vllm;
  // ceil(50,257 / 64) x 64 = 786 x 64 = 50,304.
  CHECK(padded_vocab(m, s) == 50304);
  // tp 5: 50,304 % 5 = 4, so ceil(50,257 / 320) x 320 = 158 x 320 = 50,560.
  s.tp = 5;
  CHECK(padded_vocab(m, s) == 50560);
}

TEST_CASE("terms: lm_head_params copies a tied head onto a later stage",
          "[terms]") {
  const Model m = llama2_7b();
  const ParamCounts c = count_params(m);
  // Untied: 32,000 x 4,096 = 131,072,000, plus vLLM's padding rows (64 x
  // 4,096 = 262,144 here) when there are any.
  CHECK(lm_head_params(m, c, WeightShare{0, 32, true, true}, 0) == 131072000.0);
  CHECK(lm_head_params(m, c, WeightShare{0, 32, true, true}, 262144) ==
        131334144.0);
  // Tied: nothing beside the embedding, a 32,000 x 4,096 copy on a stage
  // without it.
  Model tied = m;
  tied.tie_word_embeddings = true;
  const ParamCounts ct = count_params(tied);
  CHECK(lm_head_params(tied, ct, WeightShare{0, 32, true, true}, 0) == 0.0);
  CHECK(lm_head_params(tied, ct, WeightShare{16, 32, false, true}, 0) ==
        131072000.0);
}

TEST_CASE("terms: rope_cache_bytes is positions x rotary dim x dtype",
          "[terms]") {
  // Llama-2-7B: 4,096 positions x 128 x 2 B = 1,048,576 B.
  CHECK(rope_cache_bytes(llama2_7b(), 2) == 1048576.0);
  // Learned positions (GPT-2): no RoPE.
  Model gpt2 = llama2_7b();
  gpt2.learned_positions = 1024;
  CHECK(rope_cache_bytes(gpt2, 2) == 0.0);
  // Gemma 3 at 128k: (131,072 local + 131,072 x 8 linear-scaled global)
  // positions x 256 x 2 B = 1,179,648 x 512 = 603,979,776 B.
  Model gemma = llama2_7b();
  gemma.model_type = "gemma3_text";
  gemma.max_position_embeddings = 131072;
  gemma.head_dim = 256;
  CHECK(rope_cache_bytes(gemma, 2) == 603979776.0);
  // gpt-oss in fp32: 131,072 x 64 x 4 B = 33,554,432 B.
  Model oss = gemma;
  oss.model_type = "gpt_oss";
  oss.head_dim = 64;
  CHECK(rope_cache_bytes(oss, 2) == 33554432.0);
}

TEST_CASE("terms: mla_dequant_bytes is vLLM's dequantized kv_b_proj",
          "[terms]") {
  Model m = llama2_7b();
  m.num_heads = 128;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.v_head_dim = 128;
  Resolved s = infer(8);
  s.quant = Quant::fp8;
  // DeepSeek-V3 at tp 8: 61 layers x 512 x 128 / 8 heads x (128 + 128) x 2 B
  // = 61 x 4,194,304 = 255,852,544 B.
  CHECK(mla_dequant_bytes(m, s, 61) == 255852544.0);
  s.quant = Quant::none;
  CHECK(mla_dequant_bytes(m, s, 61) == 0.0);
}

TEST_CASE("terms: weight_bytes of Llama-2-7B is its parameters x 2 B",
          "[terms]") {
  const Model m = llama2_7b();
  // 6,738,415,616 params x 2 B = 13,476,831,232 B.
  Resolved s = infer();
  CHECK(weight_bytes(m, s, WeightShare{0, 32, true, true}) == 13476831232);
  // vLLM adds the RoPE cache, 4,096 x 128 x 2 B = 1,048,576 B (32,000 is a
  // multiple of 64: no padding rows).
  s.engine = Engine::vllm;
  CHECK(weight_bytes(m, s, WeightShare{0, 32, true, true}) == 13477879808);
}

TEST_CASE(
    "terms: weight_bytes of a quantized checkpoint is its index's "
    "total_size",
    "[terms]") {
  // Llama-2-7B stored in FP8 with attention kept in bf16 (the way
  // Llama-3.1-405B-FP8 keeps modules_to_not_convert 16-bit). Per-parameter
  // FP8 on every linear: 6,476,005,376 linear params + 4 B x 1,581,056 rows
  // = 6,482,329,600; + norms 266,240 x 2 = 532,480; + embedding and lm_head
  // 2 x 131,072,000 x 2 = 524,288,000: 7,007,150,080 B. The checkpoint:
  // attention 2,147,483,648 x 2 = 4,294,967,296; MLP 4,328,521,728 + 4 x
  // 1,056,768 rows = 4,332,748,800; norms 532,480; embeddings 524,288,000:
  // 9,152,536,576 B.
  Model m = llama2_7b();
  m.checkpoint_quant = Quant::fp8;
  Resolved s = infer();
  s.quant = Quant::fp8;
  const WeightShare all{0, 32, true, true};
  CHECK(weight_bytes(m, s, all) == 7007150080);
  m.checkpoint_bytes = 9152536576;
  CHECK(weight_bytes(m, s, all) == 9152536576);
  // vLLM tp 2: each GPU holds (7,007,150,080 - 532,480) / 2 + 532,480 =
  // 3,503,841,280 B by the formats, scaled by 9,152,536,576 / 7,007,150,080,
  // plus the RoPE cache 1,048,576 B.
  s.engine = Engine::vllm;
  s.tp = 2;
  CHECK(static_cast<double>(weight_bytes(m, s, all)) ==
        Approx(3503841280.0 * 9152536576.0 / 7007150080.0 + 1048576.0)
            .epsilon(1e-9));
  // The same checkpoint described by its quantization_config instead (its
  // attention, 2,147,483,648 params, in modules_to_not_convert) weighs the
  // same 9,152,536,576 B without an index.
  Model listed = llama2_7b();
  listed.checkpoint_quant = Quant::fp8;
  listed.unquantized_params = 2147483648;
  CHECK(weight_bytes(listed, infer_fp8(), all) == 9152536576);
  // The same index under online quantization of another format, or a 16-bit
  // checkpoint's index (Llama 2's inv_freq buffers, which no engine loads),
  // changes nothing.
  s = infer();
  s.quant = Quant::int8;
  const Bytes int8 = weight_bytes(m, s, all);
  m.checkpoint_bytes = 0;
  CHECK(weight_bytes(m, s, all) == int8);
  Model bf16 = llama2_7b();
  bf16.checkpoint_bytes = 13476839424;
  CHECK(weight_bytes(bf16, infer(), all) == 13476831232);
}

TEST_CASE(
    "terms: the index's total_size sets the weights only for a checkpoint "
    "loaded as stored",
    "[terms]") {
  Model fp8 = llama2_7b();
  fp8.checkpoint_quant = Quant::fp8;
  CHECK(checkpoint_size_use(fp8, infer_fp8()) == CheckpointSizeUse::absent);
  fp8.checkpoint_bytes = 9152536576;
  CHECK(checkpoint_size_use(fp8, infer_fp8()) == CheckpointSizeUse::as_stored);
  // Dequantized to bf16 on load, or re-quantized to NF4: another format.
  CHECK(checkpoint_size_use(fp8, infer()) == CheckpointSizeUse::converted);
  Resolved nf4 = infer();
  nf4.quant = Quant::nf4;
  CHECK(checkpoint_size_use(fp8, nf4) == CheckpointSizeUse::converted);
  // A bf16 checkpoint: loaded in bf16 it is counted; in fp32 it is cast.
  Model bf16 = llama2_7b();
  bf16.checkpoint_bytes = 13476839424;
  CHECK(checkpoint_size_use(bf16, infer()) == CheckpointSizeUse::counted);
  Resolved fp32 = infer();
  fp32.dtype = Dtype::fp32;
  CHECK(checkpoint_size_use(bf16, fp32) == CheckpointSizeUse::converted);
  // DeepSeek-V3's index counts the MTP layer vLLM skips.
  Model v3 = fp8;
  v3.model_type = "deepseek_v3";
  CHECK(checkpoint_size_use(v3, infer_fp8()) == CheckpointSizeUse::mtp_layer);
}

// --- kv_cache.cpp

TEST_CASE("terms: kv_heads_per_gpu replicates KV heads below one per GPU",
          "[terms]") {
  const Model m = llama3_70b();  // 8 KV heads
  CHECK(kv_heads_per_gpu(m, 1) == 8);
  CHECK(kv_heads_per_gpu(m, 3) == 3);   // ceil(8 / 3)
  CHECK(kv_heads_per_gpu(m, 16) == 1);  // max(1, ceil(8 / 16))
}

TEST_CASE("terms: kv_layer_tokens caps sliding layers at the window",
          "[terms]") {
  // 32 global layers x 1,000 tokens = 32,000 layer-tokens.
  CHECK(kv_layer_tokens(llama2_7b(), 0, 32, 1000) == 32000.0);
  // Window 512, every second layer global: layers 0, 2 keep 512, layers 1, 3
  // keep 1,000: 3,024; below the window all keep 300: 1,200.
  Model m = llama2_7b();
  m.sliding_window = 512;
  m.global_every = 2;
  CHECK(kv_layer_tokens(m, 0, 4, 1000) == 3024.0);
  CHECK(kv_layer_tokens(m, 0, 4, 300) == 1200.0);
}

TEST_CASE("terms: kv_bytes_per_token of Llama-3-70B is 327,680 B", "[terms]") {
  const Model m = llama3_70b();
  // 2 (K, V) x 8 heads x 128 x 2 B x 80 layers = 327,680 B.
  CHECK(kv_bytes_per_token(m, infer(), 0, 80) == 327680);
  // tp 16, fp8 cache: 2 x 1 head x 128 x 1 B x 80 = 20,480 B.
  Resolved s = infer(16);
  s.kv_dtype = Dtype::fp8;
  CHECK(kv_bytes_per_token(m, s, 0, 80) == 20480);
  // MLA (DeepSeek-V3): one latent of 512 + 64 in 2 B x 61 layers = 70,272 B.
  Model mla = m;
  mla.kv_lora_rank = 512;
  mla.qk_rope_head_dim = 64;
  CHECK(kv_bytes_per_token(mla, infer(), 0, 61) == 70272);
}

TEST_CASE("terms: kv_cache_bytes is per token x tokens x batch", "[terms]") {
  // Llama-3-70B: 4,096 B per layer-token x 80 layers x 1,000 tokens x 2
  // sequences = 655,360,000 B.
  CHECK(kv_cache_bytes(llama3_70b(), infer(), 0, 80, 2, 1000) == 655360000);
}

// --- overhead.cpp

TEST_CASE("terms: the allocator reserve is 5 % in inference, 8 % in training",
          "[terms]") {
  Resolved s = infer();
  CHECK(inference_reserve(s) == 0.05);
  CHECK(training_reserve(s) == 0.08);
  s.reserve = 0.1;  // --reserve replaces both
  CHECK(inference_reserve(s) == 0.1);
  CHECK(training_reserve(s) == 0.1);
  // 0.25 x 1,000,000 B = 250,000 B.
  CHECK(allocator_reserve_bytes(0.25, 1000000) == 250000);
}

TEST_CASE("terms: cublas_workspace_bytes is 32 MiB from Hopper on", "[terms]") {
  CHECK(cublas_workspace_bytes(card(90)) == 33554432);  // 32 x 2^20
  // 8 MiB + 128 KiB = 8,388,608 + 131,072 = 8,519,680 B.
  CHECK(cublas_workspace_bytes(card(80)) == 8519680);
}

TEST_CASE("terms: NCCL buffers count the GPUs a process talks to", "[terms]") {
  Resolved train;
  train.mode = Mode::full;
  train.gpus = 8;
  train.nodes = 2;
  CHECK(communicating_gpus(train) == 16);  // all-reduce over 2 x 8
  Resolved s = infer(2);
  s.pp = 2;
  CHECK(communicating_gpus(s) == 4);  // tp 2 x pp 2
  s.split_layers = true;
  CHECK(communicating_gpus(s) == 1);  // device_map: no collectives
  CHECK(nccl_buffer_bytes(1) == 0);
  CHECK(nccl_buffer_bytes(2) == 358612992);  // 342 MiB
  CHECK(nccl_buffer_bytes(8) == 411041792);  // 392 MiB
}

TEST_CASE("terms: runtime_overhead_bytes adds context, cuBLAS and NCCL",
          "[terms]") {
  // One H100: 400 MiB + 32 MiB = 432 MiB = 452,984,832 B.
  CHECK(runtime_overhead_bytes(card(90), infer()) == 452984832);
  // Two A100 at tp 2: 400 MiB + 8.125 MiB + 342 MiB = 419,430,400 +
  // 8,519,680 + 358,612,992 = 786,563,072 B.
  CHECK(runtime_overhead_bytes(card(80), infer(2)) == 786563072);
  // --overhead-gib 1.5 replaces the sum: 1.5 x 2^30 = 1,610,612,736 B.
  Resolved s = infer();
  s.overhead_gib = 1.5;
  CHECK(runtime_overhead_bytes(card(90), s) == 1610612736);
}

// --- stages.cpp

TEST_CASE("terms: share_of turns a range into a weight share", "[terms]") {
  const WeightShare w = share_of(Range{3, 7, false, true});
  CHECK(w.layer_begin == 3);
  CHECK(w.layer_end == 7);
  CHECK_FALSE(w.embedding);
  CHECK(w.lm_head);
}

TEST_CASE("terms: pp_range gives the remainder to the stages before the last",
          "[terms]") {
  // 80 layers over 3 stages: 26 each, the remainder 2 to stages 1 and 0:
  // 27, 27, 26.
  const Range r0 = pp_range(80, 3, 0);
  const Range r1 = pp_range(80, 3, 1);
  const Range r2 = pp_range(80, 3, 2);
  CHECK(r0.begin == 0);
  CHECK(r0.end == 27);
  CHECK(r0.first);
  CHECK(r1.begin == 27);
  CHECK(r1.end == 54);
  CHECK(r2.begin == 54);
  CHECK(r2.end == 80);
  CHECK(r2.last);
}

TEST_CASE("terms: split_ranges fills each GPU to model / n + one layer",
          "[terms]") {
  // Llama-2-7B bf16 on 3 GPUs: one layer is 202,375,168 linear x 2 B +
  // 266,240 / 32 norm params x 2 B = 404,766,976 B; the budget per GPU is
  // 13,476,831,232 / 3 + 404,766,976 = 4,897,044,053 B. GPU 0 holds the
  // embedding (262,144,000 B) and 11 layers (262,144,000 + 11 x 404,766,976
  // = 4,714,580,736; a 12th would pass the budget), GPU 1 12 layers
  // (4,857,203,712), GPU 2 the other 9 and the lm_head.
  Resolved s = infer();
  s.gpus = 3;
  s.split_layers = true;
  const std::vector<Range> r = split_ranges(llama2_7b(), s);
  REQUIRE(r.size() == 3);
  CHECK(r[0].end == 11);
  CHECK(r[1].begin == 11);
  CHECK(r[1].end == 23);
  CHECK(r[2].begin == 23);
  CHECK(r[2].end == 32);
  CHECK(hf_ranges(llama2_7b(), s).size() == 3);
}

TEST_CASE("terms: hf_ranges splits a pipeline evenly", "[terms]") {
  Resolved s = infer();
  s.pp = 2;
  const std::vector<Range> r = hf_ranges(llama2_7b(), s);
  REQUIRE(r.size() == 2);
  CHECK(r[0].end == 16);  // 32 layers / 2
  CHECK(r[1].begin == 16);
  CHECK(r[1].end == 32);
}

TEST_CASE("terms: train_stage_begin gives the remainder to the first stages",
          "[terms]") {
  // 80 layers over 3 stages: 27, 27, 26 from layer 0.
  CHECK(train_stage_begin(80, 3, 0) == 0);
  CHECK(train_stage_begin(80, 3, 1) == 27);
  CHECK(train_stage_begin(80, 3, 2) == 54);
  CHECK(train_stage_begin(80, 3, 3) == 80);
}

TEST_CASE("terms: micro_batches_in_flight is pp - stage under 1F1B",
          "[terms]") {
  Resolved s;
  s.pp = 4;
  CHECK(micro_batches_in_flight(s, 0) == 4.0);
  CHECK(micro_batches_in_flight(s, 3) == 1.0);
  s.grad_accum = 2;  // only 2 micro-batches in the step
  CHECK(micro_batches_in_flight(s, 0) == 2.0);
}

TEST_CASE("terms: node_host_bytes sums the GPUs of the busiest node",
          "[terms]") {
  // pp 4 on 2 nodes of 4 GPUs: 2 GPUs per stage; node 0 holds stages 0 and 1
  // (2 x 1 + 2 x 2 = 6), node 1 stages 2 and 3 (2 x 3 + 2 x 4 = 14).
  CHECK(node_host_bytes({1, 2, 3, 4}, 4, 2) == 14.0);
  // pp 2 on one node of 4: 2 x 10 + 2 x 20 = 60.
  CHECK(node_host_bytes({10, 20}, 4, 1) == 60.0);
}

TEST_CASE("terms: train_layout places a stage's layers and vocabulary",
          "[terms]") {
  // Llama-2-7B on 8 GPUs, tp 2, pp 2: stage 1 holds layers 16..31 (16 x
  // 202,383,360 = 3,238,133,760 params) and the final norm (4,096) and the
  // lm_head (131,072,000); dp = 8 / (2 x 2) = 2.
  Resolved s;
  s.mode = Mode::full;
  s.gpus = 8;
  s.tp = 2;
  s.pp = 2;
  const Model m = llama2_7b();
  const TrainLayout at = train_layout(m, s, count_params(m), 1);
  CHECK(at.begin == 16);
  CHECK(at.end == 32);
  CHECK_FALSE(at.first);
  CHECK(at.last);
  CHECK(at.dp == 2.0);
  CHECK(at.largest_layer == 202383360.0);
  CHECK(at.layer_params == 3238137856.0);
  CHECK(at.vocab_params() == 131072000.0);
  // (3,238,137,856 + 131,072,000) / tp 2 = 1,684,604,928.
  CHECK(at.params() == 1684604928.0);
}
