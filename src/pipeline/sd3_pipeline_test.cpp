// SD3 and SD3.5 Medium through the whole pipeline: tiny models written by the project's own
// code, as one checkpoint and as the separate files of the CLI's file roles, loaded back
// through the real loader.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_sd3_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinySd3 : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    static const io::test::TempDir dir;
    static const test::TinySd3Files sd3 = test::write_tiny_sd3(dir.file("sd3"));
    static const test::TinySd3Files sd35 = test::write_tiny_sd3(dir.file("sd35"), {true});
    sd3_ = sd3;
    sd35_ = sd35;
    temp_ = dir.file("");
    options_.model = sd3_.checkpoint;
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.t5_tokenizer = dir.file("sd3") + "/tokenizer.json";
    options_.threads = 2;
    request_.prompt = "a (cat:1.2)";
    request_.negative_prompt = "a dog";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 3.0f;
  }
  std::string error_of(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  ModelOptions split(const test::TinySd3Files& f) const {
    ModelOptions o = options_;
    o.model.clear();
    o.diffusion_model = f.dit;
    o.clip_l = f.clip_l;
    o.clip_g = f.clip_g;
    o.t5xxl = f.t5;
    o.vae = f.vae;
    return o;
  }

  test::TinySd3Files sd3_, sd35_;
  std::string temp_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinySd3, OneCheckpointAndSeparateFilesMakeTheSameImage) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::SD3);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::Sd3Flow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const std::vector<io::Image> a = sd.generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 16);
  EXPECT_EQ(a[0].height, 16);
  EXPECT_EQ(sd.generate(request_)[0].pixels, a[0].pixels);  // deterministic
  StableDiffusion separate(split(sd3_));
  EXPECT_EQ(separate.generate(request_)[0].pixels, a[0].pixels);
  // Weights on disk: the same image, nothing resident afterwards.
  ModelOptions on_disk = options_;
  on_disk.params_backend = "disk";
  StableDiffusion sd_disk(on_disk);
  EXPECT_EQ(sd_disk.generate(request_)[0].pixels, a[0].pixels);
  EXPECT_EQ(sd_disk.resident_weight_bytes(), 0u);
  // The prompt reaches the image.
  ImageRequest r = request_;
  r.prompt = "a dog";
  EXPECT_NE(sd.generate(r)[0].pixels, a[0].pixels);
}

TEST_F(TinySd3, Sd35MediumRunsItsSecondAttentionAndSkipLayerGuidance) {
  ModelOptions o = options_;
  o.model = sd35_.checkpoint;
  StableDiffusion sd(o);
  EXPECT_EQ(sd.version(), io::ModelVersion::SD3_5Medium);
  ImageRequest r = request_;
  r.steps = 10;  // the skip-layer window (0.01 .. 0.2 of 11 sigmas) is step 1
  const std::vector<uint8_t> plain = sd.generate(r)[0].pixels;
  r.skip_layer.scale = 2.5f;
  r.skip_layer.layers = {1};
  const std::vector<uint8_t> slg = sd.generate(r)[0].pixels;
  EXPECT_NE(slg, plain);
  r.skip_layer.end = 0.05f;  // a window with no step in it
  EXPECT_EQ(sd.generate(r)[0].pixels, plain);
}

TEST_F(TinySd3, WithoutT5ItRunsOnZerosAndSaysSo) {
  static const test::TinySd3Files no_t5 = test::write_tiny_sd3(temp_ + "/no_t5", {false, false});
  ModelOptions o = options_;
  o.model = no_t5.checkpoint;
  std::string notes;
  o.note = [&](const std::string& n) { notes += n + "\n"; };
  StableDiffusion sd(o);
  EXPECT_NE(notes.find("--t5xxl"), std::string::npos) << notes;
  EXPECT_EQ(sd.generate(request_)[0].width, 16);
}

// A tokenizer of another kind where T5's belongs (CLIP's BPE tokenizer.json, CLIP's
// merges file) fails when the model is set up, in one line naming the file.
TEST_F(TinySd3, ATokenizerOfAnotherKindForT5IsNamed) {
  const std::string bpe = temp_ + "/clip_tokenizer.json";
  std::ofstream(bpe) << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
  for (const std::string& wrong : {bpe, options_.clip_vocab}) {
    ModelOptions o = options_;
    o.t5_tokenizer = wrong;
    const std::string e = error_of(o);
    EXPECT_NE(e.find(wrong), std::string::npos) << e;
    EXPECT_NE(e.find("T5 tokenizer"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST_F(TinySd3, AnEncoderOfAnotherWidthFailsBeforeLoading) {
  static const test::TinySd3Files wide =
      test::write_tiny_sd3(temp_ + "/wide", {false, true, 48, 48});
  ModelOptions o = split(sd3_);
  o.t5xxl = wide.t5;
  std::string e = error_of(o);
  EXPECT_NE(e.find("--t5xxl"), std::string::npos) << e;
  EXPECT_NE(e.find("48"), std::string::npos) << e;
  static const test::TinySd3Files narrow_g =
      test::write_tiny_sd3(temp_ + "/narrow_g", {false, true, 4096, 24});
  o = split(sd3_);
  o.clip_g = narrow_g.clip_g;  // projects to 24: an 88-value pooled vector, not 104
  e = error_of(o);
  EXPECT_NE(e.find("--clip_g"), std::string::npos) << e;
  EXPECT_NE(e.find("104"), std::string::npos) << e;
}

}  // namespace
}  // namespace sd::pipeline
