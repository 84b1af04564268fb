#include "sampling/skip_layer_guidance.h"

#include <gtest/gtest.h>

#include "sampling/guided_denoiser.h"

namespace sd::sampling {
namespace {

SkipLayerGuidance slg_over(int steps) {
  SkipLayerGuidance s;
  s.scale = 2.0f;
  s.schedule_size = steps + 1;  // sigmas
  s.predict = [](const std::vector<float>& x, float) { return std::vector<float>(x.size(), 0.0f); };
  return s;
}

TEST(SkipLayerGuidance, WindowIsStrictlyInsideTheTruncatedFractions) {
  // 20 steps, 21 sigmas: int(0.01 * 21) = 0 and int(0.2 * 21) = 4, so steps 1, 2 and 3.
  const SkipLayerGuidance s = slg_over(20);
  std::vector<int> on;
  for (int step = 0; step <= 20; ++step)
    if (s.applies_at(step)) on.push_back(step);
  EXPECT_EQ(on, (std::vector<int>{1, 2, 3}));
  SkipLayerGuidance off = s;
  off.scale = 0.0f;
  EXPECT_FALSE(off.applies_at(2));
  off = s;
  off.layers.clear();
  EXPECT_FALSE(off.applies_at(2));
}

TEST(SkipLayerGuidance, PushesAwayFromTheSkippingPrediction) {
  const SkipLayerGuidance s = slg_over(20);
  std::vector<float> guided = {1.0f, 2.0f};
  s.apply(guided, {3.0f, 3.0f}, {1.0f, 4.0f});
  EXPECT_EQ(guided, (std::vector<float>{1.0f + 2.0f * 2.0f, 2.0f - 2.0f * 1.0f}));
}

TEST(SkipLayerGuidance, TheDenoiserAddsItOnlyInTheWindow) {
  DiscreteSchedule schedule(Prediction::Sd3Flow, {}, 3.0f);
  int skipping_calls = 0;
  SkipLayerGuidance s = slg_over(20);
  s.predict = [&](const std::vector<float>& x, float) {
    ++skipping_calls;
    return std::vector<float>(x.size(), 0.0f);
  };
  GuidanceOptions o;
  o.cfg_scale = 1.0f;
  o.skip_layer = &s;
  GuidedDenoiser d(
      schedule,
      [](const std::vector<float>& x, float, const GuidancePasses&) {
        return std::vector<std::vector<float>>{std::vector<float>(x.size(), 1.0f)};
      },
      o);
  const std::vector<float> x = {0.5f, -0.5f};
  const Denoised outside = d(x, 0.5f, 5);
  EXPECT_EQ(skipping_calls, 0);
  const Denoised inside = d(x, 0.5f, 2);
  EXPECT_EQ(skipping_calls, 1);
  // flow: x0 = x - sigma * out; the guided output is 1 + 2 * (1 - 0) = 3 inside.
  EXPECT_FLOAT_EQ(outside.x0[0], 0.5f - 0.5f * 1.0f);
  EXPECT_FLOAT_EQ(inside.x0[0], 0.5f - 0.5f * 3.0f);
}

}  // namespace
}  // namespace sd::sampling
