#include "oomplan/model/dtype.hpp"

#include <array>

namespace oomplan {
namespace {

struct DtypeRow {
  Dtype dtype;
  std::string_view name;
  int bytes;
};

// clang-format off
constexpr std::array k_dtypes = {
    DtypeRow{Dtype::fp32, "fp32", 4},
    DtypeRow{Dtype::bf16, "bf16", 2},
    DtypeRow{Dtype::fp16, "fp16", 2},
    DtypeRow{Dtype::fp8,  "fp8",  1},
};

struct QuantRow {
  Quant quant;
  std::string_view name;
  int bits;  // bits per stored weight, scales aside; 0: --dtype's
};

constexpr std::array k_quants = {
    QuantRow{Quant::automatic, "auto",     0},
    QuantRow{Quant::none,      "none",     0},
    QuantRow{Quant::int8,      "int8",     8},
    QuantRow{Quant::fp8,       "fp8",      8},
    QuantRow{Quant::int4,      "int4",     4},
    QuantRow{Quant::nf4,       "nf4",      4},
    QuantRow{Quant::nf4_nodq,  "nf4-nodq", 4},
    QuantRow{Quant::gptq,      "gptq",     4},
    QuantRow{Quant::awq,       "awq",      4},
    QuantRow{Quant::mxfp4,     "mxfp4",    4},
};
// clang-format on

}  // namespace

int dtype_bytes(Dtype dtype) {
  for (const auto& row : k_dtypes) {
    if (row.dtype == dtype) {
      return row.bytes;
    }
  }
  return 2;
}

std::string_view dtype_name(Dtype dtype) {
  for (const auto& row : k_dtypes) {
    if (row.dtype == dtype) {
      return row.name;
    }
  }
  return "bf16";
}

std::string_view quant_name(Quant quant) {
  for (const auto& row : k_quants) {
    if (row.quant == quant) {
      return row.name;
    }
  }
  return "none";
}

int quant_bits(Quant quant) {
  for (const auto& row : k_quants) {
    if (row.quant == quant) {
      return row.bits;
    }
  }
  return 0;
}

std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (const auto& row : k_dtypes) {
    if (row.name == name) {
      return row.dtype;
    }
  }
  return std::nullopt;
}

std::optional<Quant> quant_from_name(std::string_view name) {
  for (const auto& row : k_quants) {
    if (row.name == name) {
      return row.quant;
    }
  }
  return std::nullopt;
}

std::vector<std::string_view> dtype_names() {
  std::vector<std::string_view> names;
  for (const auto& row : k_dtypes) {
    names.push_back(row.name);
  }
  return names;
}

std::vector<std::string_view> quant_names() {
  std::vector<std::string_view> names;
  for (const auto& row : k_quants) {
    names.push_back(row.name);
  }
  return names;
}

}  // namespace oomplan
