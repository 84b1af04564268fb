// FLUX.1 through the whole pipeline: a tiny dev model as its four files, written by the
// project's own code and loaded back through the real loader with the CLI's file roles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "image_psnr.h"
#include "io/io_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

class TinyFlux : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the CLIP vocabulary";
    static const io::test::TempDir dir;
    static const test::TinyFluxFiles files = test::write_tiny_flux(dir.file("flux"));
    files_ = files;
    temp_ = dir.file("");
    options_.diffusion_model = files_.dit;
    options_.t5xxl = files_.t5;
    options_.clip_l = files_.clip_l;
    options_.vae = files_.vae;
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    request_.prompt = "a (cat:1.2)";
    request_.width = request_.height = 16;
    request_.steps = 2;
    request_.cfg_scale = 1.0f;
    // The tokenizer is found next to the T5 file, not through the environment.
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

  test::TinyFluxFiles files_;
  std::string temp_, saved_env_;
  ModelOptions options_;
  ImageRequest request_;
};

TEST_F(TinyFlux, GeneratesWithAndWithoutClassifierFreeGuidance) {
  StableDiffusion sd(options_);
  EXPECT_EQ(sd.version(), io::ModelVersion::Flux);
  EXPECT_EQ(sd.prediction(), sampling::Prediction::FluxFlow);
  EXPECT_EQ(sd.default_sample_method(), sampling::SampleMethod::Euler);
  std::vector<io::Image> a = sd.generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 16);
  EXPECT_EQ(a[0].height, 16);
  // Both encoders and the transformer are in their modules: weights on disk, same image.
  ModelOptions on_disk = options_;
  on_disk.params_backend = "disk";
  StableDiffusion sd_disk(on_disk);
  EXPECT_EQ(sd_disk.generate(request_)[0].pixels, a[0].pixels);
  EXPECT_EQ(sd_disk.resident_weight_bytes(), 0u);
  // Another guidance strength gives another image; so does CFG with a negative prompt.
  ImageRequest r = request_;
  r.guidance = 7.0f;
  EXPECT_NE(sd.generate(r)[0].pixels, a[0].pixels);
  r = request_;
  r.cfg_scale = 3.0f;
  r.negative_prompt = "a dog";
  EXPECT_NE(sd.generate(r)[0].pixels, a[0].pixels);
}

// A deterministic RGB pattern, different per `seed`.
io::Image pattern(int w, int h, int seed) {
  io::Image img{w, h, 3, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  for (size_t i = 0; i < img.pixels.size(); ++i)
    img.pixels[i] = static_cast<uint8_t>((i * (7 + 2 * seed) + seed * 31) % 251);
  return img;
}

TEST_F(TinyFlux, ReferenceImagesChangeTheImageDeterministically) {
  StableDiffusion sd(options_);
  const std::vector<uint8_t> plain = sd.generate(request_)[0].pixels;
  // Another size and aspect than the 16x16 output: resized to about the output's area.
  const io::Image ref = pattern(24, 12, 1), other = pattern(16, 16, 2);
  ImageRequest r = request_;
  std::vector<std::string> info;
  r.info = [&](const std::string& text) { info.push_back(text); };
  r.ref_images = {&ref};
  const io::Image a = sd.generate(r)[0];
  EXPECT_EQ(a.width, 16);
  EXPECT_EQ(a.height, 16);
  EXPECT_NE(a.pixels, plain);
  EXPECT_NE(std::find(info.begin(), info.end(), "reference image 1: 24x12, encoded at 24x12"),
            info.end());
  EXPECT_EQ(sd.generate(r)[0].pixels, a.pixels);
  // Another reference, another image; two references, another again. (How the index
  // modes place them: pipeline/flux_runner_test.cpp.)
  r.ref_images = {&other};
  const std::vector<uint8_t> b = sd.generate(r)[0].pixels;
  EXPECT_NE(b, a.pixels);
  r.ref_images = {&ref, &other};
  const std::vector<uint8_t> two = sd.generate(r)[0].pixels;
  EXPECT_NE(two, a.pixels);
  EXPECT_NE(two, b);
  // Encoded at its own size, the 24x12 reference gives what the resize gave (same size).
  r.ref_images = {&ref};
  r.ref_options.resize_before_vae = false;
  EXPECT_EQ(sd.generate(r)[0].pixels, a.pixels);
  // The next request without references is the plain image again.
  EXPECT_EQ(sd.generate(request_)[0].pixels, plain);
}

TEST_F(TinyFlux, ImageGuidanceWeighsTheReferencesAgainstNone) {
  // With references, --img-cfg-scale guides from the prediction without them (sd.cpp's
  // img_uncond): img_uncond + img_cfg (uncond - img_uncond) + cfg (cond - uncond). With the
  // negative prompt equal to the prompt, cond = uncond, so a scale of 0 leaves the
  // prediction without references (the plain image) and 1 the one with them.
  StableDiffusion sd(options_);
  const io::Image plain = sd.generate(request_)[0];
  const io::Image ref = pattern(16, 16, 1);
  ImageRequest r = request_;
  r.ref_images = {&ref};
  const io::Image with_refs = sd.generate(r)[0];
  r.negative_prompt = r.prompt;
  r.img_cfg_scale = 0.0f;
  const io::Image none = sd.generate(r)[0];
  const double refs_vs_plain = sd::test::image_psnr(with_refs, plain);
  const double none_vs_plain = sd::test::image_psnr(none, plain);
  std::printf("PSNR against the plain image: with references %.1f dB, img-cfg 0 %.1f dB\n",
              refs_vs_plain, none_vs_plain);
  EXPECT_GE(none_vs_plain, 50.0);
  EXPECT_GT(none_vs_plain, refs_vs_plain + 5.0);
  // Twice the references' pull moves the image further from the plain one.
  r.img_cfg_scale = 2.0f;
  const io::Image stronger = sd.generate(r)[0];
  EXPECT_NE(stronger.pixels, with_refs.pixels);
  EXPECT_LT(sd::test::image_psnr(stronger, plain), refs_vs_plain);
  // Without references there is no image input to guide by: a warning, the plain image.
  std::vector<std::string> warnings;
  r = request_;
  r.img_cfg_scale = 2.0f;
  r.warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_EQ(sd.generate(r)[0].pixels, plain.pixels);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("--img-cfg-scale"), std::string::npos);
}

TEST_F(TinyFlux, BadReferenceImagesAreRefusedBeforeAnyStep) {
  StableDiffusion sd(options_);
  int steps = 0;
  auto error_of = [&](ImageRequest r) -> std::string {
    r.progress = [&](int, int, double) { ++steps; };
    try {
      sd.generate(r);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const io::Image odd = pattern(18, 12, 1), thin = pattern(400, 1, 1);
  io::Image broken = pattern(8, 8, 1);
  broken.pixels.resize(5);
  ImageRequest r = request_;
  r.ref_images = {&broken};
  EXPECT_NE(error_of(r).find("reference image 1 is empty"), std::string::npos);
  // Too thin to resize: a side rounds to nothing.
  r.ref_images = {&thin};
  EXPECT_NE(error_of(r).find("400x1 reference image is too narrow"), std::string::npos);
  // Unresized, its sides must make whole patches.
  r.ref_images = {&odd};
  r.ref_options.resize_before_vae = false;
  const std::string e = error_of(r);
  EXPECT_NE(e.find("reference image 1 is 18x12"), std::string::npos) << e;
  EXPECT_NE(e.find("multiples of 4"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(steps, 0);
}

// "dbcache: 7 of 20 network evaluations run, 13 reused (...)" -> 7; -1 without the line.
int evaluations_run(const std::vector<std::string>& info) {
  for (const std::string& line : info) {
    const size_t at = line.find(" network evaluations run");
    if (at == std::string::npos) continue;
    const size_t colon = line.find(": ");
    return std::atoi(line.c_str() + colon + 2);
  }
  return -1;
}

TEST_F(TinyFlux, TransformerStepCachesSkipByTheirThresholds) {
  // (The exact steps each rule skips are counted in sampling/dit_cache_test.cpp; here the
  // modes run through the pipeline on the transformer.)
  request_.steps = 8;
  std::vector<std::string> info;
  request_.info = [&](const std::string& text) { info.push_back(text); };
  StableDiffusion sd(options_);
  const std::vector<uint8_t> plain = sd.generate(request_)[0].pixels;
  using sampling::CacheMode;
  auto run_with = [&](CacheMode mode, float threshold) {
    ImageRequest r = request_;
    r.cache.mode = mode;
    r.cache.easycache.threshold = threshold;
    r.cache.blocks.threshold = threshold;
    info.clear();
    const std::vector<uint8_t> pixels = sd.generate(r)[0].pixels;
    return std::pair{evaluations_run(info), pixels};
  };
  for (CacheMode mode :
       {CacheMode::EasyCache, CacheMode::DbCache, CacheMode::TaylorSeer, CacheMode::CacheDit}) {
    SCOPED_TRACE(sampling::cache_mode_name(mode));
    // An aggressive threshold skips inside the active range; the first step and the last
    // always run.
    const auto [fewest, changed] = run_with(mode, 100.0f);
    EXPECT_LT(fewest, 8);
    EXPECT_GE(fewest, 2);
    EXPECT_NE(changed, plain);
  }
  // Threshold 0: every evaluation runs, and the image is the plain one.
  for (CacheMode mode : {CacheMode::EasyCache, CacheMode::CacheDit}) {
    SCOPED_TRACE(sampling::cache_mode_name(mode));
    const auto [all, same] = run_with(mode, 0.0f);
    EXPECT_EQ(all, 8);
    EXPECT_EQ(same, plain);
  }
  // ucache is the UNets' residual cache: refused on a transformer, before any step.
  ImageRequest r = request_;
  r.cache.mode = CacheMode::UCache;
  int steps_run = 0;
  r.progress = [&](int, int, double) { ++steps_run; };
  try {
    sd.generate(r);
    ADD_FAILURE() << "ucache ran on FLUX";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-mode ucache does not work on Flux"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("easycache, dbcache, taylorseer, cache-dit"),
              std::string::npos)
        << e.what();
  }
  // Out-of-range options are refused before any step as well.
  r.cache.mode = CacheMode::DbCache;
  r.cache.blocks.threshold = -0.5f;
  EXPECT_THROW(sd.generate(r), Error);
  r.cache.mode = CacheMode::EasyCache;
  r.cache.easycache.start = 0.9f;
  r.cache.easycache.end = 0.1f;
  EXPECT_THROW(sd.generate(r), Error);
  EXPECT_EQ(steps_run, 0);
}

TEST_F(TinyFlux, MissingTokenizerSaysWhereToGetIt) {
  const test::TinyFluxFiles bare =
      test::write_tiny_flux(temp_ + "/no_tokenizer", 32, /*tokenizer=*/false);
  ModelOptions o = options_;
  o.t5xxl = bare.t5;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved = cache ? cache : "";
  setenv("XDG_CACHE_HOME", bare.dir.c_str(), 1);
  const std::string e = error_of(o);
  if (saved.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  EXPECT_NE(e.find("T5 tokenizer not found"), std::string::npos) << e;
  EXPECT_NE(e.find("SD_T5_TOKENIZER"), std::string::npos) << e;
}

TEST_F(TinyFlux, AnEncoderOfAnotherWidthFailsBeforeLoading) {
  const test::TinyFluxFiles wide = test::write_tiny_flux(temp_ + "/wide_t5", 48);
  ModelOptions o = options_;
  o.t5xxl = wide.t5;
  const std::string e = error_of(o);
  EXPECT_NE(e.find("--t5xxl"), std::string::npos) << e;
  EXPECT_NE(e.find("48"), std::string::npos) << e;
}

}  // namespace
}  // namespace sd::pipeline
