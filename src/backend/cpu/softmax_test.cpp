// Fast softmax against the reference (double-precision exp and sum): rtol 1e-5 covers
// Highway's 1-ulp Exp, the f32 rounding of x - max and the f32 row sum.
#include <gtest/gtest.h>

#include <cmath>

#include "simd_test_util.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

constexpr double kSoftmaxAtol = 1e-8, kSoftmaxRtol = 1e-5;

test::GraphCase softmax_case(Shape shape, Shape mask_shape, DType type, DType mask_type,
                             float scale, bool with_mask = true) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* a = ctx.new_tensor(type, shape, "a");
    Tensor* m = with_mask ? ctx.new_tensor(mask_type, mask_shape, "mask") : nullptr;
    return std::vector<Tensor*>{softmax(ctx, a, m, scale)};
  };
  c.fill = [](const Tensor& t, int leaf) {
    return test::random_values(t.nelements(), 21 + leaf, -6, 6);
  };
  return c;
}

TEST(CpuSoftmax, RowsOfOddLengthsWithoutMask) {
  for (int64_t n : {1, 3, 17, 64, 1001}) {
    SCOPED_TRACE(n);
    test::expect_fast_path(
        softmax_case(make_shape({n, 7, 3}), {}, DType::F32, DType::F32, 0.125f, false),
        kSoftmaxAtol, kSoftmaxRtol);
  }
}

TEST(CpuSoftmax, MaskBroadcastPatterns) {
  const Shape a = make_shape({77, 9, 4, 2});
  for (Shape m : {make_shape({77, 9, 1, 1}), make_shape({77, 9, 4, 2}), make_shape({77}),
                  make_shape({1, 9, 4, 1})}) {
    for (DType mt : {DType::F32, DType::F16}) {
      SCOPED_TRACE(::testing::Message()
                   << m[0] << "x" << m[1] << "x" << m[2] << "x" << m[3] << " " << dtype_name(mt));
      test::expect_fast_path(softmax_case(a, m, DType::F32, mt, 0.3f), kSoftmaxAtol, kSoftmaxRtol);
    }
  }
}

TEST(CpuSoftmax, HalfPrecisionScores) {
  test::expect_fast_path(
      softmax_case(make_shape({33, 5}), make_shape({33, 5}), DType::F16, DType::F16, 1.0f),
      kSoftmaxAtol, kSoftmaxRtol);
  test::expect_fast_path(
      softmax_case(make_shape({33, 5}), {}, DType::BF16, DType::F32, 2.0f, false), kSoftmaxAtol,
      kSoftmaxRtol);
}

TEST(CpuSoftmax, AttentionSizedRows) {
  // SD1.5's largest self-attention rows: 4096 keys.
  test::expect_fast_path(
      softmax_case(make_shape({4096, 16}), {}, DType::F32, DType::F32, 0.125f, false), kSoftmaxAtol,
      kSoftmaxRtol);
}

TEST(CpuSoftmax, MaskedEntriesAndFullyMaskedRows) {
  test::GraphCase c =
      softmax_case(make_shape({21, 4}), make_shape({21, 4}), DType::F32, DType::F32, 1.0f);
  c.fill = [](const Tensor& t, int leaf) {
    auto v = test::random_values(t.nelements(), 5 + leaf, -3, 3);
    if (leaf == 1) {  // the mask: causal-style -inf in row 0, row 2 fully masked
      for (int i = 0; i < 21; ++i) {
        if (i > 4) v[i] = -INFINITY;
        v[2 * 21 + i] = -INFINITY;
      }
      v[3 * 21 + 7] = NAN;  // row 3 has a NaN: the whole row becomes NaN
    }
    return v;
  };
  test::expect_fast_path(c, kSoftmaxAtol, kSoftmaxRtol);
  auto out = test::run_case(c, CpuKernels::Fast)[0];
  EXPECT_FLOAT_EQ(out[2 * 21 + 5], 0.0f);
  EXPECT_EQ(out[0 * 21 + 20], 0.0f);
  EXPECT_TRUE(std::isnan(out[3 * 21]));
}

TEST(CpuSoftmax, StridedScores) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, {40, 6, 3}, "a");
    return std::vector<Tensor*>{softmax(ctx, permute(ctx, a, {0, 2, 1, 3})),
                                softmax(ctx, slice(ctx, a, 0, 3, 38), nullptr, 0.5f)};
  };
  test::expect_fast_path(c, kSoftmaxAtol, kSoftmaxRtol);
}

}  // namespace
}  // namespace sd
