// libFuzzer target: the Hugging Face config.json importer, checked against
// its contract: a model that passes check_model() with counts that add up, or
// one Error line.
//
// The input is the config.json. A top-level "__index__" member stands for the
// model.safetensors.index.json beside it: an object is passed as its JSON
// text, a string as raw bytes. The seeds (tests/fuzz/corpus/hf_import/)
// are the real configs of tests/data/hf/.

#include "fuzz_support.hpp"

#include "oomplan/model/catalog.hpp"

#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string config(text);
  std::optional<std::string> index;
  {
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_discarded() && doc.is_object() && doc.contains("__index__")) {
      const auto& value = doc["__index__"];
      index = value.is_string() ? value.get<std::string>() : value.dump();
      doc.erase("__index__");
      config = doc.dump();
    }
  }
  try {
    const oomplan::Model m =
        index ? oomplan::import_hf_config(config, "fuzz/config.json",
                                          std::string_view(*index))
              : oomplan::import_hf_config(config, "fuzz/config.json");
    oomplan::fuzz::check_model_contract(m);
    if (index) {
      oomplan::fuzz::require(m.checkpoint_bytes > 0,
                             "index given but checkpoint_bytes unset");
    }
  } catch (const oomplan::Error& e) {
    oomplan::fuzz::check_error(e, "fuzz/config.json: ");
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned int seed) {
  return oomplan::fuzz::mutate_json(data, size, max_size, seed);
}
