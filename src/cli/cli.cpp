#include "cli/cli.hpp"

#include "cli/cli_internal.hpp"
#include "cli/io.hpp"

#include "oomplan/util/error.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomplan::cli {
namespace {

// --- CLI11 errors -> one line.

std::string parse_error_text(const CLI::ParseError& e) {
  std::string what = e.what();
  if (what == "MODEL is required") {
    return "missing MODEL; give a catalog name (oomplan models), a Hugging "
           "Face id or a path to a config.json";
  }
  if (what == "FILE is required") {
    return "missing FILE; give the launch configs to check, e.g. oomplan "
           "check train.yaml --gpus 8xH100";
  }
  constexpr std::string_view k_extras =
      "The following argument was not expected: ";
  constexpr std::string_view k_extras_plural =
      "The following arguments were not expected: ";
  if (what.rfind(k_extras, 0) == 0) {
    return fmt::format("unexpected argument '{}'; see oomplan --help",
                       what.substr(k_extras.size()));
  }
  if (what.rfind(k_extras_plural, 0) == 0) {
    return fmt::format("unexpected arguments '{}'; see oomplan --help",
                       what.substr(k_extras_plural.size()));
  }
  return what;
}

// ccache's rule: "If the first argument isn't an option, then assume we are
// being passed a compiler name" -- here, a model name for `plan`.
bool is_subcommand(CLI::App& app, const std::string& word) {
  return !app.get_subcommands([&](CLI::App* s) { return s->check_name(word); })
              .empty();
}

// The whole command line: every subcommand and its options. `app` outlives
// the commands (their closures hold the parsed values).
Commands build(CLI::App& app, std::optional<std::string> only) {
  app.set_version_flag("--version", "oomplan 0.1.0");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 fits, 1 does not fit, 2 bad input, 3 internal error "
      "(a bug).\n"
      "Example: oomplan llama3-70b --gpus 4xA100-80 --seq 8192");
  // A repeated option takes its last value, so a script can append overrides
  // to a fix's args.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Commands commands(std::move(only));
  add_plan_commands(app, commands);
  add_check_command(app, commands);
  add_diagnose_command(app, commands);
  return commands;
}

constexpr const char* k_description =
    "oomplan: predicts whether an LLM fits in GPU memory and what to change "
    "if not.\n"
    "  oomplan MODEL [options]  is  oomplan plan MODEL [options]";

int dispatch(std::vector<std::string> args, Runtime& rt, std::ostream& out) {
  // A leading --version=VALUE: the value is judged like every flag's (CLI11
  // saw no such option and asked for a MODEL); =false drops it. One erase,
  // so a million of them stay linear.
  constexpr std::string_view k_version_eq = "--version=";
  std::size_t dropped = 0;
  while (dropped < args.size() && args[dropped].starts_with(k_version_eq)) {
    const std::string_view value =
        std::string_view(args[dropped]).substr(k_version_eq.size());
    if (parse_flag("--version", value)) {
      args[dropped] = "--version";
      break;
    }
    ++dropped;
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(dropped));
  if (args.empty()) {
    throw Error(
        "missing MODEL; usage: oomplan MODEL [--gpus NxNAME] [options], or "
        "oomplan --help");
  }
  const std::string& first = args.front();
  const bool global_flag =
      first == "-h" || first == "--help" || first == "--version";
  {
    // The names alone tell a subcommand from a MODEL.
    CLI::App names{k_description, "oomplan"};
    build(names, "");
    if (!global_flag && !is_subcommand(names, first)) {
      args.insert(args.begin(), "plan");
    }
  }
  CLI::App app{k_description, "oomplan"};
  const Commands commands =
      build(app, global_flag ? std::string() : args.front());
  args = vllm_spellings(app, std::move(args));

  try {
    // CLI11 2.1.2 consumes the vector from the back.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      std::ostringstream help;
      std::ostringstream help_err;
      app.exit(e, help, help_err);
      std::string text = help.str();
      if (!text.empty() && text.back() != '\n') {
        text += '\n';  // CLI11 prints the version without one
      }
      out << text;
      return k_exit_fits;
    }
    throw Error(parse_error_text(e));
  }
  for (const Command& command : commands) {
    if (command.app->parsed()) {
      return command.run(rt);
    }
  }
  throw Error("missing command; see oomplan --help");
}

// Writes what a command left for after its success (--svg, --summary).
void write_files(const Runtime& rt) {
  for (const Runtime::FileOut& file : rt.files) {
    std::ofstream stream(file.path, file.append
                                        ? std::ios::binary | std::ios::app
                                        : std::ios::binary | std::ios::trunc);
    stream << file.text;
    stream.close();
    if (!stream) {
      throw Error(
          fmt::format("cannot write '{}'; check the folder exists "
                      "and is writable",
                      file.path.string()));
    }
  }
}

// "{a,b,c}" or "TEXT:{a,b,c}" (an IsMember check) -> a, b, c.
std::vector<std::string> type_choices(const std::string& type_name) {
  std::vector<std::string> choices;
  const auto open = type_name.find('{');
  const auto close = type_name.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return choices;
  }
  std::string_view rest(type_name.data() + open + 1, close - open - 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    choices.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{}
                                           : rest.substr(comma + 1);
  }
  return choices;
}

}  // namespace

std::vector<CommandDoc> command_docs() {
  CLI::App app{k_description, "oomplan"};
  const Commands commands = build(app, std::nullopt);
  std::vector<CommandDoc> docs;
  for (const Command& command : commands) {
    CommandDoc doc;
    doc.name = command.app->get_name();
    doc.summary = command.app->get_description();
    for (const CLI::Option* option : command.app->get_options()) {
      if (option->get_name() == "--help") {
        continue;
      }
      if (option->get_positional() && option->nonpositional() == false) {
        // FILE takes every word left (check's TakeAll); diagnose's MODEL
        // may be absent.
        doc.positionals.push_back(
            {option->get_name(), option->get_description(),
             option->get_required(), option->get_items_expected_max() > 1});
        continue;
      }
      OptionDoc o;
      o.flag = option->get_name();
      o.help = option->get_description();
      o.default_text = option->get_default_str();
      o.group = option->get_group();
      if (option->get_type_size() != 0) {
        const std::string type = option->get_type_name();
        o.choices = type_choices(type);
        o.value_name =
            !o.choices.empty() ? "NAME" : type.substr(0, type.find(':'));
      }
      doc.options.push_back(std::move(o));
    }
    docs.push_back(std::move(doc));
  }
  return docs;
}

int run(const std::vector<std::string>& args, std::ostream& out,
        std::ostream& err, const Environment& env) {
  Runtime rt{env, {}, {}, {}};
  try {
    const int code = dispatch(args, rt, out);
    write_files(rt);
    for (const std::string& warning : rt.warnings) {
      err << "oomplan: warning: " << one_line(warning) << '\n';
    }
    out << rt.out;
    out.flush();
    return code;
  } catch (const Error& e) {
    err << "oomplan: error: " << one_line(e.what()) << '\n';
    return k_exit_bad_input;
  } catch (const std::exception& e) {
    // Every parser turns its library's exceptions into Error, so this is a
    // bug in oomplan (DESIGN §2: exit 3, which no input may reach).
    err << "oomplan: internal error: " << one_line(e.what()) << '\n';
  } catch (...) {
    err << "oomplan: internal error: unknown exception\n";
  }
  return k_exit_internal_error;
}

}  // namespace oomplan::cli
