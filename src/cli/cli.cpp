#include "cli/cli.hpp"

#include "cli/io.hpp"

#include "oomplan/catalog.hpp"
#include "oomplan/error.hpp"
#include "oomplan/options.hpp"
#include "oomplan/plan.hpp"
#include "oomplan/report.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace oomplan::cli {
namespace {

namespace fs = std::filesystem;

// The commands' own bounds (the setup options' are in options.hpp).
constexpr std::int64_t k_max_fit_gpus = 4096;
constexpr std::int64_t k_max_top = 1000;

// The setup options as typed, one text (or flag) per option-table row; the
// rows parse them once CLI11 has matched the command line.
struct SetupOptions {
  std::vector<std::string> texts =
      std::vector<std::string>(option_rows().size());
  std::vector<char> flags = std::vector<char>(option_rows().size(), 0);
  std::vector<CLI::Option*> bound =
      std::vector<CLI::Option*>(option_rows().size(), nullptr);
};

struct OutputOptions {
  bool json = false;
  std::string format = "text";
  std::string catalog_dir;
};

struct PlanOptions {
  std::string model;
  std::string gpus;
  SetupOptions setup;
  OutputOptions output;
};

struct FitOptions {
  std::string model;
  std::string gpus;
  SetupOptions setup;
  OutputOptions output;
  std::string max_gpus = std::to_string(k_sizing_max_gpus);
  bool no_offload = false;
  bool no_quant = false;
  bool all_gpus = false;
  std::string global_batch;
  std::string top = "10";
};

struct ListOptions {
  OutputOptions output;
};

enum class Format { text, json, markdown };

// --- Binding options to CLI11: one option per row of the table, in its
// help group. `--gpus` is each command's own (a card for plan, a list for fit).

std::string join_choices(const std::vector<std::string_view>& names) {
  std::string out = "{";
  for (const auto name : names) {
    out += out.size() > 1 ? "," : "";
    out += name;
  }
  return out + "}";
}

void add_setup_options(CLI::App& app, SetupOptions& o) {
  const auto rows = option_rows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OptionRow& row = rows[i];
    if (row.flag.empty() || row.parse == nullptr) {
      continue;
    }
    const std::string flag(row.flag);
    const std::string help(row.help);
    CLI::Option* option = nullptr;
    if (row.value_name.empty()) {
      option = app.add_flag(flag, o.flags[i], help);
    } else {
      option = app.add_option(flag, o.texts[i], help);
      option->type_name(row.choices != nullptr ? join_choices(row.choices())
                                               : std::string(row.value_name));
      if (!row.default_text.empty()) {
        option->default_str(std::string(row.default_text));
      }
    }
    option->group(std::string(option_group_name(row.group)));
    o.bound[i] = option;
  }
}

// The setup the command line asks for: each given option parsed by its row,
// in table order.
Setup read_setup(const SetupOptions& o) {
  Setup setup;
  const auto rows = option_rows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CLI::Option* option = o.bound[i];
    if (option == nullptr || option->count() == 0) {
      continue;
    }
    const bool flag = rows[i].value_name.empty();
    rows[i].parse(setup, flag ? std::string_view(o.flags[i] != 0 ? "" : "false")
                              : std::string_view(o.texts[i]));
  }
  return setup;
}

void add_output_options(CLI::App& app, OutputOptions& o) {
  app.add_flag("--json", o.json, "same as --format json");
  app.add_option("--format", o.format, "text, json or markdown")
      ->check(
          CLI::IsMember(std::vector<std::string>{"text", "json", "markdown"}))
      ->capture_default_str();
  app.add_option("--catalog", o.catalog_dir,
                 "folder of extra models/GPUs JSON, overriding by name");
}

Format output_format(const OutputOptions& o, const CLI::App& app) {
  if (o.json) {
    if (app.count("--format") > 0 && o.format != "json") {
      throw Error(fmt::format(
          "--json and --format {} contradict; keep one of them", o.format));
    }
    return Format::json;
  }
  if (o.format == "json") {
    return Format::json;
  }
  if (o.format == "markdown") {
    return Format::markdown;
  }
  return Format::text;
}

// --- Files: the CLI is the only place that reads them.

// The built-in catalog with the --catalog DIR files merged over it
// (merge_catalog_files); its warnings go to `warnings`.
Catalog load_catalog(const std::string& dir,
                     std::vector<std::string>& warnings) {
  Catalog catalog = builtin_catalog();
  if (dir.empty()) {
    return catalog;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(fmt::format(
        "--catalog '{}' is not a folder; give a folder of *.json files", dir));
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") {
      files.push_back(entry.path());
    }
  }
  if (ec) {
    throw Error(
        fmt::format("cannot list --catalog '{}': {}", dir, ec.message()));
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> names;
  std::vector<std::string> texts;
  for (const auto& file : files) {
    names.push_back(file.string());
    texts.push_back(read_input_file(file, "catalog file"));
  }
  std::vector<CatalogFile> extra;
  for (std::size_t i = 0; i < files.size(); ++i) {
    extra.push_back({names[i], texts[i]});
  }
  warnings = merge_catalog_files(catalog, extra);
  return catalog;
}

// MODEL is a catalog name, alias or HF id, or a path to a config.json or to a
// folder holding one (checked first: a local path wins over a catalog name).
struct LoadedModel {
  Model imported;
  const Model* model = nullptr;
};

void load_model(const Catalog& catalog, const std::string& arg,
                LoadedModel& loaded) {
  std::error_code ec;
  const fs::path path(arg);
  if (fs::exists(path, ec)) {
    fs::path config = path;
    fs::path folder = path.parent_path();
    if (fs::is_directory(path, ec)) {
      config = path / "config.json";
      folder = path;
      if (!fs::exists(config, ec)) {
        throw Error(fmt::format(
            "'{}' is a folder without config.json; give a Hugging Face model "
            "folder or a catalog name (see oomplan models)",
            arg));
      }
    }
    const std::string config_text = read_input_file(config, "config.json");
    const fs::path index_path = folder / "model.safetensors.index.json";
    std::optional<std::string> index_text;
    if (fs::exists(index_path, ec)) {
      index_text = read_input_file(index_path, "model.safetensors.index.json");
    }
    loaded.imported = index_text
                          ? import_hf_config(config_text, config.string(),
                                             std::string_view(*index_text))
                          : import_hf_config(config_text, config.string());
    loaded.model = &loaded.imported;
    return;
  }
  if (path.extension() == ".json") {
    throw Error(fmt::format("no such file '{}'", arg));
  }
  loaded.model = &find_model(catalog, arg);
}

// --- Subcommands.

struct Runtime {
  std::string out;
  bool color = false;
  std::vector<std::string> warnings;  // printed to stderr before the output
};

// Renders one result in the --format asked for; only that one is built.
template <typename Text, typename Json, typename Markdown>
std::string render(Format format, Text text, Json json, Markdown markdown) {
  switch (format) {
    case Format::json:
      return json();
    case Format::markdown:
      return markdown();
    case Format::text:
      break;
  }
  return text();
}

int run_plan(const PlanOptions& options, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(options.output, app);
  Setup setup = read_setup(options.setup);
  const Catalog catalog = load_catalog(options.output.catalog_dir, rt.warnings);
  LoadedModel loaded;
  load_model(catalog, options.model, loaded);
  const Model& model = *loaded.model;
  if (options.gpus.empty()) {
    if (app.count("--gpus") > 0) {
      throw Error(
          "--gpus is empty; give NxNAME such as 4xA100-80, or leave it out "
          "to list the fewest GPUs of each common type");
    }
    const Sizing sizing =
        make_sizing(model, catalog.gpus, setup, options.model);
    rt.out = render(
        format, [&] { return render_sizing_text(sizing, {.color = rt.color}); },
        [&] { return render_sizing_json(sizing); },
        [&] { return render_sizing_markdown(sizing); });
    const bool any_fits =
        std::any_of(sizing.rows.begin(), sizing.rows.end(),
                    [](const SizingRow& row) { return row.fits; });
    return any_fits ? k_exit_fits : k_exit_does_not_fit;
  }
  const GpuSpec spec = parse_gpu_spec(catalog, options.gpus);
  if (spec.gpu == nullptr || spec.count < 1) {
    throw Error(fmt::format(
        "--gpus '{}' is not NxNAME; use e.g. 4xA100-80, 1xH100 or an "
        "instance name such as p4de.24xlarge",
        options.gpus));
  }
  setup.gpus = spec.count;
  const Plan plan =
      make_plan(model, *spec.gpu, setup, catalog.gpus, options.model);
  rt.out = render(
      format, [&] { return render_text(plan, {.color = rt.color}); },
      [&] { return render_json(plan); }, [&] { return render_markdown(plan); });
  return plan.budget.fits() ? k_exit_fits : k_exit_does_not_fit;
}

// The cards `fit` tries: each word of --gpus (a name: any count; NxNAME or an
// instance: that count), else the catalog's common cards (every card with
// --all-gpus).
std::vector<FitCard> fit_cards(const Catalog& catalog, const FitOptions& o) {
  std::vector<FitCard> cards;
  auto add = [&cards](const Gpu* gpu, int count) {
    const bool seen = std::any_of(
        cards.begin(), cards.end(),
        [&](const FitCard& c) { return c.gpu == gpu && c.count == count; });
    if (!seen) {
      cards.push_back({gpu, count, std::nullopt});
    }
  };
  if (o.gpus.empty()) {
    for (const Gpu& gpu : catalog.gpus) {
      if (gpu.common || o.all_gpus) {
        add(&gpu, 0);
      }
    }
    return cards;
  }
  std::string_view rest = o.gpus;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string word(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{}
                                           : rest.substr(comma + 1);
    if (word.empty()) {
      continue;
    }
    const GpuSpec spec = parse_gpu_spec(catalog, word);
    const bool counted =
        spec.gpu != nullptr &&
        ((word.find('x') != std::string::npos &&
          std::isdigit(static_cast<unsigned char>(word.front())) != 0) ||
         std::any_of(catalog.instances.begin(), catalog.instances.end(),
                     [&](const Instance& i) { return i.name == word; }));
    if (spec.gpu != nullptr && counted) {
      add(spec.gpu, spec.count);
    } else {
      add(&find_gpu(catalog, word), 0);
    }
  }
  if (cards.empty()) {
    throw Error(fmt::format(
        "--gpus '{}' names no GPU; use a name, NxNAME or a comma list such as "
        "A100-80,8xH100",
        o.gpus));
  }
  return cards;
}

int run_fit(const FitOptions& options, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(options.output, app);
  Setup base = read_setup(options.setup);

  FitConstraints constraints;
  constraints.max_gpus = static_cast<int>(
      parse_whole("--max-gpus", options.max_gpus, 1, k_max_fit_gpus, "GPUs"));
  constraints.no_offload = options.no_offload;
  constraints.no_quant = options.no_quant;
  constraints.top =
      static_cast<int>(parse_whole("--top", options.top, 1, k_max_top, ""));
  if (!options.global_batch.empty()) {
    // The global batch the search keeps on every count: grad-accum on one
    // GPU, which the search divides as the GPUs grow.
    const std::int64_t global = parse_whole(
        "--global-batch", options.global_batch, 1, k_max_batch, "sequences");
    if (!base.training() || global % base.batch != 0) {
      throw Error(fmt::format(
          "--global-batch {} applies to training and must be a multiple of "
          "--batch {}",
          global, base.batch));
    }
    base.gpus = 1;
    base.nodes = 1;
    base.grad_accum = static_cast<int>(global / base.batch);
  }

  const Catalog catalog = load_catalog(options.output.catalog_dir, rt.warnings);
  LoadedModel loaded;
  load_model(catalog, options.model, loaded);
  const Model& model = *loaded.model;
  const std::vector<FitCard> cards = fit_cards(catalog, options);
  if (const auto problem = check(model, *cards.front().gpu, base)) {
    throw Error(*problem);
  }
  const FitResult result = fit(model, cards, base, constraints);
  rt.out = render(
      format, [&] { return render_fit_text(result, model, options.model); },
      [&] { return render_fit_json(result, model, options.model); },
      [&] { return render_fit_markdown(result, model, options.model); });
  const bool any_fits = std::any_of(result.plans.begin(), result.plans.end(),
                                    [](const FitPlan& p) { return p.fits; });
  return any_fits ? k_exit_fits : k_exit_does_not_fit;
}

// `oomplan models` and `oomplan gpus`: JSON, else the text table.
using CatalogRender = std::string (*)(const Catalog&);
int run_list(const ListOptions& options, const CLI::App& app, Runtime& rt,
             CatalogRender text, CatalogRender json) {
  const Format format = output_format(options.output, app);
  const Catalog catalog = load_catalog(options.output.catalog_dir, rt.warnings);
  rt.out = format == Format::json ? json(catalog) : text(catalog);
  return k_exit_fits;
}

// --- CLI11 errors -> one line.

std::string parse_error_text(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (what == "MODEL is required") {
    return "missing MODEL; give a catalog name (oomplan models), a Hugging "
           "Face id or a path to a config.json";
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

int dispatch(std::vector<std::string> args, Runtime& rt, std::ostream& out) {
  CLI::App app{
      "oomplan: predicts whether an LLM fits in GPU memory and what to change "
      "if not.\n"
      "  oomplan MODEL [options]  is  oomplan plan MODEL [options]",
      "oomplan"};
  app.set_version_flag("--version", "oomplan 0.1.0");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 fits, 1 does not fit, 2 bad input.\n"
      "Example: oomplan llama3-70b --gpus 4xA100-80 --seq 8192");

  // A repeated option takes its last value, so a script can append overrides
  // to a fix's args.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  PlanOptions plan_options;
  CLI::App* plan = app.add_subcommand(
      "plan", "per-GPU memory budget, verdict and fixes (the default)");
  plan->add_option("MODEL", plan_options.model,
                   "catalog name or alias, Hugging Face id, or a path to "
                   "config.json / a model folder")
      ->required();
  plan->add_option("--gpus", plan_options.gpus,
                   "NxNAME (4xA100-80) or an instance (p4de.24xlarge); "
                   "absent: the fewest of each common GPU");
  add_setup_options(*plan, plan_options.setup);
  add_output_options(*plan, plan_options.output);

  FitOptions fit_options;
  CLI::App* fit_app =
      app.add_subcommand("fit", "search the setups that fit, cheapest first");
  fit_app->add_option("MODEL", fit_options.model, "as for plan")->required();
  fit_app->add_option("--gpus", fit_options.gpus,
                      "GPU types to try: a name (any count), NxNAME or an "
                      "instance (that count), or a comma list (default: the "
                      "common GPUs)");
  add_setup_options(*fit_app, fit_options.setup);
  add_output_options(*fit_app, fit_options.output);
  fit_app->add_option("--max-gpus", fit_options.max_gpus, "most GPUs to use")
      ->type_name("INT")
      ->capture_default_str();
  fit_app->add_flag("--no-offload", fit_options.no_offload,
                    "never offload to CPU RAM");
  fit_app->add_flag("--no-quant", fit_options.no_quant,
                    "keep the weights, KV cache and optimizer states as they "
                    "are");
  fit_app->add_flag("--all-gpus", fit_options.all_gpus,
                    "every catalog GPU, not only the common ones");
  fit_app
      ->add_option("--global-batch", fit_options.global_batch,
                   "sequences per optimizer step (training)")
      ->type_name("INT");
  fit_app->add_option("--top", fit_options.top, "plans to show")
      ->type_name("INT")
      ->capture_default_str();

  ListOptions models_options;
  CLI::App* models = app.add_subcommand("models", "list the catalog's models");
  add_output_options(*models, models_options.output);
  ListOptions gpus_options;
  CLI::App* gpus = app.add_subcommand("gpus", "list the catalog's GPUs");
  add_output_options(*gpus, gpus_options.output);

  if (args.empty()) {
    throw Error(
        "missing MODEL; usage: oomplan MODEL [--gpus NxNAME] [options], or "
        "oomplan --help");
  }
  const std::string& first = args.front();
  const bool global_flag =
      first == "-h" || first == "--help" || first == "--version";
  if ((first == "diagnose" || first == "check") && !is_subcommand(app, first)) {
    // DESIGN §1 names them; say so rather than "unknown model 'diagnose'".
    throw Error(fmt::format(
        "'oomplan {}' is not part of this build; see oomplan --help", first));
  }
  if (!global_flag && !is_subcommand(app, first)) {
    args.insert(args.begin(), "plan");
  }

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

  if (plan->parsed()) {
    return run_plan(plan_options, *plan, rt);
  }
  if (fit_app->parsed()) {
    return run_fit(fit_options, *fit_app, rt);
  }
  if (models->parsed()) {
    return run_list(models_options, *models, rt, render_models_text,
                    render_models_json);
  }
  return run_list(gpus_options, *gpus, rt, render_gpus_text, render_gpus_json);
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out,
        std::ostream& err, bool out_is_terminal, bool no_color) {
  Runtime rt;
  rt.color = out_is_terminal && !no_color;
  try {
    const int code = dispatch(args, rt, out);
    for (const auto& warning : rt.warnings) {
      err << "oomplan: warning: " << one_line(warning) << '\n';
    }
    out << rt.out;
    out.flush();
    return code;
  } catch (const Error& e) {
    for (const auto& warning : rt.warnings) {
      err << "oomplan: warning: " << one_line(warning) << '\n';
    }
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
