// FLUX.1 Fill: the mask folded into the latent grid, and a tiny Fill model (img_in of 384
// channels, written by the project's own code) inpainting through the whole pipeline.
#include "pipeline/flux_fill.h"

#include <gtest/gtest.h>

#include "models/vae.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

TEST(FluxFillConcat, FoldsEachPixelBlockIntoChannels) {
  // A 4x2 image, f = 2: a 2x1 latent grid, 4 mask planes after one latent plane.
  const std::vector<float> latent = {7, 8};
  std::vector<float> mask(8);
  for (int i = 0; i < 8; ++i) mask[i] = static_cast<float>(i);  // row-major, width 4
  const std::vector<float> c = flux_fill_concat(latent, mask, 4, 2, 2);
  // Plane dy * 2 + dx holds pixel (row * 2 + dy, col * 2 + dx) at grid (row, col).
  EXPECT_EQ(c, (std::vector<float>{7, 8, /*dy0 dx0*/ 0, 2, /*dy0 dx1*/ 1, 3,
                                   /*dy1 dx0*/ 4, 6, /*dy1 dx1*/ 5, 7}));
}

class TinyFluxFill : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    static const io::test::TempDir dir;
    static const test::TinyFluxFiles files = [] {
      models::FluxConfig fill = test::tiny_flux_config();
      fill.in_channels = 384;
      test::TinyFluxFiles f = test::write_tiny_flux(dir.file("fill"), 32, true, fill);
      // Fill folds 8x8 mask pixels per latent cell: an autoencoder that downscales by 8.
      nn::RandomWeights w(DType::F16, 25);
      models::VaeConfig vc = models::VaeConfig::flux();
      vc.ch = 32;
      vc.ch_mult = {1, 1, 1, 1};
      vc.num_res_blocks = 1;
      Context ctx;
      models::vae_decode(nn::Scope(ctx, w, ""), vc, ctx.new_tensor(DType::F32, {4, 4, 16, 1}));
      models::vae_encode(nn::Scope(ctx, w, ""), vc, ctx.new_tensor(DType::F32, {32, 32, 3, 1}));
      f.vae = dir.file("fill/ae8.safetensors");
      w.save_safetensors(f.vae);
      return f;
    }();
    options_.diffusion_model = files.dit;
    options_.t5xxl = files.t5;
    options_.clip_l = files.clip_l;
    options_.vae = files.vae;
    options_.t5_tokenizer = files.dir + "/tokenizer.json";
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 32;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
    init_ = io::Image{32, 32, 3, std::vector<uint8_t>(32 * 32 * 3)};
    for (size_t i = 0; i < init_.pixels.size(); ++i) init_.pixels[i] = static_cast<uint8_t>(i * 7);
    // Not aligned to the 8x8 cells, so the order of the folded channels matters.
    mask_ = io::Image{32, 32, 1, std::vector<uint8_t>(32 * 32, 0)};
    for (int y = 3; y < 21; ++y)
      for (int x = 5 + y % 3; x < 30; ++x) mask_.pixels[y * 32 + x] = 255;
  }

  ModelOptions options_;
  ImageRequest request_;
  io::Image init_, mask_;
};

TEST_F(TinyFluxFill, InpaintsWithTheMaskAndTheMaskedImage) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::FluxFill);
  ImageRequest r = request_;
  r.init_image = &init_;
  r.mask = &mask_;
  const io::Image a = sd.generate(r)[0];
  // The transformer reads the mask: another mask, another image.
  io::Image other = mask_;
  for (uint8_t& v : other.pixels) v = static_cast<uint8_t>(255 - v);
  r.mask = &other;
  EXPECT_NE(sd.generate(r)[0].pixels, a.pixels);
  // Without an init image it still runs (everything repainted), with a warning.
  std::string warning;
  ImageRequest bare = request_;
  bare.warn = [&](const std::string& w) { warning = w; };
  EXPECT_EQ(sd.generate(bare)[0].width, 32);
  EXPECT_NE(warning.find("init image"), std::string::npos) << warning;
}

TEST_F(TinyFluxFill, RefusesReferenceImages) {
  StableDiffusion sd(options_);
  ImageRequest r = request_;
  r.init_image = &init_;
  r.mask = &mask_;
  r.ref_images = {&init_};
  try {
    sd.generate(r);
    ADD_FAILURE() << "FLUX.1 Fill took a reference image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FLUX.1 Fill does not take reference images (-r)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sd::pipeline
