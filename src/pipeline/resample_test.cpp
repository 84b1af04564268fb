#include "pipeline/resample.h"

#include <gtest/gtest.h>

#include <vector>

#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

TEST(Resample, BilinearMatchesPyTorchHalfPixelCentres) {
  // F.interpolate(tensor([[[[0., 1.]]]]), size=(1, 4), mode="bilinear") = [0, .25, .75, 1]
  const std::vector<float> out = resample({0.0f, 1.0f}, 2, 1, 1, 4, 1, ResampleFilter::Bilinear);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.25f, 0.75f, 1.0f}));
}

TEST(Resample, NearestRepeatsAndNearestExactRoundsCentres) {
  EXPECT_EQ(resample({1, 2, 3}, 3, 1, 1, 6, 1, ResampleFilter::Nearest),
            (std::vector<float>{1, 1, 2, 2, 3, 3}));
  // 3 -> 2: nearest takes floor(o * 3 / 2) = 0, 1; nearest-exact rounds 0.25 and 1.75.
  EXPECT_EQ(resample({1, 2, 3}, 3, 1, 1, 2, 1, ResampleFilter::Nearest),
            (std::vector<float>{1, 2}));
  EXPECT_EQ(resample({1, 2, 3}, 3, 1, 1, 2, 1, ResampleFilter::NearestExact),
            (std::vector<float>{1, 3}));
}

TEST(Resample, EveryFilterKeepsAConstantImageConstant) {
  const std::vector<float> flat(5 * 4 * 2, 0.625f);
  for (ResampleFilter f :
       {ResampleFilter::Nearest, ResampleFilter::NearestExact, ResampleFilter::Bilinear,
        ResampleFilter::Bicubic, ResampleFilter::Lanczos})
    for (bool antialias : {false, true})
      for (auto [w, h] : {std::pair{11, 9}, std::pair{3, 2}}) {
        const std::vector<float> out = resample(flat, 5, 4, 2, w, h, f, antialias);
        ASSERT_EQ(out.size(), static_cast<size_t>(w * h * 2));
        for (float v : out) EXPECT_NEAR(v, 0.625f, 1e-6f) << static_cast<int>(f);
      }
}

TEST(Resample, BicubicOvershootsAtAnEdgeAndAntialiasingSmoothsWhenShrinking) {
  const std::vector<float> step = {0, 0, 1, 1};
  const std::vector<float> up = resample(step, 4, 1, 1, 8, 1, ResampleFilter::Bicubic);
  EXPECT_NEAR(up[2], -0.10546875f, 1e-6f);  // a = -0.75 rings: cubic(1.25) < 0
  EXPECT_NEAR(up[5], 1.10546875f, 1e-6f);
  // Halving 0,1,0,1: plain bilinear samples between pixels (0.5 each); antialiased too,
  // but a 1-pixel-wide comb averaged over a wider window stays at its mean.
  const std::vector<float> comb = {0, 1, 0, 1, 0, 1, 0, 1};
  for (float v : resample(comb, 8, 1, 1, 4, 1, ResampleFilter::Bilinear, true))
    EXPECT_NEAR(v, 0.5f, 0.13f);
}

TEST(Resample, NearestMaxKeepsEveryMaskedPixelWhenShrinking) {
  std::vector<float> mask(8 * 8, 0.0f);
  mask[3 * 8 + 5] = 1.0f;  // one pixel at (5, 3)
  const std::vector<float> small = resample_nearest_max(mask, 8, 8, 1, 4, 4);
  EXPECT_EQ(small[1 * 4 + 2], 1.0f);
  float sum = 0;
  for (float v : small) sum += v;
  EXPECT_EQ(sum, 1.0f);
  // Enlarging is plain nearest.
  EXPECT_EQ(resample_nearest_max(mask, 8, 8, 1, 16, 16),
            resample(mask, 8, 8, 1, 16, 16, ResampleFilter::Nearest));
}

TEST(Resample, RefusesSizesThatDoNotFit) {
  EXPECT_THROW(resample({1, 2, 3}, 2, 2, 1, 4, 4, ResampleFilter::Bilinear), Error);
  EXPECT_THROW(resample({1, 2, 3, 4}, 2, 2, 1, 0, 4, ResampleFilter::Nearest), Error);
}

}  // namespace
}  // namespace sd::pipeline
