// Element types a weight file may store that the engine does not compute in. Readers
// report them, and loading converts them to the nearest engine dtype: floats to f32 (f8 to
// f16, which holds every f8 value exactly), integers to i32 (range-checked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/dtype.h"

namespace sd::io {

enum class FileDType : uint8_t {
  None,  // stored as the engine dtype itself: no conversion
  F64,
  I64,
  U64,
  U32,
  I16,
  U16,
  I8,
  U8,
  Bool,
  F8_E4M3,  // OCP FP8 E4M3 ("E4M3FN"): bias 7, no infinities, S.1111.111 is NaN
  F8_E5M2,  // OCP FP8 E5M2: bias 15, IEEE-style infinities and NaNs
  Count,
};

// The safetensors spelling ("F8_E4M3", "BOOL", ...).
std::string_view file_dtype_name(FileDType t);
size_t file_dtype_size(FileDType t);
// The engine dtype a tensor stored as `t` is loaded as.
DType engine_dtype_for(FileDType t);

float f8_e4m3_to_f32(uint8_t v);
float f8_e5m2_to_f32(uint8_t v);

// Converts n elements stored as `t` (little-endian) to f32. Integers beyond 2^24 round.
void convert_to_f32(FileDType t, const void* src, float* dst, size_t n);

// Converts n elements stored as `t` to `dst_type` (F32, F16 or I32; F16 only from f8).
// Returns the index of the first element that does not fit, or nullopt when all did
// (only integer conversions to i32 can fail).
std::optional<size_t> convert_elements(FileDType t, const void* src, DType dst_type, void* dst,
                                       size_t n);

}  // namespace sd::io
