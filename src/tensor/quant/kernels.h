// Per-type row kernels behind quant.h's dispatch. They take a count of blocks and do no
// argument checking: quant.cpp validates dtype and length once per call.
#pragma once

#include <cstdint>

#include "tensor/quant/blocks.h"

namespace sd::quant {

// Reference quantizers (quantize_legacy.cpp, quantize_k.cpp): `nb` blocks from
// nb * block_size floats, the same bytes as the GGUF reference implementation.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q2_K(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_K(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_K(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t nb);

// Importance-weighted quantizers (same files): one row of `nb` blocks with `imatrix`
// holding one weight per value of the row, the same bytes as ggml's quantize_* with
// quant_weights. q8_0 and q8_K have none (the reference ignores the weights).
void quantize_q4_0_weighted(const float* x, BlockQ4_0* y, int64_t nb, const float* imatrix);
void quantize_q4_1_weighted(const float* x, BlockQ4_1* y, int64_t nb, const float* imatrix);
void quantize_q5_0_weighted(const float* x, BlockQ5_0* y, int64_t nb, const float* imatrix);
void quantize_q5_1_weighted(const float* x, BlockQ5_1* y, int64_t nb, const float* imatrix);
void quantize_q2_K_weighted(const float* x, BlockQ2_K* y, int64_t nb, const float* imatrix);
void quantize_q3_K_weighted(const float* x, BlockQ3_K* y, int64_t nb, const float* imatrix);
void quantize_q4_K_weighted(const float* x, BlockQ4_K* y, int64_t nb, const float* imatrix);
void quantize_q5_K_weighted(const float* x, BlockQ5_K* y, int64_t nb, const float* imatrix);
void quantize_q6_K_weighted(const float* x, BlockQ6_K* y, int64_t nb, const float* imatrix);

// Scalar conversions (quantize_float.cpp), round-to-nearest-even like the reference.
void convert_f32_to_f16(const float* x, uint16_t* y, int64_t n);
void convert_f32_to_bf16(const float* x, uint16_t* y, int64_t n);

// Fast dequantizers (dequantize.cpp), `nb` blocks (or n values for f16/bf16) to f32.
// They pick the best SIMD target of the running CPU.
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q2_K(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_K(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q4_K(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_K(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_K(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_K(const BlockQ8_K* x, float* y, int64_t nb);
void dequantize_f16(const uint16_t* x, float* y, int64_t n);
void dequantize_bf16(const uint16_t* x, float* y, int64_t n);

}  // namespace sd::quant
