// TAEHV on clips: its parameter names (the PyTorch Sequential's indices), and the clip run
// frame by frame, remembering a frame per memory block between graphs, giving what one
// graph over the whole clip gives (the reference's way), decoding and encoding.
#include "models/taehv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "test_support.h"

namespace sd::models {
namespace {

using Values = std::vector<float>;
using sd::test::cpu_backend;

// Small widths; the released strides.
TaehvConfig tiny_taehv(int64_t latent_channels = 4, int64_t patch = 1) {
  TaehvConfig c;
  c.latent_channels = latent_channels;
  c.patch = patch;
  c.decoder_widths = {16, 12, 8, 8};
  c.has_encoder = true;
  c.encoder_width = 8;
  return c;
}

Values wave(size_t n, float phase) {
  Values v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + phase);
  return v;
}

TEST(Taehv, ParameterNamesFollowTheSequential) {
  const TaehvConfig c = tiny_taehv();
  nn::RandomWeights w;
  WanClipCache clip;
  nn::GraphCall call;
  clip.begin(call);
  const nn::Scope tae(call.ctx(), w, "tae.");
  Tensor* x = call.ctx().new_tensor(DType::F32, {2, 2, c.latent_channels, 1});
  for (int stage = 0; stage < TaehvConfig::kLevels; ++stage)
    x = taehv_decode_stage(tae, c, stage, x, clip);
  EXPECT_EQ(x->ne, make_shape({16, 16, 3, 4}));  // 1 x 1 x 2 x 2 frames
  Tensor* z = taehv_encode_chunk(tae, c, call.ctx().new_tensor(DType::F32, {16, 16, 3, 8}), clip);
  EXPECT_EQ(z->ne, make_shape({2, 2, c.latent_channels, 2}));

  const auto all = w.names();
  const std::set<std::string> names(all.begin(), all.end());
  for (const char* present :
       {"tae.decoder.1.weight", "tae.decoder.3.conv.0.weight", "tae.decoder.5.conv.4.bias",
        "tae.decoder.7.conv.weight", "tae.decoder.8.weight", "tae.decoder.13.conv.weight",
        "tae.decoder.19.conv.weight", "tae.decoder.20.weight", "tae.decoder.22.bias",
        "tae.encoder.0.weight", "tae.encoder.2.conv.weight", "tae.encoder.3.weight",
        "tae.encoder.16.conv.2.bias", "tae.encoder.17.bias"})
    EXPECT_TRUE(names.count(present)) << present;
  // Clamp, ReLU and Upsample hold nothing; TGrow, TPool and the level convs no bias.
  for (const char* absent :
       {"tae.decoder.0.weight", "tae.decoder.2.weight", "tae.decoder.6.weight",
        "tae.decoder.7.conv.bias", "tae.decoder.8.bias", "tae.decoder.21.weight",
        "tae.encoder.1.weight", "tae.encoder.3.bias", "tae.encoder.2.conv.bias"})
    EXPECT_FALSE(names.count(absent)) << absent;
  // Decoder: 2 convs with bias, 3 TGrows, 3 level convs, 9 blocks of 3 biased convs;
  // encoder: 2 convs with bias, 3 TPools, 3 stride-2 convs, 9 blocks.
  EXPECT_EQ(w.names().size(), 2 * (2 * 2 + 3 + 3 + 9 * 6u));
}

// Decodes latent frames one graph per frame and stage, depth first, as the pipeline does.
std::vector<Values> decode_frame_by_frame(const TaehvConfig& c, nn::Weights& w,
                                          const std::vector<Values>& latents, int64_t side) {
  nn::GraphRunner runner(cpu_backend());
  WanClipCache clip;
  std::vector<Values> video;
  std::function<void(int, const Values&, const std::array<int64_t, 3>&)> feed =
      [&](int stage, const Values& in, const std::array<int64_t, 3>& ne) {
        nn::GraphCall call;
        clip.begin(call);
        Tensor* x = call.input_f32("x", make_shape({ne[0], ne[1], ne[2], 1}), in.data());
        Tensor* out = taehv_decode_stage(nn::Scope(call.ctx(), w, ""), c, stage, x, clip);
        const HostVector<float> result = clip.run(runner, call, out);
        const auto size = static_cast<size_t>(out->ne[0] * out->ne[1] * out->ne[2]);
        for (int64_t i = 0; i < out->ne[3]; ++i) {
          Values frame(result.begin() + static_cast<std::ptrdiff_t>(i * size),
                       result.begin() + static_cast<std::ptrdiff_t>((i + 1) * size));
          if (stage + 1 < TaehvConfig::kLevels)
            feed(stage + 1, frame, {out->ne[0], out->ne[1], out->ne[2]});
          else
            video.push_back(std::move(frame));
        }
      };
  for (const Values& z : latents) feed(0, z, {side, side, c.latent_channels});
  return video;
}

// The whole clip in each stage's one graph, as the reference computes it.
std::vector<Values> decode_whole_clip(const TaehvConfig& c, nn::Weights& w,
                                      const std::vector<Values>& latents, int64_t side) {
  nn::GraphRunner runner(cpu_backend());
  WanClipCache clip;
  // [side, side, C, T]: the latent frames one after another.
  Values x;
  for (const Values& z : latents) x.insert(x.end(), z.begin(), z.end());
  std::array<int64_t, 4> ne = {side, side, c.latent_channels, static_cast<int64_t>(latents.size())};
  for (int stage = 0; stage < TaehvConfig::kLevels; ++stage) {
    nn::GraphCall call;
    clip.begin(call);
    Tensor* in = call.input_f32("x", make_shape({ne[0], ne[1], ne[2], ne[3]}), x.data());
    Tensor* out = taehv_decode_stage(nn::Scope(call.ctx(), w, ""), c, stage, in, clip);
    const HostVector<float> y = clip.run(runner, call, out);
    x.assign(y.begin(), y.end());
    ne = {out->ne[0], out->ne[1], out->ne[2], out->ne[3]};
  }
  std::vector<Values> video;
  const auto size = static_cast<size_t>(ne[0] * ne[1] * ne[2]);
  for (int64_t i = 0; i < ne[3]; ++i)
    video.emplace_back(x.begin() + static_cast<std::ptrdiff_t>(i * size),
                       x.begin() + static_cast<std::ptrdiff_t>((i + 1) * size));
  return video;
}

double max_difference(const Values& a, const Values& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

void expect_decodes_frame_by_frame(int64_t latent_channels, int64_t patch) {
  const TaehvConfig c = tiny_taehv(latent_channels, patch);
  nn::RandomWeights w(DType::F32, 3);
  const int64_t side = 3;
  const auto plane = static_cast<size_t>(side * side * latent_channels);
  const std::vector<Values> latents = {wave(plane, 0.0f), wave(plane, 1.0f), wave(plane, 2.5f)};
  const std::vector<Values> staged = decode_frame_by_frame(c, w, latents, side);
  const std::vector<Values> whole = decode_whole_clip(c, w, latents, side);
  ASSERT_EQ(staged.size(), 12u);  // 4 a latent frame (the pipeline drops the first 3)
  ASSERT_EQ(whole.size(), 12u);
  const auto pixels = static_cast<size_t>(side * 8 * patch * side * 8 * patch * 3);
  for (size_t f = 0; f < staged.size(); ++f) {
    ASSERT_EQ(staged[f].size(), pixels);
    // Remembered frames are kept in f16: a few parts in 10^4 of the activations.
    EXPECT_LT(max_difference(staged[f], whole[f]), 2e-3) << "frame " << f;
  }
  // Causal: a later latent frame changes only its own four frames.
  const std::vector<Values> later =
      decode_frame_by_frame(c, w, {latents[0], latents[1], wave(plane, 5.0f)}, side);
  for (size_t f = 0; f < 8; ++f) EXPECT_EQ(later[f], staged[f]) << "frame " << f;
  for (size_t f = 8; f < 12; ++f) EXPECT_GT(max_difference(later[f], staged[f]), 1e-3);
  // And the memory carries: the same latent frame after another history decodes otherwise.
  const std::vector<Values> history =
      decode_frame_by_frame(c, w, {latents[1], latents[1], latents[2]}, side);
  EXPECT_GT(max_difference(history[8], staged[8]), 1e-3);
}

TEST(Taehv, DecodesFrameByFrameAsTheWholeClip) {
  expect_decodes_frame_by_frame(4, 1);
}

TEST(Taehv, PatchedFramesDecodeAsTheWholeClip) {
  expect_decodes_frame_by_frame(6, 2);
}

TEST(Taehv, EncodesChunkByChunkAsTheWholeClip) {
  const TaehvConfig c = tiny_taehv();
  nn::RandomWeights w(DType::F32, 4);
  const int64_t side = 16;
  const auto frame = static_cast<size_t>(side * side * 3);
  Values clip_frames;
  for (int f = 0; f < 8; ++f) {
    Values v = wave(frame, 0.5f * static_cast<float>(f));
    for (float& x : v) x = 0.5f + 0.5f * x;
    clip_frames.insert(clip_frames.end(), v.begin(), v.end());
  }
  auto encode = [&](int64_t frames_per_graph) {
    nn::GraphRunner runner(cpu_backend());
    WanClipCache clip;
    Values latent;
    for (int64_t start = 0; start < 8; start += frames_per_graph) {
      nn::GraphCall call;
      clip.begin(call);
      Tensor* x = call.input_f32("frames", make_shape({side, side, 3, frames_per_graph}),
                                 clip_frames.data() + static_cast<size_t>(start) * frame);
      const HostVector<float> z =
          clip.run(runner, call, taehv_encode_chunk(nn::Scope(call.ctx(), w, ""), c, x, clip));
      EXPECT_EQ(z.size(), static_cast<size_t>(2 * 2 * c.latent_channels * frames_per_graph / 4));
      latent.insert(latent.end(), z.begin(), z.end());
    }
    return latent;
  };
  const Values whole = encode(8), chunked = encode(4);
  ASSERT_EQ(whole.size(), chunked.size());
  // [2, 2, C, 2] against two [2, 2, C, 1]: the same order (frame outermost).
  EXPECT_LT(max_difference(whole, chunked), 2e-3);
  const Values first_alone = Values(chunked.begin(), chunked.begin() + chunked.size() / 2);
  EXPECT_GT(
      max_difference(first_alone, Values(chunked.begin() + chunked.size() / 2, chunked.end())),
      1e-3);
}

}  // namespace
}  // namespace sd::models
