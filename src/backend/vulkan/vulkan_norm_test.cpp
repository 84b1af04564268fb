// Normalization and reductions on a Vulkan device against the reference kernels (double
// precision statistics): GroupNorm, LayerNorm, RmsNorm, Softmax, Sum and Mean with every
// option, rows shorter and longer than a workgroup, half-precision and strided inputs.
// Normalized outputs are O(1): atol 2e-6 is ~16 f32 ulps of 1.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/vulkan/vulkan_ops.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/softmax.h"
#include "tensor/ops/view.h"

namespace sd::vulkan {
namespace {

using sd::test::GraphCase;

constexpr double kNormAtol = 2e-6, kNormRtol = 1e-5;

// Inputs with an offset: a mean far from 0 is where one-pass variance formulas break.
std::vector<float> offset_fill(const Tensor& t, int leaf) {
  if (t.name == "x") return sd::test::random_values(t.nelements(), 31 + leaf, 2.0f, 6.0f);
  return sd::test::random_values(t.nelements(), 31 + leaf, -1.0f, 1.0f);
}

GraphCase group_norm_case(Shape shape, int groups, DType type, bool affine,
                          NormActivation activation = NormActivation::None) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    if (!affine)
      return std::vector<Tensor*>{group_norm(ctx, x, groups, 1e-5f, nullptr, nullptr, activation)};
    // The two shapes an affine parameter comes in: [C] and a conv-style [1, 1, C].
    Tensor* w = ctx.new_tensor(DType::F32, {shape[2]}, "w");
    Tensor* b = ctx.new_tensor(DType::F16, {1, 1, shape[2]}, "b");
    return std::vector<Tensor*>{group_norm(ctx, x, groups, 1e-5f, w, b, activation),
                                group_norm(ctx, x, groups, 1e-5f, w, nullptr, activation),
                                group_norm(ctx, x, groups, 1e-5f, nullptr, b, activation),
                                group_norm(ctx, x, groups, 1e-5f, nullptr, nullptr, activation)};
  };
  c.fill = offset_fill;
  return c;
}

TEST(VulkanNorm, GroupNormShapesGroupsAndAffine) {
  SD_REQUIRE_VULKAN(device);
  // Groups smaller than a workgroup (5 x 3 x 1 values) and larger (7 x 5 x 12).
  test::expect_matches_reference(*device,
                                 group_norm_case(make_shape({5, 3, 6, 2}), 6, DType::F32, true),
                                 kNormAtol, kNormRtol);
  test::expect_matches_reference(*device,
                                 group_norm_case(make_shape({7, 5, 12, 2}), 1, DType::F32, true),
                                 kNormAtol, kNormRtol);
}

TEST(VulkanNorm, GroupNormStableDiffusionShapesScaledDown) {
  SD_REQUIRE_VULKAN(device);
  // SD's 32 groups, over an 8x8 feature map of 64 channels, batch 2.
  test::expect_matches_reference(*device,
                                 group_norm_case(make_shape({8, 8, 64, 2}), 32, DType::F32, true),
                                 kNormAtol, kNormRtol);
  // One group of 64x64x32 values, 512 per invocation: a full-size SD group.
  test::expect_matches_reference(*device,
                                 group_norm_case(make_shape({64, 64, 32, 1}), 1, DType::F32, false),
                                 kNormAtol, kNormRtol);
}

TEST(VulkanNorm, GroupNormFusedSilu) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(
      *device,
      group_norm_case(make_shape({7, 5, 12, 2}), 4, DType::F32, true, NormActivation::Silu),
      kNormAtol, kNormRtol);
  test::expect_matches_reference(
      *device,
      group_norm_case(make_shape({9, 9, 4, 1}), 2, DType::F16, false, NormActivation::Silu),
      kNormAtol, kNormRtol);
}

TEST(VulkanNorm, GroupNormHalfPrecisionInputs) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(*device,
                                 group_norm_case(make_shape({17, 9, 4, 1}), 2, DType::F16, true),
                                 kNormAtol, kNormRtol);
  test::expect_matches_reference(*device,
                                 group_norm_case(make_shape({11, 7, 6, 2}), 3, DType::BF16, true),
                                 kNormAtol, kNormRtol);
}

TEST(VulkanNorm, GroupNormStridedInputs) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {9, 8, 10, 2}, "x");
    Tensor* w = ctx.new_tensor(DType::BF16, {6}, "w");
    return std::vector<Tensor*>{group_norm(ctx, transpose(ctx, x), 2, 1e-6f),
                                group_norm(ctx, slice(ctx, x, 2, 2, 8), 3, 1e-6f, w),
                                group_norm(ctx, permute(ctx, x, {2, 0, 1, 3}), 4, 1e-6f)};
  };
  c.fill = offset_fill;
  test::expect_matches_reference(*device, c, kNormAtol, kNormRtol);
}

// LayerNorm with and without each affine parameter, and RmsNorm with and without weight.
GraphCase row_norm_case(Shape shape, DType type) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    Tensor* w = ctx.new_tensor(DType::BF16, {shape[0]}, "w");
    Tensor* b = ctx.new_tensor(DType::F32, {1, shape[0]}, "b");
    return std::vector<Tensor*>{layer_norm(ctx, x, 1e-5f, w, b),
                                layer_norm(ctx, x, 1e-5f, w),
                                layer_norm(ctx, x, 1e-5f, nullptr, b),
                                layer_norm(ctx, x, 1e-5f),
                                rms_norm(ctx, x, 1e-6f, w),
                                rms_norm(ctx, x, 1e-6f)};
  };
  c.fill = offset_fill;
  return c;
}

TEST(VulkanNorm, LayerNormAndRmsNormEveryOptionAndType) {
  SD_REQUIRE_VULKAN(device);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_matches_reference(*device, row_norm_case(make_shape({37, 5, 2}), t), kNormAtol,
                                   kNormRtol);
  }
}

TEST(VulkanNorm, RowNormLengthsAroundTheWorkgroupSize) {
  SD_REQUIRE_VULKAN(device);
  for (int64_t n : {1, 2, 255, 256, 257, 1000, 4099}) {
    SCOPED_TRACE(n);
    test::expect_matches_reference(*device, row_norm_case(make_shape({n, 3}), DType::F32),
                                   kNormAtol, kNormRtol);
  }
}

// RmsNorm over each pixel's channels (the Wan autoencoder's), with SiLU, and over rows with
// SiLU.
TEST(VulkanNorm, RmsNormOverChannelsAndWithSilu) {
  SD_REQUIRE_VULKAN(device);
  for (DType t : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    GraphCase c;
    c.build = [=](Context& ctx) {
      Tensor* x = ctx.new_tensor(t, {13, 7, 300, 2}, "x");
      Tensor* w = ctx.new_tensor(DType::F32, {300}, "w");
      return std::vector<Tensor*>{rms_norm_channels(ctx, x, 1e-6f, w, NormActivation::Silu),
                                  rms_norm_channels(ctx, x, 1e-12f),
                                  rms_norm(ctx, x, 1e-6f, nullptr, NormActivation::Silu)};
    };
    c.fill = offset_fill;
    test::expect_matches_reference(*device, c, kNormAtol, kNormRtol);
  }
}

TEST(VulkanNorm, RowNormStridedRows) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {30, 6, 4}, "x");
    Tensor* w = ctx.new_tensor(DType::F16, {6}, "w");
    return std::vector<Tensor*>{layer_norm(ctx, transpose(ctx, x), 1e-5f, w, w),
                                rms_norm(ctx, permute(ctx, x, {0, 2, 1, 3}), 1e-6f),
                                layer_norm(ctx, slice(ctx, x, 0, 2, 29), 1e-5f)};
  };
  c.fill = offset_fill;
  test::expect_matches_reference(*device, c, kNormAtol, kNormRtol);
}

// A dispatch has at most 2048 row workgroups (vulkan_ops_norm.cpp): with 2051 rows some
// workgroups take a second row.
TEST(VulkanNorm, NormsWithMoreRowsThanWorkgroupsLoop) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* rows = ctx.new_tensor(DType::F32, {2, 2051}, "x");
    Tensor* groups = ctx.new_tensor(DType::F32, {2, 1, 2051}, "g");
    return std::vector<Tensor*>{rms_norm(ctx, rows, 1e-6f), group_norm(ctx, groups, 2051, 1e-6f)};
  };
  test::expect_matches_reference(*device, c, kNormAtol, kNormRtol);
}

TEST(VulkanNorm, SoftmaxAndSumWithMoreRowsThanWorkgroupsLoop) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* rows = ctx.new_tensor(DType::F32, {2, 2051}, "x");
    Tensor* columns = ctx.new_tensor(DType::F32, {256, 2051}, "c");
    return std::vector<Tensor*>{softmax(ctx, rows, nullptr, 3.0f), sum(ctx, columns, 0)};
  };
  test::expect_matches_reference(*device, c, kNormAtol, kNormRtol);
}

// Softmax outputs are probabilities: a relative bound, as for the CPU kernels.
constexpr double kSoftmaxAtol = 1e-8, kSoftmaxRtol = 1e-5;

GraphCase softmax_case(Shape shape, DType type, float scale, bool with_mask, Shape mask_shape = {},
                       DType mask_type = DType::F32, float magnitude = 6) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* a = ctx.new_tensor(type, shape, "a");
    Tensor* m = with_mask ? ctx.new_tensor(mask_type, mask_shape, "mask") : nullptr;
    return std::vector<Tensor*>{softmax(ctx, a, m, scale)};
  };
  c.fill = [=](const Tensor& t, int leaf) {
    return sd::test::random_values(t.nelements(), 21 + leaf, -magnitude, magnitude);
  };
  return c;
}

TEST(VulkanNorm, SoftmaxRowLengthsWithoutMask) {
  SD_REQUIRE_VULKAN(device);
  for (int64_t n : {1, 3, 17, 256, 257, 1001}) {
    SCOPED_TRACE(n);
    test::expect_matches_reference(*device,
                                   softmax_case(make_shape({n, 7, 3}), DType::F32, 0.125f, false),
                                   kSoftmaxAtol, kSoftmaxRtol);
  }
}

TEST(VulkanNorm, SoftmaxMaskBroadcastAndScale) {
  SD_REQUIRE_VULKAN(device);
  const Shape a = make_shape({77, 9, 4, 2});
  for (Shape m : {make_shape({77, 9, 4, 2}), make_shape({77, 9, 1, 1}), make_shape({77}),
                  make_shape({1, 9, 4, 1})}) {
    for (DType mt : {DType::F32, DType::F16}) {
      SCOPED_TRACE(::testing::Message()
                   << m[0] << "x" << m[1] << "x" << m[2] << "x" << m[3] << " " << dtype_name(mt));
      test::expect_matches_reference(*device, softmax_case(a, DType::F32, 0.3f, true, m, mt),
                                     kSoftmaxAtol, kSoftmaxRtol);
    }
  }
}

TEST(VulkanNorm, SoftmaxHalfPrecisionScores) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(
      *device,
      softmax_case(make_shape({33, 5}), DType::F16, 1.0f, true, make_shape({33, 5}), DType::F16),
      kSoftmaxAtol, kSoftmaxRtol);
  test::expect_matches_reference(*device,
                                 softmax_case(make_shape({300, 5}), DType::BF16, 2.0f, false),
                                 kSoftmaxAtol, kSoftmaxRtol);
}

TEST(VulkanNorm, SoftmaxLargeMagnitudesStayFinite) {
  SD_REQUIRE_VULKAN(device);
  // exp(x) overflows f32 beyond 88: only x - max keeps these finite.
  test::expect_matches_reference(
      *device, softmax_case(make_shape({513, 4}), DType::F32, 1.0f, false, {}, DType::F32, 3e4f),
      kSoftmaxAtol, kSoftmaxRtol);
  test::expect_matches_reference(*device,
                                 softmax_case(make_shape({100, 4}), DType::F16, 8.0f, true,
                                              make_shape({100}), DType::F16, 6e4f),
                                 kSoftmaxAtol, kSoftmaxRtol);
}

TEST(VulkanNorm, SoftmaxMaskedEntriesFullyMaskedRowsAndNaN) {
  SD_REQUIRE_VULKAN(device);
  const int64_t n = 300;  // longer than a workgroup
  GraphCase c = softmax_case(make_shape({n, 5}), DType::F32, 1.0f, true, make_shape({n, 5}));
  c.fill = [n](const Tensor& t, int leaf) {
    auto v = sd::test::random_values(t.nelements(), 5 + leaf, -3, 3);
    if (t.name == "mask") {
      for (int64_t i = 0; i < n; ++i) {
        if (i > 4) v[i] = -INFINITY;             // row 0: causal-style, 5 entries left
        v[2 * n + i] = -INFINITY;                // row 2: fully masked
        if (i != 200) v[4 * n + i] = -INFINITY;  // row 4: one entry left, past the first 256
      }
      v[3 * n + 7] = NAN;  // row 3 has a NaN: the whole row becomes NaN
    }
    return v;
  };
  test::expect_matches_reference(*device, c, kSoftmaxAtol, kSoftmaxRtol);
  const auto out = sd::test::run_case_on(c, *device)[0];
  EXPECT_EQ(out[2 * n + 5], 0.0f);
  EXPECT_EQ(out[0 * n + 20], 0.0f);
  EXPECT_TRUE(std::isnan(out[3 * n]));
  EXPECT_EQ(out[4 * n + 200], 1.0f);
}

TEST(VulkanNorm, SoftmaxStridedScores) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, {40, 6, 3}, "a");
    Tensor* m = ctx.new_tensor(DType::F16, {40, 6}, "mask");
    return std::vector<Tensor*>{softmax(ctx, permute(ctx, a, {0, 2, 1, 3})),
                                softmax(ctx, slice(ctx, a, 0, 3, 38), nullptr, 0.5f),
                                softmax(ctx, transpose(ctx, a), transpose(ctx, m), 2.0f)};
  };
  test::expect_matches_reference(*device, c, kSoftmaxAtol, kSoftmaxRtol);
}

// Sums of up to a few hundred values in [2, 6): a bound relative to the result.
constexpr double kReduceAtol = 1e-5, kReduceRtol = 2e-6;

GraphCase reduce_case(Shape shape, DType type, bool permuted = false) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    Tensor* a = permuted ? permute(ctx, x, {2, 0, 3, 1}) : x;
    std::vector<Tensor*> out;
    for (int dim = 0; dim < kMaxDims; ++dim) {
      out.push_back(sum(ctx, a, dim));
      out.push_back(mean(ctx, a, dim));
    }
    return out;
  };
  c.fill = offset_fill;
  return c;
}

TEST(VulkanNorm, SumAndMeanOverEveryDim) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(*device, reduce_case(make_shape({37, 5, 3, 2}), DType::F32),
                                 kReduceAtol, kReduceRtol);
  // Reduced dims of 256 and more values take a workgroup per output: dims 0, 1 and 3 here.
  test::expect_matches_reference(*device, reduce_case(make_shape({300, 3, 5, 2}), DType::F32),
                                 kReduceAtol, kReduceRtol);
  test::expect_matches_reference(*device, reduce_case(make_shape({2, 257, 1, 260}), DType::F32),
                                 kReduceAtol, kReduceRtol);
}

TEST(VulkanNorm, SumAndMeanHalfPrecisionAndPermutedInputs) {
  SD_REQUIRE_VULKAN(device);
  test::expect_matches_reference(*device, reduce_case(make_shape({19, 4, 3, 2}), DType::F16),
                                 kReduceAtol, kReduceRtol);
  test::expect_matches_reference(*device, reduce_case(make_shape({19, 4, 3, 2}), DType::BF16),
                                 kReduceAtol, kReduceRtol);
  test::expect_matches_reference(
      *device, reduce_case(make_shape({6, 5, 4, 3}), DType::F32, /*permuted=*/true), kReduceAtol,
      kReduceRtol);
}

TEST(VulkanNorm, LongSumsKeepTheirDigits) {
  SD_REQUIRE_VULKAN(device);
  // 2^20 values near 0.1, 4096 per invocation: a plain f32 running sum rounds the same way
  // at nearly every step and ends ~1e-6 off; the compensated sum is exact to f32 rounding.
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {1 << 20}, "x");
    return std::vector<Tensor*>{sum(ctx, x, 0), mean(ctx, x, 0)};
  };
  c.fill = [](const Tensor& t, int) {
    return sd::test::random_values(t.nelements(), 3, 0.1f, 0.1001f);
  };
  test::expect_matches_reference(*device, c, 0, 2e-7);
}

TEST(VulkanNorm, SumOverAnEmptyDimIsZero) {
  SD_REQUIRE_VULKAN(device);
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {0, 3}, "x");
    return std::vector<Tensor*>{sum(ctx, x, 0)};
  };
  test::expect_matches_reference(*device, c, 0, 0);
}

TEST(VulkanNorm, EveryOpOfTheGroupHasAnEntry) {
  for (Op op : {Op::GroupNorm, Op::LayerNorm, Op::RmsNorm, Op::Softmax, Op::Sum, Op::Mean})
    EXPECT_NE(norm_op(op), nullptr) << op_name(op);
  EXPECT_EQ(norm_op(Op::Add), nullptr);
}

// Nodes the constructors would not make, edited by hand: the shaders would compute garbage
// for them, so the backend must decline them.
TEST(VulkanNorm, SupportsDeclinesWhatTheShadersDoNotHandle) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4, 4, 12}, "x");
  Tensor* w = ctx.new_tensor(DType::F32, {12}, "w");
  auto supported = [](const Tensor* node) { return norm_op(node->op)->supports(*node); };

  Tensor* gn = group_norm(ctx, x, 4, 1e-5f, w);
  EXPECT_TRUE(supported(gn));
  gn->params[0] = 5;  // 12 channels do not split into 5 groups
  EXPECT_FALSE(supported(gn));
  gn->params[0] = 4;
  gn->params[2] = 7;  // no such activation
  EXPECT_FALSE(supported(gn));

  Tensor* rms = rms_norm(ctx, transpose(ctx, x), 1e-6f);
  EXPECT_TRUE(supported(rms));
  rms->src[2] = w;  // RmsNorm has no bias
  EXPECT_FALSE(supported(rms));
  rms->src[2] = nullptr;
  rms->src[1] = w;  // a weight of 12 values for rows of 4
  EXPECT_FALSE(supported(rms));

  Tensor* mask = ctx.new_tensor(DType::F32, {4, 4}, "mask");
  Tensor* sm = softmax(ctx, x, mask);
  EXPECT_TRUE(supported(sm));
  sm->src[1] = ctx.new_tensor(DType::F32, {4, 3}, "short_mask");  // does not broadcast
  EXPECT_FALSE(supported(sm));

  Tensor* total = sum(ctx, x, 2);
  EXPECT_TRUE(supported(total));
  total->params[0] = 4;  // no such dim
  EXPECT_FALSE(supported(total));
  total->type = DType::F16;  // the shaders write f32
  total->params[0] = 2;
  EXPECT_FALSE(supported(total));
}

}  // namespace
}  // namespace sd::vulkan
