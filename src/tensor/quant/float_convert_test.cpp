// f32 <-> f16 / bf16 row conversions through quant.h: round-to-nearest-even (ties to even
// at every precision, including f16 subnormals), overflow to infinity, NaNs stay NaN.
// Each case runs inside rows longer than a SIMD vector so both the vector body and the
// scalar tail of the kernels see it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/quant/quant.h"

namespace sd {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  float in;
  uint16_t bits;
};

// Converts every case at every position of a 37-value row (vector body and tail).
void check_to(DType type, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    for (int pos : {0, 5, 17, 36}) {
      std::vector<float> row(37, 0.0f);
      row[pos] = c.in;
      std::vector<uint16_t> out(37);
      quantize_row(type, row.data(), out.data(), 37);
      EXPECT_EQ(out[pos], c.bits) << dtype_name(type) << " of " << c.in << " at " << pos;
    }
  }
}

TEST(Float16Convert, RoundsToNearestEven) {
  const float one_ulp = std::ldexp(1.0f, -10);  // f16 spacing at 1.0
  check_to(DType::F16, {
                           {1.0f, 0x3C00},
                           {-2.0f, 0xC000},
                           {0.0f, 0x0000},
                           {-0.0f, 0x8000},
                           {1.0f + one_ulp / 2, 0x3C00},      // tie -> even (down)
                           {1.0f + 3 * one_ulp / 2, 0x3C02},  // tie -> even (up)
                           {1.0f + one_ulp / 2 + std::ldexp(1.0f, -20), 0x3C01},
                           {65504.0f, 0x7BFF},               // largest finite
                           {65519.0f, 0x7BFF},               // below the tie: finite
                           {65520.0f, 0x7C00},               // tie with 2^16 -> inf
                           {std::ldexp(1.0f, -24), 0x0001},  // smallest subnormal
                           {std::ldexp(1.0f, -25), 0x0000},  // subnormal tie -> 0
                           {std::ldexp(3.0f, -25), 0x0002},  // subnormal tie -> even
                           {std::ldexp(1.0f, -14), 0x0400},  // smallest normal
                       });
}

TEST(Float16Convert, InfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  check_to(DType::F16, {{inf, 0x7C00}, {-inf, 0xFC00}, {1e10f, 0x7C00}, {-1e10f, 0xFC00}});
  std::vector<float> row(37, std::numeric_limits<float>::quiet_NaN());
  row[3] = from_bits(0x7F800001);  // signalling NaN with the lowest payload bit
  std::vector<uint16_t> out(37);
  quantize_row(DType::F16, row.data(), out.data(), 37);
  for (uint16_t h : out) {
    EXPECT_EQ(h & 0x7C00, 0x7C00) << std::hex << h;
    EXPECT_NE(h & 0x03FF, 0) << std::hex << h;  // NaN, not infinity
  }
}

TEST(Float16Convert, DequantizeSpecialValues) {
  const std::vector<uint16_t> bits = {0x3C00, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001,
                                      0x03FF, 0x0400, 0x7BFF, 0xC000, 0x3555};
  std::vector<uint16_t> row;
  for (int rep = 0; rep < 4; ++rep) row.insert(row.end(), bits.begin(), bits.end());
  std::vector<float> y(row.size());
  dequantize_row(DType::F16, row.data(), y.data(), static_cast<int64_t>(row.size()));
  for (size_t i = 0; i < row.size(); i += bits.size()) {
    EXPECT_EQ(y[i + 0], 1.0f);
    EXPECT_TRUE(y[i + 1] == 0.0f && std::signbit(y[i + 1]));
    EXPECT_EQ(y[i + 2], std::numeric_limits<float>::infinity());
    EXPECT_EQ(y[i + 3], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(y[i + 4]));
    EXPECT_EQ(y[i + 5], std::ldexp(1.0f, -24));
    EXPECT_EQ(y[i + 6], std::ldexp(1023.0f, -24));
    EXPECT_EQ(y[i + 7], std::ldexp(1.0f, -14));
    EXPECT_EQ(y[i + 8], 65504.0f);
    EXPECT_EQ(y[i + 9], -2.0f);
    EXPECT_EQ(y[i + 10], 0.33325195f);
  }
}

TEST(BFloat16Convert, RoundsToNearestEven) {
  check_to(DType::BF16, {
                            {1.0f, 0x3F80},
                            {-0.0f, 0x8000},
                            {from_bits(0x3F808000), 0x3F80},  // tie -> even (down)
                            {from_bits(0x3F818000), 0x3F82},  // tie -> even (up)
                            {from_bits(0x3F808001), 0x3F81},  // above the tie
                            {from_bits(0x3F807FFF), 0x3F80},  // below the tie
                            {from_bits(0x7F7FFFFF), 0x7F80},  // rounds up to infinity
                            {from_bits(0x00010000), 0x0001},  // subnormals are kept
                        });
}

TEST(BFloat16Convert, InfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  check_to(DType::BF16, {{inf, 0x7F80}, {-inf, 0xFF80}});
  // NaNs stay NaN and become quiet, even those whose rounding would carry into the sign
  // or exponent.
  check_to(DType::BF16, {{from_bits(0x7F800001), 0x7FC0},
                         {from_bits(0x7FFFFFFF), 0x7FFF},
                         {from_bits(0xFF800001), 0xFFC0}});
}

TEST(BFloat16Convert, DequantizeIsExactWidening) {
  std::vector<uint16_t> row(41);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint16_t>(0x3F80 + 97 * i);
  row[7] = 0x7FC0;
  std::vector<float> y(row.size());
  dequantize_row(DType::BF16, row.data(), y.data(), static_cast<int64_t>(row.size()));
  for (size_t i = 0; i < row.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &y[i], 4);
    EXPECT_EQ(u, static_cast<uint32_t>(row[i]) << 16);
  }
}

TEST(F32Convert, IsACopy) {
  std::vector<float> x = {1.5f, -0.0f, std::numeric_limits<float>::infinity(), 3e-42f};
  std::vector<float> q(4), y(4);
  quantize_row(DType::F32, x.data(), q.data(), 4);
  dequantize_row(DType::F32, q.data(), y.data(), 4);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), 16), 0);
}

}  // namespace
}  // namespace sd
