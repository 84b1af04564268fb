#include "tensor/ops/upscale.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tensor/error.h"
#include "tensor/ops/view.h"
#include "test_support.h"

namespace sd {
namespace {

using Values = test::NamedValues;

std::vector<float> resize(int64_t in_w, int64_t in_h, const std::vector<float>& in, int64_t out_w,
                          int64_t out_h, UpscaleMode mode) {
  return test::run_reference(
      [=](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {in_w, in_h}, "a");
        return std::vector<Tensor*>{upscale(ctx, a, out_w, out_h, mode)};
      },
      {{"a", in}})[0];
}

// PyTorch's upsample_bilinear2d (align_corners=False) source coordinate, written out
// independently of the kernel: half-pixel centers, negative values clamped to 0.
double torch_bilinear_src(int64_t dst, int64_t in, int64_t out) {
  return std::max(0.0, (dst + 0.5) * in / out - 0.5);
}

TEST(Upscale, NearestRepeatsPixels) {
  auto out = test::run_reference(
      [](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, {2, 2, 2}, "a");
        Tensor* t = upscale_nearest(ctx, a, 2);
        EXPECT_EQ(t->ne, make_shape({4, 4, 2}));
        return std::vector<Tensor*>{t};
      },
      {{"a", {1, 2, 3, 4, 5, 6, 7, 8}}});
  const std::vector<float> channel0 = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  EXPECT_EQ(std::vector<float>(out[0].begin(), out[0].begin() + 16), channel0);
  EXPECT_EQ(out[0][16], 5.0f);
  EXPECT_EQ(out[0][31], 8.0f);
}

TEST(Upscale, NearestNonIntegerRatioUsesFloor) {
  // PyTorch "nearest" 3 -> 5: src = floor(dst * 3 / 5) = 0, 0, 1, 1, 2.
  EXPECT_EQ(resize(3, 1, {10, 20, 30}, 5, 1, UpscaleMode::Nearest),
            (std::vector<float>{10, 10, 20, 20, 30}));
  // 5 -> 2 (downscale): 0, 2.
  EXPECT_EQ(resize(5, 1, {1, 2, 3, 4, 5}, 2, 1, UpscaleMode::Nearest), (std::vector<float>{1, 3}));
}

TEST(Upscale, BilinearMatchesPyTorchOnA2x2Ramp) {
  // a(x, y) = x + 2y, i.e. torch.tensor([[0, 1], [2, 3]]). Bilinear interpolation of a
  // linear ramp is the ramp at the source coordinate, clamped to the image: past the last
  // pixel center both taps are the last pixel.
  auto out = resize(2, 2, {0, 1, 2, 3}, 4, 4, UpscaleMode::Bilinear);
  // First and last rows as F.interpolate(size=4, mode="bilinear") prints them.
  const std::vector<float> row0 = {0.0f, 0.25f, 0.75f, 1.0f};
  const std::vector<float> row3 = {2.0f, 2.25f, 2.75f, 3.0f};
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4), row0);
  EXPECT_EQ(std::vector<float>(out.begin() + 12, out.end()), row3);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 4; ++x) {
      const double expect = std::min(torch_bilinear_src(x, 2, 4), 1.0) +
                            2 * std::min(torch_bilinear_src(y, 2, 4), 1.0);
      EXPECT_NEAR(out[y * 4 + x], expect, 1e-6) << x << "," << y;
    }
}

TEST(Upscale, BilinearOddSizesMatchFormula) {
  // A non-linear 3x2 image to 5x7 checks the weights, not only ramps.
  const std::vector<float> in = {1, -2, 4, 0.5f, 3, -1};
  auto out = resize(3, 2, in, 5, 7, UpscaleMode::Bilinear);
  for (int64_t y = 0; y < 7; ++y)
    for (int64_t x = 0; x < 5; ++x) {
      const double sx = torch_bilinear_src(x, 3, 5), sy = torch_bilinear_src(y, 2, 7);
      const int64_t x0 = static_cast<int64_t>(sx), y0 = static_cast<int64_t>(sy);
      const int64_t x1 = std::min<int64_t>(x0 + 1, 2), y1 = std::min<int64_t>(y0 + 1, 1);
      const double fx = sx - x0, fy = sy - y0;
      auto at = [&](int64_t i, int64_t j) { return static_cast<double>(in[j * 3 + i]); };
      const double expect = (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x1, y0)) +
                            fy * ((1 - fx) * at(x0, y1) + fx * at(x1, y1));
      EXPECT_NEAR(out[y * 5 + x], expect, 1e-6) << x << "," << y;
    }
}

TEST(Upscale, BilinearDownscaleAveragesPairs) {
  // 4 -> 2: sources at 0.5 and 2.5.
  EXPECT_EQ(resize(4, 1, {0, 2, 10, 20}, 2, 1, UpscaleMode::Bilinear), (std::vector<float>{1, 15}));
}

TEST(Upscale, AlignCornersHitsTheCorners) {
  auto out = resize(2, 2, {0, 1, 2, 3}, 4, 3, UpscaleMode::BilinearAlignCorners);
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 4; ++x) {
      EXPECT_NEAR(out[y * 4 + x], x / 3.0 + 2 * (y / 2.0), 1e-6) << x << "," << y;
    }
  // A single output pixel takes the first input pixel, as PyTorch does.
  EXPECT_EQ(resize(3, 1, {7, 8, 9}, 1, 1, UpscaleMode::BilinearAlignCorners)[0], 7.0f);
}

TEST(Upscale, PermutedInputMatchesContiguousCopy) {
  for (UpscaleMode mode :
       {UpscaleMode::Nearest, UpscaleMode::Bilinear, UpscaleMode::BilinearAlignCorners}) {
    auto out = test::run_reference([mode](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F32, {3, 5, 4, 2}, "a");
      Tensor* p = permute(ctx, a, {1, 2, 0, 3});  // [5, 4, 3, 2]
      return std::vector<Tensor*>{upscale(ctx, p, 7, 9, mode),
                                  upscale(ctx, cont(ctx, p), 7, 9, mode)};
    });
    EXPECT_EQ(out[0], out[1]) << "mode " << static_cast<int>(mode);
  }
}

TEST(Upscale, RejectsBadInputs) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 4, 3}, "a");
  Tensor* i = ctx.new_tensor(DType::I32, {4, 4, 3}, "i");
  EXPECT_THROW(upscale(ctx, a, 0, 4, UpscaleMode::Nearest), Error);
  EXPECT_THROW(upscale(ctx, a, 4, -1, UpscaleMode::Bilinear), Error);
  EXPECT_THROW(upscale(ctx, a, 4, 4, static_cast<UpscaleMode>(7)), Error);
  EXPECT_THROW(upscale(ctx, i, 8, 8, UpscaleMode::Nearest), Error);
  EXPECT_THROW(upscale_nearest(ctx, a, 0), Error);
}

}  // namespace
}  // namespace sd
