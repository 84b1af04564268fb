// The f16 GEMM against a double-precision product of the same f16 weights (widening is
// exact, so only f32 accumulation separates them): register tiles cut short in rows and
// columns, K with a tail of fewer than 16 values and past one chunk, a weight row stride
// wider than its row, and one and two threads.
#include "backend/cpu/f16_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/quant/quant.h"
#include "test_support.h"

namespace sd {
namespace {

struct Problem {
  int64_t M, K, N;
  int64_t row_pad = 0;  // f16 values after each weight row
};

// The largest error of f16_gemm's output against the exact product.
double max_error(const Problem& p, int threads) {
  const int64_t stride = p.K + p.row_pad;
  const std::vector<float> wf = test::random_values(p.M * stride, 1);
  const std::vector<float> x = test::random_values(p.N * p.K, 2);
  std::vector<uint16_t> w(wf.size());
  quantize_rows(DType::F16, wf.data(), w.data(), 1, static_cast<int64_t>(wf.size()));
  std::vector<float> wd(wf.size());
  dequantize_row(DType::F16, w.data(), wd.data(), static_cast<int64_t>(wf.size()));

  CpuContext ctx;
  ctx.threads = threads;
  std::vector<float> out(static_cast<size_t>(p.N * p.M), -7.0f);
  f16_gemm(ctx, w.data(), static_cast<size_t>(stride) * sizeof(uint16_t), p.M, p.K, x.data(), p.N,
           out.data());
  double worst = 0;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t m = 0; m < p.M; ++m) {
      double exact = 0;
      for (int64_t k = 0; k < p.K; ++k)
        exact += static_cast<double>(x[n * p.K + k]) * wd[m * stride + k];
      worst = std::max(worst, std::fabs(out[n * p.M + m] - exact));
    }
  return worst;
}

TEST(F16Gemm, MatchesTheExactProductOfItsWeights) {
  if (!f16_gemm_available()) GTEST_SKIP() << "this CPU has no AVX-512";
  for (const Problem& p :
       {Problem{1, 1, 1}, Problem{7, 16, 5}, Problem{13, 37, 9}, Problem{6, 100, 4, 3},
        Problem{25, 2048 + 16 + 5, 11}, Problem{40, 4100, 3, 8}, Problem{70, 640, 130}}) {
    for (int threads : {1, 2}) {
      // f32 sums of K products of values within 1: a few units of f32 rounding per sqrt(K).
      EXPECT_LT(max_error(p, threads), 1e-5 * std::sqrt(static_cast<double>(p.K)) + 1e-6)
          << "M=" << p.M << " K=" << p.K << " N=" << p.N << " threads=" << threads;
    }
  }
}

// More threads than column groups leaves some with none (one group of 6 columns, two
// threads); rows past one row block.
TEST(F16Gemm, FewColumnsAndManyRows) {
  if (!f16_gemm_available()) GTEST_SKIP() << "this CPU has no AVX-512";
  const Problem p{3, 2048, 150};
  EXPECT_LT(max_error(p, 2), 1e-5 * std::sqrt(2048.0));
}

}  // namespace
}  // namespace sd
