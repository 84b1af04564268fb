// The highres fix: its schedule and sizes on their own, then the whole second pass on the
// tiny random-weight SD 1.x model (and a tiny random ESRGAN for the model upscaler).
#include "pipeline/hires_fix.h"

#include <gtest/gtest.h>

#include <map>

#include <filesystem>
#include <numeric>

#include "io/io_test_util.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

// A schedule whose sigmas are their own indices counted down: n, n - 1, ..., 1, 0.
std::vector<float> countdown(int n) {
  std::vector<float> s(static_cast<size_t>(n) + 1);
  for (int i = 0; i <= n; ++i) s[static_cast<size_t>(i)] = static_cast<float>(n - i);
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HiresSigmas, StretchTheScheduleSoTheSecondPassRunsItsSteps) {
  HiresOptions o;
  o.denoising_strength = 0.5f;
  o.steps = 4;
  // 4 / 0.5 = 8 scheduled steps; t_enc = 8 * 0.5 = 4, and as in img2img t_enc + 1 run.
  EXPECT_EQ(hires_sigmas(o, 20, countdown), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  o.steps = 0;  // the first pass's count
  EXPECT_EQ(hires_sigmas(o, 3, countdown), (std::vector<float>{4, 3, 2, 1, 0}));
  o.denoising_strength = 1.0f;  // the whole schedule
  EXPECT_EQ(hires_sigmas(o, 3, countdown), countdown(3));
  o.denoising_strength = 0.7f;  // 10 / 0.7 = 14 steps, t_enc = int(14 * 0.7) = 9
  o.steps = 10;
  EXPECT_EQ(hires_sigmas(o, 3, countdown).size(), 10u + 1u);
  o.denoising_strength = 0.0f;  // as 0.0001: the tail of a 9999-step schedule (f32 division)
  o.steps = 1;
  EXPECT_EQ(hires_sigmas(o, 3, countdown), (std::vector<float>{2, 1, 0}));
  o.custom_sigmas = {2.5f, 1.0f, 0.0f};
  EXPECT_EQ(hires_sigmas(o, 3, countdown), o.custom_sigmas);
}

TEST(HiresUpscalerNames, AreTheCApisAndUnknownNamesListThem) {
  EXPECT_EQ(parse_hires_upscaler("Latent (bicubic antialiased)"),
            HiresUpscaler::LatentBicubicAntialiased);
  EXPECT_STREQ(hires_upscaler_name(HiresUpscaler::Lanczos), "Lanczos");
  EXPECT_TRUE(upscales_latent(HiresUpscaler::LatentNearestExact));
  EXPECT_FALSE(upscales_latent(HiresUpscaler::Nearest));
  const std::string e = error_of([] { parse_hires_upscaler("Bilinear"); });
  EXPECT_NE(e.find("unknown hires upscaler 'Bilinear'; valid: Latent, Latent (nearest)"),
            std::string::npos)
      << e;
}

HiresFix fix(const HiresOptions& o, int w = 256, int h = 192,
             std::vector<std::string>* warnings = nullptr) {
  return HiresFix(o, w, h, 64, UpscalerOptions{}, [warnings](const std::string& text) {
    if (warnings) warnings->push_back(text);
  });
}

TEST(HiresFix, TargetSizeFromTheScaleOrTheGivenSides) {
  HiresOptions o;
  o.enabled = true;
  HiresFix a = fix(o);
  EXPECT_EQ(a.width(), 512);
  EXPECT_EQ(a.height(), 384);
  o.scale = 1.3f;  // 333 x 250 (rounded) -> aligned up, as the first pass's size
  std::vector<std::string> warnings;
  HiresFix b = fix(o, 256, 192, &warnings);
  EXPECT_EQ(b.width(), 384);
  EXPECT_EQ(b.height(), 256);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("333x250 aligned up to 384x256"), std::string::npos) << warnings[0];
  o.width = 640;  // one side: a square
  HiresFix c = fix(o);
  EXPECT_EQ(c.width(), 640);
  EXPECT_EQ(c.height(), 640);
  o.height = 448;
  HiresFix d = fix(o);
  EXPECT_EQ(d.width(), 640);
  EXPECT_EQ(d.height(), 448);
}

TEST(HiresFix, BadValuesAreOneLineErrorsNamingTheFlag) {
  auto error = [](const std::function<void(HiresOptions&)>& edit) {
    HiresOptions o;
    o.enabled = true;
    edit(o);
    return error_of([&] { fix(o); });
  };
  auto expect = [](const std::string& e, const char* text) {
    EXPECT_NE(e.find(text), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  expect(error([](HiresOptions& o) { o.scale = 0; }), "--hires-scale must be a positive number");
  expect(error([](HiresOptions& o) { o.scale = -1; }), "--hires-scale");
  expect(error([](HiresOptions& o) { o.scale = 1e9f; }), "sides must be 1 to 65536");
  expect(error([](HiresOptions& o) { o.denoising_strength = 1.5f; }),
         "--hires-denoising-strength 1.5 is outside [0, 1]");
  expect(error([](HiresOptions& o) { o.denoising_strength = -0.1f; }), "outside [0, 1]");
  expect(error([](HiresOptions& o) { o.width = 500; }), "must be multiples of 8");
  expect(error([](HiresOptions& o) { o.height = -8; }), "must be multiples of 8");
  expect(error([](HiresOptions& o) { o.steps = -1; }), "--hires-steps must not be negative");
  expect(error([](HiresOptions& o) { o.custom_sigmas = {1.0f}; }),
         "--hires-sigmas needs at least two values");
  expect(error([](HiresOptions& o) { o.upscaler = HiresUpscaler::Model; }),
         "--hires-upscaler Model needs a model file");
  expect(error([](HiresOptions& o) {
           o.upscaler = HiresUpscaler::Model;
           o.model = "no_such_dir/RealESRGAN_x4plus.pth";
         }),
         "no_such_dir/RealESRGAN_x4plus.pth");
}

// A 2x RRDBNet with random weights, as a safetensors file.
std::string write_tiny_esrgan() {
  static const io::test::TempDir dir;
  const std::string path = dir.file("tiny_esrgan_x2.safetensors");
  if (std::filesystem::exists(path)) return path;
  models::EsrganConfig c;
  c.num_block = 1;
  c.num_upsample = 1;
  c.num_feat = 8;
  c.num_grow_ch = 4;
  nn::RandomWeights w(DType::F32, 3);
  nn::ParamRecorder recorder(w);
  Context ctx;
  models::rrdbnet(nn::Scope(ctx, recorder), c, ctx.new_tensor(DType::F32, {8, 8, 3, 1}));
  nn::RandomWeights out;
  for (const nn::ParamDecl& p : recorder.params()) {
    w.get(ctx, p.name, p.ne);
    out.set(p.name, p.ne, w.values(p.name));
  }
  out.save_safetensors(path);
  return path;
}

class TinyHires : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.architecture = test::tiny_architecture();
    options_.model = test::write_tiny_checkpoint(*options_.architecture);
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 1;  // no OpenMP barriers to wait on when the machine is busy
    sd_ = std::make_unique<StableDiffusion>(options_);
    request_.prompt = "a cat";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.seed = 5;
    request_.hires.enabled = true;
    request_.hires.steps = 2;
  }
  ModelOptions options_;
  std::unique_ptr<StableDiffusion> sd_;
  ImageRequest request_;
};

TEST_F(TinyHires, EveryUpscalerGivesTheTargetSize) {
  request_.hires.model = write_tiny_esrgan();
  std::map<HiresUpscaler, std::vector<uint8_t>> image;
  for (int u = 0; u <= static_cast<int>(HiresUpscaler::Model); ++u) {
    request_.hires.upscaler = static_cast<HiresUpscaler>(u);
    const char* name = hires_upscaler_name(request_.hires.upscaler);
    const std::vector<io::Image> a = sd_->generate(request_);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].width, 32) << name;
    EXPECT_EQ(a[0].height, 32);
    EXPECT_EQ(a[0].pixels.size(), 32u * 32u * 3u) << name;
    image[request_.hires.upscaler] = a[0].pixels;
  }
  // Each kernel takes its own path. At 2x, as in PyTorch, antialiasing changes nothing
  // (it acts when shrinking) and nearest-exact picks nearest's pixels.
  using U = HiresUpscaler;
  const std::vector<std::vector<U>> kernels = {{U::Latent, U::LatentAntialiased},
                                               {U::LatentNearest, U::LatentNearestExact},
                                               {U::LatentBicubic, U::LatentBicubicAntialiased},
                                               {U::Lanczos},
                                               {U::Nearest},
                                               {U::Model}};
  for (size_t i = 0; i < kernels.size(); ++i) {
    for (U same : kernels[i])
      EXPECT_EQ(image[same], image[kernels[i][0]]) << hires_upscaler_name(same);
    for (size_t j = i + 1; j < kernels.size(); ++j)
      EXPECT_NE(image[kernels[i][0]], image[kernels[j][0]])
          << hires_upscaler_name(kernels[i][0]) << " vs " << hires_upscaler_name(kernels[j][0]);
  }
  // At 1.5x, nearest-exact samples pixel centres and parts from nearest.
  request_.hires.scale = 1.5f;
  request_.hires.upscaler = U::LatentNearest;
  const std::vector<uint8_t> nearest = sd_->generate(request_)[0].pixels;
  request_.hires.upscaler = U::LatentNearestExact;
  EXPECT_NE(sd_->generate(request_)[0].pixels, nearest);
}

TEST_F(TinyHires, IsDeterministicPerSeed) {
  for (HiresUpscaler u : {HiresUpscaler::LatentBicubic, HiresUpscaler::Lanczos}) {
    request_.hires.upscaler = u;
    EXPECT_EQ(sd_->generate(request_)[0].pixels, sd_->generate(request_)[0].pixels)
        << hires_upscaler_name(u);
  }
}

TEST_F(TinyHires, TheSecondPassChangesTheUpscaledImage) {
  request_.hires.upscaler = HiresUpscaler::Lanczos;
  const io::Image strong = sd_->generate(request_)[0];
  request_.hires.denoising_strength = 0.2f;
  const io::Image weak = sd_->generate(request_)[0];
  EXPECT_NE(strong.pixels, weak.pixels);
  request_.hires.enabled = false;
  EXPECT_EQ(sd_->generate(request_)[0].width, 16);
}

TEST_F(TinyHires, AModelUpscalerIsResizedToTheTargetAndMayTile) {
  request_.hires.upscaler = HiresUpscaler::Model;
  request_.hires.model = write_tiny_esrgan();
  request_.hires.scale = 3.0f;  // the 2x model's output is then brought to 48x48
  const io::Image whole = sd_->generate(request_)[0];
  EXPECT_EQ(whole.width, 48);
  EXPECT_EQ(whole.height, 48);
  request_.hires.upscale_tile_size = 8;  // 16x16 in 8-pixel tiles
  const io::Image tiled = sd_->generate(request_)[0];
  ASSERT_EQ(tiled.pixels.size(), whole.pixels.size());
  // Blended tiles differ from the whole image only by rounding through the second pass.
  int64_t differ = 0;
  for (size_t i = 0; i < whole.pixels.size(); ++i)
    differ += std::abs(int(whole.pixels[i]) - int(tiled.pixels[i])) > 8;
  EXPECT_LT(differ, static_cast<int64_t>(whole.pixels.size() / 10));
}

TEST_F(TinyHires, EachBatchEntryIsTheSingleImageOfItsSeed) {
  request_.hires.upscaler = HiresUpscaler::Nearest;  // image upscaler: the VAE draws too
  request_.batch_count = 2;
  const std::vector<io::Image> batch = sd_->generate(request_);
  ASSERT_EQ(batch.size(), 2u);
  request_.batch_count = 1;
  request_.seed = 6;
  EXPECT_EQ(sd_->generate(request_)[0].pixels, batch[1].pixels);
}

TEST_F(TinyHires, ImageToImageWithAMaskKeepsItsShape) {
  io::Image init, mask;
  init.width = init.height = mask.width = mask.height = 16;
  init.channels = 3;
  init.pixels.assign(16 * 16 * 3, 128);
  mask.channels = 1;
  mask.pixels.assign(16 * 16, 255);
  request_.init_image = &init;
  request_.mask = &mask;
  request_.strength = 0.6f;
  const io::Image out = sd_->generate(request_)[0];
  EXPECT_EQ(out.width, 32);
  EXPECT_EQ(out.height, 32);
}

TEST_F(TinyHires, BadOptionsFailBeforeAnyWork) {
  int steps = 0;
  request_.progress = [&](int, int, double) { ++steps; };
  request_.hires.denoising_strength = 2.0f;
  EXPECT_THROW(sd_->generate(request_), Error);
  request_.hires.denoising_strength = 0.5f;
  request_.hires.upscaler = HiresUpscaler::Model;
  request_.hires.model = "missing_esrgan.safetensors";
  EXPECT_THROW(sd_->generate(request_), Error);
  EXPECT_EQ(steps, 0);
}

}  // namespace
}  // namespace sd::pipeline
