#include "pipeline/canny.h"

#include <gtest/gtest.h>

#include <vector>

#include "tensor/error.h"

namespace sd::pipeline {
namespace {

// A white square (columns and rows 16..47) on black, 64x64 RGB.
std::vector<uint8_t> square(int channels = 3) {
  std::vector<uint8_t> px(64 * 64 * channels, 0);
  for (int y = 16; y < 48; ++y)
    for (int x = 16; x < 48; ++x)
      for (int c = 0; c < channels; ++c) px[(y * 64 + x) * channels + c] = 255;
  return px;
}

uint8_t at(const std::vector<uint8_t>& px, int x, int y, int c = 0, int channels = 3) {
  return px[(y * 64 + x) * channels + c];
}

TEST(Canny, EdgesOfASquareAndNothingElse) {
  std::vector<uint8_t> px = square();
  canny_edges(px.data(), 64, 64, 3, CannyParams{});
  // The square's left and right sides and its top and bottom, near the boundary.
  auto edge_near = [&](int x0, int x1, int y0, int y1) {
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x)
        if (at(px, x, y) == 255) return true;
    return false;
  };
  EXPECT_TRUE(edge_near(14, 17, 32, 32)) << "left side";
  EXPECT_TRUE(edge_near(46, 49, 32, 32)) << "right side";
  EXPECT_TRUE(edge_near(32, 32, 14, 17)) << "top side";
  EXPECT_TRUE(edge_near(32, 32, 46, 49)) << "bottom side";
  // Flat areas (inside, outside, the border) have none.
  for (auto [x, y] : {std::pair{32, 32}, {5, 5}, {58, 30}, {30, 58}, {0, 0}, {63, 63}})
    EXPECT_EQ(at(px, x, y), 0) << x << "," << y;
  // Every channel carries the same map.
  for (int i = 0; i < 64 * 64; ++i) {
    ASSERT_EQ(px[i * 3], px[i * 3 + 1]);
    ASSERT_EQ(px[i * 3], px[i * 3 + 2]);
  }
}

TEST(Canny, InverseGivesBlackEdgesOnWhite) {
  std::vector<uint8_t> plain = square(), inverse = square();
  canny_edges(plain.data(), 64, 64, 3, CannyParams{});
  CannyParams p;
  p.inverse = true;
  canny_edges(inverse.data(), 64, 64, 3, p);
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(plain[i] + inverse[i], 255) << i;
}

TEST(Canny, AlphaChannelIsWrittenToo) {
  std::vector<uint8_t> rgba = square(4), rgb = square();
  canny_edges(rgba.data(), 64, 64, 4, CannyParams{});
  canny_edges(rgb.data(), 64, 64, 3, CannyParams{});
  for (int i = 0; i < 64 * 64; ++i) ASSERT_EQ(rgba[i * 4 + 3], rgb[i * 3]);
}

TEST(Canny, BadInputsAreErrors) {
  std::vector<uint8_t> gray(64 * 64, 0);
  EXPECT_THROW(canny_edges(gray.data(), 64, 64, 1, CannyParams{}), Error);
  EXPECT_THROW(canny_edges(nullptr, 64, 64, 3, CannyParams{}), Error);
  EXPECT_THROW(canny_edges(gray.data(), 0, 64, 3, CannyParams{}), Error);
  // A flat image has no edges (and no division by a zero gradient).
  std::vector<uint8_t> flat(16 * 16 * 3, 128);
  canny_edges(flat.data(), 16, 16, 3, CannyParams{});
  for (uint8_t v : flat) ASSERT_EQ(v, 0);
}

}  // namespace
}  // namespace sd::pipeline
