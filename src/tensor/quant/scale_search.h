// Scale searches shared by the quantizers: for a small group of values, find the scale
// (and for the affine types the minimum) and integer levels that minimise a weighted
// reconstruction error.
//
// These reproduce the GGUF reference quantizers (ggml-quants.c: make_qx_quants with
// rmse_type 1, make_q3_quants with do_rmse, make_qkx2_quants / make_qkx3_quants and
// make_qp_quants) float operation by float operation: the candidates they try, the order in
// which sums are accumulated and the tie-breaking all decide which bytes come out. Keep
// every expression's association as written; files using these include strict_fp.h first.
#pragma once

#include <cstdint>
#include <cstring>

namespace sd::quant {

// Groups whose largest magnitude is below this are treated as all-zero (reference value).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 pushes the integer part
// into the low mantissa bits, where the FPU's own rounding does the work. This is the
// reference's rounding; std::lround would round ties away from zero instead.
inline int nearest_int(float v) {
  float shifted = v + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// Symmetric levels in [0, 2 * nmax) for x ~ scale * (L - nmax), weighting each value by
// weights[i], or by x^2 when weights is null. Tries the reference's 19 candidate scales
// around nmax / max|x| and keeps the one with the best weighted least-squares fit. Returns
// the scale (negative when the largest-magnitude value is positive, as in the reference),
// or 0 with all L = 0 for an all-zero group.
float fit_symmetric_levels(int n, int nmax, const float* x, const float* weights, int8_t* levels);

// The q3_K variant: starts from the max-based scale and then moves single levels while that
// improves the x^2-weighted fit (at most 5 passes). Same return convention as above.
float fit_symmetric_levels_q3(int n, int nmax, const float* x, int8_t* levels);

// Affine levels in [0, nmax] for x ~ scale * L - neg_min with neg_min >= 0 (the reference's
// make_qkx2_quants, and its make_qkx3_quants, which differs only for null weights; ours
// must not be null). Starts from the min/max grid, then tries nstep + 1 grid widths
// (nmax + rmin + rdelta * k) solving the weighted least squares for scale and minimum;
// keeps the best by weighted squared error (or absolute error when use_mad). `scratch`
// holds n bytes. Returns the scale and stores the negated minimum in *neg_min.
float fit_affine_levels(int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                        float* neg_min, uint8_t* scratch, float rmin, float rdelta, int nstep,
                        bool use_mad);

// Non-negative levels in [0, nmax] for the non-negative values x ~ scale * L (used for the
// sub-block scales of the importance-weighted K quantizers): picks the best of 9 grids
// around nmax / max x by weighted squared error, then moves single levels while the
// weighted least-squares fit improves (at most 5 passes). Returns the scale, or 0 with all
// L = 0 when max x is below kGroupMaxEps.
float fit_positive_levels(int n, int nmax, const float* x, const float* weights, uint8_t* levels);

}  // namespace sd::quant
