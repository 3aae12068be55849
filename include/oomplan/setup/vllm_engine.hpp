#pragma once

// What a vLLM release runs and with which defaults (setup layer: resolve()
// fills them in): the release itself, the engine (V0 or V1) a model, card and
// precision get, the scheduler's max_num_seqs and max_num_batched_tokens, and
// peer-to-peer between the cards. What the engine then allocates is in
// memory/vllm.hpp.

#include "oomplan/model/dtype.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/model/model.hpp"
#include "oomplan/util/release.hpp"

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomplan {

// A vLLM release. `patch` k_vllm_any_patch stands for "the newest X.Y.Z"
// (what "--vllm-version 0.6" means).
using VllmVersion = Release;
inline constexpr int k_vllm_any_patch = k_any_patch;

// A release by number, for the tables that compare against one.
constexpr VllmVersion vllm_release(int major, int minor, int patch = 0) {
  return VllmVersion{major, minor, patch};
}

// The release planned without --vllm-version: the newest one whose start-up
// profile oomplan checked against logs (llm-d-planner's v0.19.0 sweep in
// shared/validation).
inline constexpr VllmVersion k_vllm_default_version{0, 19, 0};

// Why this release refuses an architecture it no longer has (mllama, bart
// and florence2 from 0.11); empty when it runs it.
std::string vllm_removed_error(const Model& model, VllmVersion version);

enum class VllmEngine { v0, v1 };
std::string_view vllm_engine_name(VllmEngine engine);  // "V0", "V1"

// The engine a release runs for this model, card and precision, and why
// (vllm/engine/arg_utils.py _is_v1_supported_oracle, 0.8 - 0.10; V0 alone
// before 0.8, V1 alone from 0.11).
struct VllmEngineChoice {
  VllmEngine engine = VllmEngine::v1;
  std::string reason;  // e.g. "compute capability 7.5 < 8.0 falls back to V0"
};
VllmEngineChoice vllm_engine(const Model& model, const Gpu& gpu,
                             VllmVersion version, Dtype dtype, Dtype kv_dtype,
                             Quant quant);
// The same engine without the reason.
VllmEngine vllm_engine_of(const Model& model, const Gpu& gpu,
                          VllmVersion version, Dtype dtype, Dtype kv_dtype,
                          Quant quant);

// vLLM's default max_num_seqs for the OpenAI server (V0 256; V1 by release
// and card, engine/arg_utils.py _set_default_args_v1 / get_batch_defaults).
std::int64_t vllm_default_max_num_seqs(const Gpu& gpu, VllmVersion version,
                                       VllmEngine engine);

// vLLM's default max_num_batched_tokens: V0 one prompt of max_model_len (or
// 512 / 2048-token chunks above 32k), V1 the per-card budget by release.
std::int64_t vllm_default_batched_tokens(const Model& model, const Gpu& gpu,
                                         VllmVersion version, VllmEngine engine,
                                         std::int64_t max_model_len);

// Whether GPUs of a node reach each other peer-to-peer (--p2p).
enum class P2p { automatic, on, off };
std::string_view p2p_name(P2p p2p);
std::vector<std::string_view> p2p_names();
P2p p2p_from_name(std::string_view name);
// --p2p auto: on when the card has NVLink and the tensor-parallel group fits
// in one node of `gpus_per_node`; PCIe-only cards and groups across nodes
// are planned without P2P (GeForce cards have it disabled; cloud VMs and
// containers commonly fail vLLM's P2P test).
bool resolve_p2p(P2p p2p, const Gpu& gpu, int tp, int gpus_per_node);

}  // namespace oomplan
