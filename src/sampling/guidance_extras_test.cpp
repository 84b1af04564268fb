#include "sampling/guidance_extras.h"

#include <gtest/gtest.h>

#include <cmath>

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
