// Wan's transformer helpers and its autoencoder on clips: token order, rotary positions,
// dimensions from the file, and the causal decoding of a clip chunk by chunk.
#include "models/wan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "models/wan_vae.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

using Values = std::vector<float>;

TEST(Wan, PatchesAreFrameMajorAndRoundTrip) {
  const int64_t w = 4, h = 2, frames = 3, channels = 2;
  Values latent(static_cast<size_t>(w * h * frames * channels));
  for (size_t i = 0; i < latent.size(); ++i) latent[i] = static_cast<float>(i);
  const Values tokens = wan_patchify(latent, w, h, frames, channels);
  // Token (frame 1, column 1): its first value is channel 0, row 0, column 2 of frame 1.
  const int64_t width = 4 * channels, token = 1 * 2 + 1;
  EXPECT_EQ(tokens[static_cast<size_t>(token * width)], latent[static_cast<size_t>(1 * h * w + 2)]);
  // Within a patch the input order is (channel, dy, dx): value 4 is channel 1's (0, 0).
  EXPECT_EQ(tokens[4], latent[static_cast<size_t>(frames * h * w)]);
  // The head's order is (dy, dx, channel): unpatchify of a channel-minor copy is the latent.
  Values head(tokens.size());
  for (int64_t t = 0; t < static_cast<int64_t>(tokens.size()) / width; ++t)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < 4; ++p)
        head[static_cast<size_t>(t * width + p * channels + c)] =
            tokens[static_cast<size_t>(t * width + c * 4 + p)];
  EXPECT_EQ(wan_unpatchify(head, w, h, frames, channels), latent);
}

TEST(Wan, RopeTablesFollowFrameRowAndColumn) {
  const WanConfig c;
  const WanRope r = wan_rope(c, 2, 3, 4);
  const int64_t half = c.head_dim / 2;
  ASSERT_EQ(r.cos.size(), static_cast<size_t>(half * 2 * 3 * 4));
  // Token 0 sits at the origin: no rotation.
  for (int64_t j = 0; j < half; ++j) EXPECT_FLOAT_EQ(r.cos[static_cast<size_t>(j)], 1.0f);
  // Token (frame 1, row 2, column 3): each axis's first frequency turns by its position.
  const int64_t t = (1 * 3 + 2) * 4 + 3;
  const float* cos_t = r.cos.data() + t * half;
  EXPECT_FLOAT_EQ(cos_t[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(cos_t[22], std::cos(2.0f));
  EXPECT_FLOAT_EQ(cos_t[22 + 21], std::cos(3.0f));
}

TEST(Wan, ConfigComesFromTheFile) {
  const std::map<std::string, std::array<int64_t, 4>> shapes = {
      {"m.patch_embedding.weight", {2, 2, 1, 16 * 256}},
      {"m.patch_embedding.bias", {256, 1, 1, 1}},
      {"m.text_embedding.0.weight", {64, 256, 1, 1}},
      {"m.time_embedding.0.weight", {256, 256, 1, 1}},
      {"m.blocks.0.ffn.0.weight", {256, 512, 1, 1}},
      {"m.blocks.0.self_attn.q.weight", {256, 256, 1, 1}},
      {"m.blocks.1.self_attn.q.weight", {256, 256, 1, 1}},
      {"m.head.head.weight", {256, 64, 1, 1}},
  };
  auto shape_of = [&](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
  const WanConfig c = wan_config_from_shapes("m.", shape_of);
  EXPECT_EQ(c.dim, 256);
  EXPECT_EQ(c.heads(), 2);
  EXPECT_EQ(c.in_channels, 16);
  EXPECT_EQ(c.out_channels, 16);
  EXPECT_EQ(c.text_dim, 64);
  EXPECT_EQ(c.ffn_dim, 512);
  EXPECT_EQ(c.layers, 2);
  // A file without a tensor names it.
  try {
    wan_config_from_shapes("x.", shape_of);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.patch_embedding.weight"), std::string::npos);
  }
}

// A tiny Wan 2.1 autoencoder with random weights (the same values by name in every graph).
VaeConfig tiny_vae() {
  VaeConfig c = VaeConfig::wan21();
  c.ch = 32;
  return c;
}

// Decodes latent frames (each [2, 2, 16]) as one clip, frame by frame and stage by stage:
// the frames, each 16x16x3.
std::vector<Values> decode_clip(nn::RandomWeights& w, const std::vector<Values>& latents) {
  const VaeConfig vc = tiny_vae();
  nn::GraphRunner runner(cpu_backend());
  WanClipCache clip;
  struct Frame {
    Values values;
    int64_t w, h, c;
  };
  auto run = [&](int stage, const Frame& in) {
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x = call.input_f32("x", make_shape({in.w, in.h, in.c, 1}), in.values.data());
    Tensor* out = wan_vae_decode_stage(nn::Scope(call.ctx(), w, ""), vc, stage, x, clip);
    std::vector<Tensor*> outputs = {out};
    outputs.insert(outputs.end(), clip.saved().begin(), clip.saved().end());
    std::vector<Values> values = runner.run(call, outputs);
    const Values result = values[0];
    values.erase(values.begin());
    clip.keep(std::move(values));
    std::vector<Frame> frames;
    const size_t size = static_cast<size_t>(out->ne[0] * out->ne[1] * out->ne[2]);
    for (int64_t i = 0; i < out->ne[3]; ++i)
      frames.push_back({Values(result.begin() + static_cast<std::ptrdiff_t>(i * size),
                               result.begin() + static_cast<std::ptrdiff_t>((i + 1) * size)),
                        out->ne[0], out->ne[1], out->ne[2]});
    return frames;
  };
  std::vector<Values> video;
  for (size_t t = 0; t < latents.size(); ++t) {
    std::vector<Frame> pending = run(0, {latents[t], 2, 2, 16});
    for (int stage = 1; stage < wan_vae_decode_stages(vc); ++stage) {
      std::vector<Frame> next;
      for (const Frame& f : pending)
        for (Frame& g : run(stage, f)) next.push_back(std::move(g));
      pending = std::move(next);
    }
    EXPECT_EQ(pending.size(), t == 0 ? 1u : 4u);
    for (Frame& f : pending) {
      EXPECT_EQ(f.values.size(), 16u * 16u * 3u);
      video.push_back(std::move(f.values));
    }
  }
  return video;
}

Values latent_frame(float phase) {
  Values z(2 * 2 * 16);
  for (size_t i = 0; i < z.size(); ++i) z[i] = std::sin(0.7f * static_cast<float>(i) + phase);
  return z;
}

TEST(WanVae, ClipsDecodeCausallyFourFramesPerLatentFrame) {
  nn::RandomWeights w(DType::F16, 5);
  const Values z0 = latent_frame(0.0f), z1 = latent_frame(1.0f), z2 = latent_frame(2.0f);
  const std::vector<Values> three = decode_clip(w, {z0, z1, z2});
  ASSERT_EQ(three.size(), 9u);  // 1 + 4 + 4
  // The first frame is the image decode of latent frame 0.
  {
    nn::GraphRunner runner(cpu_backend());
    nn::GraphCall call;
    Tensor* z = call.input_f32("z", make_shape({2, 2, 16, 1}), z0.data());
    EXPECT_EQ(runner.run(call, wan_vae_decode(nn::Scope(call.ctx(), w, ""), tiny_vae(), z)),
              three[0]);
  }
  // Causal: a later latent frame changes only the frames after its predecessors'.
  const std::vector<Values> other = decode_clip(w, {z0, z1, latent_frame(5.0f)});
  for (size_t f = 0; f < 5; ++f) EXPECT_EQ(other[f], three[f]) << "frame " << f;
  for (size_t f = 5; f < 9; ++f) EXPECT_NE(other[f], three[f]) << "frame " << f;
  // And the frames remember what came before: the same latent frame after another history
  // decodes differently.
  const std::vector<Values> shifted = decode_clip(w, {z1, z1, z2});
  EXPECT_NE(shifted[5], three[5]);
}

}  // namespace
}  // namespace sd::models
