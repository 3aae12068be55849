#include "cli/cli_internal.hpp"
#include "cli/io.hpp"

#include "oomplan/util/error.hpp"
#include "oomplan/util/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <system_error>

namespace oomplan::cli {
namespace {

namespace fs = std::filesystem;

std::string join_choices(const std::vector<std::string_view>& names) {
  std::string out = "{";
  for (const auto name : names) {
    out += out.size() > 1 ? "," : "";
    out += name;
  }
  return out + "}";
}

}  // namespace

// --- Binding options to CLI11: one option per row of the table, in its
// help group. `--gpus` is each command's own (a card for plan, a list for fit).

CLI::Option* add_switch(CLI::App& app, const std::string& flag, bool& on,
                        const std::string& help) {
  return app.add_flag(flag, on, help)->each([flag](const std::string& text) {
    parse_flag(flag, text);
  });
}

void add_setup_options(CLI::App& app, SetupOptions& o,
                       const Commands& commands) {
  const auto rows = option_rows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OptionRow& row = rows[i];
    if (row.flag.empty() || row.parse == nullptr || !commands.wants(row.flag)) {
      continue;
    }
    const std::string flag(row.flag);
    const std::string help(row.help);
    CLI::Option* option = nullptr;
    if (row.value_name.empty()) {
      // Bound to text, the row's parse_flag judges the value: CLI11 2.1.2
      // sums an integer flag's values with std::stoll ("--fsdp=false" is -1,
      // which a char keeps as on).
      option = app.add_flag(flag, o.texts[i], help);
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

std::vector<std::pair<std::string, std::string>> given_setup_options(
    const SetupOptions& o) {
  std::vector<std::pair<std::string, std::string>> given;
  const auto rows = option_rows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CLI::Option* option = o.bound[i];
    if (option == nullptr || option->count() == 0) {
      continue;
    }
    given.emplace_back(std::string(rows[i].flag), o.texts[i]);
  }
  return given;
}

Setup read_setup(const SetupOptions& o) {
  Setup setup;
  for (const auto& [flag, value] : given_setup_options(o)) {
    apply_option(setup, flag, value);
  }
  return setup;
}

void add_output_options(CLI::App& app, OutputOptions& o,
                        OutputChoices choices) {
  std::vector<std::string> formats = {"text", "json", "markdown"};
  if (choices.svg) {
    formats.emplace_back("svg");
  }
  if (choices.prometheus) {
    formats.emplace_back("prometheus");
  }
  const std::vector<std::string> colors = {"auto", "always", "never"};
  add_switch(app, "--json", o.json, "same as --format json")->group("Output");
  app.add_option("--format", o.format, "what to print")
      ->type_name(join_choices({formats.begin(), formats.end()}))
      ->check(CLI::IsMember(formats).description(""))
      ->capture_default_str()
      ->group("Output");
  app.add_option("--color", o.color,
                 "colour in the text report: auto (a terminal, NO_COLOR unset "
                 "or empty, TERM not dumb), always or never")
      ->type_name(join_choices({colors.begin(), colors.end()}))
      ->check(CLI::IsMember(colors).description(""))
      ->capture_default_str()
      ->group("Output");
  if (choices.svg) {
    app.add_option("--svg", o.svg_file,
                   "also write the picture (--format svg) to FILE")
        ->type_name("FILE")
        ->group("Output");
  }
  if (choices.catalog) {
    app.add_option("--catalog", o.catalog_dir,
                   "folder of extra models/GPUs JSON, overriding by name")
        ->type_name("DIR")
        ->group("Output");
  }
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
  if (o.format == "svg") {
    return Format::svg;
  }
  if (o.format == "prometheus") {
    return Format::prometheus;
  }
  return Format::text;
}

bool use_color(const OutputOptions& o, const Environment& env) {
  if (o.color == "always") {
    return true;
  }
  if (o.color == "never") {
    return false;
  }
  const bool no_color = env.no_color.has_value() && !env.no_color->empty();
  const bool dumb = env.term.has_value() && *env.term == "dumb";
  return env.out_is_terminal && !no_color && !dumb;
}

// --- Files.

Catalog load_catalog(const std::string& dir, Runtime& rt) {
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
  std::vector<std::string> origins;
  std::vector<std::string> texts;
  origins.reserve(files.size());
  texts.reserve(files.size());
  for (const auto& file : files) {
    origins.push_back(file.string());
    texts.push_back(read_input_file(file, "catalog file"));
  }
  std::vector<CatalogFile> extra;  // views into origins and texts
  extra.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    extra.push_back({origins[i], texts[i]});
  }
  // Overrides merge field by field; the same id in two files is an Error
  // naming both; shadowing a built-in name or alias is a warning.
  for (std::string& warning : merge_catalog_files(catalog, extra)) {
    rt.warnings.push_back(std::move(warning));
  }
  return catalog;
}

GpuSpec counted_gpus(const Catalog& catalog, const std::string& text) {
  const GpuSpec spec = parse_gpu_spec(catalog, text);
  if (spec.gpu == nullptr || spec.count < 1) {
    throw Error(fmt::format(
        "--gpus '{}' is not NxNAME; use e.g. 4xA100-80, 1xH100 or an "
        "instance name such as p4de.24xlarge",
        text));
  }
  return spec;
}

void apply_instance(const GpuSpec& spec, Setup& setup) {
  if (spec.instance == nullptr) {
    return;
  }
  if (!setup.host_ram_gib && spec.host_ram_bytes > 0) {
    setup.host_ram_gib =
        static_cast<double>(spec.host_ram_bytes) / static_cast<double>(k_gib);
  }
  if (!setup.price && spec.price_usd_per_hour > 0 && spec.count > 0) {
    setup.price = spec.price_usd_per_hour / spec.count;
  }
}

std::vector<std::optional<double>> card_prices(const Catalog& catalog) {
  std::vector<std::optional<double>> prices;
  prices.reserve(catalog.gpus.size());
  for (const Gpu& gpu : catalog.gpus) {
    prices.push_back(gpu_hour_price(catalog, gpu));
  }
  return prices;
}

}  // namespace oomplan::cli
