// oomplan_gen_docs OUTDIR VERSION DATE: writes the man page and the shell
// completions, generated from the option table (docs_gen.hpp), into OUTDIR
// as oomplan.1, oomplan.bash, _oomplan and oomplan.fish. The build runs it;
// `cmake --install` installs what it wrote.

#include "cli/cli.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/render/docs.hpp"

#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: oomplan_gen_docs OUTDIR VERSION DATE\n";
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
