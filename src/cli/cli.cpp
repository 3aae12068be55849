#include "cli/cli.hpp"

#include "cli/cli_internal.hpp"
#include "cli/io.hpp"

#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
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
Commands build(CLI::App& app, std::optional<std::string> only,
               std::optional<std::vector<std::string>> given = std::nullopt) {
  app.set_version_flag("--version", "oomplan 0.1.0");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 fits, 1 does not fit, 2 bad input, 3 internal error "
      "(a bug).\n"
      "Example: oomplan llama3-70b --gpus 4xA100-80 --seq 8192");
  // A repeated option takes its last value, so a script can append overrides
  // to a fix's args.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Commands commands(std::move(only), std::move(given));
  add_plan_commands(app, commands);
  add_check_command(app, commands);
  add_diagnose_command(app, commands);
  return commands;
}

// The option names on the command line (without =VALUE); nullopt when it
// asks for help, which lists every option.
std::optional<std::vector<std::string>> given_options(
    const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const std::string& word : args) {
    if (word == "--") {
      break;  // what follows is positional
    }
    if (word.size() < 2 || word[0] != '-') {
      continue;
    }
    std::string name = word.substr(0, word.find('='));
    if (name == "-h" || name == "--help") {
      return std::nullopt;
    }
    names.push_back(std::move(name));
  }
  return names;
}

// `args` in oomplan's spellings, each option judged against `app`'s.
std::vector<std::string> read_words(CLI::App& app,
                                    const std::vector<std::string>& args,
                                    bool global_flag) {
  std::vector<std::string> words = vllm_spellings(app, args);
  if (!global_flag) {
    check_words(*app.get_subcommand(words.front()), words, 1);
  }
  return words;
}

// `oomplan help [COMMAND]` as `oomplan [COMMAND] --help`.
std::vector<std::string> help_words(CLI::App& names,
                                    const std::vector<std::string>& args) {
  if (args.size() == 1) {
    return {"--help"};
  }
  if (args.size() == 2 && is_subcommand(names, args[1])) {
    return {args[1], "--help"};
  }
  std::vector<std::string> commands;
  for (const CLI::App* sub : names.get_subcommands({})) {
    commands.push_back(sub->get_name());
  }
  throw Error(fmt::format("oomplan help takes one command: {}",
                          fmt::join(commands, ", ")));
}

// A first word that is a near miss of a command and names no model or file
// ("chek train.yaml") is the command misspelt, not a MODEL. With --catalog
// any word may be a model, so nothing is judged.
void reject_command_typo(const CLI::App& names,
                         const std::vector<std::string>& args) {
  const auto typo = command_typo(names, args.front());
  if (!typo || std::find(args.begin(), args.end(), "--catalog") != args.end()) {
    return;
  }
  std::error_code ec;
  if (std::filesystem::exists(args.front(), ec)) {
    return;
  }
  try {
    find_model(builtin_catalog(), args.front());
    return;
  } catch (const Error&) {
  }
  throw Error(fmt::format(
      "unknown command '{}'; did you mean oomplan {}? (a MODEL is a catalog "
      "name, see oomplan models, a Hugging Face id or a config.json path)",
      escape_for_message(args.front()), *typo));
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
  CLI::App names{k_description, "oomplan"};
  build(names, "");  // the names alone tell a subcommand from a MODEL
  if (args.front() == "help") {
    args = help_words(names, args);
  }
  const std::string& first = args.front();
  const bool global_flag =
      first == "-h" || first == "--help" || first == "--version";
  if (!global_flag && !is_subcommand(names, first)) {
    reject_command_typo(names, args);
    args.insert(args.begin(), "plan");
  }
  // The command that runs, first with only the setup options the command
  // line names. A word that this smaller command does not take as written
  // (an unknown option, vLLM's spelling) builds the whole command, so every
  // message and did-you-mean sees every option.
  const std::string only = global_flag ? std::string() : args.front();
  auto app = std::make_unique<CLI::App>(k_description, "oomplan");
  Commands commands = build(*app, only, given_options(args));
  std::vector<std::string> words;
  try {
    words = read_words(*app, args, global_flag);
  } catch (const Error&) {
    words.clear();
  }
  if (words != args) {
    app = std::make_unique<CLI::App>(k_description, "oomplan");
    commands = build(*app, only, std::nullopt);
    words = read_words(*app, args, global_flag);
  }
  args = std::move(words);

  try {
    // CLI11 2.1.2 consumes the vector from the back.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app->parse(reversed);
  } catch (const CLI::ExtrasError&) {
    // CLI11's message lists them last first; remaining() keeps their order.
    const std::vector<std::string> extras = app->remaining(true);
    std::vector<std::string> shown;
    for (const std::string& word : extras) {
      shown.push_back(escape_for_message(word));
    }
    throw Error(fmt::format("unexpected argument{} '{}'; see oomplan --help",
                            extras.size() > 1 ? "s" : "",
                            fmt::join(shown, " ")));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      std::ostringstream help;
      std::ostringstream help_err;
      app->exit(e, help, help_err);
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

// errno's text, or a stand-in when the library left errno unset.
std::string reason(int error) {
  return error != 0 ? std::string(std::strerror(error))
                    : std::string("the write failed");
}

// Writes all of `text` to `fd`; false (errno set) on the first failure.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Appends to the step summary: the file is shared with the workflow's other
// steps, so it is never replaced.
void append_file(const Runtime::FileOut& file) {
  const std::string name = escape_for_message(file.path.string());
  const int fd = ::open(file.path.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    throw Error(fmt::format("cannot append to '{}': {}", name, reason(errno)));
  }
  const bool written = write_all(fd, file.text);
  const int error = errno;
  if (::close(fd) != 0 || !written) {
    throw Error(fmt::format("cannot append to '{}': {}", name,
                            reason(written ? errno : error)));
  }
}

// Writes a new file whole or not at all: a temporary file beside it, renamed
// over it once written (rename(2) is atomic within a folder), so a failed
// write keeps the old file and never leaves half an SVG.
void replace_file(const Runtime::FileOut& file) {
  const std::filesystem::path folder = file.path.has_parent_path()
                                           ? file.path.parent_path()
                                           : std::filesystem::path(".");
  std::string temp =
      (folder / ("." + file.path.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    throw Error(fmt::format("cannot write '{}': {}",
                            escape_for_message(file.path.string()),
                            reason(errno)));
  }
  // mkstemp makes 0600; a plain write would give 0666 less the umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  bool ok = ::fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, file.text);
  int error = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && ::rename(temp.c_str(), file.path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    throw Error(fmt::format("cannot write '{}': {}",
                            escape_for_message(file.path.string()),
                            reason(error)));
  }
}

// Writes what a command left for after its success (--svg, --summary).
void write_files(const Runtime& rt) {
  for (const Runtime::FileOut& file : rt.files) {
    errno = 0;
    if (file.append) {
      append_file(file);
    } else {
      replace_file(file);
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

// Every word of the command line a message echoes, cut at k_max_echo_bytes
// like every other echo (escape_for_message): one rule at the edge, so that
// no message (ours, CLI11's, a library's) prints a 100,000-byte argument.
std::string cut_echoes(std::string message,
                       const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    const std::string_view word(arg);
    const auto eq = word.find('=');
    for (const std::string_view part :
         {word, eq == std::string_view::npos ? std::string_view{}
                                             : word.substr(eq + 1)}) {
      if (part.size() <= k_max_echo_bytes) {
        continue;
      }
      const std::string cut = escape_for_message(part);
      for (auto at = message.find(part); at != std::string::npos;
           at = message.find(part, at + cut.size())) {
        message.replace(at, part.size(), cut);
      }
    }
  }
  return message;
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
      err << "oomplan: warning: " << one_line(cut_echoes(warning, args))
          << '\n';
    }
    errno = 0;
    out << rt.out;
    out.flush();
    if (!out) {
      // A full disk, a closed descriptor: the report is lost, so the run is
      // not a success whatever the verdict.
      err << "oomplan: error: cannot write the report to standard output: "
          << reason(errno) << '\n';
      return k_exit_bad_input;
    }
    return code;
  } catch (const Error& e) {
    err << "oomplan: error: " << one_line(cut_echoes(e.what(), args)) << '\n';
    return k_exit_bad_input;
  } catch (const std::exception& e) {
    // Every parser turns its library's exceptions into Error, so this is a
    // bug in oomplan (DESIGN §2: exit 3, which no input may reach).
    err << "oomplan: internal error: " << one_line(cut_echoes(e.what(), args))
        << '\n';
  } catch (...) {
    err << "oomplan: internal error: unknown exception\n";
  }
  return k_exit_internal_error;
}

}  // namespace oomplan::cli
