// Bounded parsing of untrusted launch configs into one tree type, and the key
// bookkeeping every reader shares (launch_internal.hpp).
//
// Invariants: no yaml-cpp, nlohmann or std exception leaves this file (each is
// turned into Error "<origin>: ..."); no document deeper than k_max_depth or
// with more than k_max_values values (after YAML aliases) is built; recursion
// here is bounded by k_max_depth.

#include "launch/internal.hpp"
#include "util/json_errors.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_set>
#include <vector>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace oomplan::launch {
namespace {

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    if (c < 0x80) {
      extra = 0;
    } else if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
      extra = 1;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
    } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
      extra = 3;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= extra; ++k) {
      if (i + k >= text.size() ||
          (static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) {
        return false;
      }
    }
    i += extra + 1;
  }
  return true;
}

// An upper bound of the nesting depth of a YAML or JSON document, from its
// text alone, so that deep documents are refused before yaml-cpp's recursive
// parser sees them: flow brackets outside quotes and comments, plus block
// indentation levels and "- " sequence entries on each line.
int nesting_bound(std::string_view text) {
  int brackets = 0;
  int deepest = 0;
  std::vector<std::size_t> indents;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view line = text.substr(pos, end - pos);
    std::size_t indent = line.find_first_not_of(' ');
    if (indent != std::string_view::npos && line[indent] != '#') {
      while (!indents.empty() && indents.back() >= indent) {
        indents.pop_back();
      }
      indents.push_back(indent);
      int level = static_cast<int>(indents.size());
      std::size_t k = indent;
      while (k + 1 < line.size() && (line[k] == '-' || line[k] == '?') &&
             line[k + 1] == ' ') {
        ++level;
        k = line.find_first_not_of(' ', k + 1);
        if (k == std::string_view::npos) {
          break;
        }
      }
      deepest = std::max(deepest, level + brackets);
      char quote = 0;
      for (std::size_t i = indent; i < line.size(); ++i) {
        const char c = line[i];
        if (quote != 0) {
          if (c == '\\' && quote == '"') {
            ++i;
          } else if (c == quote) {
            quote = 0;
          }
          continue;
        }
        if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '#' && (i == 0 || line[i - 1] == ' ')) {
          break;
        } else if (c == '[' || c == '{') {
          ++brackets;
          deepest = std::max(deepest, level + brackets);
        } else if ((c == ']' || c == '}') && brackets > 0) {
          --brackets;
        }
      }
    }
    if (end == text.size()) {
      break;
    }
    pos = end + 1;
  }
  return deepest;
}

void check_depth(std::string_view text, const std::string& origin) {
  if (nesting_bound(text) > k_max_depth) {
    throw Error(fmt::format(
        "{}: nests mappings and lists deeper than {} levels; a launch config "
        "is a few levels deep",
        origin, k_max_depth));
  }
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> l) {
  return std::find(l.begin(), l.end(), s) != l.end();
}

// PyYAML's YAML 1.1 resolver (yaml/resolver.py), which transformers, axolotl,
// LLaMA-Factory and accelerate load configs with; OmegaConf (torchtune) also
// reads 1e-5 as a float, so exponents without a dot count as floats here.
Json resolve_plain(const std::string& s) {
  if (s.empty() || is_one_of(s, {"~", "null", "Null", "NULL"})) {
    return nullptr;
  }
  if (is_one_of(
          s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})) {
    return true;
  }
  if (is_one_of(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off",
                    "OFF"})) {
    return false;
  }
  std::string digits;
  digits.reserve(s.size());
  for (const char c : s) {
    if (c != '_') {
      digits += c;
    }
  }
  if (!digits.empty() &&
      digits.find_first_not_of("+-0123456789") == std::string::npos) {
    const std::size_t start = (digits[0] == '+' || digits[0] == '-') ? 1 : 0;
    if (start < digits.size() &&
        digits.find_first_of("+-", start) == std::string::npos) {
      std::int64_t v = 0;
      const char* first = digits.data() + (digits[0] == '+' ? 1 : 0);
      const auto [ptr, ec] =
          std::from_chars(first, digits.data() + digits.size(), v);
      if (ec == std::errc() && ptr == digits.data() + digits.size()) {
        return v;
      }
    }
  }
  if (const auto d = parse_double(digits);
      d && digits.find_first_of(".eE") != std::string::npos &&
      digits.find_first_of("0123456789") != std::string::npos) {
    return *d;
  }
  return s;
}

class YamlConverter {
 public:
  YamlConverter(const std::string& origin, std::vector<std::string>* repeated)
      : m_origin(origin), m_repeated(repeated) {}

  Json convert(const YAML::Node& node, int depth, const std::string& path) {
    if (++m_values > k_max_values) {
      throw Error(fmt::format(
          "{}: holds more than {} values (YAML aliases expand to that many); "
          "a launch config holds a few hundred",
          m_origin, k_max_values));
    }
    if (depth > k_max_depth) {
      throw Error(fmt::format("{}: nests deeper than {} levels", m_origin,
                              k_max_depth));
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nullptr;
      case YAML::NodeType::Scalar:
        return scalar(node);
      case YAML::NodeType::Sequence: {
        Json out = Json::array();
        for (const auto& item : node) {
          out.push_back(convert(item, depth + 1, path));
        }
        return out;
      }
      case YAML::NodeType::Map:
        return mapping(node, depth, path);
    }
    return nullptr;
  }

 private:
  void note_repeated(const std::string& path) {
    if (m_repeated != nullptr && m_repeated->size() < k_max_repeated_keys) {
      m_repeated->push_back(path);
    }
  }

  // PyYAML's SafeConstructor (yaml/constructor.py construct_mapping after
  // flatten_mapping): the keys a `<<` merge brings come first, the
  // mapping's own keys after them and win; a repeated key keeps its last
  // value. Only a plain `<<` merges (a quoted '<<' is a key, as in PyYAML's
  // resolver).
  Json mapping(const YAML::Node& node, int depth, const std::string& path) {
    Json merged = Json::object();
    Json own = Json::object();
    for (const auto& item : node) {
      const YAML::Node& key = item.first;
      if (!key.IsScalar()) {
        throw Error(
            fmt::format("{}: line {}: a mapping key is not a plain name; use "
                        "`name: value`",
                        m_origin, key.Mark().line + 1));
      }
      if (key.Scalar() == "<<" &&
          (key.Tag() == "?" || key.Tag() == "tag:yaml.org,2002:merge")) {
        merge(merged, item.second, depth, path);
        continue;
      }
      count_text(key.Scalar().size());
      const std::string child = join_path(path, key.Scalar());
      if (own.contains(key.Scalar())) {
        note_repeated(child);
      }
      own[key.Scalar()] = convert(item.second, depth + 1, child);
    }
    // Own keys overwrite the merged ones. Assigned one by one: update()
    // leaves JSON_DIAGNOSTICS' parent links stale (nlohmann 3.11.2).
    for (auto it = own.begin(); it != own.end(); ++it) {
      merged[it.key()] = *it;
    }
    return merged;
  }

  // flatten_mapping: `<<: *a` merges one mapping; `<<: [*a, *b]` several,
  // the first of them winning a key they share.
  void merge(Json& into, const YAML::Node& value, int depth,
             const std::string& path) {
    std::vector<YAML::Node> sources;
    if (value.IsMap()) {
      sources.push_back(value);
    } else if (value.IsSequence()) {
      for (std::size_t i = value.size(); i-- > 0;) {
        sources.push_back(value[i]);
      }
    }
    if (sources.empty() ||
        std::any_of(sources.begin(), sources.end(),
                    [](const YAML::Node& n) { return !n.IsMap(); })) {
      throw Error(fmt::format(
          "{}: line {}: `<<` merges a mapping or a list of mappings, as "
          "PyYAML does; give `<<: *anchor` or `<<: [*a, *b]`",
          m_origin, value.Mark().line + 1));
    }
    for (const YAML::Node& source : sources) {
      const Json part = convert(source, depth + 1, path);
      for (auto it = part.begin(); it != part.end(); ++it) {
        into[it.key()] = *it;
      }
    }
  }

  // Aliases copy their text at every use: bound the text built, too.
  void count_text(std::size_t n) {
    m_text += n;
    if (m_text > k_max_launch_file_bytes * 8) {
      throw Error(fmt::format(
          "{}: expands to more than {} MiB of text (YAML aliases repeat their "
          "values); a launch config is a few KiB",
          m_origin, k_max_launch_file_bytes * 8 >> 20));
    }
  }

  Json scalar(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    const std::string& s = node.Scalar();
    count_text(s.size());
    if (tag == "!" || tag == "tag:yaml.org,2002:str" || tag == "!!str") {
      return s;
    }
    if (tag.empty() || tag == "?" || tag == "tag:yaml.org,2002:int" ||
        tag == "tag:yaml.org,2002:float" || tag == "tag:yaml.org,2002:bool" ||
        tag == "tag:yaml.org,2002:null" || tag == "!!int" || tag == "!!float" ||
        tag == "!!bool" || tag == "!!null") {
      return resolve_plain(s);
    }
    throw Error(fmt::format(
        "{}: line {}: YAML tag {} is not supported; launch configs hold plain "
        "values",
        m_origin, node.Mark().line + 1, echo(tag)));
  }

  const std::string& m_origin;
  std::vector<std::string>* m_repeated = nullptr;
  long m_values = 0;
  std::size_t m_text = 0;
};

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    if (dot == std::string_view::npos) {
      parts.push_back(path.substr(start));
      break;
    }
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  return parts;
}

// Listens to yaml-cpp's parser and keeps nothing: counting documents.
class IgnoreEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// yaml-cpp 0.7's LoadAll never ends on some texts: on a stray "," outside a
// flow collection each pass yields an empty document without consuming the
// token (fuzz_launch: RSS past 2 GiB from a 1-byte file). The documents are
// counted with the parser first, up to k_max_yaml_documents.
void check_documents(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  IgnoreEvents ignore;
  int documents = 0;
  while (parser.HandleNextDocument(ignore)) {
    if (++documents > k_max_yaml_documents) {
      throw Error(fmt::format(
          "{}: is not valid YAML: the parser finds more than {} documents "
          "(a stray ',' outside a list?); a launch config is one "
          "document",
          origin, k_max_yaml_documents));
    }
  }
}

}  // namespace

void check_text(std::string_view text, const std::string& origin) {
  if (text.size() > k_max_launch_file_bytes) {
    throw Error(fmt::format(
        "{}: is {} bytes; a launch config is at most {} bytes (1 MiB)", origin,
        text.size(), k_max_launch_file_bytes));
  }
  if (text.find('\0') != std::string_view::npos || !valid_utf8(text)) {
    throw Error(fmt::format(
        "{}: is binary data, not a text launch config (JSON, YAML or a "
        "command line)",
        origin));
  }
}

Json parse_json_text(std::string_view text, const std::string& origin,
                     std::vector<std::string>* repeated) {
  check_depth(text, origin);
  // Each open object's path and keys, to find the keys it repeats; the value
  // kept is the last, as Python's json.load keeps it.
  struct Frame {
    std::string path;
    bool object = false;
    std::unordered_set<std::string> keys;
    std::string last_key;
  };
  std::vector<Frame> open;
  const auto child_path = [&] {
    if (open.empty()) {
      return std::string();
    }
    const Frame& f = open.back();
    return f.object ? join_path(f.path, f.last_key) : f.path;
  };
  const Json::parser_callback_t track =
      [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
        using Event = Json::parse_event_t;
        if (event == Event::object_start || event == Event::array_start) {
          open.push_back({child_path(), event == Event::object_start, {}, {}});
        } else if ((event == Event::object_end || event == Event::array_end) &&
                   !open.empty()) {
          open.pop_back();
        } else if (event == Event::key && !open.empty() && parsed.is_string()) {
          Frame& f = open.back();
          f.last_key = parsed.get<std::string>();
          if (!f.keys.insert(f.last_key).second && repeated != nullptr &&
              repeated->size() < k_max_repeated_keys) {
            repeated->push_back(join_path(f.path, f.last_key));
          }
        }
        return true;
      };
  try {
    return Json::parse(text.begin(), text.end(), track);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: is not valid JSON: {}", origin,
                            strip_json_prefix(e.what())));
  }
}

void refuse_repeated_keys(const std::vector<std::string>& repeated,
                          std::string_view origin) {
  if (!repeated.empty()) {
    throw Error(fmt::format(
        "{}: key {} appears twice in one object; DeepSpeed refuses such a "
        "file (runtime/config.py dict_raise_error_on_duplicate_keys): keep "
        "one",
        origin, echo(repeated.front())));
  }
}

Json parse_yaml_text(std::string_view text, const std::string& origin,
                     std::vector<std::string>* repeated) {
  check_depth(text, origin);
  std::vector<YAML::Node> docs;
  try {
    const std::string copy(text);
    check_documents(copy, origin);
    docs = YAML::LoadAll(copy);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: line {}: is not valid YAML: {}", origin,
                            e.mark.line + 1, e.msg));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: is not valid YAML: {}", origin, e.what()));
  }
  std::size_t real = 0;
  const YAML::Node* first = nullptr;
  for (const auto& doc : docs) {
    if (!doc.IsNull()) {
      ++real;
      if (first == nullptr) {
        first = &doc;
      }
    }
  }
  if (real > 1) {
    throw Error(fmt::format(
        "{}: holds {} YAML documents; give one launch config per file", origin,
        real));
  }
  if (first == nullptr) {
    return nullptr;
  }
  try {
    YamlConverter converter(origin, repeated);
    return converter.convert(*first, 0, "");
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: line {}: is not valid YAML: {}", origin,
                            e.mark.line + 1, e.msg));
  }
}

std::string echo(std::string_view text) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (const char c : text) {
    if (shown == k_max_echo) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
    ++shown;
  }
  return out + "\"";
}

std::string echo_json(const Json& value) {
  if (value.is_string()) {
    return echo(value.get_ref<const std::string&>());
  }
  if (value.is_object()) {
    return "a mapping";
  }
  if (value.is_array()) {
    return "a list";
  }
  if (value.is_number() || value.is_boolean() || value.is_null()) {
    return json_text(value);
  }
  return echo(json_text(value));
}

std::string join_path(std::string_view base, std::string_view key) {
  return base.empty() ? std::string(key) : fmt::format("{}.{}", base, key);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return out;
}

std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t lo,
                                      std::int64_t hi) {
  if (!text.empty() && text[0] == '+') {
    text.remove_prefix(1);
  }
  std::int64_t v = 0;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      v < lo || v > hi) {
    return std::nullopt;
  }
  return v;
}

std::optional<double> parse_double(std::string_view text) {
  if (!text.empty() && text[0] == '+') {
    text.remove_prefix(1);
  }
  double v = 0;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

std::string number_text(double value) {
  if (std::floor(value) == value && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  return fmt::format("{}", value);
}

// ---- KeyReader ----

KeyReader::KeyReader(const Json& doc, std::string origin)
    : m_doc(doc), m_origin(std::move(origin)) {}

const Json* KeyReader::peek(std::string_view path) const {
  const Json* node = &m_doc;
  for (const auto part : split_path(path)) {
    if (!node->is_object()) {
      return nullptr;
    }
    const auto it = node->find(part);
    if (it == node->end()) {
      return nullptr;
    }
    node = &*it;
  }
  return node->is_null() ? nullptr : node;
}

void KeyReader::mark(std::string_view path, Mark how) {
  const Json* node = &m_doc;
  for (const auto part : split_path(path)) {
    if (!node->is_object() || !node->contains(part)) {
      return;  // absent: nothing to report
    }
    node = &node->find(part).value();
  }
  const auto it = m_marks.find(path);
  if (it == m_marks.end()) {
    m_marks.emplace(std::string(path), how);
  } else if (how == Mark::read) {
    it->second = Mark::read;
  }
}

const Json* KeyReader::read(std::string_view path) {
  mark(path, Mark::read);
  return peek(path);
}

void KeyReader::unused(std::string_view path) {
  mark(path, Mark::unused);
}

void KeyReader::unused(std::initializer_list<std::string_view> paths) {
  for (const auto p : paths) {
    unused(p);
  }
}

void KeyReader::unused_children(std::string_view path) {
  const Json* node = peek(path);
  if (node == nullptr || !node->is_object()) {
    unused(path);
    return;
  }
  for (const auto& item : node->items()) {
    const std::string child = fmt::format("{}.{}", path, item.key());
    if (m_marks.find(child) == m_marks.end()) {
      m_marks.emplace(child, Mark::unused);
    }
  }
}

void KeyReader::fail(std::string_view path, std::string_view problem) const {
  throw Error(fmt::format("{}: {}: {}", m_origin, path, problem));
}

std::optional<bool> KeyReader::boolean(std::string_view path) {
  const Json* v = read(path);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->is_boolean()) {
    return v->get<bool>();
  }
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    if (is_one_of(s, {"true", "True", "TRUE", "yes", "Yes", "1"})) {
      return true;
    }
    if (is_one_of(s, {"false", "False", "FALSE", "no", "No", "0"})) {
      return false;
    }
  }
  if (v->is_number_integer() &&
      (v->get<std::int64_t>() == 0 || v->get<std::int64_t>() == 1)) {
    return v->get<std::int64_t>() == 1;
  }
  fail(path, fmt::format("expected true or false, got {}", echo_json(*v)));
}

std::optional<std::int64_t> KeyReader::integer(std::string_view path,
                                               std::int64_t lo,
                                               std::int64_t hi) {
  const Json* v = read(path);
  if (v == nullptr) {
    return std::nullopt;
  }
  std::optional<std::int64_t> out;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(hi)) {
        out = static_cast<std::int64_t>(u);
      }
    } else {
      out = v->get<std::int64_t>();
    }
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::floor(d) == d && d >= static_cast<double>(lo) &&
        d <= static_cast<double>(hi)) {
      out = static_cast<std::int64_t>(d);
    }
  } else if (v->is_string()) {
    out = parse_int(v->get_ref<const std::string&>(), lo, hi);
  }
  if (!out || *out < lo || *out > hi) {
    fail(path, fmt::format("expected a whole number from {} to {}, got {}", lo,
                           hi, echo_json(*v)));
  }
  return out;
}

std::optional<double> KeyReader::number(std::string_view path, double lo,
                                        double hi) {
  const Json* v = read(path);
  if (v == nullptr) {
    return std::nullopt;
  }
  std::optional<double> out;
  if (v->is_number()) {
    out = v->get<double>();
  } else if (v->is_string()) {
    out = parse_double(v->get_ref<const std::string&>());
  }
  if (!out || !(*out >= lo && *out <= hi)) {
    fail(path, fmt::format("expected a number from {} to {}, got {}",
                           number_text(lo), number_text(hi), echo_json(*v)));
  }
  return out;
}

std::optional<std::string> KeyReader::string(std::string_view path) {
  const Json* v = read(path);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->is_string()) {
    return v->get<std::string>();
  }
  if (v->is_number() || v->is_boolean()) {
    return v->dump();
  }
  fail(path, fmt::format("expected a text value, got {}", echo_json(*v)));
}

std::optional<std::vector<std::string>> KeyReader::strings(
    std::string_view path) {
  const Json* v = read(path);
  if (v == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  if (v->is_string()) {
    std::string word;
    for (const char c : v->get_ref<const std::string&>()) {
      if (c == ',' || c == ' ') {
        if (!word.empty()) {
          out.push_back(word);
        }
        word.clear();
      } else {
        word += c;
      }
    }
    if (!word.empty()) {
      out.push_back(word);
    }
    return out;
  }
  if (v->is_array()) {
    for (const auto& item : *v) {
      if (!item.is_string()) {
        fail(path, fmt::format("expected a list of names, got {} in it",
                               echo_json(item)));
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  fail(path, fmt::format("expected a name or a list of names, got {}",
                         echo_json(*v)));
}

bool KeyReader::is_auto(std::string_view path) const {
  const Json* v = peek(path);
  return v != nullptr && v->is_string() &&
         v->get_ref<const std::string&>() == "auto";
}

bool KeyReader::marked_below(const std::string& path) const {
  const std::string prefix = path + ".";
  const auto it = m_marks.lower_bound(prefix);
  return it != m_marks.end() && it->first.rfind(prefix, 0) == 0;
}

void KeyReader::walk(const Json& node, const std::string& path,
                     LaunchPlan& plan, std::string_view prefix) const {
  for (const auto& item : node.items()) {
    const std::string p =
        path.empty() ? item.key() : fmt::format("{}.{}", path, item.key());
    const auto it = m_marks.find(p);
    if (it != m_marks.end()) {
      if (it->second == Mark::unused) {
        plan.unused_keys.push_back(fmt::format("{}{}", prefix, p));
      }
      continue;
    }
    if (item.value().is_object() && marked_below(p)) {
      walk(item.value(), p, plan, prefix);
      continue;
    }
    plan.unknown_keys.push_back(fmt::format("{}{}", prefix, p));
  }
}

void KeyReader::finish(LaunchPlan& plan, std::string_view prefix) const {
  if (m_doc.is_object()) {
    walk(m_doc, "", plan, prefix);
  }
}

// ---- plan options ----

void set_option(LaunchPlan& plan, std::string flag, std::string value,
                std::string key) {
  for (auto& o : plan.options) {
    if (o.flag == flag) {
      o.value = std::move(value);
      o.key = std::move(key);
      return;
    }
  }
  plan.options.push_back({std::move(flag), std::move(value), std::move(key)});
}

const LaunchOption* find_option(const LaunchPlan& plan, std::string_view flag) {
  for (const auto& o : plan.options) {
    if (o.flag == flag) {
      return &o;
    }
  }
  return nullptr;
}

void erase_option(LaunchPlan& plan, std::string_view flag) {
  std::erase_if(plan.options,
                [&](const LaunchOption& o) { return o.flag == flag; });
}

void set_default(LaunchPlan& plan, std::string flag, std::string value,
                 std::string why) {
  for (auto& o : plan.framework_defaults) {
    if (o.flag == flag) {
      o.value = std::move(value);
      o.key = std::move(why);
      return;
    }
  }
  plan.framework_defaults.push_back(
      {std::move(flag), std::move(value), std::move(why)});
}

}  // namespace oomplan::launch
