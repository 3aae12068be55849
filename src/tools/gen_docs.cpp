// oomplan_gen_docs OUTDIR VERSION DATE: writes the man page and the shell
// completions, generated from the CLI's option texts
// (oomplan/render/docs.hpp), into OUTDIR as oomplan.1, oomplan.bash, _oomplan
// and oomplan.fish. The build runs it; `cmake --install` installs what it
// wrote.
//
// oomplan_gen_docs --pages DIR: rewrites the generated option reference of
// every DIR/*.md page (between its oomplan-options markers) from the same
// texts. `cmake --build build --target oomplan_docs_pages` runs it on docs/;
// the test "docs: each page's option reference is what the CLI's texts
// generate" fails until it has run after a change of an option's text.

#include "cli/cli.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/render/docs.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "oomplan_gen_docs: cannot write '" << path.string() << "'\n";
    return false;
  }
  return true;
}

// Rewrites the generated sections of DIR/*.md; 0 when every section names a
// command and ends.
int update_pages(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> pages;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") {
      pages.push_back(entry.path());
    }
  }
  std::sort(pages.begin(), pages.end());
  const auto commands = oomplan::cli::command_docs();
  bool ok = true;
  for (const auto& page : pages) {
    std::ifstream in(page, std::ios::binary);
    std::ostringstream read;
    read << in.rdbuf();
    const std::string text = read.str();
    const oomplan::FilledPage filled =
        oomplan::fill_reference_sections(text, "oomplan", commands);
    for (const auto& problem : filled.problems) {
      std::cerr << "oomplan_gen_docs: " << page.string() << ": " << problem
                << '\n';
      ok = false;
    }
    if (filled.text != text) {
      ok = write(page, filled.text) && ok;
      std::cout << "rewrote " << page.string() << '\n';
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--pages") {
    try {
      return update_pages(argv[2]);
    } catch (const std::exception& e) {
      std::cerr << "oomplan_gen_docs: " << e.what() << '\n';
      return 1;
    }
  }
  if (argc != 4) {
    std::cerr << "usage: oomplan_gen_docs OUTDIR VERSION DATE\n"
                 "       oomplan_gen_docs --pages DOCS_DIR\n";
    return 2;
  }
  try {
    const std::filesystem::path dir(argv[1]);
    std::filesystem::create_directories(dir);
    const oomplan::Catalog catalog = oomplan::builtin_catalog();
    oomplan::CompletionWords words;
    for (const auto& m : catalog.models) {
      words.models.push_back(m.name);
    }
    for (const auto& g : catalog.gpus) {
      words.gpus.push_back(g.name);
    }
    for (const auto& i : catalog.instances) {
      words.instances.push_back(i.name);
    }
    const auto commands = oomplan::cli::command_docs();
    const auto globals = oomplan::oomplan_global_options();
    const bool ok =
        write(dir / "oomplan.1",
              oomplan::render_man_page(
                  commands, oomplan::oomplan_man_page(argv[2], argv[3]))) &&
        write(dir / "oomplan.bash", oomplan::render_bash_completion(
                                        "oomplan", commands, globals, words)) &&
        write(dir / "_oomplan", oomplan::render_zsh_completion(
                                    "oomplan", commands, globals, words)) &&
        write(dir / "oomplan.fish", oomplan::render_fish_completion(
                                        "oomplan", commands, globals, words));
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "oomplan_gen_docs: " << e.what() << '\n';
    return 1;
  }
}
