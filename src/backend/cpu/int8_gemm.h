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

// out[n * M + m] = sum_k x[n * K + k] * w_m[k] for n < N, m < M, where row m of the
// weight is K values of `type` at w + m * w_row_bytes, K a multiple of the type's block.
// Requires int8_gemm_available() and int8_gemm_supports(type).
void int8_gemm(CpuContext& ctx, DType type, const void* w, size_t w_row_bytes, int64_t M, int64_t K,
               const float* x, int64_t N, float* out);

}  // namespace sd
