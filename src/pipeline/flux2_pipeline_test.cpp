// FLUX.2 klein through the whole pipeline: a tiny model as its three files and a
// tokenizer.json, written by the project's own code and loaded back through the real loader
// with the CLI's file roles; the padded prompt's masking; and the files a user can get wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "io/io_test_util.h"
#include "models/bpe_tokenizer.h"
#include "pipeline/llm_conditioner.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_flux2_test_util.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

// A smooth RGB ramp.
io::Image gradient(int w, int h) {
  io::Image img{w, h, 3, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.pixels[static_cast<size_t>((y * w + x) * 3 + c)] =
            static_cast<uint8_t>((x * 255 / w + y * 128 / h + c * 40) % 256);
  return img;
}

class TinyFlux2 : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyFlux2Files files = test::write_tiny_flux2(dir.file("flux2"));
    files_ = files;
    temp_ = dir.file("");
    options_.diffusion_model = files_.dit;
    options_.llm = files_.llm;
    options_.vae = files_.vae;
    options_.llm_tokenizer = files_.tokenizer;
    options_.threads = 2;
    options_.note = [this](const std::string& n) { notes_.push_back(n); };
    request_.prompt = "a (cat:1.2)";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
  }
  std::string error_of(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  test::TinyFlux2Files files_;
  std::string temp_;
  std::vector<std::string> notes_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyFlux2, IsDetectedAndGenerates) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::Flux2Klein);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::FluxFlow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const io::Image a = sd.generate(request_)[0];
  EXPECT_EQ(a.width, 16);
  EXPECT_EQ(a.height, 16);
  // The same request gives the same image; the prompt, the seed and the guidance with a
  // negative prompt each change it.
  EXPECT_EQ(sd.generate(request_)[0].pixels, a.pixels);
  ImageRequest r = request_;
  r.prompt = "a cat";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  r = request_;
  r.seed = 7;
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  r = request_;
  r.cfg_scale = 3.0f;
  r.negative_prompt = "a dog";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
}

TEST_F(TinyFlux2, ImageToImageAndReferenceImagesRun) {
  StableDiffusion sd(options_);
  const io::Image plain = sd.generate(request_)[0];
  const io::Image init = gradient(16, 16);
  ImageRequest r = request_;
  r.init_image = &init;
  r.steps = 4;  // (2 steps at strength 0.6 start from sigma 1: pure noise, as in sd.cpp)
  r.strength = 0.5f;
  const io::Image edited = sd.generate(r)[0];
  EXPECT_EQ(edited.width, 16);
  EXPECT_NE(edited.pixels, plain.pixels);
  // A reference joins the image tokens (at image index 10) and changes the image; one of
  // another size is encoded at the output's area.
  const io::Image ref = gradient(24, 8);
  r = request_;
  r.ref_images = {&ref};
  const io::Image with_ref = sd.generate(r)[0];
  EXPECT_NE(with_ref.pixels, plain.pixels);
  EXPECT_EQ(sd.generate(r)[0].pixels, with_ref.pixels);
}

TEST_F(TinyFlux2, MissingPartsAreNamedByTheirFlags) {
  ModelOptions o = options_;
  o.llm.clear();
  EXPECT_NE(error_of(o).find("--llm"), std::string::npos);
  o = options_;
  o.vae.clear();
  EXPECT_NE(error_of(o).find("--vae"), std::string::npos);
}

TEST_F(TinyFlux2, AFlux1AutoencoderIsRefused) {
  static const io::test::TempDir dir;
  const std::string flux1_vae = dir.file("flux1_ae.safetensors");
  test::write_tiny_flux_vae(flux1_vae, 5);
  ModelOptions o = options_;
  o.vae = flux1_vae;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("bn.running_mean"), std::string::npos) << e;
  EXPECT_NE(e.find("flux2-vae"), std::string::npos) << e;
}

TEST_F(TinyFlux2, AnLlmWithoutLayer27IsRefused) {
  static const io::test::TempDir dir;
  models::LlmConfig shallow = test::tiny_flux2_qwen3_config();
  shallow.layers = 27;
  const test::TinyFlux2Files other =
      test::write_tiny_flux2(dir.file("shallow"), test::tiny_flux2_config(), shallow);
  ModelOptions o = options_;
  o.llm = other.llm;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm encoder has 27 layers"), std::string::npos) << e;
}

TEST_F(TinyFlux2, AnLlmOfAnotherWidthIsNamedByItsFlag) {
  static const io::test::TempDir dir;
  models::LlmConfig wide = test::tiny_flux2_qwen3_config();
  wide.hidden = 48;
  const test::TinyFlux2Files other =
      test::write_tiny_flux2(dir.file("wide"), test::tiny_flux2_config(), wide);
  ModelOptions o = options_;
  o.llm = other.llm;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm"), std::string::npos) << e;
  EXPECT_NE(e.find("144"), std::string::npos) << e;  // 3 x 48 against the transformer's 96
}

TEST_F(TinyFlux2, AQwen25VlTextModelIsNotQwen3) {
  static const io::test::TempDir dir;
  models::LlmConfig vl = test::tiny_flux2_qwen3_config();
  vl.arch = models::LlmArch::Qwen2_5_VL;
  vl.qkv_bias = true;
  vl.qk_norm = false;
  const test::TinyFlux2Files other =
      test::write_tiny_flux2(dir.file("vl"), test::tiny_flux2_config(), vl);
  ModelOptions o = options_;
  o.llm = other.llm;
  EXPECT_NE(error_of(o).find("--llm file is not a Qwen3"), std::string::npos);
}

TEST_F(TinyFlux2, ATokenizerWithoutThePaddingTokenIsRefused) {
  const std::string path = temp_ + "/no_endoftext.json";
  std::ofstream(path) << test::tiny_bpe_tokenizer_json(false);
  ModelOptions o = options_;
  o.llm_tokenizer = path;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("no '<|endoftext|>' token"), std::string::npos) << e;
}

// The prompt is padded to 512 tokens whose rows all reach the transformer, but the padding
// is masked as keys: the real tokens' states are those of the unpadded prompt.
TEST(Flux2Conditioning, PaddingReachesTheTransformerButNotTheRealTokens) {
  nn::RandomWeights weights(DType::F32, 42);
  Backend& cpu = sd::test::cpu_backend();
  auto tokenizer = std::make_shared<const models::BpeTokenizer>(
      models::BpeTokenizer::from_json(test::tiny_bpe_tokenizer_json(true)));
  LlmPromptFormat format;
  format.before = "<|im_start|>user\n";
  format.after = "<|im_end|>\n";
  format.hidden_layers = {9, 18, 27};
  LlmConditioner unpadded(tokenizer, test::tiny_flux2_qwen3_config(), format, weights, cpu, "");
  format.min_tokens = 512;
  format.pad_token = "<|endoftext|>";
  LlmConditioner padded(tokenizer, test::tiny_flux2_qwen3_config(), format, weights, cpu, "");
  const Conditioning a = unpadded.encode("a cat", 0);
  const Conditioning b = padded.encode("a cat", 0);
  ASSERT_EQ(b.tokens, 512);
  ASSERT_EQ(b.dim, 3 * 32);
  ASSERT_EQ(a.dim, b.dim);
  ASSERT_LT(a.tokens, 512);
  for (int64_t i = 0; i < a.tokens * a.dim; ++i)
    ASSERT_NEAR(a.context[static_cast<size_t>(i)], b.context[static_cast<size_t>(i)], 1e-4f) << i;
  // The padding rows are the LLM's outputs, not zeros.
  double pad_energy = 0;
  for (int64_t i = a.tokens * a.dim; i < b.tokens * b.dim; ++i)
    pad_energy += std::abs(b.context[static_cast<size_t>(i)]);
  EXPECT_GT(pad_energy, 0.0);
}

}  // namespace
}  // namespace sd::pipeline
