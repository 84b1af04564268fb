// Element types of tensors. Block types follow the GGUF specification: a row of `ne0`
// values is stored as ne0 / block_size blocks of type_size bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sd {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  I32,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  Q8_K,  // internal: the activation type of K-quant dot products
  Count,
};

struct DTypeInfo {
  std::string_view name;  // as GGUF tools print it: "f32", "q4_K", ...
  int64_t block_size;     // elements per block (1 for scalar types)
  size_t type_size;       // bytes per block
  uint32_t gguf_id;       // ggml_type value in GGUF files
  bool quantized;
};

const DTypeInfo& dtype_info(DType t);

inline std::string_view dtype_name(DType t) {
  return dtype_info(t).name;
}
inline int64_t block_size(DType t) {
  return dtype_info(t).block_size;
}
inline size_t type_size(DType t) {
  return dtype_info(t).type_size;
}
inline bool is_quantized(DType t) {
  return dtype_info(t).quantized;
}
inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// Bytes of one row of `ne0` elements; ne0 must be a multiple of the block size.
inline size_t row_size(DType t, int64_t ne0) {
  return type_size(t) * static_cast<size_t>(ne0 / block_size(t));
}

// Case-insensitive lookup by name ("q4_k" finds Q4_K).
std::optional<DType> dtype_from_name(std::string_view name);
std::optional<DType> dtype_from_gguf_id(uint32_t id);

}  // namespace sd
