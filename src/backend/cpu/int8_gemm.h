// GEMM of f32 activations with block-quantized weights on 8-bit integer dot products
// (AVX-512 VNNI), the way the reference runs these types: activations are rounded to
// 8 bits per 32 values, each 32-value product sums in integers, and the weight's and the
// activation's block scales apply once per block. Multiply-adds on 8-bit integers run at
// twice the rate of bf16 ones, and the weights go to the kernel as their own codes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_context.h"
#include "tensor/dtype.h"

namespace sd {

// Whether this CPU has the instructions (AVX-512 F/BW/VL/DQ and VNNI).
bool int8_gemm_available();

// Whether weights of `type` run here (types with block codes, tensor/quant/block_codes.h).
bool int8_gemm_supports(DType type);

// Activation rows as 8-bit codes, per 32-value block one scale and the block's code sum
// in the form the weight type needs (zsum with a zero point, fsum with offsets; the two
// may share storage, only one is read).
struct Int8Rows {
  const int8_t* codes;  // [N][K]
  const float* scale;   // [N][nb]
  const int32_t* zsum;  // [N][nb]: -z * sum of the block's codes (weights with a zero point)
  const float* fsum;    // [N][nb]: scale * sum of the codes (weights with offsets)
  int64_t K, nb;        // nb = K / 32
};

// One row of K values (a multiple of 32) as codes for weights of `type`. Zero values give
// zero codes, scale and sum, so a row of zero padding needs no call.
void int8_quantize_row(DType type, const float* x, int64_t K, int8_t* codes, float* scale,
                       int32_t* zsum, float* fsum);

// The GEMM below on rows already quantized (a convolution quantizes each input pixel once
// and gathers its codes for every tap).
void int8_gemm_rows(CpuContext& ctx, DType type, const void* w, size_t w_row_bytes, int64_t M,
                    const Int8Rows& x, int64_t N, float* out);

// out[n * M + m] = sum_k x[n * K + k] * w_m[k] for n < N, m < M, where row m of the
// weight is K values of `type` at w + m * w_row_bytes, K a multiple of the type's block.
// Requires int8_gemm_available() and int8_gemm_supports(type).
void int8_gemm(CpuContext& ctx, DType type, const void* w, size_t w_row_bytes, int64_t M, int64_t K,
               const float* x, int64_t N, float* out);

}  // namespace sd
