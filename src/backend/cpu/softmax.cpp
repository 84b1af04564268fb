// Fast softmax over ne[0] of a * scale + mask: one row per task, max subtraction for
// stability, f32 exponentials (Highway Exp, 1 ulp) summed in four vector accumulators.
#include "backend/cpu/simd_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/strided_loop.h"
#include "tensor/quant/quant.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/softmax.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace {

// y = x * scale + mask (mask null: m_scalar), rounded after each step as the reference
// does; returns max(y). y may alias x.
float scale_add_max(const float* x, float scale, const float* mask, float m_scalar, float* y,
                    int64_t n) {
  const DF d;
  VF vmax = hn::Set(d, -std::numeric_limits<float>::infinity());
  const VF vs = hn::Set(d, scale);
  // Collect the max in the map's callback: lanes of the zero-padded tail must not count,
  // so the tail is scanned separately below.
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t body = n - n % N;
  map_binary(x, 0.0f, mask, m_scalar, y, body, [&](VF a, VF m) {
    const VF v = hn::Add(hn::Mul(a, vs), m);
    vmax = hn::Max(vmax, v);
    return v;
  });
  float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (int64_t i = body; i < n; ++i) {
    y[i] = x[i] * scale + (mask ? mask[i] : m_scalar);
    mx = std::max(mx, y[i]);
  }
  return mx;
}

// y = e^(y - max) in place; returns the sum.
float exp_sub_sum(float* y, float max, int64_t n) {
  const DF d;
  const VF vmax = hn::Set(d, max);
  map_unary(y, y, n, [&](DF dd, VF v) { return exp_f32(dd, hn::Sub(v, vmax)); });
  return sum_row(y, n);
}

void scale_row(float* y, float s, int64_t n) {
  map_unary(y, y, n, [s](DF d, VF v) { return hn::Mul(v, hn::Set(d, s)); });
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd {

HWY_EXPORT(scale_add_max);
HWY_EXPORT(exp_sub_sum);
HWY_EXPORT(scale_row);

bool cpu_softmax(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* mask = dst->src[1];
  const float scale = dst->param_f32(0);
  const int64_t n = a->ne[0], rows = a->nrows();
  if (dst->type != DType::F32 || !dst->rows_contiguous() || !a->rows_contiguous() ||
      !is_float(a->type)) {
    return false;
  }
  if (mask && (!is_float(mask->type) || (mask->ne[0] != 1 && !mask->rows_contiguous()))) {
    return false;
  }
  const bool mask_row = mask && mask->ne[0] == n && n > 1;
#pragma omp parallel num_threads(ctx.threads) if (rows > 1 && rows * n >= kMinParallelValues)
  {
    std::vector<float> scratch(static_cast<size_t>(2 * n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i1 = r % a->ne[1], i2 = r / a->ne[1] % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
      float* y = reinterpret_cast<float*>(tensor_row(dst, r));
      const float* x = reinterpret_cast<const float*>(tensor_row(a, r));
      if (a->type != DType::F32) {
        dequantize_row(a->type, x, scratch.data(), n);
        x = scratch.data();
      }
      const float* m = nullptr;
      float m_scalar = 0;
      if (mask) {
        const char* mp =
            static_cast<const char*>(mask->data) + (mask->ne[1] == 1 ? 0 : i1 * mask->nb[1]) +
            (mask->ne[2] == 1 ? 0 : i2 * mask->nb[2]) + (mask->ne[3] == 1 ? 0 : i3 * mask->nb[3]);
        if (mask_row) {
          m = reinterpret_cast<const float*>(mp);
          if (mask->type != DType::F32) {
            dequantize_row(mask->type, mp, scratch.data() + n, n);
            m = scratch.data() + n;
          }
        } else {
          dequantize_row(mask->type, mp, &m_scalar, 1);
        }
      }
      const float max = HWY_DYNAMIC_DISPATCH(scale_add_max)(x, scale, m, m_scalar, y, n);
      if (max == -std::numeric_limits<float>::infinity()) {
        // Every entry is -inf (zeros, as softmax.h specifies) unless one is NaN, which
        // the reference lets propagate to the whole row.
        bool nan = false;
        for (int64_t i = 0; i < n; ++i) nan |= std::isnan(y[i]);
        std::fill(y, y + n, nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
        continue;
      }
      const float sum = HWY_DYNAMIC_DISPATCH(exp_sub_sum)(y, max, n);
      HWY_DYNAMIC_DISPATCH(scale_row)(y, 1.0f / sum, n);
    }
  }
  return true;
}

}  // namespace sd
#endif  // HWY_ONCE
