// The int8 GEMM against a double-precision product of the same 8-bit activations with the
// dequantized weights (every type, sizes that leave partial register tiles and panels),
// and against the exact f32 product within the rounding of the activations.
#include "backend/cpu/int8_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/dnnl_state.h"
#include "tensor/quant/block_codes.h"
#include "tensor/quant/quant.h"

namespace sd {
namespace {

struct Problem {
  int64_t M, K, N;
};

std::vector<float> uniform(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// x rounded as the GEMM rounds it: 8-bit codes times the block max / 127, halves to even.
std::vector<double> rounded_activations(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size(); b += kCodeBlock) {
    float amax = 0;
    for (int j = 0; j < kCodeBlock; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f;
    const float inv = d > 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < kCodeBlock; ++j)
      out[b + j] = static_cast<double>(std::nearbyint(x[b + j] * inv)) * d;
  }
  return out;
}

struct Result {
  double vs_rounded = 0;  // largest error against the product of the rounded activations
  double vs_exact = 0;    // largest error against the product of the f32 activations
};

Result run(DType type, const Problem& p, int threads) {
  const std::vector<float> wf = uniform(p.M * p.K, 1);
  const std::vector<float> x = uniform(p.N * p.K, 2);
  const size_t row_bytes = row_size(type, p.K);
  std::vector<char> w(row_bytes * static_cast<size_t>(p.M));
  quantize_rows(type, wf.data(), w.data(), p.M, p.K);
  std::vector<float> wd(wf.size());
  for (int64_t m = 0; m < p.M; ++m)
    dequantize_row(type, w.data() + m * row_bytes, wd.data() + m * p.K, p.K);
  const std::vector<double> xr = rounded_activations(x);

  CpuContext ctx;
  ctx.threads = threads;
  std::vector<float> out(static_cast<size_t>(p.N * p.M), -7.0f);
  int8_gemm(ctx, type, w.data(), row_bytes, p.M, p.K, x.data(), p.N, out.data());

  Result r;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t m = 0; m < p.M; ++m) {
      double rounded = 0, exact = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        rounded += xr[n * p.K + k] * wd[m * p.K + k];
        exact += static_cast<double>(x[n * p.K + k]) * wd[m * p.K + k];
      }
      const double got = out[n * p.M + m];
      r.vs_rounded = std::max(r.vs_rounded, std::fabs(got - rounded));
      r.vs_exact = std::max(r.vs_exact, std::fabs(got - exact));
    }
  return r;
}

class Int8GemmTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!int8_gemm_available()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  }
};

TEST_P(Int8GemmTest, MatchesTheProductOfTheRoundedActivations) {
  const DType type = GetParam();
  ASSERT_TRUE(int8_gemm_supports(type));
  const int64_t block = block_size(type);
  // Partial register tiles (N % 6), a partial last panel (M % 16) and an odd panel count.
  for (const Problem& p :
       {Problem{37, 2 * block, 7}, Problem{16, block, 1}, Problem{70, 3 * block, 13},
        Problem{5, block, 4}, Problem{21, block, 11}}) {
    for (int threads : {1, 2}) {
      const Result r = run(type, p, threads);
      // Integer sums are exact; what remains is f32 accumulation over K / 32 blocks.
      EXPECT_LT(r.vs_rounded, 2e-6 * static_cast<double>(p.K))
          << dtype_name(type) << " M=" << p.M << " K=" << p.K << " N=" << p.N;
      // Rounding the activations errs by up to 1/254 of each block's max (1 here) per
      // value, a random walk over K values: 4 sqrt(K) / 254 bounds it with margin.
      EXPECT_LT(r.vs_exact, 4.0 * std::sqrt(static_cast<double>(p.K)) / 254.0)
          << dtype_name(type) << " M=" << p.M << " K=" << p.K << " N=" << p.N;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BlockCodeTypes, Int8GemmTest,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q4_K, DType::Q5_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Many tiles of columns (M past one tile's columns) and rows past one row block.
TEST(Int8Gemm, LargeShapesMatchTheRoundedProduct) {
  if (!int8_gemm_available()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  const Problem p{2100, 2048, 70};
  const Result r = run(DType::Q8_0, p, 2);
  EXPECT_LT(r.vs_rounded, 2e-6 * static_cast<double>(p.K));
}

TEST(BlockCodes, DecodeToTheDequantizedValues) {
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                     DType::Q5_K}) {
    const int64_t n = 512;
    const std::vector<float> values = uniform(n, 3);
    std::vector<char> row(row_size(type, n));
    quantize_rows(type, values.data(), row.data(), 1, n);
    std::vector<float> want(n);
    dequantize_row(type, row.data(), want.data(), n);
    std::vector<uint8_t> codes(n);
    std::vector<float> scale(n / kCodeBlock), offset(n / kCodeBlock);
    decode_block_codes(type, row.data(), n, codes.data(), scale.data(), offset.data());
    const int z = block_code_zero_point(type);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = i / kCodeBlock;
      const float o = z >= 0 ? -static_cast<float>(z) * scale[b] : offset[b];
      EXPECT_NEAR(scale[b] * codes[i] + o, want[i], 1e-6f) << dtype_name(type) << " value " << i;
    }
  }
  EXPECT_FALSE(has_block_codes(DType::Q6_K));
  EXPECT_FALSE(has_block_codes(DType::F16));
}

}  // namespace
}  // namespace sd
