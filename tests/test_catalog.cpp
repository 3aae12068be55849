#include "support.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using oomplan::Model;
using oomplan::test::llama3_70b;

Model mixtral_8x7b() {
  Model m;
  m.name = "mixtral-8x7b";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 14336;
  m.vocab_size = 32000;
  m.num_experts = 8;
  m.experts_per_tok = 2;
  m.moe_intermediate_size = 14336;
  return m;
}

Model deepseek_v3() {
  Model m;
  m.name = "deepseek-v3";
  m.hidden_size = 7168;
  m.num_layers = 61;
  m.num_heads = 128;
  m.num_kv_heads = 128;
  m.head_dim = 192;
  m.intermediate_size = 18432;
  m.vocab_size = 129280;
  m.num_experts = 256;
  m.experts_per_tok = 8;
  m.moe_intermediate_size = 2048;
  m.num_shared_experts = 1;
  m.first_k_dense = 3;
  m.router_bias = true;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_rope_head_dim = 64;
  m.qk_nope_head_dim = 128;
  m.v_head_dim = 128;
  return m;
}

Model gpt_oss_20b() {
  Model m;
  m.name = "gpt-oss-20b";
  m.hidden_size = 2880;
  m.num_layers = 24;
  m.num_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 64;
  m.intermediate_size = 2880;
  m.vocab_size = 201088;
  m.qkv_bias = true;
  m.o_bias = true;
  m.mlp_bias = true;
  m.attention_sinks = true;
  m.router_bias = true;
  m.num_experts = 32;
  m.experts_per_tok = 4;
  m.moe_intermediate_size = 2880;
  m.sliding_window = 128;
  m.global_every = 2;
  return m;
}

}  // namespace

TEST_CASE("model: Llama-3-70B has exactly 70,553,706,496 parameters",
          "[catalog]") {
  // catalog_facts.md §1e: attention/layer = 8192·8192 + 2·8192·1024 +
  // 8192·8192 = 150,994,944; MLP/layer = 3·8192·28672 = 704,643,072; norms
  // 2·8192 → 855,654,400 ×80 = 68,452,352,000; embed + lm_head =
  // 2·128256·8192 = 2,101,346,304; final norm 8,192.
  const auto c = oomplan::count_params(llama3_70b());
  CHECK(c.attention == 80LL * 150'994'944);
  CHECK(c.kv_proj == 80LL * 2 * 8192 * 1024);
  CHECK(c.mlp == 80LL * 704'643'072);
  CHECK(c.embedding == 1'050'673'152);
  CHECK(c.lm_head == 1'050'673'152);
  CHECK(c.small == 80LL * 16'384 + 8'192);
  CHECK(c.total() == 70'553'706'496);
  CHECK(c.active == c.total());
  CHECK(oomplan::layer_params(llama3_70b(), 0) == 855'654'400);
}

TEST_CASE("model: tied embeddings are counted once", "[catalog]") {
  Model m = llama3_70b();
  m.tie_word_embeddings = true;
  const auto c = oomplan::count_params(m);
  CHECK(c.lm_head == 0);
  CHECK(c.total() == 70'553'706'496 - 1'050'673'152);
}

TEST_CASE("model: Mixtral-8x7B counts 46.7B total and 12.9B active",
          "[catalog]") {
  // §1e: per layer 41,943,040 attention + 8·176,160,768 experts + 32,768
  // router + 8,192 norms; active = 32·(41,943,040 + 2·176,160,768 + 40,960)
  // + 262,148,096.
  const auto c = oomplan::count_params(mixtral_8x7b());
  CHECK(c.experts == 32LL * 8 * 176'160'768);
  CHECK(c.router == 32LL * 4096 * 8);
  CHECK(c.mlp == 0);
  CHECK(c.total() == 46'702'792'704);
  CHECK(c.active == 12'879'925'248);
}

TEST_CASE("model: DeepSeek-V3 counts MLA, shared experts and dense layers",
          "[catalog]") {
  // §1e: MLA/layer 187,107,328 + 2 norms 14,336; 3 dense MLPs of
  // 396,361,728; 58 MoE layers of 256 + 1 experts of 44,040,192, gate
  // 256·7168 and e_score_correction_bias 256.
  const Model m = deepseek_v3();
  const auto c = oomplan::count_params(m);
  CHECK(c.mlp == 3LL * 396'361'728);
  CHECK(c.experts == 58LL * 256 * 44'040'192);
  CHECK(c.shared_experts == 58LL * 44'040'192);
  CHECK(c.router == 58LL * 256 * 7168);
  CHECK(c.total() == 671'026'419'200);
  CHECK(c.active == 37'552'297'472);
  CHECK_FALSE(oomplan::is_moe_layer(m, 2));
  CHECK(oomplan::is_moe_layer(m, 3));
  CHECK(oomplan::layer_params(m, 3) == 187'121'664 + 11'320'164'608);
}

TEST_CASE("model: layer spans count MoE layers in closed form", "[catalog]") {
  // DeepSeek-V3: 61 layers, the first 3 dense -> 58 MoE; layers [0, 31) hold
  // 28 of them and [31, 61) 30.
  const Model m = deepseek_v3();
  CHECK(oomplan::moe_layer_count(m, 0, 61) == 58);
  CHECK(oomplan::moe_layer_count(m, 0, 31) == 28);
  CHECK(oomplan::moe_layer_count(m, 31, 61) == 30);
  CHECK(oomplan::moe_layer_count(m, 0, 3) == 0);
  // Every other layer (moe_every 2: layers 1, 3, 5, ...): 3 of [2, 8).
  Model every = mixtral_8x7b();
  every.moe_every = 2;
  CHECK(oomplan::moe_layer_count(every, 2, 8) == 3);
  // The span equals layer_params summed, for every range of every shipped
  // model.
  for (const Model& model : oomplan::test::catalog().models) {
    const std::int64_t n = model.num_layers + model.num_decoder_layers;
    for (const auto& [begin, end] :
         {std::pair<std::int64_t, std::int64_t>{0, n},
          {0, n / 2},
          {n / 3, n},
          {1, n - 1}}) {
      INFO(model.name << " [" << begin << ", " << end << ")");
      std::int64_t sum = 0;
      std::int64_t largest = 0;
      std::int64_t moe = 0;
      for (std::int64_t l = begin; l < end; ++l) {
        sum += oomplan::layer_params(model, l);
        largest = std::max(largest, oomplan::layer_params(model, l));
        moe += oomplan::is_moe_layer(model, l) ? 1 : 0;
      }
      const auto span = oomplan::span_params(model, begin, end);
      CHECK(span.params == sum);
      CHECK(span.largest == largest);
      if (model.num_decoder_layers == 0) {
        CHECK(oomplan::moe_layer_count(model, begin, end) == moe);
      }
    }
    // The layers, the vocabulary matrices, the tower and what sits outside
    // every layer partition the model.
    const auto c = oomplan::count_params(model);
    const auto all = oomplan::span_params(model, 0, n);
    CHECK(all.params + c.embedding + c.lm_head + c.extra + c.outside_layers ==
          c.total());
    CHECK(c.layers() == all.params);
    CHECK(c.largest_layer == all.largest);
  }
}

TEST_CASE("model: gpt-oss-20b counts biases, sinks and expert biases",
          "[catalog]") {
  // Per layer: attention 26,542,080 + biases 4096+1024+2880 + sinks 64;
  // experts 32·3·2880·2880 = 796,262,400 + biases 32·(2·2880+2880);
  // router 2880·32 + 32; norms 2·2880 → 823,186,976 ×24 + final 2,880 +
  // embed and head 2·201088·2880 = 20,914,757,184 (catalog_facts §1d).
  const auto c = oomplan::count_params(gpt_oss_20b());
  CHECK(c.experts == 19'110'297'600);  // the MXFP4 part of the checkpoint
  CHECK(c.total() == 20'914'757'184);
  CHECK(c.active == 4'187'440'704);
  CHECK(oomplan::layer_params(gpt_oss_20b(), 0) == 823'186'976);
}

TEST_CASE("model: the double estimate bounds the exact count", "[catalog]") {
  for (const Model& m :
       {llama3_70b(), mixtral_8x7b(), deepseek_v3(), gpt_oss_20b()}) {
    INFO(m.name);
    const auto exact = static_cast<double>(oomplan::count_params(m).total());
    CHECK(oomplan::approx_params(m) >= exact);
    CHECK(oomplan::approx_params(m) < 4 * exact);
  }
}

TEST_CASE("model: layer params sum to the total minus embeddings",
          "[catalog]") {
  for (const Model& m : {llama3_70b(), mixtral_8x7b(), deepseek_v3()}) {
    INFO(m.name);
    const auto c = oomplan::count_params(m);
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < m.num_layers; ++i) {
      sum += oomplan::layer_params(m, i);
    }
    // Final norm: RMSNorm of hidden_size.
    CHECK(sum + c.embedding + c.lm_head + m.hidden_size == c.total());
  }
}

// ---------------------------------------------------------------------------
// The shipped catalog (models/*.json).

namespace {

using oomplan::Catalog;
using oomplan::parse_catalog;
using oomplan::test::catalog;

// The message of the oomplan::Error that `f` throws ("" when it does not).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const oomplan::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("catalog: the shipped catalog holds every model, GPU and instance",
          "[catalog]") {
  CHECK(catalog().models.size() == 200);
  CHECK(catalog().gpus.size() == 30);
  CHECK(catalog().instances.size() == 54);
}

TEST_CASE("catalog: names and aliases are unique case-insensitively",
          "[catalog]") {
  std::set<std::string> seen;
  const auto add = [&](const std::string& key) {
    std::string folded;
    for (const char ch : key) {
      folded += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    INFO(key);
    CHECK(seen.insert(folded).second);
  };
  for (const auto& m : catalog().models) {
    add(m.name);
    for (const auto& a : m.aliases) {
      add(a);
    }
  }
  seen.clear();
  for (const auto& g : catalog().gpus) {
    add(g.name);
    for (const auto& a : g.aliases) {
      add(a);
    }
  }
}

TEST_CASE("catalog: every model's parameter count is exact", "[catalog]") {
  // `params` and `params_active` are catalog_facts.json's params_total and
  // params_active_per_token, recomputed there from each config.json; the text
  // model excludes `extra_params` (vision towers).
  for (const auto& m : catalog().models) {
    INFO(m.name);
    const auto c = oomplan::count_params(m);
    REQUIRE(m.params > 0);
    CHECK(c.total() - c.extra == m.params);
    CHECK(c.active == m.params_active);
    CHECK(oomplan::approx_params(m) >= static_cast<double>(c.total()));
    CHECK(oomplan::approx_params(m) < 4 * static_cast<double>(c.total()));
    std::int64_t layers = 0;
    for (std::int64_t i = 0; i < m.num_layers; ++i) {
      layers += oomplan::layer_params(m, i);
    }
    CHECK(layers < c.total());
    CHECK(layers > c.total() / 2);
  }
}

TEST_CASE("catalog: every model is within 5 % of its published size",
          "[catalog]") {
  // Published figures are rounded ("70B", "8.03B"); phi-4's "14B" for 14.66B
  // is the widest gap (4.7 %).
  for (const auto& m : catalog().models) {
    INFO(m.name);
    REQUIRE(m.official_params > 0);
    const double total = static_cast<double>(oomplan::count_params(m).total());
    CHECK(total ==
          Approx(static_cast<double>(m.official_params)).epsilon(0.05));
  }
}

TEST_CASE("catalog: BF16 checkpoints weigh exactly two bytes per parameter",
          "[catalog]") {
  // Verified safetensors total_size = 2 x params; the 2023 Llama-2 files also
  // hold one rotary inv_freq buffer per layer (64 fp32 = 256 B).
  int checked = 0;
  for (const auto& m : catalog().models) {
    if (m.checkpoint_bytes == 0 || m.checkpoint_quant != oomplan::Quant::none) {
      continue;
    }
    INFO(m.name);
    const std::int64_t inv_freq =
        m.name.rfind("llama-2-", 0) == 0 ? 256 * m.num_layers : 0;
    CHECK(2 * oomplan::count_params(m).total() + inv_freq ==
          m.checkpoint_bytes);
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE(
    "catalog: gpt-oss MXFP4 checkpoints match 4.25 bits per expert weight",
    "[catalog]") {
  // Experts at 4 bits + one E8M0 scale per 32 values, everything else BF16
  // (catalog_facts.md §1e bonus): 19,110,297,600 x 4.25 / 8 + (20,914,757,184
  // - 19,110,297,600) x 2 = 13,761,264,768 for gpt-oss-20b.
  for (const char* id : {"gpt-oss-20b", "gpt-oss-120b"}) {
    const auto& m = oomplan::find_model(catalog(), id);
    INFO(id);
    CHECK(m.checkpoint_quant == oomplan::Quant::mxfp4);
    const auto c = oomplan::count_params(m);
    CHECK(c.experts * 17 / 32 + (c.total() - c.experts) * 2 ==
          m.checkpoint_bytes);
  }
}

TEST_CASE("catalog: DeepSeek-V3 ships FP8 with block scales", "[catalog]") {
  const auto& m = oomplan::find_model(catalog(), "deepseek-ai/DeepSeek-R1");
  CHECK(m.name == "deepseek-v3");
  CHECK(m.checkpoint_quant == oomplan::Quant::fp8);
  CHECK(m.checkpoint_bytes == 688'586'727'753);
}

TEST_CASE("catalog: Gemma 3 multimodal checkpoints carry the SigLIP tower",
          "[catalog]") {
  // SigLIP 27 x 15,239,504 + patch 678,528 + positions 4096 x 1152 + post norm
  // 2,304 = 416,866,032; projector 1152 x 5376 + norm 1152 → 27,432,406,640
  // parameters for gemma-3-27b-it (HF: 27.4B).
  const auto& m = oomplan::find_model(catalog(), "google/gemma-3-27b-it");
  CHECK(m.extra_params == 416'866'032 + 1152 * 5376 + 1152);
  CHECK(oomplan::count_params(m).total() == 27'432'406'640);
  CHECK(oomplan::find_model(catalog(), "gemma-3-1b").extra_params == 0);
}

TEST_CASE("catalog: models resolve by id, alias and HF id in any case",
          "[catalog]") {
  const auto& c = catalog();
  CHECK(oomplan::find_model(c, "llama3-70b").name == "llama-3-70b");
  CHECK(oomplan::find_model(c, "LLAMA-3-70B").name == "llama-3-70b");
  CHECK(oomplan::find_model(c, "meta-llama/Meta-Llama-3-70B").name ==
        "llama-3-70b");
  CHECK(oomplan::find_model(c, "Qwen/Qwen2.5-7B-Instruct").name ==
        "qwen2.5-7b");
  CHECK(oomplan::find_model(c, "openai/gpt-oss-20b").name == "gpt-oss-20b");
}

TEST_CASE("catalog: each family people launch resolves by its HF id",
          "[catalog]") {
  // One Hugging Face repository per family or size the catalog covers, and
  // the entry it must find (models/README.md lists the families).
  const std::pair<const char*, const char*> k_families[] = {
      {"codellama/CodeLlama-34b-hf", "codellama-34b"},
      {"TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"},
      {"meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"},
      {"meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick"},
      {"mistral-community/Mistral-7B-v0.2", "mistral-7b-v0.2"},
      {"mistralai/Mistral-Nemo-Base-2407", "mistral-nemo-12b"},
      {"mistralai/Mistral-Large-Instruct-2407", "mistral-large-2407"},
      {"Qwen/Qwen2-7B-Instruct", "qwen2-7b"},
      {"Qwen/Qwen2-72B-Instruct", "qwen2-72b"},
      {"Qwen/Qwen1.5-MoE-A2.7B", "qwen1.5-moe-a2.7b"},
      {"Qwen/Qwen2-57B-A14B", "qwen2-57b-a14b"},
      {"Qwen/Qwen2-7B", "qwen2-7b-base"},
      {"Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl-7b"},
      {"Qwen/Qwen2.5-Coder-7B", "qwen2.5-coder-7b"},
      {"Qwen/Qwen2.5-Math-72B", "qwen2.5-math-72b"},
      {"Qwen/QwQ-32B", "qwq-32b"},
      {"Qwen/Qwen3-8B-Base", "qwen3-8b-base"},
      {"Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder-480b-a35b"},
      {"google/gemma-7b", "gemma-7b"},
      {"google/codegemma-7b", "codegemma-7b"},
      {"microsoft/phi-2", "phi-2"},
      {"microsoft/Phi-3.5-mini-instruct", "phi-3.5-mini"},
      {"microsoft/Phi-4-mini-instruct", "phi-4-mini"},
      {"microsoft/Phi-4-reasoning", "phi-4-reasoning"},
      {"deepseek-ai/DeepSeek-V2", "deepseek-v2"},
      {"deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
       "deepseek-r1-distill-llama-8b"},
      {"moonshotai/Kimi-K2-Instruct", "kimi-k2"},
      {"tiiuae/falcon-7b", "falcon-7b"},
      {"tiiuae/Falcon3-10B-Base", "falcon3-10b"},
      {"allenai/OLMo-2-1124-13B", "olmo-2-13b"},
      {"CohereForAI/aya-23-8B", "aya-23-8b"},
      {"HuggingFaceTB/SmolLM2-1.7B", "smollm2-1.7b"},
      {"EleutherAI/pythia-6.9b", "pythia-6.9b"},
      {"openai-community/gpt2", "gpt2"},
      {"BSC-LT/salamandra-7b", "salamandra-7b"},
      {"Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3-next-80b-a3b"},
      {"mistralai/Mistral-Small-3.1-24B-Instruct-2503",
       "mistral-small-3.1-24b"},
      {"meta-llama/Llama-3.2-11B-Vision", "llama-3.2-11b-vision"},
      {"huggyllama/llama-65b", "llama-65b"},
      {"bigscience/bloomz-7b1", "bloomz-7b1"},
      {"bigscience/bloomz-560m", "bloomz-560m"},
      {"garage-bAInd/Platypus-30B", "platypus-30b"},
      {"keeeeenw/MicroLlama", "micro-llama-300m"},
      {"togethercomputer/LLaMA-2-7B-32K", "llama-2-7b-32k"},
      {"TinyLlama/TinyLlama-1.1B-Chat-v0.4", "tinyllama-1.1b-chat-v0.4"},
      {"deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
       "deepseek-r1-distill-qwen-32b"},
      {"dphn/dolphin-2.9.1-yi-1.5-34b", "dolphin-2.9.1-yi-1.5-34b"},
      {"Alibaba-NLP/Tongyi-DeepResearch-30B-A3B",
       "tongyi-deepresearch-30b-a3b"},
      {"distilbert/distilgpt2", "distilgpt2"},
      {"Qwen/Qwen2-0.5B", "qwen2-0.5b-base"},
      {"01-ai/Yi-6B", "yi-6b"},
      {"Qwen/Qwen1.5-7B", "qwen1.5-7b"},
      {"Qwen/Qwen1.5-72B-Chat", "qwen1.5-72b"},
      {"mistralai/Ministral-8B-Instruct-2410", "ministral-8b"},
      {"mistralai/Mistral-Small-Instruct-2409", "mistral-small-2409"},
      {"microsoft/Phi-3.5-MoE-instruct", "phi-3.5-moe"},
  };
  for (const auto& [hf_id, id] : k_families) {
    INFO(hf_id);
    CHECK(oomplan::find_model(catalog(), hf_id).name == id);
  }
}

TEST_CASE("catalog: fine-tunes and mirrors resolve to their base",
          "[catalog]") {
  // Hand-checked against each repository's config.json: the same sizes,
  // vocabulary, context and rope as the base (NousResearch's and
  // mistral-community's are re-uploads; Vicuna v1.5 and Zephyr are
  // fine-tunes that keep the config; DeepSeek-Coder-V2-Lite is DeepSeek-V2-Lite
  // trained further; FreeWilly2 is a Llama 2 70B fine-tune; Magistral Small
  // 2509 keeps Mistral Small 3.1's config, vision tower included).
  const std::pair<const char*, const char*> k_aliases[] = {
      {"stabilityai/FreeWilly2", "llama-2-70b"},
      {"mistralai/Magistral-Small-2509", "mistral-small-3.1-24b"},
      {"NousResearch/Llama-2-7b-hf", "llama-2-7b"},
      {"lmsys/vicuna-13b-v1.5", "llama-2-13b"},
      {"mistral-community/Mixtral-8x22B-v0.1", "mixtral-8x22b"},
      {"HuggingFaceH4/zephyr-7b-beta", "mistral-7b-v0.1"},
      {"nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "llama-3.1-70b"},
      {"deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", "deepseek-v2-lite"},
      {"Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2.5-coder-32b"},
      {"allenai/OLMo-2-1124-7B-Instruct", "olmo-2-7b"},
      {"EleutherAI/pythia-1b-deduped", "pythia-1b"},
  };
  for (const auto& [alias, id] : k_aliases) {
    INFO(alias);
    CHECK(oomplan::find_model(catalog(), alias).name == id);
  }
}

TEST_CASE("catalog: an unknown model suggests the nearest name", "[catalog]") {
  CHECK(error_of([] { oomplan::find_model(catalog(), "lama3-70b"); }) ==
        "unknown model 'lama3-70b'; did you mean llama3-70b?");
  CHECK(error_of([] { oomplan::find_model(catalog(), "zzzzzzzzzzzz"); }) ==
        "unknown model 'zzzzzzzzzzzz'; `oomplan models` lists the catalog, or "
        "pass a config.json path");
}

TEST_CASE("catalog: GPUs resolve by name and alias in any case", "[catalog]") {
  const auto& c = catalog();
  CHECK(oomplan::find_gpu(c, "A100").name == "A100-80");
  CHECK(oomplan::find_gpu(c, "a100-80gb").name == "A100-80");
  CHECK(oomplan::find_gpu(c, "H100").name == "H100-80");
  CHECK(oomplan::find_gpu(c, "h100-sxm").name == "H100-80");
  CHECK(oomplan::find_gpu(c, "RTX-A6000").name == "A6000");
  CHECK(oomplan::find_gpu(c, "4090").name == "RTX4090");
  CHECK(error_of([] { oomplan::find_gpu(catalog(), "A100-90"); }) ==
        "unknown GPU 'A100-90'; did you mean A100-80?");
}

TEST_CASE("catalog: GPU capacities are what CUDA reports", "[catalog]") {
  const auto& c = catalog();
  // vLLM logs "Free memory on device (78.68/79.19 GiB)" on H100-80.
  CHECK(oomplan::find_gpu(c, "H100-80").capacity_bytes == 85'028'896'768);
  CHECK(oomplan::find_gpu(c, "A100-40").capacity_bytes == 42'298'834'944);
  CHECK(oomplan::find_gpu(c, "RTX5090").capacity_bytes == 33'677'180'928);
  CHECK(static_cast<double>(oomplan::find_gpu(c, "A100-80").capacity_bytes) /
            (1LL << 30) ==
        Approx(79.15).margin(0.005));
  CHECK(static_cast<double>(oomplan::find_gpu(c, "H200").capacity_bytes) /
            (1LL << 30) ==
        Approx(139.81).margin(0.005));
  CHECK(static_cast<double>(oomplan::find_gpu(c, "B200").capacity_bytes) /
            (1LL << 30) ==
        Approx(178.35).margin(0.005));
  for (const auto& g : c.gpus) {
    INFO(g.name);
    CHECK(g.capacity_bytes > 0);
    CHECK_FALSE(g.capacity_note.empty());
    if (g.smi_bytes > 0) {
      // The driver keeps 256-870 MiB that CUDA never hands out.
      CHECK(g.capacity_bytes < g.smi_bytes);
      CHECK(g.smi_bytes - g.capacity_bytes < (1LL << 30));
    }
    CHECK(g.bandwidth_gb_s > 0);
    CHECK(g.bf16_tflops > 0);
    CHECK(g.pcie_gb_s > 0);
  }
}

TEST_CASE("catalog: the common GPUs are the usual cards", "[catalog]") {
  std::vector<std::string> common;
  for (const auto& g : catalog().gpus) {
    if (g.common) {
      common.push_back(g.name);
    }
  }
  CHECK(common == std::vector<std::string>{"A100-80", "A100-40", "H100-80",
                                           "H200", "L40S", "L4", "A10G",
                                           "RTX4090"});
}

TEST_CASE("catalog: GPU specs resolve counts, names and instances",
          "[catalog]") {
  const auto& c = catalog();
  const auto check = [&](const char* spec, const char* name, int count) {
    INFO(spec);
    const auto s = oomplan::parse_gpu_spec(c, spec);
    REQUIRE(s.gpu != nullptr);
    CHECK(s.gpu->name == name);
    CHECK(s.count == count);
  };
  check("4xA100-80", "A100-80", 4);
  check("8xH100", "H100-80", 8);
  check("1xRTX4090", "RTX4090", 1);
  check("2xA100-40", "A100-40", 2);
  check("8xV100-32", "V100-32", 8);
  check("1xA6000", "A6000", 1);
  check("4xL40S", "L40S", 4);
  check("A100", "A100-80", 1);
  check("8XMI300X", "MI300X", 8);
  check("MI300X", "MI300X", 1);
  check("p4de.24xlarge", "A100-80", 8);
  check("p4d.24xlarge", "A100-40", 8);
  check("p5.48xlarge", "H100-80", 8);
  check("g5.12xlarge", "A10G", 4);
  check("g6e.12xlarge", "L40S", 4);
  check(" 4 x A100-80 ", "A100-80", 4);
  // Device names as nvidia-smi and torch.cuda.get_device_name() print them.
  check("8xNVIDIA H100 80GB HBM3", "H100-80", 8);
  check("Tesla T4", "T4", 1);
  check("2xNVIDIA GeForce RTX 4090", "RTX4090", 2);
}

TEST_CASE("catalog: bad GPU counts are rejected with a message", "[catalog]") {
  const auto err = [](const char* spec) {
    return error_of([&] { oomplan::parse_gpu_spec(catalog(), spec); });
  };
  CHECK(err("0xA100") ==
        "GPU count must be from 1 to 100000, but is 0 in "
        "'0xA100'");
  CHECK(err("-2xA100") ==
        "GPU count must be from 1 to 100000, but is -2 in "
        "'-2xA100'");
  CHECK(err("100001xA100") ==
        "GPU count must be from 1 to 100000, but is 100001 in '100001xA100'");
  CHECK(err("99999999999999999999xA100") ==
        "GPU count must be from 1 to 100000, but is 99999999999999999999 in "
        "'99999999999999999999xA100'");
  CHECK(err("fourxA100") ==
        "invalid GPU count 'four' in 'fourxA100'; "
        "expected a whole number from 1 to 100000");
  CHECK(err("4x") ==
        "missing GPU name in '4x'; expected NxNAME, e.g. "
        "4xA100-80");
  CHECK(err("4xA100-90") == "unknown GPU 'A100-90'; did you mean A100-80?");
  CHECK(err("") == "empty --gpus; expected NxNAME, e.g. 4xA100-80");
  CHECK(oomplan::parse_gpu_spec(catalog(), "100000xH100").count == 100'000);
}

TEST_CASE("catalog: suggest picks the closest name within three edits",
          "[catalog]") {
  const std::vector<std::string> names{"llama3-70b", "llama3-8b", "qwen3-8b"};
  CHECK(oomplan::suggest("llama3-7b", names) == "llama3-70b");
  CHECK(oomplan::suggest("QWEN3-8B", names) == "qwen3-8b");
  CHECK(oomplan::suggest("lamma3-8b", names) == "llama3-8b");
  CHECK_FALSE(oomplan::suggest("mistral", names).has_value());
}

TEST_CASE("catalog: KV geometry gives catalog_facts' bytes per token",
          "[catalog]") {
  // catalog_facts.md §1f, BF16, all layers at full length: 2 (K, V) x layers
  // x kv_heads x head_dim x 2 B; MLA caches the latent (kv_lora_rank +
  // qk_rope_head_dim) x layers x 2 B.
  const std::vector<std::pair<std::string, std::int64_t>> k_kv = {
      {"llama-2-7b", 524288},      {"llama-2-13b", 819200},
      {"llama-2-70b", 327680},     {"llama-3-8b", 131072},
      {"llama-3-70b", 327680},     {"llama-3.1-8b", 131072},
      {"llama-3.1-70b", 327680},   {"llama-3.1-405b", 516096},
      {"llama-3.2-1b", 32768},     {"llama-3.2-3b", 114688},
      {"llama-3.3-70b", 327680},   {"mistral-7b-v0.1", 131072},
      {"mistral-7b-v0.3", 131072}, {"mixtral-8x7b", 131072},
      {"mixtral-8x22b", 229376},   {"qwen2.5-0.5b", 12288},
      {"qwen2.5-1.5b", 28672},     {"qwen2.5-3b", 36864},
      {"qwen2.5-7b", 57344},       {"qwen2.5-14b", 196608},
      {"qwen2.5-32b", 262144},     {"qwen2.5-72b", 327680},
      {"qwen3-0.6b", 114688},      {"qwen3-1.7b", 114688},
      {"qwen3-4b", 147456},        {"qwen3-8b", 147456},
      {"qwen3-14b", 163840},       {"qwen3-32b", 262144},
      {"qwen3-30b-a3b", 98304},    {"qwen3-235b-a22b", 192512},
      {"gemma-2-2b", 106496},      {"gemma-2-9b", 344064},
      {"gemma-2-27b", 376832},     {"gemma-3-1b", 26624},
      {"gemma-3-4b", 139264},      {"gemma-3-12b", 393216},
      {"gemma-3-27b", 507904},     {"phi-3-mini-4k", 393216},
      {"phi-3-medium-4k", 204800}, {"phi-4", 204800},
      {"deepseek-v3", 70272},      {"deepseek-v2-lite", 31104},
      {"gpt-oss-20b", 49152},      {"gpt-oss-120b", 73728},
      {"falcon-40b", 122880},      {"falcon-180b", 163840},
      {"command-r-v01", 1310720},
  };
  // The models catalog_facts.md §1f lists (the catalog's first 47).
  REQUIRE(k_kv.size() == 47);
  for (const auto& [id, bytes] : k_kv) {
    INFO(id);
    const auto& m = oomplan::find_model(catalog(), id);
    const std::int64_t per_layer =
        m.kv_lora_rank > 0 ? (m.kv_lora_rank + m.qk_rope_head_dim) * 2
                           : 2 * m.num_kv_heads * m.head_dim * 2;
    CHECK(per_layer * m.num_layers == bytes);
  }
}

TEST_CASE("catalog: local and MoE layers follow each family's pattern",
          "[catalog]") {
  const auto& c = catalog();
  // Gemma 2 and gpt-oss alternate, starting local; Gemma 3 has 5 local : 1
  // global; Mistral 7B v0.1 and Phi-3 slide on every layer.
  const auto& gemma2 = oomplan::find_model(c, "gemma-2-9b");
  CHECK(oomplan::is_local_layer(gemma2, 0));
  CHECK_FALSE(oomplan::is_local_layer(gemma2, 1));
  const auto& gemma3 = oomplan::find_model(c, "gemma-3-27b");
  CHECK(oomplan::is_local_layer(gemma3, 4));
  CHECK_FALSE(oomplan::is_local_layer(gemma3, 5));
  CHECK(gemma3.sliding_window == 1024);
  const auto& oss = oomplan::find_model(c, "gpt-oss-120b");
  CHECK(oomplan::is_local_layer(oss, 0));
  CHECK_FALSE(oomplan::is_local_layer(oss, 1));
  CHECK(oomplan::is_local_layer(oomplan::find_model(c, "mistral-7b-v0.1"), 31));
  CHECK_FALSE(
      oomplan::is_local_layer(oomplan::find_model(c, "mistral-7b-v0.3"), 0));
  CHECK_FALSE(
      oomplan::is_local_layer(oomplan::find_model(c, "llama-3-70b"), 0));
  // DeepSeek-V2-Lite: layer 0 dense, then MoE.
  const auto& lite = oomplan::find_model(c, "deepseek-v2-lite");
  CHECK_FALSE(oomplan::is_moe_layer(lite, 0));
  CHECK(oomplan::is_moe_layer(lite, 1));
  CHECK(oomplan::is_moe_layer(oomplan::find_model(c, "qwen3-30b-a3b"), 0));
}

// ---------------------------------------------------------------------------
// Broken catalog files.

namespace {

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_catalog(text, "extra/bad.json"); });
}

const char* const k_toy =
    R"("id": "toy", "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100)";

std::string toy_with(const std::string& fields) {
  return std::string(R"({"models": [{)") + k_toy + fields + "}]}";
}

}  // namespace

TEST_CASE("catalog: a minimal model takes HF defaults", "[catalog]") {
  const Catalog c = parse_catalog(toy_with(""), "extra/toy.json");
  REQUIRE(c.models.size() == 1);
  const auto& m = c.models[0];
  CHECK(m.num_kv_heads == 4);  // num_key_value_heads missing = num_heads
  CHECK(m.head_dim == 16);     // hidden_size / num_attention_heads
  CHECK(m.mlp == oomplan::MlpKind::gated);
  CHECK(m.norms_per_layer == 2);
  CHECK(m.moe_every == 1);
}

TEST_CASE("catalog: broken files give the exact error", "[catalog]") {
  CHECK(parse_error("{\"models\": [") ==
        "extra/bad.json: parse error at line 1, column 13: syntax error while "
        "parsing value - unexpected end of input; expected '[', '{', or a "
        "literal");
  CHECK(parse_error("[]") ==
        "extra/bad.json: the top level must be an object with \"models\", "
        "\"gpus\" or \"instances\"");
  CHECK(parse_error(R"({"model": []})") ==
        "extra/bad.json: model: unknown top-level key; expected models, gpus "
        "or instances");
  CHECK(parse_error(R"({"models": {}})") ==
        "extra/bad.json: models: must be an array, but is object");
  CHECK(parse_error(R"({"models": [{"hidden_size": 1}]})") ==
        "extra/bad.json: models[0]: id: missing");
  CHECK(parse_error(toy_with(R"(, "hiden_size": 1)")) ==
        "extra/bad.json: toy: hiden_size: unknown field; did you mean "
        "hidden_size?");
  CHECK(parse_error(R"({"models": [{"id": "toy", "hidden_size": "64"}]})") ==
        "extra/bad.json: toy: hidden_size: must be an integer, but is string");
  CHECK(parse_error(toy_with(R"(, "vocab_size": 0)")) ==
        "extra/bad.json: toy: vocab_size: must be positive, but is 0");
  CHECK(parse_error(toy_with(R"(, "num_key_value_heads": 3)")) ==
        "extra/bad.json: toy: num_key_value_heads: 3 does not divide "
        "num_attention_heads 4");
  CHECK(
      parse_error(toy_with(
          R"(, "num_experts": 8, "num_experts_per_tok": 9, "moe_intermediate_size": 32)")) ==
      "extra/bad.json: toy: num_experts_per_tok: must be from 1 to "
      "num_experts 8, but is 9");
  CHECK(parse_error(toy_with(R"(, "mlp": "swiglu")")) ==
        "extra/bad.json: toy: mlp: 'swiglu' is not gated, plain or none");
  CHECK(parse_error(toy_with(R"(, "checkpoint_quant": "q4")")) ==
        "extra/bad.json: toy: checkpoint_quant: unknown format 'q4'; valid: "
        "none, int8, fp8, int4, nf4, nf4-nodq, gptq, awq, mxfp4");
  CHECK(parse_error(toy_with(R"(, "hidden_size": 100000000000)")) ==
        "extra/bad.json: toy: hidden_size: must be from 1 to 1048576, but is "
        "100000000000");
  // Each size within its bound, but 4096 layers of 3 x 10^6 x 4 x 10^6.
  CHECK(parse_error(toy_with(
            R"(, "hidden_size": 1000000, "head_dim": 128,
                 "intermediate_size": 4000000, "num_hidden_layers": 4096)")) ==
        "extra/bad.json: toy: hidden_size: these sizes give more than 10^15 "
        "parameters");
  CHECK(parse_error(toy_with(R"(, "global_every": 10000000000)")) ==
        "extra/bad.json: toy: global_every: must be from 0 to 4096, but is "
        "10000000000");
  CHECK(parse_error(R"({"gpus": [{"name": "X1", "capacity_bytes": -5}]})") ==
        "extra/bad.json: X1: capacity_bytes: must be positive, but is -5");
  CHECK(parse_error(R"({"gpus": [{"name": "X1", "capacity_bytes": 5,
                        "bandwidth_gb_s": "fast"}]})") ==
        "extra/bad.json: X1: bandwidth_gb_s: must be a number, but is string");
  CHECK(parse_error(R"({"gpus": [{"name": "X1", "capacity_bytes": 5,
                        "bandwidth_gb_s": -1}]})") ==
        "extra/bad.json: X1: bandwidth_gb_s: must be above 0 and up to "
        "1000000, but is -1");
  CHECK(parse_error(
            R"({"instances": [{"name": "i", "gpu": "X", "count": 0}]})") ==
        "extra/bad.json: i: count: must be positive, but is 0");
  CHECK(parse_error(std::string(R"({"models": [{)") + k_toy + "}, {" + k_toy +
                    "}]}") ==
        "extra/bad.json: toy: name or alias 'toy' is used by another model");
}

// A complete new GPU entry for --catalog files.
std::string card(const std::string& name, const std::string& extra = "") {
  return R"({"name": ")" + name +
         R"(", "capacity_bytes": 2000, "bandwidth_gb_s": 100,
             "bf16_tflops": 10, "pcie_gb_s": 16)" +
         extra + "}";
}

// merge_catalog_files over a copy of the shipped catalog; the warnings.
std::vector<std::string> merge(
    Catalog& base,
    const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<oomplan::CatalogFile> views;
  for (const auto& [origin, text] : files) {
    views.push_back({origin, text});
  }
  return oomplan::merge_catalog_files(base, views);
}

TEST_CASE("catalog: merge overrides entries by name and adds new ones",
          "[catalog]") {
  Catalog base = catalog();
  const auto models = base.models.size();
  const auto warnings = merge(
      base, {{"extra/gpus.json",
              R"({"gpus": [{"name": "h100-80", "capacity_bytes": 1000}, )" +
                  card("MyCard") + R"(],
          "instances": [{"name": "my.box", "gpu": "MyCard", "count": 2}]})"}});
  CHECK(warnings.empty());
  CHECK(base.models.size() == models);
  CHECK(oomplan::find_gpu(base, "H100").capacity_bytes == 1000);
  const auto spec = oomplan::parse_gpu_spec(base, "my.box");
  CHECK(spec.gpu->name == "MyCard");
  CHECK(spec.count == 2);
  CHECK(error_of([&] {
          merge(base, {{"extra/i.json",
                        R"({"instances": [{"name": "x.box", "gpu": "NoSuch",
                                           "count": 2}]})"}});
        }) == "instance x.box: unknown GPU 'NoSuch'");
}

TEST_CASE("catalog: a one-field GPU override keeps every other field",
          "[catalog]") {
  // D8: {"name": "H100-80", "capacity_bytes": ...} used to replace the whole
  // entry, dropping bandwidth, TFLOPS and aliases (the time model then
  // divided by a zero bandwidth).
  Catalog base = catalog();
  const oomplan::Gpu before = oomplan::find_gpu(base, "H100-80");
  merge(base, {{"extra/h100.json",
                R"({"gpus": [{"name": "H100-80",
                              "capacity_bytes": 85000000000}]})"}});
  const oomplan::Gpu& after = oomplan::find_gpu(base, "H100");
  oomplan::Gpu expected = before;
  expected.capacity_bytes = 85'000'000'000;
  CHECK(after == expected);
  CHECK(after.bandwidth_gb_s == 3350);  // H100 SXM5 HBM3, 3.35 TB/s
  // A model override changes the fields it states and keeps the rest.
  const Model llama = oomplan::find_model(base, "llama3-70b");
  merge(base, {{"extra/llama.json",
                R"({"models": [{"id": "llama-3-70b",
                                "max_position_embeddings": 131072}]})"}});
  Model expected_model = llama;
  expected_model.max_position_embeddings = 131072;
  CHECK(oomplan::find_model(base, "llama3-70b") == expected_model);
}

TEST_CASE("catalog: a new GPU must state what the time model divides by",
          "[catalog]") {
  // D8: a GPU without bandwidth printed "~inf ms per output token".
  Catalog base = catalog();
  CHECK(error_of([&] {
          merge(base, {{"extra/x.json",
                        R"({"gpus": [{"name": "X1", "capacity_bytes": 5}]})"}});
        }) == "extra/x.json: X1: bandwidth_gb_s: missing");
  CHECK(parse_error(R"({"gpus": [{"name": "X1", "capacity_bytes": 5,
                        "bandwidth_gb_s": 1, "bf16_tflops": 1}]})") ==
        "extra/bad.json: X1: pcie_gb_s: missing");
  CHECK(parse_error(std::string(R"({"gpus": [)") +
                    card("X1", R"(, "bf16_tflops": 0)") + "]}") ==
        "extra/bad.json: X1: bf16_tflops: must be above 0 and up to 1000000, "
        "but is 0");
}

TEST_CASE("catalog: the same name in two --catalog files is an error",
          "[catalog]") {
  // D9: the later file used to win silently.
  Catalog base = catalog();
  const std::string one = std::string(R"({"gpus": [)") + card("MyCard") + "]}";
  CHECK(error_of([&] {
          merge(base, {{"a/one.json", one}, {"b/two.json", one}});
        }) ==
        "b/two.json: MyCard: GPU 'MyCard' is also defined in a/one.json; keep "
        "one definition");
  // Overriding the same built-in entry from two files conflicts too.
  Catalog again = catalog();
  const std::string h100 =
      R"({"gpus": [{"name": "H100-80", "capacity_bytes": 1000}]})";
  CHECK(error_of([&] {
          merge(again, {{"a/one.json", h100}, {"b/two.json", h100}});
        }) ==
        "b/two.json: H100-80: GPU 'H100-80' is also defined in a/one.json; "
        "keep one definition");
  // An alias one file gives and another file's entry claims.
  Catalog third = catalog();
  CHECK(error_of([&] {
          merge(third,
                {{"a/one.json", std::string(R"({"gpus": [)") +
                                    card("CardA", R"(, "aliases": ["fast"])") +
                                    "]}"},
                 {"b/two.json", std::string(R"({"gpus": [)") +
                                    card("CardB", R"(, "aliases": ["FAST"])") +
                                    "]}"}});
        }) ==
        "b/two.json: CardB: GPU 'FAST' is also defined in a/one.json; keep "
        "one definition");
}

TEST_CASE("catalog: shadowing a built-in name or alias is a warning",
          "[catalog]") {
  // D9: a user model could take a built-in alias without a word.
  Catalog base = catalog();
  const std::string model = std::string(R"({"models": [{)") + k_toy +
                            R"(, "aliases": ["llama3-70b", "llama-3-8b"]}]})";
  const auto warnings = merge(base, {{"extra/toy.json", model}});
  CHECK(warnings == std::vector<std::string>{
                        "extra/toy.json: toy: 'llama3-70b' was an alias of "
                        "built-in model llama-3-70b; it now finds this entry",
                        "extra/toy.json: toy: alias 'llama-3-8b' is the name "
                        "of built-in model llama-3-8b, which keeps it; the "
                        "alias is ignored"});
  CHECK(oomplan::find_model(base, "llama3-70b").name == "toy");
  CHECK(oomplan::find_model(base, "llama-3-70b").name == "llama-3-70b");
  CHECK(oomplan::find_model(base, "llama-3-8b").name == "llama-3-8b");
  // Naming a built-in entry by one of its aliases overrides that entry.
  Catalog other = catalog();
  const auto by_alias = merge(
      other, {{"extra/h100.json",
               R"({"gpus": [{"name": "H100", "capacity_bytes": 1000}]})"}});
  CHECK(by_alias ==
        std::vector<std::string>{
            "extra/h100.json: H100: 'H100' is an alias of built-in GPU "
            "H100-80; this entry overrides it field by field"});
  CHECK(oomplan::find_gpu(other, "H100-80").capacity_bytes == 1000);
}

TEST_CASE("catalog: thousands of extra entries merge, each findable by name",
          "[catalog]") {
  // Issue 13: 3,000 extra GPUs took 173 ms (merge_list scanned the whole list
  // per entry). The merge is now indexed by name; its speed is measured by
  // oomplan_bench (`--catalog` with 1,000 extra GPUs), not by a timed test.
  std::string text = R"({"gpus": [)";
  for (int i = 0; i < 3'000; ++i) {
    if (i > 0) {
      text += ',';
    }
    text += card(std::string("G").append(std::to_string(i)));
  }
  text += "]}";
  Catalog base = catalog();
  merge(base, {{"extra/many.json", text}});
  CHECK(base.gpus.size() == catalog().gpus.size() + 3'000);
  CHECK(oomplan::find_gpu(base, "G0").name == "G0");
  CHECK(oomplan::find_gpu(base, "G2999").name == "G2999");
}

TEST_CASE("catalog: the structure check bounds every size before arithmetic",
          "[catalog]") {
  // D3: 10^13 layers used to hang (a per-layer loop in count_params).
  CHECK(parse_error(toy_with(R"(, "num_hidden_layers": 10000000000000)")) ==
        "extra/bad.json: toy: num_hidden_layers: must be from 1 to 4096, but "
        "is 10000000000000");
  CHECK(parse_error(toy_with(R"(, "vocab_size": 100000000)")) ==
        "extra/bad.json: toy: vocab_size: must be from 1 to 16777216, but is "
        "100000000");
  CHECK(parse_error(toy_with(R"(, "num_key_value_heads": 8)")) ==
        "extra/bad.json: toy: num_key_value_heads: 8 exceeds "
        "num_attention_heads 4");
  CHECK(parse_error(toy_with(R"(, "first_k_dense_replace": 3)")) ==
        "extra/bad.json: toy: first_k_dense_replace: 3 dense layers exceed "
        "num_hidden_layers 2");
  CHECK(parse_error(toy_with(R"(, "checkpoint_bytes": 5)")) ==
        "extra/bad.json: toy: checkpoint_bytes: 5 bytes cannot hold 95040 "
        "parameters (1 bit to 8 bytes each: 11880 to 760320 bytes)");
  // The bounds themselves are accepted (the toy's 2 layers of 4 heads).
  CHECK(parse_error(toy_with(R"(, "num_hidden_layers": 4096)")).empty());
  CHECK(parse_error(toy_with(R"(, "max_position_embeddings": 1073741824)"))
            .empty());
}

TEST_CASE("catalog: every bound has a model far below it", "[catalog]") {
  // The bounds are documented as far above every real model: the shipped
  // catalog must sit at least 8 times below each.
  for (const Model& m : catalog().models) {
    INFO(m.name);
    CHECK(m.num_layers * 8 <= oomplan::k_max_layers);
    CHECK(m.hidden_size * 8 <= oomplan::k_max_hidden);
    CHECK(m.num_heads * 8 <= oomplan::k_max_heads);
    CHECK(m.intermediate_size * 8 <= oomplan::k_max_intermediate);
    CHECK(m.vocab_size * 8 <= oomplan::k_max_vocab);
    CHECK(m.max_position_embeddings * 8 <= oomplan::k_max_positions);
    CHECK(m.num_experts * 8 <= oomplan::k_max_experts);
    CHECK(!oomplan::check_model(m));
  }
}

TEST_CASE("catalog: a huge name or key is cut, and no suggestion is sought",
          "[catalog]") {
  // D4: "did you mean" ran a full edit-distance table per candidate: a
  // 100,000-character model name took 2.9 s, a 1 MB unknown key 7.7 s. Names
  // far longer than any candidate get no suggestion (the messages below have
  // none), so the table is never built.
  const std::string name(100'000, 'a');
  const std::string key(1'000'000, 'k');
  const std::string model_error =
      error_of([&] { oomplan::find_model(catalog(), name); });
  const std::string key_error =
      parse_error(toy_with(R"(, ")" + key + R"(": 1)"));
  // The echoed text is cut: the message stays short and on one line.
  CHECK(model_error == "unknown model '" + std::string(200, 'a') +
                           "...(99800 more bytes)'; `oomplan models` lists "
                           "the catalog, or pass a config.json path");
  CHECK(key_error == "extra/bad.json: toy: " + std::string(200, 'k') +
                         "...(999800 more bytes): unknown field "
                         "(models/README.md lists the fields)");
}

// The textbook optimal-string-alignment distance (full table), to check the
// banded one against.
std::size_t reference_distance(const std::string& a_in,
                               const std::string& b_in) {
  std::string a = a_in;
  std::string b = b_in;
  for (auto* s : {&a, &b}) {
    for (char& ch : *s) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  std::vector<std::vector<std::size_t>> d(
      a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (std::size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

TEST_CASE("catalog: banded suggestions match the full edit distance",
          "[catalog]") {
  // For every GPU name and alias, with typos made from it (a deletion, a
  // swap, an insertion, three changes, four changes), suggest() must pick
  // what the full table picks: the first candidate at the smallest distance
  // <= 3 (and below the candidate's length).
  std::vector<std::string> names;
  for (const auto& g : catalog().gpus) {
    names.push_back(g.name);
    names.insert(names.end(), g.aliases.begin(), g.aliases.end());
  }
  for (const auto& name : names) {
    std::vector<std::string> words = {
        name.substr(1), name + "x", std::string("zz").append(name).append("q"),
        name + "-0000", std::string("Q").append(name.substr(2))};
    if (name.size() > 2) {
      std::string swapped = name;
      std::swap(swapped[0], swapped[1]);
      words.push_back(swapped);
    }
    for (const auto& word : words) {
      INFO(word);
      std::optional<std::string> expected;
      std::size_t best = 4;
      for (const auto& candidate : names) {
        const std::size_t d = reference_distance(word, candidate);
        if (d < best && d < candidate.size()) {
          best = d;
          expected = candidate;
        }
      }
      CHECK(oomplan::suggest(word, names) == expected);
    }
  }
}

TEST_CASE("catalog: instances carry host RAM and price into the GPU spec",
          "[catalog]") {
  Catalog base = catalog();
  merge(base, {{"extra/box.json",
                std::string(R"({"gpus": [)") + card("MyCard") + R"(],
                    "instances": [{"name": "my.box", "gpu": "MyCard",
                                   "count": 4, "host_ram_gib": 512,
                                   "price_usd_per_hour": 10},
                                  {"name": "my.big", "gpu": "MyCard",
                                   "count": 8, "price_usd_per_hour": 16}]})"}});
  const auto spec = oomplan::parse_gpu_spec(base, "my.box");
  CHECK(spec.host_ram_bytes == 512 * oomplan::k_gib);
  CHECK(spec.price_usd_per_hour == 10);
  REQUIRE(spec.instance != nullptr);
  CHECK(spec.instance->name == "my.box");
  CHECK(oomplan::parse_gpu_spec(base, "4xMyCard").host_ram_bytes == 0);
  // 10 / 4 = 2.50 and 16 / 8 = 2.00 USD per GPU-hour: the cheaper wins.
  CHECK(oomplan::gpu_hour_price(base, oomplan::find_gpu(base, "MyCard")) ==
        2.0);
  const std::string card_b =
      std::string(R"({"gpus": [)") + card("OtherCard") + "]}";
  merge(base, {{"extra/b.json", card_b}});
  CHECK(!oomplan::gpu_hour_price(base, oomplan::find_gpu(base, "OtherCard")));
}

TEST_CASE("catalog: hostile JSON gives one clean line", "[catalog]") {
  // Found by fuzzing: nlohmann's parse errors quote the raw bytes they read
  // ("; last read: '\"\xff'"); the line names the place, never the bytes.
  CHECK(parse_error("{\"models\": \"\xff\"}") ==
        "extra/bad.json: parse error at line 1, column 13: syntax error while "
        "parsing value - invalid string: ill-formed UTF-8 byte");
  // Copying or printing a value recurses once per level: depth is capped.
  CHECK(parse_error(std::string(100'000, '[')) ==
        "extra/bad.json: JSON nested deeper than 64 levels");
  CHECK(
      parse_error(
          R"({"models": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})") ==
      "extra/bad.json: models: must be an array, but is string");
}

TEST_CASE("catalog: an alias equal to the entry's own name is dropped",
          "[catalog]") {
  // Found by fuzzing: an override listing its own name as an alias left the
  // name twice in the lookup keys.
  const Catalog c =
      parse_catalog(toy_with(R"(, "aliases": ["TOY", "t"])"), "extra/toy.json");
  CHECK(c.models[0].aliases == std::vector<std::string>{"t"});
  Catalog base = catalog();
  merge(base, {{"extra/q.json", R"({"models": [{"id": "llama-3-70b",
                                    "aliases": ["llama-3-70b"]}]})"}});
  const auto& aliases = oomplan::find_model(base, "llama-3-70b").aliases;
  CHECK(std::count(aliases.begin(), aliases.end(), "llama-3-70b") == 0);
}

TEST_CASE("catalog: the 96 GB cards report what CUDA reports", "[catalog]") {
  const auto& c = catalog();
  // RTX PRO 6000 Blackwell: cudaMemGetInfo total "94.97 GiB" (antirez/ds4
  // #431), nvidia-smi 97887 MiB.
  const auto& pro = oomplan::find_gpu(c, "rtx-pro-6000-blackwell");
  CHECK(static_cast<double>(pro.capacity_bytes) / (1LL << 30) ==
        Approx(94.97).margin(0.005));
  CHECK(pro.smi_bytes == 97887LL << 20);
  CHECK(pro.compute_capability == 120);
  // GH200: torch total_memory=96768MB (MiB) on "NVIDIA GH200 480GB".
  CHECK(oomplan::find_gpu(c, "NVIDIA GH200 480GB").capacity_bytes == 96768LL
                                                                         << 20);
  // The 94 GB H100 NVL was already listed.
  CHECK(oomplan::parse_gpu_spec(c, "2xH100-NVL").gpu->name == "H100-NVL");
}

TEST_CASE("catalog: instances carry the host RAM and price their clouds list",
          "[catalog]") {
  const auto& c = catalog();
  const auto spec = [&](const char* name) {
    INFO(name);
    return oomplan::parse_gpu_spec(c, name);
  };
  // AWS p5.48xlarge: 8 x H100, 2,048 GiB, 55.04 USD/h in us-east-1.
  CHECK(spec("p5.48xlarge").host_ram_bytes == 2048 * oomplan::k_gib);
  CHECK(spec("p5.48xlarge").price_usd_per_hour == 55.04);
  CHECK(spec("p5en.48xlarge").gpu->name == "H200");
  CHECK(spec("p5e.48xlarge").price_usd_per_hour == 0);  // none listed
  // Every g6e size: 1, 1, 1, 1, 1, 4, 4, 8 L40S with 32 GiB to 1,536 GiB.
  const std::vector<std::pair<const char*, int>> g6e = {
      {"g6e.xlarge", 1},   {"g6e.2xlarge", 1},  {"g6e.4xlarge", 1},
      {"g6e.8xlarge", 1},  {"g6e.16xlarge", 1}, {"g6e.12xlarge", 4},
      {"g6e.24xlarge", 4}, {"g6e.48xlarge", 8}};
  for (const auto& [name, count] : g6e) {
    CHECK(spec(name).gpu->name == "L40S");
    CHECK(spec(name).count == count);
    CHECK(spec(name).host_ram_bytes > 0);
  }
  CHECK(spec("g6e.48xlarge").host_ram_bytes == 1536 * oomplan::k_gib);
  // GCP: a3-highgpu-8g and a3-megagpu-8g 1,872 GiB; a2 families.
  CHECK(spec("a3-highgpu-8g").host_ram_bytes == 1872 * oomplan::k_gib);
  CHECK(spec("a3-megagpu-8g").count == 8);
  CHECK(spec("a2-megagpu-16g").count == 16);
  CHECK(spec("a2-ultragpu-8g").gpu->name == "A100-80");
  CHECK(spec("a2-highgpu-1g").host_ram_bytes == 85 * oomplan::k_gib);
  // Azure ND H100 v5 1,900 GiB, ND H200 v5 1,850 GiB.
  CHECK(spec("Standard_ND96isr_H100_v5").host_ram_bytes ==
        1900 * oomplan::k_gib);
  CHECK(spec("Standard_ND96isr_H200_v5").host_ram_bytes ==
        1850 * oomplan::k_gib);
  // Cheapest GPU-hour: H100 on p5.48xlarge or p5.4xlarge, 55.04 / 8 = 6.88;
  // L40S on g6e.xlarge, 1.861 (g6e.48xlarge: 30.13 / 8 = 3.77).
  CHECK(oomplan::gpu_hour_price(c, oomplan::find_gpu(c, "H100")) ==
        Approx(6.88));
  CHECK(oomplan::gpu_hour_price(c, oomplan::find_gpu(c, "L40S")) ==
        Approx(1.861));
  CHECK(!oomplan::gpu_hour_price(c, oomplan::find_gpu(c, "MI300X")));
  for (const auto& i : c.instances) {
    INFO(i.name);
    // A node holds at least 4 GiB of CPU RAM per GPU wherever RAM is known,
    // and a price is per instance: at least 0.10 USD per GPU-hour.
    if (i.host_ram_bytes > 0) {
      CHECK(i.host_ram_bytes >= 4 * oomplan::k_gib * i.count);
    }
    if (i.price_usd_per_hour > 0) {
      CHECK(i.price_usd_per_hour / i.count >= 0.10);
    }
  }
}

TEST_CASE("catalog: the compiled-in catalog equals models/*.json parsed now",
          "[catalog]") {
  // builtin_catalog() is generated at build time (src/model/catalog_gen.cpp); a
  // field the generator forgot would come back as its default here.
  std::vector<std::string> names;
  std::vector<std::string> texts;
  const std::filesystem::path dir =
      std::filesystem::path(OOMPLAN_SOURCE_DIR) / "models";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") {
      names.push_back("models/" + entry.path().filename().string());
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      texts.push_back(text.str());
    }
  }
  std::vector<oomplan::CatalogFile> files;
  for (std::size_t i = 0; i < names.size(); ++i) {
    files.push_back({names[i], texts[i]});
  }
  const Catalog parsed = oomplan::assemble_catalog(files);
  const Catalog& compiled = catalog();
  REQUIRE(parsed.models.size() == compiled.models.size());
  REQUIRE(parsed.gpus.size() == compiled.gpus.size());
  REQUIRE(parsed.instances.size() == compiled.instances.size());
  for (std::size_t i = 0; i < parsed.models.size(); ++i) {
    INFO(parsed.models[i].name);
    CHECK(parsed.models[i] == compiled.models[i]);
  }
  for (std::size_t i = 0; i < parsed.gpus.size(); ++i) {
    INFO(parsed.gpus[i].name);
    CHECK(parsed.gpus[i] == compiled.gpus[i]);
  }
  for (std::size_t i = 0; i < parsed.instances.size(); ++i) {
    INFO(parsed.instances[i].name);
    CHECK(parsed.instances[i] == compiled.instances[i]);
  }
}

TEST_CASE("catalog: hybrid and state-space models state their layer kinds",
          "[catalog]") {
  // A two-layer Mamba-1 model: no heads, no MLP. Per layer in_proj 64 x 256
  // (16,384) + x_proj 128 x (4 + 16) (2,560) + dt_proj 4 x 128 + 128 (640) +
  // out_proj 128 x 64 (8,192) + conv 128 x 4 + 128 (640) + A_log 128 x 8
  // (1,024) + D 128 + norm 64 = 29,632; tied embedding 100 x 64; final norm:
  // 2 x 29,632 + 6,400 + 64 = 65,728.
  const Catalog c = parse_catalog(
      R"({"models": [{"id": "tiny-mamba", "hidden_size": 64,
          "num_hidden_layers": 2, "num_attention_heads": 0,
          "intermediate_size": 0, "vocab_size": 100, "mlp": "none",
          "norms_per_layer": 1, "tie_word_embeddings": true,
          "layer_types": ["mamba", "mamba"], "ssm_inner_size": 128,
          "ssm_state_size": 8, "ssm_conv_kernel": 4, "ssm_dt_rank": 4}]})",
      "extra/mamba.json");
  const Model& m = c.models[0];
  CHECK(oomplan::count_params(m).total() == 65'728);
  CHECK(oomplan::attention_layer_count(m) == 0);
  CHECK(parse_error(toy_with(R"(, "layer_types": ["attention"])")) ==
        "extra/bad.json: toy: layer_types: lists 1 layers, but "
        "num_hidden_layers is 2");
  CHECK(parse_error(toy_with(R"(, "layer_types": ["attention", "rnn"])")) ==
        "extra/bad.json: toy: layer_types: 'rnn' is not attention, mamba, "
        "mamba2, linear_attention or attention_mamba2");
  CHECK(parse_error(toy_with(
            R"(, "layer_types": ["mamba2", "attention"], "ssm_inner_size": 128,
                 "ssm_state_size": 8, "ssm_conv_kernel": 4,
                 "ssm_num_heads": 4, "ssm_head_dim": 16, "ssm_groups": 1)")) ==
        "extra/bad.json: toy: ssm_num_heads: 4 heads of 16 make 64, not "
        "ssm_inner_size 128");
  // A Mamba layer without its sizes is incomplete.
  CHECK(parse_error(toy_with(R"(, "layer_types": ["mamba", "attention"])")) ==
        "extra/bad.json: toy: ssm_inner_size: must be positive, but is 0");
  // Attention layers still need heads.
  CHECK(parse_error(toy_with(R"(, "num_attention_heads": 0)")) ==
        "extra/bad.json: toy: num_attention_heads: must be positive, but is 0");
}

TEST_CASE("catalog: a vision-language id is never corrected to its text model",
          "[catalog]") {
  // "Qwen/Qwen2.5-VL-32B-Instruct" (not in the catalog) is three edits from
  // the text-only "Qwen/Qwen2.5-32B-Instruct", a different model (no vision
  // tower); the 7B VL model is its own entry, with its tower.
  const std::string message = error_of(
      [] { oomplan::find_model(catalog(), "Qwen/Qwen2.5-VL-32B-Instruct"); });
  CHECK(message.find("did you mean") == std::string::npos);
  CHECK(message.rfind("unknown model 'Qwen/Qwen2.5-VL-32B-Instruct'", 0) == 0);
  const auto& vl =
      oomplan::find_model(catalog(), "Qwen/Qwen2.5-VL-7B-Instruct");
  CHECK(vl.name == "qwen2.5-vl-7b");
  CHECK(vl.extra_params > 0);
  // A plain typo still gets its suggestion.
  CHECK(error_of([] {
          oomplan::find_model(catalog(), "Qwen/Qwen2.5-7B-Instrct");
        }).find("did you mean") != std::string::npos);
}
