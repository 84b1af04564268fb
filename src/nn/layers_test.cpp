#include "nn/layers.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backend/registry.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::nn {
namespace {

using sd::test::cpu_backend;

TEST(Layers, LinearComputesXTimesWeightPlusBias) {
  RandomWeights w;
  w.set("fc.weight", make_shape({3, 2}), {1, 2, 3, 4, 5, 6});  // rows: out 0 = [1 2 3]
  w.set("fc.bias", make_shape({2}), {0.5f, -1});
  GraphRunner runner(cpu_backend());
  GraphCall call;
  const float x[3] = {1, 0, -1};
  Tensor* in = call.input_f32("x", make_shape({3, 1}), x);
  Tensor* y = linear(Scope(call.ctx(), w)["fc"], in, 3, 2);
  std::vector<float> out = runner.run(call, y);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0], 1 - 3 + 0.5f);
  EXPECT_FLOAT_EQ(out[1], 4 - 6 - 1);
}

TEST(Layers, WrongShapeNamesTheTensor) {
  RandomWeights w;
  w.set("fc.weight", make_shape({3, 2}), std::vector<float>(6, 1.0f));
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4, 1});
  try {
    linear(Scope(ctx, w)["fc"], x, 4, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc.weight"), std::string::npos) << e.what();
  }
}

TEST(Layers, MultiHeadAttentionWithOneKeyReturnsValues) {
  // With a single key every query attends to it fully: the output is v, per head.
  GraphRunner runner(cpu_backend());
  GraphCall call;
  std::vector<float> q(4 * 3, 0.3f), k(4, 1.0f), v = {1, 2, 3, 4};
  Tensor* tq = call.input_f32("q", make_shape({4, 3, 1}), q.data());
  Tensor* tk = call.input_f32("k", make_shape({4, 1, 1}), k.data());
  Tensor* tv = call.input_f32("v", make_shape({4, 1, 1}), v.data());
  std::vector<float> out = runner.run(call, multi_head_attention(call.ctx(), tq, tk, tv, 2));
  ASSERT_EQ(out.size(), 12u);
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(out[i * 4 + c], v[c]);
}

}  // namespace
}  // namespace sd::nn
