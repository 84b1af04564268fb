// Fast Concat against the reference: a byte copy, so exact, for every dim and dtype.
#include <gtest/gtest.h>

#include "simd_test_util.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

TEST(CpuConcat, EveryDimAndDtype) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32}) {
    for (int dim = 0; dim < kMaxDims; ++dim) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " dim " << dim);
      test::GraphCase c;
      c.build = [=](Context& ctx) {
        Shape sa = make_shape({13, 5, 4, 2}), sb = sa;
        sb[dim] = 3;
        Tensor* a = ctx.new_tensor(t, sa, "a");
        Tensor* b = ctx.new_tensor(t, sb, "b");
        return std::vector<Tensor*>{concat(ctx, a, b, dim)};
      };
      c.fill = [](const Tensor& x, int leaf) {
        return test::random_values(x.nelements(), 51 + leaf, -100, 100);
      };
      test::expect_fast_path(c, 1e-30, 0);
    }
  }
}

// Single values side by side (rotary pairs put back together), in every dtype width,
// large enough to run on both threads.
TEST(CpuConcat, PairsOfSingleValues) {
  for (DType t : {DType::F32, DType::F16, DType::I32}) {
    for (int64_t n : {7, 40000}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << ", " << n << " pairs");
      test::GraphCase c;
      c.build = [=](Context& ctx) {
        Tensor* a = ctx.new_tensor(t, {1, n}, "a");
        Tensor* b = ctx.new_tensor(t, {1, n}, "b");
        return std::vector<Tensor*>{concat(ctx, a, b, 0)};
      };
      c.fill = [](const Tensor& x, int leaf) {
        return test::random_values(x.nelements(), 61 + leaf, -100, 100);
      };
      test::expect_fast_path(c, 1e-30, 0);
    }
  }
}

TEST(CpuConcat, ViewsAndSdSkipConnections) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    // UNet skip connection: channels of [W, H, C, N] activations.
    Tensor* h = ctx.new_tensor(DType::F32, {32, 32, 64, 2}, "h");
    Tensor* skip = ctx.new_tensor(DType::F32, {32, 32, 32, 2}, "skip");
    Tensor* x = ctx.new_tensor(DType::F32, {9, 6, 4}, "x");
    return std::vector<Tensor*>{
        concat(ctx, permute(ctx, x, {0, 2, 1, 3}), slice(ctx, x, 1, 0, 4), 2),
        concat(ctx, slice(ctx, x, 0, 1, 5), x, 0), concat(ctx, h, skip, 2)};
  };
  test::expect_fast_path(c, 1e-30, 0);
}

}  // namespace
}  // namespace sd
