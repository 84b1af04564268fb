#include "sampling/schedulers.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/error.h"

namespace sd::sampling {
namespace {

const DiscreteSchedule& sd_schedule() {
  static const DiscreteSchedule s;
  return s;
}

constexpr Scheduler kAll[] = {
    Scheduler::Discrete,    Scheduler::Karras,     Scheduler::Exponential, Scheduler::Ays,
    Scheduler::Gits,        Scheduler::SgmUniform, Scheduler::Simple,      Scheduler::Smoothstep,
    Scheduler::KlOptimal,   Scheduler::Lcm,        Scheduler::BongTangent, Scheduler::Ltx2,
    Scheduler::LogitNormal, Scheduler::Flux2,      Scheduler::Flux,        Scheduler::Beta,
};

bool is_flow_scheduler(Scheduler s) {
  return s == Scheduler::Ltx2 || s == Scheduler::LogitNormal || s == Scheduler::Flux2 ||
         s == Scheduler::Flux;
}

TEST(Schedulers, EveryOneGivesStepsPlusOneDescendingSigmasEndingAtZero) {
  const DiscreteSchedule flux(Prediction::FluxFlow, {}, 1.15f);
  SchedulerOptions options;
  options.image_seq_len = 1024;
  for (Scheduler scheduler : kAll) {
    const DiscreteSchedule& schedule = is_flow_scheduler(scheduler) ? flux : sd_schedule();
    for (int steps : {2, 3, 10, 22, 30}) {
      const std::vector<float> s = make_sigmas(scheduler, steps, schedule, options);
      SCOPED_TRACE(std::string(scheduler_name(scheduler)) + " " + std::to_string(steps));
      if (scheduler != Scheduler::Beta) {
        ASSERT_EQ(s.size(), size_t(steps) + 1);
      }
      EXPECT_EQ(s.back(), 0.0f);
      for (size_t i = 1; i < s.size(); ++i) EXPECT_LT(s[i], s[i - 1]) << "at " << i;
      EXPECT_LE(s.front(), schedule.sigma_max() * 1.0001f);
    }
  }
}

TEST(Schedulers, DiscreteSpansTheTrainingSigmas) {
  const auto& sd = sd_schedule();
  const std::vector<float> s = make_sigmas(Scheduler::Discrete, 4, sd);
  EXPECT_EQ(s, (std::vector<float>{sd.t_to_sigma(999), sd.t_to_sigma(666), sd.t_to_sigma(333),
                                   sd.t_to_sigma(0), 0.0f}));
  EXPECT_NEAR(s[0], 14.6146f, 1e-4);
  EXPECT_NEAR(s[3], 0.0291675f, 1e-6);
  EXPECT_EQ(make_sigmas(Scheduler::Discrete, 1, sd),
            (std::vector<float>{sd.t_to_sigma(999), 0.0f}));
  // At 22 steps the float grid ends just below t = 0, a hair above sigma_min.
  const std::vector<float> s22 = make_sigmas(Scheduler::Discrete, 22, sd);
  EXPECT_EQ(s22[21], sd.t_to_sigma(-6.1035156e-05f));
  EXPECT_GT(s22[21], sd.sigma_min());
}

TEST(Schedulers, KarrasFollowsItsFormula) {
  const auto& sd = sd_schedule();
  const std::vector<float> s = make_sigmas(Scheduler::Karras, 3, sd);
  const double lo = std::pow(double{sd.sigma_min()}, 1 / 7.0);
  const double hi = std::pow(double{sd.sigma_max()}, 1 / 7.0);
  EXPECT_NEAR(s[0], sd.sigma_max(), 1e-4);
  EXPECT_NEAR(s[1], std::pow(0.5 * (lo + hi), 7.0), 1e-4);
  EXPECT_NEAR(s[2], sd.sigma_min(), 1e-6);
}

TEST(Schedulers, ExponentialIsGeometric) {
  const std::vector<float> s = make_sigmas(Scheduler::Exponential, 5, sd_schedule());
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(s[i] / s[i - 1], s[i + 1] / s[i], 1e-5);
  EXPECT_NEAR(s[0], sd_schedule().sigma_max(), 1e-4);
  EXPECT_NEAR(s[4], sd_schedule().sigma_min(), 1e-6);
}

TEST(Schedulers, KlOptimalIsUniformInArctangent) {
  const auto& sd = sd_schedule();
  const std::vector<float> s = make_sigmas(Scheduler::KlOptimal, 3, sd);
  EXPECT_NEAR(s[1], std::tan(0.5 * (std::atan(sd.sigma_min()) + std::atan(sd.sigma_max()))), 1e-4);
}

TEST(Schedulers, TimestepGridsOfSimpleLcmSgmUniformSmoothstep) {
  const auto& sd = sd_schedule();
  const auto at = [&](std::vector<float> ts) {
    std::vector<float> out;
    for (float t : ts) out.push_back(sd.t_to_sigma(t));
    out.push_back(0.0f);
    return out;
  };
  EXPECT_EQ(make_sigmas(Scheduler::Simple, 4, sd), at({999, 749, 499, 249}));
  EXPECT_EQ(make_sigmas(Scheduler::Lcm, 4, sd), at({999, 759, 499, 259}));
  EXPECT_EQ(make_sigmas(Scheduler::SgmUniform, 4, sd), at({999, 749.25f, 499.5f, 249.75f}));
  EXPECT_EQ(make_sigmas(Scheduler::Smoothstep, 2, sd), at({999, 500}));
}

TEST(Schedulers, AlignYourStepsUsesThePublishedLevelsPerFamily) {
  SchedulerOptions sd1;
  const std::vector<float> s = make_sigmas(Scheduler::Ays, 10, sd_schedule(), sd1);
  EXPECT_FLOAT_EQ(s[0], 14.6146412293f);
  EXPECT_FLOAT_EQ(s[1], 6.4745760956f);
  EXPECT_FLOAT_EQ(s[9], 0.1515232662f);
  SchedulerOptions xl;
  xl.ays_levels = AysLevels::SDXL;
  EXPECT_FLOAT_EQ(make_sigmas(Scheduler::Ays, 10, sd_schedule(), xl)[1], 6.3184485287f);
  // Other step counts interpolate log sigma over the same span.
  const std::vector<float> s20 = make_sigmas(Scheduler::Ays, 20, sd_schedule(), sd1);
  EXPECT_NEAR(s20[0], 14.6146412293f, 1e-4);
  EXPECT_NEAR(s20[2], 6.4745760956f, 1e-3);  // every other level is an original one
  SchedulerOptions other;
  other.ays_levels = AysLevels::None;
  EXPECT_THROW(make_sigmas(Scheduler::Ays, 10, sd_schedule(), other), Error);
}

TEST(Schedulers, GitsUsesItsTableUpToTwentyStepsThenInterpolates) {
  const std::vector<float> s10 = make_sigmas(Scheduler::Gits, 10, sd_schedule());
  EXPECT_FLOAT_EQ(s10[0], 14.61464119f);
  EXPECT_FLOAT_EQ(s10[10], 0.0f);  // the table's last level is replaced by 0
  const std::vector<float> s2 = make_sigmas(Scheduler::Gits, 2, sd_schedule());
  EXPECT_EQ(s2, (std::vector<float>{14.61464119f, 0.803307f, 0.0f}));
  const std::vector<float> s40 = make_sigmas(Scheduler::Gits, 40, sd_schedule());
  EXPECT_NEAR(s40[0], 14.61464119f, 1e-3);  // float-accumulated grids end near, not at, 1
  EXPECT_THROW(make_sigmas(Scheduler::Gits, 1, sd_schedule()), Error);
}

TEST(Schedulers, FluxShiftsTowardsHighNoiseWithResolution) {
  const DiscreteSchedule flux(Prediction::FluxFlow, {}, 1.15f);
  SchedulerOptions o;
  o.image_seq_len = 4096;  // mu = max_shift
  const std::vector<float> s = make_sigmas(Scheduler::Flux, 4, flux, o);
  EXPECT_FLOAT_EQ(s[0], 1.0f);
  EXPECT_FLOAT_EQ(s[2], std::exp(1.15f) / (std::exp(1.15f) + 1.0f));
  o.image_seq_len = 256;  // mu = base_shift
  EXPECT_FLOAT_EQ(make_sigmas(Scheduler::Flux, 4, flux, o)[2],
                  std::exp(0.5f) / (std::exp(0.5f) + 1.0f));
}

TEST(Schedulers, BetaStartsAtTheLastTimestep) {
  const std::vector<float> s = make_sigmas(Scheduler::Beta, 10, sd_schedule());
  EXPECT_EQ(s[0], sd_schedule().t_to_sigma(999));
  EXPECT_EQ(s.size(), 11u);
}

TEST(Schedulers, StepsBelowOneAreRejected) {
  EXPECT_THROW(make_sigmas(Scheduler::Discrete, 0, sd_schedule()), Error);
}

TEST(Schedulers, NamesRoundTripAndNormalMeansDiscrete) {
  for (Scheduler s : kAll) EXPECT_EQ(parse_scheduler(scheduler_name(s)), s);
  EXPECT_EQ(parse_scheduler("normal"), Scheduler::Discrete);
  try {
    parse_scheduler("linear");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown scheduler 'linear'; valid schedulers: discrete, karras, exponential, "
                 "ays, gits, sgm_uniform, simple, smoothstep, kl_optimal, lcm, bong_tangent, "
                 "ltx2, logit_normal, flux2, flux, beta (normal = discrete)");
  }
}

TEST(CustomSigmas, ParsesACommaListWithOptionalBrackets) {
  EXPECT_EQ(parse_sigmas("[14.61, 7.8 ,3.5,0]"), (std::vector<float>{14.61f, 7.8f, 3.5f, 0.0f}));
  EXPECT_EQ(parse_sigmas("1,0"), (std::vector<float>{1.0f, 0.0f}));
  try {
    parse_sigmas("1,abc,0");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'abc'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_sigmas("1.5x,0"), Error);
  EXPECT_THROW(parse_sigmas("5"), Error);
  EXPECT_THROW(parse_sigmas(""), Error);
}

TEST(Img2Img, StrengthKeepsTheLastStepsPlusOne) {
  const std::vector<float> s = make_sigmas(Scheduler::Discrete, 10, sd_schedule());
  // t_enc = int(10 * 0.75) = 7: the schedule from index 10 - 7 - 1 = 2.
  EXPECT_EQ(img2img_sigmas(s, 10, 0.75f), std::vector<float>(s.begin() + 2, s.end()));
  EXPECT_EQ(img2img_sigmas(s, 10, 1.0f), s);
  EXPECT_EQ(img2img_sigmas(s, 10, 0.0f), std::vector<float>(s.end() - 2, s.end()));
  EXPECT_EQ(img2img_sigmas(s, 10, 0.95f), s);  // t_enc = 9: every step
  EXPECT_THROW(img2img_sigmas(s, 11, 0.5f), Error);
}

}  // namespace
}  // namespace sd::sampling
