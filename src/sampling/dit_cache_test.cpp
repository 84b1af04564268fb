// The transformer step caches (easycache, and the rule dbcache, taylorseer and cache-dit
// share) on inputs whose changes are known, so the steps each rule skips can be counted.
#include <gtest/gtest.h>

#include <cmath>

#include "sampling/cache_dit.h"
#include "sampling/easycache.h"
#include "sampling/schedule.h"
#include "sampling/schedulers.h"
#include "sampling/step_cache.h"
#include "tensor/error.h"

namespace sd::sampling {
namespace {

// 20 steps: the block rule is active from step index 3 (15%) up to, not including, the
// sigma of index 19 (95%), so on step indices 3..18.
std::vector<float> twenty_sigmas() {
  std::vector<float> s;
  for (int i = 0; i <= 20; ++i) s.push_back(1.0f - static_cast<float>(i) / 20.0f);
  return s;
}

// Runs `cache` over the sigmas with inputs shrinking by `ratio` per step (a relative change
// of 1 - ratio), a network that adds a step-dependent residual; returns the skipped step
// indices.
std::vector<int> run(OutputCache& cache, const std::vector<float>& sigmas, float ratio,
                     size_t conditionings = 1) {
  std::vector<int> skipped;
  float scale = 1.0f;
  for (size_t i = 0; i + 1 < sigmas.size(); ++i, scale *= ratio) {
    const int step = static_cast<int>(i) + 1;
    const std::vector<float> x_in = {scale, -2.0f * scale, 0.5f * scale};
    std::vector<std::vector<float>> out = cache.reuse(step, sigmas[i], x_in, conditionings);
    if (out.empty()) {
      out.assign(conditionings, x_in);
      for (size_t c = 0; c < conditionings; ++c)
        for (float& v : out[c]) v = 0.5f * v + 0.1f * static_cast<float>(step + c);
      cache.computed(step, x_in, out);
    } else {
      skipped.push_back(static_cast<int>(i));
      EXPECT_EQ(out.size(), conditionings);
    }
  }
  return skipped;
}

TEST(CacheDit, SkipsWhileTheRelativeInputChangeStaysUnderTheThreshold) {
  // Inputs shrink by 3% a step. Against the last computed input the change is 3%, then
  // 5.9%, then 8.7%: with the default 0.08 two steps are skipped after each computed one.
  CacheDit cache(BlockCacheOptions{}, twenty_sigmas());
  EXPECT_EQ(run(cache, twenty_sigmas(), 0.97f),
            (std::vector<int>{4, 5, 7, 8, 10, 11, 13, 14, 16, 17}));
  EXPECT_EQ(cache.skipped_steps(), 10);
}

TEST(CacheDit, AggressiveThresholdSkipsMoreAndZeroSkipsNone) {
  BlockCacheOptions o;
  o.threshold = 1.0f;  // every active step after the first computed one
  CacheDit aggressive(o, twenty_sigmas());
  EXPECT_EQ(run(aggressive, twenty_sigmas(), 0.97f).size(), 15u);
  o.threshold = 0.0f;
  CacheDit none(o, twenty_sigmas());
  EXPECT_TRUE(run(none, twenty_sigmas(), 0.97f).empty());
}

TEST(CacheDit, FrontAndBackBlocksScaleTheThreshold) {
  BlockCacheOptions o;
  EXPECT_FLOAT_EQ(CacheDit::effective_threshold(o), 0.08f);
  o.front_blocks = 18;  // 1 + 0.02 * 10
  EXPECT_FLOAT_EQ(CacheDit::effective_threshold(o), 0.08f * 1.2f);
  o.front_blocks = 100;  // capped at twice
  EXPECT_FLOAT_EQ(CacheDit::effective_threshold(o), 0.16f);
  o.front_blocks = 8;
  o.back_blocks = 2;  // 1 - 0.03 * 2
  EXPECT_FLOAT_EQ(CacheDit::effective_threshold(o), 0.08f * 0.94f);
  // With Fn 18 the 8.7% change is under 9.6%: three steps skipped after each computed one.
  o.front_blocks = 18;
  o.back_blocks = 0;
  CacheDit cache(o, twenty_sigmas());
  EXPECT_EQ(run(cache, twenty_sigmas(), 0.97f),
            (std::vector<int>{4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 18}));
}

TEST(CacheDit, ReusesEachConditioningsOwnResidual) {
  CacheDit cache(BlockCacheOptions{}, twenty_sigmas());
  const std::vector<float> s = twenty_sigmas();
  const std::vector<float> a = {1.0f, 1.0f}, b = {1.01f, 1.0f};
  EXPECT_TRUE(cache.reuse(4, s[3], a, 2).empty());
  cache.computed(4, a, {{3.0f, 4.0f}, {5.0f, 6.0f}});
  const std::vector<std::vector<float>> out = cache.reuse(5, s[4], b, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0][0], 1.01f + 2.0f);
  EXPECT_FLOAT_EQ(out[1][1], 1.0f + 5.0f);
  // The second call of the same step (a two-call sampler) is reused too, and counted once.
  EXPECT_EQ(cache.reuse(5, s[4], b, 2).size(), 2u);
  EXPECT_EQ(cache.skipped_steps(), 1);
  // Calls that are not a step's main call never are.
  EXPECT_TRUE(cache.reuse(0, s[5], b, 2).empty());
}

// easycache's active range is measured on the training timesteps: on a flow schedule
// (sigma = t / 1000 unshifted) 15%..95% is sigma 0.85 down to just above 0.05.
TEST(EasyCache, SkipsOnlyInsideItsActiveRangeAndNeverAtThresholdZero) {
  const DiscreteSchedule flow(Prediction::Sd3Flow, {}, 1.0f);
  const std::vector<float> sigmas = twenty_sigmas();
  EasyCacheOptions o;
  o.threshold = 0.0f;
  EasyCache none(o, flow);
  EXPECT_TRUE(run(none, sigmas, 0.97f, 2).empty());

  o.threshold = 0.2f;
  EasyCache normal(o, flow);
  const std::vector<int> skipped = run(normal, sigmas, 0.97f, 2);
  EXPECT_FALSE(skipped.empty());
  EXPECT_EQ(normal.skipped_steps(), static_cast<int>(skipped.size()));
  for (int i : skipped) {
    EXPECT_LE(sigmas[i], 0.85f + 1e-6f) << i;
    EXPECT_GT(sigmas[i], 0.05f) << i;
  }
  o.threshold = 5.0f;
  EasyCache aggressive(o, flow);
  EXPECT_GT(run(aggressive, sigmas, 0.97f, 2).size(), skipped.size());
}

// The rule by hand: the output is half the input, so the output moves half as fast as the
// input, and the estimate added per step is half the input's change since the last
// computed step over the output's size; above the threshold the step runs.
TEST(EasyCache, AccumulatesTheEstimatedRelativeOutputChange) {
  const DiscreteSchedule flow(Prediction::Sd3Flow, {}, 1.0f);
  std::vector<float> sigmas;
  for (int i = 0; i <= 10; ++i) sigmas.push_back(0.8f - 0.05f * static_cast<float>(i));
  EasyCacheOptions o;
  o.start = 0.0f;
  o.end = 1.0f;
  o.threshold = 0.1f;
  EasyCache cache(o, flow);
  std::vector<int> skipped;
  float x = 10.0f;
  for (int i = 0; i < 10; ++i, x -= 0.2f) {
    const std::vector<float> x_in = {x};
    if (cache.reuse(i + 1, sigmas[i], x_in, 1).empty())
      cache.computed(i + 1, x_in, {{0.5f * x}});
    else
      skipped.push_back(i);
  }
  // Steps 0 and 1 learn the rate (0.5); computed at x 9.8 (output 4.9), the next steps add
  // 0.5 * 0.2 / 4.9, then 0.5 * 0.4 / 4.9 (0.061 in all), then 0.5 * 0.6 / 4.9 (0.122 in
  // all): that one runs, and so on.
  EXPECT_EQ(skipped, (std::vector<int>{2, 3, 5, 6, 8, 9}));
}

TEST(StepCacheModes, EachModeFitsItsNetworks) {
  EXPECT_TRUE(cache_mode_fits(CacheMode::UCache, /*unet=*/true));
  EXPECT_FALSE(cache_mode_fits(CacheMode::UCache, false));
  for (CacheMode m :
       {CacheMode::EasyCache, CacheMode::DbCache, CacheMode::TaylorSeer, CacheMode::CacheDit}) {
    EXPECT_FALSE(cache_mode_fits(m, true)) << cache_mode_name(m);
    EXPECT_TRUE(cache_mode_fits(m, false)) << cache_mode_name(m);
  }
  EXPECT_TRUE(cache_mode_fits(CacheMode::Spectrum, true));
  EXPECT_TRUE(cache_mode_fits(CacheMode::Spectrum, false));
  EXPECT_EQ(cache_modes_for(true), "ucache, spectrum");
  EXPECT_EQ(cache_modes_for(false), "spectrum, easycache, dbcache, taylorseer, cache-dit");
}

std::string options_error(CacheMode mode, const std::string& text) {
  CacheOptions o;
  o.mode = mode;
  try {
    parse_cache_options(mode, text, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepCacheModes, TransformerOptionsAreCheckedStrictly) {
  CacheOptions o;
  o.mode = CacheMode::EasyCache;
  parse_cache_options(o.mode, "threshold=0.3,start=0.1,end=0.9", o);
  EXPECT_EQ(o.easycache.threshold, 0.3f);
  EXPECT_EQ(o.easycache.start, 0.1f);
  o.mode = CacheMode::DbCache;
  parse_cache_options(o.mode, "threshold=0.25,Fn=4,bn=2,warmup=4", o);
  EXPECT_EQ(o.blocks.threshold, 0.25f);
  EXPECT_EQ(o.blocks.front_blocks, 4);
  EXPECT_EQ(o.blocks.back_blocks, 2);

  EXPECT_NE(options_error(CacheMode::EasyCache, "decay=0.5")
                .find("easycache has no option 'decay'; its options: end, start, threshold"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::TaylorSeer, "start=0.2")
                .find("taylorseer has no option 'start'; its options: Bn, Fn, bn, fn, "
                      "threshold, warmup"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::EasyCache, "threshold=-0.1").find("must not be negative"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::EasyCache, "start=0.9,end=0.2").find("0 <= start < end"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::CacheDit, "threshold=-1").find("cache-dit threshold"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::DbCache, "Fn=-1").find("must not be negative"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::DbCache, "Fn=2.5").find("not a whole number"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::DbCache, "threshold=nan").find("not a number"),
            std::string::npos);
  EXPECT_NE(options_error(CacheMode::DbCache, "threshold:1").find("not key=value"),
            std::string::npos);
}

}  // namespace
}  // namespace sd::sampling
