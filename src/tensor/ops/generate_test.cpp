#include "tensor/ops/generate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

std::vector<float> arange_values(float start, float stop, float step) {
  return test::run_reference(
      [=](Context& ctx) { return std::vector<Tensor*>{arange(ctx, start, stop, step)}; })[0];
}

TEST(Arange, CountsAndValues) {
  EXPECT_EQ(arange_values(0, 5, 1), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange_values(5, 0, -2), (std::vector<float>{5, 3, 1}));
  // ceil(1 / 0.3) = 4 elements: 0, 0.3, 0.6, 0.9.
  auto v = arange_values(0, 1, 0.3f);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_NEAR(v[3], 0.9, 1e-7);
  Context ctx;
  EXPECT_EQ(arange(ctx, 2, 2, 1)->ne[0], 0);
  EXPECT_EQ(arange(ctx, 0, 2.5f, 0.5f)->ne[0], 5);
}

TEST(Arange, RejectsBadSteps) {
  Context ctx;
  EXPECT_THROW(arange(ctx, 0, 5, 0), Error);
  EXPECT_THROW(arange(ctx, 0, 5, -1), Error);
  EXPECT_THROW(arange(ctx, 5, 0, 1), Error);
  EXPECT_THROW(arange(ctx, 0, INFINITY, 1), Error);
  EXPECT_THROW(arange(ctx, 0, 1e10f, 1e-3f), Error);
}

// The embedding written out in double; only the f32 rounding of t * freq differs.
double embedding(double t, int dim, int j, double max_period = 10000) {
  const int half = dim / 2;
  if (j >= 2 * half) return 0;
  const int k = j % half;
  const double arg = t * std::exp(-std::log(max_period) * k / half);
  return j < half ? std::cos(arg) : std::sin(arg);
}

TEST(TimestepEmbedding, CosFirstThenSin) {
  // t = 0: cos half is 1, sin half is 0 -- the order ggml and SD's UNet use.
  const std::vector<float> t = {0, 1, 999.5f};
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* ts = ctx.new_tensor(DType::F32, {3}, "t");
        Tensor* e = timestep_embedding(ctx, ts, 8);
        EXPECT_EQ(e->ne, make_shape({8, 3}));
        return std::vector<Tensor*>{e};
      },
      {{"t", t}});
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(out[0][j], 1.0f);
    EXPECT_EQ(out[0][4 + j], 0.0f);
  }
  for (int n = 1; n < 3; ++n)
    for (int j = 0; j < 8; ++j) {
      // At t ~ 1000 the f32 argument carries ~1e-4 absolute error (as in PyTorch and ggml).
      const double atol = n == 1 ? 1e-6 : 2e-4;
      EXPECT_NEAR(out[0][n * 8 + j], embedding(t[n], 8, j), atol) << "t " << t[n] << " j " << j;
    }
}

TEST(TimestepEmbedding, OddDimEndsInZeroAndMaxPeriodIsUsed) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* ts = ctx.new_tensor(DType::F32, {2}, "t");
        return std::vector<Tensor*>{timestep_embedding(ctx, ts, 7, 100),
                                    timestep_embedding(ctx, ts, 1)};
      },
      {{"t", {3.5f, 0.25f}}});
  for (int n = 0; n < 2; ++n) {
    const double t = n == 0 ? 3.5 : 0.25;
    for (int j = 0; j < 7; ++j) {
      EXPECT_NEAR(out[0][n * 7 + j], embedding(t, 7, j, 100), 1e-6) << "j " << j;
    }
    EXPECT_EQ(out[0][n * 7 + 6], 0.0f);
    EXPECT_EQ(out[1][n], 0.0f);  // dim 1: no frequencies, only the odd padding
  }
}

TEST(TimestepEmbedding, StridedTimestepsMatchContiguousCopy) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {2, 3}, "x");
    Tensor* ts = slice(ctx, transpose(ctx, x), 1, 1, 2);  // x[1, :]: [3], stride 8 bytes
    EXPECT_EQ(ts->ne, make_shape({3}));
    return std::vector<Tensor*>{timestep_embedding(ctx, ts, 6),
                                timestep_embedding(ctx, cont(ctx, ts), 6)};
  });
  EXPECT_EQ(out[0], out[1]);
}

TEST(TimestepEmbedding, RejectsBadInputs) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {4}, "t");
  Tensor* t2 = ctx.new_tensor(DType::F32, {4, 2}, "t2");
  Tensor* ti = ctx.new_tensor(DType::I32, {4}, "ti");
  EXPECT_THROW(timestep_embedding(ctx, t, 0), Error);
  EXPECT_THROW(timestep_embedding(ctx, t, 8, 0), Error);
  EXPECT_THROW(timestep_embedding(ctx, t2, 8), Error);
  EXPECT_THROW(timestep_embedding(ctx, ti, 8), Error);
}

}  // namespace
}  // namespace sd
