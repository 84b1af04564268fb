#include "tensor/ops/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

TEST(Reduce, SumAndMeanOverEachDimKeepTheDim) {
  const Shape ne = {3, 4, 2, 5};
  const std::vector<float> x = test::random_values(3 * 4 * 2 * 5, 7);
  for (int dim = 0; dim < kMaxDims; ++dim) {
    auto out = test::run_reference(
        [&](Context& ctx) {
          Tensor* a = ctx.new_tensor(DType::F32, ne, "a");
          Tensor* s = sum(ctx, a, dim);
          Shape keep = ne;
          keep[dim] = 1;
          EXPECT_EQ(s->ne, keep);
          return std::vector<Tensor*>{s, mean(ctx, a, dim)};
        },
        {{"a", x}});
    Shape on = ne;
    on[dim] = 1;
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < on[3]; ++i3)
      for (int64_t i2 = 0; i2 < on[2]; ++i2)
        for (int64_t i1 = 0; i1 < on[1]; ++i1)
          for (int64_t i0 = 0; i0 < on[0]; ++i0, ++k) {
            double acc = 0;
            for (int64_t r = 0; r < ne[dim]; ++r) {
              int64_t i[4] = {i0, i1, i2, i3};
              i[dim] = r;
              acc += x[i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))];
            }
            EXPECT_NEAR(out[0][k], acc, 1e-6) << "dim " << dim;
            EXPECT_NEAR(out[1][k], acc / ne[dim], 1e-6) << "dim " << dim;
          }
  }
}

TEST(Reduce, LongRowsKeepPrecision) {
  // 2^20 values of 0.1f: an f32 running sum drifts by ~1e-3 relative; the reference must not.
  const int64_t n = 1 << 20;
  auto out = test::run_reference(
      [&](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {n}, "a");
        return std::vector<Tensor*>{sum(ctx, a, 0), mean(ctx, a, 0)};
      },
      {{"a", std::vector<float>(n, 0.1f)}});
  const double exact = static_cast<double>(0.1f) * n;
  EXPECT_NEAR(out[0][0], exact, exact * 1e-7);
  EXPECT_NEAR(out[1][0], 0.1f, 0.1 * 1e-7);
}

TEST(Reduce, PermutedInputMatchesContiguousCopy) {
  for (int dim = 0; dim < kMaxDims; ++dim) {
    auto out = test::run_reference([dim](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F32, {4, 3, 5, 2}, "a");
      Tensor* p = permute(ctx, a, {2, 0, 3, 1});
      Tensor* c = cont(ctx, p);
      return std::vector<Tensor*>{sum(ctx, p, dim), sum(ctx, c, dim), mean(ctx, p, dim),
                                  mean(ctx, c, dim)};
    });
    EXPECT_EQ(out[0], out[1]) << "dim " << dim;
    EXPECT_EQ(out[2], out[3]) << "dim " << dim;
  }
}

TEST(Reduce, RejectsBadInputs) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 3}, "a");
  Tensor* i = ctx.new_tensor(DType::I32, {4, 3}, "i");
  Tensor* empty = ctx.new_tensor(DType::F32, {0, 3}, "empty");
  EXPECT_THROW(sum(ctx, a, 4), Error);
  EXPECT_THROW(mean(ctx, a, -1), Error);
  EXPECT_THROW(sum(ctx, i, 0), Error);
  EXPECT_THROW(mean(ctx, empty, 0), Error);
}

}  // namespace
}  // namespace sd
