#include "oomplan/setup/vllm_engine.hpp"

#include "oomplan/util/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

// What a vLLM release runs and with which defaults: the engine (V0 or V1),
// the scheduler's max_num_seqs and max_num_batched_tokens, peer-to-peer
// between the cards. resolve() asks for these of every priced setup.

namespace oomplan {
namespace {

// vLLM's substring tests on torch.cuda.get_device_name() ("a100" in the
// lowercased device name): the card's full name, else its catalog name, and
// the catalog name, compared without case and without allocating (resolve()
// asks for every priced setup).
bool device_name_has(const Gpu& gpu, std::string_view word) {
  // `word` is lowercase letters and digits: OR-ing 0x20 lowercases a letter
  // and leaves a digit as it is.
  auto has = [word](std::string_view text) {
    for (std::size_t i = 0; i + word.size() <= text.size(); ++i) {
      std::size_t j = 0;
      while (j < word.size() &&
             static_cast<char>(text[i + j] | 0x20) == word[j]) {
        ++j;
      }
      if (j == word.size()) {
        return true;
      }
    }
    return false;
  };
  return has(gpu.full_name.empty() ? gpu.name : gpu.full_name) || has(gpu.name);
}

bool big_card(const Gpu& gpu) {
  return gpu.capacity_bytes >= 70 * k_gib;
}

// model_type values of the architectures vLLM marks SupportsV0Only, with the
// first release where V1 runs them by default.
struct V0Only {
  std::string_view model_type;
  VllmVersion v1_from;   // or the release that removed it
  bool removed = false;  // V0's end was the architecture's end
};
// mamba2-style hybrids: V1-capable with #19327 (2025-06-18) but falling back
// by default ("V1 mamba models are unoptimized", _warn_or_fallback) until
// #23650 (2025-08-27) -> 0.10.2; mamba and jamba became V1-capable in 0.10.1.
// Encoder-decoder models stay V0 until V0 is removed; 0.11 dropped mllama,
// bart and florence2 with V0's encoder-decoder runner (#24907) and kept
// whisper on V1.
constexpr std::array<V0Only, 13> k_v0_only{{
    {"mamba", vllm_release(0, 10, 2)},
    {"falcon_mamba", vllm_release(0, 10, 2)},
    {"mamba2", vllm_release(0, 10, 2)},
    {"jamba", vllm_release(0, 10, 2)},
    {"falcon_h1", vllm_release(0, 10, 2)},
    {"bamba", vllm_release(0, 10, 2)},
    {"zamba2", vllm_release(0, 10, 2)},
    {"nemotron_h", vllm_release(0, 10, 2)},
    {"granitemoehybrid", vllm_release(0, 10, 2)},
    {"mllama", vllm_release(0, 11), true},
    {"whisper", vllm_release(0, 10, 2)},
    {"bart", vllm_release(0, 11), true},
    {"florence2", vllm_release(0, 11), true},
}};

// A vision-language checkpoint: parameters outside the text model (vision
// tower, projector).
bool multimodal(const Model& model) {
  return model.extra_params > 0;
}

}  // namespace

std::string vllm_removed_error(const Model& model, VllmVersion version) {
  for (const V0Only& arch : k_v0_only) {
    if (arch.removed && model.model_type == arch.model_type &&
        version >= arch.v1_from) {
      // registry.py _PREVIOUSLY_SUPPORTED_MODELS (#24961).
      return fmt::format(
          "vLLM {} removed {} with V0's encoder-decoder runner (#24907); plan "
          "it with --vllm-version 0.10",
          release_text(arch.v1_from), model.model_type);
    }
  }
  return {};
}

std::string_view vllm_engine_name(VllmEngine engine) {
  return engine == VllmEngine::v0 ? "V0" : "V1";
}

namespace {

// The engine, and why when `why` is given (the reason's text is built only
// then: resolve() asks for the engine of every priced setup).
template <typename Why>
VllmEngine decided(std::string* why, VllmEngine engine, Why text) {
  if (why != nullptr) {
    *why = text();
  }
  return engine;
}

VllmEngine decide_engine(const Model& model, const Gpu& gpu,
                         VllmVersion version, Dtype dtype, Dtype kv_dtype,
                         Quant quant, std::string* why) {
  if (version < vllm_release(0, 8)) {
    // 0.7: "max_num_seqs = 256 if not envs.VLLM_USE_V1 else 1024"; V1 only
    // with VLLM_USE_V1=1.
    return decided(why, VllmEngine::v0, [&] {
      return std::string("V0, the default engine before 0.8");
    });
  }
  if (version >= vllm_release(0, 11)) {
    // #25321 "[V0 Deprecation] Remove V0 core" (2025-09-20).
    return decided(why, VllmEngine::v1, [&] {
      return std::string("V1, the only engine from 0.11");
    });
  }
  // 0.8 - 0.10: engine/arg_utils.py _is_v1_supported_oracle (#13726).
  const int cc = gpu.compute_capability;
  if (cc > 0 && cc < 80 && version < vllm_release(0, 10, 2)) {
    // "Compute Capability < 8.0" until #24022 (2025-09-01).
    return decided(why, VllmEngine::v0, [&] {
      return fmt::format(
          "V0: compute capability {}.{} < 8.0 falls back to V0 "
          "before 0.10.2",
          cc / 10, cc % 10);
    });
  }
  if (dtype == Dtype::fp32 && version < vllm_release(0, 10)) {
    // V1_SUPPORTED_DTYPES = [bf16, fp16] until #19754 (2025-07-05, fp32
    // through FlexAttention).
    return decided(why, VllmEngine::v0, [&] {
      return std::string("V0: --dtype fp32 falls back to V0 before 0.10");
    });
  }
  if (kv_dtype == Dtype::fp8) {
    // 0.8: "No Fp8 KV cache so far". 0.9: FlashAttention 3 takes fp8
    // (fa_utils flash_attn_supports_fp8: Hopper). 0.10: every Blackwell
    // backend too (platforms/cuda.py is_kv_cache_dtype_supported), and
    // FlashMLA for MLA models from 0.10.2.
    const bool hopper = cc == 90;
    const bool blackwell = cc >= 100 && version >= vllm_release(0, 10);
    const bool mla = model.kv_lora_rank > 0 &&
                     version >= vllm_release(0, 10, 2) &&
                     (cc == 90 || cc >= 100);
    if (version < vllm_release(0, 9) || !(hopper || blackwell || mla)) {
      return decided(why, VllmEngine::v0, [&] {
        return fmt::format(
            "V0: an fp8 KV cache on this card falls back to "
            "V0 in {}",
            release_text(version));
      });
    }
  }
  if ((quant == Quant::nf4 || quant == Quant::nf4_nodq ||
       quant == Quant::int8) &&
      version < vllm_release(0, 9)) {
    // V1_UNSUPPORTED_QUANT = ["bitsandbytes", "gguf"] in 0.8.
    return decided(why, VllmEngine::v0, [&] {
      return std::string("V0: bitsandbytes falls back to V0 in 0.8");
    });
  }
  for (const V0Only& arch : k_v0_only) {
    if (model.model_type == arch.model_type && version < arch.v1_from) {
      return decided(why, VllmEngine::v0, [&] {
        return fmt::format("V0: {} is a V0 architecture before {}",
                           model.model_type, release_text(arch.v1_from));
      });
    }
  }
  return decided(why, VllmEngine::v1, [&] {
    return std::string("V1, the default engine from 0.8");
  });
}

}  // namespace

VllmEngineChoice vllm_engine(const Model& model, const Gpu& gpu,
                             VllmVersion version, Dtype dtype, Dtype kv_dtype,
                             Quant quant) {
  VllmEngineChoice choice;
  choice.engine = decide_engine(model, gpu, version, dtype, kv_dtype, quant,
                                &choice.reason);
  return choice;
}

VllmEngine vllm_engine_of(const Model& model, const Gpu& gpu,
                          VllmVersion version, Dtype dtype, Dtype kv_dtype,
                          Quant quant) {
  return decide_engine(model, gpu, version, dtype, kv_dtype, quant, nullptr);
}

std::int64_t vllm_default_max_num_seqs(const Gpu& gpu, VllmVersion version,
                                       VllmEngine engine) {
  if (engine == VllmEngine::v0) {
    // _set_default_args_v0: "if self.max_num_seqs is None: ... = 256".
    return 256;
  }
  if (version < vllm_release(0, 8, 5)) {
    // 0.7 / 0.8.0 - 0.8.4 _set_default_args_v1: default_max_num_seqs = 1024.
    return 1024;
  }
  if (version < vllm_release(0, 9)) {
    // #17073 (2025-04-23): 1024 on cards of 70 GiB and more, else 256.
    return big_card(gpu) ? 1024 : 256;
  }
  // #17885 (2025-05-11), get_batch_defaults: not on an A100.
  return big_card(gpu) && !device_name_has(gpu, "a100") ? 1024 : 256;
}

std::int64_t vllm_default_batched_tokens(const Model& model, const Gpu& gpu,
                                         VllmVersion version, VllmEngine engine,
                                         std::int64_t max_model_len) {
  if (engine == VllmEngine::v0) {
    // vllm/config.py SchedulerConfig and _set_default_args_v0: chunked
    // prefill by default only above 32k tokens and not for MLA, multimodal
    // or sliding-window models; the chunk is 512 tokens until #10544
    // (2024-11-22) and 2048 (_DEFAULT_MAX_NUM_BATCHED_TOKENS) after. Without
    // it one prompt of max_model_len, at least 2048 (5120 for multimodal
    // models, _MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS).
    const bool chunked = max_model_len > 32768 && model.kv_lora_rank == 0 &&
                         !multimodal(model) && model.sliding_window == 0;
    if (chunked) {
      return version < vllm_release(0, 6, 5) ? 512 : 2048;
    }
    return std::max<std::int64_t>(max_model_len,
                                  multimodal(model) ? 5120 : 2048);
  }
  if (version < vllm_release(0, 8, 5)) {
    // 0.8.0 - 0.8.4: 8192 for the OpenAI server on "h100" / "h200".
    return device_name_has(gpu, "h100") || device_name_has(gpu, "h200") ? 8192
                                                                        : 2048;
  }
  if (version < vllm_release(0, 9)) {
    // #17073: device_memory >= 70 GiB.
    return big_card(gpu) ? 8192 : 2048;
  }
  // #17885: device_memory >= 70 GiB and "a100" not in the device name.
  return big_card(gpu) && !device_name_has(gpu, "a100") ? 8192 : 2048;
}

std::string_view p2p_name(P2p p2p) {
  switch (p2p) {
    case P2p::automatic:
      return "auto";
    case P2p::on:
      return "on";
    case P2p::off:
      return "off";
  }
  return "auto";
}

std::vector<std::string_view> p2p_names() {
  return {"auto", "on", "off"};
}

P2p p2p_from_name(std::string_view name) {
  if (name == "on") {
    return P2p::on;
  }
  if (name == "off") {
    return P2p::off;
  }
  return P2p::automatic;
}

bool resolve_p2p(P2p p2p, const Gpu& gpu, int tp, int gpus_per_node) {
  switch (p2p) {
    case P2p::on:
      return true;
    case P2p::off:
      return false;
    case P2p::automatic:
      break;
  }
  return gpu.nvlink_gb_s > 0 && tp <= gpus_per_node;
}

}  // namespace oomplan
