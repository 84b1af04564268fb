// Elementwise ops on a Vulkan device against the reference kernels: broadcasting, strided
// views, half-precision inputs and outputs, every unary function.
#include <gtest/gtest.h>

#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"

namespace sd::vulkan {
namespace {

using sd::test::GraphCase;
using Binary = Tensor* (*)(Context&, Tensor*, Tensor*);

GraphCase binary_case(Shape a_shape, Shape b_shape, DType a_type, DType b_type) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    std::vector<Tensor*> out;
    for (Binary op : {add, sub, mul, div}) {
      Tensor* a = ctx.new_tensor(a_type, a_shape, "a");
      Tensor* b = ctx.new_tensor(b_type, b_shape, "b");
      out.push_back(op(ctx, a, b));
    }
    return out;
  };
  c.fill = [](const Tensor& t, int leaf) {
    return sd::test::random_values(t.nelements(), 100 + leaf, leaf % 2 ? 0.5f : -2.0f, 2.0f);
  };
  return c;
}

TEST(VulkanElementwise, BinaryOpsBroadcastLikeTheReference) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(
      *device, binary_case(make_shape({37, 5, 3}), make_shape({37, 5, 3}), DType::F32, DType::F32),
      1e-6, 1e-6);
  test::expect_matches_reference(
      *device,
      binary_case(make_shape({13, 11, 7, 2}), make_shape({1, 1, 7, 1}), DType::F32, DType::F16),
      1e-6, 1e-6);
  test::expect_matches_reference(
      *device, binary_case(make_shape({19, 33, 2}), make_shape({19}), DType::BF16, DType::F32),
      1e-6, 1e-6);
}

TEST(VulkanElementwise, PermutedViewsAreReadInPlace) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F16, make_shape({6, 5, 4, 3}), "a");
    Tensor* b = ctx.new_tensor(DType::F32, make_shape({5, 6, 4, 3}), "b");
    Tensor* at = permute(ctx, a, {1, 0, 2, 3});
    return std::vector<Tensor*>{add(ctx, at, b), cont(ctx, permute(ctx, a, {2, 0, 3, 1}))};
  };
  test::expect_matches_reference(*device, c, 1e-6, 1e-6);
}

TEST(VulkanElementwise, CastsRoundLikeTheEngine) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, make_shape({33, 7}), "a");
    // Odd widths put 16-bit outputs at half-word addresses.
    return std::vector<Tensor*>{cast(ctx, a, DType::F16), cast(ctx, a, DType::BF16),
                                cast(ctx, cast(ctx, a, DType::BF16), DType::F32)};
  };
  c.fill = [](const Tensor& t, int) {
    return sd::test::random_values(t.nelements(), 5, -300, 300);
  };
  test::expect_matches_reference(*device, c, 0, 0);
}

TEST(VulkanElementwise, ScaleClampAndEveryUnaryFunction) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, make_shape({41, 3, 2}), "a");
    std::vector<Tensor*> out{scale(ctx, a, 0.37f, -1.5f), clamp(ctx, a, -0.5f, 0.25f)};
    for (int fn = 0; fn < static_cast<int>(UnaryOp::Count); ++fn) {
      const auto op = static_cast<UnaryOp>(fn);
      Tensor* x = op == UnaryOp::Sqrt ? clamp(ctx, a, 0.0f, 10.0f) : a;
      out.push_back(unary(ctx, x, op, 0.1f));
    }
    return out;
  };
  c.fill = [](const Tensor& t, int) { return sd::test::random_values(t.nelements(), 9, -6, 6); };
  test::expect_matches_reference(*device, c, 2e-6, 2e-6);
}

TEST(VulkanElementwise, LongTensorsLoopOverTheGrid) {
  SD_REQUIRE_VULKAN(device);
  // More elements than 65535 groups of 256 threads cover.
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, make_shape({4097, 4097}), "a");
    Tensor* b = ctx.new_tensor(DType::F32, make_shape({4097, 1}), "b");
    return std::vector<Tensor*>{add(ctx, a, b)};
  };
  test::expect_matches_reference(*device, c, 1e-6, 1e-6);
}

}  // namespace
}  // namespace sd::vulkan
