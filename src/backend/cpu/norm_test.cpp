// Fast GroupNorm / LayerNorm / RmsNorm against the reference (double-precision
// statistics). Outputs are O(1) after normalization: atol 2e-6 is ~16 f32 ulps of 1.
#include <gtest/gtest.h>

#include "simd_test_util.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

constexpr double kAtol = 2e-6, kRtol = 1e-5;

// Inputs with an offset: a mean far from 0 is where one-pass variance formulas break.
std::vector<float> offset_fill(const Tensor& t, int leaf) {
  return test::random_values(t.nelements(), 31 + leaf, leaf == 0 ? 2.0f : -1.0f,
                             leaf == 0 ? 6.0f : 1.0f);
}

test::GraphCase group_norm_case(Shape shape, int groups, DType type, bool affine,
                                NormActivation activation = NormActivation::None) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    Tensor* w = affine ? ctx.new_tensor(DType::F32, {shape[2]}, "w") : nullptr;
    Tensor* b = affine ? ctx.new_tensor(DType::F16, {1, 1, shape[2]}, "b") : nullptr;
    return std::vector<Tensor*>{group_norm(ctx, x, groups, 1e-5f, w, b, activation)};
  };
  c.fill = offset_fill;
  return c;
}

TEST(CpuGroupNorm, ShapesAndGroups) {
  test::expect_fast_path(group_norm_case(make_shape({7, 5, 12, 2}), 4, DType::F32, true), kAtol,
                         kRtol);
  test::expect_fast_path(group_norm_case(make_shape({9, 3, 6, 1}), 6, DType::F32, false), kAtol,
                         kRtol);
  test::expect_fast_path(group_norm_case(make_shape({13, 1, 8, 3}), 1, DType::F32, true), kAtol,
                         kRtol);
}

// GroupNorm + SiLU in one pass, as every ResNet block opens.
TEST(CpuGroupNorm, FusedSilu) {
  test::expect_fast_path(
      group_norm_case(make_shape({7, 5, 12, 2}), 4, DType::F32, true, NormActivation::Silu), kAtol,
      kRtol);
  test::expect_fast_path(
      group_norm_case(make_shape({65, 67, 4, 1}), 2, DType::F16, false, NormActivation::Silu),
      kAtol, kRtol);
}

TEST(CpuGroupNorm, StableDiffusionSizedGroups) {
  // SD1.5 at 512x512: 32 groups of 10 channels of 64x64 (a group spans several chunks).
  test::expect_fast_path(group_norm_case(make_shape({64, 64, 40, 1}), 4, DType::F32, true), kAtol,
                         kRtol);
}

TEST(CpuGroupNorm, HalfPrecisionInput) {
  test::expect_fast_path(group_norm_case(make_shape({65, 67, 4, 1}), 2, DType::F16, true), kAtol,
                         kRtol);
  test::expect_fast_path(group_norm_case(make_shape({11, 7, 6, 2}), 3, DType::BF16, false), kAtol,
                         kRtol);
}

TEST(CpuGroupNorm, StridedChannels) {
  // A channel slice keeps each W x H plane dense: fast path.
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {9, 8, 10, 2}, "x");
    return std::vector<Tensor*>{group_norm(ctx, transpose(ctx, x), 2, 1e-6f),
                                group_norm(ctx, slice(ctx, x, 2, 2, 8), 3, 1e-6f)};
  };
  c.fill = offset_fill;
  test::expect_fast_path(c, kAtol, kRtol);
}

test::GraphCase row_norm_case(Shape shape, DType type, bool rms, bool affine) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = ctx.new_tensor(type, shape, "x");
    Tensor* w = affine ? ctx.new_tensor(DType::BF16, {shape[0]}, "w") : nullptr;
    Tensor* b = affine ? ctx.new_tensor(DType::F32, {shape[0]}, "b") : nullptr;
    return std::vector<Tensor*>{rms ? rms_norm(ctx, x, 1e-6f, w) : layer_norm(ctx, x, 1e-5f, w, b)};
  };
  c.fill = offset_fill;
  return c;
}

TEST(CpuLayerNorm, ShapesTypesAndAffine) {
  for (bool rms : {false, true}) {
    for (bool affine : {false, true}) {
      for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        SCOPED_TRACE(::testing::Message()
                     << (rms ? "rms" : "layer") << " affine " << affine << " " << dtype_name(t));
        test::expect_fast_path(row_norm_case(make_shape({37, 5, 2}), t, rms, affine), kAtol, kRtol);
        test::expect_fast_path(row_norm_case(make_shape({1}), t, rms, affine), kAtol, kRtol);
      }
    }
  }
  // SD1.5 transformer tokens: 4096 rows of 320.
  test::expect_fast_path(row_norm_case(make_shape({320, 1024}), DType::F32, false, true), kAtol,
                         kRtol);
}

// RmsNorm over each pixel's channels: pixel counts around the kernel's 256-pixel chunks,
// narrow inputs, the weight, SiLU, a batch, and a channel slice (dense planes).
TEST(CpuRmsNorm, OverChannels) {
  for (int64_t pixels : {1, 255, 256, 257, 700}) {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(::testing::Message() << pixels << " pixels " << dtype_name(t));
      test::GraphCase c;
      c.build = [=](Context& ctx) {
        Tensor* x = ctx.new_tensor(t, {pixels, 1, 6, 2}, "x");
        Tensor* w = ctx.new_tensor(DType::BF16, {1, 1, 6}, "w");
        return std::vector<Tensor*>{
            rms_norm_channels(ctx, x, 1e-6f, w),
            rms_norm_channels(ctx, x, 1e-12f, nullptr, NormActivation::Silu)};
      };
      c.fill = offset_fill;
      test::expect_fast_path(c, kAtol, kRtol);
    }
  }
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {9, 8, 10, 2}, "x");
    return std::vector<Tensor*>{rms_norm_channels(ctx, slice(ctx, x, 2, 2, 8), 1e-6f),
                                rms_norm(ctx, x, 1e-6f, nullptr, NormActivation::Silu)};
  };
  c.fill = offset_fill;
  test::expect_fast_path(c, kAtol, kRtol);
}

TEST(CpuLayerNorm, StridedRows) {
  test::GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {30, 6, 4}, "x");
    return std::vector<Tensor*>{layer_norm(ctx, transpose(ctx, x), 1e-5f),
                                rms_norm(ctx, permute(ctx, x, {0, 2, 1, 3}), 1e-6f),
                                layer_norm(ctx, slice(ctx, x, 0, 2, 29), 1e-5f)};
  };
  c.fill = offset_fill;
  test::expect_fast_path(c, kAtol, kRtol);
}

}  // namespace
}  // namespace sd
