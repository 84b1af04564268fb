// Instruct-pix2pix and --img-cfg-scale through the whole pipeline, on a tiny random-weight
// model written by the project's own code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "pipeline/edit_image.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_pix2pix_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

io::Image gradient(int width, int height) {
  io::Image img;
  img.width = width;
  img.height = height;
  img.channels = 3;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int k = 0; k < 3; ++k)
        img.pixels.push_back(static_cast<uint8_t>((x * 7 + y * 3 + k * 60) % 256));
  return img;
}

class TinyPix2Pix : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.architecture = test::tiny_pix2pix_architecture();
    options_.model = test::write_tiny_pix2pix_checkpoint(*options_.architecture);
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 1;
    sd_ = std::make_unique<StableDiffusion>(options_);
    edit_ = gradient(32, 32);
    request_.prompt = "make it blue";
    request_.width = request_.height = 32;
    request_.steps = 2;
    request_.seed = 3;
    request_.edit_image = &edit_;
  }
  std::vector<uint8_t> pixels(const ImageRequest& r) { return sd_->generate(r)[0].pixels; }

  ModelOptions options_;
  std::unique_ptr<StableDiffusion> sd_;
  io::Image edit_;
  ImageRequest request_;
};

TEST_F(TinyPix2Pix, DetectsTheModelAndEditsTheImage) {
  EXPECT_EQ(sd_->version(), io::ModelVersion::SD1Pix2Pix);
  const std::vector<uint8_t> a = pixels(request_);
  io::Image other = gradient(32, 32);
  for (uint8_t& v : other.pixels) v = static_cast<uint8_t>(255 - v);
  request_.edit_image = &other;
  EXPECT_NE(pixels(request_), a);  // the image input reaches the UNet
}

TEST_F(TinyPix2Pix, ImageGuidanceChangesTheImage) {
  const std::vector<uint8_t> two_pass = pixels(request_);
  request_.img_cfg_scale = 1.0f;  // sd.cpp's default: the same two passes
  EXPECT_EQ(pixels(request_), two_pass);
  request_.img_cfg_scale = 1.5f;
  const std::vector<uint8_t> three_pass = pixels(request_);
  EXPECT_NE(three_pass, two_pass);
  request_.img_cfg_scale = 2.5f;
  EXPECT_NE(pixels(request_), three_pass);
}

TEST_F(TinyPix2Pix, ApgStepsAlongTheThreeWayDirection) {
  request_.img_cfg_scale = 1.5f;
  const std::vector<uint8_t> three_pass = pixels(request_);
  // A norm threshold too large to cap anything: APG on, the direction untouched, so the
  // three-way CFG image up to rounding.
  request_.apg.norm_threshold = 1e30f;
  const std::vector<uint8_t> uncapped = pixels(request_);
  ASSERT_EQ(uncapped.size(), three_pass.size());
  for (size_t i = 0; i < uncapped.size(); ++i)
    ASSERT_LE(std::abs(uncapped[i] - three_pass[i]), 1) << i;
  request_.apg = {};
  request_.apg.eta = 0.0f;  // the part along cond dropped: another image
  EXPECT_NE(pixels(request_), three_pass);
}

TEST_F(TinyPix2Pix, EqualScalesGuideAgainstTheImageUnconditional) {
  // img_cfg == cfg: the three-way formula's text term cancels; two passes (cond and the
  // image-unconditional) give img_uncond + cfg * (cond - img_uncond), which differs from
  // plain CFG against the negative prompt with the image.
  request_.img_cfg_scale = request_.cfg_scale;
  const std::vector<uint8_t> equal = pixels(request_);
  request_.img_cfg_scale.reset();
  EXPECT_NE(equal, pixels(request_));
}

TEST_F(TinyPix2Pix, MissingOrMisplacedImageIsAClearError) {
  auto expect_error = [&](const ImageRequest& r, const char* fragment) {
    io::test::expect_error([&] { sd_->generate(r); }, {fragment});
  };
  ImageRequest r = request_;
  r.edit_image = nullptr;
  expect_error(r, "-r/--ref-image");
  r = request_;
  r.init_image = &edit_;
  expect_error(r, "not -i");
  r = request_;
  r.img_cfg_scale = -1.0f;
  expect_error(r, "--img-cfg-scale");
}

TEST(EditImage, EncodeSizeFollowsTheOutputAreaAndTheImageAspect) {
  EXPECT_EQ(edit_image_encode_size(256, 256, 256, 256).width, 256);
  EXPECT_EQ(edit_image_encode_size(256, 256, 256, 256).height, 256);
  // 200x256 into 256x256: sqrt(65536 * 200 / 256) = 226.27 -> 224; 226.27 * 1.28 -> 288.
  const PixelSize s = edit_image_encode_size(200, 256, 256, 256);
  EXPECT_EQ(s.width, 224);
  EXPECT_EQ(s.height, 288);
  // Capped at 1024x1024 pixels.
  EXPECT_EQ(edit_image_encode_size(2048, 2048, 2048, 2048).width, 1024);
}

}  // namespace
}  // namespace sd::pipeline

namespace sd::pipeline {
namespace {

TEST(TinyPlainModel, IgnoresImageGuidanceWithAWarning) {
  const std::string shared = sd::test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
  ModelOptions o;
  o.architecture = test::tiny_architecture();
  o.model = test::write_tiny_checkpoint(*o.architecture);
  o.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
  o.threads = 1;
  StableDiffusion sd(o);
  ImageRequest r;
  r.prompt = "a cat";
  r.width = r.height = 32;
  r.steps = 2;
  std::vector<std::string> warnings;
  r.warn = [&](const std::string& w) { warnings.push_back(w); };
  const std::vector<uint8_t> plain = sd.generate(r)[0].pixels;
  EXPECT_TRUE(warnings.empty());
  r.img_cfg_scale = 1.5f;
  EXPECT_EQ(sd.generate(r)[0].pixels, plain);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("--img-cfg-scale"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace sd::pipeline
