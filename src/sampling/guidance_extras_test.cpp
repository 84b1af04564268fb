#include "sampling/guidance_extras.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "sampling/guided_denoiser.h"
#include "tensor/error.h"

namespace sd::sampling {
namespace {

TEST(GuidanceExtras, ParsesApgAndScheduleAndListsTheRest) {
  const GuidanceExtras e = parse_guidance_extras(
      " apg_eta=0.5; apg_momentum=-0.25,apg_norm_threshold=15 , guidance_schedule=7x2+3.5x3,"
      "beta_alpha=0.6");
  EXPECT_EQ(e.apg.eta, 0.5f);
  EXPECT_EQ(e.apg.momentum, -0.25f);
  EXPECT_EQ(e.apg.norm_threshold, 15.0f);
  EXPECT_TRUE(e.apg.enabled());
  EXPECT_EQ(e.schedule, (std::vector<float>{7, 7, 3.5f, 3.5f, 3.5f}));
  EXPECT_EQ(e.unknown, (std::vector<std::string>{"beta_alpha"}));
  EXPECT_FALSE(parse_guidance_extras("").apg.enabled());
  EXPECT_THROW(parse_guidance_extras("apg_eta"), Error);
  EXPECT_THROW(parse_guidance_extras("apg_eta=much"), Error);
  EXPECT_THROW(parse_guidance_extras("="), Error);      // no key
  EXPECT_THROW(parse_guidance_extras("a=b=c"), Error);  // two '='
  EXPECT_THROW(parse_guidance_extras("apg_eta=nan"), Error);
  EXPECT_THROW(parse_guidance_schedule("7x0"), Error);
  EXPECT_THROW(parse_guidance_schedule("7*3"), Error);
}

TEST(AdaptiveProjectedGuidance, EtaScalesTheParallelPart) {
  ApgOptions o;
  o.eta = 0.0f;  // drop the part of cond - uncond along cond
  AdaptiveProjectedGuidance apg(o);
  const std::vector<float> out = apg.guide({1.0f, 0.0f}, {0.0f, 1.0f}, 3.0f);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], -2.0f);  // cond + 2 * (0, -1)
}

TEST(AdaptiveProjectedGuidance, MomentumCarriesTheLastDirection) {
  ApgOptions o;
  o.momentum = 0.5f;
  AdaptiveProjectedGuidance apg(o);
  apg.guide({1.0f}, {0.0f}, 2.0f);                                 // delta 1
  const std::vector<float> out = apg.guide({1.0f}, {1.0f}, 2.0f);  // delta 0 + 0.5 * 1
  EXPECT_FLOAT_EQ(out[0], 1.5f);
}

TEST(AdaptiveProjectedGuidance, NormThresholdCapsTheDirection) {
  ApgOptions o;
  o.norm_threshold = 1.0f;
  AdaptiveProjectedGuidance apg(o);
  // |delta| per element 1, scaled to 256: capped by 1/256.
  const std::vector<float> out = apg.guide({1.0f, 1.0f}, {0.0f, 0.0f}, 2.0f);
  EXPECT_NEAR(out[0], 1.0f + 1.0f / 256.0f, 1e-6f);
}

TEST(AdaptiveProjectedGuidance, WithImageGuidanceNeutralOptionsGiveThreeWayCfg) {
  // eta 1, no momentum, no threshold: APG leaves the direction alone, so it must give what
  // classifier-free guidance gives, img_uncond + img * (uncond - img_uncond) + txt * (cond -
  // uncond), in each of the reference's cases.
  const std::vector<float> cond{1.0f, -2.0f}, uncond{0.5f, 0.25f}, img_uncond{-1.0f, 3.0f};
  auto three_way = [&](size_t i, float txt, float img) {
    return img_uncond[i] + img * (uncond[i] - img_uncond[i]) + txt * (cond[i] - uncond[i]);
  };
  ApgOptions neutral;
  for (const auto& [txt, img] : {std::pair{7.0f, 1.5f}, std::pair{1.0f, 1.5f}}) {
    AdaptiveProjectedGuidance apg(neutral);
    const std::vector<float> out = apg.guide(cond, &uncond, &img_uncond, txt, img);
    for (size_t i = 0; i < cond.size(); ++i)
      EXPECT_NEAR(out[i], three_way(i, txt, img), 1e-5f) << txt << " " << img << " " << i;
  }
  // Without the unconditional output (img_cfg == cfg): CFG against img_uncond.
  AdaptiveProjectedGuidance apg(neutral);
  const std::vector<float> out = apg.guide(cond, nullptr, &img_uncond, 4.0f, 4.0f);
  for (size_t i = 0; i < cond.size(); ++i)
    EXPECT_NEAR(out[i], img_uncond[i] + 4.0f * (cond[i] - img_uncond[i]), 1e-5f);
}

TEST(AdaptiveProjectedGuidance, WithImageGuidanceTheDirectionIsProjectedToo) {
  ApgOptions o;
  o.eta = 0.0f;
  AdaptiveProjectedGuidance apg(o);
  const std::vector<float> cond{1.0f, 0.0f}, uncond{0.0f, 1.0f}, img_uncond{0.0f, 1.0f};
  // img_uncond == uncond: the direction is cond - uncond = (1, -1); eta 0 drops its part
  // along cond, leaving (0, -1), stepped by cfg - 1 = 2.
  const std::vector<float> out = apg.guide(cond, &uncond, &img_uncond, 3.0f, 1.5f);
  EXPECT_NEAR(out[0], 1.0f, 1e-6f);
  EXPECT_NEAR(out[1], -2.0f, 1e-6f);
}

TEST(GuidedDenoiser, GuidanceScheduleIsReadFromItsEnd) {
  const DiscreteSchedule schedule(Prediction::Eps);
  GuidanceOptions o;
  o.cfg_scale = 7.0f;
  o.guidance_schedule = {1.0f, 2.0f, 3.0f};
  float seen_cond = 1.0f, seen_uncond = 0.0f;
  NetworkCall network = [&](const std::vector<float>& x, float, const GuidancePasses&) {
    return std::vector<std::vector<float>>{std::vector<float>(x.size(), seen_cond),
                                           std::vector<float>(x.size(), seen_uncond)};
  };
  GuidedDenoiser denoiser(schedule, network, o);
  const ModelStep ms = schedule.model_step(2.0f);
  const Denoised step1 = denoiser({0.0f}, 2.0f, 1);  // index 3 - 1 - 1 = 1: scale 2
  EXPECT_FLOAT_EQ(step1.x0[0], 2.0f * ms.scalings.c_out);
  const Denoised first_of_two = denoiser({0.0f}, 2.0f, -2);  // outside: --cfg-scale
  EXPECT_FLOAT_EQ(first_of_two.x0[0], 7.0f * ms.scalings.c_out);
}

}  // namespace
}  // namespace sd::sampling
