#include "nn/patches.h"

#include <gtest/gtest.h>

#include <numeric>

namespace sd::nn {
namespace {

// A 4x2 latent of 2 channels (values = their index), 2x2 patches: 2 tokens of 8.
TEST(Patches, EachOrderPlacesTheValuesAndComesBack) {
  std::vector<float> latent(16);
  std::iota(latent.begin(), latent.end(), 0.0f);
  // Token 0 is the left 2x2 square: rows 0-1, columns 0-1 of channel 0 (0 1 4 5) and of
  // channel 1 (8 9 12 13).
  const std::vector<float> major = patchify(latent, 4, 2, 2, 2, PatchOrder::ChannelMajor);
  EXPECT_EQ(std::vector<float>(major.begin(), major.begin() + 8),
            (std::vector<float>{0, 1, 4, 5, 8, 9, 12, 13}));
  const std::vector<float> minor = patchify(latent, 4, 2, 2, 2, PatchOrder::ChannelMinor);
  EXPECT_EQ(std::vector<float>(minor.begin(), minor.begin() + 8),
            (std::vector<float>{0, 8, 1, 9, 4, 12, 5, 13}));
  EXPECT_EQ(minor[8], 2.0f);  // token 1 starts at column 2
  for (PatchOrder order : {PatchOrder::ChannelMajor, PatchOrder::ChannelMinor})
    EXPECT_EQ(unpatchify(patchify(latent, 4, 2, 2, 2, order), 4, 2, 2, 2, order), latent);
}

}  // namespace
}  // namespace sd::nn
