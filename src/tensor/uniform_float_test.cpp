#include "tensor/uniform_float.h"

#include <gtest/gtest.h>

#include <cstring>

namespace sd {
namespace {

// Random test weights and data keep their values: uniform_float gives, bit for bit, the
// numbers of the standard distribution it replaces, over ranges of every sign and width.
TEST(UniformFloat, GivesTheStandardDistributionsNumbers) {
  const float ranges[][2] = {{-1.0f, 1.0f}, {0.0f, 1.0f}, {-0.02f, 0.05f}, {3.0f, 1000.0f}};
  for (const auto& range : ranges) {
    std::mt19937 ours(7), standard(7);
    std::uniform_real_distribution<float> dist(range[0], range[1]);
    for (int i = 0; i < 200000; ++i) {
      const float a = uniform_float(ours, range[0], range[1]), b = dist(standard);
      ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "draw " << i << ": " << a << " vs " << b;
    }
  }
}

}  // namespace
}  // namespace sd
