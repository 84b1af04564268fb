// Fast Pad against the reference: copies and fills only, so exact.
#include <gtest/gtest.h>

#include "simd_test_util.h"
#include "tensor/ops/pad.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

TEST(CpuPad, EveryDimAndInputType) {
  const std::array<int, 8> pads_list[] = {
      {0, 1, 0, 1, 0, 0, 0, 0},  // the VAE's asymmetric downsampling pad
      {2, 3, 1, 0, 0, 2, 1, 1},
      {0, 0, 0, 0, 0, 0, 0, 0}};
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (const auto& pads : pads_list) {
      test::GraphCase c;
      c.build = [=](Context& ctx) {
        Tensor* x = ctx.new_tensor(t, {11, 7, 3, 2}, "x");
        return std::vector<Tensor*>{pad(ctx, x, pads, -0.5f)};
      };
      test::expect_fast_path(c, 1e-30, 0);
    }
  }
}

TEST(CpuPad, LargeAndStrided) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {64, 64, 16, 1}, "x");
    return std::vector<Tensor*>{pad(ctx, permute(ctx, x, {0, 2, 1, 3}), {1, 1, 0, 0, 2, 0, 0, 1}),
                                pad(ctx, x, {0, 1, 0, 1, 0, 0, 0, 0})};
  };
  test::expect_fast_path(c, 1e-30, 0);
}

}  // namespace
}  // namespace sd
