#include "tensor/ops/view.h"

#include <gtest/gtest.h>

#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "test_support.h"

namespace sd {
namespace {

TEST(View, PermuteThenContCopiesInTheNewOrder) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {2, 3, 4}, "x");
    return std::vector<Tensor*>{cont(ctx, permute(ctx, x, {2, 0, 1, 3}))};
  };
  c.fill = [](const Tensor& t, int) {
    std::vector<float> v(static_cast<size_t>(t.nelements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return v;
  };
  auto out = test::run_case(c, CpuKernels::Reference)[0];
  // out[i0, i1, i2] with ne [4, 2, 3] = x[i1, i2, i0] = i1 + 2 i2 + 6 i0
  for (int i2 = 0; i2 < 3; ++i2)
    for (int i1 = 0; i1 < 2; ++i1)
      for (int i0 = 0; i0 < 4; ++i0) EXPECT_EQ(out[i0 + 4 * (i1 + 2 * i2)], i1 + 2 * i2 + 6 * i0);
}

TEST(View, ContOfQuantizedRowsKeepsBytes) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* q = ctx.new_tensor(DType::Q8_0, {64, 6}, "q");
    return std::vector<Tensor*>{cont(ctx, slice(ctx, q, 1, 2, 5)), q};
  };
  auto out = test::run_case(c, CpuKernels::Reference);
  ASSERT_EQ(out[0].size(), 64u * 3);
  for (size_t i = 0; i < out[0].size(); ++i) EXPECT_EQ(out[0][i], out[1][i + 128]);
}

TEST(View, InvalidViewsAreErrors) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4, 3}, "x");
  Tensor* q = ctx.new_tensor(DType::Q4_0, {64, 2}, "q");
  EXPECT_THROW(reshape(ctx, x, {5, 3}), Error);
  EXPECT_THROW(reshape(ctx, transpose(ctx, x), {12}), Error);
  EXPECT_THROW(permute(ctx, x, {0, 0, 1, 2}), Error);
  EXPECT_THROW(slice(ctx, x, 1, 2, 4), Error);
  EXPECT_THROW(slice(ctx, q, 0, 0, 16), Error);
  EXPECT_THROW(transpose(ctx, q), Error);
  EXPECT_THROW(view(ctx, x, make_shape({13}), contiguous_strides(DType::F32, make_shape({13})), 0),
               Error);
}

}  // namespace
}  // namespace sd
