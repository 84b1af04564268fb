// Wan 2.1 VACE through the whole pipeline, in small: a transformer with two VACE blocks
// reading a control video (and a reference image) encoded by the autoencoder.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_wan_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinyWanVace : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyWanFiles files = test::write_tiny_wan_vace(dir.file("wan"));
    options_ = test::tiny_wan_options(files);
    request_ = test::tiny_wan_request();
    request_.warn = [this](const std::string& w) { warnings_.push_back(w); };
    for (int i = 0; i < 5; ++i) frames_.push_back(patterned(16, 16, 11 + i));
  }
  // An image with some structure, different for each `salt`.
  static io::Image patterned(int width, int height, int salt) {
    io::Image img;
    img.width = width;
    img.height = height;
    img.channels = 3;
    img.pixels.resize(static_cast<size_t>(width) * height * 3);
    for (size_t i = 0; i < img.pixels.size(); ++i)
      img.pixels[i] = static_cast<uint8_t>((i * (37 + 2 * salt) + 13 * salt) % 251);
    return img;
  }
  ImageRequest with_frames(const std::vector<const io::Image*>& frames) const {
    ImageRequest r = request_;
    r.control_frames = frames;
    return r;
  }
  std::vector<const io::Image*> all_frames() const {
    std::vector<const io::Image*> v;
    for (const io::Image& f : frames_) v.push_back(&f);
    return v;
  }

  ModelOptions options_;
  ImageRequest request_;
  std::vector<io::Image> frames_;
  std::vector<std::string> warnings_;
};

TEST_F(TinyWanVace, IsDetectedAndFollowsItsControlVideo) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::WanVace);
  EXPECT_TRUE(sd.makes_video());
  const std::vector<io::Image> clip = sd.generate(with_frames(all_frames()));
  ASSERT_EQ(clip.size(), 5u);
  EXPECT_EQ(clip[0].width, 16);
  // The same request gives the same clip; another control video another clip.
  EXPECT_EQ(sd.generate(with_frames(all_frames()))[4].pixels, clip[4].pixels);
  const std::vector<const io::Image*> forward = all_frames();
  const std::vector<const io::Image*> reversed(forward.rbegin(), forward.rend());
  EXPECT_NE(sd.generate(with_frames(reversed))[4].pixels, clip[4].pixels);
}

// --vace-strength scales the VACE blocks' hints: at 0 the control video changes nothing.
TEST_F(TinyWanVace, StrengthZeroIgnoresTheControlVideo) {
  StableDiffusion sd(options_);
  ImageRequest a = with_frames(all_frames());
  ImageRequest b = with_frames({&frames_[4], &frames_[3]});
  a.vace_strength = b.vace_strength = 0.0f;
  EXPECT_EQ(sd.generate(a)[4].pixels, sd.generate(b)[4].pixels);
  a.vace_strength = b.vace_strength = 0.5f;
  EXPECT_NE(sd.generate(a)[4].pixels, sd.generate(b)[4].pixels);
}

// A reference image (-i) is a latent frame before the clip: sampled with it (so it changes
// the clip) and cut before decoding (so the clip keeps its frame count), previews too.
TEST_F(TinyWanVace, AReferenceImageAddsALatentFrameThatIsCut) {
  StableDiffusion sd(options_);
  const io::Image reference = patterned(16, 16, 40);
  ImageRequest r = with_frames(all_frames());
  const std::vector<io::Image> without = sd.generate(r);
  r.init_image = &reference;
  r.strength = 0.5f;  // not image-to-image: every step is sampled
  std::vector<size_t> preview_frames;
  r.preview.mode = ImageRequest::Preview::Mode::Proj;
  r.preview.callback = [&](int, const std::vector<io::Image>& frames, bool) {
    preview_frames.push_back(frames.size());
  };
  const std::vector<io::Image> with = sd.generate(r);
  ASSERT_EQ(with.size(), 5u);
  EXPECT_NE(with[2].pixels, without[2].pixels);
  ASSERT_FALSE(preview_frames.empty());
  for (size_t n : preview_frames) EXPECT_EQ(n, 2u);  // proj: one per latent frame of the clip
}

TEST_F(TinyWanVace, RefusesWhatItCannotUse) {
  StableDiffusion sd(options_);
  ImageRequest r = with_frames(all_frames());
  const io::Image last = patterned(16, 16, 3);
  r.end_image = &last;
  EXPECT_NE(test::generation_error(sd, r).find("--end-img"), std::string::npos)
      << test::generation_error(sd, r);
  r = with_frames(all_frames());
  r.video_frames = 0;  // an image request
  EXPECT_NE(test::generation_error(sd, r).find("-M vid_gen"), std::string::npos)
      << test::generation_error(sd, r);
  io::Image broken = frames_[1];
  broken.pixels.resize(10);
  r = with_frames({&frames_[0], &broken});
  EXPECT_NE(test::generation_error(sd, r).find("control video's frame 2"), std::string::npos)
      << test::generation_error(sd, r);
  // More frames than the clip: the rest unused, with a warning.
  r = with_frames(all_frames());
  r.video_frames = 1;
  warnings_.clear();
  EXPECT_EQ(sd.generate(r).size(), 1u);
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_.back().find("not used"), std::string::npos) << warnings_.back();
}

// A model without VACE blocks refuses a control video, naming the flag.
TEST(TinyWanVaceRefusal, AModelWithoutVaceRefusesAControlVideo) {
  static const io::test::TempDir dir;
  const test::TinyWanFiles files = test::write_tiny_wan(dir.file("wan"));
  StableDiffusion sd(test::tiny_wan_options(files));
  ImageRequest r = test::tiny_wan_request();
  io::Image frame;
  frame.width = frame.height = 16;
  frame.channels = 3;
  frame.pixels.assign(16 * 16 * 3, 10);
  r.control_frames = {&frame};
  try {
    sd.generate(r);
    FAIL() << "a control video was accepted by a text-to-video model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--control-video"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::pipeline
