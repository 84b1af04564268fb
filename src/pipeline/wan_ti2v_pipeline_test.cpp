// Wan 2.2 TI2V-5B through the whole pipeline, in small: a transformer on Wan 2.2's
// 48-channel latent and Wan 2.2's autoencoder (16x per side), text to video and from a
// first frame kept in the latent.
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

class TinyWanTI2V : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyWanFiles files = test::write_tiny_wan_ti2v(dir.file("wan"));
    files_ = files;
    options_.diffusion_model = files_.dit;
    options_.t5xxl = files_.umt5;
    options_.vae = files_.vae;
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 32;  // 2 x 2 latent pixels: one 2x2 patch per frame
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
    request_.video_frames = 5;
    // A first frame with some structure.
    first_.width = first_.height = 32;
    first_.channels = 3;
    first_.pixels.resize(32 * 32 * 3);
    for (size_t i = 0; i < first_.pixels.size(); ++i)
      first_.pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  }

  test::TinyWanFiles files_;
  ModelOptions options_;
  ImageRequest request_;
  io::Image first_;
};

TEST_F(TinyWanTI2V, IsDetectedAndMakesAClip) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::WanTI2V);
  EXPECT_TRUE(sd.makes_video());
  const std::vector<io::Image> clip = sd.generate(request_);
  ASSERT_EQ(clip.size(), 5u);  // two latent frames: 1 + 4
  for (const io::Image& frame : clip) {
    EXPECT_EQ(frame.width, 32);
    EXPECT_EQ(frame.height, 32);
  }
  EXPECT_NE(clip[0].pixels, clip[4].pixels);
  EXPECT_EQ(sd.generate(request_)[4].pixels, clip[4].pixels);
  ImageRequest r = request_;
  r.seed = 7;
  EXPECT_NE(sd.generate(r)[4].pixels, clip[4].pixels);
}

// The first frame (-i) is encoded into the latent's first frame and kept there: the clip's
// first frame is then the same whatever the seed, the frames after it are not.
TEST_F(TinyWanTI2V, AFirstFrameIsKeptWhateverTheSeed) {
  StableDiffusion sd(options_);
  const std::vector<io::Image> text_only = sd.generate(request_);
  ImageRequest r = request_;
  r.init_image = &first_;
  const std::vector<io::Image> a = sd.generate(r);
  r.seed = 7;
  const std::vector<io::Image> b = sd.generate(r);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(a[0].pixels, b[0].pixels);
  EXPECT_NE(a[4].pixels, b[4].pixels);
  EXPECT_NE(a[0].pixels, text_only[0].pixels);
  // The last frame too (--end-img): the clip then differs from the first frame's alone.
  r.seed = request_.seed;
  r.end_image = &first_;
  const std::vector<io::Image> both = sd.generate(r);
  EXPECT_EQ(both[0].pixels, a[0].pixels);
  EXPECT_NE(both[4].pixels, a[4].pixels);
  // A later request without a frame is text to video again, and an image (-M img_gen)
  // after a clip with fixed frames is one frame with none.
  EXPECT_EQ(sd.generate(request_)[4].pixels, text_only[4].pixels);
  ImageRequest pinned = request_;
  pinned.init_image = &first_;
  sd.generate(pinned);
  ImageRequest one_frame = request_;
  one_frame.video_frames = 0;
  const std::vector<io::Image> image = sd.generate(one_frame);
  ASSERT_EQ(image.size(), 1u);
  EXPECT_EQ(image[0].width, 32);
}

TEST_F(TinyWanTI2V, RefusesWhatItCannotUse) {
  {
    // Wan 2.1's autoencoder (written beside the others) has 16 channels, the transformer
    // reads 48.
    ModelOptions o = options_;
    o.vae = files_.dir + "/wan_vae.safetensors";
    try {
      StableDiffusion sd(o);
      ADD_FAILURE() << "a Wan 2.1 autoencoder was accepted for TI2V";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("wan2.2_vae"), std::string::npos) << e.what();
    }
  }
  StableDiffusion sd(options_);
  ImageRequest r = request_;
  r.init_image = &first_;
  r.mask = &first_;
  EXPECT_NE(test::generation_error(sd, r).find("--mask"), std::string::npos);
}

}  // namespace
}  // namespace sd::pipeline
