#include "sampling/guided_denoiser.h"

#include <gtest/gtest.h>

namespace sd::sampling {
namespace {

// A toy network: the conditional output is all `cond`, the unconditional all `uncond`;
// it records what it was given.
struct ToyNetwork {
  float cond = 1.0f, uncond = 0.0f;
  std::vector<float> last_input;
  float last_timestep = -1;
  int calls = 0, uncond_calls = 0;
  NetworkCall call() {
    return [this](const std::vector<float>& x_in, float t, const GuidancePasses& passes) {
      ++calls;
      last_input = x_in;
      last_timestep = t;
      std::vector<std::vector<float>> out = {std::vector<float>(x_in.size(), cond)};
      if (passes.uncond) {
        ++uncond_calls;
        out.push_back(std::vector<float>(x_in.size(), uncond));
      }
      return out;
    };
  }
};

TEST(GuidedDenoiser, ScalesTheInputAndGuidesTheOutput) {
  const DiscreteSchedule schedule(Prediction::Eps);
  ToyNetwork net;
  net.cond = 1.5f;
  net.uncond = 0.5f;
  GuidanceOptions o;
  o.cfg_scale = 7.0f;
  GuidedDenoiser denoiser(schedule, net.call(), o);
  const std::vector<float> x = {2.0f, -1.0f};
  const float sigma = 3.0f;
  const Denoised d = denoiser(x, sigma, 1);
  const ModelStep ms = schedule.model_step(sigma);
  EXPECT_EQ(net.uncond_calls, 1);
  EXPECT_FLOAT_EQ(net.last_input[0], x[0] * ms.scalings.c_in);
  EXPECT_FLOAT_EQ(net.last_timestep, ms.timestep);
  // uncond + 7 * (cond - uncond) = 7.5, then c_out / c_skip.
  const float guided = 0.5f + 7.0f * (1.5f - 0.5f);
  ASSERT_EQ(d.x0.size(), 2u);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(d.x0[i], guided * ms.scalings.c_out + x[i] * ms.scalings.c_skip);
  EXPECT_TRUE(d.uncond_x0.empty());
}

TEST(GuidedDenoiser, ScaleOneSkipsTheUnconditionalPass) {
  const DiscreteSchedule schedule(Prediction::Eps);
  ToyNetwork net;
  GuidanceOptions o;
  o.cfg_scale = 1.0f;
  o.uncond_x0 = true;
  GuidedDenoiser denoiser(schedule, net.call(), o);
  const Denoised d = denoiser({1.0f}, 1.0f, 1);
  EXPECT_EQ(net.uncond_calls, 0);
  // Without an unconditional pass the CFG++ latent is the guided one.
  EXPECT_EQ(d.uncond_x0, d.x0);
}

TEST(GuidedDenoiser, UnconditionalLatentForCfgPlusPlus) {
  const DiscreteSchedule schedule(Prediction::Eps);
  ToyNetwork net;
  net.cond = 2.0f;
  net.uncond = -1.0f;
  GuidanceOptions o;
  o.uncond_x0 = true;
  GuidedDenoiser denoiser(schedule, net.call(), o);
  const Denoised d = denoiser({0.25f}, 2.0f, 1);
  const ModelStep ms = schedule.model_step(2.0f);
  EXPECT_FLOAT_EQ(d.uncond_x0[0], -1.0f * ms.scalings.c_out + 0.25f * ms.scalings.c_skip);
}

TEST(GuidedDenoiser, InpaintingKeepsTheInitLatentOutsideTheMask) {
  const DiscreteSchedule schedule(Prediction::Eps);
  ToyNetwork net;
  DenoiseMask mask;
  mask.mask = {1.0f, 0.0f};                     // one plane of two latent pixels
  mask.init_latent = {9.0f, 8.0f, 7.0f, 6.0f};  // two channels
  GuidanceOptions o;
  o.mask = &mask;
  GuidedDenoiser denoiser(schedule, net.call(), o);
  const Denoised d = denoiser({0.0f, 0.0f, 0.0f, 0.0f}, 1.0f, 1);
  EXPECT_NE(d.x0[0], 9.0f);  // repainted
  EXPECT_EQ(d.x0[1], 8.0f);  // kept
  EXPECT_NE(d.x0[2], 7.0f);
  EXPECT_EQ(d.x0[3], 6.0f);
}

TEST(GuidedDenoiser, HooksSeeEveryCallInOrder) {
  const DiscreteSchedule schedule(Prediction::Eps);
  ToyNetwork net;
  GuidedDenoiser denoiser(schedule, net.call(), {});
  std::vector<int> seen;
  denoiser.before = [&](const std::vector<float>&, const ModelStep& ms, int step) {
    EXPECT_EQ(net.calls, static_cast<int>(seen.size() / 2));  // before the network ran
    EXPECT_GT(ms.scalings.c_in, 0.0f);
    seen.push_back(step);
  };
  denoiser.after = [&](const Denoised& d, int step) {
    EXPECT_FALSE(d.x0.empty());
    seen.push_back(-step);
  };
  denoiser({1.0f}, 1.0f, 1);
  denoiser({1.0f}, 0.5f, 2);
  EXPECT_EQ(seen, (std::vector<int>{1, -1, 2, -2}));
}

}  // namespace
}  // namespace sd::sampling
