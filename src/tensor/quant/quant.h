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

// As above with an importance matrix (llama.cpp's imatrix): `imatrix` holds n_per_row
// non-negative weights, one per column, used for every row; the bytes are those of ggml's
// quantizers given quant_weights (ggml_quantize_chunk with an imatrix). A null imatrix
// gives the plain quantize_rows. f32, f16, bf16, q8_0 and q8_K ignore the weights, as the
// reference does.
//
// stable-diffusion.cpp's convert always passes an all-ones imatrix, so its q4_0..q6_K
// files are reproduced by this overload with ones, not by the plain one.
size_t quantize_rows(DType type, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                     const float* imatrix);

}  // namespace sd
