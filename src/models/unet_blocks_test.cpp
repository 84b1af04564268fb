#include "models/unet_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "backend/registry.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "test_support.h"

namespace sd::models {
namespace {

using sd::test::cpu_backend;

constexpr int64_t kW = 4, kH = 3, kN = 2;

std::vector<float> run_block(nn::Weights& w, int64_t channels,
                             const std::function<Tensor*(const nn::Scope&, Tensor*)>& block,
                             const std::vector<float>& x_values) {
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* x = call.input_f32("x", make_shape({kW, kH, channels, kN}), x_values.data());
  return runner.run(call, block(nn::Scope(call.ctx(), w, "blk."), x));
}

TEST(UnetBlocks, ResBlockWithZeroOutputConvIsItsSkipConnection) {
  // out_layers.3 all zero: the block's output is the residual path alone, x itself when
  // the channels agree.
  const int64_t c = 32;
  nn::RandomWeights w;
  w.set("blk.out_layers.3.weight", make_shape({3, 3, c, c}), std::vector<float>(9 * c * c, 0.0f));
  w.set("blk.out_layers.3.bias", make_shape({c}), std::vector<float>(c, 0.0f));
  const std::vector<float> x = test::random_values(kW * kH * c * kN, 3);
  std::vector<float> emb_values = test::random_values(128 * kN, 4);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* tx = call.input_f32("x", make_shape({kW, kH, c, kN}), x.data());
  Tensor* emb = call.input_f32("emb", make_shape({128, kN}), emb_values.data());
  const ResBlock block{c, c, 128};
  std::vector<float> out =
      runner.run(call, block.forward(nn::Scope(call.ctx(), w, "blk."), tx, emb));
  ASSERT_EQ(out.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(out[i], x[i]) << i;
}

TEST(UnetBlocks, ResBlockChangesChannelsThroughSkipConnection) {
  nn::RandomWeights w;
  const std::vector<float> x = test::random_values(kW * kH * 32 * kN, 5);
  std::vector<float> emb_values = test::random_values(128 * kN, 6);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* tx = call.input_f32("x", make_shape({kW, kH, 32, kN}), x.data());
  Tensor* emb = call.input_f32("emb", make_shape({128, kN}), emb_values.data());
  Tensor* y = ResBlock{32, 64, 128}.forward(nn::Scope(call.ctx(), w, "blk."), tx, emb);
  EXPECT_EQ(y->ne, make_shape({kW, kH, 64, kN}));
  runner.run(call, y);
  const std::vector<std::string> names = w.names();
  EXPECT_NE(std::find(names.begin(), names.end(), "blk.skip_connection.weight"), names.end());
}

TEST(UnetBlocks, DownsampleHalvesAndUpsampleDoublesTheImage) {
  nn::RandomWeights w;
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 6, 32, 1});
  Tensor* down = Downsample{32}.forward(nn::Scope(ctx, w, "d."), x);
  Tensor* up = Upsample{32}.forward(nn::Scope(ctx, w, "u."), x);
  EXPECT_EQ(down->ne, make_shape({4, 3, 32, 1}));
  EXPECT_EQ(up->ne, make_shape({16, 12, 32, 1}));
}

TEST(UnetBlocks, UpsampleRepeatsEachPixelBeforeItsConv) {
  // A conv that passes the centre pixel through shows the nearest-neighbour upscale.
  const int64_t c = 32;
  nn::RandomWeights w;
  std::vector<float> identity(9 * c * c, 0.0f);
  for (int64_t i = 0; i < c; ++i) identity[((i * c + i) * 3 + 1) * 3 + 1] = 1.0f;
  w.set("blk.conv.weight", make_shape({3, 3, c, c}), identity);
  w.set("blk.conv.bias", make_shape({c}), std::vector<float>(c, 0.0f));
  const std::vector<float> x = test::random_values(kW * kH * c * kN, 7);
  std::vector<float> out = run_block(
      w, c, [](const nn::Scope& s, Tensor* t) { return Upsample{32}.forward(s, t); }, x);
  ASSERT_EQ(out.size(), x.size() * 4);
  for (int64_t i = 0; i < c * kN; ++i)
    for (int64_t yy = 0; yy < 2 * kH; ++yy)
      for (int64_t xx = 0; xx < 2 * kW; ++xx)
        ASSERT_EQ(out[(i * 2 * kH + yy) * 2 * kW + xx], x[(i * kH + yy / 2) * kW + xx / 2]);
}

TEST(UnetBlocks, SpatialTransformerWithZeroProjOutIsIdentity) {
  const int64_t c = 32;
  for (bool linear : {false, true}) {
    nn::RandomWeights w;
    const Shape proj = linear ? make_shape({c, c}) : make_shape({1, 1, c, c});
    w.set("blk.proj_out.weight", proj, std::vector<float>(c * c, 0.0f));
    w.set("blk.proj_out.bias", make_shape({c}), std::vector<float>(c, 0.0f));
    const std::vector<float> x = test::random_values(kW * kH * c * kN, 8);
    const std::vector<float> context = test::random_values(16 * 5 * kN, 9);
    nn::GraphRunner runner(cpu_backend());
    nn::GraphCall call;
    Tensor* tx = call.input_f32("x", make_shape({kW, kH, c, kN}), x.data());
    Tensor* tc = call.input_f32("context", make_shape({16, 5, kN}), context.data());
    const SpatialTransformer st{c, 2, 16, 1, 16, linear};
    std::vector<float> out = runner.run(call, st.forward(nn::Scope(call.ctx(), w, "blk."), tx, tc));
    ASSERT_EQ(out.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(out[i], x[i]) << "linear " << linear;
  }
}

// Runs a SpatialTransformer on fixed inputs with weights taken from `w`.
std::vector<float> run_transformer(nn::Weights& w, bool linear_proj, int64_t c) {
  const std::vector<float> x = test::random_values(kW * kH * c * kN, 10);
  const std::vector<float> context = test::random_values(16 * 5 * kN, 11);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* tx = call.input_f32("x", make_shape({kW, kH, c, kN}), x.data());
  Tensor* tc = call.input_f32("context", make_shape({16, 5, kN}), context.data());
  const SpatialTransformer st{c, 2, c / 2, 1, 16, linear_proj};
  return runner.run(call, st.forward(nn::Scope(call.ctx(), w, "blk."), tx, tc));
}

TEST(UnetBlocks, SpatialTransformerConvAndLinearProjectionsAgree) {
  // SD1.x's 1x1 conv projections and SD2.x's Linear ones are the same map over channels:
  // with equal values both layouts must give the same output. Random weights are seeded
  // by name, so every other tensor is equal in both runs.
  const int64_t c = 32;
  nn::RandomWeights conv_weights, linear_weights;
  const std::vector<float> with_conv = run_transformer(conv_weights, false, c);
  for (const char* proj : {"blk.proj_in.weight", "blk.proj_out.weight"})
    linear_weights.set(proj, make_shape({c, c}), conv_weights.values(proj));
  const std::vector<float> with_linear = run_transformer(linear_weights, true, c);
  ASSERT_EQ(with_conv.size(), with_linear.size());
  EXPECT_LE(test::max_scaled_error(with_linear, with_conv, 1e-5, 1e-5), 1.0);
  // The block changes its input (the comparison above is not between two copies of x).
  const std::vector<float> x = test::random_values(kW * kH * c * kN, 10);
  EXPECT_GT(test::max_scaled_error(with_conv, x, 1e-3, 1e-3), 1.0);
}

TEST(UnetBlocks, SpatialTransformerProjectsEachPixelOverItsChannels) {
  // With to_out.0 and net.2 zero the transformer blocks pass their tokens through, so the
  // block is x + proj_out(proj_in(group_norm(x))) pixel by pixel: a host computation of
  // that pins the image <-> token transposes on both sides.
  const int64_t c = 32, pixels = kW * kH;
  for (bool linear : {false, true}) {
    nn::RandomWeights w;
    for (const char* layer : {"attn1.to_out.0", "attn2.to_out.0"}) {
      const std::string name = std::string("blk.transformer_blocks.0.") + layer;
      w.set(name + ".weight", make_shape({c, c}), std::vector<float>(c * c, 0.0f));
      w.set(name + ".bias", make_shape({c}), std::vector<float>(c, 0.0f));
    }
    w.set("blk.transformer_blocks.0.ff.net.2.weight", make_shape({4 * c, c}),
          std::vector<float>(4 * c * c, 0.0f));
    w.set("blk.transformer_blocks.0.ff.net.2.bias", make_shape({c}), std::vector<float>(c, 0.0f));
    const std::vector<float> out = run_transformer(w, linear, c);

    const std::vector<float> x = test::random_values(kW * kH * c * kN, 10);
    const std::vector<float> gamma = w.values("blk.norm.weight"), beta = w.values("blk.norm.bias");
    const std::vector<float> w_in = w.values("blk.proj_in.weight"),
                             b_in = w.values("blk.proj_in.bias");
    const std::vector<float> w_out = w.values("blk.proj_out.weight"),
                             b_out = w.values("blk.proj_out.bias");
    for (int64_t n = 0; n < kN; ++n) {
      // 32 groups of 32 channels: each channel is normalized over its own pixels.
      std::vector<float> normed(c * pixels);
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* v = &x[(n * c + ch) * pixels];
        double mean = 0, var = 0;
        for (int64_t p = 0; p < pixels; ++p) mean += v[p];
        mean /= pixels;
        for (int64_t p = 0; p < pixels; ++p) var += (v[p] - mean) * (v[p] - mean);
        var /= pixels;
        for (int64_t p = 0; p < pixels; ++p)
          normed[ch * pixels + p] =
              static_cast<float>((v[p] - mean) / std::sqrt(var + 1e-6)) * gamma[ch] + beta[ch];
      }
      for (int64_t p = 0; p < pixels; ++p) {
        std::vector<float> t(c);
        for (int64_t o = 0; o < c; ++o) {
          t[o] = b_in[o];
          for (int64_t i = 0; i < c; ++i) t[o] += w_in[o * c + i] * normed[i * pixels + p];
        }
        for (int64_t o = 0; o < c; ++o) {
          float y = b_out[o] + x[(n * c + o) * pixels + p];
          for (int64_t i = 0; i < c; ++i) y += w_out[o * c + i] * t[i];
          ASSERT_NEAR(out[(n * c + o) * pixels + p], y, 1e-4)
              << "linear " << linear << " sample " << n << " channel " << o << " pixel " << p;
        }
      }
    }
  }
}

TEST(UnetBlocks, CrossAttentionToOneTokenGivesItsValueEverywhere) {
  // With a single context token every query attends to it fully: each output token is
  // to_out(to_v(context)), whatever the queries.
  const int64_t dim = 8, ctx_dim = 6, L = 5;
  nn::RandomWeights w;
  const std::vector<float> x = test::random_values(dim * L, 12);
  const std::vector<float> context = test::random_values(ctx_dim, 13);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* tx = call.input_f32("x", make_shape({dim, L, 1}), x.data());
  Tensor* tc = call.input_f32("context", make_shape({ctx_dim, 1, 1}), context.data());
  const CrossAttention attn{dim, ctx_dim, 2, 4};
  std::vector<float> out = runner.run(call, attn.forward(nn::Scope(call.ctx(), w, "a."), tx, tc));
  // Host computation of to_out.0(to_v(context)).
  const std::vector<float> wv = w.values("a.to_v.weight"), wo = w.values("a.to_out.0.weight"),
                           bo = w.values("a.to_out.0.bias");
  std::vector<float> v(dim, 0.0f), expected(dim, 0.0f);
  for (int64_t o = 0; o < dim; ++o)
    for (int64_t i = 0; i < ctx_dim; ++i) v[o] += wv[o * ctx_dim + i] * context[i];
  for (int64_t o = 0; o < dim; ++o) {
    expected[o] = bo[o];
    for (int64_t i = 0; i < dim; ++i) expected[o] += wo[o * dim + i] * v[i];
  }
  ASSERT_EQ(out.size(), static_cast<size_t>(dim * L));
  for (int64_t t = 0; t < L; ++t)
    for (int64_t o = 0; o < dim; ++o) EXPECT_NEAR(out[t * dim + o], expected[o], 1e-5) << t;
}

TEST(UnetBlocks, FeedForwardGatesTheFirstHalfWithGeluOfTheSecond) {
  // One token, identity-like projections: net.0.proj puts x in the value half and a
  // constant 1 in the gate half, net.2 sums the inner channels back per output channel.
  const int64_t dim = 2, inner = 8;
  nn::RandomWeights w;
  std::vector<float> proj(dim * 2 * inner, 0.0f), proj_bias(2 * inner, 0.0f);
  for (int64_t o = 0; o < inner; ++o) proj[o * dim + o % dim] = 1.0f;  // value o = x[o % dim]
  for (int64_t o = inner; o < 2 * inner; ++o) proj_bias[o] = (o - inner) * 0.25f;  // gate
  w.set("f.net.0.proj.weight", make_shape({dim, 2 * inner}), proj);
  w.set("f.net.0.proj.bias", make_shape({2 * inner}), proj_bias);
  std::vector<float> down(inner * dim, 0.0f);
  for (int64_t i = 0; i < inner; ++i) down[(i % dim) * inner + i] = 1.0f;
  w.set("f.net.2.weight", make_shape({inner, dim}), down);
  w.set("f.net.2.bias", make_shape({dim}), std::vector<float>(dim, 0.0f));
  const std::vector<float> x = {0.5f, -2.0f};
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* tx = call.input_f32("x", make_shape({dim, 1, 1}), x.data());
  std::vector<float> out =
      runner.run(call, FeedForward{dim, inner / dim}.forward(nn::Scope(call.ctx(), w, "f."), tx));
  auto gelu = [](float g) {
    return 0.5f * g * (1.0f + std::tanh(0.7978845608f * (g + 0.044715f * g * g * g)));
  };
  for (int64_t o = 0; o < dim; ++o) {
    float expected = 0.0f;
    for (int64_t i = o; i < inner; i += dim) expected += x[o] * gelu(i * 0.25f);
    EXPECT_NEAR(out[o], expected, 1e-4) << o;
  }
}

}  // namespace
}  // namespace sd::models
