// The modules a quantized checkpoint leaves unquantized, from its
// quantization_config: `modules_to_not_convert` (transformers' bitsandbytes,
// FBGEMM FP8, AWQ, MXFP4 and FP8 configs), `ignore` (compressed-tensors) and
// `ignored_layers` (vLLM's Fp8Config). Meta's Llama-3.1-405B-FP8 names
// "model.layers.0", "model.layers.125", "lm_head" and
// "model.layers.N.self_attn" for the other layers (transformers' FP8
// conversion script for it); compressed-tensors also takes "re:" patterns
// matched with Python's re.match against the module's path.

#include "model/hf_families.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace oomplan::hf {
namespace {

// One atom of a pattern: a literal, any character ('.'), or a digit
// ("\d"), repeated {min, max} times (max -1: unbounded).
struct Atom {
  enum Kind { literal, any, digit } kind = literal;
  char c = 0;
  int min = 1;
  int max = 1;
};

struct Pattern {
  std::vector<Atom> atoms;
  bool to_end = false;  // '$'
};

// The regular expressions module paths use: literals, '.', "\." and other
// escapes, "\d", the quantifiers '*', '+', '?', and '^' / '$'. Anything else
// (groups, classes, alternation) is nullopt.
std::optional<Pattern> compile(std::string_view re) {
  Pattern p;
  std::size_t i = re.starts_with('^') ? 1 : 0;
  for (; i < re.size(); ++i) {
    const char ch = re[i];
    if (ch == '$' && i + 1 == re.size()) {
      p.to_end = true;
      break;
    }
    if (ch == '*' || ch == '+' || ch == '?') {
      if (p.atoms.empty() || p.atoms.back().max != 1) {
        return std::nullopt;
      }
      p.atoms.back().min = ch == '+' ? 1 : 0;
      p.atoms.back().max = ch == '?' ? 1 : -1;
      continue;
    }
    if (std::string_view("()[]{}|^$").find(ch) != std::string_view::npos) {
      return std::nullopt;
    }
    Atom a;
    if (ch == '\\') {
      if (++i == re.size()) {
        return std::nullopt;
      }
      a.kind = re[i] == 'd' ? Atom::digit : Atom::literal;
      a.c = re[i];
    } else if (ch == '.') {
      a.kind = Atom::any;
    } else {
      a.c = ch;
    }
    p.atoms.push_back(a);
  }
  return p;
}

bool accepts(const Atom& a, char ch) {
  return a.kind == Atom::any ||
         (a.kind == Atom::digit && ch >= '0' && ch <= '9') ||
         (a.kind == Atom::literal && a.c == ch);
}

// re.match: the pattern matches a prefix of `s` (all of it with '$').
// Simulates the automaton over (atom, repetitions so far) states: linear in
// |s| times the pattern's length, no backtracking.
bool matches(const Pattern& p, std::string_view s) {
  const std::size_t n = p.atoms.size();
  // alive[k]: atoms [0, k) matched so far (k == n: the whole pattern).
  std::string alive(n + 1, '\0');
  std::string next(n + 1, '\0');
  auto close = [&](std::string& set) {
    // An atom that may repeat zero times can be skipped.
    for (std::size_t k = 0; k < n; ++k) {
      if (set[k] != '\0' && p.atoms[k].min == 0) {
        set[k + 1] = '\1';
      }
    }
  };
  alive.front() = '\1';
  close(alive);
  for (const char ch : s) {
    if (alive[n] != '\0' && !p.to_end) {
      return true;
    }
    std::fill(next.begin(), next.end(), '\0');
    for (std::size_t k = 0; k < n; ++k) {
      if (alive[k] != '\0' && accepts(p.atoms[k], ch)) {
        next[k + 1] = '\1';
        if (p.atoms[k].max == -1) {
          next[k] = '\1';  // and it may repeat
        }
      }
    }
    close(next);
    alive.swap(next);
  }
  return alive[n] != '\0';
}

// A plain entry names a module and everything inside it, wherever its path
// lies on component boundaries ("model.layers.3.self_attn" holds
// "model.layers.3.self_attn.q_proj"; "lm_head" names "lm_head").
bool names_plain(const std::unordered_set<std::string_view>& plain,
                 std::string_view name) {
  for (std::size_t b = 0; b <= name.size(); b = name.find('.', b) + 1) {
    for (std::size_t e = b; e <= name.size(); ++e) {
      if (e == name.size() || name[e] == '.') {
        if (plain.contains(name.substr(b, e - b))) {
          return true;
        }
      }
    }
    if (name.find('.', b) == std::string_view::npos) {
      break;
    }
  }
  return false;
}

struct Layer {
  std::string_view module;  // path under model.layers.N
  double params;
};

// The linear modules of layer `i`, Llama's paths, with their parameters
// from the model's totals (every layer alike).
std::vector<Layer> layer_modules(const Model& m, const ParamCounts& c,
                                 std::int64_t i) {
  const double layers = static_cast<double>(m.num_layers);
  const double qo = static_cast<double>(c.attention - c.kv_proj) / layers / 2;
  const double kv = static_cast<double>(c.kv_proj) / layers / 2;
  std::vector<Layer> out = {{"self_attn.q_proj", qo},
                            {"self_attn.k_proj", kv},
                            {"self_attn.v_proj", kv},
                            {"self_attn.o_proj", qo}};
  const std::int64_t every = std::max(1, m.moe_every);
  const std::int64_t moe_layers =
      m.num_experts > 0 ? m.num_layers / every - m.first_k_dense / every : 0;
  const bool moe =
      m.num_experts > 0 && i >= m.first_k_dense && (i + 1) % every == 0;
  if (moe && moe_layers > 0) {
    const double per = static_cast<double>(moe_layers);
    out.push_back(
        {"mlp.experts.0.gate_proj", static_cast<double>(c.experts) / per});
    out.push_back({"mlp.shared_experts.gate_proj",
                   static_cast<double>(c.shared_experts) / per});
  } else if (m.num_layers > moe_layers) {
    const double dense = static_cast<double>(c.mlp) /
                         static_cast<double>(m.num_layers - moe_layers) /
                         (m.mlp == MlpKind::gated ? 3.0 : 2.0);
    if (m.mlp == MlpKind::gated) {
      out.push_back({"mlp.gate_proj", dense});
    }
    out.push_back({"mlp.up_proj", dense});
    out.push_back({"mlp.down_proj", dense});
  }
  return out;
}

// Matching regular expressions costs this many character steps at most
// (the layers' module paths times the patterns' lengths).
constexpr double k_max_match_steps = 2e8;

}  // namespace

std::int64_t unquantized_params(const Config& q, std::string_view key,
                                const Model& m) {
  const json* list = q.find({key});
  if (list == nullptr) {
    return 0;
  }
  if (!list->is_array()) {
    q.fail(key, fmt::format("must be a list of module names, but is {}",
                            Config::shown(*list)));
  }
  std::vector<std::string> texts;
  for (const json& item : *list) {
    if (!item.is_string()) {
      q.fail(key, fmt::format("must hold module names, but holds {}",
                              Config::shown(item)));
    }
    texts.push_back(item.get<std::string>());
  }
  std::unordered_set<std::string_view> plain;
  std::vector<Pattern> patterns;
  double pattern_length = 0;
  for (const std::string& text : texts) {
    if (text.starts_with("re:")) {
      if (auto p = compile(std::string_view(text).substr(3))) {
        pattern_length += static_cast<double>(p->atoms.size() + 1);
        patterns.push_back(std::move(*p));
      }
    } else {
      plain.insert(text);
    }
  }
  // ~40 characters per path, up to 7 paths per layer.
  if (pattern_length * static_cast<double>(m.num_layers) * 7 * 40 >
      k_max_match_steps) {
    q.fail(key, fmt::format("{} re: patterns over {} layers are too many to "
                            "match; list the module paths",
                            patterns.size(), m.num_layers));
  }
  const ParamCounts c = count_params(m);
  double kept = 0;
  std::string path;
  for (std::int64_t i = 0; i < m.num_layers; ++i) {
    for (const Layer& module : layer_modules(m, c, i)) {
      path = fmt::format("model.layers.{}.{}", i, module.module);
      bool named = names_plain(plain, path);
      for (std::size_t k = 0; !named && k < patterns.size(); ++k) {
        named = matches(patterns[k], path);
      }
      kept += named ? module.params : 0.0;
    }
  }
  return static_cast<std::int64_t>(kept);
}

}  // namespace oomplan::hf
