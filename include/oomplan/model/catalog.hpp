#pragma once

// The catalog: models, GPUs and cloud instances parsed from JSON text (the
// shipped models/*.json are compiled in; --catalog DIR adds or overrides by
// name), name resolution with "did you mean", and the Hugging Face config.json
// importer. Only text goes in: the CLI reads the files.

#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"

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

// One catalog file: its name for messages (e.g. "models/llama.json" or the
// --catalog path) and its text.
struct CatalogFile {
  std::string_view origin;
  std::string_view text;
};

// Parses one catalog document ({"models": [...], "gpus": [...], "instances":
// [...]}, each key optional) of complete entries and validates every entry
// (check_model() for models). Throws Error naming `origin`, the entry and the
// field. Instances may name GPUs of other files: merging checks them.
Catalog parse_catalog(std::string_view text, std::string_view origin);

// Merges the --catalog `files` (in the order given) over `base`, in time
// linear in the number of entries. Rules (models/README.md, "Overrides"):
// - an entry whose name is a name or alias in `base` overrides that entry
//   field by field: the fields it states replace the base's, the rest stay,
//   the base's spelling of the name and its aliases stay, and the merged
//   entry is validated again (a one-field GPU override is complete);
// - any other entry is new and must be complete (required fields);
// - the same name or alias in two of `files` is an Error naming both files;
// - naming a built-in entry by its alias, or giving an entry an alias that
//   a different built-in entry had, is a warning; the new entry then owns
//   that alias (a built-in entry's own name always finds it).
// Returns the warnings, each one line without a prefix, for the CLI to
// print to stderr as "oomplan: warning: <text>". Throws Error on the first
// bad entry, and when an instance names a GPU the merged catalog lacks.
std::vector<std::string> merge_catalog_files(
    Catalog& base, const std::vector<CatalogFile>& files);

// The shipped catalog (models/*.json, validated and turned into data at
// build time: no JSON is parsed at run time). Each call builds a new copy;
// call it once.
Catalog builtin_catalog();

// Joins the shipped catalog's files into one catalog: each file parsed and
// validated by parse_catalog(), the model families in the order `oomplan
// models` lists them (models/llama.json first), names and aliases unique
// across all files, every instance's GPU present. The build's generator
// (src/model/catalog_gen.cpp) runs it on models/*.json and compiles the result
// into builtin_catalog(); a bad file fails the build. Throws Error.
Catalog assemble_catalog(std::vector<CatalogFile> files);

// The model named by its name, alias or HF id (case-insensitive), or nullptr.
const Model* lookup_model(const Catalog& catalog, std::string_view name);

// Finds a model by name, alias or HF id (case-insensitive). Throws Error
// "unknown model 'lama3-70b'; did you mean llama3-70b?".
const Model& find_model(const Catalog& catalog, std::string_view name);

// The catalog models `name` may be a mirror of: a Hugging Face id under
// another org ("NousResearch/Llama-2-7b-hf") whose repository name equals,
// case-insensitively and without a trailing -hf, -fp16 or -bf16, the
// repository name of a model's HF id or of one of its names. A
// pre-quantized copy ("TechxGenus/Meta-Llama-3-8B-Instruct-AWQ", -GPTQ-Int4,
// -FP8, -bnb-4bit) matches too, with the weights its suffix names in
// `quant` (Quant::none otherwise). Each model once, in catalog order: the
// caller takes a single match and names several.
struct Mirror {
  const Model* model = nullptr;
  Quant quant = Quant::none;
};
std::vector<Mirror> mirror_candidates(const Catalog& catalog,
                                      std::string_view name);

// How `model` was found, for the report's first line and check's notes:
// "catalog", "from PATH", "from the Hugging Face cache (SNAPSHOT)" or
// "NousResearch/Llama-2-7b-hf planned as llama-2-7b, same architecture".
std::string origin_phrase(const Model& model, const ModelOrigin& origin);

// Up to `count` catalog model names closest to `name` by edit distance (at
// most 3 edits or a third of the name, the closest first, one per model), for
// the error line of a model nothing resolved. A vision-language name is only
// matched to vision-language names.
std::vector<std::string> closest_models(const Catalog& catalog,
                                        std::string_view name,
                                        std::size_t count = 3);

// Finds a GPU by name or alias (case-insensitive). Throws Error
// "unknown GPU 'A100-90'; did you mean A100-80?".
const Gpu& find_gpu(const Catalog& catalog, std::string_view name);

// "4xA100-80", "8xH100", "A100" (one GPU) or an instance name
// ("p4de.24xlarge"). An instance also gives the node's host RAM and price
// (0 when unknown, and always 0 for NxNAME).
struct GpuSpec {
  const Gpu* gpu = nullptr;
  int count = 0;
  const Instance* instance = nullptr;  // the instance named, else nullptr
  Bytes host_ram_bytes = 0;            // CPU RAM of one node
  double price_usd_per_hour = 0;       // on-demand price of one node
};
GpuSpec parse_gpu_spec(const Catalog& catalog, std::string_view spec);

// The cheapest on-demand price of one `gpu`-hour over the catalog's
// instances that carry `gpu` (instance price / GPUs per instance), or nullopt
// when no instance with that GPU lists a price.
std::optional<double> gpu_hour_price(const Catalog& catalog, const Gpu& gpu);

// The closest of `candidates` to `word` by edit distance (case-insensitive,
// at most `max_edits`, fewer than the candidate's length), or nullopt when
// none is close. Linear in the total length: a distance is computed only for
// a candidate within `max_edits` characters of `word`'s length, in a band of
// 2 max_edits + 1 diagonals that stops as soon as every cell exceeds it.
std::optional<std::string> suggest(std::string_view word,
                                   const std::vector<std::string>& candidates,
                                   std::size_t max_edits = 3);

// Imports a Hugging Face config.json (`config_text`). `index_text`, when given,
// is the model.safetensors.index.json whose metadata.total_size (an integer
// > 0, plausible for the parameter count: check_model()) becomes
// Model::checkpoint_bytes, the exact weight size. The imported model passes
// the same check_model() as catalog entries, before any arithmetic; sizes that
// would overflow 64-bit arithmetic are an Error, never a wrapped count. Throws
// Error (one line) naming `origin` and the field, or the unsupported
// model_type.
Model import_hf_config(
    std::string_view config_text, std::string_view origin,
    std::optional<std::string_view> index_text = std::nullopt);

}  // namespace oomplan
