#include "models/flux_kontext.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sd::models {
namespace {

std::vector<float> axis(const std::vector<FluxPosition>& p, float FluxPosition::*field) {
  std::vector<float> out;
  for (const FluxPosition& q : p) out.push_back(q.*field);
  return out;
}

TEST(FluxKontext, OneReferenceHasIndexOneAndStartsAtTheOrigin) {
  // A 4x2 latent (w x h): 2x1 patches, row-major.
  for (RefIndexMode mode : {RefIndexMode::Fixed, RefIndexMode::Increase}) {
    const std::vector<FluxPosition> p = flux_ref_positions({{4, 2}}, 2, mode);
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(axis(p, &FluxPosition::index), (std::vector<float>{1, 1}));
    EXPECT_EQ(axis(p, &FluxPosition::row), (std::vector<float>{0, 0}));
    EXPECT_EQ(axis(p, &FluxPosition::col), (std::vector<float>{0, 1}));
  }
  // Decreasing indices start at 0.
  EXPECT_EQ(axis(flux_ref_positions({{2, 2}}, 2, RefIndexMode::Decrease), &FluxPosition::index),
            (std::vector<float>{0}));
}

TEST(FluxKontext, FixedIndexOffsetsLaterReferencesByTheEarlierOnesExtent) {
  // First 4x4 (2x2 patches) at the origin. The second, 2x2: 2 + 4 > 2 + 4 is false, so it
  // goes below, at the first one's height in latent pixels (4), not patches (2).
  const std::vector<FluxPosition> p =
      flux_ref_positions({{4, 4}, {2, 2}, {2, 6}}, 2, RefIndexMode::Fixed);
  ASSERT_EQ(p.size(), 4u + 1u + 3u);
  EXPECT_EQ(axis(p, &FluxPosition::index), std::vector<float>(8, 1.0f));
  EXPECT_EQ(axis(p, &FluxPosition::row), (std::vector<float>{0, 0, 1, 1, 4, 0, 1, 2}));
  // The third (2 wide, 6 tall): the layout is now 4 wide and 6 tall; 6 + 6 > 2 + 4, so it
  // goes to the right, at column 4 (the layout's width), rows from 0.
  EXPECT_EQ(axis(p, &FluxPosition::col), (std::vector<float>{0, 1, 0, 1, 0, 4, 4, 4}));
}

TEST(FluxKontext, TallLayoutPutsTheNextReferenceToTheRight) {
  const std::vector<FluxPosition> p = flux_ref_positions({{2, 4}, {2, 2}}, 2, RefIndexMode::Fixed);
  ASSERT_EQ(p.size(), 3u);
  // Second: 2 + 4 > 2 + 2, so right of the first, at column 2, row 0.
  EXPECT_EQ(p[2].row, 0.0f);
  EXPECT_EQ(p[2].col, 2.0f);
}

TEST(FluxKontext, IncreasingIndicesNumberReferencesWithoutOffsets) {
  const std::vector<FluxPosition> p =
      flux_ref_positions({{2, 2}, {4, 2}, {2, 2}}, 2, RefIndexMode::Increase);
  EXPECT_EQ(axis(p, &FluxPosition::index), (std::vector<float>{1, 2, 2, 3}));
  EXPECT_EQ(axis(p, &FluxPosition::row), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(axis(p, &FluxPosition::col), (std::vector<float>{0, 0, 1, 0}));
  const std::vector<FluxPosition> d =
      flux_ref_positions({{2, 2}, {2, 2}}, 2, RefIndexMode::Decrease);
  EXPECT_EQ(axis(d, &FluxPosition::index), (std::vector<float>{0, -1}));
}

TEST(FluxKontext, RopeRotatesReferenceTokensByTheirPositions) {
  FluxConfig c;
  c.hidden = 32;
  c.heads = 2;  // head 16: axes 4 + 6 + 6 -> pairs 2 + 3 + 3
  c.axes_dim = {4, 6, 6};
  const std::vector<FluxPosition> refs = {{1, 0, 0}, {1, 4, 3}};
  const FluxRope r = flux_rope(c, 1, 1, 2, refs);  // 1 text token, 1x2 image patches
  const int64_t half = c.head_dim() / 2;
  ASSERT_EQ(r.cos.size(), static_cast<size_t>(half * (1 + 2 + 2)));
  // The image tokens are as without references.
  const FluxRope plain = flux_rope(c, 1, 1, 2);
  EXPECT_EQ(std::vector<float>(r.sin.begin(), r.sin.begin() + 3 * half), plain.sin);
  // First reference token: index 1 on axis 0 (pair 0, frequency 1), nothing else.
  const int64_t t = 3;
  EXPECT_FLOAT_EQ(r.sin[t * half + 0], std::sin(1.0f));
  EXPECT_FLOAT_EQ(r.sin[t * half + 2], 0.0f);
  // Second: row 4 on pair 2, column 3 on pair 5.
  EXPECT_FLOAT_EQ(r.sin[(t + 1) * half + 2], std::sin(4.0f));
  EXPECT_FLOAT_EQ(r.sin[(t + 1) * half + 5], std::sin(3.0f));
}

}  // namespace
}  // namespace sd::models
