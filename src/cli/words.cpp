#include "cli/cli_internal.hpp"

#include "oomplan/model/catalog.hpp"
#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

// The command line's words judged before CLI11 reads them, so that each
// mistake gets its own message in the order the user typed it: CLI11 2.1.2
// lets an empty `--opt=` take the next word as its value, reports unknown
// options as "arguments not expected" (last first), and asks for a MODEL when
// the only word is an unknown option.

namespace oomplan::cli {
namespace {

struct Known {
  const CLI::Option* option = nullptr;
  std::string name;  // as typed, without any =VALUE
};

// The option `word` names ("--seq", "--seq=8192", "-h"), or nullptr.
Known find_option(const CLI::App& command, std::string_view word) {
  const std::string name(word.substr(0, word.find('=')));
  for (const CLI::Option* option : command.get_options()) {
    if (!option->get_positional() || option->nonpositional()) {
      if (option->check_name(name)) {
        return {option, name};
      }
    }
  }
  return {nullptr, name};
}

// Every long and short name of the command's options, for did-you-mean.
std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& l : option->get_lnames()) {
      names.push_back("--" + l);
    }
    for (const std::string& s : option->get_snames()) {
      names.push_back("-" + s);
    }
  }
  return names;
}

// "-5", "-0.5": a value, never an option.
bool is_number(std::string_view word) {
  return word.size() > 1 && word[0] == '-' &&
         word.find_first_not_of("0123456789.", 1) == std::string_view::npos;
}

bool looks_like_option(std::string_view word) {
  return word.size() > 1 && word[0] == '-' && !is_number(word);
}

// Short options are one letter: any other letter is one edit away, so only
// long names get a did-you-mean, within one edit per three letters ("--sqe"
// is --seq; "--x" is not "--tp").
std::string unknown_text(const CLI::App& command, std::string_view name) {
  const std::size_t letters =
      name.size() - std::min<std::size_t>(2, name.size());
  const auto near = name.starts_with("--")
                        ? suggest(name, option_names(command),
                                  std::max<std::size_t>(1, letters / 3))
                        : std::nullopt;
  return near ? fmt::format("'{}' (did you mean {}?)", escape_for_message(name),
                            *near)
              : fmt::format("'{}'", escape_for_message(name));
}

}  // namespace

void check_words(const CLI::App& command, const std::vector<std::string>& args,
                 std::size_t first) {
  std::vector<std::string> unknown;
  for (std::size_t i = first; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      break;  // what follows is positional
    }
    if (!looks_like_option(word)) {
      continue;
    }
    const Known known = find_option(command, word);
    if (known.option == nullptr) {
      unknown.push_back(unknown_text(command, known.name));
      continue;
    }
    const bool takes_value = known.option->get_type_size() != 0;
    const bool inline_value = word.size() > known.name.size();
    const bool empty_inline = word.size() == known.name.size() + 1;
    const bool empty_next = takes_value && !inline_value &&
                            i + 1 < args.size() && args[i + 1].empty();
    if (empty_inline || empty_next) {
      const std::string type = known.option->get_type_name();
      throw Error(
          type.empty()
              ? fmt::format("{0}= is empty; give {0}, {0}=true or "
                            "{0}=false",
                            known.name)
              : fmt::format("{0} is empty; give {0} {1}", known.name, type));
    }
    if (takes_value && !inline_value) {
      ++i;  // its value, whatever it looks like
    }
  }
  if (!unknown.empty()) {
    throw Error(fmt::format("unknown option{} {}; see oomplan {} --help",
                            unknown.size() > 1 ? "s" : "",
                            fmt::join(unknown, ", "), command.get_name()));
  }
}

std::optional<std::string> command_typo(const CLI::App& root,
                                        std::string_view word) {
  if (word.empty() || looks_like_option(word)) {
    return std::nullopt;
  }
  std::vector<std::string> names;
  for (const CLI::App* sub : root.get_subcommands({})) {
    names.push_back(sub->get_name());
  }
  names.emplace_back("help");
  // One edit ("chek", "fir"): two would take model ids for commands ("gpt2"
  // is two from "gpus").
  return suggest(word, names, 1);
}

}  // namespace oomplan::cli
