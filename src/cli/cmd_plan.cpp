// `oomplan plan`, `oomplan fit`, `oomplan models` and `oomplan gpus`.

#include "cli/cli_internal.hpp"

#include "oomplan/error.hpp"
#include "oomplan/plan.hpp"
#include "oomplan/report.hpp"
#include "oomplan/search.hpp"
#include "oomplan/svg.hpp"

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

int run_plan(const PlanOptions& options, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(options.output, app);
  const bool color = use_color(options.output, rt.env);
  Setup setup = read_setup(options.setup);
  const Catalog catalog = load_catalog(options.output.catalog_dir, rt);
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

  const Catalog catalog = load_catalog(options.output.catalog_dir, rt);
  LoadedModel loaded;
  load_model(catalog, options.model, loaded);
  const Model& model = *loaded.model;
  const std::vector<FitCard> cards = fit_cards(catalog, options);
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

// `oomplan models` and `oomplan gpus`.
using CatalogRender = std::string (*)(const Catalog&);
struct ListRenders {
  CatalogRender text;
  CatalogRender json;
  CatalogRender markdown;
};

void add_list_command(CLI::App& root, Commands& commands, const char* name,
                      const char* summary, ListRenders renders) {
  auto options = std::make_shared<OutputOptions>();
  CLI::App* app = root.add_subcommand(name, summary);
  add_output_options(*app, *options);
  commands.push_back({app, [options, app, renders](Runtime& rt) {
                        const Format format = output_format(*options, *app);
                        const Catalog catalog =
                            load_catalog(options->catalog_dir, rt);
                        rt.out = format == Format::json ? renders.json(catalog)
                                 : format == Format::markdown
                                     ? renders.markdown(catalog)
                                     : renders.text(catalog);
                        return k_exit_fits;
                      }});
}

}  // namespace

void add_plan_commands(CLI::App& root, Commands& commands) {
  auto plan_options = std::make_shared<PlanOptions>();
  CLI::App* plan = root.add_subcommand(
      "plan", "per-GPU memory budget, verdict and fixes (the default)");
  plan->add_option("MODEL", plan_options->model,
                   "catalog name or alias, Hugging Face id, or a path to "
                   "config.json / a model folder")
      ->required();
  plan->add_option("--gpus", plan_options->gpus,
                   "NxNAME (4xA100-80) or an instance (p4de.24xlarge); "
                   "absent: the fewest of each common GPU")
      ->type_name("NxNAME")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  add_setup_options(*plan, plan_options->setup);
  add_output_options(*plan, plan_options->output, {.svg = true});
  commands.push_back({plan, [plan_options, plan](Runtime& rt) {
                        return run_plan(*plan_options, *plan, rt);
                      }});

  auto fit_options = std::make_shared<FitOptions>();
  CLI::App* fit_app =
      root.add_subcommand("fit", "search the setups that fit, cheapest first");
  fit_app->add_option("MODEL", fit_options->model, "as for plan")->required();
  fit_app
      ->add_option("--gpus", fit_options->gpus,
                   "GPU types to try: a name (any count), NxNAME or an "
                   "instance (that count), or a comma list (default: the "
                   "common GPUs)")
      ->type_name("GPU[,GPU...]")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  add_setup_options(*fit_app, fit_options->setup);
  add_output_options(*fit_app, fit_options->output, {.svg = true});
  fit_app->add_option("--max-gpus", fit_options->max_gpus, "most GPUs to use")
      ->type_name("INT")
      ->capture_default_str()
      ->group("Search");
  fit_app
      ->add_flag("--no-offload", fit_options->no_offload,
                 "never offload to CPU RAM")
      ->group("Search");
  fit_app
      ->add_flag("--no-quant", fit_options->no_quant,
                 "keep the weights, KV cache and optimizer states as they are")
      ->group("Search");
  fit_app
      ->add_flag("--all-gpus", fit_options->all_gpus,
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

  add_list_command(
      root, commands, "models", "list the catalog's models",
      {render_models_text, render_models_json, render_models_markdown});
  add_list_command(root, commands, "gpus", "list the catalog's GPUs",
                   {render_gpus_text, render_gpus_json, render_gpus_markdown});
}

}  // namespace oomplan::cli
