// Wan image to video through the whole pipeline: tiny I2V, FLF2V and Wan 2.2 I2V models as
// their files (transformer, umT5, autoencoder, CLIP vision), loaded back through the real
// loader with the CLI's file roles.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_wan_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

using test::TinyWanI2VKind;

io::Image pattern(int width, int height, int phase) {
  io::Image img{width, height, 3, std::vector<uint8_t>(static_cast<size_t>(width * height * 3))};
  for (size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = static_cast<uint8_t>((i * 37 + static_cast<size_t>(phase) * 91) % 251);
  return img;
}

class TinyWanI2V : public ::testing::Test {
 protected:
  static const test::TinyWanI2VFiles& files(TinyWanI2VKind kind) {
    static const io::test::TempDir dir;
    static const test::TinyWanI2VFiles i2v =
        write_tiny_wan_i2v(dir.file("i2v"), TinyWanI2VKind::Wan21);
    static const test::TinyWanI2VFiles flf2v =
        write_tiny_wan_i2v(dir.file("flf2v"), TinyWanI2VKind::Flf2v);
    static const test::TinyWanI2VFiles wan22 =
        write_tiny_wan_i2v(dir.file("wan22"), TinyWanI2VKind::Wan22);
    return kind == TinyWanI2VKind::Wan21 ? i2v : kind == TinyWanI2VKind::Flf2v ? flf2v : wan22;
  }
  ModelOptions options(TinyWanI2VKind kind) const {
    const test::TinyWanI2VFiles& f = files(kind);
    ModelOptions o;
    o.diffusion_model = f.base.dit;
    o.t5xxl = f.base.umt5;
    o.vae = f.base.vae;
    if (kind != TinyWanI2VKind::Wan22) o.clip_vision = f.clip_vision;
    o.threads = 2;
    o.note = [this](const std::string& n) { notes_.push_back(n); };
    return o;
  }
  void SetUp() override {
    request_.prompt = "a cat";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
    request_.video_frames = 5;
    request_.init_image = &start_;
    // The tokenizer is found next to the umT5 file, not through the environment.
    const char* env = std::getenv("SD_UMT5_TOKENIZER");
    saved_env_ = env ? env : "";
    unsetenv("SD_UMT5_TOKENIZER");
  }
  void TearDown() override {
    if (!saved_env_.empty()) setenv("SD_UMT5_TOKENIZER", saved_env_.c_str(), 1);
  }
  static std::string error_opening(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  // A first frame of another size (resized to the clip's) and a last frame.
  const io::Image start_ = pattern(24, 20, 1), end_ = pattern(16, 16, 2);
  std::string saved_env_;
  mutable std::vector<std::string> notes_;
  ImageRequest request_;
};

TEST_F(TinyWanI2V, MakesAClipFromItsFirstFrame) {
  StableDiffusion sd(options(TinyWanI2VKind::Wan21));
  EXPECT_EQ(sd.version(), io::ModelVersion::WanI2V);
  EXPECT_TRUE(sd.makes_video());
  const std::vector<io::Image> clip = sd.generate(request_);
  ASSERT_EQ(clip.size(), 5u);
  for (const io::Image& frame : clip) {
    EXPECT_EQ(frame.width, 16);
    EXPECT_EQ(frame.height, 16);
  }
  EXPECT_EQ(sd.generate(request_)[3].pixels, clip[3].pixels);
  // The first frame conditions the whole clip (through the latent and the image tokens).
  const io::Image other = pattern(24, 20, 5);
  ImageRequest r = request_;
  r.init_image = &other;
  const std::vector<io::Image> changed = sd.generate(r);
  for (size_t f = 0; f < clip.size(); ++f) EXPECT_NE(changed[f].pixels, clip[f].pixels) << f;
  // -i is the first frame, not an image-to-image start: the strength does not trim the steps.
  r = request_;
  r.strength = 0.3f;
  EXPECT_EQ(sd.generate(r)[4].pixels, clip[4].pixels);
}

TEST_F(TinyWanI2V, FirstAndLastFramesConditionAnFlf2vClip) {
  StableDiffusion sd(options(TinyWanI2VKind::Flf2v));
  EXPECT_EQ(sd.version(), io::ModelVersion::WanI2V);
  ImageRequest r = request_;
  r.end_image = &end_;
  const std::vector<io::Image> clip = sd.generate(r);
  ASSERT_EQ(clip.size(), 5u);
  const io::Image other = pattern(16, 16, 7);
  r.end_image = &other;
  EXPECT_NE(sd.generate(r)[4].pixels, clip[4].pixels);
  // Without a last frame FLF2V still runs (its tokens are zeros, as the reference's).
  EXPECT_EQ(sd.generate(request_).size(), 5u);
}

TEST_F(TinyWanI2V, Wan22NeedsNoClipVision) {
  StableDiffusion sd(options(TinyWanI2VKind::Wan22));
  EXPECT_EQ(sd.version(), io::ModelVersion::WanI2V);
  const std::vector<io::Image> clip = sd.generate(request_);
  ASSERT_EQ(clip.size(), 5u);
  const io::Image other = pattern(24, 20, 5);
  ImageRequest r = request_;
  r.init_image = &other;
  EXPECT_NE(sd.generate(r)[0].pixels, clip[0].pixels);
}

TEST_F(TinyWanI2V, RequestsItCannotServeAreRefusedBeforeWork) {
  StableDiffusion sd(options(TinyWanI2VKind::Wan21));
  ImageRequest r = request_;
  r.init_image = nullptr;
  EXPECT_NE(test::generation_error(sd, r).find("-i IMAGE"), std::string::npos)
      << test::generation_error(sd, r);
  r = request_;
  r.video_frames = 0;  // -M img_gen
  EXPECT_NE(test::generation_error(sd, r).find("vid_gen"), std::string::npos)
      << test::generation_error(sd, r);
  r = request_;
  const io::Image mask = {16, 16, 1, std::vector<uint8_t>(16 * 16, 255)};
  r.mask = &mask;
  EXPECT_NE(test::generation_error(sd, r).find("--mask"), std::string::npos)
      << test::generation_error(sd, r);
  r = request_;
  const io::Image broken = {16, 16, 3, std::vector<uint8_t>(5)};
  r.end_image = &broken;
  EXPECT_NE(test::generation_error(sd, r).find("--end-img"), std::string::npos)
      << test::generation_error(sd, r);
}

TEST_F(TinyWanI2V, MissingOrWrongClipVisionNamesTheFlag) {
  ModelOptions o = options(TinyWanI2VKind::Wan21);
  o.clip_vision.clear();
  EXPECT_NE(error_opening(o).find("--clip_vision"), std::string::npos) << error_opening(o);
  // A file that is not a CLIP vision tower.
  o.clip_vision = files(TinyWanI2VKind::Wan21).base.vae;
  EXPECT_NE(error_opening(o).find("--clip_vision"), std::string::npos) << error_opening(o);
  // A model that reads no image tokens says the file is not used.
  o = options(TinyWanI2VKind::Wan22);
  o.clip_vision = files(TinyWanI2VKind::Wan21).clip_vision;
  notes_.clear();
  StableDiffusion sd(o);
  bool noted = false;
  for (const std::string& n : notes_) noted |= n.find("--clip_vision") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(TinyWanI2V, TextToVideoModelsRefuseFrames) {
  const test::TinyWanI2VFiles& f = files(TinyWanI2VKind::Wan21);
  ModelOptions o;
  o.diffusion_model = f.base.dir + "/wan.safetensors";  // write_tiny_wan's T2V transformer
  o.t5xxl = f.base.umt5;
  o.vae = f.base.vae;
  StableDiffusion sd(o);
  EXPECT_EQ(sd.version(), io::ModelVersion::Wan);
  ImageRequest r = request_;
  r.init_image = nullptr;
  r.end_image = &end_;
  EXPECT_NE(test::generation_error(sd, r).find("image-to-video"), std::string::npos)
      << test::generation_error(sd, r);
}

}  // namespace
}  // namespace sd::pipeline
