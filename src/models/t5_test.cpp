#include "models/t5.h"

#include <gtest/gtest.h>

#include "backend/registry.h"
#include "models/loop_reference_test_util.h"
#include "nn/graph_runner.h"
#include "tensor/error.h"
#include "tensor/ops/unary.h"
#include "test_support.h"

namespace sd::models {
namespace {

const char* const kT5Prefix = "text_encoders.t5xxl.";

using sd::test::cpu_backend;

T5Config tiny_t5_config() {
  T5Config c;
  c.vocab_size = 40;
  c.model_dim = 16;
  c.inner_dim = 24;  // 3 heads of 8: inner differs from d_model
  c.heads = 3;
  c.ff_dim = 20;
  c.layers = 2;
  return c;
}

std::vector<float> run_encoder(nn::RandomWeights& w, const T5Config& c,
                               const std::vector<int32_t>& ids) {
  const int64_t len = static_cast<int64_t>(ids.size());
  const std::vector<int32_t> buckets =
      t5_relative_position_buckets(len, c.relative_buckets, c.relative_max_distance);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* t_ids = call.input("ids", DType::I32, make_shape({len, 1}), ids.data());
  Tensor* t_buckets = call.input("buckets", DType::I32, make_shape({len * len}), buckets.data());
  return runner.run(call,
                    t5_encoder_forward(nn::Scope(call.ctx(), w, kT5Prefix), c, t_ids, t_buckets));
}

// T5's encoder with loops, over the same weights.
std::vector<float> reference_encoder(const nn::RandomWeights& w, const T5Config& c,
                                     const std::vector<int32_t>& ids) {
  const int64_t len = static_cast<int64_t>(ids.size()), d = c.model_dim;
  const std::string root = kT5Prefix;
  auto p = [&](const std::string& n) { return w.values(root + n); };
  const std::vector<float> shared = p("shared.weight");
  std::vector<float> x(static_cast<size_t>(len * d));
  for (int64_t t = 0; t < len; ++t)
    for (int64_t i = 0; i < d; ++i) x[t * d + i] = shared[ids[t] * d + i];
  const std::vector<int32_t> buckets =
      t5_relative_position_buckets(len, c.relative_buckets, c.relative_max_distance);
  for (int l = 0; l < c.layers; ++l) {
    const std::string s = root + "encoder.block." + std::to_string(l) + ".layer.";
    // [32][heads]: block 0's for T5, the layer's own for umT5.
    const std::vector<float> table =
        w.values(root + "encoder.block." + std::to_string(c.bias_per_layer ? l : 0) +
                 ".layer.0.SelfAttention.relative_attention_bias.weight");
    std::vector<float> h = loops::rms_norm(x, d, w.values(s + "0.layer_norm.weight"), c.eps);
    const auto q = loops::linear(w, s + "0.SelfAttention.q", h, d, c.inner_dim, false);
    const auto k = loops::linear(w, s + "0.SelfAttention.k", h, d, c.inner_dim, false);
    const auto v = loops::linear(w, s + "0.SelfAttention.v", h, d, c.inner_dim, false);
    const auto a = loops::attention(q, k, v, len, c.heads, c.inner_dim / c.heads, 1.0,
                                    [&](int64_t head, int64_t qi, int64_t ki) {
                                      return double(table[buckets[qi * len + ki] * c.heads + head]);
                                    });
    h = loops::linear(w, s + "0.SelfAttention.o", a, c.inner_dim, d, false);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    h = loops::rms_norm(x, d, w.values(s + "1.layer_norm.weight"), c.eps);
    std::vector<float> g = loops::linear(w, s + "1.DenseReluDense.wi_0", h, d, c.ff_dim, false);
    const auto u = loops::linear(w, s + "1.DenseReluDense.wi_1", h, d, c.ff_dim, false);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = unary_reference_value(UnaryOp::Gelu, g[i], 0) * u[i];
    h = loops::linear(w, s + "1.DenseReluDense.wo", g, c.ff_dim, d, false);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
  }
  return loops::rms_norm(x, d, p("encoder.final_layer_norm.weight"), c.eps);
}

TEST(T5, RelativePositionBucketsFollowT5) {
  // Hugging Face's _relative_position_bucket(bidirectional, 32 buckets, max distance 128):
  // keys before the query in 0..15, after it in 16..31; exact below 8, then logarithmic.
  const int64_t n = 300;
  const std::vector<int32_t> b = t5_relative_position_buckets(n, 32, 128);
  auto at = [&](int64_t q, int64_t k) { return b[static_cast<size_t>(q * n + k)]; };
  EXPECT_EQ(at(100, 100), 0);
  EXPECT_EQ(at(100, 99), 1);
  EXPECT_EQ(at(100, 101), 17);
  EXPECT_EQ(at(100, 93), 7);
  EXPECT_EQ(at(100, 92), 8);   // distance 8: 8 + floor(log(1) ...) = 8
  EXPECT_EQ(at(100, 80), 10);  // distance 20: 8 + floor(log(2.5) / log(16) * 8) = 10
  EXPECT_EQ(at(100, 120), 26);
  EXPECT_EQ(at(250, 0), 15);  // beyond max_distance: the last bucket
  EXPECT_EQ(at(0, 250), 31);
}

TEST(T5, EncoderMatchesALoopImplementation) {
  const T5Config c = tiny_t5_config();
  nn::RandomWeights w(DType::F32, 5);
  const std::vector<int32_t> ids = {3, 17, 39, 0, 1, 22, 5, 5, 9, 30, 2};
  const std::vector<float> out = run_encoder(w, c, ids);
  ASSERT_EQ(out.size(), ids.size() * 16);
  EXPECT_LE(test::max_scaled_error(out, reference_encoder(w, c, ids), 1e-4, 1e-3), 1.0);
  // Only block 0 holds the bias table.
  for (const std::string& name : w.names()) {
    if (name.find("relative_attention_bias") != std::string::npos) {
      EXPECT_NE(name.find("block.0."), std::string::npos) << name;
    }
  }
}

TEST(T5, UmT5UsesEachLayersOwnBias) {
  T5Config c = tiny_t5_config();
  c.layers = 3;
  c.bias_per_layer = true;
  nn::RandomWeights w(DType::F32, 6);
  const std::vector<int32_t> ids = {3, 17, 39, 0, 1, 22, 5};
  const std::vector<float> out = run_encoder(w, c, ids);
  EXPECT_LE(test::max_scaled_error(out, reference_encoder(w, c, ids), 1e-4, 1e-3), 1.0);
  int tables = 0;
  for (const std::string& name : w.names())
    tables += name.find("relative_attention_bias") != std::string::npos;
  EXPECT_EQ(tables, 3);
  // The same weights read as T5 v1.1 (block 0's table everywhere) give another encoding.
  c.bias_per_layer = false;
  EXPECT_GT(test::max_scaled_error(run_encoder(w, c, ids), out, 1e-4, 1e-3), 1.0);
}

TEST(T5, WrongHeadCountIsAnError) {
  T5Config c = tiny_t5_config();
  c.heads = 5;
  nn::RandomWeights w;
  EXPECT_THROW(run_encoder(w, c, {1, 2, 3}), Error);
}

}  // namespace
}  // namespace sd::models
