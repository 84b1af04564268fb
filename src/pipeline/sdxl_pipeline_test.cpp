// SDXL end to end on a tiny random-weight model with SDXL's layout, written by the project's
// own code: detection, dimensions read from the file, two text encoders, the vector
// conditioning and the VAE.
#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinySdxl : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.model = test::write_tiny_sdxl_checkpoint();  // no architecture: detected
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 64;
    request_.steps = 2;
    request_.seed = 5;
  }
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinySdxl, IsDetectedAndGeneratesDeterministically) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::SDXL);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::Eps);
  const std::vector<io::Image> a = sd.generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 64);
  EXPECT_EQ(a[0].height, 64);
  EXPECT_EQ(sd.generate(request_)[0].pixels, a[0].pixels);

  // The prompt reaches the image through both encoders and the vector.
  ImageRequest other = request_;
  other.prompt = "a dog";
  EXPECT_NE(sd.generate(other)[0].pixels, a[0].pixels);
  // So do the sizes (through the vector) and a negative prompt (no longer a zero context).
  other = request_;
  other.negative_prompt = "blurry";
  EXPECT_NE(sd.generate(other)[0].pixels, a[0].pixels);
}

TEST_F(TinySdxl, LongPromptsAndEmphasisRunInWindows) {
  StableDiffusion sd(options_);
  ImageRequest r = request_;
  std::string long_prompt;
  for (int i = 0; i < 90; ++i) long_prompt += "cat ";
  r.prompt = "(a cat:1.3) BREAK " + long_prompt;
  EXPECT_EQ(sd.generate(r).size(), 1u);
}

TEST_F(TinySdxl, EveryResidencyGivesTheSameImage) {
  const std::vector<uint8_t> plain = StableDiffusion(options_).generate(request_)[0].pixels;
  ModelOptions o = options_;
  o.params_backend = "disk";
  EXPECT_EQ(StableDiffusion(o).generate(request_)[0].pixels, plain);
}

TEST_F(TinySdxl, RefinerIsAOneLineErrorNamingTheFile) {
  // The refiner's UNet attends to bigG alone: 1280-wide context.
  static const io::test::TempDir dir;
  const std::string path = dir.file("refiner.safetensors");
  nn::RandomWeights w(DType::F16, 3);
  Context ctx;
  w.get(ctx, "model.diffusion_model.input_blocks.0.0.weight", make_shape({3, 3, 4, 32}));
  w.get(ctx, "model.diffusion_model.input_blocks.4.1.transformer_blocks.0.attn2.to_k.weight",
        make_shape({1280, 64}));
  w.save_safetensors(path);
  ModelOptions o = options_;
  o.model = path;
  try {
    StableDiffusion sd(o);
    FAIL() << "a refiner loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("SDXL Refiner"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(SdxlVector, PooledThenSinusoidalSizeEmbeddings) {
  const std::vector<float> pooled(4, 0.5f);
  const std::vector<float> v = sdxl_vector(pooled, 512, 768);
  ASSERT_EQ(v.size(), 4u + 6 * 256);
  EXPECT_EQ(v[0], 0.5f);
  // Original size (height, width): cos half first, frequency 1 at index 0.
  EXPECT_FLOAT_EQ(v[4], std::cos(768.0f));
  EXPECT_FLOAT_EQ(v[4 + 128], std::sin(768.0f));
  EXPECT_FLOAT_EQ(v[4 + 256], std::cos(512.0f));
  // Crop (0, 0): cos 1, sin 0.
  EXPECT_EQ(v[4 + 512], 1.0f);
  EXPECT_EQ(v[4 + 512 + 128], 0.0f);
  // Target size equals the original size.
  for (int i = 0; i < 512; ++i) EXPECT_EQ(v[4 + 1024 + i], v[4 + i]);
}

}  // namespace
}  // namespace sd::pipeline
