// FLUX.2 dev through the whole pipeline: a tiny model as its three files and a
// tokenizer.json, written by the project's own code and loaded back through the real loader
// with the CLI's file roles; Mistral's template with zero rows up to 512; its guidance
// input; and the files a user can get wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "io/io_test_util.h"
#include "models/bpe_tokenizer.h"
#include "pipeline/llm_conditioner.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_flux2_dev_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinyFlux2Dev : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyFlux2Files files = test::write_tiny_flux2_dev(dir.file("flux2_dev"));
    files_ = files;
    temp_ = dir.file("");
    options_.diffusion_model = files_.dit;
    options_.llm = files_.llm;
    options_.vae = files_.vae;
    options_.threads = 2;
    request_.prompt = "a (cat:1.2)";
    request_.width = request_.height = 16;
    request_.steps = 1;  // 512 text rows through 48 blocks: one step shows what it must
    request_.cfg_scale = 1.0f;
  }
  std::string error_of(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
      sd.generate(request_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  test::TinyFlux2Files files_;
  std::string temp_;
  ModelOptions options_;
  ImageRequest request_;
};

// The tokenizer.json beside the --llm file is found (the test files keep one there).
TEST_F(TinyFlux2Dev, IsDetectedAndGenerates) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::Flux2);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::FluxFlow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const io::Image a = sd.generate(request_)[0];
  EXPECT_EQ(a.width, 16);
  EXPECT_EQ(a.height, 16);
  EXPECT_EQ(sd.generate(request_)[0].pixels, a.pixels);
  // The prompt and the distilled guidance (dev's guidance_in) each change the image.
  ImageRequest r = request_;
  r.prompt = "a cat";
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  r = request_;
  r.guidance = 6.0f;
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
}

TEST_F(TinyFlux2Dev, MissingPartsAreNamedByTheirFlags) {
  ModelOptions o = options_;
  o.llm.clear();
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm"), std::string::npos) << e;
  EXPECT_NE(e.find("Mistral"), std::string::npos) << e;
  o = options_;
  o.vae.clear();
  EXPECT_NE(error_of(o).find("--vae"), std::string::npos);
}

// Mistral's tokenizer is not built in: with none placed, the error says where to get it
// and where to put it.
TEST_F(TinyFlux2Dev, AMissingTokenizerSaysWhereToPutIt) {
  static const io::test::TempDir dir;
  const std::string llm = dir.file("mistral.safetensors");
  std::filesystem::copy_file(files_.llm, llm);
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved_cache = old_cache ? old_cache : "";
  setenv("XDG_CACHE_HOME", dir.file("cache").c_str(), 1);
  ModelOptions o = options_;
  o.llm = llm;
  const std::string e = error_of(o);
  if (saved_cache.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved_cache.c_str(), 1);
  EXPECT_NE(e.find("no Mistral tokenizer found"), std::string::npos) << e;
  EXPECT_NE(e.find("SD_MISTRAL_TOKENIZER"), std::string::npos) << e;
  EXPECT_NE(e.find("sd-engine/mistral"), std::string::npos) << e;
}

TEST_F(TinyFlux2Dev, AQwenTokenizerIsRefused) {
  const std::string path = temp_ + "/qwen_tokenizer.json";
  std::ofstream(path) << test::tiny_bpe_tokenizer_json(true);
  ModelOptions o = options_;
  o.llm_tokenizer = path;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("no '<s>' token"), std::string::npos) << e;
  EXPECT_NE(e.find("Mistral"), std::string::npos) << e;
}

TEST_F(TinyFlux2Dev, AQwen3TextEncoderIsNotMistral) {
  static const io::test::TempDir dir;
  models::LlmConfig qwen = test::tiny_flux2_qwen3_config();
  qwen.layers = 31;
  const test::TinyFlux2Files other =
      test::write_tiny_flux2_dev(dir.file("qwen"), test::tiny_flux2_dev_config(), qwen);
  ModelOptions o = options_;
  o.llm = other.llm;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm file is not a Mistral"), std::string::npos) << e;
  EXPECT_NE(e.find("FLUX.2 dev takes Mistral Small 3.2"), std::string::npos) << e;
}

TEST_F(TinyFlux2Dev, AnLlmWithoutLayer30IsRefused) {
  static const io::test::TempDir dir;
  models::LlmConfig shallow = test::tiny_mistral_config();
  shallow.layers = 30;
  const test::TinyFlux2Files other =
      test::write_tiny_flux2_dev(dir.file("shallow"), test::tiny_flux2_dev_config(), shallow);
  ModelOptions o = options_;
  o.llm = other.llm;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--llm encoder has 30 layers"), std::string::npos) << e;
  EXPECT_NE(e.find("10, 20 and 30"), std::string::npos) << e;
}

// dev reads only the prompt's tokens; zero rows bring the text to 512.
TEST(Flux2DevConditioning, ZeroRowsFollowThePrompt) {
  nn::RandomWeights weights(DType::F32, 42);
  Backend& cpu = sd::test::cpu_backend();
  auto tokenizer = std::make_shared<const models::BpeTokenizer>(
      models::BpeTokenizer::from_json(test::tiny_mistral_tokenizer_json()));
  LlmPromptFormat format;
  format.before = "<s>[INST]";
  format.after = "[/INST]";
  format.hidden_layers = {10, 20, 30};
  format.special_tokens = {"<s>", "[INST]"};
  LlmConditioner short_text(tokenizer, test::tiny_mistral_config(), format, weights, cpu, "");
  format.min_rows = 512;
  LlmConditioner padded(tokenizer, test::tiny_mistral_config(), format, weights, cpu, "");
  const Conditioning a = short_text.encode("a cat", 0);
  const Conditioning b = padded.encode("a cat", 0);
  ASSERT_EQ(b.tokens, 512);
  ASSERT_EQ(b.dim, 3 * 32);
  ASSERT_EQ(a.dim, b.dim);
  ASSERT_EQ(a.tokens, 1 + 1 + 2 + 1);  // <s> [INST] "a" " cat" [/INST]
  double prompt_energy = 0;
  for (int64_t i = 0; i < a.tokens * a.dim; ++i) {
    ASSERT_EQ(a.context[static_cast<size_t>(i)], b.context[static_cast<size_t>(i)]) << i;
    prompt_energy += std::abs(a.context[static_cast<size_t>(i)]);
  }
  EXPECT_GT(prompt_energy, 0.0);
  for (int64_t i = a.tokens * a.dim; i < b.tokens * b.dim; ++i)
    ASSERT_EQ(b.context[static_cast<size_t>(i)], 0.0f) << i;
  // A template token the tokenizer lacks names the tokenizer as another model's.
  format.special_tokens = {"[SYSTEM_PROMPT]", "[TOOL_CALLS]"};
  try {
    LlmConditioner wrong(tokenizer, test::tiny_mistral_config(), format, weights, cpu, "");
    ADD_FAILURE() << "a tokenizer without [TOOL_CALLS] was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no '[TOOL_CALLS]' token"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::pipeline
