// Wan's transformer helpers and its autoencoders on clips: token order, rotary positions,
// dimensions from the file, timesteps per frame, and the causal decoding and encoding of a
// clip chunk by chunk (Wan 2.1's autoencoder and Wan 2.2's).
#include "models/wan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
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

TEST(Wan, ImageToVideoConfigComesFromTheFile) {
  std::map<std::string, std::array<int64_t, 4>> shapes = {
      {"m.patch_embedding.weight", {2, 2, 1, 36 * 256}},
      {"m.patch_embedding.bias", {256, 1, 1, 1}},
      {"m.text_embedding.0.weight", {64, 256, 1, 1}},
      {"m.time_embedding.0.weight", {256, 256, 1, 1}},
      {"m.blocks.0.ffn.0.weight", {256, 512, 1, 1}},
      {"m.blocks.0.self_attn.q.weight", {256, 256, 1, 1}},
      {"m.head.head.weight", {256, 64, 1, 1}},
      {"m.img_emb.proj.1.weight", {96, 96, 1, 1}},
  };
  auto shape_of = [&](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
  WanConfig c = wan_config_from_shapes("m.", shape_of);
  EXPECT_EQ(c.in_channels, 36);
  EXPECT_EQ(c.out_channels, 16);
  EXPECT_EQ(c.image_dim, 96);
  EXPECT_EQ(c.image_pos_tokens, 0);
  shapes["m.img_emb.emb_pos"] = {96, 514, 1, 1};  // FLF2V
  c = wan_config_from_shapes("m.", shape_of);
  EXPECT_EQ(c.image_pos_tokens, 514);
}

TEST(Wan, VaceConfigComesFromTheFile) {
  std::map<std::string, std::array<int64_t, 4>> shapes = {
      {"m.patch_embedding.weight", {2, 2, 1, 16 * 256}},
      {"m.patch_embedding.bias", {256, 1, 1, 1}},
      {"m.text_embedding.0.weight", {64, 256, 1, 1}},
      {"m.time_embedding.0.weight", {256, 256, 1, 1}},
      {"m.blocks.0.ffn.0.weight", {256, 512, 1, 1}},
      {"m.head.head.weight", {256, 64, 1, 1}},
      {"m.vace_patch_embedding.weight", {2, 2, 1, 96 * 256}},
  };
  for (int i = 0; i < 6; ++i)
    shapes["m.blocks." + std::to_string(i) + ".self_attn.q.weight"] = {256, 256, 1, 1};
  for (int i = 0; i < 3; ++i)
    shapes["m.vace_blocks." + std::to_string(i) + ".self_attn.q.weight"] = {256, 256, 1, 1};
  auto shape_of = [&](const std::string& name) -> std::optional<std::array<int64_t, 4>> {
    auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  };
  const WanConfig c = wan_config_from_shapes("m.", shape_of);
  EXPECT_EQ(c.in_channels, 16);
  EXPECT_EQ(c.vace_in_channels, 96);
  EXPECT_EQ(c.vace_layers, 3);
  EXPECT_EQ(c.vace_patch_in(), 384);
  // Six blocks, three VACE blocks: hints after blocks 0, 2 and 4.
  const std::vector<int> expected = {0, -1, 1, -1, 2, -1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.vace_block_after(i), expected[i]) << i;
}

// The released VACE models: 1.3B (30 blocks, 15 VACE blocks after blocks 0, 2, ..., 28) and
// 14B (40 blocks, 8 after 0, 5, ..., 35).
TEST(Wan, VaceHintsFollowEveryStepthBlock) {
  WanConfig c;
  c.layers = 30;
  c.vace_layers = 15;
  for (int i = 0; i < 30; ++i) EXPECT_EQ(c.vace_block_after(i), i % 2 == 0 ? i / 2 : -1) << i;
  c.layers = 40;
  c.vace_layers = 8;
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c.vace_block_after(i), i % 5 == 0 ? i / 5 : -1) << i;
  // A count that does not divide the blocks: the first of each step, as many as there are.
  c.layers = 7;
  c.vace_layers = 2;
  for (int i = 0; i < 7; ++i) EXPECT_EQ(c.vace_block_after(i), i == 0 ? 0 : i == 3 ? 1 : -1) << i;
  c.vace_layers = 0;
  EXPECT_EQ(c.vace_block_after(0), -1);
}

// The image tokens reach the prediction through the cross-attention, and FLF2V's position
// table tells the first frame's tokens from the last's.
TEST(Wan, ImageTokensConditionThePrediction) {
  WanConfig c;
  c.dim = 128;
  c.ffn_dim = 64;
  c.text_dim = 32;
  c.freq_dim = 32;
  c.layers = 1;
  c.in_channels = 36;
  c.image_dim = 32;
  c.image_pos_tokens = 6;
  nn::RandomWeights w(DType::F32, 9);
  nn::GraphRunner runner(cpu_backend());
  const WanRope rope = wan_rope(c, 1, 1, 2);
  auto predict = [&](const Values& image) {
    nn::GraphCall call;
    Values patches(static_cast<size_t>(c.patch_in() * 2)),
        text(static_cast<size_t>(c.text_dim * 3));
    for (size_t i = 0; i < patches.size(); ++i) patches[i] = std::sin(0.3f * static_cast<float>(i));
    for (size_t i = 0; i < text.size(); ++i) text[i] = std::cos(0.2f * static_cast<float>(i));
    const float t = 500.0f;
    Tensor* p = call.input_f32("p", make_shape({c.patch_in(), 2}), patches.data());
    Tensor* tx = call.input_f32("t", make_shape({c.text_dim, 3}), text.data());
    Tensor* ts = call.input_f32("ts", make_shape({1}), &t);
    Tensor* rc = call.input_f32("rc", make_shape({c.head_dim / 2, 2}), rope.cos.data());
    Tensor* rs = call.input_f32("rs", make_shape({c.head_dim / 2, 2}), rope.sin.data());
    Tensor* img = call.input_f32("img", make_shape({c.image_dim, 6}), image.data());
    return runner.run(call, wan_forward(nn::Scope(call.ctx(), w, ""), c, p, tx, ts, rc, rs, img));
  };
  Values first(32 * 3), last(32 * 3);
  for (size_t i = 0; i < first.size(); ++i) {
    first[i] = std::sin(0.11f * static_cast<float>(i));
    last[i] = std::cos(0.17f * static_cast<float>(i));
  }
  Values image = first, swapped = last;
  image.insert(image.end(), last.begin(), last.end());
  swapped.insert(swapped.end(), first.begin(), first.end());
  const Values a = predict(image);
  ASSERT_EQ(a.size(), static_cast<size_t>(c.patch_out() * 2));
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(predict(swapped), a);  // positions differ, so order matters
  EXPECT_EQ(predict(image), a);
  // Without image tokens an image-attending transformer refuses to build.
  nn::GraphCall call;
  Tensor* p = call.ctx().new_tensor(DType::F32, {c.patch_in(), 2});
  Tensor* tx = call.ctx().new_tensor(DType::F32, {c.text_dim, 3});
  Tensor* ts = call.ctx().new_tensor(DType::F32, {1});
  Tensor* r = call.ctx().new_tensor(DType::F32, {c.head_dim / 2, 2});
  EXPECT_THROW(wan_forward(nn::Scope(call.ctx(), w, ""), c, p, tx, ts, r, r), Error);
}

// Wan 2.2 TI2V: a timestep per frame. All equal, they are the one timestep, to the bit; a
// frame at 0 changes the prediction, each frame's tokens taking their own modulation.
TEST(Wan, TimestepsPerFrame) {
  WanConfig c;
  c.dim = 128;
  c.ffn_dim = 64;
  c.text_dim = 32;
  c.freq_dim = 32;
  c.layers = 2;
  c.in_channels = c.out_channels = 48;
  nn::RandomWeights w(DType::F32, 10);
  nn::GraphRunner runner(cpu_backend());
  const int64_t frames = 2, tokens = 2 * frames;  // 1 x 2 patches per frame
  const WanRope rope = wan_rope(c, frames, 1, 2);
  Values patches(static_cast<size_t>(c.patch_in() * tokens)),
      text(static_cast<size_t>(c.text_dim * 3));
  for (size_t i = 0; i < patches.size(); ++i) patches[i] = std::sin(0.3f * static_cast<float>(i));
  for (size_t i = 0; i < text.size(); ++i) text[i] = std::cos(0.2f * static_cast<float>(i));
  auto predict = [&](const Values& t) {
    nn::GraphCall call;
    Tensor* p = call.input_f32("p", make_shape({c.patch_in(), tokens}), patches.data());
    Tensor* tx = call.input_f32("t", make_shape({c.text_dim, 3}), text.data());
    Tensor* ts = call.input_f32("ts", make_shape({static_cast<int64_t>(t.size())}), t.data());
    Tensor* rc = call.input_f32("rc", make_shape({c.head_dim / 2, tokens}), rope.cos.data());
    Tensor* rs = call.input_f32("rs", make_shape({c.head_dim / 2, tokens}), rope.sin.data());
    return runner.run(call, wan_forward(nn::Scope(call.ctx(), w, ""), c, p, tx, ts, rc, rs));
  };
  const Values one = predict({700.0f});
  ASSERT_EQ(one.size(), static_cast<size_t>(c.patch_out() * tokens));
  EXPECT_EQ(predict({700.0f, 700.0f}), one);
  const Values first_clean = predict({0.0f, 700.0f});
  const size_t half = one.size() / 2;  // frame 0's tokens, then frame 1's
  EXPECT_NE(Values(first_clean.begin(), first_clean.begin() + half),
            Values(one.begin(), one.begin() + half));
  EXPECT_NE(first_clean, predict({700.0f, 0.0f}));
  // Neither one timestep nor one per frame: refused.
  nn::GraphCall call;
  Tensor* p = call.ctx().new_tensor(DType::F32, {c.patch_in(), tokens});
  Tensor* tx = call.ctx().new_tensor(DType::F32, {c.text_dim, 3});
  Tensor* ts = call.ctx().new_tensor(DType::F32, {3});
  Tensor* r = call.ctx().new_tensor(DType::F32, {c.head_dim / 2, tokens});
  EXPECT_THROW(wan_forward(nn::Scope(call.ctx(), w, ""), c, p, tx, ts, r, r), Error);
}

// Tiny Wan autoencoders with random weights (the same values by name in every graph): Wan
// 2.1's, and Wan 2.2's (48 channels, 16x; its shortcuts need the widths' ratios as released).
VaeConfig tiny_vae() {
  VaeConfig c = VaeConfig::wan21();
  c.ch = 32;
  return c;
}
VaeConfig tiny_vae22() {
  VaeConfig c = VaeConfig::wan22();
  c.ch = 16;
  c.decoder_ch = 32;
  return c;
}

// A frame's side in pixels for a latent frame of `latent` x `latent`.
int64_t frame_side(const VaeConfig& vc, int64_t latent = 2) {
  return latent * vc.downscale();
}

// Decodes latent frames (each [latent, latent, z_channels]) as one clip, frame by frame and
// stage by stage: the frames, each side x side x 3. `largest`: the largest compute buffer
// a graph took. `into_input`: each stage's result written into its input's memory where it
// fits (as the pipeline decodes), counted in `reused`.
std::vector<Values> decode_clip(const VaeConfig& vc, nn::RandomWeights& w,
                                const std::vector<Values>& latents, int64_t latent = 2,
                                size_t* largest = nullptr, bool into_input = false,
                                int* reused = nullptr) {
  nn::GraphRunner runner(cpu_backend());
  WanClipCache clip;
  struct Frame {
    HostVector<float> values;
    int64_t w, h, c;
  };
  auto run = [&](int stage, Frame in) {
    nn::GraphCall call;
    clip.begin(call);
    const float* input = in.values.data();
    Tensor* x = call.input_f32("x", make_shape({in.w, in.h, in.c, 1}), input);
    Tensor* out = wan_vae_decode_stage(nn::Scope(call.ctx(), w, ""), vc, stage, x, clip);
    const HostVector<float> result =
        clip.run(runner, call, out, into_input ? std::move(in.values) : HostVector<float>{});
    if (reused && result.data() == input) ++*reused;
    if (largest) *largest = std::max(*largest, runner.compute_buffer_size());
    std::vector<Frame> frames;
    const size_t size = static_cast<size_t>(out->ne[0] * out->ne[1] * out->ne[2]);
    for (int64_t i = 0; i < out->ne[3]; ++i)
      frames.push_back(
          {HostVector<float>(result.begin() + static_cast<std::ptrdiff_t>(i * size),
                             result.begin() + static_cast<std::ptrdiff_t>((i + 1) * size)),
           out->ne[0], out->ne[1], out->ne[2]});
    return frames;
  };
  const auto side = static_cast<size_t>(frame_side(vc, latent));
  std::vector<Values> video;
  for (size_t t = 0; t < latents.size(); ++t) {
    std::vector<Frame> pending = run(0, {HostVector<float>(latents[t].begin(), latents[t].end()),
                                         latent, latent, vc.z_channels});
    for (int stage = 1; stage < wan_vae_decode_stages(vc); ++stage) {
      std::vector<Frame> next;
      for (const Frame& f : pending)
        for (Frame& g : run(stage, f)) next.push_back(std::move(g));
      pending = std::move(next);
    }
    EXPECT_EQ(pending.size(), t == 0 ? 1u : 4u);
    for (Frame& f : pending) {
      EXPECT_EQ(f.values.size(), side * side * 3u);
      video.emplace_back(f.values.begin(), f.values.end());
    }
  }
  return video;
}

Values latent_frame(const VaeConfig& vc, float phase, int64_t latent = 2) {
  Values z(static_cast<size_t>(latent * latent * vc.z_channels));
  for (size_t i = 0; i < z.size(); ++i) z[i] = std::sin(0.7f * static_cast<float>(i) + phase);
  return z;
}

void expect_clips_decode_causally(const VaeConfig& vc, uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  const Values z0 = latent_frame(vc, 0.0f), z1 = latent_frame(vc, 1.0f),
               z2 = latent_frame(vc, 2.0f);
  const std::vector<Values> three = decode_clip(vc, w, {z0, z1, z2});
  ASSERT_EQ(three.size(), 9u);  // 1 + 4 + 4
  // The first frame is the image decode of latent frame 0.
  {
    nn::GraphRunner runner(cpu_backend());
    nn::GraphCall call;
    Tensor* z = call.input_f32("z", make_shape({2, 2, vc.z_channels, 1}), z0.data());
    EXPECT_EQ(runner.run(call, wan_vae_decode(nn::Scope(call.ctx(), w, ""), vc, z)), three[0]);
  }
  // Causal: a later latent frame changes only the frames after its predecessors'.
  const std::vector<Values> other = decode_clip(vc, w, {z0, z1, latent_frame(vc, 5.0f)});
  for (size_t f = 0; f < 5; ++f) EXPECT_EQ(other[f], three[f]) << "frame " << f;
  for (size_t f = 5; f < 9; ++f) EXPECT_NE(other[f], three[f]) << "frame " << f;
  // And the frames remember what came before: the same latent frame after another history
  // decodes differently.
  const std::vector<Values> shifted = decode_clip(vc, w, {z1, z1, z2});
  EXPECT_NE(shifted[5], three[5]);
}

TEST(WanVae, ClipsDecodeCausallyFourFramesPerLatentFrame) {
  expect_clips_decode_causally(tiny_vae(), 5);
}

// A stage's result written over its input (the graph reads its inputs before it computes)
// is the result written into new memory.
TEST(WanVae, AStagesResultWrittenOverItsInputIsTheSame) {
  const VaeConfig vc = tiny_vae();
  nn::RandomWeights w(DType::F16, 5);
  const std::vector<Values> latents = {latent_frame(vc, 0.0f), latent_frame(vc, 1.0f)};
  int reused = 0;
  const std::vector<Values> fresh = decode_clip(vc, w, latents);
  EXPECT_EQ(decode_clip(vc, w, latents, 2, nullptr, true, &reused), fresh);
  EXPECT_GT(reused, 10);  // the residual blocks' stages, whose frames keep their size
}

// A clip's graphs each hold one layer's work on one frame: at full resolution, where the
// memory is, a graph's buffer is a few frames of activations (its convolutions' taps and
// their inputs handed to the cache; the frame and what the layers remember are read where
// the decoder holds them), not a level's or a clip's.
TEST(WanVae, AClipsGraphsHoldAFewFramesOfOneLayer) {
  const VaeConfig vc = tiny_vae();
  nn::RandomWeights w(DType::F16, 5);
  constexpr int64_t kLatent = 8;
  size_t largest = 0;
  const std::vector<Values> video = decode_clip(
      vc, w, {latent_frame(vc, 0.0f, kLatent), latent_frame(vc, 1.0f, kLatent)}, kLatent, &largest);
  ASSERT_EQ(video.size(), 5u);
  const int64_t side = frame_side(vc, kLatent);
  const auto frame = static_cast<size_t>(side * side * vc.decoder_width() * vc.ch_mult[0] * 4);
  EXPECT_LE(largest, 5 * frame) << "a graph took " << static_cast<double>(largest) / frame
                                << " full-resolution frames";
}

// Wan 2.2's shortcuts repeat a clip's first frame's channels into one frame, later frames'
// into two (and its 2x2 pixel patches come apart after the head).
TEST(Wan22Vae, ClipsDecodeCausallyFourFramesPerLatentFrame) {
  expect_clips_decode_causally(tiny_vae22(), 7);
}

// Encodes video frames (each side x side x 3, in [-1, 1]) as one clip, chunk by chunk: the
// latent frames, each [2, 2, z_channels].
// in_two_parts: each frame's first level on its own, then the rest on the chunk's features.
std::vector<Values> encode_clip(const VaeConfig& vc, nn::RandomWeights& w,
                                const std::vector<Values>& frames, bool in_two_parts = false) {
  nn::GraphRunner runner(cpu_backend());
  WanClipCache clip;
  const int64_t side = frame_side(vc);
  std::vector<Values> latents;
  for (size_t next = 0; next < frames.size();) {
    const size_t count = next == 0 ? 1 : 4;
    if (in_two_parts) {
      Values features;
      std::array<int64_t, 3> ne{};
      for (size_t i = 0; i < count; ++i, ++next) {
        nn::GraphCall call;
        clip.begin(call);
        Tensor* x = call.input_f32("x", make_shape({side, side, 3, 1}), frames[next].data());
        Tensor* out = wan_vae_encode_first_level(nn::Scope(call.ctx(), w, ""), vc, x, clip);
        ne = {out->ne[0], out->ne[1], out->ne[2]};
        const HostVector<float> f = clip.run(runner, call, out);
        features.insert(features.end(), f.begin(), f.end());
      }
      nn::GraphCall call;
      clip.begin(call);
      Tensor* x = call.input_f32(
          "x", make_shape({ne[0], ne[1], ne[2], static_cast<int64_t>(count)}), features.data());
      const HostVector<float> z =
          clip.run(runner, call, wan_vae_encode_rest(nn::Scope(call.ctx(), w, ""), vc, x, clip));
      latents.emplace_back(z.begin(), z.end());
      continue;
    }
    Values chunk;
    for (size_t i = 0; i < count; ++i, ++next)
      chunk.insert(chunk.end(), frames[next].begin(), frames[next].end());
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x =
        call.input_f32("x", make_shape({side, side, 3, static_cast<int64_t>(count)}), chunk.data());
    Tensor* out = wan_vae_encode_chunk(nn::Scope(call.ctx(), w, ""), vc, x, clip);
    const HostVector<float> z = clip.run(runner, call, out);
    latents.emplace_back(z.begin(), z.end());
    EXPECT_EQ(latents.back().size(), static_cast<size_t>(2 * 2 * vc.z_channels));
  }
  return latents;
}

Values video_frame(const VaeConfig& vc, float phase) {
  const int64_t side = frame_side(vc);
  Values f(static_cast<size_t>(side * side * 3));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = 0.8f * std::sin(0.37f * static_cast<float>(i) + phase);
  return f;
}

void expect_clips_encode_causally(const VaeConfig& vc, uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  const int64_t side = frame_side(vc);
  std::vector<Values> frames;
  for (int i = 0; i < 9; ++i) frames.push_back(video_frame(vc, 0.5f * static_cast<float>(i)));
  const std::vector<Values> latents = encode_clip(vc, w, frames);
  ASSERT_EQ(latents.size(), 3u);  // 1 + 4 + 4 frames
  // The first level frame by frame, then the rest per chunk, computes the same, but for the
  // frames each first-level layer remembers between graphs in f16 (in one graph it reads a
  // chunk's own frames in f32): the first chunk, one frame, exactly.
  {
    const std::vector<Values> parts = encode_clip(vc, w, frames, true);
    ASSERT_EQ(parts.size(), latents.size());
    EXPECT_EQ(parts[0], latents[0]);
    float scale = 0.0f;
    for (const Values& l : latents)
      for (float v : l) scale = std::max(scale, std::abs(v));
    for (size_t t = 1; t < parts.size(); ++t)
      for (size_t i = 0; i < parts[t].size(); ++i)
        ASSERT_NEAR(parts[t][i], latents[t][i], 2e-3f * scale) << "latent frame " << t;
  }
  // The first latent frame is the image encode of the first frame.
  {
    nn::GraphRunner runner(cpu_backend());
    nn::GraphCall call;
    Tensor* x = call.input_f32("x", make_shape({side, side, 3, 1}), frames[0].data());
    EXPECT_EQ(runner.run(call, wan_vae_encode(nn::Scope(call.ctx(), w, ""), vc, x)), latents[0]);
  }
  // Causal: the last frame changes only the last latent frame; the second frame changes the
  // second latent frame and, through the layers' memory, the third.
  std::vector<Values> changed = frames;
  changed[8] = video_frame(vc, 9.0f);
  std::vector<Values> other = encode_clip(vc, w, changed);
  EXPECT_EQ(other[0], latents[0]);
  EXPECT_EQ(other[1], latents[1]);
  EXPECT_NE(other[2], latents[2]);
  changed = frames;
  changed[1] = video_frame(vc, 7.0f);
  other = encode_clip(vc, w, changed);
  EXPECT_EQ(other[0], latents[0]);
  EXPECT_NE(other[1], latents[1]);
  EXPECT_NE(other[2], latents[2]);
  // A chunk of the wrong length is refused.
  WanClipCache clip;
  nn::GraphCall call;
  clip.begin(call);
  EXPECT_THROW(wan_vae_encode_chunk(nn::Scope(call.ctx(), w, ""), vc,
                                    call.ctx().new_tensor(DType::F32, {side, side, 3, 4}), clip),
               Error);
  const int64_t half = side / (2 * vc.image_patch), first_width = vc.ch * vc.ch_mult[0];
  EXPECT_THROW(
      wan_vae_encode_rest(nn::Scope(call.ctx(), w, ""), vc,
                          call.ctx().new_tensor(DType::F32, {half, half, first_width, 4}), clip),
      Error);
  EXPECT_THROW(
      wan_vae_encode_first_level(nn::Scope(call.ctx(), w, ""), vc,
                                 call.ctx().new_tensor(DType::F32, {side, side, 3, 4}), clip),
      Error);
}

TEST(WanVae, ClipsEncodeCausallyFourFramesPerLatentFrame) {
  expect_clips_encode_causally(tiny_vae(), 6);
}

// Wan 2.2's shortcuts average a clip's first frame with zeros before it, later chunks' frames
// in pairs (and its 2x2 pixel patches enter as 12 channels).
TEST(Wan22Vae, ClipsEncodeCausallyFourFramesPerLatentFrame) {
  expect_clips_encode_causally(tiny_vae22(), 8);
}

}  // namespace
}  // namespace sd::models
