#include "pipeline/unet_runner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backend/registry.h"
#include "nn/random_weights.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

models::UnetConfig tiny_unet() {
  models::UnetConfig c;
  c.model_channels = 32;
  c.channel_mult = {1, 2};
  c.num_res_blocks = 1;
  c.attention_levels = {0, 1};
  c.num_heads = 2;
  c.context_dim = 16;
  return c;
}

Conditioning random_conditioning(int64_t tokens, uint32_t seed) {
  Conditioning c;
  c.dim = 16;
  c.tokens = tokens;
  c.context = sd::test::random_values(c.dim * tokens, seed);
  return c;
}

// Guidance runs the prompt and the negative prompt as one batch of two: each result must
// be what a call of its own gives.
TEST(UnetRunner, BatchedConditioningsEqualSeparateCalls) {
  nn::RandomWeights w(DType::F16);
  auto backend = DeviceRegistry::instance().get("CPU").create_backend(BackendOptions{2});
  UnetRunner unet(w, tiny_unet(), *backend);
  const std::vector<float> x = sd::test::random_values(8 * 8 * 4, 3);
  const Conditioning a = random_conditioning(77, 4), b = random_conditioning(77, 5);
  const Conditioning longer = random_conditioning(154, 6);
  std::vector<std::vector<float>> batched = unet.predict(x, 8, 8, 500.0f, {&a, &longer, &b});
  ASSERT_EQ(batched.size(), 3u);
  const std::vector<float> alone_a = unet.predict(x, 8, 8, 500.0f, {&a})[0];
  const std::vector<float> alone_b = unet.predict(x, 8, 8, 500.0f, {&b})[0];
  const std::vector<float> alone_long = unet.predict(x, 8, 8, 500.0f, {&longer})[0];
  EXPECT_LE(sd::test::max_scaled_error(batched[0], alone_a, 1e-4, 1e-4), 1.0);
  EXPECT_LE(sd::test::max_scaled_error(batched[2], alone_b, 1e-4, 1e-4), 1.0);
  EXPECT_LE(sd::test::max_scaled_error(batched[1], alone_long, 1e-4, 1e-4), 1.0);
  EXPECT_GT(sd::test::max_scaled_error(batched[0], alone_b, 1e-4, 1e-4), 1.0);
}

}  // namespace
}  // namespace sd::pipeline
