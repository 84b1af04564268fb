#include "sampling/brownian_tree.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sd::sampling {
namespace {

TEST(BrownianTree, IncrementsAddUpOverSubintervals) {
  BrownianTree tree(64, 0.03, 14.6, 99);
  const double a = 0.5, m = 2.0, b = 7.0;
  const std::vector<float> whole = tree(b, a);
  const std::vector<float> lower = tree(m, a);
  const std::vector<float> upper = tree(b, m);
  for (size_t i = 0; i < whole.size(); ++i) {
    const double sum = lower[i] * std::sqrt(m - a) + upper[i] * std::sqrt(b - m);
    EXPECT_NEAR(whole[i] * std::sqrt(b - a), sum, 1e-4);
  }
}

TEST(BrownianTree, SameSeedSamePathAndUnitVarianceIncrements) {
  BrownianTree first(20000, 0.03, 14.6, 7);
  BrownianTree second(20000, 0.03, 14.6, 7);
  const std::vector<float> dw = first(3.0, 1.0);
  EXPECT_EQ(dw, second(3.0, 1.0));
  double square = 0;
  for (float v : dw) square += double{v} * v;
  EXPECT_NEAR(square / dw.size(), 1.0, 0.05);
  EXPECT_NE(dw, BrownianTree(20000, 0.03, 14.6, 8)(3.0, 1.0));
}

}  // namespace
}  // namespace sd::sampling
