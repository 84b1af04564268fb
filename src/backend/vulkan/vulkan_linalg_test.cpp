// MatMul and Conv2d on a Vulkan device against the reference kernels: sizes that are not
// multiples of the 64 x 64 tile or the 16-deep k step, batch broadcasting, 16-bit weights
// (word-pair and element-wise fetches), transposed and permuted views, and every conv
// parameter: stride, padding, dilation, groups, bias.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "backend/vulkan/vulkan_ops.h"
#include "backend/vulkan/vulkan_test_util.h"
#include "matmul_case.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/view.h"

namespace sd::vulkan {
namespace {

using sd::test::GraphCase;

using sd::test::matmul_case;
using MatMulLayout = sd::test::MatMulLayout;

TEST(VulkanLinalg, MatMulSizesOffTheTile) {
  SD_REQUIRE_VULKAN(device);
  // {K, M, N}: single elements, edges one short of and one past a tile, partial k steps.
  const std::array<int64_t, 3> sizes[] = {{1, 1, 1},    {7, 63, 65},  {130, 65, 7},
                                          {63, 130, 1}, {16, 64, 64}, {65, 7, 130}};
  for (auto [K, M, N] : sizes) {
    SCOPED_TRACE(testing::Message() << "K " << K << " M " << M << " N " << N);
    test::expect_matches_reference(
        *device, matmul_case(DType::F32, make_shape({K, M}), make_shape({K, N, 2})),
        test::atol_for(K), 1e-6);
  }
}

TEST(VulkanLinalg, MatMulWeightBroadcastsOverBatch) {
  SD_REQUIRE_VULKAN(device);
  // b's 4 x 6 batch over a's 2 x 3: each slice of a serves 2 x 2 slices of b.
  test::expect_matches_reference(
      *device, matmul_case(DType::F32, make_shape({40, 7, 2, 3}), make_shape({40, 5, 4, 6})),
      test::atol_for(40), 1e-6);
  test::expect_matches_reference(
      *device, matmul_case(DType::F16, make_shape({24, 9, 1, 1}), make_shape({24, 70, 3, 2})),
      test::atol_for(24), 1e-6);
  // Broadcast along dim 3 only.
  test::expect_matches_reference(
      *device, matmul_case(DType::BF16, make_shape({18, 5, 3, 1}), make_shape({18, 4, 3, 2})),
      test::atol_for(18), 1e-6);
}

TEST(VulkanLinalg, MatMulHalfWidthWeights) {
  SD_REQUIRE_VULKAN(device);
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    // Even K: rows start on a word, read as pairs (130: the last step holds one pair).
    for (int64_t K : {64, 130}) {
      test::expect_matches_reference(*device,
                                     matmul_case(t, make_shape({K, 67}), make_shape({K, 9, 2})),
                                     test::atol_for(K), 1e-6);
    }
    // Odd K: every other row starts mid-word, read value by value.
    test::expect_matches_reference(*device,
                                   matmul_case(t, make_shape({33, 66}), make_shape({33, 10})),
                                   test::atol_for(33), 1e-6);
  }
}

// Random values for a leaf of rows of `row_length`, NaN outside elements [start, end) of
// each row: a slice that reads past its own row would turn the result NaN (0 x NaN is NaN,
// so even a value multiplied by a zeroed partner shows).
std::vector<float> nan_outside(const Tensor& t, int64_t row_length, int64_t start, int64_t end) {
  std::vector<float> v = sd::test::random_values(t.nelements(), 11);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t col = static_cast<int64_t>(i) % row_length;
    if (col < start || col >= end) v[i] = NAN;
  }
  return v;
}

TEST(VulkanLinalg, MatMulHalfWidthSlices) {
  SD_REQUIRE_VULKAN(device);
  // Column slices of a [34, 70] f16 weight: K = 33 on word-aligned rows (pairs whose last
  // second half belongs to the next column, not the row), and a slice starting mid-word.
  for (int64_t start : {0, 1}) {
    SCOPED_TRACE(testing::Message() << "slice from " << start);
    GraphCase c;
    c.build = [start](Context& ctx) {
      Tensor* a = slice(ctx, ctx.new_tensor(DType::F16, {34, 70}, "a"), 0, start, start + 33);
      Tensor* b = ctx.new_tensor(DType::F32, {33, 12}, "b");
      return std::vector<Tensor*>{matmul(ctx, a, b)};
    };
    c.fill = [start](const Tensor& t, int) {
      return t.name == "a" ? nan_outside(t, 34, start, start + 33) : std::vector<float>{};
    };
    test::expect_matches_reference(*device, c, test::atol_for(33), 1e-6);
  }
}

TEST(VulkanLinalg, MatMulStridedViews) {
  SD_REQUIRE_VULKAN(device);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::expect_matches_reference(
        *device,
        matmul_case(t, make_shape({45, 21}), make_shape({45, 19, 3}), MatMulLayout::TransposedB),
        test::atol_for(45), 1e-6);
    test::expect_matches_reference(
        *device,
        matmul_case(t, make_shape({40, 21}), make_shape({40, 19, 3, 2}), MatMulLayout::PermutedB),
        test::atol_for(40), 1e-6);
    test::expect_matches_reference(
        *device,
        matmul_case(t, make_shape({24, 70, 2}), make_shape({24, 10, 4}), MatMulLayout::TransposedA),
        test::atol_for(24), 1e-6);
  }
}

struct ConvCase {
  int64_t W, H, cin, N, KW, KH, cout;
  int s0, s1, p0, p1, d0, d1, groups;
  bool bias;
};

enum class ConvLayout { Contiguous, PermutedInput, PermutedWeight };

GraphCase conv_case(const ConvCase& k, DType wt, ConvLayout layout = ConvLayout::Contiguous) {
  GraphCase c;
  c.build = [=](Context& ctx) {
    // Permuted input: the leaf is [W, Cin, H, N] and the op sees [W, H, Cin, N].
    Tensor* x =
        layout == ConvLayout::PermutedInput
            ? permute(ctx, ctx.new_tensor(DType::F32, {k.W, k.cin, k.H, k.N}, "x_p"), {0, 2, 1, 3})
            : ctx.new_tensor(DType::F32, {k.W, k.H, k.cin, k.N}, "x");
    // Permuted weight: the leaf is [KW, KH, Cout, Cin/groups], so one output channel's taps
    // are not consecutive.
    Tensor* w =
        layout == ConvLayout::PermutedWeight
            ? permute(ctx, ctx.new_tensor(wt, {k.KW, k.KH, k.cout, k.cin / k.groups}, "w_p"),
                      {0, 1, 3, 2})
            : ctx.new_tensor(wt, {k.KW, k.KH, k.cin / k.groups, k.cout}, "w");
    Tensor* b = k.bias ? ctx.new_tensor(DType::F32, {k.cout}, "b") : nullptr;
    return std::vector<Tensor*>{conv2d(ctx, x, w, b, k.s0, k.s1, k.p0, k.p1, k.d0, k.d1, k.groups)};
  };
  return c;
}

void expect_conv(Device& device, const ConvCase& k, DType wt,
                 ConvLayout layout = ConvLayout::Contiguous) {
  SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << "x" << k.N << " k "
                                  << k.KW << "x" << k.KH << " -> " << k.cout << " s " << k.s0 << ","
                                  << k.s1 << " p " << k.p0 << "," << k.p1 << " d " << k.d0 << ","
                                  << k.d1 << " groups " << k.groups << " " << dtype_name(wt));
  const int64_t taps = k.cin / k.groups * k.KW * k.KH + (k.bias ? 1 : 0);
  test::expect_matches_reference(device, conv_case(k, wt, layout), test::atol_for(taps), 1e-6);
}

TEST(VulkanLinalg, Conv2dKernelsStridesPaddingDilation) {
  SD_REQUIRE_VULKAN(device);
  const ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, groups, bias
      {9, 7, 5, 2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, true},       // SD's 3x3, odd sizes, batch 2
      {13, 11, 19, 1, 1, 1, 23, 1, 1, 0, 0, 1, 1, 1, false},  // 1x1 projection
      {16, 16, 32, 1, 3, 3, 16, 2, 2, 1, 1, 1, 1, 1, true},   // downsampling conv
      {12, 10, 4, 2, 3, 2, 5, 2, 1, 0, 2, 2, 3, 1, false},    // asymmetric everything, dilation
      {5, 8, 3, 1, 5, 3, 4, 3, 2, 1, 0, 1, 1, 1, true},       // stride that does not divide
      {4, 4, 2, 1, 1, 1, 2, 2, 2, 0, 0, 1, 1, 1, false},      // right edge cut off
      {8, 6, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},       // one input channel
  };
  for (const ConvCase& k : cases) expect_conv(*device, k, DType::F32);
}

TEST(VulkanLinalg, Conv2dSeveralTiles) {
  SD_REQUIRE_VULKAN(device);
  // 11 x 9 x 2 = 198 output pixels (4 pixel tiles) and 70 output channels (2 channel tiles),
  // 5 x 3 x 3 = 45 taps (3 k steps, the last partial).
  expect_conv(*device, {11, 9, 5, 2, 3, 3, 70, 1, 1, 1, 1, 1, 1, 1, true}, DType::F32);
}

TEST(VulkanLinalg, Conv2dGroups) {
  SD_REQUIRE_VULKAN(device);
  expect_conv(*device, {10, 9, 8, 2, 3, 3, 12, 1, 1, 1, 1, 1, 1, 4, true}, DType::F32);
  expect_conv(*device, {10, 9, 6, 1, 3, 3, 6, 1, 1, 1, 1, 1, 1, 6, true}, DType::F32);  // depthwise
  expect_conv(*device, {7, 7, 6, 1, 3, 3, 12, 2, 2, 1, 1, 2, 2, 3, false}, DType::F16);
}

TEST(VulkanLinalg, Conv2dHalfWidthWeights) {
  SD_REQUIRE_VULKAN(device);
  for (DType t : {DType::F16, DType::BF16}) {
    // 20 x 3 x 3 = 180 taps: rows of whole words, read as pairs.
    expect_conv(*device, {11, 9, 20, 2, 3, 3, 17, 1, 1, 1, 1, 1, 1, 1, true}, t);
    // 5 x 3 x 3 = 45 taps: every other output channel starts mid-word.
    expect_conv(*device, {9, 7, 5, 2, 3, 3, 6, 2, 2, 1, 1, 1, 1, 1, false}, t);
    // 1x1 with an odd channel count.
    expect_conv(*device, {13, 11, 19, 1, 1, 1, 23, 1, 1, 0, 0, 1, 1, 1, true}, t);
  }
}

TEST(VulkanLinalg, Conv2dStridedViews) {
  SD_REQUIRE_VULKAN(device);
  expect_conv(*device, {9, 7, 6, 2, 3, 3, 5, 1, 1, 1, 1, 1, 1, 1, true}, DType::F32,
              ConvLayout::PermutedInput);
  expect_conv(*device, {9, 7, 6, 2, 3, 3, 5, 2, 2, 1, 1, 1, 1, 1, true}, DType::BF16,
              ConvLayout::PermutedInput);
  expect_conv(*device, {9, 7, 6, 2, 3, 3, 5, 1, 1, 1, 1, 1, 1, 1, false}, DType::F16,
              ConvLayout::PermutedWeight);
  expect_conv(*device, {8, 7, 6, 1, 3, 3, 9, 1, 1, 1, 1, 1, 1, 3, true}, DType::F32,
              ConvLayout::PermutedWeight);
}

TEST(VulkanLinalg, Conv2dHalfWidthWeightSlice) {
  SD_REQUIRE_VULKAN(device);
  // Input channels 0..4 of a [3, 3, 6, 7] f16 weight: each output channel's 45 taps are
  // consecutive and start on a word, so they are read as pairs, the last pair's second half
  // being channel 5 (NaN here), which must not count.
  GraphCase c;
  c.build = [](Context& ctx) {
    Tensor* x = ctx.new_tensor(DType::F32, {7, 6, 5, 2}, "x");
    Tensor* w = slice(ctx, ctx.new_tensor(DType::F16, {3, 3, 6, 7}, "w"), 2, 0, 5);
    return std::vector<Tensor*>{conv2d(ctx, x, w, nullptr, 1, 1, 1, 1, 1, 1)};
  };
  c.fill = [](const Tensor& t, int) {
    return t.name == "w" ? nan_outside(t, 3 * 3 * 6, 0, 3 * 3 * 5) : std::vector<float>{};
  };
  test::expect_matches_reference(*device, c, test::atol_for(45), 1e-6);
}

TEST(VulkanLinalg, SupportsDeclinesWhatTheShadersDoNotHandle) {
  Context ctx;
  constexpr size_t kBinding = size_t{1} << 30;
  Tensor* x = ctx.new_tensor(DType::F32, {64, 5}, "x");
  // Block-quantized weights run (vulkan_quant_test.cpp), but not q8_K, the CPU's activation
  // type, which no shader decodes.
  Tensor* q_matmul = matmul(ctx, ctx.new_tensor(DType::Q8_K, {256, 10}, "q"),
                            ctx.new_tensor(DType::F32, {256, 5}, "x256"));
  EXPECT_FALSE(linalg_op(Op::MatMul)->supports(*q_matmul));
  EXPECT_FALSE(op_supported(*q_matmul, kBinding));
  EXPECT_TRUE(op_supported(*matmul(ctx, ctx.new_tensor(DType::BF16, {64, 10}, "w"), x), kBinding));

  Tensor* image = ctx.new_tensor(DType::F32, {8, 8, 4}, "image");
  Tensor* w = ctx.new_tensor(DType::F16, {3, 3, 4, 6}, "w3");
  EXPECT_TRUE(op_supported(*conv2d(ctx, image, w, nullptr, 1, 1, 1, 1, 1, 1), kBinding));
  // Parameters conv2d() would refuse: the shader divides by groups and steps by stride.
  Tensor* no_groups = conv2d(ctx, image, w, nullptr, 1, 1, 1, 1, 1, 1);
  no_groups->params[6] = 0;
  EXPECT_FALSE(op_supported(*no_groups, kBinding));
  Tensor* no_stride = conv2d(ctx, image, w, nullptr, 1, 1, 1, 1, 1, 1);
  no_stride->params[0] = 0;
  EXPECT_FALSE(op_supported(*no_stride, kBinding));

  EXPECT_EQ(linalg_op(Op::Add), nullptr);
}

}  // namespace
}  // namespace sd::vulkan
