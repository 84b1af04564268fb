#include "tensor/quant/strict_fp.h"  // first: no FMA contraction below

#include "tensor/quant/scale_search.h"

#include <algorithm>
#include <cmath>

namespace sd::quant {

namespace {

// The value of largest magnitude, keeping the first one on ties (the reference scans with a
// strict '>'). Its sign decides the sign of the returned scale.
struct AbsMax {
  float amax = 0.0f;
  float value = 0.0f;
};

AbsMax find_absmax(int n, const float* x) {
  AbsMax m;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > m.amax) {
      m.amax = a;
      m.value = x[i];
    }
  }
  return m;
}

// Weighted sums of a fit with levels l in [-nmax, nmax): sum w*x*l and sum w*l*l.
struct SymmetricSums {
  float lx = 0.0f;
  float l2 = 0.0f;
};

}  // namespace

float fit_symmetric_levels(int n, int nmax, const float* x, const float* weights, int8_t* levels) {
  const AbsMax m = find_absmax(n, x);
  if (m.amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  auto level_at = [&](float inv_scale, float v) {
    return std::clamp(nearest_int(inv_scale * v), -nmax, nmax - 1);
  };
  // The sums are accumulated in index order with products associated left to right
  // ((w * x) * l and (w * l) * l), as in the reference.
  auto sums_at = [&](float inv_scale) {
    SymmetricSums s;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level_at(inv_scale, x[i]));
      const float w = weights != nullptr ? weights[i] : x[i] * x[i];
      s.lx += w * x[i] * l;
      s.l2 += w * l * l;
    }
    return s;
  };
  auto store_levels = [&](float inv_scale) {
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(nmax + level_at(inv_scale, x[i]));
  };

  // Start from the grid that maps the extreme value onto -nmax.
  float inv_scale = -fnmax / m.value;
  store_levels(inv_scale);
  SymmetricSums s = sums_at(inv_scale);
  float scale = s.l2 != 0.0f ? s.lx / s.l2 : 0.0f;
  float best = scale * s.lx;

  // Then widen or narrow the grid by tenths of a level; sum(w x l)^2 / sum(w l^2) is the
  // error reduction of the least-squares scale, so the larger one wins.
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    inv_scale = -(fnmax + 0.1f * static_cast<float>(step)) / m.value;
    s = sums_at(inv_scale);
    if (s.l2 > 0.0f && s.lx * s.lx > best * s.l2) {
      store_levels(inv_scale);
      scale = s.lx / s.l2;
      best = scale * s.lx;
    }
  }
  return scale;
}

float fit_symmetric_levels_q3(int n, int nmax, const float* x, int8_t* levels) {
  const AbsMax m = find_absmax(n, x);
  if (m.amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  const float inv_scale = -static_cast<float>(nmax) / m.value;

  // Levels are kept signed in [-nmax, nmax) during the search and offset at the end.
  float sum_lx = 0.0f;
  float sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(inv_scale * x[i]), -nmax, nmax - 1);
    levels[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sum_lx += w * x[i] * fl;
    sum_l2 += w * fl * fl;
  }

  // Coordinate descent: re-pick one level at a time against the fit of all the others and
  // keep the move when it raises sum_lx^2 / sum_l2. The reference stops after 5 passes.
  for (int pass = 0; pass < 5; ++pass) {
    int moved = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float old_l = static_cast<float>(levels[i]);
      float lx = sum_lx - w * x[i] * old_l;
      if (!(lx > 0.0f)) continue;
      float l2 = sum_l2 - w * old_l * old_l;
      const int new_l = std::clamp(nearest_int(x[i] * l2 / lx), -nmax, nmax - 1);
      if (new_l == levels[i]) continue;
      const float fl = static_cast<float>(new_l);
      lx += w * x[i] * fl;
      l2 += w * fl * fl;
      if (l2 > 0.0f && lx * lx * sum_l2 > sum_lx * sum_lx * l2) {
        levels[i] = static_cast<int8_t>(new_l);
        sum_lx = lx;
        sum_l2 = l2;
        ++moved;
      }
    }
    if (moved == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

float fit_affine_levels(int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                        float* neg_min, uint8_t* scratch, float rmin, float rdelta, int nstep,
                        bool use_mad) {
  float lo = x[0];
  float hi = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  // The minimum is never positive: a group of positive values is fitted from zero.
  if (lo > 0.0f) lo = 0.0f;
  if (hi == lo) {
    std::fill(levels, levels + n, uint8_t{0});
    *neg_min = -lo;
    return 0.0f;
  }

  auto error_term = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  const float fnmax = static_cast<float>(nmax);

  // Initial fit: the plain min/max grid.
  float inv_scale = fnmax / (hi - lo);
  float scale = 1.0f / inv_scale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(inv_scale * (x[i] - lo)), 0, nmax);
    levels[i] = static_cast<uint8_t>(l);
    const float diff = scale * static_cast<float>(l) + lo - x[i];
    best_error += weights[i] * error_term(diff);
  }
  if (nstep < 1) {
    *neg_min = -lo;
    return scale;
  }

  // Candidate grids of nmax + rmin + rdelta * k steps over [lo, hi]; for each, the weighted
  // least-squares scale and minimum of its levels (minimum clamped to <= 0).
  for (int k = 0; k <= nstep; ++k) {
    inv_scale = (rmin + rdelta * static_cast<float>(k) + fnmax) / (hi - lo);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(inv_scale * (x[i] - lo)), 0, nmax);
      scratch[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      const float w = weights[i];
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * static_cast<float>(scratch[i]) + this_min - x[i];
      error += weights[i] * error_term(diff);
    }
    if (error < best_error) {
      std::copy(scratch, scratch + n, levels);
      best_error = error;
      scale = this_scale;
      lo = this_min;
    }
  }
  *neg_min = -lo;
  return scale;
}

float fit_positive_levels(int n, int nmax, const float* x, const float* weights, uint8_t* levels) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max < kGroupMaxEps) {
    std::fill(levels, levels + n, uint8_t{0});
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  // Levels live in uint8 as in the reference: a (rare) negative x wraps around, and that
  // wrapped value is what later comparisons see.
  auto squared_error = [&](float inv_scale, bool clamp) {
    const float scale = 1.0f / inv_scale;
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(inv_scale * x[i]);
      if (clamp) {
        l = std::min(nmax, l);
      } else {
        l = static_cast<uint8_t>(l);
      }
      const float diff = x[i] - scale * static_cast<float>(l);
      err += weights[i] * diff * diff;
    }
    return err;
  };

  // The plain max grid (unclamped, as the reference) against 8 neighbours.
  float inv_scale = fnmax / max;
  float best = squared_error(inv_scale, false);
  for (int step = -4; step <= 4; ++step) {
    if (step == 0) continue;
    const float candidate = (0.1f * static_cast<float>(step) + fnmax) / max;
    const float err = squared_error(candidate, true);
    if (err < best) {
      best = err;
      inv_scale = candidate;
    }
  }

  float sum_lx = 0.0f;
  float sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(inv_scale * x[i]));
    levels[i] = static_cast<uint8_t>(l);
    const float fl = static_cast<float>(l);
    sum_lx += weights[i] * x[i] * fl;
    sum_l2 += weights[i] * fl * fl;
  }
  // Coordinate descent as in fit_symmetric_levels_q3, levels clamped above only.
  for (int pass = 0; pass < 5; ++pass) {
    int moved = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float old_l = static_cast<float>(levels[i]);
      float lx = sum_lx - w * x[i] * old_l;
      float l2 = sum_l2 - w * old_l * old_l;
      if (!(lx > 0.0f && l2 > 0.0f)) continue;
      const int new_l = std::min(nmax, nearest_int(x[i] * l2 / lx));
      if (new_l == levels[i]) continue;
      const float fl = static_cast<float>(new_l);
      lx += w * x[i] * fl;
      l2 += w * fl * fl;
      if (lx * lx * sum_l2 > sum_lx * sum_lx * l2) {
        levels[i] = static_cast<uint8_t>(new_l);
        sum_lx = lx;
        sum_l2 = l2;
        ++moved;
      }
    }
    if (moved == 0) break;
  }
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

}  // namespace sd::quant
