// `oomplan diagnose LOG|- [MODEL --gpus NxNAME [plan options]]`: an
// out-of-memory log explained (issue 11).
//
// The log is read as a stream in 1 MiB chunks into a LogScanner, so memory
// stays constant whatever its size: a file (any size: the config-file cap
// does not apply), a FIFO or a device, or standard input for `-`. Reading
// stops early when the input is clearly binary (the scanner says when), so
// /dev/zero ends after its first MiB. With MODEL and --gpus the setup is
// planned through the plan pipeline first (bad options fail before a long
// log is read), and the plan is set beside the diagnosis.
//
// MODEL requires --gpus: a log names a card's capacity at most, never how
// many cards the job ran on, and cards of one capacity differ (A100-80 and
// H100-80 both report about 79.2 GiB), so there is no sound default.

#include "cli/cli_internal.hpp"
#include "cli/io.hpp"

#include "oomplan/advice/advice.hpp"
#include "oomplan/diagnose/diagnose.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/render/diagnose.hpp"
#include "oomplan/util/error.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace oomplan::cli {
namespace {

namespace fs = std::filesystem;

// DESIGN exit codes as diagnose reads them.
constexpr int k_exit_explained = k_exit_fits;           // a message explained
constexpr int k_exit_no_message = k_exit_does_not_fit;  // no OOM message
// What one read asks for (issue 11: 1 MiB chunks).
constexpr std::size_t k_chunk_bytes = std::size_t{1} << 20;

struct DiagnoseOptions {
  std::string log;
  std::string model;
  std::string gpus;
  SetupOptions setup;
  OutputOptions output;
};

// Feeds `in` to a scanner until its end, or until the scanner has seen
// enough to call the input binary.
Diagnosis scan(std::istream& in, const std::string& name) {
  LogScanner scanner;
  const auto chunk = std::make_unique<char[]>(k_chunk_bytes);
  while (!scanner.done()) {
    in.read(chunk.get(), static_cast<std::streamsize>(k_chunk_bytes));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n > 0) {
      scanner.feed({chunk.get(), n});
    }
    if (!in) {
      break;
    }
  }
  if (in.bad()) {
    throw Error(fmt::format("cannot read {}", name));
  }
  return scanner.finish();
}

// The diagnosis of LOG: a path, or `-` for standard input.
Diagnosis read_log(const std::string& log, const Environment& env) {
  if (log == "-") {
    if (env.in == nullptr || env.in_problem) {
      throw Error(fmt::format(
          "{}; pipe the log into oomplan diagnose - or "
          "give the log's path",
          env.in_problem.value_or("standard input is not available")));
    }
    return scan(*env.in, "standard input");
  }
  const std::string name = one_line(log);
  std::error_code ec;
  const fs::file_status status = fs::status(log, ec);
  if (ec || !fs::exists(status)) {
    throw Error(fmt::format(
        "no such file '{}'; give the log's path, or - to read standard input",
        name));
  }
  if (fs::is_directory(status)) {
    throw Error(fmt::format(
        "'{}' is a folder; give the log file, or - to read standard input",
        name));
  }
  // A FIFO or a device is read as a stream, like standard input.
  std::ifstream in(log, std::ios::binary);
  if (!in) {
    throw Error(
        fmt::format("cannot read '{}'; check that it is readable", name));
  }
  return scan(in, fmt::format("'{}'", name));
}

// The first setup option given, for the error that asks for MODEL.
std::optional<std::string> first_setup_option(const SetupOptions& setup) {
  const auto given = given_setup_options(setup);
  if (given.empty()) {
    return std::nullopt;
  }
  return given.front().first;
}

int run_diagnose(const DiagnoseOptions& o, const CLI::App& app, Runtime& rt) {
  const Format format = output_format(o.output, app);
  const bool color = use_color(o.output, rt.env);
  const bool gpus_given = app.count("--gpus") > 0;
  if (o.model.empty()) {
    if (gpus_given) {
      throw Error(
          "--gpus plans the job's setup and needs MODEL: oomplan diagnose LOG "
          "MODEL --gpus NxNAME");
    }
    if (const auto flag = first_setup_option(o.setup)) {
      throw Error(fmt::format(
          "{} plans the job's setup and needs MODEL and --gpus: oomplan "
          "diagnose LOG MODEL --gpus NxNAME {} ...",
          *flag, *flag));
    }
  } else if (o.gpus.empty()) {
    throw Error(fmt::format(
        "MODEL needs --gpus NxNAME: the log does not say how many GPUs of "
        "which kind the job ran on; e.g. oomplan diagnose {} {} --gpus 8xH100",
        one_line(o.log), one_line(o.model)));
  }

  // Context mode: the plan first, so a bad option fails before the log is
  // read. Everything the plan points into lives here until it is rendered.
  std::optional<Catalog> catalog;
  LoadedModel loaded;
  std::optional<Plan> plan;
  if (!o.model.empty()) {
    catalog = load_catalog(o.output.catalog_dir, rt);
    load_model(*catalog, o.model, rt.env, loaded);
    const GpuSpec spec = counted_gpus(*catalog, o.gpus);
    Setup setup = read_setup(o.setup);
    setup.gpus = spec.count;
    apply_instance(spec, setup);
    plan = make_plan(*loaded.model, *spec.gpu, setup, o.model,
                     advisor(catalog->gpus, card_prices(*catalog)));
    plan->origin = loaded.origin;
  } else if (!o.output.catalog_dir.empty()) {
    load_catalog(o.output.catalog_dir, rt);  // checked, though unused
  }

  Diagnosis d = read_log(o.log, rt.env);
  if (d.binary) {
    throw Error(fmt::format(
        "{} is not a text log ({} of {}{} bytes are NUL or invalid UTF-8); "
        "give the log as UTF-8 text, decompressed",
        o.log == "-" ? std::string("standard input")
                     : fmt::format("'{}'", one_line(o.log)),
        d.nul_bytes + d.invalid_utf8_bytes, d.stopped ? "the first " : "",
        d.bytes));
  }
  if (plan) {
    add_plan_context(d, *plan);
  }
  render_into(
      rt, o.output, format, [&] { return render_diagnosis_text(d, color); },
      [&] { return render_diagnosis_json(d); },
      [&] { return render_diagnosis_markdown(d); },
      [] { return std::string(); });
  return d.count > 0 ? k_exit_explained : k_exit_no_message;
}

}  // namespace

void add_diagnose_command(CLI::App& root, Commands& commands) {
  CLI::App* app = commands.add(
      root, "diagnose",
      "explain an out-of-memory log: what ran out, the cause, the fixes");
  if (app == nullptr) {
    return;
  }
  auto options = std::make_shared<DiagnoseOptions>();
  app->add_option("LOG", options->log,
                  "the log file (any size, read as a stream), or - for "
                  "standard input")
      ->required();
  app->add_option("MODEL", options->model,
                  "context mode: the job's model (as for plan); needs --gpus");
  app->add_option("--gpus", options->gpus,
                  "context mode: the job's GPUs, NxNAME (8xH100) or an "
                  "instance (p4de.24xlarge)")
      ->type_name("NxNAME")
      ->group(std::string(option_group_name(OptionGroup::hardware)));
  add_setup_options(*app, options->setup, commands);
  add_output_options(*app, options->output);
  app->footer(
      "Exit codes: 0 a message was found and explained, 1 the log holds no "
      "out-of-memory message, 2 bad input.\n"
      "Examples: oomplan diagnose train.log\n"
      "          kubectl logs pod/trainer-0 | oomplan diagnose -\n"
      "          oomplan diagnose train.log llama3-8b --gpus 1xA100-80 --mode "
      "lora");
  commands.push_back({app, [options, app](Runtime& rt) {
                        return run_diagnose(*options, *app, rt);
                      }});
}

}  // namespace oomplan::cli
