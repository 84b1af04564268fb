#include "tensor/ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

constexpr float kInf = std::numeric_limits<float>::infinity();

// softmax of one row in double.
std::vector<double> softmax_row(const std::vector<double>& v) {
  double max = -INFINITY, total = 0;
  for (double x : v) max = std::max(max, x);
  std::vector<double> e;
  for (double x : v) total += e.emplace_back(std::exp(x - max));
  for (double& x : e) x /= total;
  return e;
}

TEST(Softmax, RowsMatchTheFormulaAndSumToOne) {
  const int64_t n = 7, rows = 6;
  const std::vector<float> x = test::random_values(n * rows, 3, -4, 4);
  for (float scale : {1.0f, 0.125f}) {
    auto out = test::run_reference(
        [&](Context& ctx) {
          Tensor* a = ctx.new_tensor(DType::F32, {n, 3, 2}, "a");
          return std::vector<Tensor*>{softmax(ctx, a, nullptr, scale)};
        },
        {{"a", x}});
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> v;
      for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(x[r * n + i] * scale));
      const std::vector<double> expect = softmax_row(v);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(out[0][r * n + i], expect[i], 1e-7 + 1e-6 * expect[i]);
        total += out[0][r * n + i];
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {2}, "a");
        return std::vector<Tensor*>{softmax(ctx, a)};
      },
      {{"a", {1000, 1001}}});
  EXPECT_NEAR(out[0][0], 1 / (1 + std::exp(1.0)), 1e-7);
  EXPECT_NEAR(out[0][1], 1 / (1 + std::exp(-1.0)), 1e-7);
}

TEST(Softmax, MaskIsAddedAfterScalingAndMinusInfGivesExactZero) {
  // a [3, 2, 2]; mask [3, 2] broadcast over dim 2.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, -1, 0, 1, 2, 2, 2};
  const std::vector<float> mask = {0, -kInf, 0.5f, -kInf, 0, 0};
  for (DType mask_type : {DType::F32, DType::F16}) {
    auto out = test::run_reference(
        [&](Context& ctx) {
          Tensor* x = ctx.new_tensor(DType::F32, {3, 2, 2}, "a");
          Tensor* m = ctx.new_tensor(mask_type, {3, 2}, "mask");
          return std::vector<Tensor*>{softmax(ctx, x, m, 0.5f)};
        },
        {{"a", a}, {"mask", mask}});
    for (int64_t r = 0; r < 4; ++r) {
      std::vector<double> v;
      for (int64_t i = 0; i < 3; ++i) {
        v.push_back(static_cast<double>(a[r * 3 + i]) * 0.5 + mask[(r % 2) * 3 + i]);
      }
      const std::vector<double> expect = softmax_row(v);
      for (int64_t i = 0; i < 3; ++i) {
        if (std::isinf(mask[(r % 2) * 3 + i])) {
          EXPECT_EQ(out[0][r * 3 + i], 0.0f);
        } else {
          EXPECT_NEAR(out[0][r * 3 + i], expect[i], 1e-7);
        }
      }
    }
  }
}

TEST(Softmax, FullyMaskedRowIsZeroNotNaN) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {3, 2}, "a");
        Tensor* m = ctx.new_tensor(DType::F32, {3, 2}, "mask");
        return std::vector<Tensor*>{softmax(ctx, x, m)};
      },
      {{"mask", {-kInf, -kInf, -kInf, 0, 0, 0}}});
  EXPECT_EQ(out[0][0], 0.0f);
  EXPECT_EQ(out[0][1], 0.0f);
  EXPECT_EQ(out[0][2], 0.0f);
  EXPECT_NEAR(out[0][3] + out[0][4] + out[0][5], 1.0, 1e-6);
}

TEST(Softmax, NaNInputPropagates) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {3}, "a");
        return std::vector<Tensor*>{softmax(ctx, x)};
      },
      {{"a", {1, std::nanf(""), 2}}});
  for (float v : out[0]) EXPECT_TRUE(std::isnan(v));
}

TEST(Softmax, PermutedInputsMatchContiguousCopies) {
  auto out = test::run_reference([](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, {4, 6, 3}, "a");
    Tensor* m = ctx.new_tensor(DType::F16, {6, 3}, "mask");
    Tensor* p = permute(ctx, a, {2, 1, 0, 3});  // [3, 6, 4]
    Tensor* mt = transpose(ctx, m);             // [3, 6], strided
    return std::vector<Tensor*>{softmax(ctx, p, mt, 0.7f),
                                softmax(ctx, cont(ctx, p), cont(ctx, mt), 0.7f)};
  });
  EXPECT_EQ(out[0], out[1]);
}

TEST(Softmax, RejectsBadInputs) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 3, 2}, "a");
  Tensor* wide = ctx.new_tensor(DType::F32, {5, 3}, "wide");
  Tensor* bf = ctx.new_tensor(DType::BF16, {4, 3}, "bf");
  Tensor* i = ctx.new_tensor(DType::I32, {4, 3}, "i");
  EXPECT_THROW(softmax(ctx, a, wide), Error);
  EXPECT_THROW(softmax(ctx, a, bf), Error);
  EXPECT_THROW(softmax(ctx, i), Error);
  EXPECT_THROW(softmax(ctx, a, nullptr, INFINITY), Error);
  EXPECT_NO_THROW(softmax(ctx, a, ctx.new_tensor(DType::F16, {4, 1, 2}, "col")));
}

}  // namespace
}  // namespace sd
