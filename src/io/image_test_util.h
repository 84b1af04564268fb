// Helpers for the image tests: synthetic images and pixel comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "io/image.h"

namespace sd::io::test {

// A smooth gradient with a little deterministic noise: lossy coders keep it close, and
// any row/column/channel mix-up shows.
inline Image test_image(int width, int height, int channels, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  Image image{width, height, channels, {}};
  image.pixels.resize(image.size());
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int base = (x * 255 / std::max(1, width - 1) * (c + 1) +
                          y * 255 / std::max(1, height - 1) * (3 - c % 3)) /
                         4;
        image.at(x, y, c) =
            static_cast<uint8_t>(std::clamp(base + static_cast<int>(rng() % 5) - 2, 0, 255));
      }
    }
  }
  return image;
}

// Mean and max absolute difference per sample; the images must have the same shape.
struct PixelDifference {
  double mean = 0;
  int max = 0;
};

inline PixelDifference difference(const Image& a, const Image& b) {
  PixelDifference d;
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.channels, b.channels);
  if (a.pixels.size() != b.pixels.size() || a.pixels.empty()) {
    d.max = 256;
    return d;
  }
  double sum = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const int diff = std::abs(int{a.pixels[i]} - int{b.pixels[i]});
    sum += diff;
    d.max = std::max(d.max, diff);
  }
  d.mean = sum / static_cast<double>(a.pixels.size());
  return d;
}

}  // namespace sd::io::test
