#include "sampling/step_cache.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sampling/guided_denoiser.h"
#include "sampling/rng_std_default.h"
#include "sampling/samplers.h"
#include "sampling/schedulers.h"
#include "sampling/spectrum_forecast.h"
#include "sampling/ucache.h"
#include "tensor/error.h"

namespace sd::sampling {
namespace {

std::string parse_error(CacheMode mode, const std::string& text) {
  CacheOptions o;
  o.mode = mode;
  try {
    parse_cache_options(mode, text, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CacheOptions, ParsedStrictlyPerMode) {
  CacheOptions o;
  o.mode = CacheMode::UCache;
  parse_cache_options(o.mode, "threshold=1.5,start=0.2,end=0.9,decay=0.5,relative=0,reset=0", o);
  EXPECT_EQ(o.ucache.threshold, 1.5f);
  EXPECT_EQ(o.ucache.start, 0.2f);
  EXPECT_EQ(o.ucache.end, 0.9f);
  EXPECT_EQ(o.ucache.decay, 0.5f);
  EXPECT_FALSE(o.ucache.relative);
  EXPECT_FALSE(o.ucache.reset);
  o.mode = CacheMode::Spectrum;
  parse_cache_options(o.mode, "w=0.5,m=4,lam=2,window=3,flex=0.25,warmup=2,stop=0.8", o);
  EXPECT_EQ(o.spectrum.m, 4);
  EXPECT_EQ(o.spectrum.window, 3);
  EXPECT_EQ(o.spectrum.warmup, 2);
  EXPECT_EQ(o.spectrum.stop, 0.8f);

  EXPECT_NE(parse_error(CacheMode::UCache, "treshold=1")
                .find("ucache has no option 'treshold'; "
                      "its options: decay, end, relative"),
            std::string::npos);
  EXPECT_NE(parse_error(CacheMode::UCache, "w=0.5").find("has no option 'w'"), std::string::npos);
  EXPECT_NE(parse_error(CacheMode::UCache, "threshold").find("not key=value"), std::string::npos);
  // Empty and repeated keys are mistakes, not "the last one wins".
  EXPECT_NE(parse_error(CacheMode::UCache, "=1").find("has no option ''"), std::string::npos);
  EXPECT_NE(parse_error(CacheMode::UCache, "threshold=1,,end=0.9").find("'' is not key=value"),
            std::string::npos);
  EXPECT_NE(
      parse_error(CacheMode::UCache, "threshold=1,threshold=2").find("'threshold' is given twice"),
      std::string::npos);
  EXPECT_NE(parse_error(CacheMode::UCache, "threshold=abc").find("'abc' is not a number"),
            std::string::npos);
  EXPECT_NE(parse_error(CacheMode::UCache, "start=0.9,end=0.5").find("0 <= start < end <= 1"),
            std::string::npos);
  EXPECT_NE(parse_error(CacheMode::Spectrum, "window=0").find("window must be at least 1"),
            std::string::npos);
  EXPECT_NE(parse_error(CacheMode::Spectrum, "m=2.5").find("not a whole number"),
            std::string::npos);
  EXPECT_EQ(parse_error(CacheMode::CacheDit, "Fn=4,Bn=1,threshold=0.1,warmup=2"), "");
  EXPECT_EQ(parse_cache_mode("ucache"), CacheMode::UCache);
  EXPECT_THROW(parse_cache_mode("fastcache"), Error);
}

// Spectrum with its defaults over 20 calls: warmup 4, then a window of 2 growing by 0.5
// per computed call, nothing forecast from 90% of the steps on.
TEST(SpectrumForecast, ForecastsOnTheReferenceSchedule) {
  SpectrumForecast s(SpectrumOptions{}, 20);
  std::vector<int> computed;
  for (int call = 0; call < 20; ++call) {
    std::vector<float> x0;
    if (!s.forecast(x0)) {
      computed.push_back(call);
      s.observe(std::vector<float>(4, static_cast<float>(call)));
    }
  }
  EXPECT_EQ(computed, (std::vector<int>{0, 1, 2, 3, 5, 7, 10, 13, 17, 18, 19}));
  EXPECT_EQ(s.forecast_calls(), 9);
}

TEST(SpectrumForecast, TaylorOnlyContinuesTheLastStep) {
  SpectrumOptions o;
  o.w = 0.0f;
  o.warmup = 2;
  SpectrumForecast s(o, 10);
  s.observe({1.0f, 2.0f});
  s.observe({2.0f, 2.0f});
  std::vector<float> x0;
  ASSERT_TRUE(s.forecast(x0));
  EXPECT_FLOAT_EQ(x0[0], 2.5f);  // last + half the last change
  EXPECT_FLOAT_EQ(x0[1], 2.0f);
}

// A network whose output is the input plus a slowly turning residual: ucache reuses it
// inside its active range only, and never on a step's first call of two.
TEST(UCache, ReusesResidualsInsideTheActiveRange) {
  const std::vector<float> sigmas = {14.6f, 8.0f, 5.0f, 3.0f, 2.0f, 1.4f, 1.0f,
                                     0.7f,  0.5f, 0.3f, 0.2f, 0.1f, 0.0f};
  UCacheOptions o;
  o.threshold = 5.0f;  // generous: every estimate passes once the rates are known
  UCache cache(o, sigmas);
  int network_calls = 0;
  std::vector<int> reused_steps;
  for (size_t i = 0; i + 1 < sigmas.size(); ++i) {
    const int step = static_cast<int>(i) + 1;
    const std::vector<float> x_in = {sigmas[i], 1.0f, -sigmas[i] * 0.5f};
    std::vector<std::vector<float>> out = cache.reuse(step, sigmas[i], x_in, 2);
    if (out.empty()) {
      ++network_calls;
      out = {x_in, x_in};
      for (float& v : out[0]) v += 0.1f * static_cast<float>(step);
      for (float& v : out[1]) v -= 0.2f;
      cache.computed(step, x_in, out);
    } else {
      reused_steps.push_back(step);
      ASSERT_EQ(out.size(), 2u);
      EXPECT_NEAR(out[1][1], 1.0f - 0.2f, 1e-6f);  // its own residual, on this input
    }
  }
  // Active from step index 1 (sigma 8) to before index 11 (sigma 0.1): the first active
  // steps are computed to learn the rates; steps 1 and 12 are always computed.
  EXPECT_FALSE(reused_steps.empty());
  EXPECT_EQ(cache.skipped_steps(), static_cast<int>(reused_steps.size()));
  EXPECT_EQ(network_calls + static_cast<int>(reused_steps.size()), 12);
  for (int s : reused_steps) {
    EXPECT_GE(s, 4);
    EXPECT_LE(s, 11);
  }
  EXPECT_TRUE(cache.reuse(-3, sigmas[3], {1.0f, 1.0f, 1.0f}, 2).empty());
}

TEST(UCache, ZeroThresholdNeverReuses) {
  const std::vector<float> sigmas = {10.0f, 6.0f, 3.0f, 2.0f, 1.0f, 0.5f, 0.0f};
  UCacheOptions o;
  o.threshold = 0.0f;
  UCache cache(o, sigmas);
  for (size_t i = 0; i + 1 < sigmas.size(); ++i) {
    const std::vector<float> x_in = {sigmas[i]};
    const int step = static_cast<int>(i) + 1;
    EXPECT_TRUE(cache.reuse(step, sigmas[i], x_in, 1).empty());
    cache.computed(step, x_in, {{sigmas[i] * 2.0f}});
  }
  EXPECT_EQ(cache.skipped_steps(), 0);
}

// Through the guided denoiser and a real sampler: forecast calls do not reach the network.
TEST(StepCache, GuidedDenoiserSkipsTheNetworkWhenTheCacheAnswers) {
  const DiscreteSchedule schedule(Prediction::Eps);
  const std::vector<float> sigmas = make_sigmas(Scheduler::Discrete, 20, schedule);
  int network_calls = 0;
  NetworkCall network = [&](const std::vector<float>& x_in, float, const GuidancePasses& passes) {
    ++network_calls;
    std::vector<std::vector<float>> out = {x_in};
    for (float& v : out[0]) v *= 0.5f;
    if (passes.uncond) out.push_back(out[0]);
    return out;
  };
  SpectrumForecast spectrum(SpectrumOptions{}, sigmas.size() - 1);
  GuidanceOptions o;
  o.forecast = &spectrum;
  GuidedDenoiser denoiser(schedule, network, o);
  int sampler_calls = 0;
  denoiser.before = [&](const std::vector<float>&, const ModelStep&, int) { ++sampler_calls; };
  std::vector<float> x(8, 1.0f);
  StdDefaultRng rng(42);
  x = sample(SampleMethod::Euler, std::cref(denoiser), x, sigmas, rng, {});
  EXPECT_EQ(sampler_calls, 20);
  EXPECT_EQ(network_calls, 11);
  for (float v : x) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace sd::sampling
