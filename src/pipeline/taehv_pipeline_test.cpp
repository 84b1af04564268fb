// --tae with Wan's latents: a TAEHV file decodes (and, with its encoder, encodes) clips in
// the VAE's place, or only the previews with --taesd-preview-only; the wrong kind of tiny
// autoencoder fails at load, naming the kind the model needs.
#include <gtest/gtest.h>

#include <string>

#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "pipeline/tiny_wan_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinyWanTae : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyWanFiles files = test::write_tiny_wan(dir.file("wan"));
    static const bool written = [] {
      test::write_tiny_taehv(dir.file("taew2_1.safetensors"), 16, 1, true, 71);
      test::write_tiny_taehv(dir.file("taew2_2.safetensors"), 48, 2, true, 72);
      test::write_tiny_taehv(dir.file("taew2_2_decoder.safetensors"), 48, 2, false, 72);
      return true;
    }();
    (void)written;
    dir_ = &dir;
    options_ = test::tiny_wan_options(files);
    request_ = test::tiny_wan_request();
  }
  std::string file(const char* name) const { return dir_->file(name); }
  static std::string load_error(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  const io::test::TempDir* dir_ = nullptr;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyWanTae, DecodesTheClipInTheVaesPlace) {
  const std::vector<io::Image> vae = StableDiffusion(options_).generate(request_);
  ModelOptions o = options_;
  o.taesd = file("taew2_1.safetensors");
  StableDiffusion sd(o);
  const std::vector<io::Image> tae = sd.generate(request_);
  ASSERT_EQ(tae.size(), 5u);  // 1 + 4, as the VAE's
  for (size_t f = 0; f < tae.size(); ++f) {
    EXPECT_EQ(tae[f].width, 16);
    EXPECT_EQ(tae[f].pixels.size(), vae[f].pixels.size());
    EXPECT_NE(tae[f].pixels, vae[f].pixels) << "frame " << f;
  }
  EXPECT_NE(tae[0].pixels, tae[4].pixels);
  EXPECT_EQ(sd.generate(request_)[4].pixels, tae[4].pixels);
  // An image (a one-frame clip) is its first frame's decode.
  ImageRequest image = request_;
  image.video_frames = 1;
  ASSERT_EQ(sd.generate(image).size(), 1u);
}

// --taesd-preview-only: the clip is the VAE's; --preview tae shows every frame through the
// TAEHV.
TEST_F(TinyWanTae, PreviewsOnlyLeaveTheClipToTheVae) {
  const std::vector<io::Image> vae = StableDiffusion(options_).generate(request_);
  ModelOptions o = options_;
  o.taesd = file("taew2_1.safetensors");
  o.taesd_preview_only = true;
  StableDiffusion sd(o);
  std::vector<size_t> counts;
  int width = 0;
  request_.preview.mode = ImageRequest::Preview::Mode::Tae;
  request_.preview.callback = [&](int, const std::vector<io::Image>& frames, bool) {
    counts.push_back(frames.size());
    width = frames.empty() ? 0 : frames[0].width;
  };
  const std::vector<io::Image> clip = sd.generate(request_);
  ASSERT_EQ(clip.size(), vae.size());
  for (size_t f = 0; f < clip.size(); ++f) EXPECT_EQ(clip[f].pixels, vae[f].pixels);
  EXPECT_EQ(counts, (std::vector<size_t>{5, 5}));  // two steps, every frame
  EXPECT_EQ(width, 16);
}

// Wan 2.2 TI2V-5B with taew2_2: the first frame is encoded by the TAEHV's encoder where the
// file has one, else by the VAE (a decoder-only file still decodes).
TEST_F(TinyWanTae, EncodesTheFirstFrameWhereTheFileHasAnEncoder) {
  static const io::test::TempDir dir;
  static const test::TinyWanFiles ti2v = test::write_tiny_wan_ti2v(dir.file("wan"));
  ModelOptions o = options_;
  o.diffusion_model = ti2v.dit;
  o.vae = ti2v.vae;
  request_.width = request_.height = 32;
  io::Image first;
  first.width = first.height = 32;
  first.channels = 3;
  first.pixels.resize(32 * 32 * 3);
  for (size_t i = 0; i < first.pixels.size(); ++i)
    first.pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  request_.init_image = &first;
  o.taesd = file("taew2_2.safetensors");
  const std::vector<io::Image> both = StableDiffusion(o).generate(request_);
  o.taesd = file("taew2_2_decoder.safetensors");
  const std::vector<io::Image> decoder_only = StableDiffusion(o).generate(request_);
  ASSERT_EQ(both.size(), 5u);
  ASSERT_EQ(decoder_only.size(), 5u);
  // The same decoder weights (one seed), another latent for the first frame.
  EXPECT_NE(both[0].pixels, decoder_only[0].pixels);
}

TEST_F(TinyWanTae, TheWrongKindIsRefusedNamingTheOneNeeded) {
  // A TAESD (images) for Wan's latents.
  const std::string taesd = file("taesd.safetensors");
  test::write_tiny_taesd(taesd, 16, false, 17);
  ModelOptions o = options_;
  o.taesd = taesd;
  std::string e = load_error(o);
  EXPECT_NE(e.find("is a TAESD"), std::string::npos) << e;
  EXPECT_NE(e.find("taew2_1"), std::string::npos) << e;
  // Wan 2.2's TAEHV for Wan 2.1's latents.
  o.taesd = file("taew2_2.safetensors");
  e = load_error(o);
  EXPECT_NE(e.find("--tae"), std::string::npos) << e;
  EXPECT_NE(e.find("48-channel"), std::string::npos) << e;
  EXPECT_NE(e.find("taew2_1"), std::string::npos) << e;
  // A TAEHV for an image model.
  const std::string shared = sd::test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the SD 1.x vocabulary";
  ModelOptions sd1;
  sd1.architecture = test::tiny_architecture();
  sd1.model = test::write_tiny_checkpoint(*sd1.architecture);
  sd1.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
  sd1.taesd = file("taew2_1.safetensors");
  e = load_error(sd1);
  EXPECT_NE(e.find("is a TAEHV"), std::string::npos) << e;
  EXPECT_NE(e.find("TAESD"), std::string::npos) << e;
}

}  // namespace
}  // namespace sd::pipeline
