#pragma once

// A JSON Schema (draft 2020-12) validator for the subset src/schema/ uses:
// type, properties, required, additionalProperties, items, enum, const,
// minimum, maximum, $ref to "#/$defs/NAME", anyOf and oneOf, plus the
// annotations $schema, $id, $defs, title and description. Any other keyword
// is reported by lint(), so a schema cannot lean on a rule this validator
// would silently skip.
//
// `closed`: the published schemas leave objects open (DESIGN §2: fields may
// be added, and consumers must accept them), but the test suite wants every
// key the tool prints documented, so in closed mode a key that `properties`
// does not declare is an error unless additionalProperties says otherwise.

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan::test {

class SchemaValidator {
 public:
  using Json = nlohmann::json;

  SchemaValidator(Json schema, bool closed)
      : m_root(std::move(schema)), m_closed(closed) {}

  // Keywords outside the subset, and $refs that do not resolve, as
  // "/json/pointer: problem".
  std::vector<std::string> lint() const {
    std::vector<std::string> problems;
    lint_node(m_root, "", problems);
    return problems;
  }

  // Every violation, as "/pointer/in/doc: what".
  std::vector<std::string> validate(const Json& doc) const {
    std::vector<std::string> errors;
    check(m_root, doc, "", errors);
    return errors;
  }

 private:
  static bool is_type(const Json& value, std::string_view type) {
    if (type == "object") {
      return value.is_object();
    }
    if (type == "array") {
      return value.is_array();
    }
    if (type == "string") {
      return value.is_string();
    }
    if (type == "boolean") {
      return value.is_boolean();
    }
    if (type == "null") {
      return value.is_null();
    }
    if (type == "number") {
      return value.is_number();
    }
    if (type == "integer") {
      // JSON Schema: a number with no fractional part (1.0 is an integer).
      if (value.is_number_integer()) {
        return true;
      }
      if (value.is_number_float()) {
        const double v = value.get<double>();
        return std::isfinite(v) && std::floor(v) == v;
      }
      return false;
    }
    return false;
  }

  const Json* resolve(const std::string& ref) const {
    constexpr std::string_view k_prefix = "#/$defs/";
    if (ref.rfind(k_prefix, 0) != 0) {
      return nullptr;
    }
    const std::string name = ref.substr(k_prefix.size());
    const auto defs = m_root.find("$defs");
    if (defs == m_root.end() || !defs->contains(name)) {
      return nullptr;
    }
    return &(*defs)[name];
  }

  void lint_node(const Json& node, const std::string& at,
                 std::vector<std::string>& problems) const {
    if (node.is_boolean()) {
      return;  // true / false are schemas too
    }
    if (!node.is_object()) {
      problems.push_back(at + ": a schema must be an object or a boolean");
      return;
    }
    static const std::vector<std::string> k_known = {
        "$schema",    "$id",         "$defs",
        "title",      "description", "type",
        "properties", "required",    "additionalProperties",
        "items",      "enum",        "const",
        "minimum",    "maximum",     "$ref",
        "anyOf",      "oneOf",       "pattern"};
    for (const auto& [key, value] : node.items()) {
      if (std::find(k_known.begin(), k_known.end(), key) == k_known.end()) {
        problems.push_back(at + ": unsupported keyword '" + key + "'");
        continue;
      }
      if (key == "properties" || key == "$defs") {
        for (const auto& [name, sub] : value.items()) {
          lint_node(sub, at + "/" + key + "/" + name, problems);
        }
      } else if (key == "items" || key == "additionalProperties") {
        lint_node(value, at + "/" + key, problems);
      } else if (key == "anyOf" || key == "oneOf") {
        for (std::size_t i = 0; i < value.size(); ++i) {
          lint_node(value[i], at + "/" + key + "/" + std::to_string(i),
                    problems);
        }
      } else if (key == "$ref" &&
                 (!value.is_string() ||
                  resolve(value.get<std::string>()) == nullptr)) {
        problems.push_back(at + ": $ref " + value.dump() + " does not resolve");
      }
    }
  }

  void check(const Json& schema, const Json& value, const std::string& at,
             std::vector<std::string>& errors) const {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) {
        errors.push_back(at + ": no value is allowed here");
      }
      return;
    }
    if (const auto ref = schema.find("$ref"); ref != schema.end()) {
      const Json* target = resolve(ref->get<std::string>());
      if (target == nullptr) {
        errors.push_back(at + ": unresolved $ref " + ref->dump());
        return;
      }
      check(*target, value, at, errors);
    }
    if (const auto type = schema.find("type"); type != schema.end()) {
      bool ok = false;
      if (type->is_array()) {
        for (const Json& t : *type) {
          ok = ok || is_type(value, t.get<std::string>());
        }
      } else {
        ok = is_type(value, type->get<std::string>());
      }
      if (!ok) {
        errors.push_back(at + ": " + value.dump() + " is not of type " +
                         type->dump());
        return;
      }
    }
    if (const auto c = schema.find("const"); c != schema.end() && *c != value) {
      errors.push_back(at + ": " + value.dump() + " is not " + c->dump());
    }
    if (const auto e = schema.find("enum"); e != schema.end()) {
      if (std::find(e->begin(), e->end(), value) == e->end()) {
        errors.push_back(at + ": " + value.dump() + " is not one of " +
                         e->dump());
      }
    }
    if (const auto p = schema.find("pattern");
        p != schema.end() && value.is_string() &&
        !std::regex_search(value.get<std::string>(),
                           std::regex(p->get<std::string>()))) {
      errors.push_back(at + ": " + value.dump() + " does not match " +
                       p->dump());
    }
    if (value.is_number()) {
      const double v = value.get<double>();
      if (const auto m = schema.find("minimum");
          m != schema.end() && v < m->get<double>()) {
        errors.push_back(at + ": " + value.dump() + " is below the minimum " +
                         m->dump());
      }
      if (const auto m = schema.find("maximum");
          m != schema.end() && v > m->get<double>()) {
        errors.push_back(at + ": " + value.dump() + " is above the maximum " +
                         m->dump());
      }
    }
    for (const char* combinator : {"anyOf", "oneOf"}) {
      const auto branches = schema.find(combinator);
      if (branches == schema.end()) {
        continue;
      }
      int matched = 0;
      std::vector<std::string> branch_errors;
      for (const Json& branch : *branches) {
        std::vector<std::string> errs;
        check(branch, value, at, errs);
        if (errs.empty()) {
          ++matched;
        } else {
          branch_errors.insert(branch_errors.end(), errs.begin(), errs.end());
        }
      }
      const bool one = std::string_view(combinator) == "oneOf";
      if (matched == 0 || (one && matched > 1)) {
        std::string why = at + ": " + value.dump().substr(0, 80) +
                          (matched == 0 ? " matches no branch of "
                                        : " matches several branches of ") +
                          combinator;
        for (const std::string& e : branch_errors) {
          why += " [" + e + "]";
        }
        errors.push_back(why);
      }
    }
    if (value.is_object()) {
      check_object(schema, value, at, errors);
    }
    if (value.is_array()) {
      if (const auto items = schema.find("items"); items != schema.end()) {
        for (std::size_t i = 0; i < value.size(); ++i) {
          check(*items, value[i], at + "/" + std::to_string(i), errors);
        }
      }
    }
  }

  void check_object(const Json& schema, const Json& value,
                    const std::string& at,
                    std::vector<std::string>& errors) const {
    const auto props = schema.find("properties");
    if (const auto req = schema.find("required"); req != schema.end()) {
      for (const Json& key : *req) {
        if (!value.contains(key.get<std::string>())) {
          errors.push_back(at + ": missing required key " + key.dump());
        }
      }
    }
    const auto extra = schema.find("additionalProperties");
    for (const auto& [key, sub] : value.items()) {
      const std::string where = at + "/" + key;
      if (props != schema.end() && props->contains(key)) {
        check((*props)[key], sub, where, errors);
      } else if (extra != schema.end()) {
        check(*extra, sub, where, errors);
      } else if (m_closed && props != schema.end()) {
        errors.push_back(where + ": key not documented in the schema");
      }
    }
  }

  Json m_root;
  bool m_closed = false;
};

}  // namespace oomplan::test
