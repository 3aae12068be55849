// `oomplan plan`, `oomplan fit`, `oomplan models` and `oomplan gpus`.

#include "cli/cli_internal.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/advice/search.hpp"
#include "oomplan/advice/sizing.hpp"
#include "oomplan/launch/launch.hpp"
#include "oomplan/model/dtype.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/render/prometheus.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/render/svg.hpp"
#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace oomplan::cli {
namespace {

// The commands' own bounds (the setup options' are in options.hpp).
constexpr std::int64_t k_max_fit_gpus = 4096;
constexpr std::int64_t k_max_top = 1000;

struct PlanOptions {
  std::string model;
  std::string gpus;
  std::string framework;
  SetupOptions setup;
  OutputOptions output;
};

struct FitOptions {
  std::string model;
  std::string gpus;
  std::string framework;
  SetupOptions setup;
  OutputOptions output;
  std::string max_gpus = std::to_string(k_sizing_max_gpus);
  bool no_offload = false;
  bool no_quant = false;
  bool all_gpus = false;
  std::string global_batch;
  std::string top = "10";
};

// The setup asked for: --framework NAME's defaults, then the options given,
// which win (the precedence `oomplan check` applies to launch configs).
Setup framework_setup(const std::string& framework, const SetupOptions& o) {
  Setup setup;
  const auto given = given_setup_options(o);
  if (!framework.empty()) {
    setup.framework = framework_from_name(framework);
    std::string_view mode;
    for (const auto& [flag, value] : given) {
      if (flag == "--mode") {
        mode = value;
      }
    }
    for (const LaunchOption& option : framework_defaults(framework, mode)) {
      apply_option(setup, option.flag, option.value);
    }
  }
  for (const auto& [flag, value] : given) {
    apply_option(setup, flag, value);
  }
  return setup;
}

int run_plan(const PlanOptions& options, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(options.output, app);
  const bool color = use_color(options.output, rt.env);
  Setup setup = framework_setup(options.framework, options.setup);
  const Catalog catalog = load_catalog(options.output.catalog_dir, rt);
  LoadedModel loaded;
  load_model(catalog, options.model, rt.env, loaded);
  const Model& model = *loaded.model;
  if (options.gpus.empty()) {
    if (format == Format::prometheus) {
      throw Error(
          "--format prometheus needs --gpus NxNAME: alerting rules are for "
          "the cards a job runs on");
    }
    if (app.count("--gpus") > 0) {
      throw Error(
          "--gpus is empty; give NxNAME such as 4xA100-80, or leave it out "
          "to list the fewest GPUs of each common type");
    }
    Sizing sizing = make_sizing(model, catalog.gpus, setup, options.model);
    sizing.origin = loaded.origin;
    render_into(
        rt, options.output, format,
        [&] { return render_sizing_text(sizing, {.color = color}); },
        [&] { return render_sizing_json(sizing); },
        [&] { return render_sizing_markdown(sizing); },
        [&] { return render_sizing_svg(sizing); });
    const bool any_fits =
        std::any_of(sizing.rows.begin(), sizing.rows.end(),
                    [](const SizingRow& row) { return row.fits; });
    return any_fits ? k_exit_fits : k_exit_does_not_fit;
  }
  const GpuSpec spec = counted_gpus(catalog, options.gpus);
  setup.gpus = spec.count;
  apply_instance(spec, setup);
  Plan plan = make_plan(model, *spec.gpu, setup, options.model,
                        advisor(catalog.gpus, card_prices(catalog)));
  plan.origin = loaded.origin;
  if (format == Format::prometheus) {
    rt.out = render_plan_prometheus(plan);
    if (!options.output.svg_file.empty()) {
      rt.files.push_back({options.output.svg_file, render_plan_svg(plan)});
    }
    return plan.budget.fits() ? k_exit_fits : k_exit_does_not_fit;
  }
  render_into(
      rt, options.output, format,
      [&] { return render_text(plan, {.color = color}); },
      [&] { return render_json(plan); }, [&] { return render_markdown(plan); },
      [&] { return render_plan_svg(plan); });
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
  Setup base = framework_setup(options.framework, options.setup);

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
    constraints.exact_global_batch = true;
  }

  const Catalog catalog = load_catalog(options.output.catalog_dir, rt);
  LoadedModel loaded;
  load_model(catalog, options.model, rt.env, loaded);
  const Model& model = *loaded.model;
  std::vector<FitCard> cards = fit_cards(catalog, options);
  if (!options.gpus.empty() && options.gpus.find(',') == std::string::npos) {
    // One instance named: its host RAM and price are the node's.
    apply_instance(parse_gpu_spec(catalog, options.gpus), base);
  }
  // --price is the user's card's: it applies when --gpus names one card
  // type; every other card costs the catalog's on-demand price, or none.
  const bool one_type =
      std::all_of(cards.begin(), cards.end(),
                  [&](const FitCard& c) { return c.gpu == cards.front().gpu; });
  for (FitCard& card : cards) {
    card.usd_per_gpu_hour = base.price && one_type && !options.gpus.empty()
                                ? base.price
                                : gpu_hour_price(catalog, *card.gpu);
  }
  if (const auto problem = check(model, *cards.front().gpu, base)) {
    throw Error(*problem);
  }
  const FitResult result = fit(model, cards, base, constraints);
  render_into(
      rt, options.output, format,
      [&] { return render_fit_text(result, model, options.model); },
      [&] { return render_fit_json(result, model, options.model); },
      [&] { return render_fit_markdown(result, model, options.model); },
      [&] { return render_fit_svg(result, model, options.model); });
  const bool any_fits = std::any_of(result.plans.begin(), result.plans.end(),
                                    [](const FitPlan& p) { return p.fits; });
  return any_fits ? k_exit_fits : k_exit_does_not_fit;
}

// --- vLLM's own spellings (`oomplan plan --engine vllm
// --tensor-parallel-size 4 --gpu-memory-utilization=0.8 --dtype bfloat16`),
// rewritten to oomplan's before CLI11 parses; translate_vllm_flag (launch.hpp)
// holds the mapping. The re-run lines oomplan prints keep its own spellings.

// The value of `flag` on the command line (`--flag V` or `--flag=V`), the
// last one given; nullopt when absent.
std::optional<std::string> last_value(const std::vector<std::string>& args,
                                      std::string_view flag) {
  std::optional<std::string> value;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == flag && i + 1 < args.size()) {
      value = args[i + 1];
    } else if (word.size() > flag.size() && word.starts_with(flag) &&
               word[flag.size()] == '=') {
      value = word.substr(flag.size() + 1);
    }
  }
  return value;
}

// True when the command plans vLLM: --engine vllm, or --framework vllm
// without an --engine.
bool plans_vllm(const std::vector<std::string>& args) {
  const auto engine = last_value(args, "--engine");
  if (engine) {
    return *engine == "vllm";
  }
  return last_value(args, "--framework") == std::optional<std::string>("vllm");
}

bool is_dtype_name(std::string_view text) {
  const auto names = dtype_names();
  return std::find(names.begin(), names.end(), text) != names.end();
}

// `args` (args[0] is the subcommand) with vLLM's spellings of `app`'s
// options in oomplan's. Without --engine vllm a vLLM-only spelling is an
// error that says to add it; oomplan's own options pass unchanged.
std::vector<std::string> rewrite_vllm_spellings(const CLI::App& app,
                                                std::vector<std::string> args) {
  const bool vllm = plans_vllm(args);
  std::vector<std::string> out;
  out.reserve(args.size());
  out.push_back(args.front());
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word.size() < 2 || word[0] != '-' || word == "--") {
      out.push_back(word);
      continue;
    }
    const auto eq = word.find('=');
    const std::string name = word.substr(0, eq);
    const bool inline_value = eq != std::string::npos;
    const bool own = app.get_option_no_throw(name) != nullptr;
    if (own && name != "--dtype") {
      // vLLM spells --max-model-len and its scheduler limits as oomplan
      // does, and also takes 32k there.
      const bool human = vllm && (name == "--max-model-len" ||
                                  name == "--max-num-batched-tokens");
      if (human && (inline_value || i + 1 < args.size())) {
        const std::string value =
            inline_value ? word.substr(eq + 1) : args[i + 1];
        std::optional<LaunchOption> option;
        try {
          option = translate_vllm_flag(name, value);
        } catch (const Error&) {
          option.reset();  // oomplan's own message reports it
        }
        if (option && option->flag == name) {
          out.push_back(name);
          out.push_back(option->value);
          i += inline_value ? 0 : 1;
          continue;
        }
      }
      out.push_back(word);
      continue;
    }
    // The value: after '=', else the next word when the flag takes one.
    const bool takes_next = !inline_value && i + 1 < args.size() &&
                            (own || vllm_flag_takes_value(name));
    const std::string value = inline_value
                                  ? word.substr(eq + 1)
                                  : (takes_next ? args[i + 1] : std::string());
    if (own && is_dtype_name(value)) {  // --dtype bf16: oomplan's own
      out.push_back(word);
      continue;
    }
    std::optional<LaunchOption> option;
    try {
      option = translate_vllm_flag(name, value);
    } catch (const Error&) {
      if (vllm) {
        throw;
      }
      out.push_back(word);  // not vLLM's either: CLI11 reports it
      continue;
    }
    const bool dtype_auto = own && !option;  // vLLM's --dtype auto
    if (!option && !dtype_auto) {
      out.push_back(word);
      continue;
    }
    if (!vllm) {
      const std::string ours =
          dtype_auto ? std::string("leave --dtype out")
          : option->value.empty()
              ? fmt::format("write {}", option->flag)
              : fmt::format("write {} {}", option->flag, option->value);
      throw Error(
          fmt::format("{}{}{} is vLLM's spelling; add --engine vllm, or {}",
                      name, value.empty() ? "" : " ", value, ours));
    }
    if (option) {
      out.push_back(option->flag);
      if (!option->value.empty()) {
        out.push_back(option->value);
      }
    }
    if (takes_next) {
      ++i;  // the value was consumed
    }
  }
  return out;
}

// --framework NAME on plan and fit.
void add_framework_option(CLI::App& app, std::string& framework) {
  std::vector<std::string> names;
  for (const std::string_view name : framework_names()) {
    names.emplace_back(name);
  }
  std::string choices = "{";
  for (const std::string& name : names) {
    choices += choices.size() > 1 ? "," : "";
    choices += name;
  }
  choices += "}";
  app.add_option("--framework", framework,
                 "apply a framework's defaults (torchtune: pure bf16, chunked "
                 "loss, ...) below the options given")
      ->type_name(choices)
      ->check(CLI::IsMember(names).description(""))
      ->group(std::string(option_group_name(OptionGroup::workload)));
}

// `oomplan models` and `oomplan gpus`.
using CatalogRender = std::string (*)(const Catalog&);
struct ListRenders {
  CatalogRender text;
  CatalogRender json;
  CatalogRender markdown;
};

void add_list_command(CLI::App& root, Commands& commands, const char* name,
                      const char* summary, ListRenders renders) {
  CLI::App* app = commands.add(root, name, summary);
  if (app == nullptr) {
    return;
  }
  auto options = std::make_shared<OutputOptions>();
  add_output_options(*app, *options);
  commands.push_back({app, [options, app, renders](Runtime& rt) {
                        const Format format = output_format(*options, *app);
                        const Catalog catalog =
                            load_catalog(options->catalog_dir, rt);
                        rt.out = format == Format::json ? renders.json(catalog)
                                 : format == Format::markdown
                                     ? renders.markdown(catalog)
                                     : inert_text(renders.text(catalog), false);
                        return k_exit_fits;
                      }});
}

}  // namespace

std::vector<std::string> vllm_spellings(CLI::App& root,
                                        std::vector<std::string> args) {
  if (args.empty() || (args.front() != "plan" && args.front() != "fit")) {
    return args;
  }
  const auto apps = root.get_subcommands(
      [&](CLI::App* s) { return s->check_name(args.front()); });
  if (apps.empty()) {
    return args;
  }
  return rewrite_vllm_spellings(*apps.front(), std::move(args));
}

namespace {
void add_plan(CLI::App& app, Commands& commands);
void add_fit(CLI::App& app, Commands& commands);
}  // namespace

void add_plan_commands(CLI::App& root, Commands& commands) {
  if (CLI::App* plan = commands.add(
          root, "plan",
          "per-GPU memory budget, verdict and fixes (the default)")) {
    add_plan(*plan, commands);
  }
  if (CLI::App* fit_app = commands.add(
          root, "fit",
          "search the setups that fit: no offload, least accuracy risk, then "
          "cheapest per token first")) {
    add_fit(*fit_app, commands);
  }
  add_list_command(
      root, commands, "models", "list the catalog's models",
      {render_models_text, render_models_json, render_models_markdown});
  add_list_command(root, commands, "gpus", "list the catalog's GPUs",
                   {render_gpus_text, render_gpus_json, render_gpus_markdown});
}

namespace {

void add_plan(CLI::App& app, Commands& commands) {
  CLI::App* plan = &app;
  auto plan_options = std::make_shared<PlanOptions>();
  plan->add_option("MODEL", plan_options->model,
                   "catalog name or alias, Hugging Face id, or a path to "
                   "config.json / a model folder")
      ->required();
  plan->add_option("--gpus", plan_options->gpus,
                   "NxNAME (4xA100-80) or an instance (p4de.24xlarge); "
                   "absent: the fewest of each common GPU")
      ->type_name("NxNAME")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  add_framework_option(*plan, plan_options->framework);
  add_setup_options(*plan, plan_options->setup, commands);
  add_output_options(*plan, plan_options->output,
                     {.svg = true, .prometheus = true});
  commands.push_back({plan, [plan_options, plan](Runtime& rt) {
                        return run_plan(*plan_options, *plan, rt);
                      }});
}

void add_fit(CLI::App& app, Commands& commands) {
  CLI::App* fit_app = &app;
  auto fit_options = std::make_shared<FitOptions>();
  fit_app->add_option("MODEL", fit_options->model, "as for plan")->required();
  fit_app
      ->add_option("--gpus", fit_options->gpus,
                   "GPU types to try: a name (any count), NxNAME or an "
                   "instance (that count), or a comma list (default: the "
                   "common GPUs)")
      ->type_name("GPU[,GPU...]")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  add_framework_option(*fit_app, fit_options->framework);
  add_setup_options(*fit_app, fit_options->setup, commands);
  add_output_options(*fit_app, fit_options->output, {.svg = true});
  fit_app->add_option("--max-gpus", fit_options->max_gpus, "most GPUs to use")
      ->type_name("INT")
      ->capture_default_str()
      ->group("Search");
  add_switch(*fit_app, "--no-offload", fit_options->no_offload,
             "never offload to CPU RAM")
      ->group("Search");
  add_switch(*fit_app, "--no-quant", fit_options->no_quant,
             "keep the weights, KV cache and optimizer states as they are")
      ->group("Search");
  add_switch(*fit_app, "--all-gpus", fit_options->all_gpus,
             "every catalog GPU, not only the common ones")
      ->group("Search");
  fit_app
      ->add_option("--global-batch", fit_options->global_batch,
                   "sequences per optimizer step (training)")
      ->type_name("INT")
      ->group("Search");
  fit_app->add_option("--top", fit_options->top, "plans to show")
      ->type_name("INT")
      ->capture_default_str()
      ->group("Search");
  commands.push_back({fit_app, [fit_options, fit_app](Runtime& rt) {
                        return run_fit(*fit_options, *fit_app, rt);
                      }});
}

}  // namespace

}  // namespace oomplan::cli
