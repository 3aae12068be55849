// YAML as the frameworks' loader (PyYAML's SafeLoader) reads it.

#include "launch/internal.hpp"

#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace {

using oomplan::launch::parse_yaml_text;

}  // namespace

TEST_CASE("launch yaml: << merges as PyYAML's flatten_mapping does",
          "[launch]") {
  // yaml.safe_load of this text (PyYAML 6.0) gives
  // {'a': {'x': 1, 'y': 2}, 'b': {'x': 1, 'y': 3, 'z': 4}}: the merged
  // keys, then the mapping's own, which win.
  const auto one = parse_yaml_text(
      "a: &a {x: 1, y: 2}\n"
      "b:\n  <<: *a\n  y: 3\n  z: 4\n",
      "one.yaml");
  CHECK(one["b"].dump() == R"({"x":1,"y":3,"z":4})");
  // A list of mappings: the first one wins a key they share
  // ({'c': {'x': 1, 'y': 2, 'w': 5}} from PyYAML).
  const auto list = parse_yaml_text(
      "a: &a {x: 1, y: 2}\n"
      "b: &b {x: 9, w: 5}\n"
      "c:\n  <<: [*a, *b]\n",
      "list.yaml");
  CHECK(list["c"]["x"] == 1);
  CHECK(list["c"]["y"] == 2);
  CHECK(list["c"]["w"] == 5);
  CHECK_FALSE(list["c"].contains("<<"));
  // Merges nest: a merged mapping's own << is applied first.
  const auto nested = parse_yaml_text(
      "a: &a {x: 1}\n"
      "b: &b {<<: *a, y: 2}\n"
      "c: {<<: *b}\n",
      "nested.yaml");
  CHECK(nested["c"].dump() == R"({"x":1,"y":2})");
  // A quoted '<<' is a plain key for PyYAML's resolver.
  const auto quoted = parse_yaml_text("'<<': 1\n", "quoted.yaml");
  CHECK(quoted["<<"] == 1);
  // PyYAML: "expected a mapping or list of mappings for merging".
  CHECK_THROWS_WITH(parse_yaml_text("a: {<<: 3}\n", "bad.yaml"),
                    Catch::Contains("`<<` merges a mapping or a list of "
                                    "mappings"));
  CHECK_THROWS_AS(parse_yaml_text("a: {<<: [1, 2]}\n", "bad.yaml"),
                  oomplan::Error);
}

TEST_CASE("launch: repeated keys keep the last value and are reported",
          "[launch]") {
  // Python's json.load and PyYAML keep the last value of a repeated key
  // ({"a": 2} for '{"a": 1, "a": 2}').
  std::vector<std::string> repeated;
  const auto json = oomplan::launch::parse_json_text(
      R"({"a": 1, "z": {"s": 3, "s": 2}, "a": 2, "l": [{"k": 1, "k": 1}]})",
      "dup.json", &repeated);
  CHECK(json["a"] == 2);
  CHECK(json["z"]["s"] == 2);
  CHECK(repeated == std::vector<std::string>{"z.s", "a", "l.k"});
  std::vector<std::string> yaml_repeated;
  const auto yaml = parse_yaml_text("a: 1\nb:\n  c: 1\n  c: 5\na: 3\n",
                                    "dup.yaml", &yaml_repeated);
  CHECK(yaml["a"] == 3);
  CHECK(yaml["b"]["c"] == 5);
  CHECK(yaml_repeated == std::vector<std::string>{"b.c", "a"});
  // DeepSpeed's loader refuses them.
  CHECK_THROWS_WITH(
      oomplan::launch::refuse_repeated_keys(repeated, "ds.json"),
      Catch::Contains("ds.json: key \"z.s\" appears twice in one object; "
                      "DeepSpeed refuses such a file"));
}
