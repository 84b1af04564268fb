#include "tensor/ops/conv2d.h"

#include <gtest/gtest.h>

#include <map>

#include "tensor/error.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

TEST(Conv2d, SumsWindowsByHand) {
  // 3x3 image 1..9 (row-major, W fastest), 2x2 kernel of ones: each output sums a window.
  Shape shape{};  // read inside build: the graph's context is gone after the run
  auto y = test::run_reference_single(
      [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {3, 3, 1, 1}, "x");
        Tensor* w = ctx.new_tensor(DType::F32, {2, 2, 1, 1}, "w");
        Tensor* out = conv2d(ctx, x, w, nullptr, 1, 1, 0, 0, 1, 1);
        shape = out->ne;
        return out;
      },
      {{"x", {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {"w", {1, 1, 1, 1}}});
  EXPECT_EQ(shape, (std::array<int64_t, 4>{2, 2, 1, 1}));
  EXPECT_EQ(y, (std::vector<float>{12, 16, 24, 28}));
}

TEST(Conv2d, StrideDilationAndPaddingAlongW) {
  // One row x = 1..5, taps (1, 10) two apart (dilation 2), stride 2, one zero on each side:
  // OW = (5 + 2 - 2 - 1) / 2 + 1 = 3, output ox reads x[2 ox - 1] + 10 x[2 ox + 1].
  auto y = test::run_reference_single(
      [](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {5, 1, 1, 1}, "x");
        Tensor* w = ctx.new_tensor(DType::F16, {2, 1, 1, 1}, "w");
        return conv2d(ctx, x, w, nullptr, 2, 1, 1, 0, 2, 1);
      },
      {{"x", {1, 2, 3, 4, 5}}, {"w", {1, 10}}});
  EXPECT_EQ(y, (std::vector<float>{20, 42, 4}));
}

TEST(Conv2d, GroupsKeepChannelsApartAndBiasAdds) {
  // Two groups of one channel, 1x1 kernels 2 and 3, bias (1, -1), batch of 2.
  auto y = test::run_reference_single(
      [](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {2, 1, 2, 2}, "x");
        Tensor* w = ctx.new_tensor(DType::BF16, {1, 1, 1, 2}, "w");
        Tensor* b = ctx.new_tensor(DType::F32, {2}, "b");
        return conv2d(ctx, x, w, b, 1, 1, 0, 0, 1, 1, 2);
      },
      {{"x", {1, 2, 3, 4, 5, 6, 7, 8}}, {"w", {2, 3}}, {"b", {1, -1}}});
  EXPECT_EQ(y, (std::vector<float>{3, 5, 8, 11, 11, 13, 20, 23}));
}

TEST(Conv2d, BadArgumentsAreErrors) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, 6, 1}, "x");
  Tensor* w = ctx.new_tensor(DType::F32, {3, 3, 3, 4}, "w");
  try {
    conv2d(ctx, x, w, nullptr, 1, 1, 1, 1, 1, 1, 4);  // 4 groups do not divide 6 channels
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("groups = 4"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(conv2d(ctx, x, w, nullptr, 1, 1, 1, 1, 1, 1, 2));
  EXPECT_THROW(conv2d(ctx, x, w, nullptr, 1, 1, 1, 1, 1, 1, 1), Error);  // 3 != 6 channels
  EXPECT_THROW(conv2d(ctx, x, w, nullptr, 0, 1, 1, 1, 1, 1, 2), Error);  // stride 0
  EXPECT_THROW(conv2d(ctx, x, w, nullptr, 1, 1, 0, 0, 5, 5, 2), Error);  // kernel too wide
  EXPECT_THROW(conv2d(ctx, x, w, ctx.new_tensor(DType::F32, {3}, "b3"), 1, 1, 1, 1, 1, 1, 2),
               Error);
  EXPECT_THROW(
      conv2d(ctx, ctx.new_tensor(DType::F16, {8, 8, 6, 1}, "xh"), w, nullptr, 1, 1, 1, 1, 1, 1, 2),
      Error);
  EXPECT_THROW(conv2d(ctx, x, ctx.new_tensor(DType::Q8_0, {32, 1, 3, 4}, "wq"), nullptr, 1, 1, 0, 0,
                      1, 1, 2),
               Error);
}

}  // namespace
}  // namespace sd
