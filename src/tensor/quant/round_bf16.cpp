// f32 -> bf16 rows, round-to-nearest-even on the upper 16 bits with NaNs kept quiet (the
// rounding of tensor/float16.h's f32_to_bf16, which the GGUF reference writes), in vectors:
// converting a model to bf16 on load (--type bf16) ran this value by value, about a second
// of a 512x512 SD 1.5 run's first step. Integer arithmetic, not AVX512_BF16's conversion
// instruction, which flushes subnormal inputs to zero and would change bytes.
//
// Highway compiles this file once per x86 target and picks the best one at the first call.

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/quant/round_bf16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <cstdint>

#include "tensor/float16.h"
#include "tensor/quant/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace sd::quant {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

void RoundToBF16(const float* HWY_RESTRICT x, uint16_t* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<uint32_t> du;
  const hn::Rebind<uint16_t, decltype(du)> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(du));
  const auto magnitude = hn::Set(du, 0x7fffffffu), infinity = hn::Set(du, 0x7f800000u);
  const auto half = hn::Set(du, 0x7fffu), one = hn::Set(du, 1u), quiet = hn::Set(du, 64u);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto u = hn::LoadU(du, reinterpret_cast<const uint32_t*>(x + i));
    const auto upper = hn::ShiftRight<16>(u);
    const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(half, hn::And(upper, one))));
    const auto nan = hn::Gt(hn::And(u, magnitude), infinity);
    hn::StoreU(hn::TruncateTo(du16, hn::IfThenElse(nan, hn::Or(upper, quiet), rounded)), du16,
               y + i);
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace sd::quant
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd::quant {

HWY_EXPORT(RoundToBF16);

void convert_f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RoundToBF16)(x, y, n);
}

}  // namespace sd::quant
#endif  // HWY_ONCE
