#include "sampling/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/error.h"

namespace sd::sampling {
namespace {

TEST(DiscreteSchedule, ScaledLinearTableOfStableDiffusion) {
  const std::vector<float> a = scaled_linear_alphas_cumprod();
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_FLOAT_EQ(a[0], 1.0f - 0.00085f);  // the first beta is linear_start itself
  const DiscreteSchedule s;
  // The widely quoted SD sigma range.
  EXPECT_NEAR(s.sigma_max(), 14.6146, 1e-4);
  EXPECT_NEAR(s.sigma_min(), 0.0291675, 1e-6);
  EXPECT_EQ(s.sigma_min(), s.sigmas().front());
  EXPECT_EQ(s.sigma_max(), s.sigmas().back());
  for (size_t i = 1; i < s.sigmas().size(); ++i) ASSERT_GT(s.sigmas()[i], s.sigmas()[i - 1]);
}

TEST(DiscreteSchedule, SigmaAndTimestepAreInverse) {
  const DiscreteSchedule s;
  EXPECT_FLOAT_EQ(s.t_to_sigma(999), s.sigma_max());  // exp(log(sigma)), within an ulp
  EXPECT_FLOAT_EQ(s.t_to_sigma(0), s.sigma_min());
  EXPECT_NEAR(s.sigma_to_t(s.sigma_max()), 999.0f, 1e-3);
  for (float t : {0.0f, 1.0f, 17.25f, 500.5f, 998.75f}) {
    EXPECT_NEAR(s.sigma_to_t(s.t_to_sigma(t)), t, 2e-3) << t;
  }
  // Between two training steps the log sigma is interpolated linearly.
  const float mid = s.t_to_sigma(100.5f);
  EXPECT_NEAR(std::log(mid), 0.5 * (std::log(s.sigmas()[100]) + std::log(s.sigmas()[101])), 1e-6);
  // Beyond the table the timestep clamps to its ends.
  EXPECT_EQ(s.sigma_to_t(100.0f), 999.0f);
  EXPECT_EQ(s.sigma_to_t(0.001f), 0.0f);
}

TEST(DiscreteSchedule, TimestepAHairBelowZeroReadsTheLargestSigmaAsItsLowerNeighbour) {
  const DiscreteSchedule s;
  const float t = -6.1035156e-05f;  // where a 22-step discrete grid ends
  const float w = t + 1;
  const double want = std::exp((1 - w) * s.sigma_max() + w * std::log(s.sigma_min()));
  EXPECT_NEAR(s.t_to_sigma(t), want, 1e-7);
  EXPECT_GT(s.t_to_sigma(t), s.sigma_min());
  EXPECT_THROW(s.t_to_sigma(-1.5f), Error);
  EXPECT_THROW(s.t_to_sigma(999.5f), Error);
}

TEST(DiscreteSchedule, ScalingsFollowThePrediction) {
  const float sigma = 1.0f;
  const Scalings eps = DiscreteSchedule(Prediction::Eps).scalings(sigma);
  EXPECT_FLOAT_EQ(eps.c_skip, 1.0f);
  EXPECT_FLOAT_EQ(eps.c_out, -1.0f);
  EXPECT_FLOAT_EQ(eps.c_in, 1.0f / std::sqrt(2.0f));
  const Scalings v = DiscreteSchedule(Prediction::V).scalings(sigma);
  EXPECT_FLOAT_EQ(v.c_skip, 0.5f);
  EXPECT_FLOAT_EQ(v.c_out, -1.0f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(v.c_in, 1.0f / std::sqrt(2.0f));
  const Scalings flow = DiscreteSchedule(Prediction::Sd3Flow).scalings(0.25f);
  EXPECT_FLOAT_EQ(flow.c_skip, 1.0f);
  EXPECT_FLOAT_EQ(flow.c_out, -0.25f);
  EXPECT_FLOAT_EQ(flow.c_in, 1.0f);
}

TEST(DiscreteSchedule, FlowSchedulesSpanZeroToOne) {
  const DiscreteSchedule sd3(Prediction::Sd3Flow, {}, 3.0f);
  EXPECT_FLOAT_EQ(sd3.sigma_max(), 1.0f);
  EXPECT_FLOAT_EQ(sd3.sigma_min(), 3.0f * 0.001f / (1 + 2.0f * 0.001f));
  EXPECT_FLOAT_EQ(sd3.sigma_to_t(0.5f), 500.0f);
  const DiscreteSchedule flux(Prediction::FluxFlow, {}, 1.15f);
  EXPECT_FLOAT_EQ(flux.sigma_max(), 1.0f);
  EXPECT_FLOAT_EQ(flux.t_to_sigma(499), std::exp(1.15f) / (std::exp(1.15f) + 1.0f));
  EXPECT_FLOAT_EQ(flux.sigma_to_t(0.3f), 0.3f);
  const DiscreteSchedule edm(Prediction::EdmV);
  EXPECT_FLOAT_EQ(edm.sigma_min(), 0.002f);
  EXPECT_FLOAT_EQ(edm.sigma_max(), 120.0f);
  // EDM's two maps differ by the factor 1000: t_to_sigma(1000 * sigma_to_t(s)) = s.
  EXPECT_NEAR(edm.t_to_sigma(edm.sigma_to_t(3.0f) * 1000), 3.0f, 1e-5);
}

TEST(DiscreteSchedule, TimestepShiftScalesTheTimestepAndFollowsItsSigma) {
  const DiscreteSchedule s;
  const float sigma = s.t_to_sigma(800);
  const ModelStep plain = s.model_step(sigma);
  EXPECT_NEAR(plain.timestep, 800.0f, 1e-2);
  const ModelStep shifted = s.model_step(sigma, 250);
  EXPECT_EQ(shifted.timestep, 200.0f);  // round(800 * 250 / 1000)
  const Scalings at_200 = s.scalings(s.t_to_sigma(200));
  EXPECT_EQ(shifted.scalings.c_in, plain.scalings.c_in);
  EXPECT_EQ(shifted.scalings.c_out, at_200.c_out);
  EXPECT_FLOAT_EQ(shifted.scalings.c_skip, at_200.c_skip * plain.scalings.c_in / at_200.c_in);
}

TEST(DiscreteSchedule, NoisingAddsScaledNoiseOrInterpolatesForFlow) {
  const std::vector<float> latent = {1.0f, -2.0f};
  const std::vector<float> noise = {0.5f, 0.25f};
  EXPECT_EQ(DiscreteSchedule().noised_latent(4.0f, noise, latent),
            (std::vector<float>{3.0f, -1.0f}));
  const DiscreteSchedule flow(Prediction::Sd3Flow);
  EXPECT_EQ(flow.noised_latent(0.25f, noise, latent), (std::vector<float>{0.875f, -1.4375f}));
  EXPECT_EQ(flow.inverse_noise_scaling(0.5f, {1.0f}), std::vector<float>{2.0f});
  EXPECT_EQ(DiscreteSchedule().inverse_noise_scaling(0.5f, {1.0f}), std::vector<float>{1.0f});
  EXPECT_FLOAT_EQ(DiscreteSchedule().noise_level_to_sigma(0.5f), 1.0f);
  EXPECT_FLOAT_EQ(flow.noise_level_to_sigma(0.5f), 0.5f);
  EXPECT_THROW(DiscreteSchedule().noised_latent(1.0f, {1.0f}, latent), Error);
}

TEST(DiscreteSchedule, CheckpointTableReplacesTheDefaultAndIsValidated) {
  std::vector<float> table(1000);
  for (int i = 0; i < 1000; ++i) table[i] = 1.0f - 0.0009f * (i + 1);
  const DiscreteSchedule s(Prediction::Eps, table);
  EXPECT_FLOAT_EQ(s.sigma_min(), std::sqrt((1 - table[0]) / table[0]));
  EXPECT_THROW(DiscreteSchedule(Prediction::Eps, std::vector<float>(999, 0.5f)), Error);
  table[10] = 0.0f;
  EXPECT_THROW(DiscreteSchedule(Prediction::Eps, table), Error);
}

TEST(Prediction, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (Prediction p : {Prediction::Eps, Prediction::V, Prediction::EdmV, Prediction::Sd3Flow,
                       Prediction::FluxFlow}) {
    EXPECT_EQ(parse_prediction(prediction_name(p)), p);
  }
  try {
    parse_prediction("x0");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown prediction 'x0'; valid predictions: eps, v, edm_v, sd3_flow, flux_flow");
  }
}

}  // namespace
}  // namespace sd::sampling
