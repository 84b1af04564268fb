#include "io/file_dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "io/io_test_util.h"

namespace sd::io {
namespace {

// Independent decoders, written from the OCP FP8 spec's tables rather than from the
// implementation's formulas: value = (-1)^s * 2^(e - bias) * (1 + m / 2^M), subnormals
// 2^(1 - bias) * (m / 2^M).
double ocp_decode(uint8_t v, int exp_bits, int man_bits, bool e4m3) {
  int bias = (1 << (exp_bits - 1)) - 1;
  int s = v >> 7;
  int e = (v >> man_bits) & ((1 << exp_bits) - 1);
  int m = v & ((1 << man_bits) - 1);
  int max_e = (1 << exp_bits) - 1;
  if (e4m3 && e == max_e && m == (1 << man_bits) - 1) return std::nan("");
  if (!e4m3 && e == max_e) return m == 0 ? (s ? -INFINITY : INFINITY) : std::nan("");
  double mag = e == 0 ? std::ldexp(m / double(1 << man_bits), 1 - bias)
                      : std::ldexp(1.0 + m / double(1 << man_bits), e - bias);
  return s ? -mag : mag;
}

// IEEE half from bits, again independently of the engine's conversions.
double half_decode(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  if (e == 31) return m ? std::nan("") : (s ? -INFINITY : INFINITY);
  double mag = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, e - 15);
  return s ? -mag : mag;
}

void expect_same(double want, float got, int v) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "byte " << v;
  } else {
    EXPECT_EQ(static_cast<double>(got), want) << "byte " << v;  // exact: every value fits f32
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << "byte " << v;
  }
}

TEST(FileDType, F8E4M3EveryValueExact) {
  for (int v = 0; v < 256; ++v) expect_same(ocp_decode(v, 4, 3, true), f8_e4m3_to_f32(v), v);
  EXPECT_EQ(f8_e4m3_to_f32(0x7E), 448.0f);  // largest finite
  EXPECT_EQ(f8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(f8_e4m3_to_f32(0x78), 256.0f);                // no infinity: e=15 is finite
  EXPECT_TRUE(std::isnan(f8_e4m3_to_f32(0xFF)));
}

TEST(FileDType, F8E5M2EveryValueExact) {
  for (int v = 0; v < 256; ++v) expect_same(ocp_decode(v, 5, 2, false), f8_e5m2_to_f32(v), v);
  EXPECT_EQ(f8_e5m2_to_f32(0x7B), 57344.0f);  // largest finite
  EXPECT_EQ(f8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(f8_e5m2_to_f32(0xFC)) && f8_e5m2_to_f32(0xFC) < 0);
}

TEST(FileDType, F8ToF16IsExact) {
  uint8_t src[256];
  for (int i = 0; i < 256; ++i) src[i] = static_cast<uint8_t>(i);
  for (FileDType t : {FileDType::F8_E4M3, FileDType::F8_E5M2}) {
    uint16_t h[256];
    float f[256];
    ASSERT_FALSE(convert_elements(t, src, DType::F16, h, 256));
    convert_to_f32(t, src, f, 256);
    for (int i = 0; i < 256; ++i) expect_same(half_decode(h[i]), f[i], i);
  }
}

TEST(FileDType, EngineTypesForConversion) {
  EXPECT_EQ(engine_dtype_for(FileDType::F64), DType::F32);
  EXPECT_EQ(engine_dtype_for(FileDType::I64), DType::I32);
  EXPECT_EQ(engine_dtype_for(FileDType::Bool), DType::I32);
  EXPECT_EQ(engine_dtype_for(FileDType::F8_E4M3), DType::F16);
  EXPECT_EQ(file_dtype_size(FileDType::U16), 2u);
  EXPECT_EQ(file_dtype_name(FileDType::F8_E5M2), "F8_E5M2");
}

TEST(FileDType, IntegersToF32AndI32) {
  int64_t i64[] = {-5, 0, 77, int64_t{1} << 40};
  float f[4];
  convert_to_f32(FileDType::I64, i64, f, 4);
  EXPECT_EQ(f[0], -5.0f);
  EXPECT_EQ(f[3], std::ldexp(1.0f, 40));
  int32_t out[4];
  auto bad = convert_elements(FileDType::I64, i64, DType::I32, out, 4);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(*bad, 3u);  // 2^40 does not fit
  ASSERT_FALSE(convert_elements(FileDType::I64, i64, DType::I32, out, 3));
  EXPECT_EQ(out[0], -5);
  EXPECT_EQ(out[2], 77);

  uint64_t u64[] = {1, uint64_t{1} << 31};
  EXPECT_EQ(convert_elements(FileDType::U64, u64, DType::I32, out, 2).value_or(99), 1u);
  uint32_t u32[] = {4000000000u};
  EXPECT_TRUE(convert_elements(FileDType::U32, u32, DType::I32, out, 1).has_value());
  int16_t i16[] = {-32768, 32767};
  ASSERT_FALSE(convert_elements(FileDType::I16, i16, DType::I32, out, 2));
  EXPECT_EQ(out[0], -32768);
  uint16_t u16[] = {65535};
  ASSERT_FALSE(convert_elements(FileDType::U16, u16, DType::I32, out, 1));
  EXPECT_EQ(out[0], 65535);
  int8_t i8[] = {-128};
  ASSERT_FALSE(convert_elements(FileDType::I8, i8, DType::I32, out, 1));
  EXPECT_EQ(out[0], -128);
  uint8_t u8[] = {255, 0, 2};
  ASSERT_FALSE(convert_elements(FileDType::U8, u8, DType::I32, out, 1));
  EXPECT_EQ(out[0], 255);
  ASSERT_FALSE(convert_elements(FileDType::Bool, u8, DType::I32, out, 3));
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 0);
  EXPECT_EQ(out[2], 1);
}

TEST(FileDType, F64ToF32RoundsToNearest) {
  double d[] = {1.0 + std::ldexp(1.0, -30), -0.0, 1e300, 0.1};
  float f[4];
  convert_to_f32(FileDType::F64, d, f, 4);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_TRUE(std::signbit(f[1]));
  EXPECT_TRUE(std::isinf(f[2]));
  EXPECT_EQ(f[3], 0.1f);
}

TEST(FileDType, UnsupportedTargetIsAnError) {
  uint8_t b[1] = {0};
  uint16_t out[1];
  EXPECT_THROW(convert_elements(FileDType::I8, b, DType::F16, out, 1), Error);
  EXPECT_THROW(convert_to_f32(FileDType::None, b, nullptr, 1), Error);
}

}  // namespace
}  // namespace sd::io
