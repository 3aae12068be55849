// The committed documentation (README.md and docs/*.md) against the
// repository and the CLI: every relative link and #anchor resolves, every
// repository path it names exists, each command page's option reference is
// what the CLI's own texts generate, and README keeps its shape (issue 23:
// at most 400 lines, the two set-up commands first).

#include "cli/cli.hpp"
#include "support.hpp"

#include "oomplan/render/docs.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace oomplan {
namespace {

namespace fs = std::filesystem;

const fs::path k_root(OOMPLAN_SOURCE_DIR);

// README.md, then docs/*.md in name order.
std::vector<fs::path> doc_files() {
  std::vector<fs::path> docs;
  for (const auto& entry : fs::directory_iterator(k_root / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") {
      docs.push_back(entry.path());
    }
  }
  std::sort(docs.begin(), docs.end());
  std::vector<fs::path> files = {k_root / "README.md"};
  files.insert(files.end(), docs.begin(), docs.end());
  return files;
}

std::string repo_path(const fs::path& path) {
  return fs::relative(path, k_root).generic_string();
}

// The text outside fenced code blocks (``` and ~~~), lines kept in place so
// that the rest still reads as Markdown.
std::string outside_fences(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  std::string line;
  std::string fence;
  while (std::getline(in, line)) {
    const auto start = line.find_first_not_of(' ');
    const std::string trimmed =
        start == std::string::npos ? "" : line.substr(start);
    if (fence.empty() &&
        (trimmed.starts_with("```") || trimmed.starts_with("~~~"))) {
      fence = trimmed.substr(0, 3);
      out += "\n";
      continue;
    }
    if (!fence.empty()) {
      if (trimmed.starts_with(fence)) {
        fence.clear();
      }
      out += "\n";
      continue;
    }
    out += line + "\n";
  }
  return out;
}

// The code spans of `text` (a run of backticks to the next run as long; a
// span may cross a line break), and the text with them blanked out.
struct Spans {
  std::vector<std::string> code;
  std::string prose;
};
Spans code_spans(const std::string& text) {
  Spans spans;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t open = text.find('`', at);
    if (open == std::string::npos) {
      spans.prose += text.substr(at);
      break;
    }
    std::size_t ticks = open;
    while (ticks < text.size() && text[ticks] == '`') {
      ++ticks;
    }
    const std::string run = text.substr(open, ticks - open);
    std::size_t close = text.find(run, ticks);
    while (close != std::string::npos && close + run.size() < text.size() &&
           text[close + run.size()] == '`') {
      close = text.find(run, close + run.size() + 1);
    }
    if (close == std::string::npos) {
      spans.prose += text.substr(at);
      break;
    }
    spans.prose += text.substr(at, open - at);
    spans.code.push_back(text.substr(ticks, close - ticks));
    at = close + run.size();
  }
  return spans;
}

// GitHub's anchor of a heading: its text without Markdown (code spans keep
// their content, links their text), lower-cased, every character other
// than a letter, a digit, a space, '-' or '_' dropped, spaces made '-'.
// Bytes above 0x7f are kept: the pages keep their headings ASCII, where the
// rule is exact.
std::string github_anchor(std::string heading) {
  heading = std::regex_replace(heading,
                               std::regex(R"(!?\[([^\]]*)\]\([^)]*\))"), "$1");
  std::string anchor;
  for (const char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || u > 0x7f) {
      anchor += static_cast<char>(std::tolower(u));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

// The anchors of a Markdown file's headings, a repeated one suffixed -1, -2,
// ... as GitHub does.
std::set<std::string> anchors_of(const fs::path& file) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  std::istringstream in(outside_fences(test::read_required_file(file)));
  std::string line;
  const std::regex heading(R"(^#{1,6}[ \t]+(.*?)[ \t#]*$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, heading)) {
      continue;
    }
    const std::string base = github_anchor(m[1].str());
    const int n = seen[base]++;
    anchors.insert(n == 0 ? base : base + "-" + std::to_string(n));
  }
  return anchors;
}

// Every link target of a page: inline links and images, and reference
// definitions; not inside code.
std::vector<std::string> link_targets(const std::string& page) {
  const std::string prose = code_spans(outside_fences(page)).prose;
  std::vector<std::string> targets;
  const std::regex inline_link(R"(\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\))");
  for (auto it = std::sregex_iterator(prose.begin(), prose.end(), inline_link);
       it != std::sregex_iterator(); ++it) {
    targets.push_back((*it)[1].str());
  }
  const std::regex definition(R"((?:^|\n) {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+))");
  for (auto it = std::sregex_iterator(prose.begin(), prose.end(), definition);
       it != std::sregex_iterator(); ++it) {
    targets.push_back((*it)[1].str());
  }
  return targets;
}

TEST_CASE("docs: every relative link in README.md and docs/*.md resolves",
          "[docs]") {
  std::size_t checked = 0;
  for (const fs::path& file : doc_files()) {
    const std::string page = test::read_required_file(file);
    for (const std::string& target : link_targets(page)) {
      if (std::regex_search(target, std::regex("^[a-zA-Z][a-zA-Z0-9+.-]*:"))) {
        continue;  // https:, mailto:
      }
      INFO(repo_path(file) << " links to " << target);
      const auto hash = target.find('#');
      const std::string path = target.substr(0, hash);
      const fs::path resolved =
          path.empty() ? file : (file.parent_path() / path).lexically_normal();
      CHECK(fs::exists(resolved));
      if (hash != std::string::npos && resolved.extension() == ".md" &&
          fs::is_regular_file(resolved)) {
        const auto anchors = anchors_of(resolved);
        CHECK(anchors.count(target.substr(hash + 1)) == 1);
      }
      ++checked;
    }
  }
  // README alone links to each docs page.
  CHECK(checked >= 20);
}

TEST_CASE("docs: the anchor rule is GitHub's", "[docs]") {
  // Anchors GitHub gives these headings (README's links used them).
  CHECK(github_anchor("`--framework` and vLLM's flag spellings") ==
        "--framework-and-vllms-flag-spellings");
  CHECK(github_anchor("`oomplan check`: launch configs as a CI gate") ==
        "oomplan-check-launch-configs-as-a-ci-gate");
  CHECK(github_anchor("Your own catalog (`--catalog DIR`)") ==
        "your-own-catalog---catalog-dir");
  CHECK(github_anchor("Links [here](x.md)") == "links-here");
}

// Words of code spans that name a file or folder of the repository:
// `src/cli/cli.cpp`, `tests/golden/regen.sh`, `.ci/run`. Patterns
// (`tests/test_<module>.cpp`, `models/*.json`, `src/...`) are not names.
std::vector<std::string> repository_paths(const std::string& page) {
  std::vector<std::string> paths;
  const std::regex path(
      R"(^(src|include|tests|models|docs|\.ci)/[A-Za-z0-9_./-]*$)");
  for (const std::string& span : code_spans(outside_fences(page)).code) {
    std::istringstream words(span);
    std::string word;
    while (words >> word) {
      while (!word.empty() &&
             std::string(",;:)").find(word.back()) != std::string::npos) {
        word.pop_back();
      }
      // "src/..." stands for a folder's files, not a name.
      if (std::regex_match(word, path) &&
          word.find("...") == std::string::npos) {
        paths.push_back(word);
      }
    }
  }
  return paths;
}

TEST_CASE(
    "docs: every repository path README.md and docs/*.md name in code "
    "exists",
    "[docs]") {
  std::size_t checked = 0;
  for (const fs::path& file : doc_files()) {
    for (const std::string& path :
         repository_paths(test::read_required_file(file))) {
      INFO(repo_path(file) << " names " << path);
      CHECK(fs::exists(k_root / path));
      ++checked;
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("docs: each page's option reference is what the CLI's texts generate",
          "[docs]") {
  const auto commands = cli::command_docs();
  std::set<std::string> documented;
  for (const fs::path& file : doc_files()) {
    const std::string page = test::read_required_file(file);
    const FilledPage filled =
        fill_reference_sections(page, "oomplan", commands);
    INFO(repo_path(file));
    CHECK(filled.problems.empty());
    for (const auto& problem : filled.problems) {
      UNSCOPED_INFO(problem);
    }
    if (filled.text != page) {
      std::cerr << repo_path(file)
                << "'s option reference differs from the CLI's option texts; "
                   "regenerate it with: cmake --build build --target "
                   "oomplan_docs_pages\n";
    }
    CHECK(filled.text == page);
    documented.insert(filled.commands.begin(), filled.commands.end());
  }
  // Every command has its reference, plan, fit, check and diagnose each on
  // its own page.
  for (const CommandDoc& command : commands) {
    INFO(command.name);
    CHECK(documented.count(command.name) == 1);
  }
  for (const std::string name : {"plan", "fit", "check", "diagnose"}) {
    const std::string page =
        test::read_required_file(k_root / "docs" / (name + ".md"));
    CHECK(fill_reference_sections(page, "oomplan", commands).commands ==
          std::vector<std::string>{name});
  }
}

TEST_CASE("docs: README.md is at most 400 lines and opens with the set-up",
          "[docs]") {
  const std::string readme = test::read_required_file(k_root / "README.md");
  CHECK(std::count(readme.begin(), readme.end(), '\n') <= 400);
  // The two commands a new user needs on a fresh Debian 12 machine, before
  // anything else; .ci/run runs the second.
  const auto install = readme.find("    S=$(command -v sudo); $S apt-get");
  const auto tests = readme.find(
      "    cmake -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build "
      "-j2 && ctest --test-dir build --output-on-failure\n");
  CHECK(install < 1000);
  CHECK(tests < 2000);
  const std::string ci = test::read_required_file(k_root / ".ci" / "run");
  CHECK_THAT(ci, Catch::Contains("cmake -B build -DCMAKE_BUILD_TYPE=Release "
                                 "&& cmake --build build -j2 && ctest "
                                 "--test-dir build --output-on-failure\n"));
}

}  // namespace
}  // namespace oomplan
