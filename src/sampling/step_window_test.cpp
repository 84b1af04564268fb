#include "sampling/step_window.h"

#include <gtest/gtest.h>

namespace sd::sampling {
namespace {

TEST(StepWindow, ActiveWhereSigmaIsInsideAndSkipLastsOneStep) {
  // 4 steps; fractions 0.25 and 0.75 pick sigmas[1] = 3 and sigmas[3] = 1: (1, 3].
  const std::vector<float> sigmas = {4, 3, 2, 1, 0};
  StepWindow w = StepWindow::from_step_fractions(0.25f, 0.75f, sigmas);
  EXPECT_TRUE(w.begin_step(0, 4.0f));
  EXPECT_FALSE(w.active());
  EXPECT_TRUE(w.begin_step(1, 3.0f));
  EXPECT_TRUE(w.active());
  w.skip();
  EXPECT_FALSE(w.begin_step(1, 3.0f));  // the second call of the step keeps the decision
  EXPECT_TRUE(w.skipping());
  EXPECT_TRUE(w.begin_step(2, 2.0f));
  EXPECT_FALSE(w.skipping());
  EXPECT_TRUE(w.begin_step(3, 1.0f));
  EXPECT_FALSE(w.active());
}

TEST(OutputChangeRate, RateIsOutputChangeOverInputChange) {
  OutputChangeRate r;
  EXPECT_FALSE(r.measure_input({1, 1}));  // nothing computed yet
  r.observe({0, 0}, {1, -1});
  EXPECT_FLOAT_EQ(r.output_norm(), 1.0f);
  r.begin_step();
  ASSERT_TRUE(r.measure_input({0.5f, 0.5f}));
  EXPECT_FLOAT_EQ(r.input_change(), 0.5f);
  EXPECT_FALSE(r.ready());  // no rate from one computed step
  EXPECT_FLOAT_EQ(r.observe({0.5f, 0.5f}, {2, -2}), 1.0f);
  EXPECT_FLOAT_EQ(r.change_rate(), 2.0f);  // output moved 1 for an input change of 0.5
  r.begin_step();
  ASSERT_TRUE(r.measure_input({1, 1}));
  EXPECT_TRUE(r.ready());
  EXPECT_FALSE(r.measure_input({1, 1, 1}));  // another size
}

}  // namespace
}  // namespace sd::sampling
