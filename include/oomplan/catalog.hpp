#pragma once

// The catalog: models, GPUs and cloud instances parsed from JSON text (the
// shipped models/*.json are compiled in; --catalog DIR adds or overrides by
// name), name resolution with "did you mean", and the Hugging Face config.json
// importer. Only text goes in: the CLI reads the files.

#include "oomplan/gpu.hpp"
#include "oomplan/model.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

struct Catalog {
  std::vector<Model> models;
  std::vector<Gpu> gpus;
  std::vector<Instance> instances;
};

// One embedded catalog file: its name (e.g. "models/llama.json") and its text.
struct CatalogFile {
  std::string_view origin;
  std::string_view text;
};

// The shipped catalog files, embedded at build time (generated source).
std::vector<CatalogFile> builtin_catalog_files();

// Parses one catalog document ({"models": [...], "gpus": [...], "instances":
// [...]}, each key optional) and validates every entry. Throws Error naming
// `origin`, the entry and the field.
Catalog parse_catalog(std::string_view text, std::string_view origin);

// Adds `extra`'s entries to `base`, replacing entries with the same name.
void merge_catalog(Catalog& base, Catalog extra);

// The shipped catalog, parsed once per call (the CLI calls it once).
Catalog builtin_catalog();

// Finds a model by name, alias or HF id (case-insensitive). Throws Error
// "unknown model 'lama3-70b'; did you mean llama3-70b?".
const Model& find_model(const Catalog& catalog, std::string_view name);

// Finds a GPU by name or alias (case-insensitive). Throws Error
// "unknown GPU 'A100-90'; did you mean A100-80?".
const Gpu& find_gpu(const Catalog& catalog, std::string_view name);

// "4xA100-80", "8xH100", "A100" (one GPU) or an instance name
// ("p4de.24xlarge").
struct GpuSpec {
  const Gpu* gpu = nullptr;
  int count = 0;
};
GpuSpec parse_gpu_spec(const Catalog& catalog, std::string_view spec);

// The closest of `candidates` to `word` by edit distance, or nullopt when none
// is close.
std::optional<std::string> suggest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// Imports a Hugging Face config.json (`config_text`). `index_text`, when given,
// is the model.safetensors.index.json whose metadata.total_size is the exact
// weight size. Throws Error naming `origin` and the missing field or
// unsupported model_type.
Model import_hf_config(
    std::string_view config_text, std::string_view origin,
    std::optional<std::string_view> index_text = std::nullopt);

}  // namespace oomplan
