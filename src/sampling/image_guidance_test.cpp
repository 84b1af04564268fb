#include "sampling/guided_denoiser.h"

#include <gtest/gtest.h>

#include <vector>

namespace sd::sampling {
namespace {

TEST(ImageGuidance, ThreeWayCombinationMatchesAHandComputation) {
  // img_uncond + img_cfg * (uncond - img_uncond) + cfg * (cond - uncond), by hand:
  //   0.5 + 1.5 * (2 - 0.5) + 7 * (3 - 2) = 0.5 + 2.25 + 7 = 9.75
  //   -1 + 1.5 * (0 - -1) + 7 * (1 - 0) = -1 + 1.5 + 7 = 7.5
  const std::vector<float> out =
      image_guided({3.0f, 1.0f}, {2.0f, 0.0f}, {0.5f, -1.0f}, 7.0f, 1.5f);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0], 9.75f);
  EXPECT_FLOAT_EQ(out[1], 7.5f);
}

TEST(ImageGuidance, PassesFollowTheReferenceRule) {
  // No image guidance (img_cfg 1): the unconditional pass only when cfg is not 1.
  EXPECT_EQ(guidance_passes(7.0f, 1.0f).count(), 2u);
  EXPECT_TRUE(guidance_passes(7.0f, 1.0f).uncond);
  EXPECT_FALSE(guidance_passes(7.0f, 1.0f).img_uncond);
  EXPECT_EQ(guidance_passes(1.0f, 1.0f).count(), 1u);
  // Both scales differ from each other and from 1: all three passes.
  EXPECT_TRUE(guidance_passes(7.0f, 1.5f).uncond);
  EXPECT_TRUE(guidance_passes(7.0f, 1.5f).img_uncond);
  EXPECT_EQ(guidance_passes(7.0f, 1.5f).count(), 3u);
  // Equal scales: the text-unconditional pass drops out.
  EXPECT_FALSE(guidance_passes(7.0f, 7.0f).uncond);
  EXPECT_TRUE(guidance_passes(7.0f, 7.0f).img_uncond);
  EXPECT_EQ(guidance_passes(7.0f, 7.0f).count(), 2u);
  // cfg 1 with image guidance: image-unconditional and text-unconditional (1.5 != 1).
  EXPECT_TRUE(guidance_passes(1.0f, 1.5f).uncond);
  EXPECT_TRUE(guidance_passes(1.0f, 1.5f).img_uncond);
}

// A network whose outputs are constants per conditioning: cond 3, uncond 2, img_uncond 0.5.
struct FakeNetwork {
  std::vector<GuidancePasses> asked;
  NetworkCall call() {
    return [this](const std::vector<float>& x, float, const GuidancePasses& passes) {
      asked.push_back(passes);
      std::vector<std::vector<float>> out = {std::vector<float>(x.size(), 3.0f)};
      if (passes.uncond) out.emplace_back(x.size(), 2.0f);
      if (passes.img_uncond) out.emplace_back(x.size(), 0.5f);
      return out;
    };
  }
};

float guided_output(float cfg, float img_cfg, FakeNetwork& network) {
  const DiscreteSchedule schedule(Prediction::Eps);
  GuidanceOptions o;
  o.cfg_scale = cfg;
  o.img_cfg_scale = img_cfg;
  GuidedDenoiser denoiser(schedule, network.call(), o);
  const ModelStep ms = schedule.model_step(2.0f);
  // eps: x0 = x * c_skip + out * c_out with x = 0.
  return denoiser({0.0f}, 2.0f, 1).x0[0] / ms.scalings.c_out;
}

TEST(ImageGuidance, TheDenoiserRunsTheThirdPassAndCombinesThree) {
  FakeNetwork network;
  EXPECT_FLOAT_EQ(guided_output(7.0f, 1.5f, network), 0.5f + 1.5f * 1.5f + 7.0f * 1.0f);
  ASSERT_EQ(network.asked.size(), 1u);
  EXPECT_TRUE(network.asked[0].uncond);
  EXPECT_TRUE(network.asked[0].img_uncond);
}

TEST(ImageGuidance, ImageScaleOneIsTwoPassGuidance) {
  FakeNetwork network;
  EXPECT_FLOAT_EQ(guided_output(7.0f, 1.0f, network), 2.0f + 7.0f * (3.0f - 2.0f));
  ASSERT_EQ(network.asked.size(), 1u);
  EXPECT_FALSE(network.asked[0].img_uncond);
}

TEST(ImageGuidance, EqualScalesGuideAgainstTheImageUnconditionalAlone) {
  FakeNetwork network;
  // The three-way formula with img_cfg == cfg: img_uncond + cfg * (cond - img_uncond).
  const float three_way = image_guided({3.0f}, {2.0f}, {0.5f}, 7.0f, 7.0f)[0];
  EXPECT_FLOAT_EQ(guided_output(7.0f, 7.0f, network), three_way);
  EXPECT_FLOAT_EQ(three_way, 0.5f + 7.0f * (3.0f - 0.5f));
  ASSERT_EQ(network.asked.size(), 1u);
  EXPECT_FALSE(network.asked[0].uncond);
  EXPECT_TRUE(network.asked[0].img_uncond);
}

TEST(ImageGuidance, CfgPlusPlusStepsAlongTheImageUnconditional) {
  FakeNetwork network;
  const DiscreteSchedule schedule(Prediction::Eps);
  GuidanceOptions o;
  o.cfg_scale = 7.0f;
  o.img_cfg_scale = 1.5f;
  o.uncond_x0 = true;
  GuidedDenoiser denoiser(schedule, network.call(), o);
  const ModelStep ms = schedule.model_step(2.0f);
  EXPECT_FLOAT_EQ(denoiser({0.0f}, 2.0f, 1).uncond_x0[0], 0.5f * ms.scalings.c_out);
}

}  // namespace
}  // namespace sd::sampling
