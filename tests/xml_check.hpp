#pragma once

// A small XML 1.0 well-formedness checker for the SVG tests: one root
// element, matching tags, quoted and unique attributes, only the five
// predefined entities and character references, no raw '<' or '&' in text or
// attribute values, valid UTF-8 throughout, nothing but comments, processing
// instructions and white space around the root. No DTDs (SVG 1.1 does not
// need one). The parsed tree lets tests read the text a picture shows.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomplan::test {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // decoded
  std::vector<XmlElement> children;
  std::string text;  // the element's own character data, decoded

  const std::string* attribute(std::string_view key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) {
        return &v;
      }
    }
    return nullptr;
  }
};

struct XmlDocument {
  bool ok = false;
  std::string error;  // "offset N: what", when !ok
  XmlElement root;
};

namespace xml_detail {

class Parser {
 public:
  explicit Parser(std::string_view doc) : m_doc(doc) {}

  XmlDocument parse() {
    XmlDocument result;
    if (!valid_utf8()) {
      result.error = m_error;
      return result;
    }
    skip_misc();
    if (!parse_element(result.root)) {
      result.error = m_error;
      return result;
    }
    skip_misc();
    if (m_error.empty() && m_pos != m_doc.size()) {
      fail("content after the root element");
    }
    result.ok = m_error.empty();
    result.error = m_error;
    return result;
  }

 private:
  bool fail(std::string_view what) {
    if (m_error.empty()) {
      m_error = "offset " + std::to_string(m_pos) + ": " + std::string(what);
    }
    return false;
  }
  bool at(std::string_view s) const {
    return m_doc.substr(m_pos, s.size()) == s;
  }
  bool done() const { return m_pos >= m_doc.size(); }
  static bool space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  }
  void skip_space() {
    while (!done() && space(m_doc[m_pos])) {
      ++m_pos;
    }
  }
  static bool name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == ':' || static_cast<unsigned char>(c) >= 0x80;
  }
  static bool name_char(char c) {
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
  }

  bool valid_utf8() {
    std::size_t i = 0;
    while (i < m_doc.size()) {
      const auto c = static_cast<unsigned char>(m_doc[i]);
      std::size_t len = 1;
      if (c >= 0x80) {
        len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (len == 0 || c > 0xF4 || i + len > m_doc.size()) {
          m_pos = i;
          return fail("invalid UTF-8");
        }
        for (std::size_t k = 1; k < len; ++k) {
          if ((static_cast<unsigned char>(m_doc[i + k]) & 0xC0U) != 0x80U) {
            m_pos = i;
            return fail("invalid UTF-8");
          }
        }
      } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
        m_pos = i;
        return fail("control character");
      }
      i += len;
    }
    return true;
  }

  // Comments, processing instructions (the XML declaration) and space.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (at("<!--")) {
        const auto end = m_doc.find("-->", m_pos + 4);
        if (end == std::string_view::npos) {
          fail("unterminated comment");
          return;
        }
        m_pos = end + 3;
      } else if (at("<?")) {
        const auto end = m_doc.find("?>", m_pos + 2);
        if (end == std::string_view::npos) {
          fail("unterminated processing instruction");
          return;
        }
        m_pos = end + 2;
      } else {
        return;
      }
    }
  }

  bool parse_name(std::string& name) {
    if (done() || !name_start(m_doc[m_pos])) {
      return fail("expected a name");
    }
    const std::size_t begin = m_pos;
    while (!done() && name_char(m_doc[m_pos])) {
      ++m_pos;
    }
    name = std::string(m_doc.substr(begin, m_pos - begin));
    return true;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0U | (cp >> 6U));
      out += static_cast<char>(0x80U | (cp & 0x3FU));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0U | (cp >> 12U));
      out += static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU));
      out += static_cast<char>(0x80U | (cp & 0x3FU));
    } else {
      out += static_cast<char>(0xF0U | (cp >> 18U));
      out += static_cast<char>(0x80U | ((cp >> 12U) & 0x3FU));
      out += static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU));
      out += static_cast<char>(0x80U | (cp & 0x3FU));
    }
  }

  // At '&': one entity or character reference, decoded into `out`.
  bool parse_reference(std::string& out) {
    const auto end = m_doc.find(';', m_pos);
    if (end == std::string_view::npos || end - m_pos > 10) {
      return fail("'&' that starts no reference");
    }
    const std::string_view ref = m_doc.substr(m_pos + 1, end - m_pos - 1);
    if (ref == "amp") {
      out += '&';
    } else if (ref == "lt") {
      out += '<';
    } else if (ref == "gt") {
      out += '>';
    } else if (ref == "quot") {
      out += '"';
    } else if (ref == "apos") {
      out += '\'';
    } else if (ref.size() >= 2 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      std::uint32_t cp = 0;
      if (digits.empty()) {
        return fail("empty character reference");
      }
      for (const char c : digits) {
        std::uint32_t d = 0;
        if (c >= '0' && c <= '9') {
          d = static_cast<std::uint32_t>(c - '0');
        } else if (hex && c >= 'a' && c <= 'f') {
          d = static_cast<std::uint32_t>(c - 'a' + 10);
        } else if (hex && c >= 'A' && c <= 'F') {
          d = static_cast<std::uint32_t>(c - 'A' + 10);
        } else {
          return fail("bad character reference");
        }
        cp = cp * (hex ? 16U : 10U) + d;
        if (cp > 0x10FFFF) {
          return fail("character reference out of range");
        }
      }
      const bool allowed = cp == 0x9 || cp == 0xA || cp == 0xD ||
                           (cp >= 0x20 && cp <= 0xD7FF) ||
                           (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
      if (!allowed) {
        return fail("character reference to a non-XML character");
      }
      append_utf8(out, cp);
    } else {
      return fail("unknown entity '&" + std::string(ref) + ";'");
    }
    m_pos = end + 1;
    return true;
  }

  bool parse_element(XmlElement& element) {
    if (!at("<")) {
      return fail("expected '<'");
    }
    ++m_pos;
    if (!parse_name(element.name)) {
      return false;
    }
    for (;;) {
      const std::size_t before = m_pos;
      skip_space();
      if (at("/>")) {
        m_pos += 2;
        return true;
      }
      if (at(">")) {
        ++m_pos;
        break;
      }
      if (m_pos == before) {
        return fail("expected space, '>' or '/>' after a name");
      }
      std::string key;
      if (!parse_name(key)) {
        return false;
      }
      if (element.attribute(key) != nullptr) {
        return fail("duplicate attribute '" + key + "'");
      }
      skip_space();
      if (!at("=")) {
        return fail("expected '=' after attribute '" + key + "'");
      }
      ++m_pos;
      skip_space();
      if (done() || (m_doc[m_pos] != '"' && m_doc[m_pos] != '\'')) {
        return fail("unquoted attribute value");
      }
      const char quote = m_doc[m_pos++];
      std::string value;
      while (!done() && m_doc[m_pos] != quote) {
        if (m_doc[m_pos] == '<') {
          return fail("'<' in an attribute value");
        }
        if (m_doc[m_pos] == '&') {
          if (!parse_reference(value)) {
            return false;
          }
          continue;
        }
        value += m_doc[m_pos++];
      }
      if (done()) {
        return fail("unterminated attribute value");
      }
      ++m_pos;
      element.attributes.emplace_back(std::move(key), std::move(value));
    }
    // Content until the matching end tag.
    for (;;) {
      if (done()) {
        return fail("missing </" + element.name + ">");
      }
      if (at("</")) {
        m_pos += 2;
        std::string name;
        if (!parse_name(name)) {
          return false;
        }
        if (name != element.name) {
          return fail("</" + name + "> closes <" + element.name + ">");
        }
        skip_space();
        if (!at(">")) {
          return fail("expected '>'");
        }
        ++m_pos;
        return true;
      }
      if (at("<!--") || at("<?")) {
        skip_misc();
        if (!m_error.empty()) {
          return false;
        }
        continue;
      }
      if (at("<![CDATA[")) {
        const auto end = m_doc.find("]]>", m_pos);
        if (end == std::string_view::npos) {
          return fail("unterminated CDATA");
        }
        element.text += m_doc.substr(m_pos + 9, end - m_pos - 9);
        m_pos = end + 3;
        continue;
      }
      if (at("<")) {
        XmlElement child;
        if (!parse_element(child)) {
          return false;
        }
        element.children.push_back(std::move(child));
        continue;
      }
      if (m_doc[m_pos] == '&') {
        if (!parse_reference(element.text)) {
          return false;
        }
        continue;
      }
      if (at("]]>")) {
        return fail("']]>' in text");
      }
      element.text += m_doc[m_pos++];
    }
  }

  std::string_view m_doc;
  std::size_t m_pos = 0;
  std::string m_error;
};

inline void collect(const XmlElement& e, std::string_view name,
                    std::vector<const XmlElement*>& out) {
  if (e.name == name) {
    out.push_back(&e);
  }
  for (const XmlElement& child : e.children) {
    collect(child, name, out);
  }
}

}  // namespace xml_detail

inline XmlDocument parse_xml(std::string_view doc) {
  return xml_detail::Parser(doc).parse();
}

// Every element named `name` under (and including) `root`, in document
// order.
inline std::vector<const XmlElement*> elements_named(const XmlElement& root,
                                                     std::string_view name) {
  std::vector<const XmlElement*> out;
  xml_detail::collect(root, name, out);
  return out;
}

}  // namespace oomplan::test
