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

}  // namespace

std::string render_man_page(const std::vector<CommandDoc>& commands,
                            const ManPage& page) {
  std::string out;
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

  out += ".SH SYNOPSIS\n";
  const std::string program = "\\fB" + roff_literal(page.program) + "\\fR";
  auto synopsis = [&](const CommandDoc& c, bool named) {
    std::string line = program;
    if (named) {
      line += " \\fB" + roff_literal(c.name) + "\\fR";
    }
    for (const auto& p : c.positionals) {
      line += " \\fI" + roff_literal(p) + "\\fR";
    }
    if (!c.options.empty()) {
      line += " [\\fIoptions\\fR]";
    }
    return line;
  };
  if (!commands.empty()) {
    out += synopsis(commands.front(), false) + "\n.br\n";
  }
  for (const auto& c : commands) {
    out += synopsis(c, true) + "\n.br\n";
  }
  std::vector<std::string> globals;
  for (const auto& g : page.global_options) {
    globals.push_back("\\fB" + roff_literal(g.flag) + "\\fR");
  }
  out += program + " " + join(globals, " | ") + "\n";

  out += ".SH DESCRIPTION\n";
  for (const auto& paragraph : page.description) {
    out += ".PP\n" + roff(paragraph) + "\n";
  }

  out += ".SH COMMANDS\n";
  for (const auto& c : commands) {
    out += ".TP\n" + synopsis(c, true).substr(program.size() + 1) + "\n";
    out += roff(c.summary) + "\n";
  }

  // OPTIONS: the first command's options by group; each later command's
  // options that differ from those already shown under its own heading.
  out += ".SH OPTIONS\n";
  std::vector<OptionDoc> shown;
  for (std::size_t ci = 0; ci < commands.size(); ++ci) {
    const CommandDoc& c = commands[ci];
    std::vector<const OptionDoc*> own;
    std::vector<std::string> shared_groups;
    for (const auto& o : c.options) {
      const bool seen =
          std::any_of(shown.begin(), shown.end(),
                      [&](const OptionDoc& s) { return same_option(s, o); });
      if (!seen) {
        own.push_back(&o);
      } else if (std::find(shared_groups.begin(), shared_groups.end(),
                           o.group) == shared_groups.end()) {
        shared_groups.push_back(o.group);
      }
    }
    if (ci == 0) {
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
    } else {
      out += ".SS \"" + roff_literal(page.program + " " + c.name) + "\"\n";
      if (!shared_groups.empty()) {
        std::string list;
        for (std::size_t i = 0; i < shared_groups.size(); ++i) {
          if (i > 0) {
            list += i + 1 == shared_groups.size() ? " and " : ", ";
          }
          list += shared_groups[i];
        }
        // An own option that replaces one shown above (fit's --gpus).
        std::vector<std::string> replaced;
        for (const OptionDoc* o : own) {
          if (std::any_of(shown.begin(), shown.end(), [&](const OptionDoc& s) {
                return s.flag == o->flag;
              })) {
            replaced.push_back(o->flag);
          }
        }
        out += ".PP\n" +
               roff(fmt::format("Takes the {} options above{}{}", list,
                                replaced.empty()
                                    ? ""
                                    : fmt::format(" (with its own {})",
                                                  join(replaced, ", ")),
                                own.empty() ? "." : ", and:")) +
               "\n";
      }
      for (const OptionDoc* o : own) {
        roff_option(out, *o);
      }
    }
    for (const OptionDoc* o : own) {
      shown.push_back(*o);
    }
  }
  if (!page.global_options.empty()) {
    out += ".SS \"General\"\n";
    for (const auto& g : page.global_options) {
      roff_option(out, g);
    }
  }

  auto definitions = [&](std::string_view title, const auto& items,
                         bool literal) {
    if (items.empty()) {
      return;
    }
    out += ".SH " + std::string(title) + "\n";
    for (const auto& [term, text] : items) {
      out += ".TP\n";
      out +=
          literal ? "\\fB" + roff_literal(term) + "\\fR\n" : roff(term) + "\n";
      out += roff(text) + "\n";
    }
  };
  definitions("EXIT STATUS", page.exit_status, false);
  definitions("ENVIRONMENT", page.environment, true);
  definitions("FILES", page.files, true);
  definitions("EXAMPLES", page.examples, true);
  if (!page.see_also.empty()) {
    out += ".SH \"SEE ALSO\"\n";
    std::vector<std::string> refs;
    for (const auto& ref : page.see_also) {
      const auto paren = ref.find('(');
      refs.push_back(paren == std::string::npos
                         ? "\\fB" + roff_literal(ref) + "\\fR"
                         : "\\fB" + roff_literal(ref.substr(0, paren)) +
                               "\\fR" + ref.substr(paren));
    }
    out += join(refs, ",\n") + "\n";
  }
  return out;
}

std::string render_bash_completion(const std::string& program,
                                   const std::vector<CommandDoc>& commands,
                                   const std::vector<OptionDoc>& globals,
                                   const CompletionWords& words) {
  const std::string fn = "_" + program;
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

  std::vector<std::string> names;
  for (const auto& c : commands) {
    names.push_back(c.name);
  }
  std::vector<std::string> global_flags;
  for (const auto& g : globals) {
    global_flags.push_back(g.flag);
  }
  const std::string first = commands.empty() ? "" : commands.front().name;
  // Per command: its options, and (between spaces) those that take a value.
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
  out += "\n";

  const std::string first_values = "$" + fn + "_" + first + "_values";
  out += fn + "() {\n";
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
  out += "  case $cmd in\n";
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
  out += "  if [[ $cur == -* ]]; then\n";
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
    out += "    " + c.name + ")\n";
    out += fmt::format("      if ((positionals < {})); then\n",
                       c.positionals.size());
    out += "        compopt -o filenames 2>/dev/null\n";
    const bool model = c.positionals.front() == "MODEL";
    out += model ? "        COMPREPLY=($(compgen -W \"$" + fn +
                       "_models\" -- \"$cur\") $(compgen -f -- \"$cur\"))\n"
                 : "        COMPREPLY=($(compgen -f -- \"$cur\"))\n";
    out += "      fi\n      ;;\n";
  }
  out += "  esac\n";
  out += "}\n\n";
  out += "complete -F " + fn + " " + program + "\n";
  return out;
}

std::string render_zsh_completion(const std::string& program,
                                  const std::vector<CommandDoc>& commands,
                                  const std::vector<OptionDoc>& globals,
                                  const CompletionWords& words) {
  const std::string fn = "_" + program;
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

  for (const auto& c : commands) {
    out += zsh_function_name(program, c.name) + "() {\n";
    out += "  _arguments -s \\\n";
    out += "    '(- *)'{-h,--help}'[print the help and exit]' \\\n";
    for (const auto& o : c.options) {
      out += "    " + zsh_spec(o) + " \\\n";
    }
    if (!c.positionals.empty()) {
      for (std::size_t i = 0; i < c.positionals.size(); ++i) {
        const bool model = c.positionals[i] == "MODEL";
        out += "    " +
               sh_quote(fmt::format("{}:{}:{}", i + 1,
                                    zsh_describe(c.positionals[i]),
                                    model ? fn + "_models" : "_files")) +
               " \\\n";
      }
    }
    out += "    && return 0\n}\n\n";
  }

  const std::string first = commands.empty() ? "" : commands.front().name;
  out += fn + "() {\n";
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
  if (!commands.empty()) {
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

function {0}_gpu_specs
    set -l token (commandline -ct)
    set -l gpus {3}
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
        printf '%s\n' {4}
    end
end

function {0}_gpu_list
    set -l head (string replace -r '[^,]*$' '' -- (commandline -ct))
    printf "$head%s\n" {3}
end

complete -c {5} -f
)",
                 fn, first, join(names, " "), join(words.gpus, " "),
                 join(words.instances, " "), program);

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
    const std::string using_c = fish_quote(fn + "_using " + c.name);
    for (const auto& o : c.options) {
      std::string line = fmt::format("complete -c {} -n {} -l {}", program,
                                     using_c, o.flag.substr(2));
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
      line += " -d " + fish_quote(o.help);
      out += line + "\n";
    }
    if (!c.positionals.empty()) {
      const std::string wants = fish_quote(fmt::format(
          "{}_wants_positional {} {}", fn, c.name, c.positionals.size()));
      const bool model = c.positionals.front() == "MODEL";
      out += fmt::format(
          "complete -c {} -n {} -F{}\n", program, wants,
          model ? " -a " + fish_quote(join(words.models, " ")) : "");
    }
  }
  return out;
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
      "oomplan.models/1, oomplan.gpus/1), each described by a JSON Schema "
      "file (see FILES).",
  };
  page.global_options = oomplan_global_options();
  page.exit_status = {
      {"0", "the plan fits (fit: at least one plan fits)"},
      {"1", "the plan does not fit"},
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
