// Quantizers of the legacy 32-value block types (q4_0, q4_1, q5_0, q5_1, q8_0).
//
// Plain: each block gets one scale from its extreme value(s), stored as an IEEE half, and
// every value is rounded onto that grid. The bytes match the GGUF reference quantizers
// (ggml-quants.c, quantize_row_*_ref), which fixes details that look arbitrary here:
// the quants are computed with the f32 scale before it is rounded to half precision,
// rounding is "add 0.5 and truncate" (or roundf for q8_0), and the symmetric types divide
// by the signed extreme so that it lands exactly on the most negative level.
//
// Weighted (importance matrix): the scale (and minimum) come from the weighted
// least-squares searches of scale_search.h with weights imatrix * sqrt(sigma^2 + x^2),
// sigma^2 the mean square of the whole row, matching ggml's quantize_q*_* with
// quant_weights. q8_0 has no weighted variant in the reference.
#include "tensor/quant/strict_fp.h"  // first: no FMA contraction below

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "tensor/float16.h"
#include "tensor/quant/kernels.h"
#include "tensor/quant/scale_search.h"

namespace sd::quant {

namespace {

constexpr int kHalf = kLegacyBlock / 2;

// The value of largest magnitude in a block, first one on ties.
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float value = 0.0f;
  for (int j = 0; j < kLegacyBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      value = x[j];
    }
  }
  return value;
}

struct MinMax {
  float lo = FLT_MAX;
  float hi = -FLT_MAX;
};

MinMax block_min_max(const float* x) {
  MinMax m;
  for (int j = 0; j < kLegacyBlock; ++j) {
    if (x[j] < m.lo) m.lo = x[j];
    if (x[j] > m.hi) m.hi = x[j];
  }
  return m;
}

// C's float -> integer conversion truncates toward zero; the reference relies on it after
// adding 0.5 (or 8.5, 16.5), which rounds the non-negative shifted value half-up.
inline int truncate(float v) {
  return static_cast<int>(v);
}

}  // namespace

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock) {
    // d = max / -8 puts the extreme value on level 0 (q - 8 = -8).
    const float d = signed_absmax(x) / -8.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, truncate(x[j] * inv_d + 8.5f));
      const int hi = std::min(15, truncate(x[j + kHalf] * inv_d + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock) {
    const MinMax m = block_min_max(x);
    const float d = (m.hi - m.lo) / 15.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(m.lo);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, truncate((x[j] - m.lo) * inv_d + 0.5f));
      const int hi = std::min(15, truncate((x[j + kHalf] - m.lo) * inv_d + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock) {
    const float d = signed_absmax(x) / -16.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    uint32_t high_bits = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(31, truncate(x[j] * inv_d + 16.5f));
      const int hi = std::min(31, truncate(x[j + kHalf] * inv_d + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      high_bits |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      high_bits |= static_cast<uint32_t>((hi >> 4) & 1) << (j + kHalf);
    }
    std::memcpy(y[i].qh, &high_bits, sizeof(high_bits));  // little-endian, as in GGUF
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock) {
    const MinMax m = block_min_max(x);
    const float d = (m.hi - m.lo) / 31.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(m.lo);
    uint32_t high_bits = 0;
    for (int j = 0; j < kHalf; ++j) {
      // No clamp here in the reference: (x - min) / d <= 31 up to rounding, so +0.5 stays
      // below 32.
      const int lo = truncate((x[j] - m.lo) * inv_d + 0.5f) & 0xFF;
      const int hi = truncate((x[j + kHalf] - m.lo) * inv_d + 0.5f) & 0xFF;
      y[i].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      high_bits |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      high_bits |= static_cast<uint32_t>((hi >> 4) & 1) << (j + kHalf);
    }
    std::memcpy(y[i].qh, &high_bits, sizeof(high_bits));
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 reductions start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports at every use; no undefined lane is read.
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The same blocks with AVX-512, two vectors per block (loading a model with --type q8_0
// or --quantize-convs quantizes a UNet's worth of values). Each step is the scalar loop's
// own operation, so the bytes are the same: MAXPS returns its second operand when the
// first is NaN, as std::max(amax, NaN) keeps amax; truncation, the exact difference and the
// ordered >= 0.5 test are the scalar ones; the store keeps the low byte of the int32, as
// the scalar cast does (also for NaN, whose truncation is INT_MIN).
__attribute__((target("avx512f,avx512bw"))) void quantize_q8_0_avx512(const float* x, BlockQ8_0* y,
                                                                      int64_t nb) {
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m512i one = _mm512_set1_epi32(1), minus_one = _mm512_set1_epi32(-1);
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const __m512 m =
        _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(m);
    const float d = amax / 127.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    const __m512 inv = _mm512_set1_ps(inv_d);
    for (int h = 0; h < 2; ++h) {
      const __m512 v = _mm512_mul_ps(h ? v1 : v0, inv);
      const __m512i t = _mm512_cvttps_epi32(v);
      const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, _mm512_cvtepi32_ps(t)));
      const __mmask16 away = _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ);
      const __mmask16 negative = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
      const __m512i step = _mm512_mask_mov_epi32(one, negative, minus_one);
      const __m512i r = _mm512_mask_add_epi32(t, away, t, step);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * h), _mm512_cvtepi32_epi8(r));
    }
  }
}
#pragma GCC diagnostic pop
#endif

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  if (avx512) return quantize_q8_0_avx512(x, y, nb);
#endif
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kLegacyBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    // roundf: ties away from zero, unlike the K types' nearest_int. Written out on the
    // truncated integer (v - t is exact) so the loop vectorizes instead of calling libm per
    // value; |v| <= 127 here.
    for (int j = 0; j < kLegacyBlock; ++j) {
      const float v = x[j] * inv_d;
      const int t = static_cast<int>(v);
      const int r = std::fabs(v - static_cast<float>(t)) >= 0.5f ? t + (v < 0.0f ? -1 : 1) : t;
      y[i].qs[j] = static_cast<int8_t>(r);
    }
  }
}

// ---- Importance-weighted quantizers: one row of nb blocks ---------------------------------

namespace {

// sigma^2: the mean square of the whole row.
float row_sigma2(const float* x, int64_t nb) {
  const int64_t n = nb * kLegacyBlock;
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum / static_cast<float>(n);
}

void block_weights(const float* x, const float* imatrix, float sigma2, float* w) {
  for (int j = 0; j < kLegacyBlock; ++j) w[j] = imatrix[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// Packs 5-bit levels: low nibbles as q4, fifth bits into the little-endian word qh.
void pack_5bit(const uint8_t* levels, uint8_t* qs, uint8_t* qh) {
  uint32_t high_bits = 0;
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0F) | ((levels[j + kHalf] & 0x0F) << 4));
    high_bits |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
    high_bits |= static_cast<uint32_t>((levels[j + kHalf] >> 4) & 1) << (j + kHalf);
  }
  std::memcpy(qh, &high_bits, sizeof(high_bits));
}

}  // namespace

void quantize_q4_0_weighted(const float* x, BlockQ4_0* y, int64_t nb, const float* imatrix) {
  const float sigma2 = row_sigma2(x, nb);
  float w[kLegacyBlock];
  int8_t levels[kLegacyBlock];
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock, imatrix += kLegacyBlock) {
    block_weights(x, imatrix, sigma2, w);
    y[i].d = f32_to_fp16(fit_symmetric_levels(kLegacyBlock, 8, x, w, levels));
    for (int j = 0; j < kHalf; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(levels[j] | (levels[j + kHalf] << 4));
    }
  }
}

void quantize_q4_1_weighted(const float* x, BlockQ4_1* y, int64_t nb, const float* imatrix) {
  const float sigma2 = row_sigma2(x, nb);
  float w[kLegacyBlock];
  uint8_t levels[kLegacyBlock];
  uint8_t scratch[kLegacyBlock];
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock, imatrix += kLegacyBlock) {
    block_weights(x, imatrix, sigma2, w);
    float neg_min = 0.0f;
    const float d = fit_affine_levels(kLegacyBlock, 15, x, w, levels, &neg_min, scratch, -0.9f,
                                      0.05f, 36, false);
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(-neg_min);
    for (int j = 0; j < kHalf; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(levels[j] | (levels[j + kHalf] << 4));
    }
  }
}

void quantize_q5_0_weighted(const float* x, BlockQ5_0* y, int64_t nb, const float* imatrix) {
  const float sigma2 = row_sigma2(x, nb);
  float w[kLegacyBlock];
  int8_t levels[kLegacyBlock];
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock, imatrix += kLegacyBlock) {
    block_weights(x, imatrix, sigma2, w);
    y[i].d = f32_to_fp16(fit_symmetric_levels(kLegacyBlock, 16, x, w, levels));
    pack_5bit(reinterpret_cast<const uint8_t*>(levels), y[i].qs, y[i].qh);
  }
}

void quantize_q5_1_weighted(const float* x, BlockQ5_1* y, int64_t nb, const float* imatrix) {
  const float sigma2 = row_sigma2(x, nb);
  float w[kLegacyBlock];
  uint8_t levels[kLegacyBlock];
  uint8_t scratch[kLegacyBlock];
  for (int64_t i = 0; i < nb; ++i, x += kLegacyBlock, imatrix += kLegacyBlock) {
    block_weights(x, imatrix, sigma2, w);
    float neg_min = 0.0f;
    const float d = fit_affine_levels(kLegacyBlock, 31, x, w, levels, &neg_min, scratch, -0.9f,
                                      0.05f, 36, false);
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(-neg_min);
    pack_5bit(levels, y[i].qs, y[i].qh);
  }
}

}  // namespace sd::quant
