// Vector loops and math shared by the CPU backend's Highway kernels. Like every Highway
// "-inl.h" header it is included once per SIMD target (from inside foreach_target.h's
// re-inclusion of a kernel file), hence the toggling include guard instead of #pragma once.
#if defined(SD_BACKEND_CPU_SIMD_LOOPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SD_BACKEND_CPU_SIMD_LOOPS_INL_H_
#undef SD_BACKEND_CPU_SIMD_LOOPS_INL_H_
#else
#define SD_BACKEND_CPU_SIMD_LOOPS_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The last partial vector goes through a zero-padded stack copy, so tails run the same
// vector code as the body (same rounding) and never read past the end of a row.
constexpr size_t kMaxFloatLanes = HWY_MAX_BYTES / sizeof(float);

// y[i] = fn(d, x[i]); x and y may be the same array.
template <class Fn>
HWY_INLINE void map_unary(const float* x, float* y, int64_t n, const Fn& fn) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const VF v0 = hn::LoadU(d, x + i), v1 = hn::LoadU(d, x + i + N);
    hn::StoreU(fn(d, v0), d, y + i);
    hn::StoreU(fn(d, v1), d, y + i + N);
  }
  for (; i + N <= n; i += N) hn::StoreU(fn(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    HWY_ALIGN float buf[kMaxFloatLanes] = {};
    const size_t rest = static_cast<size_t>(n - i);
    std::memcpy(buf, x + i, rest * sizeof(float));
    hn::Store(fn(d, hn::Load(d, buf)), d, buf);
    std::memcpy(y + i, buf, rest * sizeof(float));
  }
}

// y[i] = fn(a[i], b[i]); a null pointer means "every value is the scalar"; y may alias a or b.
template <class Fn>
HWY_INLINE void map_binary(const float* a, float a_scalar, const float* b, float b_scalar, float* y,
                           int64_t n, const Fn& fn) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF as = hn::Set(d, a_scalar), bs = hn::Set(d, b_scalar);
  auto load_a = [&](int64_t i) { return a ? hn::LoadU(d, a + i) : as; };
  auto load_b = [&](int64_t i) { return b ? hn::LoadU(d, b + i) : bs; };
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(fn(load_a(i), load_b(i)), d, y + i);
  if (i < n) {
    HWY_ALIGN float ba[kMaxFloatLanes] = {}, bb[kMaxFloatLanes] = {};
    const size_t rest = static_cast<size_t>(n - i);
    if (a) std::memcpy(ba, a + i, rest * sizeof(float));
    if (b) std::memcpy(bb, b + i, rest * sizeof(float));
    const VF va = a ? hn::Load(d, ba) : as, vb = b ? hn::Load(d, bb) : bs;
    hn::Store(fn(va, vb), d, ba);
    std::memcpy(y + i, ba, rest * sizeof(float));
  }
}

// e^x over the whole float range: Highway's Exp is specified up to x = 104, and a NaN
// must stay NaN rather than become an arbitrary power of two.
HWY_INLINE VF exp_f32(DF d, VF x) {
  const VF clamped = hn::Min(x, hn::Set(d, 100.0f));  // e^100 already rounds to +inf
  const VF e = hn::Exp(d, clamped);
  return hn::IfThenElse(hn::Eq(x, x), e, x);
}

// 1 / (1 + e^-x), stable at both ends: e^-x overflows to +inf for x < -88 and the
// quotient is then 0, which is the correctly rounded answer.
HWY_INLINE VF sigmoid_f32(DF d, VF x) {
  const VF one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, exp_f32(d, hn::Neg(x))));
}

// Sum of the lanes of a f32 row, accumulated in several vectors to shorten the
// dependency chain.
HWY_INLINE float sum_row(const float* x, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, hn::LoadU(d, x + i));
    s1 = hn::Add(s1, hn::LoadU(d, x + i + N));
    s2 = hn::Add(s2, hn::LoadU(d, x + i + 2 * N));
    s3 = hn::Add(s3, hn::LoadU(d, x + i + 3 * N));
  }
  for (; i + N <= n; i += N) s0 = hn::Add(s0, hn::LoadU(d, x + i));
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) s += x[i];
  return s;
}

}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#endif  // SD_BACKEND_CPU_SIMD_LOOPS_INL_H_
