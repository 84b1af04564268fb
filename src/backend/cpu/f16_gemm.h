// GEMM of f32 activations with f16 weights read as they are stored: each weight row is
// widened to f32 in registers as the dot products consume it (exact, so an f16 file still
// computes as its f32 original would). The tiled path before it widened every weight to
// f32 in memory and packed it on each call, which at a transformer's few hundred tokens
// cost as much as the products (a weight value is used once per row).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_context.h"

namespace sd {

// Whether this CPU has the instructions (AVX-512 F/BW/VL).
bool f16_gemm_available();

// out[n * M + m] = sum_k x[n * K + k] * w_m[k] for n < N, m < M, where row m of the weight
// is K f16 values at w + m * w_row_bytes. Requires f16_gemm_available().
void f16_gemm(CpuContext& ctx, const void* w, size_t w_row_bytes, int64_t M, int64_t K,
              const float* x, int64_t N, float* out);

}  // namespace sd
