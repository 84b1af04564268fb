// Quantizers of the K types (q2_K, q3_K, q4_K, q5_K, q6_K, q8_K), with and without an
// importance matrix.
//
// All follow one plan: fit each sub-block on its own (scale_search.h), quantize the
// sub-block scales (and minimums) against one f32 super-block scale that is stored as a
// half, then re-round every value against the scale it will actually be decoded with.
// The two variants differ only in the first two steps: the plain ones match the GGUF
// reference quantizers (ggml-quants.c, quantize_row_*_K_ref), the weighted ones match
// ggml's importance-matrix paths (quantize_*_K with quant_weights), which fit with weights
// imatrix * sqrt(sigma^2 + x^2) (q6_K: the imatrix itself) on finer grids and choose the
// sub-block scale levels by least squares too.
// Where a sub-block's decoded scale is zero the levels of the first fit are kept, as the
// reference does.
#include "tensor/quant/strict_fp.h"  // first: no FMA contraction below

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/float16.h"
#include "tensor/quant/kernels.h"
#include "tensor/quant/scale_search.h"

namespace sd::quant {

namespace {

constexpr int kQK = kSuperBlock;

// Packs 2-bit levels in the K layout: in each 128-value half, byte l holds values
// l, l + 32, l + 64, l + 96 at bit offsets 0, 2, 4, 6.
void pack_2bit(const uint8_t* levels, uint8_t* qs) {
  for (int half = 0; half < kQK; half += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[half / 4 + l] =
          static_cast<uint8_t>(levels[half + l] | (levels[half + l + 32] << 2) |
                               (levels[half + l + 64] << 4) | (levels[half + l + 96] << 6));
    }
  }
}

// Re-rounds the values of an affine sub-block against its decoded scale and minimum.
void requantize_affine(const float* x, int n, float d, float dm, int nmax, uint8_t* levels) {
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(std::clamp(nearest_int((x[i] + dm) / d), 0, nmax));
  }
}

// The weights of the importance-matrix variants: imatrix * sqrt(sigma2 + x^2).
void importance_weights(const float* x, const float* imatrix, int n, float sigma2, float* w) {
  for (int l = 0; l < n; ++l) w[l] = imatrix[l] * std::sqrt(sigma2 + x[l] * x[l]);
}

float sum_of_squares(const float* x, int n) {
  float s = 0.0f;
  for (int l = 0; l < n; ++l) s += x[l] * x[l];
  return s;
}

// Per-sub-block fits of the affine types (q2_K, q4_K, q5_K) and their maxima.
struct AffineFits {
  float scales[16];
  float mins[16];         // negated minimums, >= 0
  float sum_weights[16];  // weighted variants: the sub-block's total weight
  float max_scale = 0.0f;
  float max_min = 0.0f;

  void add(int j, float scale, float min) {
    scales[j] = scale;
    mins[j] = min;
    if (scale > max_scale) max_scale = scale;
    if (min > max_min) max_min = min;
  }
};

// ---- q2_K --------------------------------------------------------------------------------

// Re-rounds against the stored 4-bit scales and minimums, then packs.
void finish_q2_K(const float* x, uint8_t* levels, BlockQ2_K& b) {
  for (int j = 0; j < kQK / 16; ++j) {
    const float d = fp16_to_f32(b.d) * static_cast<float>(b.scales[j] & 0xF);
    if (d == 0.0f) continue;
    const float dm = fp16_to_f32(b.dmin) * static_cast<float>(b.scales[j] >> 4);
    requantize_affine(x + 16 * j, 16, d, dm, 3, levels + 16 * j);
  }
  pack_2bit(levels, b.qs);
}

// ---- q3_K --------------------------------------------------------------------------------

// Stores 6-bit signed sub-block scale levels (already offset by 32) in the q3_K packing.
void pack_scales_q3_K(const int* levels, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < kQK / 16; ++j) {
    const int l = levels[j];
    if (j < 8) {
      scales[j] = static_cast<uint8_t>(l & 0xF);
    } else {
      scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
    }
    scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
}

// Re-rounds against the stored scales, then splits levels into hmask (third bit) and qs.
void finish_q3_K(const float* x, int8_t* levels, BlockQ3_K& b) {
  for (int j = 0; j < kQK / 16; ++j) {
    const float d = fp16_to_f32(b.d) * static_cast<float>(unpack_scale_q3_K(j, b.scales));
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l) {
      const int q = std::clamp(nearest_int(x[16 * j + l] / d), -4, 3);
      levels[16 * j + l] = static_cast<int8_t>(q + 4);
    }
  }
  std::memset(b.hmask, 0, sizeof(b.hmask));
  uint8_t low[kQK];
  for (int j = 0; j < kQK; ++j) {
    int l = levels[j];
    if (l > 3) {
      b.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
      l -= 4;
    }
    low[j] = static_cast<uint8_t>(l);
  }
  pack_2bit(low, b.qs);
}

// ---- q4_K / q5_K -------------------------------------------------------------------------

// Re-rounds against the stored 6-bit scales and minimums.
template <typename Block>
void requantize_k4(const float* x, int nmax, uint8_t* levels, const Block& y) {
  for (int j = 0; j < kQK / 32; ++j) {
    uint8_t sc = 0;
    uint8_t m = 0;
    unpack_scale_min_k4(j, y.scales, &sc, &m);
    const float d = fp16_to_f32(y.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_f32(y.dmin) * static_cast<float>(m);
    requantize_affine(x + 32 * j, 32, d, dm, nmax, levels + 32 * j);
  }
}

// Plain variant: 6-bit scales and minimums against their maxima.
template <typename Block>
void store_scales_k4(const AffineFits& fits, Block& y) {
  const float inv_scale = fits.max_scale > 0.0f ? 63.0f / fits.max_scale : 0.0f;
  const float inv_min = fits.max_min > 0.0f ? 63.0f / fits.max_min : 0.0f;
  for (int j = 0; j < kQK / 32; ++j) {
    // The reference narrows to uint8 before clamping to 63.
    const auto ls = static_cast<uint8_t>(nearest_int(inv_scale * fits.scales[j]));
    const auto lm = static_cast<uint8_t>(nearest_int(inv_min * fits.mins[j]));
    pack_scale_min_k4(j, std::min<uint8_t>(63, ls), std::min<uint8_t>(63, lm), y.scales);
  }
  y.d = f32_to_fp16(fits.max_scale / 63.0f);
  y.dmin = f32_to_fp16(fits.max_min / 63.0f);
}

// Weighted variant: scale and minimum levels by weighted least squares. The reference
// clamps the levels to 63 for q5_K only (clamp_levels).
template <typename Block>
void store_scales_k4_weighted(const AffineFits& fits, bool clamp_levels, Block& y) {
  uint8_t ls[kQK / 32];
  uint8_t lm[kQK / 32];
  const float d_block = fit_positive_levels(kQK / 32, 63, fits.scales, fits.sum_weights, ls);
  const float m_block = fit_positive_levels(kQK / 32, 63, fits.mins, fits.sum_weights, lm);
  for (int j = 0; j < kQK / 32; ++j) {
    const uint8_t sc = clamp_levels ? std::min<uint8_t>(63, ls[j]) : ls[j];
    const uint8_t m = clamp_levels ? std::min<uint8_t>(63, lm[j]) : lm[j];
    pack_scale_min_k4(j, sc, m, y.scales);
  }
  y.d = f32_to_fp16(d_block);
  y.dmin = f32_to_fp16(m_block);
}

// Sub-block fits of q4_K / q5_K over the search grid (rmin, rdelta, nstep). Plain (null
// imatrix): weights |x| plus the sub-block's RMS. Weighted: the importance weights, with
// sigma^2 = 2 * mean(x^2) over the super-block.
void fit_sub_blocks_k4(const float* x, const float* imatrix, int nmax, float rmin, float rdelta,
                       int nstep, uint8_t* levels, AffineFits& fits) {
  float weights[32];
  uint8_t scratch[32];
  const float sigma2 =
      imatrix != nullptr ? 2.0f * sum_of_squares(x, kQK) / static_cast<float>(kQK) : 0.0f;
  for (int j = 0; j < kQK / 32; ++j) {
    const float* xs = x + 32 * j;
    if (imatrix != nullptr) {
      importance_weights(xs, imatrix + 32 * j, 32, sigma2, weights);
      float sum_w = 0.0f;
      for (int l = 0; l < 32; ++l) sum_w += weights[l];
      fits.sum_weights[j] = sum_w;
    } else {
      const float rms = std::sqrt(sum_of_squares(xs, 32) / 32.0f);
      for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(xs[l]);
    }
    float min = 0.0f;
    const float scale = fit_affine_levels(32, nmax, xs, weights, levels + 32 * j, &min, scratch,
                                          rmin, rdelta, nstep, false);
    fits.add(j, scale, min);
  }
}

void pack_nibbles_q4_K(const uint8_t* levels, BlockQ4_K& b) {
  // Byte l of each 64-value group holds values l (low) and l + 32 (high).
  for (int g = 0; g < kQK / 64; ++g) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * g + l] = static_cast<uint8_t>(levels[64 * g + l] | (levels[64 * g + l + 32] << 4));
    }
  }
}

void pack_q5_K(const uint8_t* levels, BlockQ5_K& b) {
  // As q4_K, with the fifth bits of group g in bits 2g (low) and 2g + 1 (high) of qh[l].
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int g = 0; g < kQK / 64; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int lo = levels[64 * g + l];
      const int hi = levels[64 * g + l + 32];
      b.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      b.qs[32 * g + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    }
  }
}

// ---- q6_K --------------------------------------------------------------------------------

// q6_K fits each sub-block with weights x^2 (plain) or the raw importance (weighted; the
// reference passes the imatrix through unchanged for this type).
void quantize_q6_K_impl(const float* x, BlockQ6_K* y, int64_t nb, const float* imatrix) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    int8_t levels[kQK];
    float scales[kQK / 16];
    float max_scale = 0.0f;
    float max_abs = 0.0f;
    for (int j = 0; j < kQK / 16; ++j) {
      const float* w = imatrix != nullptr ? imatrix + kQK * i + 16 * j : nullptr;
      scales[j] = fit_symmetric_levels(16, 32, x + 16 * j, w, levels + 16 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }

    BlockQ6_K& b = y[i];
    if (max_abs < kGroupMaxEps) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    // The largest sub-block scale maps onto -128 and is clamped to 127 when positive.
    const float inv_scale = -128.0f / max_scale;
    b.d = f32_to_fp16(1.0f / inv_scale);
    for (int j = 0; j < kQK / 16; ++j) {
      b.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(inv_scale * scales[j])));
    }

    for (int j = 0; j < kQK / 16; ++j) {
      const float d = fp16_to_f32(b.d) * static_cast<float>(b.scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(nearest_int(x[16 * j + l] / d), -32, 31);
        levels[16 * j + l] = static_cast<int8_t>(q + 32);
      }
    }

    // Per 128-value half: ql[l] = values l | l + 64, ql[l + 32] = l + 32 | l + 96 (low
    // nibbles), qh[l] = top two bits of l, l + 32, l + 64, l + 96.
    for (int half = 0; half < 2; ++half) {
      const int8_t* L = levels + 128 * half;
      uint8_t* ql = b.ql + 64 * half;
      uint8_t* qh = b.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((L[l] & 0xF) | ((L[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) |
                                     ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

// ---- Plain (reference) quantizers --------------------------------------------------------

void quantize_q2_K(const float* x, BlockQ2_K* y, int64_t nb) {
  // Scales and minimums both get 4 bits against their own maximum.
  constexpr float kLevels4 = 15.0f;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    uint8_t levels[kQK];
    uint8_t scratch[16];
    float weights[16];
    AffineFits fits;
    // Sub-blocks of 16 weighted by |x|, minimising absolute error (use_mad) over a grid of
    // 3 - 0.5 + 0.1 k steps, k = 0..15.
    for (int j = 0; j < kQK / 16; ++j) {
      const float* xs = x + 16 * j;
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(xs[l]);
      float min = 0.0f;
      const float scale = fit_affine_levels(16, 3, xs, weights, levels + 16 * j, &min, scratch,
                                            -0.5f, 0.1f, 15, true);
      fits.add(j, scale, min);
    }

    BlockQ2_K& b = y[i];
    if (fits.max_scale > 0.0f) {
      const float inv_scale = kLevels4 / fits.max_scale;
      for (int j = 0; j < kQK / 16; ++j) {
        b.scales[j] = static_cast<uint8_t>(nearest_int(inv_scale * fits.scales[j]));
      }
      b.d = f32_to_fp16(fits.max_scale / kLevels4);
    } else {
      std::memset(b.scales, 0, sizeof(b.scales));
      b.d = f32_to_fp16(0.0f);
    }
    if (fits.max_min > 0.0f) {
      const float inv_min = kLevels4 / fits.max_min;
      for (int j = 0; j < kQK / 16; ++j) {
        b.scales[j] |= static_cast<uint8_t>(nearest_int(inv_min * fits.mins[j]) << 4);
      }
      b.dmin = f32_to_fp16(fits.max_min / kLevels4);
    } else {
      b.dmin = f32_to_fp16(0.0f);
    }
    finish_q2_K(x, levels, b);
  }
}

void quantize_q3_K(const float* x, BlockQ3_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    int8_t levels[kQK];
    float scales[kQK / 16];
    // The sub-block scale of largest magnitude, with its sign: it maps onto level -32.
    float max_scale = 0.0f;
    float max_abs = 0.0f;
    for (int j = 0; j < kQK / 16; ++j) {
      scales[j] = fit_symmetric_levels_q3(16, 4, x + 16 * j, levels + 16 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }

    BlockQ3_K& b = y[i];
    if (max_scale != 0.0f) {
      const float inv_scale = -32.0f / max_scale;
      int scale_levels[kQK / 16];
      for (int j = 0; j < kQK / 16; ++j) {
        // Narrowed to int8 before clamping, as in the reference (|value| <= 32 here anyway).
        const auto q = static_cast<int8_t>(nearest_int(inv_scale * scales[j]));
        scale_levels[j] = std::clamp<int>(q, -32, 31) + 32;
      }
      pack_scales_q3_K(scale_levels, b.scales);
      b.d = f32_to_fp16(1.0f / inv_scale);
    } else {
      std::memset(b.scales, 0, sizeof(b.scales));
      b.d = f32_to_fp16(0.0f);
    }
    finish_q3_K(x, levels, b);
  }
}

void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    uint8_t levels[kQK];
    AffineFits fits;
    fit_sub_blocks_k4(x, nullptr, 15, -1.0f, 0.1f, 20, levels, fits);
    store_scales_k4(fits, y[i]);
    requantize_k4(x, 15, levels, y[i]);
    pack_nibbles_q4_K(levels, y[i]);
  }
}

void quantize_q5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    uint8_t levels[kQK];
    AffineFits fits;
    fit_sub_blocks_k4(x, nullptr, 31, -0.5f, 0.1f, 15, levels, fits);
    store_scales_k4(fits, y[i]);
    requantize_k4(x, 31, levels, y[i]);
    pack_q5_K(levels, y[i]);
  }
}

void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  quantize_q6_K_impl(x, y, nb, nullptr);
}

void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    BlockQ8_K& b = y[i];
    if (amax == 0.0f) {
      // The reference leaves bsums unwritten here; zero is their true value.
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    // -127 rather than -128 keeps every quant in [-127, 127] (the reference's choice for
    // its SIMD dot products).
    const float inv_scale = -127.0f / max;
    for (int j = 0; j < kQK; ++j) {
      b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(inv_scale * x[j])));
    }
    for (int j = 0; j < kQK / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / inv_scale;
  }
}

// ---- Importance-weighted quantizers ------------------------------------------------------

void quantize_q2_K_weighted(const float* x, BlockQ2_K* y, int64_t nb, const float* imatrix) {
  for (int64_t i = 0; i < nb; ++i, x += kQK, imatrix += kQK) {
    uint8_t levels[kQK];
    uint8_t scratch[16];
    float weights[16];
    AffineFits fits;
    // sigma^2 = mean(x^2) for this type (twice that for the others).
    const float sigma2 = sum_of_squares(x, kQK) / static_cast<float>(kQK);
    for (int j = 0; j < kQK / 16; ++j) {
      const float* xs = x + 16 * j;
      importance_weights(xs, imatrix + 16 * j, 16, sigma2, weights);
      float sum_w = 0.0f;
      for (int l = 0; l < 16; ++l) sum_w += weights[l];
      fits.sum_weights[j] = sum_w;
      float min = 0.0f;
      const float scale = fit_affine_levels(16, 3, xs, weights, levels + 16 * j, &min, scratch,
                                            -0.9f, 0.05f, 36, false);
      fits.add(j, scale, min);
    }

    uint8_t ls[kQK / 16];
    uint8_t lm[kQK / 16];
    BlockQ2_K& b = y[i];
    b.d = f32_to_fp16(fit_positive_levels(kQK / 16, 15, fits.scales, fits.sum_weights, ls));
    b.dmin = f32_to_fp16(fit_positive_levels(kQK / 16, 15, fits.mins, fits.sum_weights, lm));
    for (int j = 0; j < kQK / 16; ++j) b.scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
    finish_q2_K(x, levels, b);
  }
}

void quantize_q3_K_weighted(const float* x, BlockQ3_K* y, int64_t nb, const float* imatrix) {
  for (int64_t i = 0; i < nb; ++i, x += kQK, imatrix += kQK) {
    int8_t levels[kQK];
    float scales[kQK / 16];
    float sum_weights[kQK / 16];
    float weights[16];
    const float sigma2 = 2.0f * sum_of_squares(x, kQK) / static_cast<float>(kQK);
    for (int j = 0; j < kQK / 16; ++j) {
      importance_weights(x + 16 * j, imatrix + 16 * j, 16, sigma2, weights);
      float sum_w = 0.0f;
      for (int l = 0; l < 16; ++l) sum_w += weights[l];
      sum_weights[j] = sum_w;
      scales[j] = fit_symmetric_levels(16, 4, x + 16 * j, weights, levels + 16 * j);
    }
    // The sub-block scales themselves get symmetric 6-bit levels by weighted least squares.
    int8_t scale_levels8[kQK / 16];
    const float d_block = fit_symmetric_levels(kQK / 16, 32, scales, sum_weights, scale_levels8);
    int scale_levels[kQK / 16];
    for (int j = 0; j < kQK / 16; ++j) scale_levels[j] = scale_levels8[j];

    BlockQ3_K& b = y[i];
    pack_scales_q3_K(scale_levels, b.scales);
    b.d = f32_to_fp16(d_block);
    finish_q3_K(x, levels, b);
  }
}

void quantize_q4_K_weighted(const float* x, BlockQ4_K* y, int64_t nb, const float* imatrix) {
  for (int64_t i = 0; i < nb; ++i, x += kQK, imatrix += kQK) {
    uint8_t levels[kQK];
    AffineFits fits;
    fit_sub_blocks_k4(x, imatrix, 15, -0.9f, 0.05f, 36, levels, fits);
    store_scales_k4_weighted(fits, /*clamp_levels=*/false, y[i]);
    requantize_k4(x, 15, levels, y[i]);
    pack_nibbles_q4_K(levels, y[i]);
  }
}

void quantize_q5_K_weighted(const float* x, BlockQ5_K* y, int64_t nb, const float* imatrix) {
  for (int64_t i = 0; i < nb; ++i, x += kQK, imatrix += kQK) {
    uint8_t levels[kQK];
    AffineFits fits;
    fit_sub_blocks_k4(x, imatrix, 31, -0.9f, 0.05f, 36, levels, fits);
    store_scales_k4_weighted(fits, /*clamp_levels=*/true, y[i]);
    requantize_k4(x, 31, levels, y[i]);
    pack_q5_K(levels, y[i]);
  }
}

void quantize_q6_K_weighted(const float* x, BlockQ6_K* y, int64_t nb, const float* imatrix) {
  quantize_q6_K_impl(x, y, nb, imatrix);
}

}  // namespace sd::quant
