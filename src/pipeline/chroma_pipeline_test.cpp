// Chroma through the whole pipeline: a tiny model as its files (transformer, T5 with its
// tokenizer.json, autoencoder), written by the project's own code and loaded back through
// the real loader with the CLI's file roles. Chroma reads no CLIP, so no vocabulary is
// needed and nothing here needs ../shared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "io/io_test_util.h"
#include "pipeline/model_args.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/t5_only_conditioner.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"

namespace sd::pipeline {
namespace {

class TinyChroma : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyFluxFiles files = test::write_tiny_chroma(dir.file("chroma"));
    files_ = files;
    options_.diffusion_model = files_.dit;
    options_.t5xxl = files_.t5;
    options_.vae = files_.vae;
    options_.clip_vocab = dir.file("no_clip_vocab_here.txt");  // must not be read
    options_.threads = 2;
    options_.note = [this](const std::string& text) { notes_.push_back(text); };
    request_.prompt = "a (cat:1.2)";
    request_.negative_prompt = "a dog";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 4.0f;
    const char* env = std::getenv("SD_T5_TOKENIZER");
    saved_env_ = env ? env : "";
    unsetenv("SD_T5_TOKENIZER");
  }
  void TearDown() override {
    if (!saved_env_.empty()) setenv("SD_T5_TOKENIZER", saved_env_.c_str(), 1);
  }
  std::string error_of(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::vector<uint8_t> pixels_with(const std::string& model_args) {
    ModelOptions o = options_;
    o.model_args = model_args;
    StableDiffusion sd(o);
    return sd.generate(request_)[0].pixels;
  }

  test::TinyFluxFiles files_;
  std::string saved_env_;
  std::vector<std::string> notes_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyChroma, IsDetectedAndGenerates) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::Chroma);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::FluxFlow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const std::vector<io::Image> a = sd.generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 16);
  // Weights on disk: the same image.
  ModelOptions on_disk = options_;
  on_disk.params_backend = "disk";
  StableDiffusion sd_disk(on_disk);
  EXPECT_EQ(sd_disk.generate(request_)[0].pixels, a[0].pixels);
  // The prompt matters; --guidance does not (Chroma's guidance input is always zero).
  ImageRequest r = request_;
  r.prompt = "a dog";
  EXPECT_NE(sd.generate(r)[0].pixels, a[0].pixels);
  r = request_;
  r.guidance = 9.0f;
  EXPECT_EQ(sd.generate(r)[0].pixels, a[0].pixels);
}

TEST_F(TinyChroma, MaskOptionsChangeTheImage) {
  request_.steps = 1;
  const std::vector<uint8_t> plain = pixels_with("");
  // The defaults spelled out give the same image.
  EXPECT_EQ(pixels_with("chroma_use_dit_mask=true, chroma_use_t5_mask=false;chroma_t5_mask_pad=1"),
            plain);
  // Without the transformer's mask, the padding is attended: another image.
  EXPECT_NE(pixels_with("chroma_use_dit_mask=false"), plain);
  // Masking T5's own attention changes its hidden states.
  EXPECT_NE(pixels_with("chroma_use_t5_mask=true"), plain);
  // Fewer padding tokens let through.
  EXPECT_NE(pixels_with("chroma_t5_mask_pad=0"), plain);
  // Without the transformer's mask the pad count is not read.
  EXPECT_EQ(pixels_with("chroma_use_dit_mask=false,chroma_t5_mask_pad=3"),
            pixels_with("chroma_use_dit_mask=0"));
}

TEST_F(TinyChroma, AClipFileIsNotRead) {
  // As sd.cpp: Chroma's conditioner reads T5 alone; a --clip_l file changes nothing.
  const std::vector<uint8_t> plain = pixels_with("");
  ModelOptions o = options_;
  o.clip_l = files_.clip_l;
  notes_.clear();
  StableDiffusion sd(o);
  EXPECT_EQ(sd.generate(request_)[0].pixels, plain);
  bool warned = false;
  for (const std::string& n : notes_)
    warned = warned || n.find("the --clip_l file is not used") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(TinyChroma, BadModelArgsFailBeforeAnyFileIsRead) {
  ModelOptions o = options_;
  o.diffusion_model = "/nonexistent/chroma.safetensors";
  o.model_args = "chroma_use_dit_mask=maybe";
  std::string e = error_of(o);
  EXPECT_NE(e.find("chroma_use_dit_mask=maybe: expected true or false"), std::string::npos) << e;
  o.model_args = "chroma_t5_mask_pad=-2";
  e = error_of(o);
  EXPECT_NE(e.find("chroma_t5_mask_pad=-2"), std::string::npos) << e;
  o.model_args = "chroma_use_t5_mask";
  e = error_of(o);
  EXPECT_NE(e.find("expected key=value"), std::string::npos) << e;
}

TEST(ModelArgs, ReadsChromaKeysAndListsOthers) {
  const ModelArgs a = parse_model_args(
      " chroma_use_dit_mask = off ;chroma_use_t5_mask=YES,, "
      "chroma_t5_mask_pad=4,qwen_image_zero_cond_t=true,lora_apply_mode=at_runtime");
  EXPECT_FALSE(a.chroma.dit_mask);
  EXPECT_TRUE(a.chroma.t5_mask);
  EXPECT_EQ(a.chroma.t5_mask_pad, 4);
  EXPECT_TRUE(a.qwen_image_zero_cond_t);
  EXPECT_EQ(a.unused, std::vector<std::string>{"lora_apply_mode"});
  EXPECT_THROW(parse_model_args("qwen_image_zero_cond_t=sometimes"), Error);
  const ModelArgs d = parse_model_args("");
  EXPECT_TRUE(d.chroma.dit_mask);
  EXPECT_FALSE(d.chroma.t5_mask);
  EXPECT_EQ(d.chroma.t5_mask_pad, 1);
}

TEST(ChromaMask, PaddingAfterEachWindowsEndIsMaskedAndTheFirstPadsReopened) {
  // Two windows of 4: "x y </s> <pad>", "z </s> <pad> <pad>".
  const std::vector<int> ids = {7, 8, 1, 0, 9, 1, 0, 0};
  const std::vector<float> m = t5_padding_mask(ids, 4);
  const float inf = INFINITY;
  EXPECT_EQ(m, (std::vector<float>{0, 0, 0, -inf, 0, 0, -inf, -inf}));
  EXPECT_EQ(attend_padding(m, 2), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, -inf}));
  EXPECT_EQ(attend_padding(m, 0), m);
}

}  // namespace
}  // namespace sd::pipeline
