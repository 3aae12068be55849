// `oomplan check FILE...`: the launch configs a team runs, each planned
// through the plan pipeline (issue 10). The CLI reads the files, resolves
// each plan's model and card, and hands them to the core (oomplan/check.hpp);
// a gate for CI: exit 0 only when every plan fits with the required headroom.

#include "cli/cli_internal.hpp"
#include "cli/io.hpp"

#include "oomplan/check/check.hpp"
#include "oomplan/launch/launch.hpp"
#include "oomplan/render/check.hpp"
#include "oomplan/render/prometheus.hpp"
#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace oomplan::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_launch_file = "launch config";

struct CheckCliOptions {
  std::vector<std::string> files;
  std::string model;
  std::string gpus;
  bool summary = false;
  SetupOptions setup;
  OutputOptions output;
};

// --gpus (or a plans file's gpus) parsed: the card, and the count when the
// text states one (NxNAME or an instance name; a bare NAME states none).
struct CardSpec {
  const Gpu* gpu = nullptr;
  std::optional<int> count;
  GpuSpec spec;  // as parsed: an instance's host RAM and price
};

CardSpec parse_card(const Catalog& catalog, const std::string& text,
                    std::string_view where) {
  const GpuSpec spec = parse_gpu_spec(catalog, text);
  if (spec.gpu == nullptr || spec.count < 1) {
    throw Error(fmt::format(
        "{} '{}' is not NxNAME or NAME; use e.g. 8xH100, H100 or an instance "
        "name such as p4de.24xlarge",
        where, text));
  }
  const bool counted =
      (text.find('x') != std::string::npos &&
       std::isdigit(static_cast<unsigned char>(text.front())) != 0) ||
      std::any_of(catalog.instances.begin(), catalog.instances.end(),
                  [&](const Instance& i) { return i.name == text; });
  return {spec.gpu, counted ? std::optional<int>(spec.count) : std::nullopt,
          spec};
}

// A config names its companion files relative to where the job is launched,
// usually its repository's root (LLaMA-Factory's examples say
// `deepspeed: examples/deepspeed/ds_z3_config.json`): this many folders
// above the config are tried.
constexpr int k_launch_root_levels = 8;

// Serves the files a launch config names (`deepspeed: ds_z3.json`): the path
// as written against the working directory (where the framework resolves
// it), then against the folder of the file that names it and the folders
// above it (the repository root the job is launched from).
FileLoader file_loader() {
  return [](const std::string& path,
            const std::string& from) -> std::optional<std::string> {
    const fs::path named(path);
    std::vector<fs::path> tries = {named};
    if (named.is_relative()) {
      fs::path folder = fs::path(from).parent_path();
      for (int level = 0; level <= k_launch_root_levels; ++level) {
        tries.push_back(folder / named);
        if (!folder.has_relative_path() || folder.parent_path() == folder) {
          break;
        }
        folder = folder.parent_path();
      }
    }
    for (const fs::path& candidate : tries) {
      std::error_code ec;
      if (fs::exists(candidate, ec)) {
        return read_input_file(candidate, k_launch_file,
                               k_max_launch_file_bytes);
      }
    }
    return std::nullopt;
  };
}

// The model of one plan: --model when given (it wins over the file, with a
// note when the file names another), else the file's model or the first of
// its aliases that resolves.
const Model* plan_model(const Catalog& catalog, const Environment& env,
                        const LaunchPlan& launch, const std::string& where,
                        const std::string& model_option,
                        const Model* model_given,
                        std::deque<LoadedModel>& store, CheckTarget& target) {
  std::vector<std::string> candidates;
  if (!launch.model.empty()) {
    candidates.push_back(launch.model);
  }
  for (const std::string& alias : launch.model_aliases) {
    if (!alias.empty() && std::find(candidates.begin(), candidates.end(),
                                    alias) == candidates.end()) {
      candidates.push_back(alias);
    }
  }
  const std::string key =
      launch.model_key.empty() ? std::string("model") : launch.model_key;
  std::optional<std::string> first_error;
  const Model* from_file = nullptr;
  std::string from_file_arg;
  ModelOrigin from_file_origin;
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    const bool on_disk = fs::exists(fs::path(candidate), ec);
    store.emplace_back();
    try {
      load_model(catalog, candidate, env, store.back());
      from_file = store.back().model;
      from_file_arg = candidate;
      from_file_origin = store.back().origin;
      break;
    } catch (const Error& e) {
      if (on_disk && model_given == nullptr) {
        // A local model folder that is there but unreadable is the answer.
        throw Error(fmt::format("{}: {}: {}", where, key, e.what()));
      }
      if (!first_error) {
        first_error = e.what();
      }
    }
  }
  if (model_given != nullptr) {
    target.model_arg = model_option;
    if (!launch.model.empty() &&
        (from_file == nullptr || from_file->name != model_given->name)) {
      target.notes.push_back(
          fmt::format("--model {} (command line) wins over the file's {} ({})",
                      model_option, key, launch.model));
    }
    return model_given;
  }
  if (from_file != nullptr) {
    target.model_arg = from_file_arg;
    target.origin = from_file_origin;
    return from_file;
  }
  if (first_error) {
    throw Error(fmt::format("{}: {}: {} (--model NAME plans another model)",
                            where, key, *first_error));
  }
  throw Error(fmt::format(
      "{}: names no model ({} config); pass --model NAME (a catalog name, a "
      "Hugging Face id or a config.json path)",
      where, launch.reader));
}

// The card of one plan: --gpus when given (its count wins when it states
// one), else the card a plans file states in `gpus`.
const Gpu* plan_card(const Catalog& catalog, const std::optional<CardSpec>& cli,
                     const std::string& cli_text, LaunchPlan& launch,
                     const std::string& where, CheckTarget& target) {
  const auto stated =
      std::find_if(launch.options.begin(), launch.options.end(),
                   [](const LaunchOption& o) { return o.flag == "--gpus"; });
  std::optional<CardSpec> file_card;
  if (stated != launch.options.end()) {
    const std::string key = stated->key.empty() ? "gpus" : stated->key;
    try {
      file_card = parse_card(catalog, stated->value, key);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}: {}", where, key, e.what()));
    }
    if (!launch.gpus && file_card->count) {
      launch.gpus = file_card->count;  // an instance name: its GPU count
    }
    if (cli && cli->gpu != file_card->gpu) {
      target.notes.push_back(
          fmt::format("--gpus {} (command line) wins over the file's {} ({})",
                      cli_text, key, stated->value));
    }
  }
  if (const auto& card = cli ? cli : file_card; card && card->spec.instance) {
    // An instance's host RAM and price, unless the file states them (an
    // explicit option still wins over both).
    Setup node;
    apply_instance(card->spec, node);
    for (const auto& [flag, value] :
         {std::pair{"--host-ram", node.host_ram_gib},
          std::pair{"--price", node.price}}) {
      const bool given = std::any_of(
          launch.options.begin(), launch.options.end(),
          [flag = flag](const LaunchOption& o) { return o.flag == flag; });
      if (value && !given) {
        launch.options.push_back(
            {flag, fmt::format("{}", *value), card->spec.instance->name});
      }
    }
  }
  if (cli) {
    return cli->gpu;
  }
  if (file_card) {
    return file_card->gpu;
  }
  const std::string count =
      launch.gpus ? fmt::format("{}x", *launch.gpus) : std::string("8x");
  if (launch.reader == "plans") {
    throw Error(fmt::format(
        "{}: names no GPU card; add \"gpus\": \"{}H100\" to the entry, or "
        "pass --gpus NxNAME",
        where, count));
  }
  throw Error(fmt::format(
      "{}: names no GPU card; pass --gpus NxNAME (e.g. --gpus {}H100), or "
      "--gpus NAME to plan the file's own GPU count",
      where, count));
}

int run_check(const CheckCliOptions& o, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(o.output, app);
  const bool color = use_color(o.output, rt.env);
  // The explicit options are checked once, before any file is read.
  (void)read_setup(o.setup);
  const Catalog catalog = load_catalog(o.output.catalog_dir, rt);

  CheckOptions options;
  options.given = given_setup_options(o.setup);
  std::optional<CardSpec> cli_card;
  if (app.count("--gpus") > 0) {
    if (o.gpus.empty()) {
      throw Error(
          "--gpus is empty; give NxNAME such as 8xH100, or NAME to plan each "
          "file's own GPU count");
    }
    cli_card = parse_card(catalog, o.gpus, "--gpus");
    options.gpus = cli_card->count;
    options.gpus_text = o.gpus;
  }
  std::deque<LoadedModel> models;  // stable addresses: plans point into it
  const Model* model_given = nullptr;
  ModelOrigin given_origin;
  if (app.count("--model") > 0) {
    if (o.model.empty()) {
      throw Error(
          "--model is empty; give a catalog name, a Hugging Face id or a "
          "config.json path");
    }
    models.emplace_back();
    load_model(catalog, o.model, rt.env, models.back());
    model_given = models.back().model;
    given_origin = models.back().origin;
  }

  std::vector<LaunchFile> files;
  files.reserve(o.files.size());
  for (const std::string& file : o.files) {
    files.push_back(
        {file, read_input_file(file, k_launch_file, k_max_launch_file_bytes)});
  }
  const std::vector<LaunchPlan> plans = read_launch_files(files, file_loader());

  for (const LaunchPlan& launch : plans) {
    for (const std::string& key : launch.unknown_keys) {
      rt.warnings.push_back(
          fmt::format("{}: unknown key '{}' (not read)", launch.file, key));
    }
  }
  const CheckResolver resolve = [&](LaunchPlan& launch,
                                    const std::string& where) {
    CheckTarget target;
    target.gpu = plan_card(catalog, cli_card, o.gpus, launch, where, target);
    target.model = plan_model(catalog, rt.env, launch, where, o.model,
                              model_given, models, target);
    if (model_given != nullptr) {
      target.origin = given_origin;
    }
    return target;
  };
  const CheckResult result = check_plans(plans, resolve, options, catalog.gpus);

  std::optional<std::string> markdown;
  if (o.summary) {
    if (rt.env.step_summary && !rt.env.step_summary->empty()) {
      markdown = inert_text(render_check_markdown(result), false);
      rt.files.push_back({*rt.env.step_summary, *markdown, true});
    } else {
      rt.warnings.push_back(
          "--summary: GITHUB_STEP_SUMMARY is not set, so no step summary was "
          "written (it is set inside GitHub Actions)");
    }
  }
  switch (format) {
    case Format::json:
      rt.out = render_check_json(result);
      break;
    case Format::markdown:
      rt.out = markdown ? *markdown
                        : inert_text(render_check_markdown(result), false);
      break;
    case Format::prometheus:
      rt.out = render_check_prometheus(result);
      break;
    case Format::text:
    case Format::svg:
      rt.out = inert_text(render_check_text(result, {.color = color}), color);
      break;
  }
  return result.fits() ? k_exit_fits : k_exit_does_not_fit;
}

}  // namespace

void add_check_command(CLI::App& root, Commands& commands) {
  CLI::App* app = commands.add(
      root, "check",
      "plan each launch config (vLLM command, DeepSpeed, HF/TRL, accelerate, "
      "axolotl, torchtune, LLaMA-Factory, LitGPT, plan list): a CI gate");
  if (app == nullptr) {
    return;
  }
  auto options = std::make_shared<CheckCliOptions>();
  app->add_option("FILE", options->files,
                  "launch configs; files launched together (args.yaml "
                  "ds.json) are one plan")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--model", options->model,
                  "the model of every plan (wins over the files'): catalog "
                  "name, Hugging Face id or config.json path")
      ->type_name("MODEL")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  app->add_option("--gpus", options->gpus,
                  "the card (NAME: each file's own GPU count) or NxNAME (that "
                  "count wins over the files')")
      ->type_name("NxNAME")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  add_setup_options(*app, options->setup, commands);
  add_output_options(*app, options->output, {.prometheus = true});
  add_switch(*app, "--summary", options->summary,
             "also append the Markdown table to $GITHUB_STEP_SUMMARY")
      ->group("Output");
  commands.push_back({app, [options, app](Runtime& rt) {
                        return run_check(*options, *app, rt);
                      }});
}

}  // namespace oomplan::cli
