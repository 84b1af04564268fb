// Fast block dequantizers: GGUF blocks (and f16/bf16) to f32 rows, the input side of the
// CPU backend's quantized GEMM tiles.
//
// Highway kernels: each block is decoded in vectors of up to 16 values (one sub-block
// scale per vector), widening quant bytes straight to int32 lanes, so the work per output
// vector is one or two widening loads, a few shifts and masks, a conversion and a
// multiply(-add). Highway compiles this file once per x86 target (SSSE3, SSE4, AVX2,
// AVX-512) and picks the best one for the running CPU at the first call (runtime dispatch,
// as ARCHITECTURE.md asks of our SIMD kernels).
//
// Values are the reference dequantizers' (d * q, or d * q - m with the scale products
// formed first); the affine types use fused multiply-adds, which may differ from the
// reference's separate rounding in the last bit.

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/quant/dequantize.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <cstdint>
#include <cstring>
#include <utility>

#include "tensor/float16.h"
#include "tensor/quant/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace sd::quant {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Up to 16 float lanes, so that one vector never straddles two 16-value sub-blocks (the
// smallest unit with its own scale): 16 on AVX-512, 8 on AVX2, 4 on SSE4. Integer work is
// done in int32 lanes next to the floats; bytes are widened straight from memory.
using DF = hn::CappedTag<float, 16>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

HWY_INLINE VI LoadU8(const uint8_t* HWY_RESTRICT p) {
  const DI di;
  const hn::Rebind<uint8_t, DI> du8;
  return hn::PromoteTo(di, hn::LoadU(du8, p));
}

HWY_INLINE VI LoadI8(const int8_t* HWY_RESTRICT p) {
  const DI di;
  const hn::Rebind<int8_t, DI> di8;
  return hn::PromoteTo(di, hn::LoadU(di8, p));
}

HWY_INLINE VF ToFloat(VI v) {
  return hn::ConvertTo(DF(), v);
}

// Bit `first + lane` of `bits`, moved to bit 4 (the fifth bit of a 5-bit quant).
HWY_INLINE VI FifthBits(uint32_t bits, int first) {
  const DI di;
  const VI shifts = hn::Iota(di, first);
  const VI word = hn::Set(di, static_cast<int32_t>(bits));
  return hn::ShiftLeft<4>(
      hn::And(hn::BitCast(di, hn::BitCast(hn::RebindToUnsigned<DI>(), word) >>
                                  hn::BitCast(hn::RebindToUnsigned<DI>(), shifts)),
              hn::Set(di, 1)));
}

void DequantizeQ4_0(const BlockQ4_0* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF), eight = hn::Set(di, 8);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const VF d = hn::Set(df, fp16_to_f32(x[i].d));
    for (size_t l = 0; l < 16; l += N) {
      const VI b = LoadU8(x[i].qs + l);
      hn::StoreU(hn::Mul(ToFloat(hn::Sub(hn::And(b, mask), eight)), d), df, y + l);
      hn::StoreU(hn::Mul(ToFloat(hn::Sub(hn::ShiftRight<4>(b), eight)), d), df, y + 16 + l);
    }
  }
}

void DequantizeQ4_1(const BlockQ4_1* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const VF d = hn::Set(df, fp16_to_f32(x[i].d));
    const VF m = hn::Set(df, fp16_to_f32(x[i].m));
    for (size_t l = 0; l < 16; l += N) {
      const VI b = LoadU8(x[i].qs + l);
      hn::StoreU(hn::MulAdd(ToFloat(hn::And(b, mask)), d, m), df, y + l);
      hn::StoreU(hn::MulAdd(ToFloat(hn::ShiftRight<4>(b)), d, m), df, y + 16 + l);
    }
  }
}

void DequantizeQ5_0(const BlockQ5_0* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF), sixteen = hn::Set(di, 16);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const VF d = hn::Set(df, fp16_to_f32(x[i].d));
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (size_t l = 0; l < 16; l += N) {
      const VI b = LoadU8(x[i].qs + l);
      const int first = static_cast<int>(l);
      const VI lo = hn::Or(hn::And(b, mask), FifthBits(qh, first));
      const VI hi = hn::Or(hn::ShiftRight<4>(b), FifthBits(qh, first + 16));
      hn::StoreU(hn::Mul(ToFloat(hn::Sub(lo, sixteen)), d), df, y + l);
      hn::StoreU(hn::Mul(ToFloat(hn::Sub(hi, sixteen)), d), df, y + 16 + l);
    }
  }
}

void DequantizeQ5_1(const BlockQ5_1* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const VF d = hn::Set(df, fp16_to_f32(x[i].d));
    const VF m = hn::Set(df, fp16_to_f32(x[i].m));
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (size_t l = 0; l < 16; l += N) {
      const VI b = LoadU8(x[i].qs + l);
      const int first = static_cast<int>(l);
      const VI lo = hn::Or(hn::And(b, mask), FifthBits(qh, first));
      const VI hi = hn::Or(hn::ShiftRight<4>(b), FifthBits(qh, first + 16));
      hn::StoreU(hn::MulAdd(ToFloat(lo), d, m), df, y + l);
      hn::StoreU(hn::MulAdd(ToFloat(hi), d, m), df, y + 16 + l);
    }
  }
}

void DequantizeQ8_0(const BlockQ8_0* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const VF d = hn::Set(df, fp16_to_f32(x[i].d));
    for (size_t l = 0; l < 32; l += N) {
      hn::StoreU(hn::Mul(ToFloat(LoadI8(x[i].qs + l)), d), df, y + l);
    }
  }
}

void DequantizeQ2_K(const BlockQ2_K* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI three = hn::Set(di, 3);
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    // Byte l of group 32 * half + 16 * part holds values 128 half + 32 j + 16 part + l at
    // bit offset 2 j (sub-block 8 half + 2 j + part): one load feeds four output vectors.
    for (int half = 0; half < 2; ++half) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t* q = x[i].qs + 32 * half + 16 * part;
        for (size_t l = 0; l < 16; l += N) {
          const VI b = LoadU8(q + l);
          for (int j = 0; j < 4; ++j) {
            const uint8_t sc = x[i].scales[8 * half + 2 * j + part];
            const VF dl = hn::Set(df, d * static_cast<float>(sc & 0xF));
            const VF ml = hn::Set(df, dmin * static_cast<float>(sc >> 4));
            const VI v = hn::And(hn::ShiftRightSame(b, 2 * j), three);
            hn::StoreU(hn::MulSub(ToFloat(v), dl, ml), df, y + 128 * half + 32 * j + 16 * part + l);
          }
        }
      }
    }
  }
}

void DequantizeQ3_K(const BlockQ3_K* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI three = hn::Set(di, 3), one = hn::Set(di, 1), four = hn::Set(di, 4);
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = fp16_to_f32(x[i].d);
    float dl[16];
    for (int s = 0; s < 16; ++s) dl[s] = d * static_cast<float>(unpack_scale_q3_K(s, x[i].scales));
    // As q2_K for the low bits; the third bit of value 32 m + r is bit m of hmask[r].
    for (int half = 0; half < 2; ++half) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t* q = x[i].qs + 32 * half + 16 * part;
        const uint8_t* hm = x[i].hmask + 16 * part;
        for (size_t l = 0; l < 16; l += N) {
          const VI b = LoadU8(q + l);
          const VI h = LoadU8(hm + l);
          for (int j = 0; j < 4; ++j) {
            const VI low = hn::And(hn::ShiftRightSame(b, 2 * j), three);
            const VI high = hn::And(hn::ShiftRightSame(h, 4 * half + j), one);
            const VI v = hn::Sub(hn::Or(low, hn::ShiftLeft<2>(high)), four);
            const VF scale = hn::Set(df, dl[8 * half + 2 * j + part]);
            hn::StoreU(hn::Mul(ToFloat(v), scale), df, y + 128 * half + 32 * j + 16 * part + l);
          }
        }
      }
    }
  }
}

// Scale and min of sub-block j of a q4_K/q5_K block (6-bit packed), as vectors.
HWY_INLINE std::pair<VF, VF> SubBlockScale(DF df, float d, float dmin, const uint8_t* scales,
                                           int j) {
  uint8_t sc, m;
  unpack_scale_min_k4(j, scales, &sc, &m);
  return {hn::Set(df, d * static_cast<float>(sc)), hn::Set(df, dmin * static_cast<float>(m))};
}

void DequantizeQ4_K(const BlockQ4_K* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    for (int g = 0; g < 4; ++g, y += 64) {
      const auto [d1, m1] = SubBlockScale(df, d, dmin, x[i].scales, 2 * g);
      const auto [d2, m2] = SubBlockScale(df, d, dmin, x[i].scales, 2 * g + 1);
      const uint8_t* q = x[i].qs + 32 * g;
      for (size_t l = 0; l < 32; l += N) {
        const VI b = LoadU8(q + l);
        hn::StoreU(hn::MulSub(ToFloat(hn::And(b, mask)), d1, m1), df, y + l);
        hn::StoreU(hn::MulSub(ToFloat(hn::ShiftRight<4>(b)), d2, m2), df, y + 32 + l);
      }
    }
  }
}

void DequantizeQ5_K(const BlockQ5_K* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF), one = hn::Set(di, 1);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    for (int g = 0; g < 4; ++g, y += 64) {
      const auto [d1, m1] = SubBlockScale(df, d, dmin, x[i].scales, 2 * g);
      const auto [d2, m2] = SubBlockScale(df, d, dmin, x[i].scales, 2 * g + 1);
      const uint8_t* q = x[i].qs + 32 * g;
      for (size_t l = 0; l < 32; l += N) {
        const VI b = LoadU8(q + l);
        const VI h = LoadU8(x[i].qh + l);
        const VI lo =
            hn::Or(hn::And(b, mask), hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * g), one)));
        const VI hi = hn::Or(hn::ShiftRight<4>(b),
                             hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * g + 1), one)));
        hn::StoreU(hn::MulSub(ToFloat(lo), d1, m1), df, y + l);
        hn::StoreU(hn::MulSub(ToFloat(hi), d2, m2), df, y + 32 + l);
      }
    }
  }
}

void DequantizeQ6_K(const BlockQ6_K* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VI mask = hn::Set(di, 0xF), three = hn::Set(di, 3), bias = hn::Set(di, 32);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      // Value 32 k + l of this half: low nibble of ql[l] (k = 0), ql[l + 32] (k = 1), high
      // nibbles for k = 2, 3; top bits at offset 2 k of qh[l]; scale sc[2 k + l / 16].
      for (size_t l = 0; l < 32; l += N) {
        const VI lo0 = LoadU8(ql + l);
        const VI lo1 = LoadU8(ql + 32 + l);
        const VI hb = LoadU8(qh + l);
        const VI q0 = hn::Or(hn::And(lo0, mask), hn::ShiftLeft<4>(hn::And(hb, three)));
        const VI q1 =
            hn::Or(hn::And(lo1, mask), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hb), three)));
        const VI q2 =
            hn::Or(hn::ShiftRight<4>(lo0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hb), three)));
        const VI q3 = hn::Or(hn::ShiftRight<4>(lo1), hn::ShiftLeft<4>(hn::ShiftRight<6>(hb)));
        const int s = static_cast<int>(l / 16);
        const VI qs[4] = {q0, q1, q2, q3};
        for (int k = 0; k < 4; ++k) {
          const VF dl = hn::Set(df, d * static_cast<float>(sc[2 * k + s]));
          hn::StoreU(hn::Mul(ToFloat(hn::Sub(qs[k], bias)), dl), df, y + 32 * k + l);
        }
      }
    }
  }
}

void DequantizeQ8_K(const BlockQ8_K* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t nb) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const VF d = hn::Set(df, x[i].d);
    for (size_t l = 0; l < 256; l += N)
      hn::StoreU(hn::Mul(ToFloat(LoadI8(x[i].qs + l)), d), df, y + l);
  }
}

void DequantizeF16(const uint16_t* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto* xh = reinterpret_cast<const hwy::float16_t*>(x);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, xh + i)), df, y + i);
  for (; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

void DequantizeBF16(const uint16_t* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  // bf16 is the top half of an f32: widen and shift.
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, x + i)));
    hn::StoreU(hn::BitCast(df, bits), df, y + i);
  }
  for (; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(y + i, &bits, sizeof(float));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sd::quant
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd::quant {

HWY_EXPORT(DequantizeQ4_0);
HWY_EXPORT(DequantizeQ4_1);
HWY_EXPORT(DequantizeQ5_0);
HWY_EXPORT(DequantizeQ5_1);
HWY_EXPORT(DequantizeQ8_0);
HWY_EXPORT(DequantizeQ2_K);
HWY_EXPORT(DequantizeQ3_K);
HWY_EXPORT(DequantizeQ4_K);
HWY_EXPORT(DequantizeQ5_K);
HWY_EXPORT(DequantizeQ6_K);
HWY_EXPORT(DequantizeQ8_K);
HWY_EXPORT(DequantizeF16);
HWY_EXPORT(DequantizeBF16);

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ4_0)(x, y, nb);
}
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ4_1)(x, y, nb);
}
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ5_0)(x, y, nb);
}
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ5_1)(x, y, nb);
}
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ8_0)(x, y, nb);
}
void dequantize_q2_K(const BlockQ2_K* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ2_K)(x, y, nb);
}
void dequantize_q3_K(const BlockQ3_K* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ3_K)(x, y, nb);
}
void dequantize_q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ4_K)(x, y, nb);
}
void dequantize_q5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ5_K)(x, y, nb);
}
void dequantize_q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ6_K)(x, y, nb);
}
void dequantize_q8_K(const BlockQ8_K* x, float* y, int64_t nb) {
  HWY_DYNAMIC_DISPATCH(DequantizeQ8_K)(x, y, nb);
}
void dequantize_f16(const uint16_t* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeF16)(x, y, n);
}
void dequantize_bf16(const uint16_t* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DequantizeBF16)(x, y, n);
}

}  // namespace sd::quant
#endif  // HWY_ONCE
