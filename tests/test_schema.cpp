#include "json_schema.hpp"
#include "support.hpp"

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/dtype.hpp"
#include "oomplan/setup/setup.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

// Every JSON document the tool prints validates against the JSON Schema
// shipped for its schema id (src/schema/, installed to share/oomplan/schema/),
// with every printed key documented there.

namespace oomplan {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using test::run_cli;
using test::SchemaValidator;

// The schema ids the tool prints (DESIGN §2 and report.hpp).
const std::vector<std::string> k_ids = {
    "oomplan.plan/1",   "oomplan.fit/1",  "oomplan.sizing/1",
    "oomplan.models/1", "oomplan.gpus/1", "oomplan.diagnosis/1",
    "oomplan.check/1"};

// "oomplan.plan/1" -> src/schema/plan-1.schema.json
fs::path schema_path(const std::string& id) {
  const auto dot = id.find('.');
  const auto slash = id.find('/');
  const std::string name = id.substr(dot + 1, slash - dot - 1) + "-" +
                           id.substr(slash + 1) + ".schema.json";
  return fs::path(OOMPLAN_SOURCE_DIR) / "src" / "schema" / name;
}

Json load_schema(const std::string& id) {
  std::ifstream in(schema_path(id));
  INFO(schema_path(id).string());
  REQUIRE(in.good());
  return Json::parse(in);
}

// Validates `text` (one JSON document) against the schema it names, which
// must be `id`; every key it prints must be declared.
void check_document(const std::string& id, const Json& doc) {
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("schema"));
  CHECK(doc["schema"] == id);
  const SchemaValidator validator(load_schema(id), /*closed=*/true);
  for (const std::string& error : validator.validate(doc)) {
    FAIL_CHECK(id << " at " << error);
  }
}

void check_output(const std::string& id, const std::vector<std::string>& args) {
  std::string line;
  for (const auto& a : args) {
    line += " " + a;
  }
  INFO("oomplan" << line);
  const auto result = run_cli(args);
  INFO(result.err);
  REQUIRE((result.code == 0 || result.code == 1));
  check_document(id, Json::parse(result.out));
}

std::vector<std::string> with_json(std::vector<std::string> args) {
  args.emplace_back("--json");
  return args;
}

TEST_CASE("schema: one file per schema id, in the validator's subset",
          "[schema]") {
  std::set<std::string> expected;
  for (const std::string& id : k_ids) {
    INFO(id);
    expected.insert(schema_path(id).filename().string());
    const Json schema = load_schema(id);
    const SchemaValidator validator(schema, true);
    for (const std::string& problem : validator.lint()) {
      FAIL_CHECK(problem);
    }
    CHECK(schema.at("$schema") ==
          "https://json-schema.org/draft/2020-12/schema");
    CHECK(schema.at("title") == id);
    CHECK(schema.at("properties").at("schema").at("const") == id);
    const auto& required = schema.at("required");
    CHECK(std::find(required.begin(), required.end(), "schema") !=
          required.end());
    // Every required key is declared.
    for (const Json& key : required) {
      CHECK(schema.at("properties").contains(key.get<std::string>()));
    }
  }
  // No stray schema without an id the tool prints.
  std::set<std::string> found;
  for (const auto& entry : fs::directory_iterator(fs::path(OOMPLAN_SOURCE_DIR) /
                                                  "src" / "schema")) {
    found.insert(entry.path().filename().string());
  }
  CHECK(found == expected);
}

TEST_CASE("schema: the validator rejects each kind of violation", "[schema]") {
  const Json schema = Json::parse(R"({
    "type": "object",
    "properties": {
      "n": {"type": "integer", "minimum": 1, "maximum": 3},
      "e": {"enum": ["a", "b"]},
      "c": {"const": "x"},
      "o": {"anyOf": [{"type": "string"}, {"type": "null"}]},
      "r": {"$ref": "#/$defs/thing"},
      "l": {"type": "array", "items": {"type": "boolean"}},
      "free": {"type": "object", "additionalProperties": {"type": "number"}}
    },
    "required": ["n"],
    "$defs": {"thing": {"type": "object", "properties": {"k": {"type": "string"}},
                        "required": ["k"]}}
  })");
  const SchemaValidator closed(schema, true);
  const SchemaValidator open(schema, false);
  CHECK(closed.lint().empty());
  const auto errors = [&](const char* text) {
    return closed.validate(Json::parse(text));
  };
  CHECK(errors(R"({"n": 2, "e": "a", "c": "x", "o": null, "r": {"k": "v"},
                   "l": [true], "free": {"any": 1.5}})")
            .empty());
  CHECK(errors(R"({"n": 2.0})").empty());  // 2.0 is an integer
  CHECK(errors(R"({})") ==
        std::vector<std::string>{": missing required key \"n\""});
  CHECK(errors(R"({"n": 2.5})") ==
        std::vector<std::string>{"/n: 2.5 is not of type \"integer\""});
  CHECK(errors(R"({"n": 0})") ==
        std::vector<std::string>{"/n: 0 is below the minimum 1"});
  CHECK(errors(R"({"n": 4})") ==
        std::vector<std::string>{"/n: 4 is above the maximum 3"});
  CHECK(errors(R"({"n": 1, "e": "z"})") ==
        std::vector<std::string>{"/e: \"z\" is not one of [\"a\",\"b\"]"});
  CHECK(errors(R"({"n": 1, "c": "y"})") ==
        std::vector<std::string>{"/c: \"y\" is not \"x\""});
  CHECK(errors(R"({"n": 1, "o": 3})").size() == 1);
  CHECK(errors(R"({"n": 1, "r": {}})") ==
        std::vector<std::string>{"/r: missing required key \"k\""});
  CHECK(errors(R"({"n": 1, "l": [true, 1]})") ==
        std::vector<std::string>{"/l/1: 1 is not of type \"boolean\""});
  CHECK(errors(R"({"n": 1, "free": {"x": "s"}})") ==
        std::vector<std::string>{"/free/x: \"s\" is not of type \"number\""});
  // Closed: an undeclared key is an error; open: it is allowed.
  CHECK(errors(R"({"n": 1, "new": 1})") ==
        std::vector<std::string>{"/new: key not documented in the schema"});
  CHECK(open.validate(Json::parse(R"({"n": 1, "new": 1})")).empty());
  // A keyword outside the subset is reported, never silently skipped.
  const SchemaValidator pattern(
      Json::parse(R"({"properties": {"s": {"format": "date"}},
                      "items": {"$ref": "#/$defs/none"}})"),
      true);
  CHECK(pattern.lint() == std::vector<std::string>{
                              "/items: $ref \"#/$defs/none\" does not resolve",
                              "/properties/s: unsupported keyword 'format'"});
  // pattern: a regular expression the string must contain a match of.
  const SchemaValidator every(
      Json::parse(
          R"({"properties": {"s": {"pattern": "^every-[1-9][0-9]*$"}}})"),
      true);
  CHECK(every.validate(Json::parse(R"({"s": "every-2"})")).empty());
  CHECK(every.validate(Json::parse(R"({"s": "every-0"})")) ==
        std::vector<std::string>{
            "/s: \"every-0\" does not match \"^every-[1-9][0-9]*$\""});
}

TEST_CASE(
    "schema: every plan the tool prints validates against "
    "oomplan.plan/1",
    "[schema]") {
  const std::vector<std::vector<std::string>> commands = {
      // README's example; the same on one card (does not fit: fixes).
      {"llama3-70b", "--gpus", "4xA100-80", "--seq", "8192"},
      {"llama3-70b", "--gpus", "1xA100-80", "--seq", "8192"},
      // Training: full with ZeRO-3, LoRA under FSDP, QLoRA with paged 8-bit
      // AdamW, offload (host bytes), pipeline stages.
      {"llama3-70b", "--gpus", "8xH100", "--mode", "full", "--seq", "4096",
       "--zero", "3"},
      {"llama3-8b", "--gpus", "2xA100-80", "--mode", "lora", "--fsdp"},
      {"llama3-8b", "--gpus", "1xRTX4090", "--mode", "qlora", "--optimizer",
       "paged-adamw-8bit"},
      {"llama3-8b", "--gpus", "1xH100", "--mode", "full", "--offload", "all",
       "--zero", "3"},
      {"llama3-8b", "--gpus", "8xH100", "--mode", "full", "--pp", "2",
       "--checkpointing", "full", "--grad-accum", "4"},
      // Serving with vLLM (starts; would not start), pipeline and layer split.
      {"llama3-70b", "--gpus", "4xL40S", "--engine", "vllm", "--max-model-len",
       "8192"},
      {"llama3-70b", "--gpus", "1xL40S", "--engine", "vllm"},
      {"llama3-70b", "--gpus", "8xH100", "--tp", "4", "--pp", "2"},
      {"llama3-70b", "--gpus", "4xA100-80", "--split", "layers"},
      // Overrides set (non-null), two nodes, MoE and MXFP4 checkpoints.
      {"llama3-70b", "--gpus", "8xH100", "--nodes", "2", "--mode", "full",
       "--zero", "3", "--price", "2.5", "--overhead-gib", "1", "--reserve",
       "0.05"},
      {"mixtral-8x7b", "--gpus", "2xA100-80", "--kv-dtype", "fp8"},
      {"gpt-oss-20b", "--gpus", "1xH100", "--engine", "vllm"},
      // A vision-language model: the multimodal profile is an object.
      {"gemma-3-27b", "--gpus", "1xH100", "--engine", "vllm"},
      {std::string(OOMPLAN_TEST_DATA) + "/hf/llama-3.2-11b-vision", "--gpus",
       "1xA100-80", "--engine", "vllm", "--vllm-version", "0.8.5"},
  };
  for (const auto& command : commands) {
    check_output("oomplan.plan/1", with_json(command));
  }
}

TEST_CASE(
    "schema: sizing, fit and the catalog lists validate against their "
    "schemas",
    "[schema]") {
  check_output("oomplan.sizing/1", {"llama3-70b", "--seq", "8192", "--json"});
  check_output("oomplan.sizing/1", {"llama3-8b", "--mode", "qlora", "--json"});
  check_output("oomplan.fit/1",
               {"fit", "llama3-8b", "--gpus", "A100-80,H100", "--max-gpus", "8",
                "--mode", "full", "--json"});
  check_output("oomplan.fit/1", {"fit", "llama3-70b", "--gpus", "L40S,H100",
                                 "--max-gpus", "8", "--price", "2", "--json"});
  // Nothing fits: an empty front is still a valid document.
  check_output("oomplan.fit/1", {"fit", "llama3-70b", "--gpus", "T4",
                                 "--max-gpus", "1", "--no-quant", "--json"});
  check_output("oomplan.models/1", {"models", "--json"});
  check_output("oomplan.gpus/1", {"gpus", "--json"});
}

// The enum lists of a schema's setup object (a key with several forms lists
// its names in the first branch of an anyOf and "every-N" by pattern).
std::vector<std::string> setup_enum(const Json& schema,
                                    const std::string& key) {
  const Json& prop = schema.at("$defs").at("setup").at("properties").at(key);
  if (prop.contains("anyOf")) {
    auto names =
        prop.at("anyOf").at(0).at("enum").get<std::vector<std::string>>();
    const auto at = std::find(names.begin(), names.end(), "full");
    names.insert(at - 1, "every-N");  // between selective and op, as the core
    return names;
  }
  return prop.at("enum").get<std::vector<std::string>>();
}

std::vector<std::string> strings(const std::vector<std::string_view>& in) {
  return {in.begin(), in.end()};
}

TEST_CASE("schema: the setup enums list exactly the core's names", "[schema]") {
  for (const std::string id :
       {"oomplan.plan/1", "oomplan.fit/1", "oomplan.check/1"}) {
    INFO(id);
    const Json schema = load_schema(id);
    CHECK(setup_enum(schema, "mode") == strings(mode_names()));
    CHECK(setup_enum(schema, "engine") == strings(engine_names()));
    CHECK(setup_enum(schema, "dtype") == strings(dtype_names()));
    CHECK(setup_enum(schema, "kv_dtype") == strings(dtype_names()));
    CHECK(setup_enum(schema, "quant") == strings(quant_names()));
    CHECK(setup_enum(schema, "offload") == strings(offload_names()));
    CHECK(setup_enum(schema, "checkpointing") ==
          strings(checkpointing_names()));
    CHECK(setup_enum(schema, "attn") == strings(attn_names()));
    CHECK(setup_enum(schema, "precision") == strings(precision_names()));
    CHECK(setup_enum(schema, "optimizer") == strings(optimizer_names()));
    CHECK(setup_enum(schema, "loss") == strings(loss_names()));
    CHECK(
        setup_enum(schema, "vllm_version") ==
        std::vector<std::string>{std::string(vllm_era_name(VllmEra::v0)),
                                 std::string(vllm_era_name(VllmEra::v1_early)),
                                 std::string(vllm_era_name(VllmEra::current))});
  }
  // DESIGN §2's peak phases.
  const Json plan = load_schema("oomplan.plan/1");
  std::vector<std::string> phases;
  for (const Phase p :
       {Phase::load, Phase::prefill, Phase::decode, Phase::forward,
        Phase::backward, Phase::optimizer_step}) {
    phases.emplace_back(phase_name(p));
  }
  CHECK(plan.at("properties")
            .at("peak")
            .at("properties")
            .at("phase")
            .at("enum") == phases);
}

TEST_CASE("schema: DESIGN's diagnosis and check documents validate",
          "[schema]") {
  // DESIGN §2's examples with their placeholders filled in.
  const Json diagnosis = Json::parse(R"({
    "schema": "oomplan.diagnosis/1",
    "messages": [ { "line": 1412, "format": "pytorch2", "device": "cuda",
                    "gpu_index": 0, "requested_bytes": 2104533975,
                    "capacity_bytes": 84987740160, "free_bytes": 1095216660,
                    "process_bytes": 83879067648,
                    "allocated_bytes": 79671732224,
                    "reserved_unallocated_bytes": 2254857830,
                    "other_processes_bytes": null,
                    "text": "torch.OutOfMemoryError: CUDA out of memory." } ],
    "count": 1,
    "cause": "fragmentation",
    "evidence": [ "2.1 GiB reserved but unallocated ≥ the 1.96 GiB request" ],
    "fixes": [ { "rank": 1, "id": "expandable-segments",
                 "title": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                 "args": null, "cost": "free" } ]
  })");
  check_document("oomplan.diagnosis/1", diagnosis);

  // The check example, its setup and first fix taken from a real plan.
  const auto plan = run_cli({"llama3-70b", "--gpus", "2xRTX4090", "--mode",
                             "qlora", "--seq", "2048", "--json"});
  const Json p = Json::parse(plan.out);
  REQUIRE(!p.at("fixes").empty());
  Json entry = {{"file", "train/qlora.yaml"},
                {"reader", "axolotl"},
                {"model", p.at("model")},
                {"gpu", p.at("gpu")},
                {"setup", p.at("setup")},
                {"total_bytes", p.at("total_bytes")},
                {"usable_bytes", p.at("usable_bytes")},
                {"headroom_bytes", p.at("headroom_bytes")},
                {"fits", p.at("fits")},
                {"unused_keys", {"lora_dropout", "learning_rate"}},
                {"unknown_keys", Json::array()},
                {"first_fix", p.at("fixes").at(0)}};
  check_document(
      "oomplan.check/1",
      {{"schema", "oomplan.check/1"}, {"fits", false}, {"plans", {entry}}});
  entry["first_fix"] = nullptr;
  check_document(
      "oomplan.check/1",
      {{"schema", "oomplan.check/1"}, {"fits", true}, {"plans", {entry}}});
}

// A file under the build tree's temp folder holding `text`.
std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path path = fs::path(OOMPLAN_TEST_OUTPUT) / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TEST_CASE("schema: oomplan diagnose and check output validate", "[schema]") {
  // PyTorch 2.x's message (c10/cuda/CUDACachingAllocator.cpp), one line.
  const std::string log = temp_file(
      "oomplan_schema_oom.log",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 "
      "GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is "
      "free. Including non-PyTorch memory, this process has 78.12 GiB memory "
      "in use. Of the allocated memory 74.20 GiB is allocated by PyTorch, "
      "and 2.10 GiB is reserved by PyTorch but unallocated.\n");
  const auto diagnose = run_cli({"diagnose", log, "--json"});
  INFO(diagnose.err);
  REQUIRE(!diagnose.out.empty());
  check_document("oomplan.diagnosis/1", Json::parse(diagnose.out));
  // A DeepSpeed config (ZeRO-3) planned for a model and GPUs given on the
  // command line.
  const std::string config = temp_file(
      "oomplan_schema_ds.json",
      R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
          "zero_optimization": {"stage": 3}})");
  const auto check = run_cli(
      {"check", config, "--model", "llama3-8b", "--gpus", "8xH100", "--json"});
  INFO(check.err);
  REQUIRE(!check.out.empty());
  check_document("oomplan.check/1", Json::parse(check.out));
  std::remove(log.c_str());
  std::remove(config.c_str());
}

TEST_CASE("schema: the setup and fix definitions are one across schemas",
          "[schema]") {
  // fit and check print the same setup and fix objects as plan.
  const Json plan = load_schema("oomplan.plan/1");
  for (const char* id : {"oomplan.fit/1", "oomplan.check/1"}) {
    INFO(id);
    const Json other = load_schema(id);
    CHECK(other.at("$defs").at("setup") == plan.at("$defs").at("setup"));
    if (other.at("$defs").contains("fix")) {
      CHECK(other.at("$defs").at("fix") == plan.at("$defs").at("fix"));
    }
  }
}

// Collects, under `path`, every declared property whose name ends in _bytes.
void byte_fields(const Json& node, const std::string& path,
                 std::vector<std::pair<std::string, Json>>& out) {
  if (node.is_array()) {
    for (const Json& item : node) {
      byte_fields(item, path, out);
    }
    return;
  }
  if (!node.is_object()) {
    return;
  }
  for (const auto& [key, value] : node.items()) {
    if (key == "properties" && value.is_object()) {
      for (const auto& [name, field] : value.items()) {
        if (name.size() > 6 && name.substr(name.size() - 6) == "_bytes") {
          out.emplace_back(path + "." + name, field);
        }
      }
    }
    byte_fields(value, path + "." + key, out);
  }
}

// A field's lowest allowed number: its `minimum`, or with anyOf the lowest of
// its numeric branches; -1 when a number is not bounded below.
int lowest(const Json& field) {
  if (field.contains("anyOf")) {
    int low = 0;
    for (const Json& branch : field.at("anyOf")) {
      if (branch.value("type", "") != "null") {
        low = std::min(low, lowest(branch));
      }
    }
    return low;
  }
  return field.value("minimum", -1);
}

TEST_CASE("schema: every byte count is non-negative but the two differences",
          "[schema]") {
  // A size can't be below 0. Only a headroom (usable - total, negative when
  // over) and a fix's saves_bytes (plan total - fix total, negative when the
  // fix moves to fewer, larger cards) are differences; fuzz_cli exempts the
  // same two.
  std::size_t sizes = 0;
  for (const std::string& id : k_ids) {
    std::vector<std::pair<std::string, Json>> fields;
    byte_fields(load_schema(id), id, fields);
    for (const auto& [path, field] : fields) {
      INFO(path);
      const bool difference =
          path.ends_with(".headroom_bytes") || path.ends_with(".saves_bytes");
      if (difference) {
        CHECK(lowest(field) == -1);
      } else {
        ++sizes;
        CHECK(lowest(field) == 0);
      }
    }
  }
  CHECK(sizes > 20);  // the walk found the plan's components and budgets
}

}  // namespace
}  // namespace oomplan
