// The int8 convolution (channels-last block-quantized weights) against the reference
// kernel on the dequantized weights: kernel sizes, stride, padding, dilation, batches,
// strided input views, bands of output rows, and each weight type it reads.
#include "backend/cpu/conv2d_int8.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/int8_gemm.h"
#include "simd_test_util.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

struct Int8ConvCase {
  int64_t W, H, cin, N, KW, KH, cout;
  int s0, s1, p0, p1, d0, d1;
  bool bias;
};

test::GraphCase int8_conv_case(const Int8ConvCase& k, DType wt, bool permuted_x = false) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = permuted_x ? permute(ctx, ctx.new_tensor(DType::F32, {k.W, k.cin, k.H, k.N}, "x_p"),
                                     {0, 2, 1, 3})
                           : ctx.new_tensor(DType::F32, {k.W, k.H, k.cin, k.N}, "x");
    Tensor* w = ctx.new_tensor(wt, {k.cin, k.KW, k.KH, k.cout}, "w");
    Tensor* b = k.bias ? ctx.new_tensor(DType::F32, {k.cout}, "b") : nullptr;
    return std::vector<Tensor*>{conv2d(ctx, x, w, b, k.s0, k.s1, k.p0, k.p1, k.d0, k.d1, 1,
                                       ConvKernelLayout::ChannelsLast)};
  };
  return c;
}

// Activations are rounded to 8 bits per 32 channels (an error of at most 1/254 of the
// block's largest value), weights are what the reference reads: over R uniform taps the
// error is a random walk of about sqrt(R) / 900 (observed), bounded here by sqrt(R) / 128;
// an indexing bug errs by O(sqrt(R)).
void expect_matches(const Int8ConvCase& k, DType wt, bool permuted_x = false) {
  const double taps = static_cast<double>(k.cin * k.KW * k.KH);
  test::expect_fast_path(int8_conv_case(k, wt, permuted_x), std::sqrt(taps) / 128, 0);
}

class CpuConv2dInt8 : public testing::Test {
 protected:
  void SetUp() override {
    if (!int8_gemm_available()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  }
};

TEST_F(CpuConv2dInt8, KernelsStridesPaddingDilation) {
  const Int8ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, bias
      {9, 7, 64, 2, 3, 3, 40, 1, 1, 1, 1, 1, 1, true},     // SD's 3x3, odd sizes, a batch
      {16, 16, 32, 1, 3, 3, 16, 2, 2, 1, 1, 1, 1, true},   // downsampling conv
      {13, 11, 96, 1, 1, 1, 23, 1, 1, 0, 0, 1, 1, false},  // 1x1 projection
      {12, 10, 32, 2, 3, 2, 5, 2, 1, 0, 2, 2, 3, false},   // asymmetric everything
      {5, 8, 32, 1, 5, 3, 33, 3, 2, 1, 0, 1, 1, true},     // stride that does not divide
      {1, 1, 32, 1, 3, 3, 7, 1, 1, 1, 1, 1, 1, true},      // one pixel, all taps but one padding
  };
  for (const Int8ConvCase& k : cases) {
    SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << " k " << k.KW << "x"
                                    << k.KH << " s " << k.s0 << "," << k.s1 << " p " << k.p0 << ","
                                    << k.p1 << " d " << k.d0 << "," << k.d1);
    expect_matches(k, DType::Q8_0);
  }
}

TEST_F(CpuConv2dInt8, EveryTypeWithBlockCodes) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    SCOPED_TRACE(dtype_name(t));
    expect_matches({10, 6, 64, 1, 3, 3, 24, 1, 1, 1, 1, 1, 1, true}, t);
  }
  for (DType t : {DType::Q4_K, DType::Q5_K}) {  // 256-value blocks: 256 input channels
    SCOPED_TRACE(dtype_name(t));
    expect_matches({6, 5, 256, 1, 3, 3, 20, 1, 1, 1, 1, 1, 1, false}, t);
  }
}

TEST_F(CpuConv2dInt8, StridedInputView) {
  expect_matches({11, 9, 64, 2, 3, 3, 17, 1, 1, 1, 1, 1, 1, true}, DType::Q8_0, true);
}

TEST_F(CpuConv2dInt8, OutputRowsInBands) {
  // 8 MiB of unfolded codes per band: 96 x 96 pixels of 3 x 3 x 128 codes are 10.6 MiB,
  // so two bands, the second shorter.
  expect_matches({96, 96, 128, 1, 3, 3, 16, 1, 1, 1, 1, 1, 1, true}, DType::Q8_0);
}

TEST_F(CpuConv2dInt8, DeclinesWhatItCannotRead) {
  // Channels-last weights of a type without block codes go to the reference kernel.
  auto accepts = [](DType wt, int64_t cin) {
    test::GraphCase c;
    c.build = [=](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {6, 6, cin, 1}, "x");
      Tensor* w = ctx.new_tensor(wt, {cin, 3, 3, 8}, "w");
      return std::vector<Tensor*>{
          conv2d(ctx, x, w, nullptr, 1, 1, 1, 1, 1, 1, 1, ConvKernelLayout::ChannelsLast)};
    };
    return test::fast_kernel_accepts(c);
  };
  EXPECT_FALSE(accepts(DType::F16, 16));
  EXPECT_FALSE(accepts(DType::Q6_K, 256));
  EXPECT_TRUE(accepts(DType::Q8_0, 32));
}

// The reference kernel reads a channels-last weight as the same convolution as the
// standard layout holding the same values.
TEST(Conv2dOp, ChannelsLastWeightIsTheSameConvolution) {
  const int64_t cin = 5, kw = 3, kh = 2, cout = 4;
  std::vector<float> standard(static_cast<size_t>(kw * kh * cin * cout));
  std::vector<float> last(standard.size());
  for (size_t i = 0; i < standard.size(); ++i)
    standard[i] = std::sin(0.37f * static_cast<float>(i));
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          last[static_cast<size_t>(((o * kh + y) * kw + x) * cin + c)] =
              standard[static_cast<size_t>(((o * cin + c) * kh + y) * kw + x)];
  auto build = [&](ConvKernelLayout layout) {
    return [=](Context& ctx) {
      Tensor* x = ctx.new_tensor(DType::F32, {7, 6, cin, 2}, "x");
      const bool cl = layout == ConvKernelLayout::ChannelsLast;
      Tensor* w =
          ctx.new_tensor(DType::F32, cl ? Shape{cin, kw, kh, cout} : Shape{kw, kh, cin, cout}, "w");
      return conv2d(ctx, x, w, nullptr, 2, 1, 1, 0, 1, 2, 1, layout);
    };
  };
  std::vector<float> xv(7 * 6 * cin * 2);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(0.11f * static_cast<float>(i));
  const std::vector<float> a =
      test::run_reference_single(build(ConvKernelLayout::Standard), {{"x", xv}, {"w", standard}});
  const std::vector<float> b =
      test::run_reference_single(build(ConvKernelLayout::ChannelsLast), {{"x", xv}, {"w", last}});
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LE(test::max_scaled_error(b, a, 1e-5, 0), 1.0);
}

// The Winograd layout: a random transformed kernel U (any U defines a convolution here),
// the reference computing A^T [U . (B^T d B)] A in double. The transformed inputs are sums
// of up to four inputs and each output sums 9 of the 16 tap products, so the rounding
// error is a few times the direct kernel's: bounded by 4 sqrt(16 Cin) / 128.
test::GraphCase winograd_case(int64_t W, int64_t H, int64_t cin, int64_t N, int64_t cout, int pad,
                              bool bias, bool permuted_x = false) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    Tensor* x = permuted_x
                    ? permute(ctx, ctx.new_tensor(DType::F32, {W, cin, H, N}, "x_p"), {0, 2, 1, 3})
                    : ctx.new_tensor(DType::F32, {W, H, cin, N}, "x");
    Tensor* w = ctx.new_tensor(DType::Q8_0, {cin, 4, 4, cout}, "w");
    Tensor* b = bias ? ctx.new_tensor(DType::F32, {cout}, "b") : nullptr;
    return std::vector<Tensor*>{
        conv2d(ctx, x, w, b, 1, 1, pad, pad, 1, 1, 1, ConvKernelLayout::WinogradF2x3)};
  };
  return c;
}

double winograd_atol(int64_t cin) {
  return 4 * std::sqrt(16.0 * static_cast<double>(cin)) / 128;
}

TEST_F(CpuConv2dInt8, WinogradMatchesItsDefinition) {
  struct Case {
    int64_t W, H, cin, N, cout;
    int pad;
    bool bias;
  };
  const Case cases[] = {
      {8, 8, 32, 1, 16, 1, true},    // whole tiles
      {9, 7, 64, 2, 40, 1, true},    // odd sizes: the last tile row and column half outside
      {5, 6, 32, 1, 33, 0, false},   // no padding (output 3x4)
      {6, 5, 32, 1, 8, 2, true},     // wider padding
      {1, 1, 32, 1, 7, 1, false},    // one pixel
      {96, 96, 128, 1, 16, 1, true}  // several bands of tile rows
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << " pad " << k.pad);
    test::expect_fast_path(winograd_case(k.W, k.H, k.cin, k.N, k.cout, k.pad, k.bias),
                           winograd_atol(k.cin), 0);
  }
  test::expect_fast_path(winograd_case(11, 9, 64, 2, 17, 1, true, /*permuted_x=*/true),
                         winograd_atol(64), 0);
}

// The Winograd layout made from a 3x3 kernel (winograd_f2x3_filter) is the same
// convolution as that kernel, for the reference, to f32 rounding.
TEST(Conv2dOp, WinogradKernelIsTheSameConvolution) {
  const int64_t cin = 3, cout = 2;
  std::vector<float> g(static_cast<size_t>(9 * cin * cout)),
      u(static_cast<size_t>(16 * cin * cout));
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.71f * static_cast<float>(i) + 0.2f);
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t c = 0; c < cin; ++c) {
      float t[16];
      winograd_f2x3_filter(g.data() + (o * cin + c) * 9, t);
      for (int k = 0; k < 16; ++k) u[static_cast<size_t>((o * 16 + k) * cin + c)] = t[k];
    }
  for (int pad : {0, 1, 2}) {
    SCOPED_TRACE(pad);
    auto build = [&](bool winograd) {
      return [=](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {7, 6, cin, 2}, "x");
        Tensor* w = winograd ? ctx.new_tensor(DType::F32, {cin, 4, 4, cout}, "w")
                             : ctx.new_tensor(DType::F32, {3, 3, cin, cout}, "w");
        return conv2d(ctx, x, w, nullptr, 1, 1, pad, pad, 1, 1, 1,
                      winograd ? ConvKernelLayout::WinogradF2x3 : ConvKernelLayout::Standard);
      };
    };
    std::vector<float> xv(7 * 6 * cin * 2);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(0.13f * static_cast<float>(i));
    const std::vector<float> a = test::run_reference_single(build(false), {{"x", xv}, {"w", g}});
    const std::vector<float> b = test::run_reference_single(build(true), {{"x", xv}, {"w", u}});
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LE(test::max_scaled_error(b, a, 1e-5, 0), 1.0);
  }
}

}  // namespace
}  // namespace sd
