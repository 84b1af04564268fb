// Fast activation and math functions (every UnaryOp). exp, tanh, sin and cos come from
// Highway's contrib/math (<= 4 ulp, see math-inl.h); erf for the exact GELU is the
// Abramowitz & Stegun 7.1.26 rational approximation below (|error| <= 1.5e-7).
#include "backend/cpu/simd_kernels.h"

#include <cmath>

#include "backend/cpu/strided_loop.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/unary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace {

// erfc(z) for z >= 0: Abramowitz & Stegun, Handbook of Mathematical Functions, 7.1.26,
// erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-z^2), t = 1 / (1 + p z).
// Computing erfc directly (not 1 - erf) keeps GELU's left tail accurate in relative terms.
HWY_INLINE VF erfc_nonnegative(DF d, VF z) {
  const VF t = hn::Div(hn::Set(d, 1.0f), hn::MulAdd(hn::Set(d, 0.3275911f), z, hn::Set(d, 1.0f)));
  VF p = hn::Set(d, 1.061405429f);
  p = hn::MulAdd(p, t, hn::Set(d, -1.453152027f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.421413741f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.284496736f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.254829592f));
  return hn::Mul(hn::Mul(p, t), exp_f32(d, hn::Neg(hn::Mul(z, z))));
}

// 0.5 x (1 + erf(x / sqrt 2)) = x (1 - 0.5 erfc(z)) for x >= 0, x 0.5 erfc(z) for x < 0,
// z = |x| / sqrt 2 (the factor is formed first so that x = +inf gives +inf, not NaN).
HWY_INLINE VF gelu_erf(DF d, VF x) {
  const VF z = hn::Mul(hn::Abs(x), hn::Set(d, 0.70710678118654752f));
  const VF half_q = hn::Mul(hn::Set(d, 0.5f), erfc_nonnegative(d, z));
  const VF factor =
      hn::IfThenElse(hn::Lt(x, hn::Zero(d)), half_q, hn::Sub(hn::Set(d, 1.0f), half_q));
  return hn::Mul(x, factor);
}

HWY_INLINE VF gelu_tanh(DF d, VF x) {
  const VF k = hn::Set(d, 0.79788456080286536f);  // sqrt(2 / pi)
  const VF x3 = hn::Mul(hn::Mul(x, x), x);
  const VF inner = hn::Mul(k, hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
  const VF half_x = hn::Mul(hn::Set(d, 0.5f), x);
  return hn::MulAdd(half_x, hn::Tanh(d, inner), half_x);
}

// Highway's Sin and Cos are specified on [-39000, 39000]; lanes beyond go through libm.
template <bool kSin>
HWY_INLINE VF sin_cos(DF d, VF x) {
  VF y = kSin ? hn::Sin(d, x) : hn::Cos(d, x);
  if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Gt(hn::Abs(x), hn::Set(d, 39000.0f))))) {
    HWY_ALIGN float xs[kMaxFloatLanes], ys[kMaxFloatLanes];
    hn::Store(x, d, xs);
    hn::Store(y, d, ys);
    for (size_t i = 0; i < hn::Lanes(d); ++i) {
      if (std::fabs(xs[i]) > 39000.0f) ys[i] = kSin ? std::sin(xs[i]) : std::cos(xs[i]);
    }
    y = hn::Load(d, ys);
  }
  return y;
}

void unary_run(UnaryOp op, float alpha, const float* x, float* y, int64_t n) {
  switch (op) {
    case UnaryOp::Gelu:
      return map_unary(x, y, n, gelu_tanh);
    case UnaryOp::GeluErf:
      return map_unary(x, y, n, gelu_erf);
    case UnaryOp::GeluQuick:
      return map_unary(x, y, n, [](DF d, VF v) {
        return hn::Mul(v, sigmoid_f32(d, hn::Mul(hn::Set(d, 1.702f), v)));
      });
    case UnaryOp::Silu:
      return map_unary(x, y, n, [](DF d, VF v) { return hn::Mul(v, sigmoid_f32(d, v)); });
    case UnaryOp::Relu:
      return map_unary(x, y, n,
                       [](DF d, VF v) { return hn::IfThenElseZero(hn::Gt(v, hn::Zero(d)), v); });
    case UnaryOp::LeakyRelu:
      return map_unary(x, y, n, [alpha](DF d, VF v) {
        return hn::IfThenElse(hn::Gt(v, hn::Zero(d)), v, hn::Mul(hn::Set(d, alpha), v));
      });
    case UnaryOp::Tanh:
      return map_unary(x, y, n, [](DF d, VF v) { return hn::Tanh(d, v); });
    case UnaryOp::Sigmoid:
      return map_unary(x, y, n, sigmoid_f32);
    case UnaryOp::Exp:
      return map_unary(x, y, n, exp_f32);
    case UnaryOp::Sin:
      return map_unary(x, y, n, sin_cos<true>);
    case UnaryOp::Cos:
      return map_unary(x, y, n, sin_cos<false>);
    case UnaryOp::Sqrt:
      return map_unary(x, y, n, [](DF, VF v) { return hn::Sqrt(v); });
    case UnaryOp::Neg:
      return map_unary(x, y, n, [](DF, VF v) { return hn::Neg(v); });
    case UnaryOp::Count:
      return;
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd {

HWY_EXPORT(unary_run);

bool cpu_unary(CpuContext& ctx, Tensor* dst) {
  const auto op = static_cast<UnaryOp>(dst->params[0]);
  if (static_cast<int32_t>(op) < 0 || op >= UnaryOp::Count) return false;
  const float alpha = dst->param_f32(1);
  const StridedLoop loop = make_strided_loop(dst, {dst->src[0]});
  if (dst->type != DType::F32 || !loop.dense_runs(0) || !is_float(loop.type[1]) ||
      !loop.dense_runs(1)) {
    return false;
  }
  parallel_runs(loop, ctx.threads, kRunChunk, [&](int64_t row, int64_t i0, int64_t n, float* tmp) {
    const float* x = load_run_f32(loop, 1, row, i0, n, tmp);
    HWY_DYNAMIC_DISPATCH(unary_run)
    (op, alpha, x, reinterpret_cast<float*>(loop.row_ptr(0, row)) + i0, n);
  });
  return true;
}

}  // namespace sd
#endif  // HWY_ONCE
