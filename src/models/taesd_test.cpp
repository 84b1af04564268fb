#include "models/taesd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

constexpr const char* kTaesdRoot = "tae.";

std::vector<float> run_decode(nn::Weights& w, const std::vector<float>& z, int64_t lw, int64_t lh,
                              CpuKernels kernels) {
  nn::GraphRunner runner(sd::test::cpu_backend(kernels));
  nn::GraphCall call;
  Tensor* in = call.input_f32("z", make_shape({lw, lh, 4, 1}), z.data());
  return runner.run(call, taesd_decode(nn::Scope(call.ctx(), w, kTaesdRoot), in));
}

TEST(Taesd, ShapesAndParameterNames) {
  nn::RandomWeights w;
  Context ctx;
  nn::Scope taesd(ctx, w, kTaesdRoot);
  Tensor* image = taesd_decode(taesd, ctx.new_tensor(DType::F32, {3, 2, 4, 1}));
  EXPECT_EQ(image->ne, make_shape({24, 16, 3, 1}));
  Tensor* latent = taesd_encode(taesd, ctx.new_tensor(DType::F32, {24, 16, 3, 1}));
  EXPECT_EQ(latent->ne, make_shape({3, 2, 4, 1}));

  // taesd.py's Sequential: parameters at the conv and block indices only, stride-2 and
  // post-upsample convs without bias.
  std::map<std::string, bool> names;
  for (const std::string& n : w.names()) names[n] = true;
  EXPECT_TRUE(names.count("tae.decoder.layers.0.weight"));
  EXPECT_FALSE(names.count("tae.decoder.layers.1.weight"));  // ReLU
  EXPECT_TRUE(names.count("tae.decoder.layers.2.conv.4.bias"));
  EXPECT_FALSE(names.count("tae.decoder.layers.5.weight"));  // Upsample
  EXPECT_TRUE(names.count("tae.decoder.layers.6.weight"));
  EXPECT_FALSE(names.count("tae.decoder.layers.6.bias"));
  EXPECT_TRUE(names.count("tae.decoder.layers.17.conv.0.weight"));
  EXPECT_TRUE(names.count("tae.decoder.layers.18.bias"));
  EXPECT_TRUE(names.count("tae.encoder.layers.1.conv.2.weight"));
  EXPECT_FALSE(names.count("tae.encoder.layers.2.bias"));
  EXPECT_TRUE(names.count("tae.encoder.layers.14.bias"));
  EXPECT_FALSE(names.count("tae.encoder.layers.15.weight"));
  // 19 decoder layers: 5 convs (2 with bias) and 10 blocks of 3 biased convs; 15 encoder
  // layers: 5 convs (2 with bias) and 10 blocks.
  EXPECT_EQ(w.names().size(), 2 * (5 + 2 + 10 * 6u));
}

TEST(Taesd, FastKernelsMatchReference) {
  nn::RandomWeights w(DType::F16);
  const std::vector<float> z = test::random_values(2 * 2 * 4, 7, -3.0f, 3.0f);
  const std::vector<float> fast = run_decode(w, z, 2, 2, CpuKernels::Fast);
  const std::vector<float> ref = run_decode(w, z, 2, 2, CpuKernels::Reference);
  ASSERT_EQ(fast.size(), 16u * 16 * 3);
  EXPECT_LE(test::max_scaled_error(fast, ref, 1e-3, 1e-3), 1.0);
}

TEST(Taesd, DecoderSoftClampsTheLatent) {
  // tanh(z / 3) * 3 maps 1000 and 10000 to the same value (3 within f32 rounding).
  nn::RandomWeights w;
  const std::vector<float> big(2 * 2 * 4, 1000.0f), bigger(2 * 2 * 4, 10000.0f);
  EXPECT_EQ(run_decode(w, big, 2, 2, CpuKernels::Fast),
            run_decode(w, bigger, 2, 2, CpuKernels::Fast));
}

TEST(Taesd, EncodeNeedsMultiplesOfEight) {
  nn::RandomWeights w;
  Context ctx;
  EXPECT_THROW(
      taesd_encode(nn::Scope(ctx, w, kTaesdRoot), ctx.new_tensor(DType::F32, {20, 16, 3, 1})),
      Error);
}

}  // namespace
}  // namespace sd::models
