#include "models/z_image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "models/loop_reference_test_util.h"
#include "nn/graph_runner.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

const char* const kScope = "model.diffusion_model.";

using loops::Values;
using sd::test::cpu_backend;

ZImageConfig tiny_z_image_config() {
  ZImageConfig c;
  c.in_channels = 4;
  c.out_channels = 4;
  c.hidden = 16;
  c.heads = 2;
  c.head_dim = 8;
  c.ffn_hidden = 24;
  c.caption_dim = 12;
  c.layers = 2;
  c.refiner_layers = 1;
  c.axes_dim = {2, 2, 4};
  c.token_multiple = 8;
  return c;
}

Values random_values(size_t n, uint32_t seed) {
  Values v(n);
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
  }
  return v;
}

Values run_dit(nn::RandomWeights& w, const ZImageConfig& c, const Values& img, const Values& cap,
               float t, int64_t ph, int64_t pw) {
  const int64_t width = int64_t{c.patch_size} * c.patch_size * c.in_channels;
  const int64_t caption = static_cast<int64_t>(cap.size()) / c.caption_dim;
  const ZImageRope rope = z_image_rope(c, caption, ph, pw);
  const int64_t tokens = static_cast<int64_t>(rope.cos.size()) / (c.head_dim / 2);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  Tensor* ti = call.input_f32("img", make_shape({width, ph * pw}), img.data());
  Tensor* tc = call.input_f32("cap", make_shape({c.caption_dim, caption}), cap.data());
  Tensor* tt = call.input_f32("t", make_shape({1}), &t);
  Tensor* cs = call.input_f32("cos", make_shape({c.head_dim / 2, tokens}), rope.cos.data());
  Tensor* sn = call.input_f32("sin", make_shape({c.head_dim / 2, tokens}), rope.sin.data());
  return runner.run(call, z_image_forward(nn::Scope(call.ctx(), w, kScope), c, ti, tc, tt, cs, sn));
}

// --- the transformer with loops, on [tokens][channels] values ---

// Rotates neighbouring channel pairs of every head by the token's angle per frequency.
void rotate_pairs(Values& x, int64_t heads, int64_t hd, const ZImageRope& rope) {
  const int64_t len = static_cast<int64_t>(x.size()) / (heads * hd), half = hd / 2;
  for (int64_t t = 0; t < len; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < half; ++j) {
        const double cs = rope.cos[t * half + j], sn = rope.sin[t * half + j];
        float& a = x[(t * heads + h) * hd + 2 * j];
        float& b = x[(t * heads + h) * hd + 2 * j + 1];
        const double ra = a * cs - b * sn, rb = a * sn + b * cs;
        a = static_cast<float>(ra);
        b = static_cast<float>(rb);
      }
}

ZImageRope slice_rope(const ZImageRope& r, int64_t half, int64_t from, int64_t to) {
  ZImageRope s;
  s.cos.assign(r.cos.begin() + from * half, r.cos.begin() + to * half);
  s.sin.assign(r.sin.begin() + from * half, r.sin.begin() + to * half);
  return s;
}

Values reference_block(const nn::RandomWeights& w, const ZImageConfig& c, const std::string& b,
                       Values x, const Values* t_emb, const ZImageRope& rope) {
  const int64_t d = c.hidden, hd = c.head_dim, len = static_cast<int64_t>(x.size()) / d;
  Values mod;
  if (t_emb) mod = loops::linear(w, b + "adaLN_modulation.0", *t_emb, c.adaln_dim(), 4 * d);
  auto modulated = [&](Values v, int chunk, bool gate) {
    for (int64_t t = 0; t < len; ++t)
      for (int64_t i = 0; i < d; ++i) {
        const double m = mod[chunk * d + i];
        v[t * d + i] = static_cast<float>(v[t * d + i] * (gate ? std::tanh(m) : 1.0 + m));
      }
    return v;
  };
  Values h = loops::rms_norm(x, d, w.values(b + "attention_norm1.weight"), c.eps);
  if (t_emb) h = modulated(h, 0, false);
  const Values qkv = loops::linear(w, b + "attention.qkv", h, d, 3 * d, false);
  Values q(static_cast<size_t>(len * d)), k(q.size()), v(q.size());
  for (int64_t t = 0; t < len; ++t)
    for (int64_t i = 0; i < d; ++i) {
      q[t * d + i] = qkv[t * 3 * d + i];
      k[t * d + i] = qkv[t * 3 * d + d + i];
      v[t * d + i] = qkv[t * 3 * d + 2 * d + i];
    }
  q = loops::rms_norm(q, hd, w.values(b + "attention.q_norm.weight"), 1e-6f);
  k = loops::rms_norm(k, hd, w.values(b + "attention.k_norm.weight"), 1e-6f);
  rotate_pairs(q, c.heads, hd, rope);
  rotate_pairs(k, c.heads, hd, rope);
  h = loops::attention(q, k, v, len, c.heads, hd, 1.0 / std::sqrt(double(hd)));
  h = loops::linear(w, b + "attention.out", h, d, d, false);
  h = loops::rms_norm(h, d, w.values(b + "attention_norm2.weight"), c.eps);
  if (t_emb) h = modulated(h, 1, true);
  for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];

  h = loops::rms_norm(x, d, w.values(b + "ffn_norm1.weight"), c.eps);
  if (t_emb) h = modulated(h, 2, false);
  Values g = loops::linear(w, b + "feed_forward.w1", h, d, c.ffn_hidden, false);
  const Values u = loops::linear(w, b + "feed_forward.w3", h, d, c.ffn_hidden, false);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  h = loops::linear(w, b + "feed_forward.w2", g, c.ffn_hidden, d, false);
  h = loops::rms_norm(h, d, w.values(b + "ffn_norm2.weight"), c.eps);
  if (t_emb) h = modulated(h, 3, true);
  for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
  return x;
}

Values reference_dit(const nn::RandomWeights& w, const ZImageConfig& c, const Values& img,
                     const Values& cap, float t, int64_t ph, int64_t pw) {
  const std::string r = kScope;
  const int64_t d = c.hidden, half = c.head_dim / 2;
  const int64_t width = int64_t{c.patch_size} * c.patch_size * c.in_channels;
  const int64_t caption = static_cast<int64_t>(cap.size()) / c.caption_dim;
  const int64_t cap_len = z_image_padded(c, caption), img_len = z_image_padded(c, ph * pw);
  const ZImageRope rope = z_image_rope(c, caption, ph, pw);

  // Timestep: [cos | sin] of t * 10000^(-j / 128), then the MLP.
  Values freq(256);
  for (int j = 0; j < 128; ++j) {
    const double f = std::exp(-std::log(10000.0) * j / 128.0);
    freq[j] = static_cast<float>(std::cos(t * f));
    freq[128 + j] = static_cast<float>(std::sin(t * f));
  }
  Values te = loops::linear(w, r + "t_embedder.mlp.0", freq, 256, c.t_hidden());
  for (float& v : te) v = v / (1.0f + std::exp(-v));
  const Values t_emb = loops::linear(w, r + "t_embedder.mlp.2", te, c.t_hidden(), c.adaln_dim());

  Values txt = loops::rms_norm(cap, c.caption_dim, w.values(r + "cap_embedder.0.weight"), c.eps);
  txt = loops::linear(w, r + "cap_embedder.1", txt, c.caption_dim, d);
  const Values cap_pad = w.values(r + "cap_pad_token");
  while (static_cast<int64_t>(txt.size()) < cap_len * d)
    txt.insert(txt.end(), cap_pad.begin(), cap_pad.end());
  Values x = loops::linear(w, r + "x_embedder", img, width, d);
  const Values x_pad = w.values(r + "x_pad_token");
  while (static_cast<int64_t>(x.size()) < img_len * d)
    x.insert(x.end(), x_pad.begin(), x_pad.end());

  const ZImageRope txt_rope = slice_rope(rope, half, 0, cap_len);
  const ZImageRope img_rope = slice_rope(rope, half, cap_len, cap_len + img_len);
  for (int i = 0; i < c.refiner_layers; ++i)
    txt = reference_block(w, c, r + "context_refiner." + std::to_string(i) + ".", txt, nullptr,
                          txt_rope);
  for (int i = 0; i < c.refiner_layers; ++i)
    x = reference_block(w, c, r + "noise_refiner." + std::to_string(i) + ".", x, &t_emb, img_rope);
  Values joint = txt;
  joint.insert(joint.end(), x.begin(), x.end());
  for (int i = 0; i < c.layers; ++i)
    joint = reference_block(w, c, r + "layers." + std::to_string(i) + ".", joint, &t_emb, rope);

  Values st = t_emb;
  for (float& v : st) v = v / (1.0f + std::exp(-v));
  const Values s = loops::linear(w, r + "final_layer.adaLN_modulation.1", st, c.adaln_dim(), d);
  Values out_tokens(joint.begin() + cap_len * d, joint.begin() + (cap_len + ph * pw) * d);
  out_tokens = loops::layer_norm(out_tokens, d, 1e-6f);
  for (size_t i = 0; i < out_tokens.size(); ++i) out_tokens[i] *= 1.0f + s[i % d];
  Values out = loops::linear(w, r + "final_layer.linear", out_tokens, d, width);
  for (float& v : out) v = -v;
  return out;
}

TEST(ZImage, TransformerMatchesLoops) {
  const ZImageConfig c = tiny_z_image_config();
  nn::RandomWeights w;
  const int64_t ph = 2, pw = 3, caption = 5;
  const Values img = random_values(static_cast<size_t>(16 * ph * pw), 1);
  const Values cap = random_values(static_cast<size_t>(c.caption_dim * caption), 2);
  const Values got = run_dit(w, c, img, cap, 730.0f, ph, pw);
  const Values want = reference_dit(w, c, img, cap, 730.0f, ph, pw);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-4f) << "at " << i;
}

TEST(ZImage, RopePositionsFollowThePaddedStreams) {
  ZImageConfig c = tiny_z_image_config();
  const ZImageRope r = z_image_rope(c, 5, 2, 3);  // caption 5 -> 8, image 6 -> 8
  const int64_t half = c.head_dim / 2;
  ASSERT_EQ(r.cos.size(), static_cast<size_t>(half * 16));
  // Axis 0's first frequency is 1: its angle is the position itself.
  EXPECT_NEAR(r.sin[0 * half], std::sin(1.0f), 1e-6f);       // caption token 0 at 1
  EXPECT_NEAR(r.sin[7 * half], std::sin(8.0f), 1e-6f);       // the last caption pad at 8
  EXPECT_NEAR(r.sin[8 * half], std::sin(9.0f), 1e-6f);       // the image at padded caption + 1
  EXPECT_NEAR(r.sin[13 * half + 1], std::sin(1.0f), 1e-6f);  // patch (1, 2): row axis at 1
  EXPECT_NEAR(r.sin[13 * half + 2], std::sin(2.0f), 1e-6f);  // column axis at 2
  EXPECT_EQ(r.sin[14 * half], 0.0f);                         // image padding at the origin
}

TEST(ZImage, PatchifyPutsChannelsFastest) {
  const int64_t w = 4, h = 2, ch = 3;
  Values latent(static_cast<size_t>(w * h * ch));
  for (size_t i = 0; i < latent.size(); ++i) latent[i] = static_cast<float>(i);
  const Values tokens = z_image_patchify(latent, w, h, ch, 2);
  // Token 1 (patch column 1), dy 1, dx 0, channel 2: latent (c 2, y 1, x 2).
  EXPECT_EQ(tokens[1 * 12 + (1 * 2 + 0) * 3 + 2], latent[(2 * h + 1) * w + 2]);
  EXPECT_EQ(z_image_unpatchify(tokens, w, h, ch, 2), latent);
}

TEST(ZImage, ConfigComesFromTheTensors) {
  std::map<std::string, std::array<int64_t, 4>> shapes = {
      {"dit.x_embedder.weight", {64, 3840, 1, 1}},
      {"dit.final_layer.linear.weight", {3840, 64, 1, 1}},
      {"dit.cap_embedder.1.weight", {2560, 3840, 1, 1}},
      {"dit.layers.0.attention.q_norm.weight", {128, 1, 1, 1}},
      {"dit.layers.0.feed_forward.w1.weight", {3840, 10240, 1, 1}},
  };
  for (int i = 0; i < 30; ++i)
    shapes["dit.layers." + std::to_string(i) + ".attention.qkv.weight"] = {3840, 11520, 1, 1};
  for (const char* r : {"noise_refiner.", "context_refiner."})
    for (int i = 0; i < 2; ++i)
      shapes[std::string("dit.") + r + std::to_string(i) + ".attention.qkv.weight"] = {3840, 11520,
                                                                                       1, 1};
  auto shape_of = [&](const std::string& n) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(n);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
  ZImageConfig c = z_image_config_from_shapes(ZImageConfig::released(), "dit.", shape_of);
  EXPECT_EQ(c.hidden, 3840);
  EXPECT_EQ(c.heads, 30);
  EXPECT_EQ(c.in_channels, 16);
  EXPECT_EQ(c.caption_dim, 2560);
  EXPECT_EQ(c.ffn_hidden, 10240);
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.refiner_layers, 2);

  shapes["dit.layers.0.attention.q_norm.weight"] = {64, 1, 1, 1};  // heads of 64: not Z-Image
  try {
    z_image_config_from_shapes(ZImageConfig::released(), "dit.", shape_of);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary axes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::models
