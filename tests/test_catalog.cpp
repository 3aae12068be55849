#include "support.hpp"

#include "oomplan/catalog.hpp"
#include "oomplan/error.hpp"
#include "oomplan/model.hpp"

#include <catch2/catch.hpp>

namespace {

using oomplan::Model;

Model llama3_70b() {
  Model m;
  m.name = "llama-3-70b";
  m.hidden_size = 8192;
  m.num_layers = 80;
  m.num_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 28672;
  m.vocab_size = 128256;
  return m;
}

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
