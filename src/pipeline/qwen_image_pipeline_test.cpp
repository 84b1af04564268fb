// Qwen-Image through the whole pipeline: a tiny model as its three files and a
// tokenizer.json, written by the project's own code and loaded back through the real loader
// with the CLI's file roles; the dropped system prompt; and the files a user can get wrong.
#include <gtest/gtest.h>

#include <string>

#include "io/io_test_util.h"
#include "models/bpe_tokenizer.h"
#include "pipeline/llm_conditioner.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_flux2_test_util.h"
#include "pipeline/tiny_qwen_image_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinyQwenImage : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyQwenImageFiles files = test::write_tiny_qwen_image(dir.file("qi"));
    files_ = files;
    options_.diffusion_model = files_.dit;
    options_.llm = files_.llm;
    options_.vae = files_.vae;
    options_.llm_tokenizer = files_.tokenizer;
    options_.threads = 2;
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

  test::TinyQwenImageFiles files_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyQwenImage, IsDetectedAndGenerates) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::QwenImage);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::Sd3Flow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const io::Image a = sd.generate(request_)[0];
  EXPECT_EQ(a.width, 16);
  EXPECT_EQ(sd.generate(request_)[0].pixels, a.pixels);
  ImageRequest r = request_;
  r.prompt = "a cat";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  r = request_;
  r.cfg_scale = 2.5f;
  r.negative_prompt = "a dog";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
}

// 24x40 pixels: a 3x5 latent, padded to 4x6 for the 2x2 patches and cropped back.
TEST_F(TinyQwenImage, OddLatentSidesArePaddedAndCropped) {
  request_.width = 24;
  request_.height = 40;
  StableDiffusion sd(options_);
  const io::Image image = sd.generate(request_)[0];
  EXPECT_EQ(image.width, 24);
  EXPECT_EQ(image.height, 40);
}

TEST_F(TinyQwenImage, ImageToImageEncodesThroughTheWanAutoencoder) {
  StableDiffusion sd(options_);
  const io::Image plain = sd.generate(request_)[0];
  io::Image init{16, 16, 3, std::vector<uint8_t>(16 * 16 * 3)};
  for (size_t i = 0; i < init.pixels.size(); ++i) init.pixels[i] = static_cast<uint8_t>(i * 7);
  ImageRequest r = request_;
  r.init_image = &init;
  r.steps = 4;
  r.strength = 0.5f;
  EXPECT_NE(sd.generate(r)[0].pixels, plain.pixels);
}

// Qwen-Image-Edit: the references through the vision tower into the text model, and into
// the transformer's tokens.
TEST_F(TinyQwenImage, EditReadsReferencesThroughTheVisionTowerAndTheTransformer) {
  static const io::test::TempDir dir;
  const std::string tower = dir.file("mmproj.safetensors");
  test::write_tiny_qwen_vision(tower, test::tiny_qwen2_5_vl_config().hidden, 61);
  io::Image ref{40, 24, 3, std::vector<uint8_t>(40 * 24 * 3)};
  for (size_t i = 0; i < ref.pixels.size(); ++i) ref.pixels[i] = static_cast<uint8_t>(i * 37);
  request_.width = request_.height = 32;  // references resize to multiples of 32

  // Without a tower, text to image runs without a word; a request with references is
  // told that they reach the transformer only.
  std::string notes, warnings;
  ModelOptions blind = options_;
  blind.note = [&](const std::string& n) { notes += n + "\n"; };
  StableDiffusion without(blind);
  EXPECT_EQ(notes.find("vision tower"), std::string::npos) << notes;
  ImageRequest plain_request = request_;
  plain_request.warn = [&](const std::string& w) { warnings += w + "\n"; };
  const io::Image plain = without.generate(plain_request)[0];
  EXPECT_EQ(warnings, "");
  ImageRequest r = plain_request;
  r.ref_images = {&ref};
  const io::Image dit_only = without.generate(r)[0];
  EXPECT_NE(dit_only.pixels, plain.pixels) << "the reference reaches the transformer";
  EXPECT_NE(warnings.find("no vision tower (--llm_vision): the reference images (-r) reach the "
                          "diffusion model but not the text encoder"),
            std::string::npos)
      << warnings;

  ModelOptions o = options_;
  o.llm_vision = tower;
  StableDiffusion seeing(o);
  const io::Image edited = seeing.generate(r)[0];
  EXPECT_NE(edited.pixels, dit_only.pixels) << "the text model sees the reference";
  EXPECT_EQ(seeing.generate(r)[0].pixels, edited.pixels);
  // pass_to_vlm=0 keeps them from the text model: the transformer-only image.
  r.ref_options.pass_to_vlm = false;
  EXPECT_EQ(seeing.generate(r)[0].pixels, dit_only.pixels);
  // Without references the tower is not used at all.
  EXPECT_EQ(seeing.generate(request_)[0].pixels, plain.pixels);
}

TEST_F(TinyQwenImage, AVisionTowerOfAnotherWidthIsRefusedNamingLlmVision) {
  static const io::test::TempDir dir;
  const std::string tower = dir.file("other.safetensors");
  test::write_tiny_qwen_vision(tower, 24, 62);
  ModelOptions o = options_;
  o.llm_vision = tower;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm_vision"), std::string::npos) << e;
  EXPECT_NE(e.find("24-wide"), std::string::npos) << e;
}

TEST_F(TinyQwenImage, WrongPartsAreNamedByTheirFlags) {
  ModelOptions o = options_;
  o.llm.clear();
  EXPECT_NE(error_of(o).find("--llm"), std::string::npos);
  o = options_;
  o.vae.clear();
  EXPECT_NE(error_of(o).find("--vae"), std::string::npos);
  // FLUX.1's autoencoder is not Wan's; a Qwen3 is not Qwen2.5-VL.
  static const io::test::TempDir dir;
  const std::string flux_vae = dir.file("flux_ae.safetensors");
  test::write_tiny_flux_vae(flux_vae, 3);
  o = options_;
  o.vae = flux_vae;
  EXPECT_NE(error_of(o).find("--vae"), std::string::npos);
  const test::TinyFlux2Files flux2 = test::write_tiny_flux2(dir.file("flux2"));
  o = options_;
  o.llm = flux2.llm;
  EXPECT_NE(error_of(o).find("--llm file is not a Qwen2.5-VL"), std::string::npos) << error_of(o);
}

// The system prompt runs through the LLM and is dropped after it: the conditioning is the
// user's tokens and the template after them.
TEST(QwenImageConditioning, TheSystemPromptIsDroppedAfterTheLlm) {
  nn::RandomWeights weights(DType::F32, 7);
  auto tokenizer = std::make_shared<const models::BpeTokenizer>(
      models::BpeTokenizer::from_json(test::tiny_bpe_tokenizer_json()));
  LlmPromptFormat format;
  format.before = "<|im_start|>system\nab<|im_end|>\n";
  format.after = "<|im_end|>";
  format.hidden_layers = {2};
  const int64_t dropped = static_cast<int64_t>(tokenizer->encode(format.before).size());
  LlmConditioner whole(tokenizer, test::tiny_qwen2_5_vl_config(), format, weights,
                       sd::test::cpu_backend(), "");
  format.drop_first = dropped;
  LlmConditioner cut(tokenizer, test::tiny_qwen2_5_vl_config(), format, weights,
                     sd::test::cpu_backend(), "");
  const Conditioning a = whole.encode("a cat", 0), b = cut.encode("a cat", 0);
  ASSERT_EQ(b.tokens, a.tokens - dropped);
  for (int64_t i = 0; i < b.tokens * b.dim; ++i)
    ASSERT_EQ(b.context[static_cast<size_t>(i)],
              a.context[static_cast<size_t>(dropped * a.dim + i)]);
}

// Images in the prompt: each one's label and <|vision_start|>, then one <|image_pad|> per
// vision token (the rows its tokens replace), then <|vision_end|>; the prompt after them.
TEST(QwenImageConditioning, ImagesTakeThePlacesOfTheirPadTokens) {
  const models::BpeTokenizer tokenizer =
      models::BpeTokenizer::from_json(test::tiny_bpe_tokenizer_json_with(
          {"<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"}));
  LlmPromptFormat format;
  format.after = "<|im_end|>";
  LlmImagePromptFormat images;
  images.before = "<|im_start|>a";
  images.label = "c";
  const LlmImageTokens t =
      llm_tokenize_image_prompt(tokenizer, format, images, {3, 2}, "a (cat:1.5)");
  const int start = tokenizer.token_id("<|vision_start|>"),
            end = tokenizer.token_id("<|vision_end|>");
  const int pad = tokenizer.token_id("<|image_pad|>");
  const std::vector<int> label1 = tokenizer.encode("c1: "), label2 = tokenizer.encode("c2: ");
  std::vector<int> want = tokenizer.encode("<|im_start|>a");
  want.insert(want.end(), label1.begin(), label1.end());
  want.push_back(start);
  const int64_t first = static_cast<int64_t>(want.size());
  want.insert(want.end(), {pad, pad, pad, end});
  want.insert(want.end(), label2.begin(), label2.end());
  want.push_back(start);
  const int64_t second = static_cast<int64_t>(want.size());
  want.insert(want.end(), {pad, pad, end});
  const size_t text = want.size();
  for (int id : tokenizer.encode("a ")) want.push_back(id);  // emphasis splits the text
  for (int id : tokenizer.encode("cat")) want.push_back(id);
  want.push_back(tokenizer.token_id("<|im_end|>"));
  EXPECT_EQ(t.tokens.ids, want);
  EXPECT_EQ(t.image_at, (std::vector<int64_t>{first, second}));
  ASSERT_EQ(t.tokens.weights.size(), want.size());
  EXPECT_EQ(t.tokens.weights[text - 1], 1.0f);         // the images' tokens
  EXPECT_EQ(t.tokens.weights[want.size() - 2], 1.5f);  // the emphasised word
}

}  // namespace
}  // namespace sd::pipeline
