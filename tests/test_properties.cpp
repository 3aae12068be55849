#include "json_schema.hpp"
#include "support.hpp"

#include "oomplan/memory/memory.hpp"
#include "oomplan/model/catalog.hpp"
#include "oomplan/plan/plan.hpp"
#include "oomplan/render/report.hpp"
#include "oomplan/setup/options.hpp"
#include "oomplan/time/time.hpp"
#include "oomplan/util/error.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Consistency properties (issue 9 point 7) over generated valid plans.
//
// The generator draws k_cases setups from a splitmix64 stream seeded with
// k_seed (the same plans on every platform and standard library):
// - MODEL: any model of the shipped catalog; --gpus N x any catalog GPU with
//   N in {1, 2, 4, 8}; --nodes 2 in 12 % of the cases;
// - --mode infer (two cases in five), full, lora or qlora; --engine vllm in
//   40 % of the inference cases;
// - every other option of the option table, each drawn in 10 to 40 % of the
//   cases it applies to (else left to its default): --seq {64 .. 131072},
//   --batch {1 .. 64}, --dtype, --quant, --kv-dtype, --tp {1 .. 8}, --pp {1,
//   2, 4}, --cp {2, 4}, --split layers, --sequence-parallel, --zero {0 .. 3},
//   --fsdp, --offload, --checkpointing (and every-N), --attn, --precision,
//   --optimizer, --optimizer-in-bwd, --lora-rank, --lora-targets,
//   --grad-accum, --loss, --activation-offload, --compile, --float8,
//   --prepare-kbit, --gpu-util {0.5 .. 0.98}, --max-model-len {512 ..
//   262144}, --max-num-seqs, --max-num-batched-tokens, --enforce-eager,
//   --vllm-version {0.6.3 .. 0.21}, --p2p, --overhead-gib, --reserve,
//   --min-headroom, --host-ram, --price; the names of NAME options come from
//   the option table itself, so a new value is drawn as soon as it exists.
// A second stream (seed k_seed + 1, k_bound_cases setups, Space::bounds())
// draws the numbers at the option table's bounds: 10M tokens, 1M sequences,
// 1500 nodes, rank 65536, gpu-util 0.0001 and 1, reserve 0.999999, ...
//
// Setups that check() rejects are discarded; the rest are priced through the
// pipeline (plan.hpp price()) and checked, each property with why it holds
// in the engines (Checker below):
// - the JSON: every number finite and >= 0 but headroom and a fix's saving,
//   nulls only where the contract allows them, the plan schema (one plan in
//   k_schema_every); the text report: no negative GiB, NaN or infinity;
// - total = sum of components = peak device bytes; headroom = usable -
//   total; allocated <= reserved <= device; stages hold every layer once;
// - fits = total <= usable and vLLM starts and the host RAM suffices
//   (DESIGN §2), from the document alone;
// - vLLM that starts: a pool of whole blocks, total = requested (+ graphs);
// - the re-run line (plan_argv) read back plans the same budget; through
//   the CLI (one plan in k_cli_every): exit code = verdict, same setup and
//   components, the first fix's own line reproduces its total;
// - monotone terms: per-GPU weights never rise with tp, with pp (heaviest
//   stage) or data parallelism (also gradients and states); the total, peak
//   and host RAM never fall with seq or batch; vLLM's pool, tokens and
//   concurrency never grow with max-model-len (scheduler pinned), its pool
//   never shrinks with gpu-util; checkpointing never raises the total;
//   quantized weights and an fp8 KV cache never outweigh 16-bit ones.
// On failure the plan's re-run command line (plan_args) and the options as
// drawn are printed: paste the first after `oomplan` to reproduce.

namespace oomplan {
namespace {

using Json = nlohmann::json;

constexpr std::uint64_t k_seed = 0x00f1'9a7e'0009'0007;

// Sanitizer builds (CI runs the suite under ASan + UBSan) draw fewer plans.
#if defined(__SANITIZE_ADDRESS__)
#define OOMPLAN_PROPERTIES_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOMPLAN_PROPERTIES_SANITIZED 1
#endif
#endif
#if defined(OOMPLAN_PROPERTIES_SANITIZED)
constexpr int k_cases = 800;
constexpr int k_bound_cases = 300;
#else
constexpr int k_cases = 6000;
constexpr int k_bound_cases = 1500;
#endif
// Every k_schema_every-th valid plan is validated against the plan schema.
constexpr int k_schema_every = 8;
// Every k_cli_every-th valid plan also runs through the CLI in-process.
constexpr int k_cli_every = 40;
// Failures reported in full, in all and per property (the rest are counted).
constexpr int k_max_reported = 40;
constexpr int k_reported_per_property = 3;

// splitmix64 (Steele, Lea and Flood 2014): a tiny generator whose stream is
// fixed by the seed alone.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : m_state(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9e37'79b9'7f4a'7c15ULL);
    z = (z ^ (z >> 30U)) * 0xbf58'476d'1ce4'e5b9ULL;
    z = (z ^ (z >> 27U)) * 0x94d0'49bb'1331'11ebULL;
    return z ^ (z >> 31U);
  }
  std::size_t below(std::size_t n) {
    return static_cast<std::size_t>(next() % n);
  }
  bool chance(unsigned percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& values) {
    return values[below(values.size())];
  }

 private:
  std::uint64_t m_state;
};

// A plan to check: the setup as asked, on a model and card of the catalog.
struct Subject {
  const Model* model = nullptr;
  const Gpu* gpu = nullptr;
  Setup setup;
  std::string drawn;  // the options as drawn (in case plan_args loses one)
  std::string args() const {
    return plan_args(model->name, *model, *gpu, setup);
  }
};

// Failures with the plan that shows each: the first few of each property are
// reported one by one (with the re-run line), all are counted.
class Failures {
 public:
  void expect(bool ok, std::string_view property, const Subject& subject,
              const std::string& detail = {}) {
    if (ok) {
      return;
    }
    ++m_count;
    const int seen = ++m_by_property[std::string(property)];
    if (seen <= k_reported_per_property && m_count <= k_max_reported) {
      INFO("oomplan " << subject.args());
      INFO("drawn: " << subject.drawn);
      INFO(detail);
      FAIL_CHECK(property);
    }
  }
  int count() const { return m_count; }
  // Each failing property with its count.
  const std::map<std::string, int>& by_property() const {
    return m_by_property;
  }

 private:
  int m_count = 0;
  std::map<std::string, int> m_by_property;
};

// The canonical values of a NAME option, from its row of the option table.
std::vector<std::string> choices_of(std::string_view flag) {
  const OptionRow* row = find_option(flag);
  REQUIRE(row != nullptr);
  REQUIRE(row->choices != nullptr);
  std::vector<std::string> out;
  for (const std::string_view name : row->choices()) {
    // "every-N" stands for a family: draw N = 2 (and every-3 below).
    out.emplace_back(name.ends_with("-N") ? "every-2" : std::string(name));
  }
  return out;
}

struct Space {
  std::vector<std::string> dtype = choices_of("--dtype");
  std::vector<std::string> quant = choices_of("--quant");
  std::vector<std::string> kv_dtype = choices_of("--kv-dtype");
  std::vector<std::string> offload = choices_of("--offload");
  std::vector<std::string> checkpointing = choices_of("--checkpointing");
  std::vector<std::string> attn = choices_of("--attn");
  std::vector<std::string> precision = choices_of("--precision");
  std::vector<std::string> optimizer = choices_of("--optimizer");
  std::vector<std::string> loss = choices_of("--loss");
  std::vector<std::string> p2p = choices_of("--p2p");
  std::vector<std::string> seq = {"64",   "256",   "1000",  "2048",  "4096",
                                  "8192", "16384", "32768", "131072"};
  std::vector<std::string> batch = {"1", "2", "3", "4", "8", "16", "64"};
  std::vector<std::string> parallel = {"1", "2", "4", "8"};
  std::vector<std::string> pp = {"1", "2", "4"};
  std::vector<std::string> cp = {"2", "4"};
  std::vector<std::string> zero = {"0", "1", "2", "3"};
  std::vector<std::string> lora_rank = {"8", "16", "64", "256"};
  std::vector<std::string> lora_targets = {"qv", "attn", "all", "q,k,v",
                                           "gate,up,down"};
  std::vector<std::string> grad_accum = {"1", "4", "16"};
  std::vector<std::string> gpu_util = {"0.5", "0.8", "0.9", "0.95", "0.98"};
  std::vector<std::string> max_model_len = {"512",   "2048",  "4096",  "8192",
                                            "32768", "65536", "262144"};
  std::vector<std::string> max_num_seqs = {"1", "16", "256", "1024"};
  std::vector<std::string> batched_tokens = {"512", "2048", "8192", "32768"};
  std::vector<std::string> vllm_version = {"0.6.3", "0.6",  "0.8",  "0.9.1",
                                           "0.10",  "0.11", "0.19", "0.21"};
  std::vector<std::string> overhead = {"0", "0.5", "2"};
  std::vector<std::string> reserve = {"0", "0.05", "0.3"};
  std::vector<std::string> headroom = {"0", "2", "10%"};
  std::vector<std::string> host_ram = {"64", "512", "2048"};
  std::vector<std::string> price = {"0", "2.5"};
  std::vector<std::string> nodes = {"2"};

  // Values at the option table's bounds (options.hpp k_max_*): sizes where a
  // term overflows if it is not saturated, ratios at their limits.
  static Space bounds() {
    Space x;
    x.seq = {"1", "3", "64", "1048576", "4999999", "10000000"};
    x.batch = {"1", "3", "65536", "1000000"};
    x.parallel = {"1", "2", "8", "64"};
    x.lora_rank = {"1", "65536"};
    x.grad_accum = {"1", "1000000"};
    x.gpu_util = {"0.0001", "0.9", "1"};
    x.max_model_len = {"1", "4097", "10000000"};
    x.max_num_seqs = {"1", "1000000"};
    x.batched_tokens = {"1", "10000000"};
    x.overhead = {"0", "1024"};
    x.reserve = {"0", "0.999999"};
    x.headroom = {"0", "1024", "99.99%"};
    x.host_ram = {"0.000001", "1048576"};
    x.price = {"0", "1000000"};
    x.nodes = {"3", "1500"};
    return x;
  }
};

// One drawn setup: the model, the card and the options as the command line
// would give them.
Subject draw_subject(Draw& d, const Space& x, const Catalog& cat) {
  Subject subject;
  subject.model = &cat.models[d.below(cat.models.size())];
  subject.gpu = &cat.gpus[d.below(cat.gpus.size())];
  Setup& s = subject.setup;
  s.gpus = std::stoi(d.pick(x.parallel));
  std::vector<std::pair<std::string, std::string>> options;
  auto maybe = [&](unsigned percent, const char* flag,
                   const std::vector<std::string>& values) {
    if (d.chance(percent)) {
      options.emplace_back(flag, d.pick(values));
    }
  };
  auto flag = [&](unsigned percent, const char* name) {
    if (d.chance(percent)) {
      options.emplace_back(name, "");
    }
  };
  maybe(12, "--nodes", x.nodes);
  const std::vector<std::string> modes = {"infer", "infer", "full", "lora",
                                          "qlora"};
  const std::string mode = d.pick(modes);
  options.emplace_back("--mode", mode);
  const bool vllm = mode == "infer" && d.chance(40);
  if (vllm) {
    options.emplace_back("--engine", "vllm");
  }
  maybe(40, "--seq", x.seq);
  maybe(30, "--batch", x.batch);
  maybe(25, "--dtype", x.dtype);
  maybe(25, "--quant", x.quant);
  maybe(20, "--kv-dtype", x.kv_dtype);
  maybe(30, "--tp", x.parallel);
  maybe(20, "--pp", x.pp);
  maybe(25, "--attn", x.attn);
  maybe(10, "--overhead-gib", x.overhead);
  maybe(10, "--reserve", x.reserve);
  maybe(15, "--min-headroom", x.headroom);
  maybe(15, "--host-ram", x.host_ram);
  maybe(10, "--price", x.price);
  if (mode == "infer") {
    if (!vllm && d.chance(10)) {
      options.emplace_back("--split", "layers");
    }
  } else {
    maybe(10, "--cp", x.cp);
    flag(10, "--sequence-parallel");
    maybe(30, "--zero", x.zero);
    flag(15, "--fsdp");
    maybe(20, "--offload", x.offload);
    maybe(35, "--checkpointing", x.checkpointing);
    if (d.chance(5)) {
      options.emplace_back("--checkpointing", "every-3");
    }
    maybe(25, "--precision", x.precision);
    maybe(30, "--optimizer", x.optimizer);
    flag(10, "--optimizer-in-bwd");
    maybe(25, "--lora-rank", x.lora_rank);
    maybe(20, "--lora-targets", x.lora_targets);
    maybe(15, "--grad-accum", x.grad_accum);
    maybe(25, "--loss", x.loss);
    flag(10, "--activation-offload");
    flag(15, "--compile");
    flag(10, "--float8");
    flag(15, "--prepare-kbit");
  }
  if (vllm) {
    maybe(40, "--gpu-util", x.gpu_util);
    maybe(40, "--max-model-len", x.max_model_len);
    maybe(20, "--max-num-seqs", x.max_num_seqs);
    maybe(20, "--max-num-batched-tokens", x.batched_tokens);
    flag(15, "--enforce-eager");
    maybe(40, "--vllm-version", x.vllm_version);
    maybe(20, "--p2p", x.p2p);
  }
  subject.drawn = subject.model->name + " --gpus " + std::to_string(s.gpus) +
                  "x" + subject.gpu->name;
  for (const auto& [name, value] : options) {
    subject.drawn += " " + name + (value.empty() ? "" : " " + value);
    apply_option(s, name, value);
  }
  return subject;
}

Json load_plan_schema() {
  const auto path = std::filesystem::path(OOMPLAN_SOURCE_DIR) / "src" /
                    "schema" / "plan-1.schema.json";
  std::ifstream in(path);
  INFO(path.string());
  REQUIRE(in.good());
  return Json::parse(in);
}

// The JSON keys whose value may be null (DESIGN §2 and the plan schema: an
// unknown host capacity, an override not given, vLLM starting, a text-only
// model's multimodal profile).
bool nullable(const std::string& key) {
  static const std::set<std::string> k_nullable = {"host_capacity_bytes",
                                                   "host_ram_gib",
                                                   "overhead_gib",
                                                   "reserve",
                                                   "price",
                                                   "error",
                                                   "multimodal"};
  return k_nullable.count(key) > 0;
}

// The only signed numbers of the contract: headroom (negative when the plan
// is over the card) and a fix's saving (negative when it costs memory).
bool signed_key(const std::string& key) {
  return key == "headroom_bytes" || key == "saves_bytes";
}

// Every number in `doc` is finite and non-negative (but for the signed
// keys), and every null sits at a nullable key: nlohmann prints NaN and
// infinity as null, so a null elsewhere is a non-finite number.
void walk_numbers(const Json& doc, const std::string& key,
                  const std::string& pointer, std::vector<std::string>& bad) {
  if (doc.is_object()) {
    for (const auto& [k, v] : doc.items()) {
      walk_numbers(v, k, pointer + "/" + k, bad);
    }
  } else if (doc.is_array()) {
    for (std::size_t i = 0; i < doc.size(); ++i) {
      walk_numbers(doc[i], key, pointer + "/" + std::to_string(i), bad);
    }
  } else if (doc.is_null()) {
    if (!nullable(key)) {
      bad.push_back(pointer + " is null (a NaN or infinity?)");
    }
  } else if (doc.is_number()) {
    const double value = doc.get<double>();
    if (!std::isfinite(value)) {
      bad.push_back(pointer + " is not finite");
    } else if (value < 0 && !signed_key(key)) {
      bad.push_back(pointer + " = " + doc.dump() + " is negative");
    }
  }
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    out += line + "\n";
  }
  return out;
}

// A printed GiB figure with a minus sign ("-25.68 GiB"), or a NaN or an
// infinity as fmt prints them, in a text report (a scan: std::regex costs
// more than the plan).
bool text_has_bad_number(const std::string& text) {
  auto digit = [&text](std::size_t i) {
    return i < text.size() && text[i] >= '0' && text[i] <= '9';
  };
  for (std::size_t i = text.find('-'); i != std::string::npos;
       i = text.find('-', i + 1)) {
    std::size_t j = i + 1;
    while (digit(j)) {
      ++j;
    }
    if (j > i + 1 && j < text.size() && text[j] == '.' && digit(j + 1)) {
      ++j;
      while (digit(j)) {
        ++j;
      }
      if (text.compare(j, 4, " GiB") == 0) {
        return true;
      }
    }
  }
  // "nan" or "inf" as a word of its own (not "info", "infer", "financial").
  auto alpha = [&text](std::size_t k) {
    return std::isalpha(static_cast<unsigned char>(text[k])) != 0;
  };
  for (const char* word : {"nan", "inf"}) {
    for (std::size_t at = text.find(word); at != std::string::npos;
         at = text.find(word, at + 1)) {
      const std::size_t end = at + 3;
      if ((at == 0 || !alpha(at - 1)) && (end == text.size() || !alpha(end))) {
        return true;
      }
    }
  }
  return false;
}

// The fits rule of DESIGN §2, from the document alone: the total within
// usable memory, vLLM starting (no error), the offloaded bytes within the
// node's CPU RAM when it is known.
bool fits_by_contract(const Json& doc) {
  const bool within =
      doc["total_bytes"].get<Bytes>() <= doc["usable_bytes"].get<Bytes>();
  const bool starts = !doc.contains("vllm") || doc["vllm"]["error"].is_null();
  const bool host =
      doc["host_capacity_bytes"].is_null() ||
      doc["host_bytes"].get<Bytes>() <= doc["host_capacity_bytes"].get<Bytes>();
  return within && starts && host;
}

// `setup` priced, or nullopt when check() rejects it.
std::optional<Priced> priced(const Subject& subject) {
  Pricing p = price(*subject.model, *subject.gpu, subject.setup);
  if (!p.priced) {
    return std::nullopt;
  }
  return std::move(*p.priced);
}

// The JSON `setup` less the options that do not apply to this mode: the
// re-run line leaves out a LoRA option of a full fine-tune (options.cpp), so
// the JSON may echo the given value on one side and the default on the other.
Json applying(Json setup, const Resolved& r) {
  if (r.mode != Mode::lora && r.mode != Mode::qlora) {
    setup.erase("lora_rank");
    setup.erase("lora_targets");
  }
  return setup;
}

// The plan's re-run command line (plan_argv) read back the way the CLI
// reads it: MODEL, --gpus NxNAME, then each option of the table (a flag row
// takes no value).
Subject reparse(const std::vector<std::string>& argv, const Catalog& cat) {
  Subject out;
  out.model = &find_model(cat, argv.at(0));
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& flag = argv[i];
    if (flag == "--gpus") {
      const std::string& value = argv.at(++i);
      const auto x = value.find('x');
      out.setup.gpus = std::stoi(value.substr(0, x));
      out.gpu = &find_gpu(cat, value.substr(x + 1));
      continue;
    }
    const OptionRow* row = find_option(flag);
    REQUIRE(row != nullptr);
    apply_option(out.setup, flag, row->value_name.empty() ? "" : argv.at(++i));
  }
  return out;
}

// The same components, verdict, host RAM and vLLM outcome.
bool same_plan(const Budget& a, const Budget& b) {
  if (a.count != b.count || a.fits() != b.fits() ||
      a.host_bytes != b.host_bytes ||
      a.vllm.has_value() != b.vllm.has_value() ||
      (a.vllm && a.vllm->error != b.vllm->error)) {
    return false;
  }
  for (std::size_t i = 0; i < a.count; ++i) {
    if (a.components[i].name != b.components[i].name ||
        a.components[i].bytes != b.components[i].bytes) {
      return false;
    }
  }
  return true;
}

// A component at the core's ceiling (memory.hpp k_max_component_bytes):
// the plan is beyond any cluster and its terms no longer compare.
bool saturated(const Budget& b) {
  for (std::size_t i = 0; i < b.count; ++i) {
    if (b.components[i].bytes >= k_max_component_bytes) {
      return true;
    }
  }
  return false;
}

// The most weights any GPU holds: the heaviest pipeline stage's, or the
// budget's own without stages.
Bytes heaviest_weights(const Budget& b) {
  Bytes most = b.stages.empty() ? b.bytes_of("weights") : 0;
  for (const Stage& stage : b.stages) {
    most = std::max(most, stage.weights_bytes);
  }
  return most;
}

struct Checker {
  Failures failures;
  test::SchemaValidator schema{load_plan_schema(), /*closed=*/true};
  int valid = 0;
  int fitting = 0;
  int vllm = 0;
  int training = 0;
  int cli_runs = 0;
  int tp_pairs = 0;
  int seq_pairs = 0;
  int batch_pairs = 0;
  int len_pairs = 0;
  int dp_pairs = 0;
  int pp_pairs = 0;
  int checkpointing_pairs = 0;
  int frugal_pairs = 0;
  int quant_pairs = 0;
  int util_pairs = 0;

  // Properties of one priced plan, from its budget and its JSON document.
  void plan(const Subject& subject, const Priced& priced) {
    const Budget& b = priced.budget;
    const Resolved& r = priced.setup;
    Plan p;
    p.model = subject.model;
    p.gpu = subject.gpu;
    p.request = subject.setup;
    p.setup = r;
    p.budget = b;
    p.model_arg = subject.model->name;
    p.time = estimate_time(*subject.model, *subject.gpu, r, b);
    const Json doc = Json::parse(render_json(p));

    // The document follows the published schema, every key declared (one
    // plan in k_schema_every: the validator compiles its patterns each time).
    if (valid % k_schema_every == 0) {
      const auto violations = schema.validate(doc);
      failures.expect(violations.empty(), "the plan JSON validates", subject,
                      joined(violations));
    }

    // No negative or non-finite number anywhere: every byte count is a size
    // and every time an estimate; only headroom is signed.
    std::vector<std::string> bad;
    walk_numbers(doc, "", "", bad);
    failures.expect(bad.empty(), "every JSON number is finite and >= 0",
                    subject, joined(bad));
    const StepTime& t = p.time;
    bool times_ok = true;
    for (const double v : {t.compute_s, t.memory_s, t.comm_s, t.offload_s,
                           t.step_s, t.tokens_per_step, t.tokens_per_s,
                           t.usd_per_mtok, t.flops_per_step}) {
      times_ok = times_ok && std::isfinite(v) && v >= 0;
    }
    failures.expect(times_ok, "time estimates are finite and >= 0", subject);

    // total = sum of components (DESIGN §2: "total_bytes is their sum"),
    // each component a size.
    Bytes sum = 0;
    bool components_ok = true;
    for (const auto& c : doc["components"]) {
      sum += c["bytes"].get<Bytes>();
      components_ok = components_ok && c["bytes"].get<Bytes>() >= 0;
    }
    failures.expect(components_ok, "components are >= 0", subject);
    failures.expect(
        sum == doc["total_bytes"].get<Bytes>() && sum == b.total_bytes(),
        "total = sum of components", subject,
        std::to_string(sum) + " vs " + doc["total_bytes"].dump());
    failures.expect(
        doc["headroom_bytes"].get<Bytes>() ==
            doc["usable_bytes"].get<Bytes>() - doc["total_bytes"].get<Bytes>(),
        "headroom = usable - total", subject);
    failures.expect(b.usable_bytes > 0 && b.usable_bytes <= b.capacity_bytes,
                    "0 < usable <= capacity", subject);

    // fits = total <= usable, the engine starts, the host RAM suffices
    // (DESIGN §2), in the document and in the budget.
    const bool fits = doc["fits"].get<bool>();
    failures.expect(fits == fits_by_contract(doc),
                    "fits = total <= usable and the engine starts (and host "
                    "RAM)",
                    subject);
    failures.expect(fits == b.fits(), "JSON fits = budget fits", subject);

    // The peak statistics nest (DESIGN §2): allocated tensors <= reserved
    // (+ fragmentation) <= device (+ context, NCCL, paged states) = total.
    const Json& peak = doc["peak"];
    const Bytes allocated = peak["allocated_bytes"].get<Bytes>();
    const Bytes reserved = peak["reserved_bytes"].get<Bytes>();
    const Bytes device = peak["device_bytes"].get<Bytes>();
    failures.expect(allocated <= reserved && reserved <= device,
                    "peak allocated <= reserved <= device", subject,
                    peak.dump());
    failures.expect(device == doc["total_bytes"].get<Bytes>(),
                    "peak device = total", subject, peak.dump());

    // Pipeline stages hold every layer once.
    if (doc.contains("stages")) {
      std::int64_t layers = 0;
      for (const auto& st : doc["stages"]) {
        layers += st["layers"].get<std::int64_t>();
      }
      const Model& m = *subject.model;
      failures.expect(layers == m.num_layers + std::max<std::int64_t>(
                                                   0, m.num_decoder_layers),
                      "stages hold every layer once", subject,
                      doc["stages"].dump());
    }

    if (b.vllm) {
      ++vllm;
      const VllmProfile& v = *b.vllm;
      // vLLM's start-up profile: once it starts, the pool is what gpu_util
      // leaves after weights, profile peak and non-torch memory, cut into
      // whole blocks; the graphs are captured after it (inside gpu_util from
      // 0.21), so total = requested (+ graphs before 0.21).
      if (v.error.empty()) {
        failures.expect(v.kv_cache_bytes > 0 && v.kv_tokens > 0,
                        "a vLLM that starts has a KV pool", subject);
        failures.expect(
            b.total_bytes() ==
                v.requested_bytes +
                    (v.graphs_in_budget ? 0 : v.cuda_graph_bytes),
            "vLLM total = requested (+ graphs captured after the pool)",
            subject);
      }
      failures.expect(v.kv_tokens % v.block_size == 0,
                      "vLLM KV tokens are whole blocks", subject);
    }

    // The text report prints no negative GiB figure, NaN or infinity (the
    // shortfall is printed as "N GiB over").
    failures.expect(!text_has_bad_number(render_text(p, {})),
                    "the text report prints no negative or non-finite number",
                    subject);
  }

  // The re-run command line (DESIGN §2: a fix's args "must reproduce" its
  // plan; the report's own line the same) plans the same budget.
  void rerun(const Subject& subject, const Priced& base, const Catalog& cat) {
    const Subject again = reparse(plan_argv(subject.model->name, *subject.model,
                                            *subject.gpu, subject.setup),
                                  cat);
    const auto p = priced(again);
    failures.expect(p.has_value(), "the re-run line plans", subject);
    if (p) {
      failures.expect(same_plan(base.budget, p->budget),
                      "the re-run line plans the same budget and verdict",
                      subject,
                      "total " + std::to_string(base.budget.total_bytes()) +
                          " -> " + std::to_string(p->budget.total_bytes()) +
                          ", fits " + std::to_string(base.budget.fits()) +
                          " -> " + std::to_string(p->budget.fits()));
    }
  }

  // Tensor parallelism doubled, with twice the GPUs so that data parallelism
  // stays: per-GPU weights never rise. Every engine shards each linear layer
  // over the tp ranks (Megatron column/row parallel, transformers tp_plan,
  // vLLM's parallel linear layers) and keeps the rest (norms, RoPE cache)
  // whole, so a rank never holds more than before.
  void tensor_parallel(const Subject& subject, const Priced& base) {
    const Resolved& r = base.setup;
    if (r.split_layers || 2 * r.tp > k_max_gpus) {
      return;
    }
    Subject wide = subject;
    wide.setup.gpus = 2 * subject.setup.gpus;
    wide.setup.tp = 2 * r.tp;
    const auto w = priced(wide);
    if (!w || saturated(base.budget) || saturated(w->budget)) {
      return;
    }
    ++tp_pairs;
    const Bytes before = base.budget.bytes_of("weights");
    const Bytes after = w->budget.bytes_of("weights");
    failures.expect(after <= before, "per-GPU weights never rise with tp", wide,
                    "tp " + std::to_string(r.tp) + ": " +
                        std::to_string(before) + " B, tp " +
                        std::to_string(2 * r.tp) + ": " +
                        std::to_string(after) + " B");
  }

  // A longer sequence or a larger batch, the rest the same: the total, the
  // peak statistics and the host RAM never fall, and a plan that fits stays
  // fitting with less. Transformers' generate and every training step hold
  // the KV cache, activations and logits of batch x seq tokens (each term
  // grows with both, none shrinks), next to weights, gradients and states
  // that do not depend on them. vLLM ignores --batch (its concurrency is
  // --max-num-seqs); its --seq is covered by context() below.
  void larger(const Subject& subject, const Priced& base, bool seq) {
    const Resolved& r = base.setup;
    if (seq && r.engine == Engine::vllm) {
      return;
    }
    Subject more = subject;
    if (seq) {
      more.setup.seq = 2 * r.seq;
    } else {
      more.setup.batch = 2 * r.batch;
    }
    const auto m = priced(more);
    if (!m || saturated(base.budget) || saturated(m->budget)) {
      return;
    }
    ++(seq ? seq_pairs : batch_pairs);
    const Budget& a = base.budget;
    const Budget& b = m->budget;
    const std::string what = seq ? "seq" : "batch";
    const std::string detail = "from: oomplan " + subject.args() + "\ntotal " +
                               std::to_string(a.total_bytes()) + " -> " +
                               std::to_string(b.total_bytes());
    failures.expect(b.total_bytes() >= a.total_bytes(),
                    "the total never falls as " + what + " grows", more,
                    detail);
    failures.expect(
        b.peak.allocated_bytes >= a.peak.allocated_bytes &&
            b.peak.reserved_bytes >= a.peak.reserved_bytes,
        "peak allocated and reserved never fall as " + what + " grows", more,
        detail);
    failures.expect(b.host_bytes >= a.host_bytes,
                    "host RAM never falls as " + what + " grows", more, detail);
    failures.expect(!b.fits() || a.fits(),
                    "a plan that fits at 2 x " + what + " fits at " + what,
                    more, detail);
  }

  // vLLM with a longer --max-model-len, the scheduler budget pinned (vLLM
  // derives max_num_batched_tokens from it in V0, a change of behaviour of
  // its own): the pool is gpu_util x capacity less weights, the profile run
  // over max_num_batched_tokens tokens and non-torch memory, none of which
  // depends on the model length; one request needs more blocks. So the pool
  // and its tokens never grow, concurrency never rises, the profile peak
  // never falls, and an engine that starts at 2 x len starts at len.
  void context(const Subject& subject, const Priced& base) {
    const Resolved& r = base.setup;
    if (r.engine != Engine::vllm || 2 * r.max_model_len > k_max_seq) {
      return;
    }
    Subject pinned = subject;
    pinned.setup.max_num_batched_tokens = r.max_num_batched_tokens;
    pinned.setup.max_num_seqs = r.max_num_seqs;
    pinned.setup.max_model_len = r.max_model_len;
    Subject longer = pinned;
    longer.setup.max_model_len = 2 * r.max_model_len;
    const auto same = priced(pinned);
    const auto l = priced(longer);
    if (!same || !l || saturated(same->budget) || saturated(l->budget)) {
      return;
    }
    ++len_pairs;
    failures.expect(same->budget.total_bytes() == base.budget.total_bytes(),
                    "vLLM's defaults given explicitly plan the same", pinned,
                    "from: oomplan " + subject.args());
    const VllmProfile& a = *same->budget.vllm;
    const VllmProfile& b = *l->budget.vllm;
    const std::string detail = "from: oomplan " + pinned.args() + "\npool " +
                               std::to_string(a.kv_cache_bytes) + " -> " +
                               std::to_string(b.kv_cache_bytes) + ", tokens " +
                               std::to_string(a.kv_tokens) + " -> " +
                               std::to_string(b.kv_tokens) + ", concurrency " +
                               std::to_string(a.max_concurrency) + " -> " +
                               std::to_string(b.max_concurrency) + ", peak " +
                               std::to_string(a.activation_peak_bytes) +
                               " -> " + std::to_string(b.activation_peak_bytes);
    failures.expect(
        b.kv_cache_bytes <= a.kv_cache_bytes && b.kv_tokens <= a.kv_tokens,
        "vLLM's pool never grows with max-model-len", longer, detail);
    failures.expect(b.max_concurrency <= a.max_concurrency * (1 + 1e-12),
                    "vLLM's concurrency never rises with max-model-len", longer,
                    detail);
    // V1 profiles budget // tokens-per-item whole dummy items, and a longer
    // max-model-len makes video items longer: the floor may then leave up to
    // one item's pixels, tower activations and encoder output out
    // (qwen2-vl-2b at 10M batched tokens: 305 x 32,768 -> 152 x 65,536).
    const VllmVisionProfile& v = b.vision;
    const Bytes one_item =
        v.items > 0
            ? (v.pixel_bytes + v.tower_bytes + v.encoder_cache) / v.items
            : 0;
    failures.expect(
        b.activation_peak_bytes + one_item >= a.activation_peak_bytes,
        "vLLM's profile peak never falls with max-model-len (but for one "
        "dummy item)",
        longer, detail);
    failures.expect(!l->budget.fits() || same->budget.fits(),
                    "a vLLM that starts at 2 x max-model-len starts at "
                    "max-model-len",
                    longer, detail);
  }

  // Twice the GPUs with the same tp and pp: in training, data parallelism
  // doubles, and ZeRO/FSDP shard states, gradients and (stage 3) weights over
  // it while stage 0 replicates them, so per-GPU weights, gradients and
  // optimizer states never rise (ZeRO §3, FSDP FULL_SHARD). From two ranks
  // up: one GPU has no DDP Reducer, whose buckets copy every gradient for
  // the whole step (gradient_as_bucket_view=False), so going from one rank
  // to two legitimately adds a gradient-sized buffer.
  void data_parallel(const Subject& subject, const Priced& base) {
    const Resolved& r = base.setup;
    if (!r.training() || r.dp() < 2 ||
        2 * std::int64_t{r.total_gpus()} > k_max_gpus) {
      return;
    }
    Subject wide = subject;
    wide.setup.gpus = 2 * subject.setup.gpus;
    wide.setup.tp = r.tp;
    const auto w = priced(wide);
    if (!w || saturated(base.budget) || saturated(w->budget)) {
      return;
    }
    ++dp_pairs;
    // Paged states (bitsandbytes) are an exception for the optimizer: they
    // live in unified memory and occupy whatever device memory is free, so
    // sharding the rest can let more of them onto the GPU.
    const bool paged = r.optimizer == Optimizer::paged_adamw ||
                       r.optimizer == Optimizer::paged_adamw_8bit;
    for (const char* name : {"weights", "gradients", "optimizer"}) {
      if (paged && std::string_view(name) == "optimizer") {
        continue;
      }
      const Bytes before = base.budget.bytes_of(name);
      const Bytes after = w->budget.bytes_of(name);
      failures.expect(
          after <= before,
          std::string("per-GPU ") + name + " never rise with data parallelism",
          wide,
          "dp " + std::to_string(r.dp()) + ": " + std::to_string(before) +
              " B, dp " + std::to_string(w->setup.dp()) + ": " +
              std::to_string(after) + " B");
    }
  }

  // Pipeline parallelism doubled, with twice the GPUs: each stage holds
  // fewer decoder layers (torchtitan/Megatron/vLLM split L layers as evenly
  // as they go, embeddings first, lm_head last), so the largest weights on
  // any GPU never rise. (The budget's own GPU is the most loaded by total,
  // which may be another stage with fewer weights.)
  void pipeline_parallel(const Subject& subject, const Priced& base) {
    const Resolved& r = base.setup;
    if (r.split_layers || 2 * std::int64_t{r.total_gpus()} > k_max_gpus) {
      return;
    }
    Subject deep = subject;
    deep.setup.gpus = 2 * subject.setup.gpus;
    deep.setup.tp = r.tp;
    deep.setup.pp = 2 * r.pp;
    const auto d = priced(deep);
    if (!d || saturated(base.budget) || saturated(d->budget)) {
      return;
    }
    ++pp_pairs;
    const Bytes before = heaviest_weights(base.budget);
    const Bytes after = heaviest_weights(d->budget);
    failures.expect(after <= before, "per-GPU weights never rise with pp", deep,
                    "pp " + std::to_string(r.pp) + ": " +
                        std::to_string(before) + " B, pp " +
                        std::to_string(2 * r.pp) + ": " +
                        std::to_string(after) + " B");
  }

  // Checkpointing turned on (any policy) from none: every policy stores
  // less than all of a layer's activations for at least all layers but one
  // and recomputes one layer at a time in backward, from the input it kept
  // (torch.utils.checkpoint, torchtitan AC, DeepSpeed activation
  // checkpointing), so the total never rises. Not per-op SAC over a frozen
  // base: its policy stashes every saved matmul's output whether autograd
  // needs it or not (torch.utils.checkpoint create_selective_checkpoint_
  // contexts), and a LoRA layer without checkpointing saves fewer of them.
  // Nor per-op SAC under sequence parallelism: the stashed rowwise matmul
  // output is TP's full-size partial sum (before the reduce-scatter), where
  // a layer without checkpointing keeps only 1/tp-sized replicated tensors.
  // Nor under TP with float8, which stashes both rowwise outputs (wo and w2)
  // full-size: they can outweigh what a lean layer keeps replicated
  // (gpt-j-6b's parallel block saves one LayerNorm's input and output).
  void checkpointing(const Subject& subject, const Priced& base,
                     const Space& space) {
    const Resolved& r = base.setup;
    if (!r.training() || r.checkpointing != Checkpointing::none) {
      return;
    }
    for (const std::string& policy : space.checkpointing) {
      const bool op_excluded =
          policy == "op" && (r.mode != Mode::full ||
                             (r.tp > 1 && (r.sequence_parallel || r.float8)));
      if (policy == "none" || op_excluded) {
        continue;
      }
      Subject ckpt = subject;
      apply_option(ckpt.setup, "--checkpointing", policy);
      const auto c = priced(ckpt);
      if (!c || saturated(base.budget) || saturated(c->budget)) {
        continue;
      }
      ++checkpointing_pairs;
      failures.expect(c->budget.total_bytes() <= base.budget.total_bytes(),
                      "checkpointing never raises the total", ckpt,
                      "none: " + std::to_string(base.budget.total_bytes()) +
                          " B, " + policy + ": " +
                          std::to_string(c->budget.total_bytes()) + " B");
    }
  }

  // The side knobs at their most frugal level, one at a time: full
  // checkpointing (layer inputs only, one layer recomputed at a time) from
  // any lighter policy, and the expandable-segments reserve. They change
  // what the step keeps for backward and the allocator's slack, never the
  // weights, gradients or optimizer states, so neither the total nor the
  // host RAM rises. The search relies on it: a setup whose side knobs at
  // these levels does not fit is not priced (search.cpp Space::relax). Not
  // the chunked loss (its fp32 chunks can exceed a short sequence's fused
  // loss), flash attention (MLA's value heads padded to the query head size)
  // nor a smaller micro-batch (more accumulation steps keep the gradients).
  void frugal_side_knobs(const Subject& subject, const Priced& base) {
    const Resolved& r = base.setup;
    if (!r.training() || saturated(base.budget)) {
      return;
    }
    std::vector<std::pair<std::string, std::string>> moves;
    if (r.checkpointing < Checkpointing::full) {
      moves.emplace_back("--checkpointing", "full");
    }
    if (!r.reserve || *r.reserve > 0.02) {
      moves.emplace_back("--reserve", "0.02");
    }
    for (const auto& [flag, value] : moves) {
      Subject frugal = subject;
      apply_option(frugal.setup, flag, value);
      const auto f = priced(frugal);
      if (!f || saturated(f->budget)) {
        continue;
      }
      ++frugal_pairs;
      const Budget& a = base.budget;
      const Budget& b = f->budget;
      failures.expect(
          b.total_bytes() <= a.total_bytes() && b.host_bytes <= a.host_bytes,
          "a side knob at its frugal level never raises the total or the "
          "host RAM",
          frugal,
          flag + " " + value + ": total " + std::to_string(a.total_bytes()) +
              " -> " + std::to_string(b.total_bytes()) + " B, host " +
              std::to_string(a.host_bytes) + " -> " +
              std::to_string(b.host_bytes) + " B");
    }
  }

  // Inference weights quantized (any --quant) from 16 or 32 bits: every
  // format stores at most 8 bits per weight plus its scales (bitsandbytes,
  // GPTQ/AWQ groups, fp8, MXFP4 blocks), so the weights never rise. Not
  // vLLM's MXFP4 MoE beyond tp 8: its kernels pad each GPU's expert columns
  // to their block (64 to 256, mxfp4.py create_weights), and a thin shard is
  // then mostly padding. And an fp8 KV cache holds 1 byte per element where
  // 16-bit holds 2.
  void quantized(const Subject& subject, const Priced& base,
                 const Space& space) {
    const Resolved& r = base.setup;
    if (r.training() || r.quant != Quant::none) {
      return;
    }
    for (const std::string& quant : space.quant) {
      const bool padded = quant == "mxfp4" && r.engine == Engine::vllm &&
                          subject.model->num_experts > 0 && r.tp > 8;
      if (quant == "auto" || quant == "none" || padded) {
        continue;
      }
      Subject q = subject;
      apply_option(q.setup, "--quant", quant);
      const auto p = priced(q);
      if (!p || saturated(base.budget) || saturated(p->budget)) {
        continue;
      }
      ++quant_pairs;
      // The heaviest GPU's weights: the budget's own are those of the GPU
      // with the largest total, which quantizing can move (split by layers:
      // the stage holding the 16-bit embedding becomes the limiting one).
      const Bytes before = heaviest_weights(base.budget);
      const Bytes after = heaviest_weights(p->budget);
      failures.expect(
          after <= before, "quantized weights never outweigh 16-bit ones", q,
          std::string(quant_name(r.quant)) + ": " + std::to_string(before) +
              " B, " + quant + ": " + std::to_string(after) + " B");
    }
    if (r.engine == Engine::hf && r.kv_dtype != Dtype::fp8 &&
        r.kv_dtype != Dtype::fp32) {
      Subject q = subject;
      apply_option(q.setup, "--kv-dtype", "fp8");
      if (const auto p = priced(q); p && !saturated(p->budget)) {
        ++quant_pairs;
        failures.expect(
            p->budget.bytes_of("kv_cache") <= base.budget.bytes_of("kv_cache"),
            "an fp8 KV cache never outweighs a 16-bit one", q);
      }
    }
  }

  // vLLM with a higher --gpu-util: the request grows and nothing the
  // profiler subtracts depends on it, so the pool never shrinks.
  void utilization(const Subject& subject, const Priced& base) {
    const Resolved& r = base.setup;
    if (r.engine != Engine::vllm || r.gpu_util > 0.95) {
      return;
    }
    Subject more = subject;
    more.setup.gpu_util = r.gpu_util + 0.05;
    const auto m = priced(more);
    if (!m || saturated(base.budget) || saturated(m->budget)) {
      return;
    }
    ++util_pairs;
    failures.expect(
        m->budget.vllm->kv_cache_bytes >= base.budget.vllm->kv_cache_bytes,
        "vLLM's pool never shrinks with a higher gpu-util", more);
  }

  // The CLI on the plan's re-run command line: the same setup, components and
  // total, and the exit code is the verdict (DESIGN §2: 0 fits, 1 does not);
  // the first fix's own command line reproduces its total and verdict.
  void cli(const Subject& subject, const Priced& priced) {
    ++cli_runs;
    std::vector<std::string> argv = plan_argv(
        subject.model->name, *subject.model, *subject.gpu, subject.setup);
    argv.emplace_back("--json");
    const auto run = test::run_cli(argv);
    const int verdict = priced.budget.fits() ? 0 : 1;
    failures.expect(run.code == verdict, "exit code = verdict", subject,
                    "exit " + std::to_string(run.code) + ": " + run.err);
    if (run.code != 0 && run.code != 1) {
      return;
    }
    const Json doc = Json::parse(run.out);
    failures.expect(
        doc["total_bytes"].get<Bytes>() == priced.budget.total_bytes(),
        "the re-run line reproduces the total", subject,
        doc["total_bytes"].dump() + " vs " +
            std::to_string(priced.budget.total_bytes()));
    Plan p;
    p.model = subject.model;
    p.gpu = subject.gpu;
    p.request = subject.setup;
    p.setup = priced.setup;
    p.budget = priced.budget;
    p.model_arg = subject.model->name;
    const Json mine = Json::parse(render_json(p));
    failures.expect(applying(doc["setup"], priced.setup) ==
                        applying(mine["setup"], priced.setup),
                    "the re-run line resolves to the same setup", subject,
                    doc["setup"].dump() + "\nvs\n" + mine["setup"].dump());
    failures.expect(doc["components"] == mine["components"],
                    "the re-run line reproduces every component", subject);
    std::vector<std::string> bad;
    walk_numbers(doc, "", "", bad);
    failures.expect(bad.empty(),
                    "every JSON number (fixes too) is finite and >= 0", subject,
                    joined(bad));
    if (!doc["fixes"].empty()) {
      const Json& fix = doc["fixes"][0];
      std::vector<std::string> fix_argv =
          fix["argv"].get<std::vector<std::string>>();
      fix_argv.emplace_back("--json");
      const auto rerun = test::run_cli(fix_argv);
      const bool parsed = rerun.code == 0 || rerun.code == 1;
      failures.expect(parsed, "a fix's command line plans", subject,
                      fix["args"].get<std::string>() + ": " + rerun.err);
      if (parsed) {
        const Json fixed = Json::parse(rerun.out);
        failures.expect(fixed["total_bytes"] == fix["total_bytes"],
                        "a fix's command line reproduces its total", subject,
                        fix["args"].get<std::string>() + ": " +
                            fixed["total_bytes"].dump() + " vs " +
                            fix["total_bytes"].dump());
      }
    }
  }
};

}  // namespace

namespace {

// Draws `cases` setups from `seed` over `space` and checks every property
// (the CLI runs only when `cli`).
Checker check_plans(const Space& space, std::uint64_t seed, int cases,
                    bool cli) {
  const Catalog& cat = test::catalog();
  Draw draw(seed);
  Checker checker;
  for (int i = 0; i < cases; ++i) {
    const Subject subject = draw_subject(draw, space, cat);
    const auto base = priced(subject);
    if (!base) {
      continue;
    }
    ++checker.valid;
    checker.fitting += base->budget.fits() ? 1 : 0;
    checker.training += base->setup.training() ? 1 : 0;
    checker.plan(subject, *base);
    checker.rerun(subject, *base, cat);
    checker.tensor_parallel(subject, *base);
    checker.larger(subject, *base, /*seq=*/true);
    checker.larger(subject, *base, /*seq=*/false);
    checker.context(subject, *base);
    checker.data_parallel(subject, *base);
    checker.pipeline_parallel(subject, *base);
    checker.checkpointing(subject, *base, space);
    checker.frugal_side_knobs(subject, *base);
    checker.quantized(subject, *base, space);
    checker.utilization(subject, *base);
    if (cli && checker.valid % k_cli_every == 0) {
      checker.cli(subject, *base);
    }
  }
  return checker;
}

// What was drawn and checked, and each failing property with its count.
std::string summary(const Checker& c) {
  std::string text = fmt::format(
      "{} valid plans ({} fit, {} vLLM, {} training), {} CLI runs; pairs: tp "
      "{}, seq {}, batch {}, max-model-len {}, dp {}, pp {}, checkpointing "
      "{}, frugal side knobs {}, quant {}, gpu-util {}\n{} failures\n",
      c.valid, c.fitting, c.vllm, c.training, c.cli_runs, c.tp_pairs,
      c.seq_pairs, c.batch_pairs, c.len_pairs, c.dp_pairs, c.pp_pairs,
      c.checkpointing_pairs, c.frugal_pairs, c.quant_pairs, c.util_pairs,
      c.failures.count());
  for (const auto& [property, count] : c.failures.by_property()) {
    text += fmt::format("  {} x {}\n", count, property);
  }
  return text;
}

}  // namespace

TEST_CASE("properties: the text scan finds negative and non-finite figures",
          "[properties]") {
  CHECK(text_has_bad_number("needs 18.63 GiB per GPU, -25.68 GiB over"));
  CHECK(text_has_bad_number("time: ~inf ms per output token"));
  CHECK(text_has_bad_number("KV cache -nan GiB"));
  CHECK_FALSE(text_has_bad_number(
      "llama-3-70b on 4 x A100-80: --gpu-util 0.9, 54.55 GiB over, info"));
}

TEST_CASE(
    "properties: generated valid plans are consistent (sum, signs, fits, "
    "exit code, re-run line, monotone terms)",
    "[properties]") {
  const Checker c = check_plans(Space{}, k_seed, k_cases, /*cli=*/true);
  INFO(summary(c));
  // Enough plans of each kind were drawn for the properties to mean something.
  CHECK(c.valid >= k_cases / 4);
  CHECK(c.fitting >= c.valid / 10);
  CHECK(c.fitting <= c.valid * 9 / 10);
  CHECK(c.vllm >= c.valid / 10);
  CHECK(c.training >= c.valid / 5);
  CHECK(c.cli_runs >= c.valid / k_cli_every);
  CHECK(c.tp_pairs >= c.valid / 10);
  CHECK(c.seq_pairs >= c.valid / 4);
  CHECK(c.batch_pairs >= c.valid / 4);
  CHECK(c.len_pairs >= c.vllm / 4);
  CHECK(c.dp_pairs >= c.training / 8);
  CHECK(c.pp_pairs >= c.valid / 10);
  CHECK(c.checkpointing_pairs >= c.training);
  CHECK(c.frugal_pairs >= c.training);
  CHECK(c.quant_pairs >= c.valid / 4);
  CHECK(c.util_pairs >= c.vllm / 2);
  CHECK(c.failures.count() == 0);
}

TEST_CASE(
    "properties: plans at the option bounds stay finite, summed and "
    "reproducible",
    "[properties]") {
  // Sizes at the bounds (10M tokens, 1M sequences, 1500 nodes) saturate
  // terms at the core's ceiling instead of wrapping. The CLI runs (and the
  // advisor's fixes with them) are left to the test above.
  const Checker c =
      check_plans(Space::bounds(), k_seed + 1, k_bound_cases, /*cli=*/false);
  INFO(summary(c));
  CHECK(c.valid >= k_bound_cases / 4);
  CHECK(c.failures.count() == 0);
}

}  // namespace oomplan
