// MODEL resolved offline (docs/models.md, "How a name is resolved"): a path,
// the catalog, the Hugging Face cache, a catalog model mirrored under another
// org; the report's first line and JSON model.source say which step did it.

#include "cli/cli.hpp"
#include "cli/cli_internal.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using oomplan::cli::Environment;
using oomplan::test::CliResult;

const std::string k_commit = "0123456789abcdef0123456789abcdef01234567";
const std::string k_tiny_config =
    std::string(OOMPLAN_TEST_DATA) + "/hf/qwen2.5-7b/config.json";

CliResult run_env(const std::vector<std::string>& args,
                  const Environment& env) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = oomplan::cli::run(args, out, err, env);
  return {code, out.str(), err.str()};
}

// A hub cache folder under the build tree, empty at the start of each test.
fs::path fresh_hub(const std::string& name) {
  const fs::path hub = fs::path(OOMPLAN_TEST_OUTPUT) / "hub" / name;
  fs::remove_all(hub);
  fs::create_directories(hub);
  return hub;
}

// models--ORG--NAME/snapshots/COMMIT/ with config.json a link into blobs/, as
// huggingface_hub lays it out (file_download.py).
fs::path cache_model(const fs::path& hub, const std::string& folder,
                     const std::string& commit, bool with_ref) {
  const fs::path repo = hub / folder;
  const fs::path snapshot = repo / "snapshots" / commit;
  fs::create_directories(snapshot);
  fs::create_directories(repo / "blobs");
  fs::copy_file(k_tiny_config, repo / "blobs" / ("blob-" + commit),
                fs::copy_options::overwrite_existing);
  fs::create_symlink(fs::path("../../blobs") / ("blob-" + commit),
                     snapshot / "config.json");
  if (with_ref) {
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << commit;
  }
  return snapshot;
}

Environment hub_env(const fs::path& hub) {
  Environment env;
  env.hf_hub_cache = hub.string();
  return env;
}

}  // namespace

TEST_CASE("model source: the cache folder follows huggingface_hub's variables",
          "[model_source]") {
  using oomplan::cli::hub_cache_folder;
  Environment env;
  CHECK_FALSE(hub_cache_folder(env));  // nothing set: no cache is read
  env.home = "/home/u";
  CHECK(hub_cache_folder(env) == fs::path("/home/u/.cache/huggingface/hub"));
  env.xdg_cache_home = "/xdg";
  CHECK(hub_cache_folder(env) == fs::path("/xdg/huggingface/hub"));
  env.hf_home = "~/hf";  // expanduser, as constants.py applies it
  CHECK(hub_cache_folder(env) == fs::path("/home/u/hf/hub"));
  env.huggingface_hub_cache = "/legacy";
  CHECK(hub_cache_folder(env) == fs::path("/legacy"));
  env.hf_hub_cache = "/hub";
  CHECK(hub_cache_folder(env) == fs::path("/hub"));
  env.hf_hub_cache = "";  // set but empty: as unset
  CHECK(hub_cache_folder(env) == fs::path("/legacy"));
}

TEST_CASE("model source: a catalog name says catalog on the first line",
          "[model_source]") {
  const CliResult r = run_env({"llama-2-7b", "--gpus", "1xH100"}, {});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("llama-2-7b (6.74B params, catalog) on 1 x H100-80", 0) ==
        0);
  const auto doc = nlohmann::json::parse(
      run_env({"llama-2-7b", "--gpus", "1xH100", "--json"}, {}).out);
  CHECK(doc["model"]["source"] == nlohmann::json({{"step", "catalog"}}));
}

TEST_CASE(
    "model source: a mirror under another org is planned as the catalog "
    "model, only when one matches",
    "[model_source]") {
  // TheBloke/Llama-2-7B-fp16: the repository name without -fp16 is
  // meta-llama/Llama-2-7b-hf's without -hf (the catalog aliases the common
  // NousResearch copies; this one it does not).
  const CliResult r =
      run_env({"TheBloke/Llama-2-7B-fp16", "--gpus", "1xH100"}, {});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("llama-2-7b (6.74B params, TheBloke/Llama-2-7B-fp16 "
                    "planned as llama-2-7b, same architecture) on",
                    0) == 0);
  const auto doc = nlohmann::json::parse(
      run_env({"TheBloke/Llama-2-7B-fp16", "--gpus", "1xH100", "--json"}, {})
          .out);
  CHECK(doc["model"]["source"]["step"] == "mirror");
  CHECK(doc["model"]["source"]["detail"] == "TheBloke/Llama-2-7B-fp16");
  // Case and the -hf suffix do not matter; a GGUF repository (llama.cpp's
  // files, not a transformers checkpoint) is not a mirror.
  CHECK(run_env({"someone/LLAMA-2-7B", "--gpus", "1xH100"}, {}).code == 0);
  const CliResult gguf =
      run_env({"TheBloke/Llama-2-7B-GGUF", "--gpus", "1xH100"}, {});
  CHECK(gguf.code == 2);
  CHECK(gguf.out.empty());

  // Two catalog models with the same repository name: ambiguous, exit 2.
  const fs::path dir = fs::path(OOMPLAN_TEST_OUTPUT) / "mirror_catalog";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(std::string(OOMPLAN_SOURCE_DIR) + "/models/llama.json");
  auto shipped = nlohmann::json::parse(in);
  nlohmann::json twin = shipped["models"][0];  // llama-2-7b
  REQUIRE(twin["id"] == "llama-2-7b");
  twin["id"] = "acme-llama";
  twin["hf_id"] = "acme/Llama-2-7b";
  twin["aliases"] = nlohmann::json::array();
  std::ofstream(dir / "acme.json") << nlohmann::json({{"models", {twin}}});
  const CliResult two = run_env({"TheBloke/Llama-2-7B-fp16", "--gpus", "1xH100",
                                 "--catalog", dir.string()},
                                {});
  CHECK(two.code == 2);
  CHECK(two.err ==
        "oomplan: error: 'TheBloke/Llama-2-7B-fp16' could mirror llama-2-7b "
        "and acme-llama (same repository name); name the catalog model, or "
        "pass the model's config.json\n");
}

TEST_CASE("model source: an unknown name names the closest catalog models",
          "[model_source]") {
  const CliResult r = run_env({"lama3-70b", "--gpus", "4xA100-80"}, {});
  CHECK(r.code == 2);
  CHECK(r.err ==
        "oomplan: error: unknown model 'lama3-70b' (not in the catalog); did "
        "you mean llama-3-70b or llama-2-70b? Otherwise pass a config.json "
        "path or a model folder\n");
  // An empty name (a launch file's `model: ""`, `oomplan ""`) says so.
  CHECK(run_env({"", "--gpus", "1xH100"}, {}).err ==
        "oomplan: error: the model name is empty; give a catalog name (see "
        "oomplan models), a Hugging Face id or a config.json path\n");
  // A path from another machine is not a misspelt name.
  const CliResult path = run_env(
      {"/data/weights/Llama3-8B-Chinese-Chat/", "--gpus", "1xH100"}, {});
  CHECK(path.err ==
        "oomplan: error: no file or folder "
        "'/data/weights/Llama3-8B-Chinese-Chat/' here; pass the path of its "
        "config.json or of a model folder on this machine, or a catalog name "
        "(see oomplan models)\n");
  const CliResult cached = run_env({"acme/nothing-like-it", "--gpus", "1xH100"},
                                   hub_env(fresh_hub("unknown")));
  CHECK(cached.code == 2);
  CHECK(cached.err.find("not in the catalog or the Hugging Face cache ('") !=
        std::string::npos);
}

TEST_CASE("model source: the Hugging Face cache, after the catalog",
          "[model_source]") {
  const fs::path hub = fresh_hub("cache");
  const fs::path snapshot =
      cache_model(hub, "models--acme--Tiny-7B", k_commit, true);
  const Environment env = hub_env(hub);
  const CliResult r = run_env({"acme/Tiny-7B", "--gpus", "1xH100"}, env);
  REQUIRE(r.code == 0);
  CHECK(
      r.out.rfind("acme/Tiny-7B (7.62B params, from the Hugging Face cache (" +
                      snapshot.string() + ")) on 1 x H100-80",
                  0) == 0);
  const auto doc = nlohmann::json::parse(
      run_env({"acme/Tiny-7B", "--gpus", "1xH100", "--json"}, env).out);
  CHECK(doc["model"]["source"]["step"] == "hf_cache");
  // The Hub's ids are case-insensitive; the folder keeps the first spelling.
  CHECK(run_env({"ACME/tiny-7b", "--gpus", "1xH100"}, env).code == 0);
  // A catalog id wins over a cached copy of it.
  cache_model(hub, "models--meta-llama--Llama-2-7b-hf", k_commit, true);
  CHECK(run_env({"meta-llama/Llama-2-7b-hf", "--gpus", "1xH100"}, env)
            .out.rfind("llama-2-7b (6.74B params, catalog)", 0) == 0);
}

TEST_CASE("model source: without refs/main the newest snapshot is read",
          "[model_source]") {
  const fs::path hub = fresh_hub("newest");
  cache_model(hub, "models--acme--Tiny-7B", std::string(40, 'a'), false);
  const fs::path newer =
      cache_model(hub, "models--acme--Tiny-7B", std::string(40, 'b'), false);
  fs::last_write_time(
      newer, fs::last_write_time(newer.parent_path() / std::string(40, 'a')) +
                 std::chrono::hours(1));
  const CliResult r =
      run_env({"acme/Tiny-7B", "--gpus", "1xH100", "--json"}, hub_env(hub));
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["model"]["source"]["detail"] ==
        newer.string());
}

TEST_CASE("model source: a broken cache entry is one error line, exit 2",
          "[model_source]") {
  const fs::path hub = fresh_hub("broken");
  const Environment env = hub_env(hub);
  // config.json whose blob is gone (a cleaned cache).
  const fs::path snapshot =
      cache_model(hub, "models--acme--Gone", k_commit, true);
  fs::remove(hub / "models--acme--Gone" / "blobs" / ("blob-" + k_commit));
  const CliResult gone = run_env({"acme/Gone", "--gpus", "1xH100"}, env);
  CHECK(gone.code == 2);
  CHECK(gone.out.empty());
  CHECK(gone.err == "oomplan: error: '" + (snapshot / "config.json").string() +
                        "' is a broken link in the Hugging Face cache (its "
                        "blob is gone); fetch it with `huggingface-cli "
                        "download acme/Gone config.json` or pass a config.json "
                        "path\n");
  // A snapshot with the weights' index only (config.json never fetched).
  const fs::path bare = hub / "models--acme--Bare" / "snapshots" / k_commit;
  fs::create_directories(bare);
  const CliResult none = run_env({"acme/Bare", "--gpus", "1xH100"}, env);
  CHECK(none.code == 2);
  CHECK(none.err == "oomplan: error: the Hugging Face cache snapshot '" +
                        bare.string() +
                        "' has no config.json; fetch it with `huggingface-cli "
                        "download acme/Bare config.json` or pass a config.json "
                        "path\n");
  // A repository folder without snapshots.
  fs::create_directories(hub / "models--acme--Empty");
  const CliResult empty = run_env({"acme/Empty", "--gpus", "1xH100"}, env);
  CHECK(empty.code == 2);
  CHECK(empty.err.find("but no snapshot in it") != std::string::npos);
  // refs/main pointing outside snapshots/ is not followed.
  const fs::path repo = hub / "models--acme--Trick";
  cache_model(hub, "models--acme--Trick", k_commit, false);
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "../../../../etc";
  CHECK(run_env({"acme/Trick", "--gpus", "1xH100"}, env).code == 0);
  // A name that is not a repository id is never looked up as a path.
  CHECK(run_env({"../acme/Gone", "--gpus", "1xH100"}, env).code == 2);
}

TEST_CASE("model source: check plans a launch file's mirror and says so",
          "[model_source]") {
  // axolotl's fft-8b.yaml names NousResearch/Meta-Llama-3.1-8B.
  const std::string file = std::string(OOMPLAN_TEST_DATA) +
                           "/configs/axolotl/examples/llama-3/fft-8b.yaml";
  const CliResult r =
      run_env({"check", file, "--gpus", "8xH100", "--json"}, {});
  REQUIRE(r.code != 2);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["plans"][0]["model"]["name"] == "llama-3.1-8b");
  CHECK(doc["plans"][0]["model"]["source"]["step"] == "mirror");
  CHECK(doc["plans"][0]["notes"].dump().find(
            "NousResearch/Meta-Llama-3.1-8B planned as llama-3.1-8b, same "
            "architecture") != std::string::npos);
}

TEST_CASE(
    "model source: a pre-quantized copy is the catalog model with the "
    "weights its name states",
    "[model_source]") {
  // LLaMA-Factory's examples/train_lora/llama3_lora_sft_awq.yaml names
  // TechxGenus/Meta-Llama-3-8B-Instruct-AWQ; Qwen publishes -GPTQ-Int4.
  const auto awq =
      nlohmann::json::parse(run_env({"TechxGenus/Meta-Llama-3-8B-Instruct-AWQ",
                                     "--gpus", "1xL4", "--json"},
                                    {})
                                .out);
  CHECK(awq["model"]["name"] == "llama-3-8b");
  CHECK(awq["setup"]["quant"] == "awq");
  const auto bf16 = nlohmann::json::parse(
      run_env({"llama-3-8b", "--gpus", "1xL4", "--json"}, {}).out);
  const auto weights = [](const nlohmann::json& plan) {
    for (const auto& c : plan["components"]) {
      if (c["name"] == "weights") {
        return c["bytes"].get<double>();
      }
    }
    return 0.0;
  };
  // AWQ keeps the embeddings and lm_head in 16 bits: 2 x 128,256 x 4,096 x
  // 2 B = 2,101,346,304 B; the 6,979,321,856 layer parameters take 4 bits +
  // an fp16 scale and a 4-bit zero per group of 128: (4 + 16/128 + 4/128) / 8
  // = 0.51953125 B each, 3,625,975,808 B; 5,727,322,112 B in all (norms
  // aside), 36 % of bf16.
  CHECK(weights(awq) == Approx(5.727e9).epsilon(0.005));
  CHECK(weights(bf16) == Approx(16.06e9).epsilon(0.005));
  // axolotl's examples name hugging-quants/Meta-Llama-3.1-405B-BNB-NF4-BF16.
  const auto nf4 = nlohmann::json::parse(
      run_env({"hugging-quants/Meta-Llama-3.1-405B-BNB-NF4-BF16", "--gpus",
               "8xH100", "--json"},
              {})
          .out);
  CHECK(nf4["model"]["name"] == "llama-3.1-405b");
  CHECK(nf4["setup"]["quant"] == "nf4");
  const CliResult text =
      run_env({"Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "--gpus", "1xL4"}, {});
  CHECK(text.out.rfind("qwen2.5-7b (7.62B params, "
                       "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4 planned as "
                       "qwen2.5-7b with gptq weights, same architecture)",
                       0) == 0);
}

TEST_CASE(
    "model source: the report says why the index's total_size does not set "
    "the weights",
    "[model_source]") {
  // A bf16 checkpoint folder (Qwen2.5-7B's config.json) with its index.
  const fs::path dir = fresh_hub("indexed") / "qwen";
  fs::create_directories(dir);
  fs::copy_file(k_tiny_config, dir / "config.json");
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {"total_size": 15231233024}, "weight_map": {}})";
  const Environment env;
  const auto warnings = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {dir.string(), "--gpus", "1xH100",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_env(args, env);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out)["warnings"].dump();
  };
  // Loaded as stored (bf16): the count agrees, nothing to say.
  CHECK(warnings({}).find("total_size") == std::string::npos);
  // Quantized on load: 15,231,233,024 B = 14.19 GiB, not what the GPU holds.
  CHECK(warnings({"--quant", "nf4"})
            .find("the safetensors index's metadata.total_size (14.19 GiB) "
                  "is not the weights' size here: the checkpoint stores them "
                  "in bf16 and this run loads them in nf4") !=
        std::string::npos);
  CHECK(warnings({"--dtype", "fp32"}).find("loads them in fp32") !=
        std::string::npos);
}
