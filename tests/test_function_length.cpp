// House rule (issue 23): no function in src/ or include/ is longer than 100
// lines, so that a reader holds one mechanism at a time. Tables of data are
// namespace-scope constants, not functions, and fall outside the rule.
//
// A function definition, in clang-formatted code, starts at column 0 with a
// line holding '(' that is not a declaration, a type, a namespace or a
// preprocessor line, and ends at the next line starting with '}'. Lambdas and
// local classes count inside their function.

#include "support.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace {

namespace fs = std::filesystem;

constexpr int k_max_function_lines = 100;

struct Function {
  std::string where;  // file:line
  std::string head;   // the first line
  int lines = 0;
};

bool starts_with_any(const std::string& line,
                     std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](auto prefix) { return line.rfind(prefix, 0) == 0; });
}

std::string trim_right(const std::string& text) {
  const auto end = text.find_last_not_of(" \t\r");
  return end == std::string::npos ? std::string() : text.substr(0, end + 1);
}

std::vector<Function> functions_in(const std::string& text,
                                   const std::string& file) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  std::vector<Function> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty() || line[0] == ' ' || line[0] == '\t' ||
        line.find('(') == std::string::npos ||
        starts_with_any(line, {"//", "#", "namespace", "}", "struct", "class",
                               "enum", "using", "template", "extern"})) {
      continue;
    }
    // An initialised variable (`const auto x = f(...)`) is no definition.
    if (line.substr(0, line.find('(')).find('=') != std::string::npos) {
      continue;
    }
    std::size_t open = i;
    while (open < lines.size()) {
      const std::string end = trim_right(lines[open]);
      if (!end.empty() && (end.back() == '{' || end.back() == ';')) {
        break;
      }
      ++open;
    }
    if (open == lines.size() || trim_right(lines[open]).back() != '{') {
      continue;
    }
    std::size_t close = open + 1;
    while (close < lines.size() && lines[close].rfind('}', 0) != 0) {
      ++close;
    }
    out.push_back({fmt::format("{}:{}", file, i + 1), line,
                   static_cast<int>(close - i + 1)});
    i = close;
  }
  return out;
}

}  // namespace

TEST_CASE("source: a function is found with its length", "[source]") {
  const std::string text =
      "namespace x {\n"
      "int f(int a,\n"
      "      int b) {\n"
      "  return a + b;\n"
      "}\n"
      "constexpr std::array k_table = {f(1, 2)};\n"
      "void g();\n"
      "}  // namespace x\n";
  const auto found = functions_in(text, "t.cpp");
  REQUIRE(found.size() == 1);
  CHECK(found[0].where == "t.cpp:2");
  CHECK(found[0].lines == 4);  // lines 2 to 5
}

TEST_CASE("source: no function in src/ or include/ is over 100 lines",
          "[source]") {
  const fs::path root(OOMPLAN_SOURCE_DIR);
  int counted = 0;
  for (const char* folder : {"src", "include"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".hpp") {
        continue;
      }
      const std::string file = fs::relative(entry.path(), root).string();
      for (const Function& f : functions_in(
               oomplan::test::read_required_file(entry.path()), file)) {
        ++counted;
        INFO(f.where << " " << f.head << " (" << f.lines << " lines)");
        CHECK(f.lines <= k_max_function_lines);
      }
    }
  }
  CHECK(counted > 500);
}
