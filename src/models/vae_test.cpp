#include "models/vae.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "io/name_conversion.h"
#include "io/safetensors.h"
#include "models/recording_weights_test_util.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

using sd::test::cpu_backend;

// Two levels of 32 and 64 channels: a 2x autoencoder small enough to run in milliseconds.
VaeConfig tiny_vae_config() {
  VaeConfig cfg;
  cfg.ch = 32;
  cfg.ch_mult = {1, 2};
  cfg.num_res_blocks = 1;
  return cfg;
}

constexpr const char* kRoot = "first_stage_model.";

std::vector<float> decode(nn::Weights& w, const VaeConfig& cfg, const std::vector<float>& z,
                          int64_t lw, int64_t lh, CpuKernels kernels = CpuKernels::Fast) {
  nn::GraphRunner runner(cpu_backend(kernels));
  nn::GraphCall call;
  Tensor* in = call.input_f32("z", make_shape({lw, lh, cfg.embed_dim, 1}), z.data());
  return runner.run(call, vae_decode(nn::Scope(call.ctx(), w, kRoot), cfg, in));
}

std::vector<float> encode(nn::Weights& w, const VaeConfig& cfg, const std::vector<float>& image,
                          int64_t iw, int64_t ih, CpuKernels kernels = CpuKernels::Fast) {
  nn::GraphRunner runner(cpu_backend(kernels));
  nn::GraphCall call;
  Tensor* in = call.input_f32("image", make_shape({iw, ih, 3, 1}), image.data());
  return runner.run(call, vae_encode(nn::Scope(call.ctx(), w, kRoot), cfg, in));
}

TEST(Vae, TinyDecodeAndEncodeShapes) {
  nn::RandomWeights w;
  const VaeConfig cfg = tiny_vae_config();
  Context ctx;
  nn::Scope vae(ctx, w, kRoot);
  Tensor* image = vae_decode(vae, cfg, ctx.new_tensor(DType::F32, {8, 6, 4, 2}));
  EXPECT_EQ(image->ne, make_shape({16, 12, 3, 2}));
  Tensor* moments = vae_encode(vae, cfg, ctx.new_tensor(DType::F32, {16, 12, 3, 2}));
  EXPECT_EQ(moments->ne, make_shape({8, 6, 8, 2}));
  EXPECT_EQ(VaeConfig::sd().downscale(), 8);
}

TEST(Vae, FastKernelsMatchReference) {
  nn::RandomWeights w(DType::F16);
  const VaeConfig cfg = tiny_vae_config();
  const std::vector<float> z = test::random_values(8 * 8 * 4, 3, -2.0f, 2.0f);
  const std::vector<float> fast = decode(w, cfg, z, 8, 8);
  const std::vector<float> ref = decode(w, cfg, z, 8, 8, CpuKernels::Reference);
  ASSERT_EQ(fast.size(), 16u * 16 * 3);
  EXPECT_LE(test::max_scaled_error(fast, ref, 1e-3, 1e-3), 1.0);

  const std::vector<float> image = test::random_values(16 * 16 * 3, 4);
  const std::vector<float> m_fast = encode(w, cfg, image, 16, 16);
  const std::vector<float> m_ref = encode(w, cfg, image, 16, 16, CpuKernels::Reference);
  ASSERT_EQ(m_fast.size(), 8u * 8 * 8);
  EXPECT_LE(test::max_scaled_error(m_fast, m_ref, 1e-3, 1e-3), 1.0);
}

TEST(Vae, DecodeUndoesTheSamplerScaling) {
  // decode(z) with scale s and shift b sees z / s + b: the same as decode(z / s + b) with
  // scale 1 and shift 0.
  nn::RandomWeights w;
  VaeConfig scaled = tiny_vae_config();
  scaled.scale_factor = 0.25f;
  scaled.shift_factor = 0.5f;
  VaeConfig plain = tiny_vae_config();
  plain.scale_factor = 1.0f;
  const std::vector<float> z = test::random_values(4 * 4 * 4, 5);
  std::vector<float> unscaled(z.size());
  for (size_t i = 0; i < z.size(); ++i) unscaled[i] = z[i] / 0.25f + 0.5f;
  const std::vector<float> a = decode(w, scaled, z, 4, 4);
  const std::vector<float> b = decode(w, plain, unscaled, 4, 4);
  EXPECT_LE(test::max_scaled_error(a, b, 1e-4, 1e-4), 1.0);
  const std::vector<float> c = decode(w, plain, z, 4, 4);
  EXPECT_GT(test::max_scaled_error(a, c, 1e-4, 1e-4), 1.0);  // the scaling matters
}

// FLUX.2: the sampler's latent is the VAE's in 2x2 patches (channel c * 4 + dy * 2 + dx),
// each channel normalized by the batch-norm statistics. Decoding it is decoding the VAE's
// own latent; encoding gives the mean, patched and normalized.
TEST(Vae, PatchedLatentsUnderBatchNormStatistics) {
  nn::RandomWeights w;
  VaeConfig plain = tiny_vae_config();
  plain.scale_factor = 1.0f;
  VaeConfig patched = plain;
  patched.latent_patch = 2;
  patched.batch_norm_latent = true;
  ASSERT_EQ(patched.latent_channels(), 16);
  ASSERT_EQ(patched.downscale(), 4);
  std::vector<float> mean(16), var(16);
  for (int i = 0; i < 16; ++i) mean[i] = 0.1f * (i % 5) - 0.2f, var[i] = 0.5f + 0.25f * (i % 3);
  w.set(std::string(kRoot) + "bn.running_mean", make_shape({16}), mean);
  w.set(std::string(kRoot) + "bn.running_var", make_shape({16}), var);
  // The VAE's latent [4, 6, 4] as 2x3 patches of 16 channels.
  const int64_t W = 4, H = 6, C = 4, pw = 2, ph = 3;
  auto patch = [&](const std::vector<float>& z) {
    std::vector<float> p(static_cast<size_t>(pw * ph * C * 4));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t ch = c * 4 + (y % 2) * 2 + x % 2;
          p[static_cast<size_t>(ch * pw * ph + (y / 2) * pw + x / 2)] =
              (z[static_cast<size_t>(c * W * H + y * W + x)] - mean[ch]) /
              std::sqrt(var[ch] + 1e-4f);
        }
    return p;
  };
  const std::vector<float> z = test::random_values(W * H * C, 9);
  const std::vector<float> a = decode(w, plain, z, W, H);
  nn::GraphRunner runner(cpu_backend());
  nn::GraphCall call;
  const std::vector<float> p = patch(z);
  Tensor* in = call.input_f32("z", make_shape({pw, ph, 16, 1}), p.data());
  const std::vector<float> b =
      runner.run(call, vae_decode(nn::Scope(call.ctx(), w, kRoot), patched, in));
  EXPECT_LE(test::max_scaled_error(b, a, 1e-4, 1e-4), 1.0);

  const std::vector<float> image = test::random_values(8 * 12 * 3, 10);
  std::vector<float> moments = encode(w, plain, image, 8, 12);
  moments.resize(static_cast<size_t>(W * H * C));  // the mean
  const std::vector<float> latent = encode(w, patched, image, 8, 12);
  EXPECT_LE(test::max_scaled_error(latent, patch(moments), 1e-4, 1e-4), 1.0);
}

TEST(Vae, WrongLatentChannelsIsAnError) {
  nn::RandomWeights w;
  Context ctx;
  try {
    vae_decode(nn::Scope(ctx, w, kRoot), tiny_vae_config(),
               ctx.new_tensor(DType::F32, {8, 8, 3, 1}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 channels"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vae_encode(nn::Scope(ctx, w, kRoot), tiny_vae_config(),
                          ctx.new_tensor(DType::F32, {15, 16, 3, 1})),
               Error);
}

TEST(Vae, MomentsToLatentSamplesAndScales) {
  VaeConfig cfg;
  cfg.scale_factor = 0.5f;
  cfg.shift_factor = 0.25f;
  // One 1x1 latent of 2 channels: mean {1, -2}, logvar {0, 100 (clamped to 20)}.
  const std::vector<float> moments = {1.0f, -2.0f, 0.0f, 100.0f};
  const std::vector<float> noise = {0.5f, 1e-3f};
  const std::vector<float> z = vae_moments_to_latent(moments, noise, 1, 1, 2, 1, cfg);
  ASSERT_EQ(z.size(), 2u);
  EXPECT_FLOAT_EQ(z[0], (1.0f + 1.0f * 0.5f - 0.25f) * 0.5f);
  EXPECT_FLOAT_EQ(z[1], (-2.0f + std::exp(10.0f) * 1e-3f - 0.25f) * 0.5f);
  EXPECT_THROW(vae_moments_to_latent(moments, noise, 1, 1, 1, 1, cfg), Error);
}

std::map<std::string, Shape> sd_vae_parameters() {
  test::RecordingWeights w;
  Context ctx;
  nn::Scope vae(ctx, w, kRoot);
  vae_decode(vae, VaeConfig::sd(), ctx.new_tensor(DType::F32, {8, 8, 4, 1}));
  vae_encode(vae, VaeConfig::sd(), ctx.new_tensor(DType::F32, {64, 64, 3, 1}));
  return w.requested();
}

TEST(Vae, Sd15ConfigAsksForTheCheckpointsTensors) {
  const std::map<std::string, Shape> asked = sd_vae_parameters();
  // The LDM KL-f8 autoencoder: 248 tensors, e.g. the attention's 1x1 convs and the first
  // upsampling conv at 512 channels.
  EXPECT_EQ(asked.size(), 248u);
  EXPECT_EQ(asked.at("first_stage_model.decoder.mid.attn_1.q.weight"),
            make_shape({1, 1, 512, 512}));
  EXPECT_EQ(asked.at("first_stage_model.decoder.up.3.upsample.conv.weight"),
            make_shape({3, 3, 512, 512}));
  EXPECT_EQ(asked.at("first_stage_model.encoder.down.1.block.0.nin_shortcut.weight"),
            make_shape({1, 1, 128, 256}));
  EXPECT_EQ(asked.at("first_stage_model.quant_conv.weight"), make_shape({1, 1, 8, 8}));

  const char* path = std::getenv("SD_TEST_SD15_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set SD_TEST_SD15_MODEL to an SD1.5 checkpoint";
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  std::map<std::string, Shape> stored;
  for (const io::TensorInfo& t : file.tensors()) {
    const std::string name = io::to_canonical(t.name, io::SourceLayout::Ldm, "");
    if (name.rfind(kRoot, 0) == 0 && !io::is_unused_tensor(name)) stored.emplace(name, t.ne);
  }
  for (const auto& [name, ne] : asked) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      ADD_FAILURE() << name << " is not in the checkpoint";
      continue;
    }
    EXPECT_EQ(it->second, ne) << name;
  }
  for (const auto& [name, ne] : stored)
    EXPECT_TRUE(asked.count(name)) << name << " is in the checkpoint but never used";
}

}  // namespace
}  // namespace sd::models
