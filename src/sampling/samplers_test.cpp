#include "sampling/samplers.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sampling/rng_philox.h"
#include "tensor/error.h"

namespace sd::sampling {
namespace {

constexpr SampleMethod kAll[] = {
    SampleMethod::Euler,        SampleMethod::EulerA,       SampleMethod::Heun,
    SampleMethod::Dpm2,         SampleMethod::Dpmpp2sA,     SampleMethod::Dpmpp2m,
    SampleMethod::Dpmpp2mV2,    SampleMethod::Ipndm,        SampleMethod::IpndmV,
    SampleMethod::Lcm,          SampleMethod::DdimTrailing, SampleMethod::Tcd,
    SampleMethod::ResMultistep, SampleMethod::Res2s,        SampleMethod::ErSde,
    SampleMethod::EulerCfgPp,   SampleMethod::EulerACfgPp,  SampleMethod::EulerGe,
    SampleMethod::Dpmpp2mSde,   SampleMethod::Dpmpp2mSdeBt, SampleMethod::Lms,
};

// Records the size of every draw and hands out the Philox stream.
class CountingRng final : public Rng {
 public:
  std::vector<float> randn(size_t n) override {
    sizes.push_back(n);
    return inner.randn(n);
  }
  std::vector<size_t> sizes;
  PhiloxRng inner{42};
};

std::vector<float> karras(int steps) {
  return make_sigmas(Scheduler::Karras, steps, DiscreteSchedule());
}

// The ideal denoiser for data ~ N(mu, s_d^2) per element: E[x0 | x] at noise sigma.
Denoiser gaussian_data(float mu, float s_d) {
  return [=](const std::vector<float>& x, float sigma, int) {
    Denoised d;
    for (float v : x) {
      d.x0.push_back((s_d * s_d * v + sigma * sigma * mu) / (s_d * s_d + sigma * sigma));
    }
    d.uncond_x0 = d.x0;
    return d;
  };
}

// The probability-flow ODE of that data keeps (x - mu) / sqrt(s_d^2 + sigma^2) constant.
double exact_endpoint(double x, double mu, double s_d, double sigma_max) {
  return mu + (x - mu) * s_d / std::sqrt(s_d * s_d + sigma_max * sigma_max);
}

TEST(Samplers, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (SampleMethod m : kAll) EXPECT_EQ(parse_sample_method(sample_method_name(m)), m);
  try {
    parse_sample_method("ddim");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown sampling method 'ddim'; valid methods: euler, euler_a, heun, dpm2, "
                 "dpm++2s_a, dpm++2m, dpm++2mv2, ipndm, ipndm_v, lcm, ddim_trailing, tcd, "
                 "res_multistep, res_2s, er_sde, euler_cfg_pp, euler_a_cfg_pp, euler_ge, "
                 "dpm++2m_sde, dpm++2m_sde_bt, lms");
  }
}

TEST(Samplers, DefaultsOfStableDiffusionCpp) {
  EXPECT_EQ(default_eta(SampleMethod::EulerA), 1.0f);
  EXPECT_EQ(default_eta(SampleMethod::DdimTrailing), 0.0f);
  EXPECT_EQ(default_eta(SampleMethod::Euler), 0.0f);
  EXPECT_EQ(default_sample_method(false), SampleMethod::EulerA);
  EXPECT_EQ(default_sample_method(true), SampleMethod::Euler);
  EXPECT_EQ(default_scheduler(SampleMethod::EulerA, Prediction::Eps), Scheduler::Discrete);
  EXPECT_EQ(default_scheduler(SampleMethod::Lcm, Prediction::Eps), Scheduler::Lcm);
  EXPECT_EQ(default_scheduler(SampleMethod::DdimTrailing, Prediction::V), Scheduler::Simple);
  EXPECT_EQ(default_scheduler(SampleMethod::Euler, Prediction::EdmV), Scheduler::Exponential);
}

// With a model that always predicts the same x0, every sampler lands on it at sigma 0
// (TCD excepted: its last step stops at the first training timestep, not at sigma 0).
TEST(Samplers, ConstantPredictionIsReachedAtSigmaZero) {
  const std::vector<float> target = {0.5f, -1.25f, 2.0f};
  const Denoiser constant = [&](const std::vector<float>&, float, int) {
    return Denoised{target, target};
  };
  for (SampleMethod m : kAll) {
    if (m == SampleMethod::Tcd) continue;
    PhiloxRng rng(1);
    const std::vector<float> x0 = rng.randn(3);
    std::vector<float> x(3);
    const std::vector<float> sigmas = karras(6);
    for (int i = 0; i < 3; ++i) x[i] = x0[i] * sigmas[0];
    const std::vector<float> out = sample(m, constant, x, sigmas, rng);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], target[i], 1e-4) << sample_method_name(m);
  }
}

// On Gaussian data the ODE has a closed form. Euler converges at first order; the
// second-order and multistep samplers are several times closer at the same step count
// and gain more from doubling it. (lcm and er_sde are not ODE solvers at eta 0: the one
// re-predicts x0, the other keeps its SDE drift without the noise.)
TEST(Samplers, DeterministicSamplersSolveTheGaussianOdeAndHigherOrderDoBetter) {
  const float mu = 0.3f, s_d = 0.8f;
  const auto error = [&](SampleMethod m, int steps) {
    const std::vector<float> sigmas = karras(steps);
    const std::vector<float> x = {-2.0f * sigmas[0], 0.5f * sigmas[0], 1.5f * sigmas[0]};
    PhiloxRng rng(0);
    SamplerOptions o;
    o.eta = 0.0f;
    const std::vector<float> out = sample(m, gaussian_data(mu, s_d), x, sigmas, rng, o);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(out[i] - exact_endpoint(x[i], mu, s_d, sigmas[0])));
    }
    return worst;
  };
  const double euler = error(SampleMethod::Euler, 20);
  EXPECT_LT(euler, 0.2);
  EXPECT_NEAR(euler / error(SampleMethod::Euler, 40), 2.0, 0.3);  // first order
  EXPECT_GT(error(SampleMethod::Heun, 20) / error(SampleMethod::Heun, 40), 3.5);
  for (SampleMethod m :
       {SampleMethod::Heun, SampleMethod::Dpm2, SampleMethod::Dpmpp2sA, SampleMethod::Dpmpp2m,
        SampleMethod::Ipndm, SampleMethod::IpndmV, SampleMethod::Res2s, SampleMethod::ResMultistep,
        SampleMethod::Dpmpp2mSde, SampleMethod::Dpmpp2mSdeBt}) {
    EXPECT_LT(error(m, 20), euler / 3) << sample_method_name(m) << " vs euler " << euler;
  }
  // At eta 0 these are Euler (DDIM) steps, or Euler with the CFG++ split.
  for (SampleMethod m : {SampleMethod::EulerA, SampleMethod::DdimTrailing, SampleMethod::Tcd,
                         SampleMethod::EulerCfgPp, SampleMethod::EulerACfgPp}) {
    EXPECT_NEAR(error(m, 20), euler, 0.1 * euler) << sample_method_name(m);
  }
  // Variants trading accuracy for smoothness still beat plain Euler.
  for (SampleMethod m : {SampleMethod::Lms, SampleMethod::Dpmpp2mV2, SampleMethod::EulerGe}) {
    EXPECT_LT(error(m, 20), euler) << sample_method_name(m);
  }
}

// Ancestral Euler on data concentrated at 0 keeps x ~ N(0, sigma^2) at every step: the
// deterministic part shrinks the variance to sigma_down^2 and the noise adds sigma_up^2.
TEST(Samplers, AncestralNoiseKeepsTheMarginalVariance) {
  for (Prediction prediction : {Prediction::Eps, Prediction::Sd3Flow}) {
    const bool flow = is_flow(prediction);
    const std::vector<float> sigmas =
        flow ? std::vector<float>{1.0f, 0.8f, 0.5f, 0.25f, 0.0f} : karras(5);
    std::vector<double> variances;
    const Denoiser zero = [&](const std::vector<float>& x, float, int) {
      double square = 0;
      for (float v : x) square += double{v} * v;
      variances.push_back(square / x.size());
      return Denoised{std::vector<float>(x.size(), 0.0f), {}};
    };
    PhiloxRng rng(5);
    std::vector<float> x = rng.randn(40000);
    for (float& v : x) v *= sigmas[0];
    SamplerOptions o;
    o.prediction = prediction;
    sample(SampleMethod::EulerA, zero, x, sigmas, rng, o);
    ASSERT_EQ(variances.size(), sigmas.size() - 1);
    for (size_t i = 0; i < variances.size(); ++i) {
      EXPECT_NEAR(std::sqrt(variances[i]) / sigmas[i], 1.0, 0.02)
          << prediction_name(prediction) << " step " << i;
    }
  }
}

TEST(Samplers, NoiseDrawsFollowTheReferenceOrderAndSizes) {
  const std::vector<float> sigmas = karras(4);
  const Denoiser model = gaussian_data(0.0f, 1.0f);
  const std::vector<float> x(7, 1.0f);
  const auto draws = [&](SampleMethod m, std::optional<float> eta = std::nullopt) {
    CountingRng rng;
    SamplerOptions o;
    o.eta = eta;
    sample(m, model, x, sigmas, rng, o);
    return rng.sizes;
  };
  const std::vector<size_t> every_step_but_last(3, 7);
  EXPECT_EQ(draws(SampleMethod::EulerA), every_step_but_last);
  EXPECT_TRUE(draws(SampleMethod::EulerA, 0.0f).empty());
  EXPECT_TRUE(draws(SampleMethod::Euler).empty());
  EXPECT_TRUE(draws(SampleMethod::DdimTrailing).empty());               // eta 0 by default
  EXPECT_EQ(draws(SampleMethod::Dpmpp2sA, 0.0f), every_step_but_last);  // even at eta 0
  EXPECT_EQ(draws(SampleMethod::EulerACfgPp, 0.0f), every_step_but_last);
  EXPECT_EQ(draws(SampleMethod::Lcm), every_step_but_last);
  EXPECT_EQ(draws(SampleMethod::Dpmpp2mSde), every_step_but_last);
  EXPECT_EQ(draws(SampleMethod::ErSde), every_step_but_last);
  EXPECT_EQ(draws(SampleMethod::Tcd, 0.3f), every_step_but_last);
  EXPECT_EQ(draws(SampleMethod::Dpmpp2mSdeBt), std::vector<size_t>{2});  // the tree's seed
}

TEST(Samplers, TwoCallStepsNumberTheirCallsLikeTheReference) {
  std::vector<int> steps;
  const Denoiser record = [&](const std::vector<float>& x, float, int step) {
    steps.push_back(step);
    return Denoised{x, {}};
  };
  PhiloxRng rng(0);
  sample(SampleMethod::Heun, record, {1.0f}, karras(3), rng);
  EXPECT_EQ(steps, (std::vector<int>{-1, 1, -2, 2, -3}));
  steps.clear();
  sample(SampleMethod::Euler, record, {1.0f}, karras(3), rng);
  EXPECT_EQ(steps, (std::vector<int>{1, 2, 3}));
}

TEST(Samplers, SameSeedSameImageOtherSeedOtherImage) {
  const std::vector<float> sigmas = karras(5);
  const std::vector<float> x(16, 3.0f);
  const auto run = [&](uint64_t seed) {
    auto rng = make_rng(RngType::Cuda, seed);
    return sample(SampleMethod::EulerA, gaussian_data(0.1f, 0.5f), x, sigmas, *rng);
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(Samplers, BadInputsAreErrorsNotCrashes) {
  PhiloxRng rng(0);
  const Denoiser wrong_size = [](const std::vector<float>&, float, int) {
    return Denoised{{1.0f}, {}};
  };
  EXPECT_THROW(sample(SampleMethod::Euler, wrong_size, {1.0f, 2.0f}, karras(2), rng), Error);
  // CFG++ needs the unconditional prediction too.
  const Denoiser no_uncond = [](const std::vector<float>& x, float, int) {
    return Denoised{x, {}};
  };
  EXPECT_THROW(sample(SampleMethod::EulerCfgPp, no_uncond, {1.0f}, karras(2), rng), Error);
  EXPECT_THROW(sample(SampleMethod::Euler, no_uncond, {1.0f}, {}, rng), Error);
  EXPECT_THROW(sample(SampleMethod::Euler, no_uncond, {1.0f}, {1.0f, NAN, 0.0f}, rng), Error);
}

}  // namespace
}  // namespace sd::sampling
