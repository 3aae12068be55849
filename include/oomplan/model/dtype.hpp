#pragma once

// Number formats: compute dtypes and weight quantizations, with their names.
// One table each (dtype.cpp) serves parsing, --help, validation and JSON names.

#include <optional>
#include <string_view>
#include <vector>

namespace oomplan {

enum class Dtype { fp32, bf16, fp16, fp8 };

enum class Quant {
  automatic,  // "auto": the checkpoint's own format (Model::checkpoint_quant)
  none,       // weights in --dtype
  int8,       // LLM.int8 / W8A16: 1 B + per-row fp16/fp32 scales
  fp8,        // FP8 e4m3 with per-tensor or block scales
  int4,       // generic 4-bit, group 128 (same layout as gptq)
  nf4,        // bitsandbytes NF4, block 64, double quantization
  nf4_nodq,   // bitsandbytes NF4, block 64, fp32 absmax per block
  gptq,       // 4-bit, group 128, fp16 scales + packed zeros
  awq,        // 4-bit, group 128, fp16 scales + packed zeros
  mxfp4,      // OCP MX FP4: 4 bits + one E8M0 scale byte per 32 values
};

// Bytes of one element of `dtype`.
int dtype_bytes(Dtype dtype);

std::string_view dtype_name(Dtype dtype);
std::string_view quant_name(Quant quant);
// Bits per stored weight before scales (8 or 4); 0 for auto and none, whose
// width is --dtype's (or the checkpoint's).
int quant_bits(Quant quant);

// REQUIRES: nothing. Returns nullopt for an unknown name (the caller reports
// it).
std::optional<Dtype> dtype_from_name(std::string_view name);
std::optional<Quant> quant_from_name(std::string_view name);

// All canonical names, in table order (for CLI11 IsMember and help).
std::vector<std::string_view> dtype_names();
std::vector<std::string_view> quant_names();

}  // namespace oomplan
