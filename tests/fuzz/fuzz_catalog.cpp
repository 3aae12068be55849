// libFuzzer target: the catalog loader (parse_catalog, merge_catalog_files
// over the shipped catalog, name resolution), checked against its contract:
// a valid catalog or one Error line, and every loaded entry valid.
//
// Build and run (docs/development.md "Fuzzing"):
//   CXX=clang++ cmake -B build-fuzz -DOOMPLAN_FUZZ=ON -DOOMPLAN_TESTS=OFF
//   cmake --build build-fuzz --target oomplan_fuzz
//   build-fuzz/fuzz_catalog build-fuzz/corpus/catalog tests/fuzz/corpus/catalog
//   \
//       -max_total_time=60

#include "fuzz_support.hpp"

#include "oomplan/model/catalog.hpp"

#include <cmath>
#include <set>
#include <string>

namespace {

using oomplan::Catalog;
using oomplan::fuzz::require;

std::string lower(std::string s) {
  for (char& ch : s) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return s;
}

void check_gpu(const oomplan::Gpu& g) {
  require(!g.name.empty(), "GPU without a name");
  require(g.capacity_bytes > 0, "GPU capacity not positive", g.name);
  for (const double rate : {g.bandwidth_gb_s, g.bf16_tflops, g.pcie_gb_s}) {
    require(std::isfinite(rate) && rate > 0, "GPU rate not positive", g.name);
  }
  for (const double rate : {g.fp8_tflops, g.nvlink_gb_s}) {
    require(std::isfinite(rate) && rate >= 0, "GPU rate negative", g.name);
  }
}

const Catalog& builtin() {
  static const Catalog k_builtin = oomplan::builtin_catalog();
  return k_builtin;
}

// A merged catalog: every entry valid, names and aliases unique, every
// instance's GPU and every name found again. Entries equal to the shipped
// one at the same place were checked once (the shipped catalog is valid).
void check_catalog(const Catalog& c, const Catalog& shipped) {
  std::set<std::string> model_keys;
  for (std::size_t i = 0; i < c.models.size(); ++i) {
    const auto& m = c.models[i];
    if (i >= shipped.models.size() || !(m == shipped.models[i])) {
      oomplan::fuzz::check_model_contract(m);
    }
    for (const auto& key : std::vector<std::string>{m.name}) {
      require(model_keys.insert(lower(key)).second, "duplicate model", key);
    }
    for (const auto& key : m.aliases) {
      require(model_keys.insert(lower(key)).second, "duplicate model alias",
              key);
    }
    require(&oomplan::find_model(c, m.name) == &m, "model name not found",
            m.name);
  }
  std::set<std::string> gpu_keys;
  for (const auto& g : c.gpus) {
    check_gpu(g);
    require(gpu_keys.insert(lower(g.name)).second, "duplicate GPU", g.name);
    for (const auto& key : g.aliases) {
      require(gpu_keys.insert(lower(key)).second, "duplicate GPU alias", key);
    }
    if (const auto price = oomplan::gpu_hour_price(c, g)) {
      require(std::isfinite(*price) && *price > 0, "GPU-hour price", g.name);
    }
  }
  for (const auto& i : c.instances) {
    require(i.count >= 1 && i.host_ram_bytes >= 0 && i.price_usd_per_hour >= 0,
            "instance values", i.name);
    const auto spec = oomplan::parse_gpu_spec(c, i.name);
    require(spec.gpu != nullptr && spec.count == i.count,
            "instance does not resolve", i.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Catalog alone = oomplan::parse_catalog(text, "fuzz.json");
    for (const auto& m : alone.models) {
      oomplan::fuzz::check_model_contract(m);
    }
    for (const auto& g : alone.gpus) {
      check_gpu(g);
    }
  } catch (const oomplan::Error& e) {
    oomplan::fuzz::check_error(e, "fuzz.json: ");
  }
  Catalog merged = builtin();
  try {
    oomplan::merge_catalog_files(merged, {{"fuzz.json", text}});
    check_catalog(merged, builtin());
  } catch (const oomplan::Error& e) {
    const std::string_view message = e.what();
    // Every merge error names the file, except a dangling instance GPU,
    // which is only known once all files are merged.
    oomplan::fuzz::check_error(
        e, message.rfind("instance ", 0) == 0 ? "instance " : "fuzz.json: ");
  }
  // The text as a model and a GPU name ("did you mean" on hostile text).
  for (const auto& lookup : {0, 1}) {
    try {
      if (lookup == 0) {
        oomplan::find_model(builtin(), text);
      } else {
        oomplan::parse_gpu_spec(builtin(), text);
      }
    } catch (const oomplan::Error& e) {
      oomplan::fuzz::check_error(e);
    }
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned int seed) {
  return oomplan::fuzz::mutate_json(data, size, max_size, seed);
}
