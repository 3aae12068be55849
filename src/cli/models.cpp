// MODEL resolved offline, in the order docs/models.md ("How a name is
// resolved") states: a path (config.json or a folder holding one), the
// catalog by name, alias or HF id, the user's Hugging Face cache, then a
// catalog model the name mirrors under another org. Never the network.

#include "cli/cli_internal.hpp"
#include "cli/io.hpp"

#include "oomplan/util/error.hpp"
#include "oomplan/util/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace oomplan::cli {
namespace {

namespace fs = std::filesystem;

// A cache folder holds one folder per repository; a scan for a name in
// another case stops after this many entries (a hub cache with more models
// than this is a file server, not a cache).
constexpr std::size_t k_max_cache_entries = 100'000;

std::optional<std::string> nonempty(const std::optional<std::string>& value) {
  return value && !value->empty() ? value : std::nullopt;
}

// "~/x" as os.path.expanduser reads it, with HOME.
fs::path expand_home(const std::string& path, const Environment& env) {
  const auto home = nonempty(env.home);
  if (home && (path == "~" || path.rfind("~/", 0) == 0)) {
    return fs::path(*home) / path.substr(std::min<std::size_t>(2, path.size()));
  }
  return path;
}

// A Hub repository id as huggingface_hub validates one
// (utils/_validators.py validate_repo_id): ORG/NAME, letters, digits, '-',
// '_' and '.', no "--" or "..", at most 96 characters. Anything else is not
// looked up in the cache (it cannot be there, and may be a path trick).
bool is_repo_id(std::string_view id) {
  const auto slash = id.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == id.size() ||
      id.find('/', slash + 1) != std::string::npos || id.size() > 96 ||
      id.find("--") != std::string_view::npos ||
      id.find("..") != std::string_view::npos) {
    return false;
  }
  for (const std::string_view part :
       {id.substr(0, slash), id.substr(slash + 1)}) {
    if (part.front() == '-' || part.front() == '.' || part.back() == '-' ||
        part.back() == '.') {
      return false;
    }
  }
  return std::all_of(id.begin(), id.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' ||
           ch == '_' || ch == '.' || ch == '/';
  });
}

// refs/main's commit, when it is one (40 hex digits); nullopt otherwise.
std::optional<std::string> main_ref(const fs::path& repo) {
  std::ifstream in(repo / "refs" / "main", std::ios::binary);
  std::string text(64, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(
      static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
  while (!text.empty() &&
         std::isspace(static_cast<unsigned char>(text.back()))) {
    text.pop_back();
  }
  const bool hex =
      text.size() == 40 && std::all_of(text.begin(), text.end(), [](char ch) {
        return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
      });
  return hex ? std::optional<std::string>(text) : std::nullopt;
}

// The repository's folder in the cache: models--ORG--NAME
// (huggingface_hub file_download.py repo_folder_name), else the one entry
// that spells it in another case (the Hub's ids are case-insensitive).
std::optional<fs::path> repo_folder(const fs::path& hub, std::string_view id) {
  std::string name = "models--" + std::string(id);
  name.replace(name.find('/'), 1, "--");
  std::error_code ec;
  if (fs::is_directory(hub / name, ec)) {
    return hub / name;
  }
  fs::directory_iterator it(hub, ec);
  for (std::size_t seen = 0;
       !ec && it != fs::directory_iterator() && seen < k_max_cache_entries;
       it.increment(ec), ++seen) {
    if (iequals(it->path().filename().string(), name)) {
      return it->path();
    }
  }
  return std::nullopt;
}

// The snapshot refs/main names, else the newest (the last one downloaded).
std::optional<fs::path> pick_snapshot(const fs::path& repo) {
  const fs::path snapshots = repo / "snapshots";
  std::error_code ec;
  if (const auto commit = main_ref(repo)) {
    if (fs::is_directory(snapshots / *commit, ec)) {
      return snapshots / *commit;
    }
  }
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  fs::directory_iterator it(snapshots, ec);
  for (std::size_t seen = 0;
       !ec && it != fs::directory_iterator() && seen < k_max_cache_entries;
       it.increment(ec), ++seen) {
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec)) {
      continue;
    }
    const auto time = fs::last_write_time(it->path(), entry_ec);
    if (!entry_ec && (!newest || time > newest_time)) {
      newest = it->path();
      newest_time = time;
    }
  }
  return newest;
}

void load_config_folder(const fs::path& folder, const fs::path& config,
                        LoadedModel& loaded) {
  const std::string config_text = read_input_file(config, "config.json");
  const fs::path index_path = folder / "model.safetensors.index.json";
  std::error_code ec;
  std::optional<std::string> index_text;
  if (fs::exists(index_path, ec)) {
    index_text = read_input_file(index_path, "model.safetensors.index.json");
  }
  loaded.imported = index_text ? import_hf_config(config_text, config.string(),
                                                  std::string_view(*index_text))
                               : import_hf_config(config_text, config.string());
  loaded.model = &loaded.imported;
}

void load_path(const std::string& arg, const fs::path& path,
               LoadedModel& loaded) {
  std::error_code ec;
  fs::path config = path;
  fs::path folder = path.parent_path();
  if (fs::is_directory(path, ec)) {
    config = path / "config.json";
    folder = path;
    const bool found = fs::exists(config, ec);
    if (ec) {
      // A folder that cannot be entered (EACCES) is not one without
      // config.json.
      throw Error(fmt::format("cannot look into '{}': {}", arg, ec.message()));
    }
    if (!found) {
      throw Error(fmt::format(
          "'{}' is a folder without config.json; give a Hugging Face model "
          "folder or a catalog name (see oomplan models)",
          arg));
    }
  }
  load_config_folder(folder, config, loaded);
  loaded.origin = {ModelStep::path, config.string()};
}

// `id`'s config.json from the cache, when the cache has the repository.
// A repository folder that is there but unusable is an Error saying how to
// mend it: a missing config.json or one whose blob link is broken.
bool load_from_cache(const fs::path& hub, const std::string& id,
                     LoadedModel& loaded) {
  const auto repo = repo_folder(hub, id);
  if (!repo) {
    return false;
  }
  const std::string fetch = fmt::format(
      "fetch it with `huggingface-cli download {} config.json` or pass a "
      "config.json path",
      id);
  const auto snapshot = pick_snapshot(*repo);
  if (!snapshot) {
    throw Error(fmt::format(
        "the Hugging Face cache has {} ('{}') but no snapshot in it; {}", id,
        repo->string(), fetch));
  }
  const fs::path config = *snapshot / "config.json";
  std::error_code ec;
  if (!fs::exists(config, ec)) {
    if (fs::is_symlink(fs::symlink_status(config, ec))) {
      throw Error(fmt::format(
          "'{}' is a broken link in the Hugging Face cache (its blob is "
          "gone); {}",
          config.string(), fetch));
    }
    throw Error(fmt::format(
        "the Hugging Face cache snapshot '{}' has no config.json; {}",
        snapshot->string(), fetch));
  }
  load_config_folder(*snapshot, config, loaded);
  loaded.imported.name = id;
  loaded.origin = {ModelStep::hf_cache, snapshot->string()};
  return true;
}

// One line for a name nothing resolved: the closest catalog names and how
// to pass a config.json.
[[noreturn]] void unknown_model(const Catalog& catalog, const std::string& arg,
                                const std::optional<fs::path>& hub) {
  // "/data/weights/Llama3-8B-Chinese-Chat/" or "./out": a path on another
  // machine, not a misspelt catalog name.
  const bool path_like = arg.front() == '/' || arg.front() == '~' ||
                         arg.rfind("./", 0) == 0 || arg.rfind("../", 0) == 0 ||
                         arg.back() == '/' ||
                         std::count(arg.begin(), arg.end(), '/') > 1;
  if (path_like) {
    throw Error(fmt::format(
        "no file or folder '{}' here; pass the path of its config.json or of "
        "a model folder on this machine, or a catalog name (see oomplan "
        "models)",
        arg));
  }
  const std::string where =
      hub ? fmt::format("not in the catalog or the Hugging Face cache ('{}')",
                        hub->string())
          : std::string("not in the catalog");
  const std::vector<std::string> near = closest_models(catalog, arg);
  std::string names;
  for (std::size_t i = 0; i < near.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + near[i];
  }
  throw Error(fmt::format(
      "unknown model '{}' ({}); {}pass a config.json path or a model folder",
      arg, where,
      near.empty() ? std::string("`oomplan models` lists the catalog, or ")
                   : fmt::format("did you mean {}? Otherwise ", names)));
}

}  // namespace

std::optional<fs::path> hub_cache_folder(const Environment& env) {
  for (const auto& value : {env.hf_hub_cache, env.huggingface_hub_cache}) {
    if (const auto folder = nonempty(value)) {
      return expand_home(*folder, env);
    }
  }
  if (const auto hf_home = nonempty(env.hf_home)) {
    return expand_home(*hf_home, env) / "hub";
  }
  if (const auto xdg = nonempty(env.xdg_cache_home)) {
    return expand_home(*xdg, env) / "huggingface" / "hub";
  }
  if (const auto home = nonempty(env.home)) {
    return fs::path(*home) / ".cache" / "huggingface" / "hub";
  }
  return std::nullopt;
}

void load_model(const Catalog& catalog, const std::string& arg,
                const Environment& env, LoadedModel& loaded) {
  if (arg.empty()) {
    throw Error(
        "the model name is empty; give a catalog name (see oomplan models), "
        "a Hugging Face id or a config.json path");
  }
  std::error_code ec;
  const fs::path path(arg);
  if (fs::exists(path, ec)) {
    load_path(arg, path, loaded);
    return;
  }
  if (path.extension() == ".json") {
    throw Error(fmt::format("no such file '{}'", arg));
  }
  if (const Model* m = lookup_model(catalog, arg)) {
    loaded.model = m;
    return;
  }
  const auto hub = hub_cache_folder(env);
  if (hub && is_repo_id(arg) && load_from_cache(*hub, arg, loaded)) {
    return;
  }
  // Only a Hub id is a mirror: "/tmp/Meta-Llama-3.1-70B-Instruct" is a
  // local path that is not there, not a copy of the catalog's model.
  const std::vector<Mirror> mirrors =
      is_repo_id(arg) ? mirror_candidates(catalog, arg) : std::vector<Mirror>{};
  if (mirrors.size() == 1) {
    const Mirror& mirror = mirrors.front();
    // The catalog's architecture under the repository the user names: launch
    // lines load that one (a mirror of a gated repository, a quantized copy).
    loaded.imported = *mirror.model;
    loaded.imported.hf_id = arg;
    if (mirror.quant != Quant::none) {
      // A pre-quantized copy: the weights its name states; the bf16
      // checkpoint's exact size no longer applies.
      loaded.imported.checkpoint_quant = mirror.quant;
      loaded.imported.checkpoint_bytes = 0;
    }
    loaded.model = &loaded.imported;
    loaded.origin = {ModelStep::mirror, arg};
    return;
  }
  if (mirrors.size() > 1) {
    std::string names;
    for (std::size_t i = 0; i < mirrors.size(); ++i) {
      names += (i == 0                    ? ""
                : i + 1 == mirrors.size() ? " and "
                                          : ", ") +
               mirrors[i].model->name;
    }
    throw Error(fmt::format(
        "'{}' could mirror {} (same repository name); name the catalog model, "
        "or pass the model's config.json",
        arg, names));
  }
  unknown_model(catalog, arg, hub);
}

}  // namespace oomplan::cli
