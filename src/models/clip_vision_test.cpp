// CLIP's vision tower: sizes from the file, the image's preparation, and the embeddings
// against a direct computation (the transformer layers are clip_text's, tested there).
#include "models/clip_vision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

using Values = std::vector<float>;
using Shapes = std::map<std::string, std::array<int64_t, 4>>;

ClipVisionShapeOf lookup(const Shapes& shapes) {
  return [&shapes](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ClipVision, ConfigComesFromTheFile) {
  Shapes shapes = {
      {"v.vision_model.embeddings.patch_embedding.weight", {14, 14, 3, 64}},
      {"v.vision_model.embeddings.position_embedding.weight", {64, 257, 1, 1}},
      {"v.vision_model.encoder.layers.0.mlp.fc1.weight", {64, 128, 1, 1}},
      {"v.vision_model.encoder.layers.0.self_attn.q_proj.weight", {64, 64, 1, 1}},
      {"v.vision_model.encoder.layers.1.self_attn.q_proj.weight", {64, 64, 1, 1}},
  };
  const ClipVisionConfig c = clip_vision_config_from_shapes("v.", lookup(shapes));
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.patch, 14);
  EXPECT_EQ(c.image_size, 224);
  EXPECT_EQ(c.tokens(), 257);
  EXPECT_EQ(c.intermediate, 128);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.heads, 16);
  // Positions that are no square grid plus a class token, and a missing tensor, are named.
  shapes["v.vision_model.embeddings.position_embedding.weight"] = {64, 250, 1, 1};
  EXPECT_THROW(clip_vision_config_from_shapes("v.", lookup(shapes)), Error);
  try {
    clip_vision_config_from_shapes("w.", lookup(shapes));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--clip_vision"), std::string::npos) << e.what();
  }
}

// The image is scaled to cover the square (nearest), its centre cut out and normalized.
TEST(ClipVision, PixelsAreTheNormalizedCentre) {
  ClipVisionConfig c;
  c.patch = 1;
  c.image_size = 2;
  // 4 x 2 RGB planes: value = x + 10 y (+ 100 per channel), scaled by 1/200.
  Values image(4 * 2 * 3);
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 4; ++x)
        image[static_cast<size_t>((ch * 2 + y) * 4 + x)] = (x + 10 * y + 100 * ch) / 200.0f;
  const Values px = clip_vision_pixels(image, 4, 2, c);
  ASSERT_EQ(px.size(), 2u * 2u * 3u);
  const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
  const float stdev[3] = {0.26862954f, 0.26130258f, 0.27577711f};
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 2; ++x) {
        const float v = std::min(1.0f, (x + 1 + 10 * y + 100 * ch) / 200.0f);  // columns 1, 2
        EXPECT_NEAR(px[static_cast<size_t>((ch * 2 + y) * 2 + x)], (v - mean[ch]) / stdev[ch],
                    1e-5f);
      }
  EXPECT_THROW(clip_vision_pixels(image, 5, 2, c), Error);
}

// Patches (the convolution), the class token in front, positions, the first LayerNorm.
TEST(ClipVision, EmbeddingsMatchADirectComputation) {
  ClipVisionConfig c;
  c.hidden = 16;
  c.intermediate = 32;
  c.heads = 4;
  c.layers = 1;
  c.patch = 2;
  c.image_size = 4;
  nn::RandomWeights w(DType::F32, 3);
  nn::GraphRunner runner(cpu_backend());
  Values pixels(4 * 4 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::sin(0.9f * static_cast<float>(i));
  nn::GraphCall call;
  Tensor* x = call.input_f32("x", make_shape({4, 4, 3, 1}), pixels.data());
  const Values got = runner.run(call, clip_vision_hidden(nn::Scope(call.ctx(), w, ""), c, x, 0));
  ASSERT_EQ(got.size(), static_cast<size_t>(16 * 5));

  const Values conv = w.values("vision_model.embeddings.patch_embedding.weight");
  const Values cls = w.values("vision_model.embeddings.class_embedding");
  const Values pos = w.values("vision_model.embeddings.position_embedding.weight");
  const Values gamma = w.values("vision_model.pre_layrnorm.weight");
  const Values beta = w.values("vision_model.pre_layrnorm.bias");
  for (int token = 0; token < 5; ++token) {
    Values e(16);
    for (int d = 0; d < 16; ++d) {
      float v = cls[static_cast<size_t>(d)];
      if (token > 0) {
        const int py = (token - 1) / 2, px = (token - 1) % 2;
        v = 0;
        for (int ch = 0; ch < 3; ++ch)
          for (int ky = 0; ky < 2; ++ky)
            for (int kx = 0; kx < 2; ++kx)
              v += conv[static_cast<size_t>(((d * 3 + ch) * 2 + ky) * 2 + kx)] *
                   pixels[static_cast<size_t>((ch * 4 + py * 2 + ky) * 4 + px * 2 + kx)];
      }
      e[static_cast<size_t>(d)] = v + pos[static_cast<size_t>(token * 16 + d)];
    }
    float mean = 0, var = 0;
    for (float v : e) mean += v / 16;
    for (float v : e) var += (v - mean) * (v - mean) / 16;
    for (int d = 0; d < 16; ++d) {
      const float want = (e[static_cast<size_t>(d)] - mean) / std::sqrt(var + 1e-5f) *
                             gamma[static_cast<size_t>(d)] +
                         beta[static_cast<size_t>(d)];
      // The patch weights run in f16, as the reference runs them.
      EXPECT_NEAR(got[static_cast<size_t>(token * 16 + d)], want, 2e-2f)
          << "token " << token << " channel " << d;
    }
  }
}

}  // namespace
}  // namespace sd::models
