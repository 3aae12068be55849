#include "support.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace {

using oomplan::import_hf_config;
using oomplan::Model;
using oomplan::Quant;

std::string fixture_path(const std::string& name) {
  return std::string(OOMPLAN_TEST_DATA) + "/hf/" + name + "/config.json";
}

std::string fixture_text(const std::string& name) {
  std::ifstream in(fixture_path(name));
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The import error of fixture `name` after `edit` changed its JSON.
template <typename Edit>
std::string fixture_error(const std::string& name, Edit edit) {
  nlohmann::json doc = nlohmann::json::parse(fixture_text(name));
  edit(doc);
  try {
    import_hf_config(doc.dump(), "hf/" + name + "/config.json");
  } catch (const oomplan::Error& e) {
    return e.what();
  }
  return "";
}

Model import_fixture(const std::string& name) {
  return import_hf_config(oomplan::test::read_required_file(fixture_path(name)),
                          "hf/" + name + "/config.json");
}

std::int64_t total(const Model& m) {
  return oomplan::count_params(m).total();
}

std::string import_error(const std::string& text,
                         std::optional<std::string_view> index = {}) {
  try {
    import_hf_config(text, "my/config.json", index);
  } catch (const oomplan::Error& e) {
    return e.what();
  }
  return "";
}

// A minimal Llama config with `extra` JSON members appended.
std::string llama(const std::string& extra = "") {
  return R"({"model_type": "llama", "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "vocab_size": 100)" +
         extra + "}";
}

}  // namespace

TEST_CASE("hf: configs of catalog models import to the catalog's exact counts",
          "[hf]") {
  // The fixtures are the HF configs the catalog was built from, so both
  // paths must agree on every parameter and on the attention layout.
  for (const char* id :
       {"deepseek-v3", "deepseek-v2-lite", "gpt-oss-20b", "qwen3-30b-a3b",
        "mixtral-8x7b", "qwen2.5-7b", "gemma-2-9b", "gemma-3-1b",
        "phi-3-mini-4k", "falcon-40b", "command-r-v01"}) {
    INFO(id);
    const Model imported = import_fixture(id);
    const Model& shipped = oomplan::find_model(oomplan::test::catalog(), id);
    const auto c = oomplan::count_params(imported);
    CHECK(c.total() == shipped.params);
    CHECK(c.active == shipped.params_active);
    CHECK(imported.num_kv_heads == shipped.num_kv_heads);
    CHECK(imported.head_dim == shipped.head_dim);
    CHECK(imported.sliding_window == shipped.sliding_window);
    CHECK(imported.global_every == shipped.global_every);
    CHECK(imported.num_experts == shipped.num_experts);
    CHECK(imported.tie_word_embeddings == shipped.tie_word_embeddings);
    CHECK(imported.checkpoint_quant == shipped.checkpoint_quant);
  }
}

TEST_CASE("hf: the validation configs import to their published sizes",
          "[hf]") {
  // LLaMA-1 7B: the Llama-2-7B shapes, 6,738,415,616 (catalog_facts §1d).
  CHECK(total(import_fixture("llama-7b")) == 6'738'415'616);
  // LLaMA 65B: 80 x (4·8192² + 3·8192·22016 + 2·8192) + 2·32000·8192 + 8192.
  CHECK(total(import_fixture("llama-65b")) == 65'285'660'672);
  // CodeLlama-7B: Llama-2-7B with 16 more vocabulary rows in embed and head.
  CHECK(total(import_fixture("codellama-7b")) == 6'738'415'616 + 2 * 16 * 4096);
  // GPT-2 XL: 48 x (12·1600² + 13·1600) + 50257·1600 + 1024·1600 + 2·1600.
  CHECK(total(import_fixture("gpt2-xl")) == 1'557'611'200);
  // GPT-3 175B (paper dims in GPT-2 format): 174.6e9.
  CHECK(total(import_fixture("gpt3-175b")) == 174'604'259'328);
  // BLOOMZ-7b1: 30 x (12·4096² + 13·4096) + 250880·4096 + 2 x 2·4096.
  CHECK(total(import_fixture("bloomz-7b1")) == 7'069'016'064);
  // T5-3B: DeepSpeed prints "2851M total params".
  const Model t5 = import_fixture("t5-3b");
  CHECK(t5.num_decoder_layers == 24);
  CHECK(total(t5) == 2'851'598'336);
  // Its relative bias tables sit in each stack's first layer, not outside:
  // layers + embedding (tied head) + the two final norms = the total.
  const auto c = oomplan::count_params(t5);
  CHECK(c.outside_layers == 2 * 1024);
  CHECK(oomplan::span_params(t5, 0, 48).params + c.embedding + c.lm_head +
            c.outside_layers ==
        2'851'598'336);
  CHECK(c.layers() == oomplan::span_params(t5, 0, 48).params);
  CHECK(c.largest_layer == oomplan::span_params(t5, 0, 48).largest);
  // ZeRO paper's 7.5B stand-in: 36 x (12·4096² + 13·4096) + embeddings.
  CHECK(static_cast<double>(total(import_fixture("zero-paper-7.5b"))) ==
        Approx(7.46e9).epsilon(0.005));
}

TEST_CASE("hf: Gemma 3 takes Gemma3TextConfig defaults and counts SigLIP",
          "[hf]") {
  // The shipped text_config leaves out vocab_size (262,208), heads (8 / 4)
  // and head_dim (256). Text 3,880,263,168 (catalog_facts) + SigLIP
  // 416,866,032 + projector 1152·2560 + 1152 = 4,300,079,472 (HF: 4.3B).
  const Model m = import_fixture("gemma-3-4b-it");
  CHECK(m.vocab_size == 262'208);
  CHECK(m.num_heads == 8);
  CHECK(m.num_kv_heads == 4);
  CHECK(m.head_dim == 256);
  CHECK(m.sliding_window == 1024);
  CHECK(m.global_every == 6);
  CHECK(total(m) - m.extra_params == 3'880'263'168);
  CHECK(total(m) == 4'300'079'472);
}

TEST_CASE("hf: Llama 3.2 Vision counts cross-attention and the vision model",
          "[hf]") {
  // Text: 40 x 218,112,000 + (128256 + 8)·4096 embed + 128256·4096 head +
  // 4096 + 8 cross layers x (2·128 + 2); vision 863,567,379; projector
  // 7680·4096 + 4096. Sum 10,670,220,835 = the published count.
  const Model m = import_fixture("llama-3.2-11b-vision");
  CHECK(m.extra_params == 8 * 4096 + 8 * 258 + 863'567'379 + 31'461'376);
  CHECK(total(m) == 10'670'220'835);
}

TEST_CASE("hf: Mistral Small 3.1 counts the Pixtral tower and projector",
          "[hf]") {
  // Text 40 x (2·5120·4096 + 2·5120·1024 + 3·5120·32768 + 2·5120) +
  // 2·131072·5120 + 5120 = 23,572,403,200; Pixtral 24 x (4·1024² +
  // 3·1024·4096 + 2·1024) + 3·14²·1024 + 1024 = 403,305,472; projector 1024 +
  // 4096·1024 + 1024·5120 + 5120² = 35,652,608 → 24.01e9 ("24B").
  const Model m = import_fixture("mistral-small-3.1-24b");
  CHECK(m.extra_params == 403'305'472 + 35'652'608);
  CHECK(total(m) == 24'011'361'280);
}

TEST_CASE("hf: Llama 4 Scout has 16 experts, a shared expert and chunks",
          "[hf]") {
  // Per layer 62,914,560 attention + 16 experts and 1 shared of 3·5120·8192
  // + router 5120·16 + norms; active keeps 1 expert: 48 x 314,664,960 +
  // 2·202048·5120 + 5120 = 17.17e9 ("17B active"); text 107,769,861,120.
  // Vision: patches 588·1408 + class 1408 + 577·1408 positions + 2
  // LayerNorms + 34 x 23,807,872 + pixel-shuffle MLP 5632·4096 + 4096² +
  // projector 4096·5120 = 871,932,416 → 108,641,793,536 ("109B").
  const Model m = import_fixture("llama-4-scout");
  const auto c = oomplan::count_params(m);
  CHECK(c.total() - c.extra == 107'769'861'120);
  CHECK(c.extra == 871'932'416);
  CHECK(c.total() == 108'641'793'536);
  CHECK(c.active == 17'172'894'720);
  CHECK(m.sliding_window == 8192);
  CHECK(m.global_every == 4);
  CHECK(oomplan::is_local_layer(m, 0));
  CHECK_FALSE(oomplan::is_local_layer(m, 3));
}

TEST_CASE("hf: config defaults follow each transformers config class", "[hf]") {
  // LlamaConfig: num_key_value_heads missing = num_attention_heads; head_dim
  // = hidden_size / heads; lm_head untied.
  const Model l = import_hf_config(llama(), "my/config.json");
  CHECK(l.num_kv_heads == 4);
  CHECK(l.head_dim == 16);
  CHECK_FALSE(l.tie_word_embeddings);
  CHECK(l.name == "my");
  // MistralConfig: sliding_window defaults to 4096 on every layer; null
  // turns it off (Mistral-7B-v0.3).
  std::string mistral = llama();
  mistral.replace(mistral.find("llama"), 5, "mistral");
  CHECK(import_hf_config(mistral, "x").sliding_window == 4096);
  CHECK(import_hf_config(mistral.substr(0, mistral.size() - 1) +
                             R"(, "sliding_window": null})",
                         "x")
            .sliding_window == 0);
  // Qwen2Config: a sliding_window value is ignored unless use_sliding_window.
  CHECK(import_fixture("qwen2.5-7b").sliding_window == 0);
  CHECK(import_fixture("qwen2.5-7b").qkv_bias);
  // Gemma2Config: tied embeddings and 4 norms per layer.
  const Model g = import_fixture("gemma-2-9b");
  CHECK(g.tie_word_embeddings);
  CHECK(g.norms_per_layer == 4);
  // _name_or_path names the model.
  CHECK(import_fixture("codellama-7b").name == "codellama/CodeLlama-7b-hf");
}

TEST_CASE("hf: quantization_config sets the checkpoint format", "[hf]") {
  const auto quant = [](const std::string& config) {
    return import_hf_config(llama(R"(, "quantization_config": )" + config),
                            "q/config.json")
        .checkpoint_quant;
  };
  CHECK(quant(R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
                  "bnb_4bit_quant_type": "nf4",
                  "bnb_4bit_use_double_quant": true})") == Quant::nf4);
  CHECK(quant(R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
                  "bnb_4bit_use_double_quant": false})") == Quant::nf4_nodq);
  CHECK(quant(R"({"quant_method": "bitsandbytes", "load_in_8bit": true})") ==
        Quant::int8);
  CHECK(quant(R"({"quant_method": "gptq", "bits": 4, "group_size": 128})") ==
        Quant::gptq);
  CHECK(quant(R"({"quant_method": "awq", "bits": 4, "version": "gemm"})") ==
        Quant::awq);
  CHECK(quant(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})") ==
        Quant::fp8);
  CHECK(quant(R"({"quant_method": "mxfp4"})") == Quant::mxfp4);
  CHECK(quant(R"({"quant_method": "compressed-tensors", "config_groups":
                  {"group_0": {"weights": {"num_bits": 8, "type": "float"}}}})") ==
        Quant::fp8);
  CHECK(quant(R"({"quant_method": "compressed-tensors", "config_groups":
                  {"group_0": {"weights": {"num_bits": 8, "type": "int"}}}})") ==
        Quant::int8);
  CHECK(quant(R"({"quant_method": "compressed-tensors", "config_groups":
                  {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}})") ==
        Quant::int4);
  CHECK(import_fixture("deepseek-v3").checkpoint_quant == Quant::fp8);
  CHECK(import_fixture("gpt-oss-20b").checkpoint_quant == Quant::mxfp4);
  CHECK(import_fixture("llama-7b").checkpoint_quant == Quant::none);
}

TEST_CASE("hf: the safetensors index gives the exact checkpoint size", "[hf]") {
  // LLaMA-7B: 6,738,415,616 bf16 parameters plus one 256 B rotary inv_freq
  // buffer per layer (32) = 13,476,839,424 B.
  const Model m = import_hf_config(
      fixture_text("llama-7b"), "my/config.json",
      R"({"metadata": {"total_size": 13476839424}, "weight_map": {}})");
  CHECK(m.checkpoint_bytes == 13'476'839'424);
  CHECK(import_error(llama(), R"({"weight_map": {}})") ==
        "my/config.json: model.safetensors.index.json: metadata.total_size: "
        "missing");
}

TEST_CASE("hf: modules a quantized checkpoint leaves in bf16 are read",
          "[hf]") {
  // Llama-3.1-405B's shapes with Meta's FP8 list (transformers' conversion
  // script: model.layers.0, model.layers.125, lm_head, and self_attn of
  // layers 1-124). Per layer: attention 2 x 16384^2 + 2 x 16384 x 1024 =
  // 570,425,344; MLP 3 x 16384 x 53248 = 2,617,245,696. Kept in bf16: 2 x
  // (570,425,344 + 2,617,245,696) + 124 x 570,425,344 = 77,108,084,736.
  std::string list = R"("model.layers.0", "model.layers.125", "lm_head")";
  for (int i = 1; i < 125; ++i) {
    list += fmt::format(R"(, "model.layers.{}.self_attn")", i);
  }
  const std::string config =
      R"({"model_type": "llama", "hidden_size": 16384,
          "num_hidden_layers": 126, "num_attention_heads": 128,
          "num_key_value_heads": 8, "intermediate_size": 53248,
          "vocab_size": 128256, "max_position_embeddings": 131072,
          "quantization_config": {"activation_scale_ub": 1200.0,
            "quant_method": "fbgemm_fp8", "modules_to_not_convert": [)" +
      list + "]}}";
  const Model m = import_hf_config(config, "my/config.json");
  CHECK(m.checkpoint_quant == Quant::fp8);
  CHECK(m.unquantized_params == 77'108'084'736);

  // compressed-tensors: plain names and re: patterns (re.match: from the
  // start; '$' to the end). Toy Llama, 2 layers: down_proj 64 x 128 = 8,192
  // per layer; q_proj 64 x 64 = 4,096.
  auto kept = [](const std::string& ignore) {
    return import_hf_config(llama(R"(, "quantization_config": {"quant_method":
                 "compressed-tensors", "config_groups": {"group_0":
                 {"weights": {"num_bits": 8, "type": "float"}}},
                 "ignore": )" + ignore +
                                  "}"),
                            "my/config.json")
        .unquantized_params;
  };
  CHECK(kept(R"(["lm_head", "re:.*mlp.down_proj$"])") == 2 * 8'192);
  CHECK(kept(R"(["re:model\\.layers\\.1\\..*q_proj"])") == 4'096);
  CHECK(kept(R"(["model.layers.1.self_attn.q_proj"])") == 4'096);
  // "layers.1" is layer 1 only, not layer 10 or a path that merely
  // contains the text.
  CHECK(kept(R"j(["re:(mlp|self_attn)", "self_att", "model.layers.1x"])j") ==
        0);
  CHECK(import_error(llama(R"(, "quantization_config": {"quant_method":
          "fbgemm_fp8", "modules_to_not_convert": "lm_head"})")) ==
        "my/config.json: quantization_config.modules_to_not_convert: must be "
        "a list of module names, but is \"lm_head\"");
}

TEST_CASE("hf: bad configs name the file and the field", "[hf]") {
  CHECK(import_error(R"({"model_type": "rwkv", "hidden_size": 1})") ==
        "my/config.json: model_type: unsupported 'rwkv'; supported: llama, "
        "mistral, ministral3, mixtral, qwen2, qwen2_moe, qwen2_vl, qwen2_5_vl, "
        "qwen3, "
        "qwen3_moe, qwen3_next, gemma, gemma2, gemma3, gemma3_text, phi, phi3, "
        "phimoe, cohere, cohere2, olmo2, olmo3, exaone4, falcon, falcon_h1, "
        "granite, internlm2, "
        "deepseek_v2, deepseek_v3, kimi_k2, glm4_moe, gpt_oss, gpt2, "
        "gpt_bigcode, gptj, starcoder2, stablelm, smollm3, gpt_neox, bloom, "
        "llama4, mllama, mistral3, t5, jamba, mamba, mamba2");
  CHECK(import_error(llama(R"(, "num_hidden_layers": 2000000000000)")) ==
        "my/config.json: num_hidden_layers: must be from 1 to 4096, but is "
        "2000000000000");
  CHECK(import_error(R"({"hidden_size": 1})") ==
        "my/config.json: model_type: missing");
  CHECK(import_error(R"({"model_type": "llama", "num_hidden_layers": 2})") ==
        "my/config.json: hidden_size: missing");
  CHECK(import_error(llama(R"(, "num_key_value_heads": 3)")) ==
        "my/config.json: num_key_value_heads: 3 does not divide "
        "num_attention_heads 4");
  CHECK(import_error(R"({"model_type": "mistral3", "text_config":
                         {"hidden_size": 8}})") ==
        "my/config.json: text_config.num_hidden_layers: missing");
  CHECK(import_error(
            llama(R"(, "quantization_config": {"quant_method": "hqq"})")) ==
        "my/config.json: quantization_config.quant_method: unsupported "
        "'hqq'; supported: bitsandbytes, gptq, awq, fp8, compressed-tensors, "
        "mxfp4");
  CHECK(import_error("{\"model_type\": ") ==
        "my/config.json: parse error at line 1, column 16: syntax error while "
        "parsing value - unexpected end of input; expected '[', '{', or a "
        "literal");
}

TEST_CASE("hf: Phi-2 has a parallel block and a biased lm_head", "[hf]") {
  // microsoft/phi-2: 32 x (4·2560² + 4·2560 biases + 2·2560·10240 + 10240 +
  // 2560 + LayerNorm 2·2560) + 51200·2560 embed + head + 51200 bias + final
  // LayerNorm 5120 = 2,779,683,840 (published 2.78B).
  const Model m = import_hf_config(
      R"({"_name_or_path": "microsoft/phi-2", "model_type": "phi",
          "hidden_size": 2560, "intermediate_size": 10240,
          "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 32, "partial_rotary_factor": 0.4,
          "vocab_size": 51200, "max_position_embeddings": 2048,
          "tie_word_embeddings": false, "qk_layernorm": false})",
      "phi-2/config.json");
  CHECK(m.parallel_block);
  CHECK(total(m) == 2'779'683'840);
}

TEST_CASE("hf: Qwen1.5-MoE has a gated shared expert", "[hf]") {
  // Qwen/Qwen1.5-MoE-A2.7B: per layer 4·2048² + 3·2048 qkv bias + 60 experts
  // of 3·2048·1408 + shared 3·2048·5632 + router 2048·60 + shared gate 2048
  // + 2 norms = 570,560,512; x24 + 2·151936·2048 + 2048 = 14.3e9 total; 4
  // experts per token leave 2.69e9 active ("A2.7B").
  const Model m = import_hf_config(
      R"({"model_type": "qwen2_moe", "hidden_size": 2048,
          "num_hidden_layers": 24, "num_attention_heads": 16,
          "num_key_value_heads": 16, "intermediate_size": 5632,
          "moe_intermediate_size": 1408,
          "shared_expert_intermediate_size": 5632, "num_experts": 60,
          "num_experts_per_tok": 4, "decoder_sparse_step": 1,
          "mlp_only_layers": [], "vocab_size": 151936,
          "tie_word_embeddings": false, "use_sliding_window": false})",
      "qwen-moe/config.json");
  const auto c = oomplan::count_params(m);
  CHECK(c.total() == 14'315'784'192);
  CHECK(c.active == 2'689'173'504);
  CHECK(c.shared_experts == 24LL * 3 * 2048 * 5632);
}

TEST_CASE("hf: Falcon-7B is multi-query with one LayerNorm per block", "[hf]") {
  // tiiuae/falcon-7b (old decoder): 32 x (4544² q + 2·4544·64 kv + 4544² o +
  // 2·4544·18176 MLP + LayerNorm 9,088) + 65024·4544 tied + 9,088 =
  // 6,921,720,704 (published 6.92B).
  const Model m = import_hf_config(
      R"({"model_type": "falcon", "hidden_size": 4544,
          "num_hidden_layers": 32, "num_attention_heads": 71,
          "multi_query": true, "parallel_attn": true, "bias": false,
          "alibi": false, "new_decoder_architecture": false,
          "vocab_size": 65024})",
      "falcon-7b/config.json");
  CHECK(m.num_kv_heads == 1);
  CHECK(m.norms_per_layer == 1);
  CHECK(total(m) == 6'921'720'704);
}

TEST_CASE("hf: Gemma 1 defaults to head_dim 256 and tied embeddings", "[hf]") {
  // google/gemma-2b: 18 x (2·2048² + 2·2048·256 + 3·2048·16384 + 2·2048) +
  // 256000·2048 + 2048 = 2,506,172,416 (published 2.51B); gemma-7b:
  // 28 x (2·3072·4096 + 2·3072·4096 + 3·3072·24576 + 2·3072) + 256000·3072 +
  // 3072 = 8,537,680,896 (published 8.54B).
  const Model small = import_hf_config(
      R"({"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18,
          "num_attention_heads": 8, "num_key_value_heads": 1,
          "intermediate_size": 16384, "vocab_size": 256000})",
      "gemma-2b/config.json");
  CHECK(small.head_dim == 256);
  CHECK(small.tie_word_embeddings);
  CHECK(total(small) == 2'506'172'416);
  const Model big = import_hf_config(
      R"({"model_type": "gemma", "hidden_size": 3072, "num_hidden_layers": 28,
          "num_attention_heads": 16, "num_key_value_heads": 16,
          "head_dim": 256, "intermediate_size": 24576,
          "vocab_size": 256000})",
      "gemma-7b/config.json");
  CHECK(total(big) == 8'537'680'896);
}

TEST_CASE("hf: GPT-NeoX counts biases, two LayerNorms and embed_out", "[hf]") {
  // EleutherAI/pythia-6.9b: 32 x (4·4096² + 4·4096 + 2·4096·16384 + 16384 +
  // 4096 + 2 LayerNorms 4·4096) + 2·50432·4096 + 8192 = 6,857,302,016 (the
  // Pythia paper's exact count).
  const Model m = import_hf_config(
      R"({"model_type": "gpt_neox", "hidden_size": 4096,
          "num_hidden_layers": 32, "num_attention_heads": 32,
          "intermediate_size": 16384, "vocab_size": 50432,
          "use_parallel_residual": true, "tie_word_embeddings": false})",
      "pythia-6.9b/config.json");
  CHECK(m.parallel_block);
  CHECK(total(m) == 6'857'302'016);
}

TEST_CASE("hf: StarCoder2 biases every linear and ties by default", "[hf]") {
  // bigcode/starcoder2-3b: 30 x (2·3072² q,o + 2·3072·256 k,v + 2·3072·12288
  // c_fc,c_proj + biases 3072+256+256+3072+12288+3072 + 2 LayerNorms
  // 4·3072 = 95,979,008) + 49152·3072 tied + final LayerNorm 6,144 =
  // 3,030,371,328. No tie key: PretrainedConfig's true.
  const std::string sc2 =
      R"({"model_type": "starcoder2", "hidden_size": 3072,
          "num_hidden_layers": 30, "num_attention_heads": 24,
          "num_key_value_heads": 2, "intermediate_size": 12288,
          "vocab_size": 49152, "sliding_window": 4096, "use_bias": true)";
  const Model m = import_hf_config(sc2 + "}", "starcoder2-3b/config.json");
  CHECK(m.tie_word_embeddings);
  CHECK(m.sliding_window == 4096);
  CHECK(total(m) == 3'030'371'328);
  // starcoder2-15b says false: the head is counted again.
  const Model untied = import_hf_config(
      sc2 + R"(, "tie_word_embeddings": false})", "x/config.json");
  CHECK(total(untied) == 3'030'371'328 + 49152LL * 3072);
}

TEST_CASE("hf: InternLM2 fuses q, k, v and biases them by default", "[hf]") {
  // internlm/internlm2_5-7b (bias false): 32 x (wqkv 4096·(32+2·8)·128 +
  // wo 4096² + w1,w3,w2 3·4096·14336 + 2 RMSNorms 8,192 = 218,112,000) +
  // 92544·4096 embedding and untied output 758,120,448 + final norm 4,096
  // = 7,737,708,544 ("7.74B" on its Hugging Face page).
  const std::string cfg =
      R"({"model_type": "internlm2", "hidden_size": 4096,
          "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8, "intermediate_size": 14336,
          "vocab_size": 92544)";
  const Model m = import_hf_config(cfg + R"(, "bias": false})",
                                   "internlm2_5-7b/config.json");
  CHECK_FALSE(m.tie_word_embeddings);
  CHECK(total(m) == 7'737'708'544);
  // No bias key: InternLM2Config's bias=True adds wqkv's 6,144 and wo's
  // 4,096 per layer: 32 x 10,240 = 327,680.
  const Model biased = import_hf_config(cfg + "}", "x/config.json");
  CHECK(total(biased) == 7'737'708'544 + 327'680);
}

TEST_CASE("hf: GPT-BigCode is multi-query unless told otherwise", "[hf]") {
  // bigcode/gpt_bigcode-santacoder: 24 x (c_attn 2048·(2048 + 2·128) + 2,304
  // bias + c_proj 2048² + 2,048 + c_fc/c_proj 2·2048·8192 + 8,192 + 2,048 +
  // 2 LayerNorms 8,192 = 42,490,112) + 49280·2048 tied + 2048 learned
  // positions · 2048 + final LayerNorm 4,096 = 1,124,886,528 ("1.1B").
  const std::string santa =
      R"({"model_type": "gpt_bigcode", "n_embd": 2048, "n_layer": 24,
          "n_head": 16, "n_inner": 8192, "n_positions": 2048,
          "vocab_size": 49280)";
  const Model m = import_hf_config(santa + "}", "santacoder/config.json");
  CHECK(m.num_kv_heads == 1);
  CHECK(total(m) == 1'124'886'528);
  const Model mha =
      import_hf_config(santa + R"(, "multi_query": false})", "x/config.json");
  CHECK(mha.num_kv_heads == 16);
}

TEST_CASE("hf: GPT-J runs a parallel block with a biased, untied head",
          "[hf]") {
  // EleutherAI/gpt-j-6b: 28 x (4·4096² attention without bias + 2·4096·16384
  // MLP + 16,384 + 4,096 biases + one LayerNorm 8,192 = 201,355,264) +
  // 2·50400·4096 embeddings and head + 50,400 head bias + final LayerNorm
  // 8,192 = 6,050,882,784 (the card's 6,053,381,344 counts 2,498,560 more,
  // -0.04 %).
  const Model m = import_hf_config(
      R"({"model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16,
          "n_inner": null, "n_positions": 2048, "rotary_dim": 64,
          "vocab_size": 50400, "tie_word_embeddings": false})",
      "gpt-j-6b/config.json");
  CHECK(m.parallel_block);
  CHECK(m.intermediate_size == 16384);
  CHECK(total(m) == 6'050'882'784);
}

TEST_CASE("hf: OLMo 3 is OLMo 2 with three sliding layers in four", "[hf]") {
  // allenai/Olmo-3.1-32B-Instruct: 64 x (2·5120·5120 q,o + 2·5120·1024 k,v +
  // 3·5120·27648 MLP + q_norm 5,120 + k_norm 1,024 + 2 RMSNorms 10,240 =
  // 487,604,224) + 2·100278·5120 untied + 5,120 = 32,233,522,176.
  const std::string olmo3 =
      R"({"model_type": "olmo3", "hidden_size": 5120,
          "num_hidden_layers": 64, "num_attention_heads": 40,
          "num_key_value_heads": 8, "intermediate_size": 27648,
          "vocab_size": 100278, "tie_word_embeddings": false)";
  const Model m = import_hf_config(olmo3 + "}", "olmo3/config.json");
  CHECK(total(m) == 32'233'522'176);
  // No layer_types: Olmo3Config's default, every fourth layer full, over a
  // 4,096-token window.
  CHECK(m.sliding_window == 4096);
  CHECK(m.global_every == 4);
  const Model all_full = import_hf_config(
      olmo3 + R"(, "layer_types": ["full_attention"]})", "x/config.json");
  CHECK(all_full.sliding_window == 0);
}

TEST_CASE("hf: EXAONE 4 norms q and k per head after OLMo 2's layer", "[hf]") {
  // LGAI-EXAONE/EXAONE-4.0-32B: 64 x (2·5120² + 2·5120·1024 + 3·5120·27392
  // + q_norm, k_norm 2·128 + 2 RMSNorms 10,240 = 483,666,176) +
  // 2·102400·5120 untied + 5,120 = 32,003,216,384.
  const std::string exaone =
      R"({"model_type": "exaone4", "hidden_size": 5120,
          "num_hidden_layers": 64, "num_attention_heads": 40,
          "num_key_value_heads": 8, "head_dim": 128,
          "intermediate_size": 27392, "vocab_size": 102400)";
  const Model m = import_hf_config(
      exaone + R"(, "sliding_window_pattern": "LLLG"})", "exaone/config.json");
  CHECK(total(m) == 32'003'216'384);
  CHECK(m.sliding_window == 4096);
  CHECK(m.global_every == 4);
  const Model every_second = import_hf_config(
      exaone + R"(, "sliding_window_pattern": 2})", "x/config.json");
  CHECK(every_second.global_every == 2);
}

TEST_CASE("hf: Ministral 3 text decoders read as Mistral", "[hf]") {
  // mistralai/Devstral-2-123B-Instruct-2512 (Ministral3ForCausalLM): 88 x
  // (2·12288² + 2·12288·1024 + 3·12288·28672 + 2 RMSNorms 24,576 =
  // 1,384,144,896) + 2·131072·12288 untied + 12,288 = 125,025,988,608
  // ("123B" in its name, +1.6 %).
  const Model m = import_hf_config(
      R"({"model_type": "ministral3", "hidden_size": 12288,
          "num_hidden_layers": 88, "num_attention_heads": 96,
          "num_key_value_heads": 8, "head_dim": 128,
          "intermediate_size": 28672, "vocab_size": 131072,
          "sliding_window": null, "tie_word_embeddings": false})",
      "devstral-2/config.json");
  CHECK(total(m) == 125'025'988'608);
  CHECK(m.sliding_window == 0);
}

TEST_CASE("hf: StableLM 2 and SmolLM3 import", "[hf]") {
  // stabilityai/stablelm-2-1_6b: 24 x (4·2048² + q,k,v biases 3·2048 +
  // 3·2048·5632 gated MLP + 2 LayerNorms 4·2048 = 51,394,560) + 2·100352·2048
  // untied + final LayerNorm 4,096 = 1,644,515,328 (card: 1,644,417,024).
  const Model stablelm = import_hf_config(
      R"({"model_type": "stablelm", "hidden_size": 2048,
          "num_hidden_layers": 24, "num_attention_heads": 32,
          "num_key_value_heads": 32, "intermediate_size": 5632,
          "vocab_size": 100352, "use_qkv_bias": true,
          "tie_word_embeddings": false})",
      "stablelm-2-1_6b/config.json");
  CHECK(total(stablelm) == 1'644'515'328);
  // HuggingFaceTB/SmolLM3-3B, no tie key (SmolLM3Config: true): 36 x
  // (2·2048² + 2·2048·512 + 3·2048·11008 + 2 RMSNorms 4,096 = 78,123,008) +
  // 128256·2048 tied + 2,048 = 3,075,098,624.
  const Model smol = import_hf_config(
      R"({"model_type": "smollm3", "hidden_size": 2048,
          "num_hidden_layers": 36, "num_attention_heads": 16,
          "num_key_value_heads": 4, "intermediate_size": 11008,
          "vocab_size": 128256, "use_sliding_window": false,
          "sliding_window": null})",
      "smollm3/config.json");
  CHECK(smol.tie_word_embeddings);
  CHECK(total(smol) == 3'075'098'624);
}

TEST_CASE("hf: Qwen2.5-VL adds its vision transformer to Qwen2.5", "[hf]") {
  // Qwen/Qwen2.5-VL-7B-Instruct: the Qwen2.5-7B decoder (7,615,616,512) +
  // patch Conv3d 3·2·14²·1280 + 32 blocks x (2·1280 + 1280·3840 + 3840 +
  // 1280² + 1280 + 3·1280·3420 + 2·3420 + 1280) + merger 1280 + 5120² + 5120
  // + 5120·3584 + 3584 = 8,292,166,656 (published 8.29B).
  const Model m = import_hf_config(
      R"({"model_type": "qwen2_5_vl", "hidden_size": 3584,
          "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "intermediate_size": 18944,
          "vocab_size": 152064, "tie_word_embeddings": false,
          "vision_config": {"depth": 32, "hidden_size": 1280,
            "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
            "out_hidden_size": 3584, "patch_size": 14,
            "spatial_merge_size": 2, "temporal_patch_size": 2}})",
      "qwen2.5-vl-7b/config.json");
  CHECK(total(m) - m.extra_params == 7'615'616'512);
  CHECK(total(m) == 8'292'166'656);
}

TEST_CASE("hf: Qwen2-VL counts LayerNorm blocks with a GELU MLP", "[hf]") {
  // Qwen/Qwen2-VL-7B-Instruct: decoder 7,615,616,512 + patch 1,505,280 + 32
  // blocks x (2·2·1280 + 1280·3840 + 3840 + 1280² + 1280 + 2·1280·5120 +
  // 5120 + 1280) + merger 2·1280 + 5120² + 5120 + 5120·3584 + 3584 =
  // 8,291,375,616 (published 8.29B).
  const Model m = import_hf_config(
      R"({"model_type": "qwen2_vl", "hidden_size": 3584,
          "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "intermediate_size": 18944,
          "vocab_size": 152064, "tie_word_embeddings": false,
          "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4,
            "num_heads": 16, "in_chans": 3, "hidden_size": 3584,
            "patch_size": 14, "spatial_merge_size": 2,
            "temporal_patch_size": 2}})",
      "qwen2-vl-7b/config.json");
  CHECK(total(m) == 8'291'375'616);
}

TEST_CASE("hf: Llama 4 Maverick alternates dense and MoE layers", "[hf]") {
  // interleave_moe_layer_step 2: layers 1, 3, ... are MoE (128 experts +
  // shared of 3·5120·8192, router 5120·128), the others dense of
  // intermediate_size_mlp 16384. 24 x 314,583,040 + 24 x 16,295,536,640 +
  // 2·202048·5120 + 5120 = 400,711,848,960 text ("400B"); active 24 x
  // 314,583,040 + 24 x 315,238,400 + embeddings = 17,184,691,200 ("17B").
  const Model m = import_fixture("llama-4-maverick");
  const auto c = oomplan::count_params(m);
  CHECK_FALSE(oomplan::is_moe_layer(m, 0));
  CHECK(oomplan::is_moe_layer(m, 1));
  CHECK(c.mlp == 24LL * 3 * 5120 * 16384);
  CHECK(c.total() - c.extra == 400'711'848'960);
  CHECK(c.active == 17'184'691'200);
  CHECK(c.extra == 871'932'416);  // the same vision model as Scout
}

TEST_CASE("hf: sizes that overflow 64-bit arithmetic are an error", "[hf]") {
  // D1: vision_config.hidden_size 10^12 printed "(-4714487718.29B params)"
  // and FITS (signed overflow in siglip_params).
  CHECK(fixture_error("gemma-3-4b-it",
                      [](auto& doc) {
                        doc["vision_config"]["hidden_size"] = 1'000'000'000'000;
                      }) ==
        "hf/gemma-3-4b-it/config.json: the sizes in this config give more than "
        "10^15 parameters (they overflow 64-bit arithmetic)");
  // fuzz_hf_import (UBSan): d_inner = expand x hidden_size wrapped for
  // Mamba (expand 2^32, hidden_size 2^53), then for Falcon-H1 (mamba_expand
  // 2^53, hidden_size 4096): every reader of an expand factor.
  for (const auto& [type, key] : {std::pair{"mamba", "expand"},
                                  {"mamba2", "expand"},
                                  {"jamba", "mamba_expand"},
                                  {"falcon_h1", "mamba_expand"}}) {
    INFO(type);
    nlohmann::json doc = {
        {"model_type", type},       {"hidden_size", 4096},
        {"num_hidden_layers", 2},   {"num_attention_heads", 32},
        {"num_key_value_heads", 8}, {"intermediate_size", 14336},
        {"vocab_size", 256},        {key, 9007199254740992}};
    CHECK(import_error(doc.dump()) ==
          "my/config.json: the sizes in this config give more than 10^15 "
          "parameters (they overflow 64-bit arithmetic)");
  }
  // The Qwen-VL image side is a multiple of patch x merge (both 2^53 here).
  const std::string vl =
      R"({"model_type": "qwen2_vl", "hidden_size": 3584,
          "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "intermediate_size": 18944,
          "vocab_size": 152064, "vision_config": {"depth": 32,
            "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16,
            "hidden_size": 3584, "patch_size": 9007199254740992,
            "spatial_merge_size": 9007199254740992}})";
  CHECK(import_error(vl) ==
        "my/config.json: the sizes in this config give more than 10^15 "
        "parameters (they overflow 64-bit arithmetic)");
  // 10^7 does not overflow, but 27 layers of 4 h^2 exceed 10^15.
  CHECK(fixture_error(
            "gemma-3-4b-it",
            [](auto& doc) { doc["vision_config"]["hidden_size"] = 10'000'000; })
            .rfind("hf/gemma-3-4b-it/config.json: vision_config: these sizes "
                   "give ",
                   0) == 0);
  // gpt2 n_head 10^15 gave head_dim 0; n_head > n_embd likewise.
  CHECK(
      fixture_error("gpt2-xl",
                    [](auto& doc) { doc["n_head"] = 1'000'000'000'000'000; }) ==
      "hf/gpt2-xl/config.json: n_head: 1000000000000000 does not divide "
      "n_embd 1600");
  CHECK(fixture_error("gpt2-xl", [](auto& doc) { doc["n_head"] = 3200; }) ==
        "hf/gpt2-xl/config.json: n_head: 3200 does not divide n_embd 1600");
  CHECK(import_error(llama(R"(, "vocab_size": 18446744073709551615)")) ==
        "my/config.json: vocab_size: must be at most 9007199254740992, but is "
        "18446744073709551615");
}

TEST_CASE("hf: layer counts are bounded before any per-layer work", "[hf]") {
  // D3: a Gemma-3 text_config with 2.8 M layers took 3.5 s. The refusal
  // names the bound, so no layer was walked before it (not timed here: the
  // suite has no timed tests).
  CHECK(fixture_error("gemma-3-4b-it",
                      [](auto& doc) {
                        doc["text_config"]["num_hidden_layers"] = 2'800'000;
                      }) ==
        "hf/gemma-3-4b-it/config.json: text_config.num_hidden_layers: must be "
        "from 1 to 4096, but is 2800000");
  // Fuzzing: the hybrids build their layer-type list while reading (a Jamba
  // config with 2^32 layers allocated 2 GiB before check_model() ran), and
  // mlp_only_layers a table of the layers (2^53 of them: 2^50 bytes).
  for (const char* type :
       {"jamba", "mamba", "mamba2", "falcon_h1", "qwen3_next", "qwen3_moe"}) {
    INFO(type);
    const std::string text = std::string(R"({"model_type": ")") + type +
                             R"(", "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 4294967296, "num_attention_heads": 4,
          "num_key_value_heads": 4, "vocab_size": 256, "num_experts": 4,
          "num_experts_per_tok": 2, "moe_intermediate_size": 32,
          "mlp_only_layers": []})";
    CHECK(import_error(text) ==
          "my/config.json: num_hidden_layers: must be from 1 to 4096, but is "
          "4294967296");
  }
  CHECK(import_error(R"({"model_type": "qwen3_moe", "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 9007199254740992,
          "num_attention_heads": 4, "num_key_value_heads": 4,
          "vocab_size": 256, "num_experts": 4, "num_experts_per_tok": 2,
          "moe_intermediate_size": 32, "mlp_only_layers": []})") ==
        "my/config.json: num_hidden_layers: must be from 1 to 4096, but is "
        "9007199254740992");
}

TEST_CASE("hf: compressed-tensors num_bits must be 4 or 8 bits", "[hf]") {
  // D5: a string num_bits ended in "internal error: [json.exception.
  // type_error.302]"; a huge one was undefined behaviour (int conversion).
  const auto with_bits = [](const std::string& bits) {
    return import_error(llama(
        R"(, "quantization_config": {"quant_method": "compressed-tensors",
             "config_groups": {"group_0": {"weights": {"num_bits": )" +
        bits + R"(, "type": "int"}}}})"));
  };
  const std::string where =
      "my/config.json: quantization_config.config_groups.group_0.weights."
      "num_bits: ";
  CHECK(with_bits(R"("8")") == where + R"(must be a whole number, but is "8")");
  CHECK(with_bits("1e300") == where + "must be a whole number, but is 1e+300");
  CHECK(with_bits("18446744073709551615") ==
        where +
            "must be at most 9007199254740992, but is "
            "18446744073709551615");
  CHECK(with_bits("4294967304") == where +
                                       "unsupported 4294967304-bit int "
                                       "weights; supported: 4 and 8 bits");
  CHECK(with_bits("16") ==
        where + "unsupported 16-bit int weights; supported: 4 and 8 bits");
  CHECK(import_error(llama(
            R"(, "quantization_config": {"quant_method": "compressed-tensors",
                 "config_groups": {"group_0": {"weights": []}}})")) ==
        "my/config.json: quantization_config.config_groups.group_0.weights: "
        "must be an object, but is array");
}

TEST_CASE("hf: impossible structures are rejected as the catalog rejects them",
          "[hf]") {
  // D6: these used to plan (deepseek: "37.4B params").
  CHECK(fixture_error("deepseek-v3",
                      [](auto& doc) { doc["first_k_dense_replace"] = 1000; }) ==
        "hf/deepseek-v3/config.json: first_k_dense_replace: 1000 dense layers "
        "exceed num_hidden_layers 61");
  CHECK(fixture_error("qwen3-30b-a3b",
                      [](auto& doc) {
                        doc["mlp_only_layers"] = nlohmann::json::array();
                        for (int i = 0; i < 200; ++i) {
                          doc["mlp_only_layers"].push_back(i);
                        }
                      }) ==
        "hf/qwen3-30b-a3b/config.json: mlp_only_layers: 48 is not a layer "
        "index from 0 to 47");
  CHECK(fixture_error("qwen3-30b-a3b",
                      [](auto& doc) {
                        doc["mlp_only_layers"] = {3, 3};
                      }) ==
        "hf/qwen3-30b-a3b/config.json: mlp_only_layers: layer 3 is "
        "listed twice");
  CHECK(import_error(llama(R"(, "num_key_value_heads": 0)")) ==
        "my/config.json: num_key_value_heads: must be positive, but is 0");
  CHECK(import_error(llama(R"(, "num_key_value_heads": 8)")) ==
        "my/config.json: num_key_value_heads: 8 exceeds num_attention_heads 4");
  // A real mlp_only_layers list still imports: Qwen3-30B-A3B with layers 0
  // and 47 dense has 2 dense and 46 MoE layers.
  nlohmann::json doc = nlohmann::json::parse(fixture_text("qwen3-30b-a3b"));
  doc["mlp_only_layers"] = {0, 47};
  const Model m = import_hf_config(doc.dump(), "q/config.json");
  CHECK(m.first_k_dense == 2);
}

TEST_CASE("hf: the index total_size is validated against the parameters",
          "[hf]") {
  // D7: -5, 0 and 2^64 - 1 were accepted. The toy Llama has 95,040
  // parameters: 2 layers x (4 x 64^2 attention + 3 x 64 x 128 MLP + 2 x 64
  // norms) + 2 x 100 x 64 embedding and lm_head + 64 final norm.
  const auto with_total = [](const std::string& total) {
    return import_error(llama(), R"({"metadata": {"total_size": )" + total +
                                     R"(}, "weight_map": {}})");
  };
  const std::string where =
      "my/config.json: model.safetensors.index.json: metadata.total_size: ";
  for (const char* bad : {"-5", "0", "18446744073709551615", "\"1\"", "1.5"}) {
    INFO(bad);
    CHECK(with_total(bad).rfind(
              where + "must be a byte count from 1 to 9223372036854775807",
              0) == 0);
  }
  CHECK(with_total("5") == where +
                               "5 bytes cannot hold 95040 parameters (1 bit "
                               "to 8 bytes each: 11880 to 760320 bytes)");
  CHECK(with_total("760321").rfind(where + "760321 bytes cannot hold", 0) == 0);
  // bf16: exactly 2 bytes per parameter.
  const Model m = import_hf_config(
      llama(), "my/config.json",
      R"({"metadata": {"total_size": 190080}, "weight_map": {}})");
  CHECK(m.checkpoint_bytes == 190'080);
  CHECK(import_error(llama(), "[1]") ==
        "my/config.json: model.safetensors.index.json: must hold a JSON "
        "object");
}

TEST_CASE("hf: messages stay on one line whatever the config holds", "[hf]") {
  // D5: user text is escaped, and a huge value is cut.
  CHECK(import_error(R"({"model_type": "evil\nmodel"})") ==
        "my/config.json: model_type: unsupported 'evil\\nmodel'; supported: "
        "llama, mistral, ministral3, mixtral, qwen2, qwen2_moe, qwen2_vl, "
        "qwen2_5_vl, "
        "qwen3, qwen3_moe, qwen3_next, gemma, gemma2, gemma3, gemma3_text, "
        "phi, phi3, phimoe, cohere, cohere2, olmo2, olmo3, exaone4, falcon, "
        "falcon_h1, "
        "granite, internlm2, deepseek_v2, deepseek_v3, kimi_k2, glm4_moe, "
        "gpt_oss, gpt2, "
        "gpt_bigcode, gptj, starcoder2, stablelm, smollm3, gpt_neox, bloom, "
        "llama4, mllama, mistral3, t5, jamba, mamba, mamba2");
  const std::string big(10'000, '7');
  const std::string message =
      import_error(llama(R"(, "tie_word_embeddings": ")" + big + R"(")"));
  CHECK(message.size() < 300);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("hf: deeply nested JSON is refused before it is copied", "[hf]") {
  CHECK(import_error(R"({"model_type": "gemma3", "text_config": )" +
                     std::string(70, '[')) ==
        "my/config.json: JSON nested deeper than 64 levels");
  CHECK(import_error(llama(), std::string(1'000'000, '{')) ==
        "my/config.json: model.safetensors.index.json: JSON nested deeper "
        "than 64 levels");
}

namespace {

std::int64_t active(const Model& m) {
  return oomplan::count_params(m).active;
}

}  // namespace

TEST_CASE("hf: Qwen3-Next counts gated attention, DeltaNet and 512 experts",
          "[hf]") {
  // Qwen3NextGatedDeltaNet per linear layer (h 2048, Hk 16 x dk 128, Hv 32 x
  // dv 128, K 4): in_proj_qkvz 2048 x 12288 + in_proj_ba 2048 x 64 + out_proj
  // 4096 x 2048 + conv 8192 x 4 + dt_bias, A_log 2 x 32 + norm 128 =
  // 33,726,656. Qwen3NextAttention (16 heads x 256, 2 KV heads): q_proj with
  // the gate 2048 x 8192 + k, v 2 x 2048 x 512 + o 4096 x 2048 + q/k norm
  // 512 = 27,263,488. MoE per layer: 512 experts x 3 x 2048 x 512 + router
  // 2048 x 512 + shared 3 x 2048 x 512 + shared gate 2048 = 1,615,859,712;
  // 2 norms. 12 attention + 36 DeltaNet layers, untied 151,936 x 2048
  // embeddings and lm_head, final norm: 79,674,391,296 ("80B total
  // parameters, only 3B active": transformers docs/source/en/model_doc/
  // qwen3_next.md; active 3,874,929,408 with the 622 M embedding rows).
  const Model m = import_fixture("qwen3-next-80b-a3b");
  CHECK(total(m) == 79'674'391'296);
  CHECK(active(m) == 3'874'929'408);
  CHECK(oomplan::attention_layer_count(m) == 12);
  for (const std::int64_t layer : {0, 1, 2, 4, 47}) {
    INFO(layer);
    CHECK(oomplan::is_attention_layer(m, layer) == (layer == 47));
  }
  CHECK(oomplan::is_attention_layer(m, 3));
  // vLLM gated_delta_net_state_shape, bf16: conv (2 x 16 x 128 + 32 x 128)
  // x (4 - 1) x 2 B = 49,152 and recurrent 32 x 128 x 128 x 2 B = 1,048,576
  // per DeltaNet layer, x 36 = 39,518,208 B per sequence; with tp 4 a
  // quarter of each: 274,432 x 36 = 9,879,552 B.
  CHECK(oomplan::recurrent_state_bytes_per_sequence(m, oomplan::Dtype::bf16) ==
        39'518'208);
  CHECK(oomplan::recurrent_state_bytes_per_sequence(
            m, oomplan::Dtype::bf16, oomplan::Dtype::bf16, 4) == 9'879'552);
  // Its 12 attention layers keep KV: 2 x 2 heads x 256 x 2 B = 2,048 B per
  // token per layer.
  CHECK(m.num_kv_heads * m.head_dim * 2 * 2 == 2048);
}

TEST_CASE("hf: Kimi K2 is DeepSeek-V3 under its own model_type", "[hf]") {
  // MLA per layer (h 7168, 64 heads, q_lora 1536, kv_lora 512, nope 128,
  // rope 64, v 128) + 1 dense layer of 18,432 + 60 MoE layers of 384 experts
  // x 3 x 7168 x 2048, one shared expert, router and score bias; untied
  // 163,840-row vocabulary: 1,026,408,232,448 total, 32,861,500,928 active
  // ("1T total, 32B activated", moonshotai/Kimi-K2-Instruct model card).
  const Model m = import_fixture("kimi-k2");
  CHECK(total(m) == 1'026'408'232'448);
  CHECK(active(m) == 32'861'500'928);
  CHECK(m.checkpoint_quant == Quant::fp8);
  CHECK(m.kv_lora_rank == 512);
}

TEST_CASE("hf: Mamba and Mamba-2 count mixers without attention or MLP",
          "[hf]") {
  // mamba-130m-hf: h 768, 24 layers, d_inner 1536, N 16, dt rank 48, K 4.
  // Per layer in_proj 768 x 3072 + x_proj 1536 x 80 + dt_proj 48 x 1536 +
  // 1536 + out_proj 1536 x 768 + conv 1536 x 4 + 1536 + A_log 1536 x 16 + D
  // 1536 + norm 768 = 3,771,648; tied 50,280 x 768 embedding; final norm:
  // 129,135,360.
  const Model mamba = import_hf_config(
      R"({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24,
          "vocab_size": 50280, "state_size": 16, "expand": 2,
          "conv_kernel": 4, "time_step_rank": 48, "intermediate_size": 1536,
          "use_bias": false, "use_conv_bias": true})",
      "mamba/config.json");
  CHECK(total(mamba) == 129'135'360);
  CHECK(oomplan::attention_layer_count(mamba) == 0);
  CHECK(!oomplan::is_attention_layer(mamba, 0));
  // conv 1536 x 3 x 2 B + SSM 1536 x 16 x 2 B = 58,368 B per layer, x 24.
  CHECK(oomplan::recurrent_state_bytes_per_sequence(
            mamba, oomplan::Dtype::bf16) == 1'400'832);
  // "auto" rank: ceil(768 / 16) = 48, the same model.
  const Model automatic = import_hf_config(
      R"({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24,
          "vocab_size": 50280, "time_step_rank": "auto"})",
      "mamba/config.json");
  CHECK(total(automatic) == 129'135'360);

  // Mamba-Codestral-7B: h 4096, 64 layers, 128 heads x 64, 8 groups, N 128.
  // Per layer in_proj 4096 x (8192 + 10240 + 128) + out_proj 8192 x 4096 +
  // conv 10240 x 5 + 3 x 128 + gated norm 8192 + norm 4096 = 113,790,336;
  // untied 32,768-row vocabulary: 7,285,403,648 (the model card's 7.3B).
  const Model codestral = import_hf_config(
      R"({"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64,
          "vocab_size": 32768, "num_heads": 128, "head_dim": 64, "expand": 2,
          "n_groups": 8, "state_size": 128, "conv_kernel": 4,
          "use_bias": false, "use_conv_bias": true,
          "tie_word_embeddings": false})",
      "codestral/config.json");
  CHECK(total(codestral) == 7'285'403'648);
  // vLLM mamba2_state_shape, bf16: conv 10240 x 3 x 2 B + SSM 128 x 64 x 128
  // x 2 B = 2,158,592 B per layer. With tp 16 the 8 groups are extended to
  // 16 (extra_groups_for_head_shards): conv (8192 + 2 x 16 x 128) / 16 x 3 x
  // 2 B = 4,608 + SSM 8 x 64 x 128 x 2 B = 131,072.
  CHECK(oomplan::recurrent_state_bytes_per_sequence(
            codestral, oomplan::Dtype::bf16) == 64 * 2'158'592);
  CHECK(oomplan::recurrent_state_bytes_per_sequence(
            codestral, oomplan::Dtype::bf16, oomplan::Dtype::bf16, 16) ==
        64 * (4'608 + 131'072));
}

TEST_CASE("hf: Jamba interleaves attention, Mamba and MoE layers", "[hf]") {
  // Jamba-v0.1: 32 layers, attention at i % 8 == 4 (4 layers), Mamba with
  // dt/B/C norms elsewhere (28), 16-expert top-2 MoE at odd layers (16).
  // 51,570,323,328 total and 12,110,311,296 active ("52B total, 12B active",
  // ai21labs/Jamba-v0.1 model card).
  const Model m = import_hf_config(
      R"({"model_type": "jamba", "hidden_size": 4096, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8, "vocab_size": 65536,
          "attn_layer_offset": 4, "attn_layer_period": 8,
          "expert_layer_offset": 1, "expert_layer_period": 2,
          "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_expand": 2,
          "mamba_dt_rank": 256, "num_experts": 16, "num_experts_per_tok": 2,
          "tie_word_embeddings": false})",
      "jamba/config.json");
  CHECK(total(m) == 51'570'323'328);
  CHECK(active(m) == 12'110'311'296);
  CHECK(oomplan::attention_layer_count(m) == 4);
  CHECK(oomplan::is_attention_layer(m, 4));
  CHECK(oomplan::is_attention_layer(m, 28));
  CHECK(!oomplan::is_attention_layer(m, 5));
  CHECK(oomplan::is_moe_layer(m, 1));
  CHECK(!oomplan::is_moe_layer(m, 4));
  // 28 Mamba layers x (8192 x 3 + 8192 x 16) x 2 B.
  CHECK(oomplan::recurrent_state_bytes_per_sequence(m, oomplan::Dtype::bf16) ==
        28 * 311'296);
}

TEST_CASE("hf: Falcon-H1 runs attention and Mamba-2 side by side", "[hf]") {
  // A toy Falcon-H1: h 64, 2 layers, 4 heads x 16 (2 KV heads), MLP 128,
  // Mamba-2 d_ssm 64 = 4 heads x 16, 1 group, N 8, K 4, no gated norm.
  // Per layer: attention 64 x (64 + 32 + 32) + 64 x 64 = 12,288; mixer
  // in_proj 64 x (64 + 80 + 4) + out_proj 64 x 64 + conv 80 x 4 + 80 + 3 x 4
  // = 13,980; MLP 3 x 64 x 128 = 24,576; 2 norms 128: 50,972. x 2 + untied
  // 100 x 64 x 2 + final norm 64 = 114,808.
  const Model m = import_hf_config(
      R"({"model_type": "falcon_h1", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "intermediate_size": 128, "vocab_size": 100, "mamba_d_ssm": 64,
          "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 1,
          "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_rms_norm": false,
          "tie_word_embeddings": false})",
      "falcon-h1/config.json");
  CHECK(total(m) == 114'808);
  CHECK(oomplan::attention_layer_count(m) == 2);
  // Both layers also keep Mamba-2 state: conv 80 x 3 x 2 B + SSM 4 x 16 x 8
  // x 2 B = 1,504 B.
  CHECK(oomplan::recurrent_state_bytes_per_sequence(m, oomplan::Dtype::bf16) ==
        2 * 1'504);
}

TEST_CASE("hf: OLMo 2, Command R7B, Phi-3.5-MoE and GLM-4.5 import", "[hf]") {
  // OLMo-2-1124-7B: 32 layers of 4 x 4096^2 attention + q/k norms over 4096
  // each + 3 x 4096 x 11008 MLP + 2 norms; untied 100,352 rows:
  // 7,298,617,344 (the model card's 7.3B).
  const Model olmo = import_hf_config(
      R"({"model_type": "olmo2", "hidden_size": 4096, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 32,
          "intermediate_size": 11008, "vocab_size": 100352,
          "tie_word_embeddings": false})",
      "olmo2/config.json");
  CHECK(total(olmo) == 7'298'617'344);
  // Command R7B (cohere2): 32 layers, GQA 32/8, MLP 14,336, one LayerNorm
  // weight per layer, tied 256,000 rows: 8,028,033,024; layers 3, 7, ...
  // global, the rest a 4,096-token window.
  const Model r7b = import_hf_config(
      R"({"model_type": "cohere2", "hidden_size": 4096, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 8,
          "intermediate_size": 14336, "vocab_size": 256000,
          "sliding_window": 4096, "sliding_window_pattern": 4})",
      "r7b/config.json");
  CHECK(total(r7b) == 8'028'033'024);
  CHECK(oomplan::is_local_layer(r7b, 0));
  CHECK(!oomplan::is_local_layer(r7b, 3));
  // Phi-3.5-MoE: 16 experts of 6,400, top 2, LayerNorms with bias, biased
  // attention and lm_head: 41,873,153,344 total, 6,640,999,744 active
  // ("6.6B active, 42B total", microsoft/Phi-3.5-MoE-instruct model card).
  const Model phi = import_hf_config(
      R"({"model_type": "phimoe", "hidden_size": 4096, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 8,
          "intermediate_size": 6400, "vocab_size": 32064,
          "num_local_experts": 16, "num_experts_per_tok": 2,
          "attention_bias": true, "lm_head_bias": true,
          "tie_word_embeddings": false})",
      "phimoe/config.json");
  CHECK(total(phi) == 41'873'153'344);
  CHECK(active(phi) == 6'640'999'744);
  // GLM-4.5: 92 layers (3 dense of 12,288, 89 MoE of 160 experts x 1,536,
  // top 8, 1 shared), GQA 96/8 x 128 with q/k/v bias and per-head q/k norm:
  // 352,797,829,024 total, 33,632,266,144 active; the published 355B and
  // 32B count the MTP layer and leave out the embeddings (zai-org/GLM-4.5
  // README).
  const Model glm = import_hf_config(
      R"({"model_type": "glm4_moe", "hidden_size": 5120, "num_hidden_layers": 92,
          "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
          "intermediate_size": 12288, "moe_intermediate_size": 1536,
          "n_routed_experts": 160, "n_shared_experts": 1,
          "num_experts_per_tok": 8, "first_k_dense_replace": 3,
          "vocab_size": 151552, "attention_bias": true, "use_qk_norm": true,
          "num_nextn_predict_layers": 1, "tie_word_embeddings": false})",
      "glm/config.json");
  CHECK(total(glm) == 352'797'829'024);
  CHECK(active(glm) == 33'632'266'144);
}
