#include "oomplan/render/docs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Generated documentation. Each renderer walks the CommandDoc list once, in
// order, so the output is deterministic and changes only when the table
// does. The shell scripts quote every generated word (single quotes; the
// catalog's names are data), and the man page escapes roff.

namespace oomplan {
namespace {

// --- Shared helpers.

bool is_flag(const OptionDoc& o) {
  return o.value_name.empty();
}

// How a completion offers an option's value.
enum class ValueKind { none, choices, directory, file, gpu_spec, gpu_list };

ValueKind value_kind(const OptionDoc& o) {
  if (!o.choices.empty()) {
    return ValueKind::choices;
  }
  if (o.value_name == "DIR") {
    return ValueKind::directory;
  }
  if (o.value_name == "FILE") {
    return ValueKind::file;
  }
  if (o.value_name == "NxNAME") {
    return ValueKind::gpu_spec;
  }
  if (o.value_name == "GPU[,GPU...]") {
    return ValueKind::gpu_list;
  }
  return ValueKind::none;
}

std::string join(const std::vector<std::string>& words, std::string_view sep) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) {
      out += sep;
    }
    out += w;
  }
  return out;
}

// `text` in single quotes for a POSIX shell (bash, zsh; fish reads the same
// escapes inside single quotes except that it also treats \\ and \').
std::string sh_quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Fish: inside single quotes only \\ and \' are escapes.
std::string fish_quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "'";
}

std::vector<std::string> flags_of(const CommandDoc& command) {
  std::vector<std::string> out;
  for (const auto& o : command.options) {
    out.push_back(o.flag);
  }
  return out;
}

// --- roff.

// Text for a roff line: backslashes printed as such, "--" as two minus
// signs, a leading '.' or '\'' kept from being read as a request.
std::string roff(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && (i + 1 < text.size() && text[i + 1] == '-')) {
      out += "\\-\\-";
      ++i;
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) {
    out.insert(0, "\\&");
  }
  return out;
}

// A literal (an option, a command line): every hyphen a minus sign, so it
// copies and pastes.
std::string roff_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

// "\fB\-\-mode\fR {infer,full,lora,qlora}" / "\fB\-\-seq\fR \fIINT\fR".
std::string roff_option_head(const OptionDoc& o) {
  std::string head = "\\fB" + roff_literal(o.flag) + "\\fR";
  if (!o.choices.empty()) {
    head += " {" + roff_literal(join(o.choices, ",")) + "}";
  } else if (!o.value_name.empty()) {
    head += " \\fI" + roff_literal(o.value_name) + "\\fR";
  }
  return head;
}

void roff_option(std::string& out, const OptionDoc& o) {
  out += ".TP\n";
  out += roff_option_head(o) + "\n";
  std::string body = o.help;
  if (!o.default_text.empty()) {
    body += fmt::format("; default: {}", o.default_text);
  }
  out += roff(body) + "\n";
}

bool same_option(const OptionDoc& a, const OptionDoc& b) {
  return a.flag == b.flag && a.value_name == b.value_name && a.help == b.help;
}

// --- bash.

std::string bash_value_case(const OptionDoc& o) {
  switch (value_kind(o)) {
    case ValueKind::choices:
      return fmt::format("COMPREPLY=($(compgen -W {} -- \"$cur\"))",
                         sh_quote(join(o.choices, " ")));
    case ValueKind::directory:
      return "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "
             "\"$cur\"))";
    case ValueKind::file:
      return "compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "
             "\"$cur\"))";
    case ValueKind::gpu_spec:
      return "_oomplan_gpu_specs \"$cur\"";
    case ValueKind::gpu_list:
      return "_oomplan_gpu_list \"$cur\"";
    case ValueKind::none:
      break;
  }
  return "COMPREPLY=()";
}

// --- zsh.

// A description inside an _arguments spec: [, ], : and \ escaped.
std::string zsh_describe(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::string zsh_action(const OptionDoc& o) {
  switch (value_kind(o)) {
    case ValueKind::choices:
      return "(" + join(o.choices, " ") + ")";
    case ValueKind::directory:
      return "_files -/";
    case ValueKind::file:
      return "_files";
    case ValueKind::gpu_spec:
      return "_oomplan_gpu_specs";
    case ValueKind::gpu_list:
      return "_oomplan_gpu_list";
    case ValueKind::none:
      break;
  }
  return " ";
}

// One _arguments spec: '--seq[tokens per sequence]:INT: '.
std::string zsh_spec(const OptionDoc& o) {
  std::string spec = o.flag + "[" + zsh_describe(o.help) + "]";
  if (!is_flag(o)) {
    spec += ":" + zsh_describe(o.value_name) + ":" + zsh_action(o);
  }
  return sh_quote(spec);
}

std::string zsh_function_name(const std::string& program,
                              const std::string& command) {
  std::string name = "_" + program + "_" + command;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// --- Synopsis.

// One positional as a synopsis shows it (`shown` is its name, formatted):
// MODEL, FILE... (one or more), [MODEL] (optional).
std::string positional_word(const PositionalDoc& p, const std::string& shown) {
  // Appended piece by piece: GCC 12 takes "[" + std::string&& for an
  // overlapping memcpy (-Wrestrict).
  std::string word;
  if (!p.required) {
    word += '[';
  }
  word += shown;
  if (p.repeated) {
    word += "...";
  }
  if (!p.required) {
    word += ']';
  }
  return word;
}

// "\fBoomplan\fR \fBcheck\fR \fIFILE\fR... [\fIoptions\fR]".
std::string roff_synopsis(const std::string& program, const CommandDoc& c,
                          bool named) {
  std::string line = program;
  if (named) {
    line += " \\fB" + roff_literal(c.name) + "\\fR";
  }
  for (const auto& p : c.positionals) {
    line += ' ';
    line += positional_word(p, "\\fI" + roff_literal(p.name) + "\\fR");
  }
  if (!c.options.empty()) {
    line += " [\\fIoptions\\fR]";
  }
  return line;
}

// --- The man page, section by section.

void man_head(std::string& out, const ManPage& page) {
  fmt::format_to(std::back_inserter(out),
                 ".\\\" Generated from the option table by {}_gen_docs; do "
                 "not edit.\n",
                 page.program);
  std::string upper = page.program;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](char c) { return c >= 'a' && c <= 'z' ? c - 32 : c; });
  fmt::format_to(std::back_inserter(out),
                 ".TH {} 1 \"{}\" \"{} {}\" \"User Commands\"\n", upper,
                 page.date, page.program, page.version);
  out += ".SH NAME\n";
  out += roff_literal(page.program) + " \\- " + roff(page.summary) + "\n";
}

// The default command's synopsis without its name, then each command's,
// then the global flags.
void man_synopsis(std::string& out, const std::vector<CommandDoc>& commands,
                  const ManPage& page, const std::string& program) {
  out += ".SH SYNOPSIS\n";
  if (!commands.empty()) {
    out += roff_synopsis(program, commands.front(), false) + "\n.br\n";
  }
  for (const auto& c : commands) {
    out += roff_synopsis(program, c, true) + "\n.br\n";
  }
  std::vector<std::string> globals;
  for (const auto& g : page.global_options) {
    globals.push_back("\\fB" + roff_literal(g.flag) + "\\fR");
  }
  out += program + " " + join(globals, " | ") + "\n";
}

// A command's options split against those an earlier command showed: its
// own, and the groups of the shared ones (in first-appearance order).
struct OwnOptions {
  std::vector<const OptionDoc*> own;
  std::vector<std::string> shared_groups;
};

OwnOptions own_options(const CommandDoc& c,
                       const std::vector<OptionDoc>& shown) {
  OwnOptions split;
  for (const auto& o : c.options) {
    const bool seen =
        std::any_of(shown.begin(), shown.end(),
                    [&](const OptionDoc& s) { return same_option(s, o); });
    if (!seen) {
      split.own.push_back(&o);
    } else if (std::find(split.shared_groups.begin(), split.shared_groups.end(),
                         o.group) == split.shared_groups.end()) {
      split.shared_groups.push_back(o.group);
    }
  }
  return split;
}

// The first command's options, one subsection per group.
void man_grouped_options(std::string& out,
                         const std::vector<const OptionDoc*>& own) {
  std::vector<std::string> groups;
  for (const OptionDoc* o : own) {
    if (std::find(groups.begin(), groups.end(), o->group) == groups.end()) {
      groups.push_back(o->group);
    }
  }
  for (const auto& group : groups) {
    out += ".SS \"" + roff(group) + "\"\n";
    for (const OptionDoc* o : own) {
      if (o->group == group) {
        roff_option(out, *o);
      }
    }
  }
}

// A later command under its own heading: which groups above it takes, then
// its own options.
void man_command_options(std::string& out, const ManPage& page,
                         const CommandDoc& c, const OwnOptions& split,
                         const std::vector<OptionDoc>& shown) {
  out += ".SS \"" + roff_literal(page.program + " " + c.name) + "\"\n";
  if (!split.shared_groups.empty()) {
    std::string list;
    for (std::size_t i = 0; i < split.shared_groups.size(); ++i) {
      if (i > 0) {
        list += i + 1 == split.shared_groups.size() ? " and " : ", ";
      }
      list += split.shared_groups[i];
    }
    // An own option that replaces one shown above (fit's --gpus).
    std::vector<std::string> replaced;
    for (const OptionDoc* o : split.own) {
      if (std::any_of(shown.begin(), shown.end(),
                      [&](const OptionDoc& s) { return s.flag == o->flag; })) {
        replaced.push_back(o->flag);
      }
    }
    out +=
        ".PP\n" +
        roff(fmt::format("Takes the {} options above{}{}", list,
                         replaced.empty() ? ""
                                          : fmt::format(" (with its own {})",
                                                        join(replaced, ", ")),
                         split.own.empty() ? "." : ", and:")) +
        "\n";
  }
  for (const OptionDoc* o : split.own) {
    roff_option(out, *o);
  }
}

// OPTIONS: the first command's options by group; each later command's
// options that differ from those already shown under its own heading.
void man_options(std::string& out, const std::vector<CommandDoc>& commands,
                 const ManPage& page) {
  out += ".SH OPTIONS\n";
  std::vector<OptionDoc> shown;
  for (std::size_t ci = 0; ci < commands.size(); ++ci) {
    const OwnOptions split = own_options(commands[ci], shown);
    if (ci == 0) {
      man_grouped_options(out, split.own);
    } else {
      man_command_options(out, page, commands[ci], split, shown);
    }
    for (const OptionDoc* o : split.own) {
      shown.push_back(*o);
    }
  }
  if (!page.global_options.empty()) {
    out += ".SS \"General\"\n";
    for (const auto& g : page.global_options) {
      roff_option(out, g);
    }
  }
}

void man_definitions(
    std::string& out, std::string_view title,
    const std::vector<std::pair<std::string, std::string>>& items,
    bool literal) {
  if (items.empty()) {
    return;
  }
  out += ".SH " + std::string(title) + "\n";
  for (const auto& [term, text] : items) {
    out += ".TP\n";
    out += literal ? "\\fB" + roff_literal(term) + "\\fR\n" : roff(term) + "\n";
    out += roff(text) + "\n";
  }
}

void man_see_also(std::string& out, const ManPage& page) {
  if (page.see_also.empty()) {
    return;
  }
  out += ".SH \"SEE ALSO\"\n";
  std::vector<std::string> refs;
  for (const auto& ref : page.see_also) {
    const auto paren = ref.find('(');
    refs.push_back(paren == std::string::npos
                       ? "\\fB" + roff_literal(ref) + "\\fR"
                       : "\\fB" + roff_literal(ref.substr(0, paren)) + "\\fR" +
                             ref.substr(paren));
  }
  out += join(refs, ",\n") + "\n";
}

// --- bash, part by part.

// The header, the catalog's words and the --gpus helpers.
std::string bash_prelude(const std::string& program, const std::string& fn,
                         const CompletionWords& words) {
  std::string out;
  fmt::format_to(std::back_inserter(out),
                 "# bash completion for {0}: generated from its option table "
                 "by {0}_gen_docs; do\n# not edit.\n\n",
                 program);
  fmt::format_to(std::back_inserter(out),
                 "{}_models={}\n{}_gpus={}\n{}_instances={}\n\n", fn,
                 sh_quote(join(words.models, " ")), fn,
                 sh_quote(join(words.gpus, " ")), fn,
                 sh_quote(join(words.instances, " ")));

  // --gpus NxNAME: counts of one node, then the card; or an instance.
  fmt::format_to(
      std::back_inserter(out),
      R"(# NxNAME card specs and instance names for the word being completed.
{0}_gpu_specs() {{
  local cur=$1 n name
  local -a out=()
  if [[ $cur =~ ^([0-9]+)x ]]; then
    n=${{BASH_REMATCH[1]}}
    for name in ${0}_gpus; do out+=("${{n}}x$name"); done
  else
    for n in 1 2 4 8; do
      for name in ${0}_gpus; do out+=("${{n}}x$name"); done
    done
    out+=(${0}_instances)
  fi
  COMPREPLY=($(compgen -W "${{out[*]}}" -- "$cur"))
}}

# A comma list of card names: completes its last item.
{0}_gpu_list() {{
  local cur=$1 head=""
  if [[ $cur == *,* ]]; then
    head=${{cur%,*}},
    cur=${{cur##*,}}
  fi
  COMPREPLY=($(compgen -P "$head" -W "${0}_gpus" -- "$cur"))
}}

)",
      fn);
  return out;
}

// Per command: its options, and (between spaces) those that take a value.
std::string bash_option_lists(const std::string& fn,
                              const std::vector<CommandDoc>& commands) {
  std::string out;
  for (const auto& c : commands) {
    std::vector<std::string> value_flags;
    for (const auto& o : c.options) {
      if (!is_flag(o)) {
        value_flags.push_back(o.flag);
      }
    }
    out += fn + "_" + c.name + "_options=" + sh_quote(join(flags_of(c), " ")) +
           "\n";
    out += fn + "_" + c.name +
           "_values=" + sh_quote(" " + join(value_flags, " ") + " ") + "\n";
  }
  return out + "\n";
}

// The completion function's start: which command the line runs, or the
// commands and models while none is given.
std::string bash_find_command(const std::string& program, const std::string& fn,
                              const std::vector<CommandDoc>& commands) {
  std::vector<std::string> names;
  for (const auto& c : commands) {
    names.push_back(c.name);
  }
  const std::string first = commands.empty() ? "" : commands.front().name;
  const std::string first_values = "$" + fn + "_" + first + "_values";
  std::string out = fn + "() {\n";
  out +=
      "  local cur=${COMP_WORDS[COMP_CWORD]} "
      "prev=${COMP_WORDS[COMP_CWORD-1]}\n";
  out += "  local cmd=\"\" word i start=0 positionals=0 skip=0 opts values\n";
  out +=
      "  # The command: the first word that names one, else the default one "
      "once\n  # a model is given (" +
      program + " MODEL is " + program + " " + first + " MODEL).\n";
  out += "  for ((i = 1; i < COMP_CWORD; i++)); do\n";
  out += "    word=${COMP_WORDS[i]}\n";
  out += "    if ((skip)); then\n      skip=0\n      continue\n    fi\n";
  out += "    case $word in\n";
  out += "      " + join(names, "|") + ")\n";
  out +=
      "        cmd=$word\n        start=$((i + 1))\n        break\n        "
      ";;\n";
  out += "      -*)\n        [[ " + first_values +
         " == *\" $word \"* ]] && skip=1\n        ;;\n";
  out += "      *)\n        cmd=" + first +
         "\n        start=$i\n        break\n        ;;\n";
  out += "    esac\n  done\n";
  out += "  if [[ -z $cmd ]]; then\n";
  out += "    if [[ $cur != -* && " + first_values +
         " != *\" $prev \"* ]]; then\n";
  out += "      compopt -o filenames 2>/dev/null\n";
  out += "      COMPREPLY=($(compgen -W " + sh_quote(join(names, " ") + " ") +
         "\"$" + fn + "_models\" -- \"$cur\") $(compgen -f -- \"$cur\"))\n";
  out += "      return\n    fi\n";
  out += "    # Options before MODEL belong to the default command.\n";
  out += "    cmd=" + first + "\n    start=$COMP_CWORD\n";
  out += "  fi\n";
  return out;
}

// The value of the option before the cursor, per command; else the
// command's options and value-taking flags.
std::string bash_option_values(const std::string& fn,
                               const std::vector<CommandDoc>& commands) {
  std::string out = "  case $cmd in\n";
  for (const auto& c : commands) {
    out += "    " + c.name + ")\n";
    bool any_value = false;
    for (const auto& o : c.options) {
      any_value = any_value || !is_flag(o);
    }
    if (any_value) {
      out += "      case $prev in\n";
      for (const auto& o : c.options) {
        if (!is_flag(o)) {
          out += "        " + o.flag + ")\n          " + bash_value_case(o) +
                 "\n          return\n          ;;\n";
        }
      }
      out += "      esac\n";
    }
    out += "      opts=$" + fn + "_" + c.name + "_options\n";
    out += "      values=$" + fn + "_" + c.name + "_values\n";
    out += "      ;;\n";
  }
  out += "  esac\n";
  return out;
}

// Options for a word starting with '-'; else the command's positionals,
// while it expects more (FILE... always does).
std::string bash_positionals(const std::string& fn,
                             const std::vector<CommandDoc>& commands,
                             const std::vector<OptionDoc>& globals) {
  std::vector<std::string> global_flags;
  for (const auto& g : globals) {
    global_flags.push_back(g.flag);
  }
  std::string out = "  if [[ $cur == -* ]]; then\n";
  out += "    ((COMP_CWORD == 1)) && opts+=" +
         sh_quote(" " + join(global_flags, " ")) + "\n";
  out += "    COMPREPLY=($(compgen -W \"$opts --help\" -- \"$cur\"))\n";
  out += "    return\n  fi\n";
  out += "  # The positionals given after the command.\n";
  out += "  skip=0\n";
  out += "  for ((i = start; i < COMP_CWORD; i++)); do\n";
  out += "    word=${COMP_WORDS[i]}\n";
  out +=
      "    if ((skip)); then\n      skip=0\n    elif [[ $word == -* ]]; then\n";
  out += "      [[ $values == *\" $word \"* ]] && skip=1\n";
  out += "    else\n      ((positionals++))\n    fi\n";
  out += "  done\n";
  out += "  case $cmd in\n";
  for (const auto& c : commands) {
    if (c.positionals.empty()) {
      continue;
    }
    const bool model = c.positionals.front().name == "MODEL";
    const std::string reply =
        model ? "COMPREPLY=($(compgen -W \"$" + fn +
                    "_models\" -- \"$cur\") $(compgen -f -- \"$cur\"))\n"
              : "COMPREPLY=($(compgen -f -- \"$cur\"))\n";
    out += "    " + c.name + ")\n";
    if (c.positionals.back().repeated) {
      out += "      compopt -o filenames 2>/dev/null\n      " + reply;
      out += "      ;;\n";
      continue;
    }
    out += fmt::format("      if ((positionals < {})); then\n",
                       c.positionals.size());
    out += "        compopt -o filenames 2>/dev/null\n        " + reply;
    out += "      fi\n      ;;\n";
  }
  out += "  esac\n";
  return out;
}

// --- zsh, part by part.

std::string zsh_prelude(const std::string& program, const std::string& fn,
                        const CompletionWords& words) {
  std::string out;
  fmt::format_to(std::back_inserter(out),
                 "#compdef {0}\n# zsh completion for {0}: generated from its "
                 "option table by {0}_gen_docs; do\n# not edit.\n\n",
                 program);
  fmt::format_to(std::back_inserter(out), R"({0}_models() {{
  local -a models
  models=({1})
  _alternative 'models:model:compadd -a models' 'files:file:_files'
}}

{0}_gpu_specs() {{
  local -a gpus specs instances
  gpus=({2})
  instances=({3})
  if [[ $PREFIX == [0-9]##x* ]]; then
    specs=(${{PREFIX%%x*}}x${{^gpus}})
  else
    specs=({{1,2,4,8}}x${{^gpus}} $instances)
  fi
  compadd -a specs
}}

{0}_gpu_list() {{
  local -a gpus
  gpus=({2})
  _sequence compadd -a gpus
}}

)",
                 fn, join(words.models, " "), join(words.gpus, " "),
                 join(words.instances, " "));
  return out;
}

// One positional's _arguments spec: "1:LOG:_files", "2::MODEL:_oomplan_models"
// (optional), "*:FILE:_files" (one or more).
std::string zsh_positional_spec(const std::string& fn, const PositionalDoc& p,
                                std::size_t index) {
  const std::string action = p.name == "MODEL" ? fn + "_models" : "_files";
  const std::string position =
      p.repeated ? "*" : std::to_string(index + 1) + (p.required ? "" : ":");
  return sh_quote(
      fmt::format("{}:{}:{}", position, zsh_describe(p.name), action));
}

std::string zsh_command_function(const std::string& program,
                                 const std::string& fn, const CommandDoc& c) {
  std::string out = zsh_function_name(program, c.name) + "() {\n";
  out += "  _arguments -s \\\n";
  out += "    '(- *)'{-h,--help}'[print the help and exit]' \\\n";
  for (const auto& o : c.options) {
    out += "    " + zsh_spec(o) + " \\\n";
  }
  for (std::size_t i = 0; i < c.positionals.size(); ++i) {
    out += "    " + zsh_positional_spec(fn, c.positionals[i], i) + " \\\n";
  }
  out += "    && return 0\n}\n\n";
  return out;
}

// The entry function: a command or a model first, then that command's
// function.
std::string zsh_dispatch(const std::string& program, const std::string& fn,
                         const std::vector<CommandDoc>& commands,
                         const std::vector<OptionDoc>& globals) {
  const std::string first = commands.empty() ? "" : commands.front().name;
  std::string out = fn + "() {\n";
  out += "  local curcontext=$curcontext state line\n";
  out += "  local -a commands\n";
  out += "  commands=(\n";
  for (const auto& c : commands) {
    out += "    " + sh_quote(c.name + ":" + zsh_describe(c.summary)) + "\n";
  }
  out += "  )\n";
  out += "  _arguments -C \\\n";
  for (const auto& g : globals) {
    out += "    " +
           sh_quote("(- *)" + g.flag + "[" + zsh_describe(g.help) + "]") +
           " \\\n";
  }
  out += "    '1: :->command' \\\n";
  out += "    '*:: :->args' \\\n";
  out += "    && return 0\n";
  out += "  case $state in\n";
  out += "    command)\n";
  out +=
      "      _alternative 'commands:command:_describe -t commands command "
      "commands' \\\n";
  out += "        'models:model:" + fn + "_models'\n";
  out += "      ;;\n";
  out += "    args)\n";
  out += "      case $words[1] in\n";
  for (const auto& c : commands) {
    out += "        " + c.name + ") " + zsh_function_name(program, c.name) +
           " ;;\n";
  }
  // `oomplan MODEL ...`: the model is words[1]; the default command's
  // options follow it.
  out += "        *) " + zsh_function_name(program, first + "_after_model") +
         " ;;\n";
  out += "      esac\n";
  out += "      ;;\n";
  out += "  esac\n";
  out += "}\n\n";
  return out;
}

// --- fish, part by part.

std::string fish_gpu_helpers(const std::string& program, const std::string& fn,
                             const CompletionWords& words);

// The header, each command's value-taking options and the helper functions.
std::string fish_prelude(const std::string& program, const std::string& fn,
                         const std::vector<CommandDoc>& commands,
                         const CompletionWords& words) {
  std::vector<std::string> names;
  for (const auto& c : commands) {
    names.push_back(c.name);
  }
  const std::string first = commands.empty() ? "" : commands.front().name;
  std::string out;
  fmt::format_to(std::back_inserter(out),
                 "# fish completion for {0}: generated from its option table "
                 "by {0}_gen_docs; do\n# not edit.\n\n",
                 program);
  // Per command, the options that take a value (to tell values from
  // positionals).
  for (const auto& c : commands) {
    std::vector<std::string> value_flags;
    for (const auto& o : c.options) {
      if (!is_flag(o)) {
        value_flags.push_back(o.flag);
      }
    }
    out += fmt::format("set -g {}_{}_values {}\n", fn, c.name,
                       join(value_flags, " "));
  }
  fmt::format_to(std::back_inserter(out), R"(
# Prints the command (empty before one or a model is given) and the number
# of positionals after it; `{5} MODEL` is `{5} {1} MODEL`.
function {0}_scan
    set -l command ''
    set -l count 0
    set -l skip 0
    for word in (commandline -opc)[2..-1]
        if test $skip -eq 1
            set skip 0
            continue
        end
        if test -z "$command"
            switch $word
                case {2}
                    set command $word
                case '-*'
                    contains -- $word ${0}_{1}_values; and set skip 1
                case '*'
                    set command {1}
                    set count 1
            end
            continue
        end
        if string match -q -- '-*' $word
            set -l values {0}_$command"_values"
            contains -- $word $$values; and set skip 1
            continue
        end
        set count (math $count + 1)
    end
    echo $command
    echo $count
end

function {0}_no_command
    set -l state ({0}_scan)
    test -z "$state[1]"
end

# True for the command in $argv[1] (the default one also before MODEL).
function {0}_using
    set -l state ({0}_scan)
    test "$state[1]" = $argv[1]; or begin
        test -z "$state[1]"; and test $argv[1] = {1}
    end
end

# True while command $argv[1] still expects one of its $argv[2] positionals.
function {0}_wants_positional
    set -l state ({0}_scan)
    test "$state[1]" = $argv[1]; and test $state[2] -lt $argv[2]
end

)",
                 fn, first, join(names, " "), join(words.gpus, " "),
                 join(words.instances, " "), program);
  return out + fish_gpu_helpers(program, fn, words);
}

// The --gpus helpers: NxNAME card specs and instances, or a comma list.
std::string fish_gpu_helpers(const std::string& program, const std::string& fn,
                             const CompletionWords& words) {
  return fmt::format(R"(function {0}_gpu_specs
    set -l token (commandline -ct)
    set -l gpus {1}
    set -l counts 1 2 4 8
    if string match -qr '^[0-9]+x' -- $token
        set counts (string replace -r 'x.*' '' -- $token)
    end
    for n in $counts
        for gpu in $gpus
            echo $n"x"$gpu
        end
    end
    if not string match -qr '^[0-9]+x' -- $token
        printf '%s\n' {2}
    end
end

function {0}_gpu_list
    set -l head (string replace -r '[^,]*$' '' -- (commandline -ct))
    printf "$head%s\n" {1}
end

complete -c {3} -f
)",
                     fn, join(words.gpus, " "), join(words.instances, " "),
                     program);
}

// One option of a command: its value's completion and its help.
std::string fish_option(const std::string& program, const std::string& fn,
                        const CommandDoc& c, const OptionDoc& o) {
  std::string line =
      fmt::format("complete -c {} -n {} -l {}", program,
                  fish_quote(fn + "_using " + c.name), o.flag.substr(2));
  if (!is_flag(o)) {
    line += " -r";
    switch (value_kind(o)) {
      case ValueKind::choices:
        line += " -x -a " + fish_quote(join(o.choices, " "));
        break;
      case ValueKind::directory:
        line += " -x -a " + fish_quote("(__fish_complete_directories)");
        break;
      case ValueKind::file:
        line += " -F";
        break;
      case ValueKind::gpu_spec:
        line += " -x -a " + fish_quote("(" + fn + "_gpu_specs)");
        break;
      case ValueKind::gpu_list:
        line += " -x -a " + fish_quote("(" + fn + "_gpu_list)");
        break;
      case ValueKind::none:
        line += " -x";
        break;
    }
  }
  return line + " -d " + fish_quote(o.help) + "\n";
}

// A command's positionals: models and files for MODEL, files otherwise,
// while it expects more (FILE... always does).
std::string fish_positionals(const std::string& program, const std::string& fn,
                             const CommandDoc& c,
                             const CompletionWords& words) {
  if (c.positionals.empty()) {
    return "";
  }
  const std::string wants =
      c.positionals.back().repeated
          ? fish_quote(fn + "_using " + c.name)
          : fish_quote(fmt::format("{}_wants_positional {} {}", fn, c.name,
                                   c.positionals.size()));
  const bool model = c.positionals.front().name == "MODEL";
  return fmt::format("complete -c {} -n {} -F{}\n", program, wants,
                     model ? " -a " + fish_quote(join(words.models, " ")) : "");
}

// --- Markdown.

// Text for a table cell: a '|' would end the cell, '*' and '<' would start
// emphasis or HTML.
std::string markdown_cell(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '|' || c == '*' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '<') {
      out += "&lt;";
    } else {
      out += c;
    }
  }
  return out;
}

// A code span for a table cell (GitHub reads "\|" inside it as '|').
std::string markdown_code(std::string_view text) {
  std::string out = "`";
  for (const char c : text) {
    if (c == '|') {
      out += '\\';
    }
    out += c;
  }
  return out + "`";
}

// The table of the options of one help group.
std::string markdown_option_table(const CommandDoc& command,
                                  const std::string& group) {
  std::string out = "**" + markdown_cell(group) + "**\n\n";
  out += "| option | value | default | meaning |\n|---|---|---|---|\n";
  for (const auto& o : command.options) {
    if (o.group != group) {
      continue;
    }
    const std::string value =
        !o.choices.empty()
            ? markdown_code("{" + join(o.choices, ",") + "}")
            : (o.value_name.empty() ? std::string()
                                    : markdown_code(o.value_name));
    const std::string default_text =
        o.default_text.empty() ? std::string() : markdown_code(o.default_text);
    out += fmt::format("| {} | {} | {} | {} |\n", markdown_code(o.flag), value,
                       default_text, markdown_cell(o.help));
  }
  return out;
}

// "<!-- oomplan-options:begin plan -->" -> "plan"; empty when `line` is not
// a marker of that kind.
std::string_view marker_name(std::string_view line, std::string_view kind) {
  constexpr std::string_view k_close = " -->";
  if (!line.starts_with(kind) || !line.ends_with(k_close) ||
      line.size() < kind.size() + k_close.size()) {
    return {};
  }
  return line.substr(kind.size(), line.size() - kind.size() - k_close.size());
}

}  // namespace

std::string synopsis_text(const CommandDoc& command, bool named) {
  std::string line = named ? command.name : std::string();
  const auto add = [&line](const std::string& word) {
    if (!line.empty()) {
      line += ' ';
    }
    line += word;
  };
  for (const auto& p : command.positionals) {
    add(positional_word(p, p.name));
  }
  if (!command.options.empty()) {
    add("[options]");
  }
  return line;
}

std::string render_man_page(const std::vector<CommandDoc>& commands,
                            const ManPage& page) {
  std::string out;
  man_head(out, page);
  const std::string program = "\\fB" + roff_literal(page.program) + "\\fR";
  man_synopsis(out, commands, page, program);

  out += ".SH DESCRIPTION\n";
  for (const auto& paragraph : page.description) {
    out += ".PP\n" + roff(paragraph) + "\n";
  }

  out += ".SH COMMANDS\n";
  for (const auto& c : commands) {
    out += ".TP\n" +
           roff_synopsis(program, c, true).substr(program.size() + 1) + "\n";
    out += roff(c.summary) + "\n";
  }

  man_options(out, commands, page);
  man_definitions(out, "EXIT STATUS", page.exit_status, false);
  man_definitions(out, "ENVIRONMENT", page.environment, true);
  man_definitions(out, "FILES", page.files, true);
  man_definitions(out, "EXAMPLES", page.examples, true);
  man_see_also(out, page);
  return out;
}

std::string render_bash_completion(const std::string& program,
                                   const std::vector<CommandDoc>& commands,
                                   const std::vector<OptionDoc>& globals,
                                   const CompletionWords& words) {
  const std::string fn = "_" + program;
  std::string out = bash_prelude(program, fn, words);
  out += bash_option_lists(fn, commands);
  out += bash_find_command(program, fn, commands);
  out += bash_option_values(fn, commands);
  out += bash_positionals(fn, commands, globals);
  out += "}\n\n";
  out += "complete -F " + fn + " " + program + "\n";
  return out;
}

std::string render_zsh_completion(const std::string& program,
                                  const std::vector<CommandDoc>& commands,
                                  const std::vector<OptionDoc>& globals,
                                  const CompletionWords& words) {
  const std::string fn = "_" + program;
  std::string out = zsh_prelude(program, fn, words);
  for (const auto& c : commands) {
    out += zsh_command_function(program, fn, c);
  }
  out += zsh_dispatch(program, fn, commands, globals);
  if (!commands.empty()) {
    const std::string first = commands.front().name;
    out += zsh_function_name(program, first + "_after_model") + "() {\n";
    out += "  _arguments -s \\\n";
    for (const auto& o : commands.front().options) {
      out += "    " + zsh_spec(o) + " \\\n";
    }
    out += "    && return 0\n}\n\n";
  }
  out += fn + " \"$@\"\n";
  return out;
}

std::string render_fish_completion(const std::string& program,
                                   const std::vector<CommandDoc>& commands,
                                   const std::vector<OptionDoc>& globals,
                                   const CompletionWords& words) {
  const std::string fn = "__" + program;
  std::string out = fish_prelude(program, fn, commands, words);
  for (const auto& g : globals) {
    out += fmt::format("complete -c {} -n {} -l {} -d {}\n", program,
                       fish_quote(fn + "_no_command"), g.flag.substr(2),
                       fish_quote(g.help));
  }
  for (const auto& c : commands) {
    out += fmt::format("complete -c {} -n {} -a {} -d {}\n", program,
                       fish_quote(fn + "_no_command"), fish_quote(c.name),
                       fish_quote(c.summary));
  }
  out += fmt::format("complete -c {} -n {} -a {} -d model\n", program,
                     fish_quote(fn + "_no_command"),
                     fish_quote(join(words.models, " ")));
  out += fmt::format("complete -c {} -n {} -F\n", program,
                     fish_quote(fn + "_no_command"));
  for (const auto& c : commands) {
    for (const auto& o : c.options) {
      out += fish_option(program, fn, c, o);
    }
    out += fish_positionals(program, fn, c, words);
  }
  return out;
}

std::string render_markdown_reference(const std::string& program,
                                      const std::vector<CommandDoc>& commands,
                                      const CommandDoc& command) {
  std::string out =
      "<!-- Generated from the CLI's option texts by `oomplan_gen_docs "
      "--pages docs`; do not edit. -->\n\n";
  const bool is_default =
      !commands.empty() && commands.front().name == command.name;
  if (is_default) {
    out += "    " + program + " " + synopsis_text(command, false) + "\n";
  }
  out += "    " + program + " " + synopsis_text(command, true) + "\n\n";
  out += markdown_cell(command.summary) + ".\n\n";
  if (!command.positionals.empty()) {
    out += "| argument | meaning |\n|---|---|\n";
    for (const auto& p : command.positionals) {
      out += "| " + markdown_code(positional_word(p, p.name)) + " | " +
             markdown_cell(p.help) + " |\n";
    }
    out += "\n";
  }
  std::vector<std::string> groups;
  for (const auto& o : command.options) {
    if (std::find(groups.begin(), groups.end(), o.group) == groups.end()) {
      groups.push_back(o.group);
    }
  }
  for (const auto& group : groups) {
    out += markdown_option_table(command, group) + "\n";
  }
  out +=
      "`" + program + " " + command.name + " --help` prints the same list.\n";
  return out;
}

FilledPage fill_reference_sections(std::string_view page,
                                   const std::string& program,
                                   const std::vector<CommandDoc>& commands) {
  FilledPage filled;
  std::size_t at = 0;
  while (at < page.size()) {
    const std::size_t eol = page.find('\n', at);
    const std::size_t next =
        eol == std::string_view::npos ? page.size() : eol + 1;
    const std::string_view line = page.substr(at, next - at);
    filled.text += line;
    at = next;
    const std::string name(marker_name(
        line.substr(0, line.size() - (line.ends_with('\n') ? 1 : 0)),
        k_reference_begin));
    if (name.empty()) {
      continue;
    }
    const auto command =
        std::find_if(commands.begin(), commands.end(),
                     [&](const CommandDoc& c) { return c.name == name; });
    const std::string end_line = std::string(k_reference_end) + name + " -->\n";
    const std::size_t end = page.find(end_line, at);
    if (command == commands.end() || end == std::string_view::npos ||
        (end != at && page[end - 1] != '\n')) {
      filled.problems.push_back(
          command == commands.end()
              ? fmt::format("no command '{}'", name)
              : fmt::format("no line '{}'",
                            end_line.substr(0, end_line.size() - 1)));
      continue;
    }
    filled.commands.push_back(name);
    filled.text += render_markdown_reference(program, commands, *command);
    filled.text += end_line;
    at = end + end_line.size();
  }
  return filled;
}

// --- oomplan's own description.

std::vector<OptionDoc> oomplan_global_options() {
  return {
      {"--help", "", "print the help and exit", "", {}, "General"},
      {"--version", "", "print the version and exit", "", {}, "General"},
  };
}

ManPage oomplan_man_page(const std::string& version, const std::string& date) {
  ManPage page;
  page.program = "oomplan";
  page.version = version;
  page.date = date;
  page.summary =
      "predict whether a large language model fits in GPU memory, and what "
      "to change if not";
  page.description = {
      "oomplan plans a training or inference job before it is launched. It "
      "computes the memory of the most loaded GPU by component (weights, KV "
      "cache, activations, logits, gradients, optimizer states, runtime "
      "overhead, allocator fragmentation) the way the engines allocate it "
      "(PyTorch, DeepSpeed, FSDP, vLLM, bitsandbytes), says whether it fits "
      "and lists the fixes an expert would make, each priced again by the "
      "same model.",
      "MODEL is a catalog name or alias (oomplan models lists them), a "
      "Hugging Face id, or a path to a Hugging Face config.json or to a model "
      "folder holding one. oomplan MODEL [options] is oomplan plan MODEL "
      "[options]; without --gpus, plan lists for each common GPU the fewest "
      "that fit.",
      "Reports go to standard output and errors to standard error. --json "
      "prints the same content as one JSON document; its \"schema\" key "
      "names the schema id (oomplan.plan/1, oomplan.fit/1, oomplan.sizing/1, "
      "oomplan.models/1, oomplan.gpus/1, oomplan.check/1, "
      "oomplan.diagnosis/1), each described by a JSON Schema file (see "
      "FILES).",
  };
  page.global_options = oomplan_global_options();
  page.exit_status = {
      {"0",
       "the plan fits (without --gpus: some common GPU fits; fit: some setup "
       "fits; check: every plan fits with the required headroom; diagnose: "
       "an out-of-memory message was found and explained; models, gpus, "
       "--help, --version)"},
      {"1",
       "the plan does not fit (with --engine vllm: also when vLLM would refuse "
       "to start; check: some plan does not fit or keeps less than "
       "--min-headroom; diagnose: the log holds no out-of-memory message)"},
      {"2", "bad input or usage; the message names the place and the fix"},
      {"3", "an internal error, a bug in oomplan"},
  };
  page.environment = {
      {"NO_COLOR",
       "when set to a non-empty value, the text report has no colour "
       "(no-color.org)"},
      {"TERM", "dumb: no colour"},
  };
  page.files = {
      {"share/oomplan/schema/*.schema.json",
       "the JSON Schemas of the --json output, one per schema id, under the "
       "installation prefix (/usr for the Debian package)"},
      {"share/doc/oomplan/LICENSE", "the licence"},
  };
  page.examples = {
      {"oomplan llama3-70b --gpus 4xA100-80 --seq 8192",
       "serve Llama 3 70B on four A100 80GB cards at 8192 tokens"},
      {"oomplan llama3-70b --gpus 8xH100 --mode full --seq 4096 --zero 3",
       "full fine-tuning with ZeRO-3"},
      {"oomplan llama3-70b --gpus 2xRTX4090 --mode qlora --seq 2048",
       "QLoRA on two consumer cards"},
      {"oomplan llama3-70b --gpus 4xL40S --engine vllm --max-model-len 8192",
       "vLLM's own start-up profile"},
      {"oomplan fit llama3-70b --mode full --seq 8192",
       "search the setups that fit, cheapest first"},
      {"oomplan llama3-70b --seq 8192", "the fewest GPUs of each common type"},
      {"oomplan ./my-model/config.json --gpus 1xH100",
       "any Hugging Face config"},
  };
  page.see_also = {"nvidia-smi(1)"};
  return page;
}

}  // namespace oomplan
