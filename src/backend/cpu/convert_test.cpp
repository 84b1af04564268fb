// Fast Cast and Cont against the reference kernels. Both only move or convert values with
// the same conversion routines, so every comparison is exact.
#include <gtest/gtest.h>

#include <cmath>

#include "simd_test_util.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

constexpr double kBitExact = 1e-30;  // atol; with rtol 0 any difference fails

constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                 DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

test::GraphCase cast_case(DType from, DType to, Shape shape) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(from, shape, "x");
    return std::vector<Tensor*>{cast(ctx, x, to)};
  };
  c.fill = [](const Tensor& t, int) { return test::random_values(t.nelements(), 11, -3, 3); };
  return c;
}

TEST(CpuCast, BetweenFloatTypes) {
  for (DType from : kFloatTypes) {
    for (DType to : kFloatTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      test::expect_fast_path(cast_case(from, to, make_shape({37, 3, 2})), kBitExact, 0);
      test::expect_fast_path(cast_case(from, to, make_shape({20000, 3})), kBitExact, 0);
    }
  }
}

TEST(CpuCast, Bf16RoundsToNearestEvenAndKeepsSpecials) {
  test::GraphCase c = cast_case(DType::F32, DType::BF16, make_shape({19}));
  c.fill = [](const Tensor&, int) {
    // 1 + 2^-8 is a tie (rounds down to even), 1 + 3 * 2^-8 a tie rounding up.
    return std::vector<float>{1.0f + 1.0f / 256,
                              1.0f + 3.0f / 256,
                              -1.0f - 1.0f / 256,
                              INFINITY,
                              -INFINITY,
                              NAN,
                              0.0f,
                              -0.0f,
                              3.4e38f,
                              1e-40f,
                              -1e-40f,
                              65504.0f,
                              1.0f / 3,
                              -2.0f / 3,
                              1e10f,
                              -7.5f,
                              0.1f,
                              0.2f,
                              0.3f};
  };
  test::expect_fast_path(c, kBitExact, 0);
}

TEST(CpuCast, BlockTypesToF32) {
  for (DType t : kBlockTypes) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_fast_path(cast_case(t, DType::F32, make_shape({512, 3, 2})), kBitExact, 0);
  }
}

TEST(CpuCast, FloatTypesToBlockTypes) {
  for (DType t : kBlockTypes) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_fast_path(cast_case(DType::F32, t, make_shape({256, 5})), kBitExact, 0);
    test::expect_fast_path(cast_case(DType::F16, t, make_shape({256, 3})), kBitExact, 0);
  }
}

TEST(CpuCast, StridedSources) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {40, 6, 5}, "x");
    Tensor* h = ctx.new_tensor(DType::F16, {512, 4}, "h");
    return std::vector<Tensor*>{cast(ctx, transpose(ctx, x), DType::F16),
                                cast(ctx, slice(ctx, h, 1, 1, 3), DType::Q8_0),
                                cast(ctx, permute(ctx, x, {0, 2, 1, 3}), DType::BF16)};
  };
  test::expect_fast_path(c, kBitExact, 0);
}

test::GraphCase cont_case(DType type, Shape shape, std::array<int, 4> axes) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    return std::vector<Tensor*>{cont(ctx, permute(ctx, x, axes))};
  };
  c.fill = [](const Tensor& t, int) { return test::random_values(t.nelements(), 13, -500, 500); };
  return c;
}

TEST(CpuCont, PermutationsOfEveryScalarType) {
  const std::array<int, 4> perms[] = {{0, 1, 2, 3}, {1, 0, 2, 3}, {0, 2, 1, 3},
                                      {2, 0, 1, 3}, {1, 2, 0, 3}, {3, 1, 0, 2}};
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    for (const auto& p : perms) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(t) << " axes " << p[0] << p[1] << p[2] << p[3]);
      test::expect_fast_path(cont_case(t, make_shape({37, 9, 5, 2}), p), kBitExact, 0);
    }
  }
}

TEST(CpuCont, LargeTransposeUsesTiles) {
  // The attention layout change of SD: [C, W*H] <-> [W*H, C], with edges off the tile size.
  test::expect_fast_path(cont_case(DType::F32, make_shape({320, 1000, 2}), {1, 0, 2, 3}), kBitExact,
                         0);
  test::expect_fast_path(cont_case(DType::F16, make_shape({77, 100}), {1, 0, 2, 3}), kBitExact, 0);
}

TEST(CpuCont, SlicesAndBlockRows) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {33, 20, 3}, "x");
    Tensor* q = ctx.new_tensor(DType::Q4_K, {512, 6, 2}, "q");
    Tensor* s = ctx.new_tensor(DType::F32, {1, 1, 7}, "s");
    return std::vector<Tensor*>{
        cont(ctx, slice(ctx, x, 0, 5, 30)), cont(ctx, slice(ctx, x, 1, 3, 17)),
        cont(ctx, transpose(ctx, slice(ctx, x, 0, 1, 2))), cont(ctx, permute(ctx, s, {2, 0, 1, 3})),
        cont(ctx, slice(ctx, q, 1, 2, 5))};
  };
  test::expect_fast_path(c, kBitExact, 0);
}

}  // namespace
}  // namespace sd
