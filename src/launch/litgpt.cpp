// The LitGPT reader: a finetune config (the YAML `litgpt finetune_lora
// --config FILE` takes, config_hub/finetune/<model>/{lora,qlora,full}.yaml)
// or the `litgpt finetune_*` command line itself, whose jsonargparse flags
// spell the same keys (`--train.micro_batch_size 2` is train.micro_batch_size).
// Each key is a row of the tables below (rows.hpp) with the LitGPT file that
// reads it.
//
// Sources: litgpt v0.5.13 (26857050): litgpt/finetune/lora.py and full.py
// setup() and validate_args(), litgpt/args.py TrainArgs, litgpt/utils.py
// parse_devices, instantiate_bnb_optimizer, instantiate_torch_optimizer,
// auto_download_checkpoint; litgpt/__main__.py (the subcommands); Lightning
// fabric/plugins/precision (precision names and aliases).

#include "launch/internal.hpp"
#include "launch/rows.hpp"

#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace oomplan::launch {
namespace {

constexpr std::string_view k_lora_py = "litgpt/finetune/lora.py";
constexpr std::string_view k_full_py = "litgpt/finetune/full.py";
constexpr std::string_view k_args_py = "litgpt/args.py";
constexpr std::string_view k_utils_py = "litgpt/utils.py";

// TrainArgs as both scripts' setup() builds it: global_batch_size=16,
// micro_batch_size=1 (litgpt/finetune/lora.py and full.py setup).
constexpr std::int64_t k_default_global_batch = 16;
constexpr std::int64_t k_default_micro_batch = 1;

constexpr std::array k_litgpt_unused = {
    "out_dir", "data", "eval", "log", "logger_name", "seed", "access_token"};

// What a row passes to later rows.
struct Litgpt : Reading {
  std::string script = {};  // finetune_lora or finetune_full
  bool quantized = false;
  // The precision as LitGPT passes it to Fabric; bf16-mixed when absent
  // (get_default_supported_precision(training=True)).
  std::string precision = "bf16-mixed";
  bool stated_precision = false;
  std::optional<std::int64_t> devices = 1;  // nullopt: "auto"
  std::int64_t nodes = 1;
  std::int64_t micro_batch = k_default_micro_batch;
};
using Row = KeyRow<Litgpt>;

bool lora_script(const Litgpt& s) {
  return s.script == "finetune_lora";
}

// ---- the model: checkpoint_dir, a local folder or a Hub id ----

// auto_download_checkpoint: "checkpoints/<org>/<name>" is where `litgpt
// download <org>/<name>` puts the Hub repository (config.json with it); a
// relative path that is not there is downloaded as a Hub id.
void checkpoint_dir(Litgpt& s, const Row& row) {
  const auto dir = s.keys.string(row.key);
  if (!dir) {
    return;
  }
  std::string d = *dir;
  while (d.size() > 1 && d.back() == '/') {
    d.pop_back();
  }
  s.plan.model = d;
  s.plan.model_key = std::string(row.key);
  constexpr std::string_view k_prefix = "checkpoints/";
  if (d.rfind(k_prefix, 0) == 0 && d.size() > k_prefix.size()) {
    s.plan.model_aliases.push_back(d.substr(k_prefix.size()));
  }
}

// ---- which script: finetune_lora (LoRA, QLoRA with quantize) or
// finetune_full ----

bool has_lora_key(const KeyReader& keys) {
  for (const auto& item : keys.doc().items()) {
    if (item.key().rfind("lora_", 0) == 0) {
      return true;
    }
  }
  return false;
}

// A config does not name its script: lora_* and quantize are finetune_lora's
// keys and resume finetune_full's (jsonargparse refuses a key the script's
// setup() does not take); config_hub names the file full.yaml. Else it is
// `litgpt finetune`'s script, finetune_lora.
void choose_script(Litgpt& s, std::string_view origin) {
  if (!s.script.empty()) {
    return;
  }
  if (!s.keys.has("checkpoint_dir") &&
      (s.keys.has("model_name") || s.keys.has("initial_checkpoint_dir"))) {
    s.keys.fail(
        s.keys.has("model_name") ? "model_name" : "initial_checkpoint_dir",
        "a litgpt pretrain config is not modelled; oomplan reads "
        "finetune_lora and finetune_full configs");
  }
  const auto slash = origin.find_last_of('/');
  const std::string_view base =
      slash == std::string_view::npos ? origin : origin.substr(slash + 1);
  if (has_lora_key(s.keys) || s.keys.has("quantize")) {
    s.script = "finetune_lora";
  } else if (s.keys.has("resume") ||
             base.find("full") != std::string_view::npos) {
    s.script = "finetune_full";
  } else {
    s.script = "finetune_lora";
    s.plan.notes.push_back(
        "the file has no lora_* key and does not say its script: read as "
        "`litgpt finetune` runs it (finetune_lora); --mode full plans "
        "finetune_full");
  }
}

// finetune_full's setup() takes no LoRA or quantize argument (jsonargparse
// refuses them).
void refuse_lora_keys_in_full(Litgpt& s) {
  if (lora_script(s)) {
    return;
  }
  for (const auto& item : s.keys.doc().items()) {
    if (item.key().rfind("lora_", 0) == 0 || item.key() == "quantize") {
      s.keys.fail(item.key(),
                  "finetune_full takes no LoRA or quantize "
                  "argument; remove it or run finetune_lora");
    }
  }
}

// ---- precision and quantize ----

// Fabric's precision names (plugins/precision/precision.py
// _PRECISION_INPUT): "bf16" and "16" are aliases of the -mixed ones.
void precision(Litgpt& s, const Row& row) {
  const Json* v = s.keys.read(row.key);
  if (v == nullptr) {
    return;  // get_default_supported_precision(training=True): bf16-mixed
  }
  std::string p = v->is_number_integer()
                      ? std::to_string(v->get<std::int64_t>())
                  : v->is_string() ? v->get<std::string>()
                                   : std::string();
  if (p.empty()) {
    s.keys.fail(row.key,
                "is not a precision name; use bf16-true, "
                "bf16-mixed, 16-true, 16-mixed or 32-true");
  }
  s.precision = p;
  s.stated_precision = true;
  if (p == "bf16" || p == "16") {
    p += "-mixed";
  } else if (p == "32") {
    p = "32-true";
  }
  struct Name {
    std::string_view name, dtype, precision;
  };
  static constexpr std::array<Name, 5> k_names = {{
      {"bf16-true", "bf16", "pure"},
      {"bf16-mixed", "bf16", "amp"},
      {"16-true", "fp16", "pure"},
      {"16-mixed", "fp16", "amp"},
      {"32-true", "fp32", "pure"},
  }};
  const auto* n = std::find_if(k_names.begin(), k_names.end(),
                               [&](const Name& x) { return x.name == p; });
  if (n == k_names.end()) {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; use bf16-true, bf16-mixed, "
                            "16-true, 16-mixed or 32-true",
                            echo(p)));
  }
  set_option(s.plan, "--dtype", std::string(n->dtype), std::string(row.key));
  set_option(s.plan, "--precision", std::string(n->precision),
             std::string(row.key));
}

// lora.py setup: BitsandbytesPrecision(quantize[4:], dtype) with dtype from
// {"16-true", "bf16-true", "32-true"}[precision]; "mixed" in precision is
// refused first. fp4 is stored as nf4 is (4 bits, 64-value absmax blocks,
// bitsandbytes Linear4bit); int8-training keeps 16-bit weights
// (Linear8bitLt has_fp16_weights) and is not modelled.
void quantize(Litgpt& s, const Row& row) {
  const auto q = s.keys.string(row.key);
  if (!q) {
    return;
  }
  struct Mode {
    std::string_view name, quant;
  };
  static constexpr std::array<Mode, 4> k_modes = {{
      {"bnb.nf4", "nf4-nodq"},
      {"bnb.nf4-dq", "nf4"},
      {"bnb.fp4", "nf4-nodq"},
      {"bnb.fp4-dq", "nf4"},
  }};
  const auto* m = std::find_if(k_modes.begin(), k_modes.end(),
                               [&](const Mode& x) { return x.name == *q; });
  if (m == k_modes.end()) {
    s.keys.fail(row.key,
                fmt::format("{} is not modelled; use bnb.nf4, bnb.nf4-dq, "
                            "bnb.fp4 or bnb.fp4-dq",
                            echo(*q)));
  }
  if (s.precision.find("mixed") != std::string::npos) {
    s.keys.fail(row.key,
                fmt::format("LitGPT refuses {} under {}{} (\"Quantization "
                            "and mixed precision is not supported\"); set "
                            "precision: bf16-true",
                            *q, s.precision,
                            s.stated_precision ? "" : ", its default"));
  }
  if (s.precision != "16-true" && s.precision != "bf16-true" &&
      s.precision != "32-true") {
    s.keys.fail("precision",
                fmt::format("{} with quantize: LitGPT takes 16-true, "
                            "bf16-true or 32-true (lora.py setup's dtype "
                            "table); write bf16-true",
                            echo(s.precision)));
  }
  if (q->find("fp4") != std::string::npos) {
    s.plan.notes.push_back(fmt::format(
        "quantize: {} stores 4-bit weights in 64-value blocks as NF4 does: "
        "planned as {}",
        *q, m->quant));
  }
  s.quantized = true;
  set_option(s.plan, "--quant", std::string(m->quant), std::string(row.key));
}

// ---- devices and nodes ----

// parse_devices: a positive int, or "auto" / -1 (every visible GPU).
void devices(Litgpt& s, const Row& row) {
  const Json* v = s.keys.read(row.key);
  if (v == nullptr) {
    return;
  }
  if ((v->is_string() && v->get<std::string>() == "auto") ||
      (v->is_number_integer() && v->get<std::int64_t>() == -1)) {
    s.devices = std::nullopt;
    s.plan.notes.push_back(
        "devices: auto takes every visible GPU; give --gpus NxCARD");
    return;
  }
  const auto n = s.keys.integer(row.key, 1, k_max_gpus);
  s.devices = *n;
  s.plan.gpus = static_cast<int>(*n);
}

void num_nodes(Litgpt& s, const Row& row) {
  if (const auto n = s.keys.integer(row.key, 1, k_max_gpus)) {
    s.nodes = *n;
    s.plan.nodes = static_cast<int>(*n);
  }
}

// ---- LoRA: lora_r, lora_dropout and which linears (lora.py setup:
// query and value by default) ----

void lora_targets(Litgpt& s, const Row& row) {
  struct Target {
    std::string_view key, names;
    bool on;
  };
  std::array<Target, 5> targets = {{
      {"lora_query", "q", true},
      {"lora_key", "k", false},
      {"lora_value", "v", true},
      {"lora_projection", "o", false},
      {"lora_mlp", "gate,up,down", false},
  }};
  bool stated = false;
  for (Target& t : targets) {
    if (const auto b = s.keys.boolean(t.key)) {
      t.on = *b;
      stated = true;
    }
  }
  if (!stated) {
    return;
  }
  std::string list;
  for (const Target& t : targets) {
    if (t.on) {
      list += fmt::format("{}{}", list.empty() ? "" : ",", t.names);
    }
  }
  if (list.empty()) {
    s.keys.fail(row.key,
                "every lora_* target is false: no linear gets an adapter; "
                "set lora_query and lora_value to true");
  }
  set_option(s.plan, "--lora-targets",
             list == "q,k,v,o,gate,up,down" ? "all" : list, "lora_*");
}

// LoRA on lm_head (config_hub's phi-3 files set it): r x (hidden + vocab)
// trainable parameters and a dropout copy of the last hidden state, well
// under 1 % of any plan; not priced.
void lora_head(Litgpt& s, const Row& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    s.plan.notes.push_back(
        "lora_head: the output head's adapter (r x (hidden + vocab) "
        "parameters and one dropout copy of the last hidden state) is not "
        "priced");
  }
}

// ---- train: TrainArgs ----

void micro_batch(Litgpt& s, const Row& row) {
  if (const auto b = s.keys.integer(row.key, 1, k_max_batch)) {
    s.micro_batch = *b;
    set_option(s.plan, "--batch", fmt::format("{}", *b), std::string(row.key));
  }
}

// TrainArgs.gradient_accumulation_iters: global_batch_size // (devices x
// num_nodes) // micro_batch_size, asserted above 0.
void global_batch(Litgpt& s, const Row& row) {
  const auto stated = s.keys.integer(row.key, 1, k_max_batch * k_max_accum);
  const std::int64_t global = stated.value_or(k_default_global_batch);
  if (!s.devices) {
    s.plan.notes.push_back(
        "devices: auto: the gradient accumulation (global_batch_size / "
        "devices / micro_batch_size) is not known; give --grad-accum");
    return;
  }
  const std::int64_t per_rank = global / (*s.devices * s.nodes);
  const std::int64_t accum = per_rank / s.micro_batch;
  if (accum < 1) {
    s.keys.fail(
        row.key,
        fmt::format("{} over {} GPUs leaves {} per GPU, fewer than "
                    "micro_batch_size {}: LitGPT's "
                    "gradient_accumulation_iters asserts; raise "
                    "global_batch_size",
                    global, *s.devices * s.nodes, per_rank, s.micro_batch));
  }
  set_option(s.plan, "--grad-accum", fmt::format("{}", accum),
             stated ? std::string(row.key) : "TrainArgs(global_batch_size=16)");
}

// fit: model.max_seq_length = min(longest sample, train.max_seq_length); a
// batch is padded to its longest sample.
void max_seq_length(Litgpt& s, const Row& row) {
  if (const auto n = s.keys.integer(row.key, 1, k_max_seq)) {
    set_option(s.plan, "--seq", fmt::format("{}", *n), std::string(row.key));
    return;
  }
  s.plan.notes.push_back(
      "train.max_seq_length is not set: LitGPT trains up to the longest "
      "sample's length; give --seq");
}

// validate_args refuses these train fields in finetune_lora and
// finetune_full ("doesn't support the 'max_norm' argument").
void unsupported(Litgpt& s, const Row& row) {
  if (s.keys.has(row.key)) {
    s.keys.fail(row.key, fmt::format("{} refuses it (validate_args); remove "
                                     "it",
                                     s.script));
  }
  s.keys.unused(row.key);
}

// ---- optimizer: a name ("AdamW": torch.optim) or {class_path, init_args}
// ----

void optimizer(Litgpt& s, const Row& row) {
  const Json* v = s.keys.peek(row.key);
  std::string key(row.key);
  std::optional<std::string> name;
  if (v != nullptr && v->is_object()) {
    key += ".class_path";
    name = s.keys.string(key);
    s.keys.unused_children(row.key);
  } else {
    name = s.keys.string(key);
  }
  if (!name) {
    return;
  }
  if (s.quantized) {
    // instantiate_bnb_optimizer: any AdamW becomes bnb PagedAdamW.
    if (name->find("AdamW") == std::string::npos) {
      s.keys.fail(key,
                  "LitGPT quantizes with AdamW only (\"The chosen "
                  "quantization format only supports the AdamW "
                  "optimizer\"); use AdamW");
    }
    set_option(s.plan, "--optimizer", "paged-adamw", key);
    return;
  }
  const std::string path =
      name->find('.') == std::string::npos ? "torch.optim." + *name : *name;
  const auto o = optimizer_of_class(path);
  if (!o) {
    s.keys.fail(key, fmt::format("{} is not modelled; oomplan models {}",
                                 echo(*name), k_optimizer_classes));
  }
  set_option(s.plan, "--optimizer", std::string(*o), key);
}

constexpr std::array k_rows = {
    Row{"checkpoint_dir", checkpoint_dir, k_utils_py},
    Row{"precision", precision, k_lora_py},
    Row{"quantize", quantize, k_lora_py},
    Row{"devices", devices, k_utils_py},
    Row{"num_nodes", num_nodes, k_lora_py},
    Row::integer("lora_r", "--lora-rank", 1, k_max_rank, k_lora_py),
    Row::unused("lora_alpha", k_lora_py),
    Row::probability("lora_dropout", "--lora-dropout", k_lora_py),
    Row{"lora_query", lora_targets, k_lora_py},
    Row{"lora_head", lora_head, k_lora_py},
    Row{"train.micro_batch_size", micro_batch, k_args_py},
    Row{"train.global_batch_size", global_batch, k_args_py},
    Row{"train.max_seq_length", max_seq_length, k_lora_py},
    Row{"train.max_tokens", unsupported, k_lora_py},
    Row{"train.max_norm", unsupported, k_lora_py},
    Row{"train.tie_embeddings", unsupported, k_lora_py},
    Row{"train.lr_warmup_fraction", unsupported, k_lora_py},
    Row::unused_children("train", k_args_py),
    Row{"optimizer", optimizer, k_utils_py},
    Row::unused("resume", k_full_py),
};

// ---- the command line ----

// A value as jsonargparse reads it (a YAML scalar).
Json scalar(const std::string& text) {
  if (text == "true" || text == "True") {
    return true;
  }
  if (text == "false" || text == "False") {
    return false;
  }
  if (text == "null" || text == "None" || text == "~") {
    return nullptr;
  }
  if (const auto i = parse_int(text, -k_max_seq, k_max_batch * k_max_accum)) {
    return *i;
  }
  if (const auto d = parse_double(text)) {
    return *d;
  }
  return text;
}

// Sets a dotted path; a name in the way becomes its class_path
// (`--optimizer AdamW --optimizer.init_args.lr 1e-4`).
void set_path(Json& doc, std::string_view path, Json value,
              const std::string& origin) {
  Json* node = &doc;
  int depth = 0;
  while (true) {
    const auto dot = path.find('.');
    const std::string key(path.substr(0, dot));
    if (key.empty() || ++depth > k_max_depth) {
      throw Error(
          fmt::format("{}: {} is not a LitGPT flag; write "
                      "--key or --group.key",
                      origin, echo(path)));
    }
    if (node->is_null()) {
      *node = Json::object();
    } else if (!node->is_object()) {
      Json name = std::move(*node);
      *node = Json::object();
      (*node)["class_path"] = std::move(name);
    }
    if (dot == std::string_view::npos) {
      (*node)[key] = std::move(value);
      return;
    }
    node = &(*node)[key];
    path.remove_prefix(dot + 1);
  }
}

// A later document's keys replace an earlier one's (jsonargparse applies
// --config and flags in order).
void merge(Json& into, const Json& from) {
  for (const auto& item : from.items()) {
    if (item.value().is_object() && into.contains(item.key()) &&
        into[item.key()].is_object()) {
      merge(into[item.key()], item.value());
    } else {
      into[item.key()] = item.value();
    }
  }
}

struct Command {
  std::string script;
  std::vector<std::string> args;
  std::int64_t line = 1;
};

// `litgpt SUBCOMMAND`, `python -m litgpt SUBCOMMAND` or a script
// (`python litgpt/finetune/lora.py`); nullopt when the command is none.
std::optional<Command> find_command(const ShellCommand& c) {
  const auto& w = c.words;
  const std::size_t i = program_index(w, nullptr);
  if (i >= w.size()) {
    return std::nullopt;
  }
  std::size_t at = w.size();
  std::string script;
  if ((w[i] == "litgpt" || w[i].ends_with("/litgpt")) && i + 1 < w.size()) {
    script = w[i + 1];
    at = i + 2;
  } else if (w[i].find("python") != std::string::npos) {
    // The first word that is not an interpreter option: `-m litgpt` or a
    // script of the repository.
    for (std::size_t k = i + 1; k < w.size() && script.empty(); ++k) {
      if (w[k] == "-m") {
        if (k + 2 < w.size() && w[k + 1] == "litgpt") {
          script = w[k + 2];
          at = k + 3;
        }
        break;
      }
      const std::string slashed = "/" + w[k];
      for (const auto& [file, name] :
           {std::pair{"/finetune/lora.py", "finetune_lora"},
            std::pair{"/finetune/full.py", "finetune_full"},
            std::pair{"/finetune/adapter.py", "finetune_adapter"},
            std::pair{"/finetune/adapter_v2.py", "finetune_adapter_v2"},
            std::pair{"/litgpt/pretrain.py", "pretrain"}}) {
        if (slashed.ends_with(file)) {
          script = name;
          at = k + 1;
        }
      }
      if (w[k].rfind('-', 0) != 0) {
        break;
      }
    }
  }
  if (script.rfind("finetune", 0) != 0 && script != "pretrain") {
    return std::nullopt;
  }
  return Command{
      script,
      {w.begin() + static_cast<long>(std::min(at, w.size())), w.end()},
      c.line};
}

std::vector<Command> find_commands(std::string_view text,
                                   std::string_view origin) {
  std::vector<Command> out;
  for (const ShellCommand& c : split_commands(text, origin)) {
    if (auto command = find_command(c)) {
      out.push_back(std::move(*command));
    }
  }
  return out;
}

// litgpt/__main__.py: finetune is finetune_lora.
std::string script_of(const Command& c, const std::string& where) {
  if (c.script == "finetune" || c.script == "finetune_lora") {
    return "finetune_lora";
  }
  if (c.script == "finetune_full") {
    return c.script;
  }
  if (c.script == "finetune_adapter" || c.script == "finetune_adapter_v2") {
    throw Error(fmt::format(
        "{}: litgpt {}: LLaMA-Adapter is not modelled; plan finetune_lora "
        "or finetune_full",
        where, c.script));
  }
  throw Error(fmt::format(
      "{}: litgpt {} is not modelled; oomplan reads finetune_lora and "
      "finetune_full",
      where, echo(c.script)));
}

// The command's arguments as one document: --config files, then flags, in
// order; the first bare word is checkpoint_dir.
Json command_doc(const Command& c, const std::string& where,
                 const FileLoader& load, LaunchPlan& plan) {
  Json doc = Json::object();
  bool positional = false;
  for (std::size_t i = 0; i < c.args.size(); ++i) {
    const std::string& a = c.args[i];
    if (a.rfind("--", 0) != 0) {
      if (positional || a.rfind('-', 0) == 0) {
        throw Error(
            fmt::format("{}: unexpected argument {}; LitGPT takes "
                        "CHECKPOINT_DIR and --key value flags",
                        where, echo(a)));
      }
      positional = true;
      doc["checkpoint_dir"] = a;
      continue;
    }
    std::string flag = a.substr(2);
    std::string value = "true";
    if (const auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < c.args.size() && c.args[i + 1].rfind("--", 0) != 0) {
      value = c.args[++i];
    }
    if (flag != "config") {
      set_path(doc, flag, scalar(value), where);
      continue;
    }
    const auto text = load(value, plan.file);
    if (!text) {
      throw Error(
          fmt::format("{}: --config {}: no such file", where, echo(value)));
    }
    check_text(*text, value);
    std::vector<std::string> repeated;
    const Json config = parse_yaml_text(*text, value, &repeated);
    if (!config.is_object()) {
      throw Error(
          fmt::format("{}: is not a LitGPT config (a mapping of "
                      "setup()'s arguments)",
                      value));
    }
    for (const std::string& key : repeated) {
      plan.notes.push_back(fmt::format(
          "{}: key {} appears twice; the last value is used, as PyYAML "
          "keeps it",
          value, echo(key)));
    }
    plan.included_files.push_back(value);
    merge(doc, config);
  }
  return doc;
}

}  // namespace

void read_litgpt(KeyReader& keys, LaunchPlan& plan, std::string_view script) {
  Litgpt s{{keys, plan}};
  s.script = std::string(script);
  choose_script(s, keys.origin());
  refuse_lora_keys_in_full(s);
  mark_unused_keys(keys, k_litgpt_unused);
  walk_rows(s, k_rows);
  const std::string_view mode =
      !lora_script(s) ? "full" : (s.quantized ? "qlora" : "lora");
  set_option(plan, "--mode", std::string(mode),
             script.empty() ? "(the script its keys imply)"
                            : fmt::format("litgpt {}", script));
}

bool has_litgpt_command(std::string_view text, std::string_view origin) {
  try {
    return !find_commands(text, origin).empty();
  } catch (const Error&) {
    return false;  // a quote not closed: the vLLM reader names it
  }
}

std::vector<std::string> litgpt_config_names(std::string_view text,
                                             std::string_view origin) {
  std::vector<std::string> names;
  for (const Command& c : find_commands(text, origin)) {
    for (std::size_t i = 0; i < c.args.size(); ++i) {
      if (c.args[i] == "--config" && i + 1 < c.args.size()) {
        names.push_back(c.args[i + 1]);
      } else if (c.args[i].rfind("--config=", 0) == 0) {
        names.push_back(c.args[i].substr(9));
      }
    }
  }
  return names;
}

std::vector<LaunchPlan> read_litgpt_commands(std::string_view text,
                                             const LaunchPlan& base,
                                             const FileLoader& load) {
  const std::vector<Command> commands = find_commands(text, base.file);
  std::vector<LaunchPlan> plans;
  for (const Command& c : commands) {
    LaunchPlan plan = base;
    if (commands.size() > 1) {
      plan.file = fmt::format("{}:{}", base.file, c.line);
    }
    const std::string script = script_of(c, plan.file);
    const Json doc = command_doc(c, plan.file, load, plan);
    KeyReader keys(doc, plan.file);
    read_litgpt(keys, plan, script);
    keys.finish(plan);
    apply_framework_defaults(plan);
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace oomplan::launch
