#include "pipeline/flux_runner.h"

#include <gtest/gtest.h>

#include "backend/registry.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class FluxRunnerReferences : public ::testing::Test {
 protected:
  void SetUp() override {
    cond_.dim = config_.context_dim;
    cond_.tokens = 3;
    cond_.context = sd::test::random_values(cond_.dim * cond_.tokens, 1);
    cond_.vector = sd::test::random_values(config_.vec_dim, 2);
  }
  std::vector<float> predict(FluxRunner& runner) {
    return runner.predict(x_, 4, 4, 0.7f, {&cond_})[0];
  }
  static FluxRunner::Reference reference(int64_t w, int64_t h, uint32_t seed) {
    return {sd::test::random_values(w * h * 16, seed), w, h};
  }
  bool differ(const std::vector<float>& a, const std::vector<float>& b) {
    return sd::test::max_scaled_error(a, b, 1e-5, 1e-5) > 1.0;
  }

  models::FluxConfig config_ = test::tiny_flux_config();
  nn::RandomWeights weights_{DType::F32, 7};
  std::unique_ptr<Backend> backend_ =
      DeviceRegistry::instance().get("CPU").create_backend(BackendOptions{2});
  std::vector<float> x_ = sd::test::random_values(4 * 4 * 16, 3);  // 4x4 latent: 2x2 patches
  Conditioning cond_;
};

TEST_F(FluxRunnerReferences, JoinThePredictionWhichKeepsTheImagesTokens) {
  FluxRunner runner(weights_, config_, *backend_);
  const std::vector<float> plain = predict(runner);
  // A reference of another size: the prediction keeps the latent's size, changed.
  runner.set_references({reference(6, 2, 4)}, models::RefIndexMode::Fixed);
  const std::vector<float> one = predict(runner);
  ASSERT_EQ(one.size(), plain.size());
  EXPECT_TRUE(differ(one, plain));
  // One reference is at index 1 in either mode.
  runner.set_references({reference(6, 2, 4)}, models::RefIndexMode::Increase);
  EXPECT_LE(sd::test::max_scaled_error(predict(runner), one, 1e-6, 1e-6), 1.0);
  // Two: beside each other at one index, or at their own indices.
  runner.set_references({reference(6, 2, 4), reference(2, 2, 5)}, models::RefIndexMode::Fixed);
  const std::vector<float> fixed = predict(runner);
  runner.set_references({reference(6, 2, 4), reference(2, 2, 5)}, models::RefIndexMode::Increase);
  const std::vector<float> increase = predict(runner);
  EXPECT_TRUE(differ(fixed, one));
  EXPECT_TRUE(differ(fixed, increase));
  // None: the plain prediction again.
  runner.set_references({}, models::RefIndexMode::Fixed);
  EXPECT_EQ(predict(runner), plain);
}

TEST_F(FluxRunnerReferences, RefusesWhatCannotBePatchified) {
  FluxRunner runner(weights_, config_, *backend_);
  EXPECT_THROW(runner.set_references({reference(3, 2, 4)}, models::RefIndexMode::Fixed), Error);
  FluxRunner::Reference short_one = reference(2, 2, 4);
  short_one.latent.pop_back();
  EXPECT_THROW(runner.set_references({short_one}, models::RefIndexMode::Fixed), Error);
  // FLUX.1 Fill's tokens carry more than a reference has.
  models::FluxConfig fill = config_;
  fill.in_channels = 384;
  FluxRunner fill_runner(weights_, fill, *backend_);
  EXPECT_THROW(fill_runner.set_references({reference(2, 2, 4)}, models::RefIndexMode::Fixed),
               Error);
}

}  // namespace
}  // namespace sd::pipeline
