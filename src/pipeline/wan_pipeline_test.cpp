// Wan through the whole pipeline: a tiny text-to-video model as its three files and a
// tokenizer.json beside umT5, written by the project's own code and loaded back through the
// real loader with the CLI's file roles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "io/io_test_util.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_wan_test_util.h"
#include "pipeline/tiny_z_image_test_util.h"
#include "pipeline/vae_runner.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinyWan : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyWanFiles files = test::write_tiny_wan(dir.file("wan"));
    files_ = files;
    temp_ = dir.file("");
    options_ = test::tiny_wan_options(files_);
    request_ = test::tiny_wan_request();
    request_.warn = [this](const std::string& w) { warnings_.push_back(w); };
    // The tokenizer is found next to the umT5 file, not through the environment.
    const char* env = std::getenv("SD_UMT5_TOKENIZER");
    saved_env_ = env ? env : "";
    unsetenv("SD_UMT5_TOKENIZER");
  }
  void TearDown() override {
    if (!saved_env_.empty()) setenv("SD_UMT5_TOKENIZER", saved_env_.c_str(), 1);
  }

  test::TinyWanFiles files_;
  std::string temp_, saved_env_;
  std::vector<std::string> warnings_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyWan, IsDetectedAndMakesAClip) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::Wan);
  EXPECT_TRUE(sd.makes_video());
  EXPECT_EQ(sd.prediction(), sampling::Prediction::Sd3Flow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  const std::vector<io::Image> clip = sd.generate(request_);
  ASSERT_EQ(clip.size(), 5u);  // two latent frames: 1 + 4
  for (const io::Image& frame : clip) {
    EXPECT_EQ(frame.width, 16);
    EXPECT_EQ(frame.height, 16);
  }
  // The frames differ from each other, and the same request gives the same clip; the
  // prompt and the seed change it.
  EXPECT_NE(clip[0].pixels, clip[4].pixels);
  EXPECT_EQ(sd.generate(request_)[4].pixels, clip[4].pixels);
  ImageRequest r = request_;
  r.prompt = "a dog";
  EXPECT_NE(sd.generate(r)[4].pixels, clip[4].pixels);
  r = request_;
  r.seed = 7;
  EXPECT_NE(sd.generate(r)[4].pixels, clip[4].pixels);
}

// A clip's preview is every frame: a projection per latent frame, or the decoded clip.
TEST_F(TinyWan, PreviewsShowEveryFrame) {
  StableDiffusion sd(options_);
  std::vector<size_t> counts;
  int width = 0;
  request_.preview.callback = [&](int, const std::vector<io::Image>& frames, bool) {
    counts.push_back(frames.size());
    width = frames.empty() ? 0 : frames[0].width;
  };
  request_.preview.mode = ImageRequest::Preview::Mode::Proj;
  const std::vector<io::Image> clip = sd.generate(request_);
  EXPECT_EQ(counts, (std::vector<size_t>{2, 2}));  // two steps, two latent frames
  EXPECT_EQ(width, 2);
  counts.clear();
  request_.preview.mode = ImageRequest::Preview::Mode::Vae;
  request_.preview.interval = 2;
  // Previews change nothing of the clip.
  EXPECT_EQ(sd.generate(request_).back().pixels, clip.back().pixels);
  EXPECT_EQ(counts, (std::vector<size_t>{5}));
  EXPECT_EQ(width, 16);
}

TEST_F(TinyWan, FrameCountsRoundDownToWhatTheVaeMakes) {
  StableDiffusion sd(options_);
  request_.video_frames = 8;
  EXPECT_EQ(sd.generate(request_).size(), 5u);
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_.back().find("generating 5"), std::string::npos) << warnings_.back();
}

TEST_F(TinyWan, AnImageIsAOneFrameClip) {
  StableDiffusion sd(options_);
  ImageRequest image = request_;
  image.video_frames = 0;
  const std::vector<io::Image> one = sd.generate(image);
  ASSERT_EQ(one.size(), 1u);
  request_.video_frames = 1;
  const std::vector<io::Image> clip = sd.generate(request_);
  ASSERT_EQ(clip.size(), 1u);
  EXPECT_EQ(clip[0].pixels, one[0].pixels);
}

// --vae-tiling: tiles over the frame, each decoded over the whole clip with its own causal
// memory and blended as an image's tiles are: the first frame is exactly the tiled image of
// the first latent frame, and every frame is tiled.
TEST(WanVaeRunner, TiledClipsAreTiledFrameByFrame) {
  nn::RandomWeights w(DType::F16, 9);
  VaeRunner vae(w, test::tiny_wan_vae_config(), sd::test::cpu_backend());
  const int64_t side = 8, frames = 2, c = 16;
  std::vector<float> latent(static_cast<size_t>(side * side * frames * c));
  for (size_t i = 0; i < latent.size(); ++i) latent[i] = std::sin(0.37f * static_cast<float>(i));
  const std::vector<std::vector<float>> whole = vae.decode_video(latent, side, side, frames);
  vae.set_tiling(models::TilingParams{4, 4, 0.5f, 0.0f, 0.0f});
  const std::vector<std::vector<float>> tiled = vae.decode_video(latent, side, side, frames);
  ASSERT_EQ(whole.size(), 5u);
  ASSERT_EQ(tiled.size(), 5u);
  for (size_t i = 0; i < tiled.size(); ++i) EXPECT_NE(tiled[i], whole[i]) << "frame " << i;
  std::vector<float> first(static_cast<size_t>(side * side * c));
  for (int64_t ch = 0; ch < c; ++ch)
    std::copy_n(latent.begin() + ch * frames * side * side, side * side,
                first.begin() + ch * side * side);
  EXPECT_EQ(vae.decode(first, side, side), tiled[0]);
}

TEST_F(TinyWan, RequestsItCannotServeAreRefusedBeforeWork) {
  StableDiffusion sd(options_);
  ImageRequest r = request_;
  r.batch_count = 2;
  EXPECT_NE(test::generation_error(sd, r).find("-b 2"), std::string::npos);
  r = request_;
  const io::Image init = {16, 16, 3, std::vector<uint8_t>(16 * 16 * 3, 128)};
  r.init_image = &init;
  EXPECT_NE(test::generation_error(sd, r).find("image-to-video"), std::string::npos);
  r = request_;
  r.video_frames = kMaxVideoFrames + 1;
  EXPECT_NE(test::generation_error(sd, r).find("--video-frames"), std::string::npos);
}

TEST_F(TinyWan, MissingPartsNameTheirFlags) {
  auto error_opening = [](const ModelOptions& o) -> std::string {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  ModelOptions o = options_;
  o.t5xxl.clear();
  EXPECT_NE(error_opening(o).find("--t5xxl"), std::string::npos);
  o = options_;
  o.vae.clear();
  EXPECT_NE(error_opening(o).find("--vae"), std::string::npos);
  // umT5's vocabulary is its own: a missing one says where to get it.
  o = options_;
  o.t5_tokenizer = temp_ + "/no_such/tokenizer.json";
  EXPECT_NE(error_opening(o).find("umT5 tokenizer"), std::string::npos);
}

TEST(ImageModels, RefuseVideoRequests) {
  static const io::test::TempDir dir;
  const test::TinyZImageFiles f = test::write_tiny_z_image(dir.file("z"));
  ModelOptions o;
  o.diffusion_model = f.dit;
  o.llm = f.llm;
  o.vae = f.vae;
  StableDiffusion sd(o);
  EXPECT_FALSE(sd.makes_video());
  ImageRequest r;
  r.width = r.height = 16;
  r.video_frames = 5;
  try {
    sd.generate(r);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vid_gen"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::pipeline
