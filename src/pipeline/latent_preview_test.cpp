// --preview proj: the colours of each latent space, FLUX.2's 2x2 patches, one image per
// frame of a video latent.
#include "pipeline/latent_preview.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace sd::pipeline {
namespace {

TEST(LatentPreview, EachLatentSpaceHasItsColours) {
  // A zero latent shows each space's bias: (bias / 2 + 1/2) * 255, truncated.
  const std::vector<float> zeros(2 * 2 * 16, 0.0f);
  const io::Image sd = project_latent_to_rgb(zeros, 2, 2, 1, LatentColors::Sd).at(0);
  EXPECT_EQ(sd.width, 2);
  EXPECT_EQ(sd.pixels[0], static_cast<uint8_t>((-0.017478f * 0.5f + 0.5f) * 255));
  const io::Image sd3 = project_latent_to_rgb(zeros, 2, 2, 1, LatentColors::Sd3).at(0);
  EXPECT_EQ(sd3.pixels[0], 127);  // SD3's fit has no bias
  EXPECT_NE(project_latent_to_rgb(zeros, 2, 2, 1, LatentColors::Wan21)[0].pixels, sd3.pixels);
  // One channel on: its row of the fit. Wan 2.1's first channel is mostly blue.
  std::vector<float> first(2 * 2 * 16, 0.0f);
  for (int p = 0; p < 4; ++p) first[p] = 1.0f;
  const io::Image wan = project_latent_to_rgb(first, 2, 2, 1, LatentColors::Wan21).at(0);
  const io::Image wan0 = project_latent_to_rgb(zeros, 2, 2, 1, LatentColors::Wan21).at(0);
  EXPECT_GT(wan.pixels[2] - wan0.pixels[2], 50);  // blue up by 0.48 / 2
  EXPECT_LT(wan.pixels[1], wan0.pixels[1]);       // green down
  EXPECT_EQ(latent_color_channels(LatentColors::Flux2), 128);
}

TEST(LatentPreview, Flux2PatchesAreTwoByTwoPixels) {
  // [1, 1, 128]: four pixels, each from its patch position's 32 channels.
  std::vector<float> latent(128, 0.0f);
  latent[3 * 4 + 1] = 8.0f;  // channel 3 (a strong one) at patch position 1: top right
  const io::Image img = project_latent_to_rgb(latent, 1, 1, 1, LatentColors::Flux2).at(0);
  ASSERT_EQ(img.width, 2);
  ASSERT_EQ(img.height, 2);
  const uint8_t* top_left = &img.pixels[0];
  const uint8_t* top_right = &img.pixels[3];
  const uint8_t* bottom_left = &img.pixels[6];
  for (int k = 0; k < 3; ++k) EXPECT_EQ(top_left[k], bottom_left[k]);
  EXPECT_GT(top_right[2], top_left[2]);
}

TEST(LatentPreview, AVideoLatentGivesAnImagePerFrame) {
  // [2, 1, 3 frames, 16]: frame t's channel 0 is t.
  std::vector<float> latent(2 * 1 * 3 * 16, 0.0f);
  for (int t = 0; t < 3; ++t)
    for (int p = 0; p < 2; ++p) latent[t * 2 + p] = static_cast<float>(t);
  const std::vector<io::Image> frames = project_latent_to_rgb(latent, 2, 1, 3, LatentColors::Flux);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_NE(frames[0].pixels, frames[1].pixels);
  EXPECT_NE(frames[1].pixels, frames[2].pixels);
  // Too short a latent is an error, not a read past its end.
  EXPECT_THROW(project_latent_to_rgb(latent, 2, 1, 4, LatentColors::Flux), Error);
}

}  // namespace
}  // namespace sd::pipeline
