#include "models/llm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "models/loop_reference_test_util.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

const char* const kScope = "text_encoders.llm.";

using sd::test::cpu_backend;

// Four query heads on two key/value heads of 8 channels; the width (12) is not heads * hd
// (32), as in Qwen3-4B (2560 vs 4096).
LlmConfig tiny_qwen3() {
  LlmConfig c;
  c.vocab_size = 50;
  c.hidden = 12;
  c.intermediate = 20;
  c.layers = 3;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.rope_theta = 10000.0f;
  return c;
}

std::vector<std::vector<float>> run_llm(nn::Weights& w, const LlmConfig& c,
                                        const std::vector<int32_t>& ids, int64_t valid,
                                        const std::vector<int>& layers) {
  const int64_t len = static_cast<int64_t>(ids.size());
  const LlmRope rope = llm_rope(c, len);
  const std::vector<float> mask = llm_causal_mask(len, valid);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* t_ids = call.input("ids", DType::I32, make_shape({len}), ids.data());
  Tensor* cos_t = call.input_f32("cos", make_shape({c.head_dim / 2, len}), rope.cos.data());
  Tensor* sin_t = call.input_f32("sin", make_shape({c.head_dim / 2, len}), rope.sin.data());
  Tensor* m = call.input_f32("mask", make_shape({len, len}), mask.data());
  return runner.run(
      call, llm_forward(nn::Scope(call.ctx(), w, kScope), c, t_ids, cos_t, sin_t, m, layers));
}

// RoPE with the halves of a head rotated against each other, on [L][heads * hd].
void rotate_halves(std::vector<float>& x, int64_t heads, int64_t hd, float theta) {
  const int64_t len = static_cast<int64_t>(x.size()) / (heads * hd);
  for (int64_t t = 0; t < len; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < hd / 2; ++j) {
        const double a = double(t) * std::pow(double(theta), -2.0 * double(j) / double(hd));
        float& x0 = x[(t * heads + h) * hd + j];
        float& x1 = x[(t * heads + h) * hd + j + hd / 2];
        const double r0 = x0 * std::cos(a) - x1 * std::sin(a);
        const double r1 = x0 * std::sin(a) + x1 * std::cos(a);
        x0 = static_cast<float>(r0);
        x1 = static_cast<float>(r1);
      }
}

// The decoder with loops: returns the state after `upto` blocks (final-normed at the end).
std::vector<float> reference_llm(const nn::RandomWeights& w, const LlmConfig& c,
                                 const std::vector<int32_t>& ids, int upto) {
  const int64_t len = static_cast<int64_t>(ids.size()), d = c.hidden, hd = c.head_dim;
  const std::string root = std::string(kScope) + "model.";
  const std::vector<float> embed = w.values(root + "embed_tokens.weight");
  std::vector<float> x(static_cast<size_t>(len * d));
  for (int64_t t = 0; t < len; ++t)
    for (int64_t i = 0; i < d; ++i) x[t * d + i] = embed[ids[t] * d + i];
  for (int l = 0; l < upto; ++l) {
    const std::string s = root + "layers." + std::to_string(l) + ".";
    std::vector<float> h = loops::rms_norm(x, d, w.values(s + "input_layernorm.weight"), c.eps);
    const std::string a = s + "self_attn.";
    std::vector<float> q = loops::linear(w, a + "q_proj", h, d, c.heads * hd, c.qkv_bias);
    std::vector<float> k = loops::linear(w, a + "k_proj", h, d, c.kv_heads * hd, c.qkv_bias);
    std::vector<float> v = loops::linear(w, a + "v_proj", h, d, c.kv_heads * hd, c.qkv_bias);
    if (c.qk_norm) {
      q = loops::rms_norm(q, hd, w.values(a + "q_norm.weight"), c.eps);
      k = loops::rms_norm(k, hd, w.values(a + "k_norm.weight"), c.eps);
    }
    rotate_halves(q, c.heads, hd, c.rope_theta);
    rotate_halves(k, c.kv_heads, hd, c.rope_theta);
    // Repeat each key/value head for its group of query heads.
    const int64_t group = c.heads / c.kv_heads;
    std::vector<float> kr(static_cast<size_t>(len * c.heads * hd)), vr(kr.size());
    for (int64_t t = 0; t < len; ++t)
      for (int64_t h2 = 0; h2 < c.heads; ++h2)
        for (int64_t j = 0; j < hd; ++j) {
          kr[(t * c.heads + h2) * hd + j] = k[(t * c.kv_heads + h2 / group) * hd + j];
          vr[(t * c.heads + h2) * hd + j] = v[(t * c.kv_heads + h2 / group) * hd + j];
        }
    const std::vector<float> att =
        loops::attention(q, kr, vr, len, c.heads, hd, 1.0 / std::sqrt(double(hd)),
                         [](int64_t, int64_t qi, int64_t ki) {
                           return ki > qi ? -std::numeric_limits<double>::infinity() : 0.0;
                         });
    h = loops::linear(w, a + "o_proj", att, c.heads * hd, d, false);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    h = loops::rms_norm(x, d, w.values(s + "post_attention_layernorm.weight"), c.eps);
    std::vector<float> g = loops::linear(w, s + "mlp.gate_proj", h, d, c.intermediate, false);
    const std::vector<float> u = loops::linear(w, s + "mlp.up_proj", h, d, c.intermediate, false);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    h = loops::linear(w, s + "mlp.down_proj", g, c.intermediate, d, false);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
  }
  if (upto == c.layers) x = loops::rms_norm(x, d, w.values(root + "norm.weight"), c.eps);
  return x;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(Llm, Qwen3MatchesLoopsAtEveryAskedLayer) {
  const LlmConfig c = tiny_qwen3();
  nn::RandomWeights w;
  const std::vector<int32_t> ids = {3, 17, 42, 8, 8, 0, 49};
  const auto out = run_llm(w, c, ids, 7, {2, 3, 0});
  ASSERT_EQ(out.size(), 3u);
  expect_close(out[0], reference_llm(w, c, ids, 2), 1e-4f);
  expect_close(out[1], reference_llm(w, c, ids, 3), 1e-4f);  // final-normed
  expect_close(out[2], reference_llm(w, c, ids, 0), 0.0f);   // the embeddings
}

TEST(Llm, QkvBiasAndNoQkNormForQwen2_5_VL) {
  LlmConfig c = tiny_qwen3();
  c.arch = LlmArch::Qwen2_5_VL;
  c.qkv_bias = true;
  c.qk_norm = false;
  nn::RandomWeights w;
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  const std::vector<float> got = run_llm(w, c, ids, 5, {2})[0];  // creates the weights
  expect_close(got, reference_llm(w, c, ids, 2), 1e-4f);
}

TEST(Llm, CausalTokensIgnoreWhatFollows) {
  // A causal decoder's state of token t depends on tokens <= t only: padding after the
  // prompt leaves the prompt's states unchanged.
  const LlmConfig c = tiny_qwen3();
  nn::RandomWeights w;
  const auto a = run_llm(w, c, {5, 6, 7}, 3, {2})[0];
  const auto b = run_llm(w, c, {5, 6, 7, 0, 0}, 3, {2})[0];
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f);
}

TEST(Llm, PairedRopeLayoutMatchesHalvesWithPermutedProjections) {
  // llama.cpp stores Llama-style q and k rows permuted so that channel pairs (j, j + hd/2)
  // become neighbours; the Pairs layout on such weights must give the same states.
  LlmConfig c = tiny_qwen3();
  c.qk_norm = false;
  nn::RandomWeights halves;
  const std::vector<int32_t> ids = {9, 4, 31, 2};
  const auto want = run_llm(halves, c, ids, 4, {2})[0];

  nn::RandomWeights pairs;
  for (const std::string& name : halves.names()) {
    std::vector<float> v = halves.values(name);
    const bool qk = name.find("q_proj.weight") != std::string::npos ||
                    name.find("k_proj.weight") != std::string::npos;
    if (qk) {
      const int64_t rows = static_cast<int64_t>(v.size()) / c.hidden, hd = c.head_dim;
      std::vector<float> p(v.size());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t head = r / hd, j = r % hd;
        const int64_t to = head * hd + (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
        std::copy(v.begin() + r * c.hidden, v.begin() + (r + 1) * c.hidden,
                  p.begin() + to * c.hidden);
      }
      v = p;
    }
    const int64_t rows = static_cast<int64_t>(v.size()) / c.hidden;
    if (name.find("embed_tokens") != std::string::npos)
      pairs.set(name, make_shape({c.hidden, c.vocab_size}), v);
    else if (name.find("norm") != std::string::npos)
      pairs.set(name, make_shape({static_cast<int64_t>(v.size())}), v);
    else if (name.find("down_proj") != std::string::npos)
      pairs.set(name, make_shape({c.intermediate, c.hidden}), v);
    else if (name.find("o_proj") != std::string::npos)
      pairs.set(name, make_shape({c.heads * c.head_dim, c.hidden}), v);
    else
      pairs.set(name, make_shape({c.hidden, rows}), v);
  }
  c.rope_layout = RopeLayout::Pairs;
  expect_close(run_llm(pairs, c, ids, 4, {2})[0], want, 1e-4f);
}

TEST(Llm, BuildsNoBlockPastTheDeepestAskedLayer) {
  const LlmConfig c = tiny_qwen3();
  nn::RandomWeights w;
  nn::ParamRecorder rec(w);
  Context ctx;
  Tensor* ids = ctx.new_tensor(DType::I32, make_shape({4}), "ids");
  Tensor* cs = ctx.new_tensor(DType::F32, make_shape({c.head_dim / 2, 4}), "cos");
  Tensor* sn = ctx.new_tensor(DType::F32, make_shape({c.head_dim / 2, 4}), "sin");
  llm_forward(nn::Scope(ctx, rec, kScope), c, ids, cs, sn, nullptr, {1});
  for (const nn::ParamDecl& p : rec.params()) {
    EXPECT_EQ(p.name.find("layers.1."), std::string::npos) << p.name;
    EXPECT_EQ(p.name.find("model.norm"), std::string::npos) << p.name;
  }
}

TEST(Llm, ConfigComesFromTheTensors) {
  const std::string root = "te.";
  std::map<std::string, std::array<int64_t, 4>> shapes = {
      {"te.model.embed_tokens.weight", {2560, 151936, 1, 1}},
      {"te.model.layers.0.self_attn.q_norm.weight", {128, 1, 1, 1}},
      {"te.model.layers.0.self_attn.q_proj.weight", {2560, 4096, 1, 1}},
      {"te.model.layers.0.self_attn.k_proj.weight", {2560, 1024, 1, 1}},
      {"te.model.layers.0.mlp.gate_proj.weight", {2560, 9728, 1, 1}},
  };
  for (int i = 0; i < 36; ++i)
    shapes["te.model.layers." + std::to_string(i) + ".input_layernorm.weight"] = {2560, 1, 1, 1};
  auto shape_of = [&](const std::string& n) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(n);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
  const LlmConfig c = llm_config_from_shapes(LlmConfig::qwen3_4b(), root, shape_of);
  EXPECT_EQ(c.hidden, 2560);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate, 9728);
  EXPECT_EQ(c.layers, 36);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);

  shapes.erase("te.model.embed_tokens.weight");
  try {
    llm_config_from_shapes(LlmConfig::qwen3_4b(), root, shape_of);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("te.model.embed_tokens.weight"), std::string::npos)
        << e.what();
  }
}

TEST(Llm, AskingPastTheLastLayerIsAnError) {
  const LlmConfig c = tiny_qwen3();
  nn::RandomWeights w;
  EXPECT_THROW(run_llm(w, c, {1, 2}, 2, {4}), Error);
}

}  // namespace
}  // namespace sd::models
