// Conversions between f32 rows and every storage dtype: the GGUF block quantizers
// (bit-exact with the specification's reference quantizers) and fast row dequantizers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace sd {

// Converts `n` values of `type` at `src` to f32. For block types n is a multiple of the
// block size. Works for every dtype but I32.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Converts `n` f32 values to `type` with the reference algorithm (for block types: the
// GGUF reference quantizer, same bytes as ggml's quantize_row_*_ref). n is a multiple of
// the block size.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Quantizes `nrows` rows of `n_per_row` values; returns bytes written. Rows are processed
// in parallel.
size_t quantize_rows(DType type, const float* src, void* dst, int64_t nrows, int64_t n_per_row);

}  // namespace sd
