// The layer rule (docs/architecture.md): src/ and include/oomplan/ are one
// folder per layer, and a file includes only its own layer and the layers
// below it. Each layer's CMakeLists.txt links the layer right below, so a
// call upwards does not link either; this test holds the #include side and
// that the CMake chain is this order.

#include "support.hpp"

#include <algorithm>
#include <regex>

namespace {

namespace fs = std::filesystem;

// From the bottom. tools/ (build-time generators) sits on top of cli.
const std::vector<std::string> k_layers = {
    "util",   "model",    "setup", "memory", "time", "plan", "launch",
    "advice", "diagnose", "check", "render", "cli",  "tools"};

// The layer of a folder name; -1 when it is none.
int rank_of(const std::string& folder) {
  const auto it = std::find(k_layers.begin(), k_layers.end(), folder);
  return it == k_layers.end() ? -1 : static_cast<int>(it - k_layers.begin());
}

// The layer an include names: "oomplan/<layer>/x.hpp" or "<layer>/x.hpp"
// (a layer's private header, from src/); -1 for anything else.
int rank_of_include(const std::string& include) {
  std::string path = include;
  if (path.rfind("oomplan/", 0) == 0) {
    path = path.substr(8);
  }
  const auto slash = path.find('/');
  return slash == std::string::npos ? -1 : rank_of(path.substr(0, slash));
}

struct Include {
  std::string file;  // relative to the source root
  int line = 0;
  std::string target;
};

std::vector<Include> includes_under(const fs::path& root,
                                    const std::string& folder) {
  static const std::regex k_include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<Include> out;
  for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
    const auto ext = entry.path().extension();
    if (ext != ".cpp" && ext != ".hpp") {
      continue;
    }
    std::istringstream in(oomplan::test::read_required_file(entry.path()));
    std::string text;
    int line = 0;
    std::smatch match;
    while (std::getline(in, text)) {
      ++line;
      if (std::regex_search(text, match, k_include)) {
        out.push_back(
            {fs::relative(entry.path(), root).string(), line, match[1].str()});
      }
    }
  }
  return out;
}

// The layer of a file: src/<layer>/... or include/oomplan/<layer>/....
int rank_of_file(const std::string& file) {
  std::string path = file;
  for (const std::string prefix : {"src/", "include/oomplan/"}) {
    if (path.rfind(prefix, 0) == 0) {
      path = path.substr(prefix.size());
    }
  }
  const auto slash = path.find('/');
  return slash == std::string::npos ? -1 : rank_of(path.substr(0, slash));
}

}  // namespace

TEST_CASE("layers: an include names a layer by its folder", "[layers]") {
  CHECK(rank_of_include("oomplan/util/units.hpp") == 0);
  CHECK(rank_of_include("memory/internal.hpp") == rank_of("memory"));
  CHECK(rank_of_include("cli/cli.hpp") >
        rank_of_include("oomplan/render/report.hpp"));
  CHECK(rank_of_include("support.hpp") == -1);
  CHECK(rank_of_file("src/plan/plan.cpp") == rank_of("plan"));
  CHECK(rank_of_file("include/oomplan/advice/search.hpp") == rank_of("advice"));
}

TEST_CASE(
    "layers: every include in src/ and include/ points to its own layer or "
    "down",
    "[layers]") {
  const fs::path root(OOMPLAN_SOURCE_DIR);
  std::vector<Include> all = includes_under(root, "src");
  for (auto& include : includes_under(root, "include")) {
    all.push_back(include);
  }
  REQUIRE(all.size() > 100);
  int layered = 0;
  for (const Include& include : all) {
    const int from = rank_of_file(include.file);
    INFO(include.file << ":" << include.line << ": #include \""
                      << include.target << "\"");
    // Every file of src/ and include/oomplan/ sits in a layer's folder.
    REQUIRE(from >= 0);
    const int to = rank_of_include(include.target);
    if (to < 0) {
      continue;  // a system or third-party header
    }
    ++layered;
    CHECK(to <= from);
  }
  CHECK(layered > 100);
}

TEST_CASE("layers: each layer's CMakeLists.txt links the layer right below",
          "[layers]") {
  const fs::path root(OOMPLAN_SOURCE_DIR);
  // util links no layer; tools/ is built by the top-level CMakeLists.txt.
  for (std::size_t i = 1; i + 1 < k_layers.size(); ++i) {
    const std::string text = oomplan::test::read_required_file(
        root / "src" / k_layers[i] / "CMakeLists.txt");
    INFO("src/" << k_layers[i] << "/CMakeLists.txt");
    const std::string below = k_layers[i - 1];
    CHECK_THAT(text, Catch::Contains("PUBLIC oomplan_" + below));
    // ... and no layer above it.
    for (std::size_t j = i + 1; j < k_layers.size(); ++j) {
      CHECK_THAT(text, !Catch::Contains("oomplan_" + k_layers[j] + " ") &&
                           !Catch::Contains("oomplan_" + k_layers[j] + "\n"));
    }
  }
}
