#include "nn/dit_blocks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backend/registry.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "test_support.h"

namespace sd::nn {
namespace {

using sd::test::cpu_backend;

TEST(DitBlocks, ModulateIsOnePlusScaleTimesXPlusShift) {
  GraphRunner runner(cpu_backend());
  GraphCall call;
  const float x[4] = {1, 2, 3, 4}, shift[2] = {10, 20}, scale[2] = {1, -0.5f};
  Tensor* tx = call.input_f32("x", make_shape({2, 2, 1}), x);  // 2 channels, 2 tokens
  Tensor* ts = call.input_f32("shift", make_shape({2, 1, 1}), shift);
  Tensor* tc = call.input_f32("scale", make_shape({2, 1, 1}), scale);
  const std::vector<float> out = runner.run(call, modulate(call.ctx(), tx, ts, tc));
  EXPECT_EQ(out, (std::vector<float>{12, 21, 16, 22}));
}

TEST(DitBlocks, ModulationChunksCutTheProjectionOfSiluVec) {
  RandomWeights w;
  // lin: 2 -> 4 (2 chunks of 2), weight 1 everywhere, bias = the output index.
  w.set("lin.weight", make_shape({2, 4}), std::vector<float>(8, 1.0f));
  w.set("lin.bias", make_shape({4}), {0, 1, 2, 3});
  GraphRunner runner(cpu_backend());
  GraphCall call;
  const float v[2] = {2.0f, 0.0f};  // silu(0) = 0
  Tensor* vec = call.input_f32("vec", make_shape({2, 1}), v);
  const std::vector<Tensor*> chunks = modulation_chunks(Scope(call.ctx(), w)["lin"], vec, 2, 2);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1]->ne[0], 2);
  EXPECT_EQ(chunks[1]->ne[1], 1);
  const std::vector<std::vector<float>> out = runner.run(call, chunks);
  const float s = 2.0f / (1.0f + std::exp(-2.0f));  // silu(2)
  EXPECT_FLOAT_EQ(out[0][0], s + 0);
  EXPECT_FLOAT_EQ(out[0][1], s + 1);
  EXPECT_FLOAT_EQ(out[1][0], s + 2);
  EXPECT_FLOAT_EQ(out[1][1], s + 3);
}

// A quarter turn maps each pair (a, b) to (-b, a); no turn leaves it.
TEST(DitBlocks, RopeRotatesEachChannelPairByItsTokensAngle) {
  GraphRunner runner(cpu_backend());
  GraphCall call;
  const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};                   // [D 4, H 1, L 2, N 1]
  const float cos_t[4] = {1, 1, 0, 0}, sin_t[4] = {0, 0, 1, 1};  // token 0: 0, token 1: pi/2
  Tensor* tx = call.input_f32("x", make_shape({4, 1, 2, 1}), x);
  Tensor* tc = call.input_f32("cos", make_shape({2, 2}), cos_t);
  Tensor* ts = call.input_f32("sin", make_shape({2, 2}), sin_t);
  const std::vector<float> out = runner.run(call, apply_rope(call.ctx(), tx, tc, ts));
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, -6, 5, -8, 7}));
}

}  // namespace
}  // namespace sd::nn
