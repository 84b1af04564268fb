// Quantizer and dequantizer behaviour that needs no reference files: round-trip error
// bounds per type, the block layouts (against a per-element decoder written from the GGUF
// specification), row parallelism and argument errors. Bit-exactness with the reference
// implementation is in quant_golden_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "test_support.h"

namespace sd {
namespace {

const DType kAllConvertible[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                 DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                 DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

std::string type_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

std::vector<float> normal_data(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> round_trip(DType type, const std::vector<float>& x, int64_t n_per_row,
                              const float* imatrix = nullptr) {
  const int64_t nrows = static_cast<int64_t>(x.size()) / n_per_row;
  std::vector<uint8_t> q(row_size(type, n_per_row) * static_cast<size_t>(nrows));
  quantize_rows(type, x.data(), q.data(), nrows, n_per_row, imatrix);
  std::vector<float> y(x.size());
  dequantize_row(type, q.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

// ---- Round trip ----------------------------------------------------------------------------

// RMS error relative to the RMS of N(0, 1) data (16 rows of 4096), measured values times
// about 1.2. A wrong scale, nibble order or bit position gives errors of 30% and more.
// The weighted column is for an all-ones importance matrix (stable-diffusion.cpp's convert);
// for types without a weighted algorithm it repeats the plain bound.
struct RoundTripBound {
  DType type;
  double plain;
  double weighted;
};
constexpr RoundTripBound kRoundTripBounds[] = {
    {DType::F32, 0.0, 0.0},       {DType::F16, 2.5e-4, 2.5e-4},  {DType::BF16, 2.0e-3, 2.0e-3},
    {DType::Q4_0, 0.104, 0.099},  {DType::Q4_1, 0.095, 0.085},   {DType::Q5_0, 0.052, 0.049},
    {DType::Q5_1, 0.046, 0.041},  {DType::Q8_0, 0.0065, 0.0065}, {DType::Q2_K, 0.36, 0.33},
    {DType::Q3_K, 0.182, 0.175},  {DType::Q4_K, 0.087, 0.086},   {DType::Q5_K, 0.044, 0.043},
    {DType::Q6_K, 0.0215, 0.021}, {DType::Q8_K, 0.0085, 0.0085},
};

const RoundTripBound& round_trip_bound(DType t) {
  for (const RoundTripBound& b : kRoundTripBounds) {
    if (b.type == t) return b;
  }
  throw std::runtime_error("no bound");
}

class QuantRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, NormalDataWithinBound) {
  const DType type = GetParam();
  const int64_t n_per_row = 4096;
  const std::vector<float> x = normal_data(16 * n_per_row, 1234);
  const double err = test::relative_rmse(x, round_trip(type, x, n_per_row));
  EXPECT_LE(err, round_trip_bound(type).plain);
  RecordProperty("plain", std::to_string(err));

  const std::vector<float> ones(n_per_row, 1.0f);
  const double werr = test::relative_rmse(x, round_trip(type, x, n_per_row, ones.data()));
  EXPECT_LE(werr, round_trip_bound(type).weighted);
  RecordProperty("weighted", std::to_string(werr));
}

TEST_P(QuantRoundTrip, PowerOfTwoScalingIsExact) {
  // Scaling the input by a power of two scales every stored half scale exactly (while it
  // stays a normal half), so the dequantized output scales exactly too.
  const DType type = GetParam();
  const int64_t n = 1024;
  const std::vector<float> x = normal_data(n, 77);
  std::vector<float> x4(x);
  for (float& v : x4) v *= 4.0f;
  const std::vector<float> y = round_trip(type, x, n);
  const std::vector<float> y4 = round_trip(type, x4, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y4[i], 4.0f * y[i]) << "at " << i;
}

TEST_P(QuantRoundTrip, ZerosStayZero) {
  const DType type = GetParam();
  const std::vector<float> x(512, 0.0f);
  for (float v : round_trip(type, x, 512)) ASSERT_EQ(v, 0.0f);
  const std::vector<float> ones(512, 1.0f);
  for (float v : round_trip(type, x, 512, ones.data())) ASSERT_EQ(v, 0.0f);
}

TEST_P(QuantRoundTrip, RowsMatchSingleRowCalls) {
  // quantize_rows runs rows in parallel; the bytes must not depend on it.
  const DType type = GetParam();
  const int64_t n_per_row = 512, nrows = 37;
  const std::vector<float> x = normal_data(n_per_row * nrows, 99);
  const size_t rs = row_size(type, n_per_row);
  std::vector<uint8_t> all(rs * nrows), one(rs * nrows);
  EXPECT_EQ(quantize_rows(type, x.data(), all.data(), nrows, n_per_row), all.size());
  for (int64_t r = 0; r < nrows; ++r) {
    quantize_row(type, x.data() + r * n_per_row, one.data() + r * rs, n_per_row);
  }
  EXPECT_EQ(all, one);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantRoundTrip, ::testing::ValuesIn(kAllConvertible), type_name);

TEST(QuantWeighted, ImportanceShiftsErrorToWeightedColumns) {
  // With weight 100 on even columns and 1 on odd ones, the even columns must come out
  // more accurate than with uniform weights, for every type that uses the weights.
  const int64_t n_per_row = 1024;
  const std::vector<float> x = normal_data(8 * n_per_row, 5);
  std::vector<float> imatrix(n_per_row);
  for (int64_t i = 0; i < n_per_row; ++i) imatrix[i] = i % 2 == 0 ? 100.0f : 1.0f;
  const std::vector<float> ones(n_per_row, 1.0f);
  auto even_error = [&](const std::vector<float>& y) {
    double e = 0;
    for (size_t i = 0; i < x.size(); i += 2) e += (y[i] - x[i]) * (y[i] - x[i]);
    return e;
  };
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                     DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const double uniform = even_error(round_trip(type, x, n_per_row, ones.data()));
    const double weighted = even_error(round_trip(type, x, n_per_row, imatrix.data()));
    EXPECT_LT(weighted, 0.95 * uniform);
  }
}

// ---- Layout: a per-element decoder written from the GGUF specification -----------------

float half_bits_to_float(const uint8_t* p) {
  float f;
  dequantize_row(DType::F16, p, &f, 1);
  return f;
}

// Value i of one block at `b`, decoded one element at a time.
float spec_element(DType type, const uint8_t* b, int i) {
  auto h = [&](int off) { return half_bits_to_float(b + off); };
  auto nibble = [](const uint8_t* qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; };
  auto bit = [](const uint8_t* p, int k) { return (p[k / 8] >> (k % 8)) & 1; };
  switch (type) {
    case DType::Q4_0:
      return h(0) * static_cast<float>(nibble(b + 2, i) - 8);
    case DType::Q4_1:
      return h(0) * static_cast<float>(nibble(b + 4, i)) + h(2);
    case DType::Q5_0:
      return h(0) * static_cast<float>((nibble(b + 6, i) | (bit(b + 2, i) << 4)) - 16);
    case DType::Q5_1:
      return h(0) * static_cast<float>(nibble(b + 8, i) | (bit(b + 4, i) << 4)) + h(2);
    case DType::Q8_0:
      return h(0) * static_cast<float>(static_cast<int8_t>(b[2 + i]));
    case DType::Q2_K: {
      // scales[16] | qs[64] | d | dmin; 2-bit value i: byte 32 * (i / 128) + i % 32,
      // shift 2 * ((i % 128) / 32).
      const uint8_t sc = b[i / 16];
      const int q = (b[16 + 32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
      return h(80) * static_cast<float>(sc & 15) * static_cast<float>(q) -
             h(82) * static_cast<float>(sc >> 4);
    }
    case DType::Q3_K: {
      // hmask[32] | qs[64] | scales[12] | d
      const int low = (b[32 + 32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
      const int high = (b[i % 32] >> (i / 32)) & 1;
      const int s = i / 16;
      const uint8_t* sc = b + 96;
      const int sc_low = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
      const int sc_high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
      const int scale = (sc_low | (sc_high << 4)) - 32;
      return h(108) * static_cast<float>(scale) * static_cast<float>(low + 4 * high - 4);
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      // d | dmin | scales[12] | (q5_K: qh[32]) | qs[128]
      const uint8_t* s = b + 4;
      const int sub = i / 32;
      int sc, m;
      if (sub < 4) {
        sc = s[sub] & 63;
        m = s[sub + 4] & 63;
      } else {
        sc = (s[sub + 4] & 15) | ((s[sub - 4] >> 6) << 4);
        m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
      }
      const bool q5 = type == DType::Q5_K;
      const uint8_t* qs = b + (q5 ? 48 : 16);
      const int g = i / 64, r = i % 64;
      int q = r < 32 ? qs[32 * g + r] & 15 : qs[32 * g + r - 32] >> 4;
      if (q5) q |= ((b[16 + r % 32] >> (2 * g + r / 32)) & 1) << 4;
      return h(0) * static_cast<float>(sc) * static_cast<float>(q) - h(2) * static_cast<float>(m);
    }
    case DType::Q6_K: {
      // ql[128] | qh[64] | scales[16] (int8) | d
      const int half = i / 128, r = i % 128, k = r / 32, l = r % 32;
      const int low = (b[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
      const int high = (b[128 + 32 * half + l] >> (2 * k)) & 3;
      const auto sc = static_cast<int8_t>(b[192 + i / 16]);
      return h(208) * static_cast<float>(sc) * static_cast<float>((low | (high << 4)) - 32);
    }
    case DType::Q8_K: {
      float d;
      std::memcpy(&d, b, 4);
      return d * static_cast<float>(static_cast<int8_t>(b[4 + i]));
    }
    default:
      return NAN;
  }
}

// Byte offsets of the half-float scale fields of each block type, which random bytes must
// not turn into NaN or infinity.
std::vector<int> half_fields(DType type) {
  switch (type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q2_K:
      return {80, 82};
    case DType::Q3_K:
      return {108};
    case DType::Q6_K:
      return {208};
    default:
      return {};
  }
}

class QuantLayout : public ::testing::TestWithParam<DType> {};

// The dequantizers are compiled for several SIMD targets and the best one runs; check each
// one this CPU can run, restoring the normal choice afterwards.
std::vector<int64_t> runnable_simd_targets() {
  std::vector<int64_t> out;
  for (int64_t t : {int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SSE4}, int64_t{HWY_SSSE3}}) {
    if (hwy::SupportedTargets() & t) out.push_back(t);
  }
  return out;
}

struct RestoreSimdTargets {
  ~RestoreSimdTargets() { hwy::SetSupportedTargetsForTest(0); }
};

TEST_P(QuantLayout, DequantizeMatchesSpecOnRandomBlocks) {
  const DType type = GetParam();
  const int64_t bs = block_size(type);
  const size_t ts = type_size(type);
  const int nblocks = 64;
  std::mt19937 rng(42);
  std::vector<uint8_t> bytes(ts * nblocks);
  for (uint8_t& c : bytes) c = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale_dist(-2.0f, 2.0f);
  for (int k = 0; k < nblocks; ++k) {
    uint8_t* blk = bytes.data() + k * ts;
    for (int off : half_fields(type)) {
      const float s = scale_dist(rng);
      quantize_row(DType::F16, &s, blk + off, 1);
    }
    if (type == DType::Q8_K) {
      const float d = scale_dist(rng);
      std::memcpy(blk, &d, 4);
    }
  }
  std::vector<float> want(static_cast<size_t>(bs) * nblocks);
  for (int k = 0; k < nblocks; ++k) {
    for (int i = 0; i < bs; ++i) want[k * bs + i] = spec_element(type, bytes.data() + k * ts, i);
  }

  RestoreSimdTargets restore;
  for (int64_t target : runnable_simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> fast(want.size());
    dequantize_row(type, bytes.data(), fast.data(), static_cast<int64_t>(fast.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      // The fast kernels may fuse multiply-adds: allow a few ulps of the terms' size.
      const float tol = 1e-6f * (std::fabs(want[i]) + 64.0f);
      ASSERT_NEAR(fast[i], want[i], tol) << "block " << i / bs << " value " << i % bs;
    }
  }
}

TEST(QuantLayout, FloatRowsOnEverySimdTarget) {
  std::vector<uint16_t> h(100), b(100);
  const std::vector<float> x = normal_data(100, 8);
  quantize_row(DType::F16, x.data(), h.data(), 100);
  quantize_row(DType::BF16, x.data(), b.data(), 100);
  RestoreSimdTargets restore;
  for (int64_t target : runnable_simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> yh(100), yb(100);
    dequantize_row(DType::F16, h.data(), yh.data(), 100);
    dequantize_row(DType::BF16, b.data(), yb.data(), 100);
    for (int i = 0; i < 100; ++i) {
      EXPECT_NEAR(yh[i], x[i], 1e-3f * std::fabs(x[i]));
      EXPECT_NEAR(yb[i], x[i], 8e-3f * std::fabs(x[i]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantLayout,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                           DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::Q8_K),
                         type_name);

TEST(QuantLayout, Q4_0HandBuiltBlock) {
  // d = 0.5 (half 0x3800); byte j holds value j (low nibble) and j + 16 (high nibble).
  uint8_t block[18] = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::Q4_0, block, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j));
  }
}

TEST(QuantLayout, Q8_0RoundsHalfAwayFromZero) {
  // amax 127 gives d = 1 exactly, so the quants are roundf(x).
  std::vector<float> x(32, 0.0f);
  x[3] = -127.0f;
  x[7] = 63.5f;
  x[8] = -63.5f;
  x[9] = 2.5f;
  uint8_t block[34];
  quantize_row(DType::Q8_0, x.data(), block, 32);
  EXPECT_EQ(block[0] | (block[1] << 8), 0x3C00);  // d = 1.0 as a half
  EXPECT_EQ(static_cast<int8_t>(block[2 + 3]), -127);
  EXPECT_EQ(static_cast<int8_t>(block[2 + 7]), 64);
  EXPECT_EQ(static_cast<int8_t>(block[2 + 8]), -64);
  EXPECT_EQ(static_cast<int8_t>(block[2 + 9]), 3);
}

// The vector quantizer against the reference's definition, roundf(x / d) per value, on
// blocks that land on ties (x = k + 0.5 with d = 1), ordinary values, zeros, and a block
// holding a NaN (the reference's max ignores it).
TEST(QuantLayout, Q8_0MatchesRoundfOnEveryBlock) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  const int blocks = 64;
  std::vector<float> x(blocks * 32);
  for (float& v : x) v = dist(rng);
  for (int j = 0; j < 32; ++j) x[j] = (j % 2 ? -1.0f : 1.0f) * (static_cast<float>(j) + 0.5f);
  x[31] = 127.0f;  // d = 1: the values above are exact ties
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;
  x[64 + 5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> got(blocks * 34);
  quantize_row(DType::Q8_0, x.data(), got.data(), static_cast<int64_t>(x.size()));
  for (int b = 0; b < blocks; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
    const uint8_t* block = got.data() + b * 34;
    for (int j = 0; j < 32; ++j) {
      const float v = x[b * 32 + j] * inv;
      const int8_t want = std::isnan(v) ? 0 : static_cast<int8_t>(std::roundf(v));
      EXPECT_EQ(static_cast<int8_t>(block[2 + j]), want) << "block " << b << " value " << j;
    }
  }
}

// ---- Argument errors --------------------------------------------------------------------

template <typename F>
void expect_quantize_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("[quantize]", 0), 0u) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(QuantErrors, LengthNotMultipleOfBlock) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> q(1024);
  expect_quantize_error([&] { quantize_row(DType::Q4_0, x.data(), q.data(), 33); }, "block size");
  expect_quantize_error([&] { quantize_row(DType::Q4_K, x.data(), q.data(), 288); }, "q4_K");
  expect_quantize_error([&] { dequantize_row(DType::Q6_K, q.data(), x.data(), 128); },
                        "block size");
  expect_quantize_error([&] { quantize_rows(DType::Q8_0, x.data(), q.data(), 2, 48); },
                        "block size");
}

TEST(QuantErrors, TypesWithoutConversion) {
  float x[32] = {};
  uint8_t q[256];
  expect_quantize_error([&] { quantize_row(DType::I32, x, q, 32); }, "i32");
  expect_quantize_error([&] { dequantize_row(DType::I32, q, x, 32); }, "i32");
  expect_quantize_error([&] { quantize_row(DType::Count, x, q, 32); }, "dtype");
  expect_quantize_error([&] { quantize_rows(static_cast<DType>(200), x, q, 1, 32); }, "dtype");
}

TEST(QuantErrors, NegativeCounts) {
  float x[32] = {};
  uint8_t q[256];
  expect_quantize_error([&] { quantize_row(DType::F16, x, q, -1); }, "negative");
  expect_quantize_error([&] { quantize_rows(DType::Q8_0, x, q, -2, 32); }, "negative");
}

TEST(QuantErrors, EmptyRowsAreFine) {
  EXPECT_EQ(quantize_rows(DType::Q4_K, nullptr, nullptr, 0, 256), 0u);
  EXPECT_NO_THROW(quantize_row(DType::Q4_0, nullptr, nullptr, 0));
  EXPECT_NO_THROW(dequantize_row(DType::Q2_K, nullptr, nullptr, 0));
}

// ---- Speed (not a test; run with --gtest_also_run_disabled_tests) ----------------------

TEST(QuantSpeed, DISABLED_DequantizeThroughput) {
  const int64_t n = 1 << 20;  // 4 MiB of f32 output, about L2/L3-resident
  const std::vector<float> x = normal_data(n, 3);
  std::vector<float> y(n);
  std::printf("%-6s %10s %10s %10s\n", "type", "Gelem/s", "in GB/s", "out GB/s");
  for (DType type : kAllConvertible) {
    std::vector<uint8_t> q(row_size(type, n));
    quantize_row(type, x.data(), q.data(), n);
    dequantize_row(type, q.data(), y.data(), n);  // warm up, pick the SIMD target
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double secs = 0;
    do {
      dequantize_row(type, q.data(), y.data(), n);
      ++reps;
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (secs < 0.3);
    const double elems = static_cast<double>(n) * reps / secs;
    std::printf("%-6s %10.2f %10.2f %10.2f\n", std::string(dtype_name(type)).c_str(), elems / 1e9,
                elems * static_cast<double>(q.size()) / n / 1e9, elems * 4 / 1e9);
  }
}

}  // namespace
}  // namespace sd
