// The whole pipeline on a tiny random-weight model with SD 1.x names, written to a
// safetensors file by the project's own code and loaded back through the real loader.
#include "pipeline/stable_diffusion.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "io/io_test_util.h"
#include "models/clip_text.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_model_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

using test::tiny_architecture;
using test::write_tiny_checkpoint;

class TinyPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string shared = sd::test::shared_dir();
    if (shared.empty()) GTEST_SKIP() << "needs ../shared/data/clip for the vocabulary";
    options_.architecture = tiny_architecture();
    options_.model = write_tiny_checkpoint(*options_.architecture);
    options_.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
    options_.threads = 2;
    sd_ = std::make_unique<StableDiffusion>(options_);
    request_.prompt = "a cat";
    request_.width = request_.height = 32;
    request_.steps = 3;
    request_.seed = 5;
  }
  ModelOptions options_;
  std::unique_ptr<StableDiffusion> sd_;
  ImageRequest request_;
};

TEST_F(TinyPipeline, PlacementErrorsComeBeforeAnyWork) {
  ModelOptions o = options_;
  o.backend = "disk";
  EXPECT_THROW(StableDiffusion{o}, Error);
  o.backend = "te=cpu";
  o.params_backend = "unet=floppy";
  try {
    StableDiffusion sd(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device 'floppy'"), std::string::npos) << e.what();
  }
}

// With no vocabulary given or placed, the built-in copy gives the same image.
TEST_F(TinyPipeline, ACheckpointRunsWithTheBuiltInClipVocabulary) {
  const io::test::TempDir empty;
  const std::string cache = empty.path().string();
  const char* env = std::getenv("SD_CLIP_VOCAB");
  const std::string saved_env = env ? env : "";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = xdg ? xdg : "";
  unsetenv("SD_CLIP_VOCAB");
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  ModelOptions o = options_;
  o.clip_vocab.clear();
  const std::vector<uint8_t> pixels = StableDiffusion(o).generate(request_)[0].pixels;
  if (!saved_env.empty()) setenv("SD_CLIP_VOCAB", saved_env.c_str(), 1);
  if (saved_xdg.empty())
    unsetenv("XDG_CACHE_HOME");
  else
    setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  EXPECT_EQ(pixels, sd_->generate(request_)[0].pixels);
}

TEST_F(TinyPipeline, IncompleteCheckpointListsTheMissingTensorsUpFront) {
  ModelOptions o = options_;
  o.architecture->unet.model_channels = 64;  // every UNet weight has another shape
  try {
    StableDiffusion sd(o);
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the diffusion weights"), std::string::npos) << what;
    EXPECT_NE(what.find("... and"), std::string::npos) << what;
  }
}

TEST_F(TinyPipeline, TextToImageIsDeterministicPerSeed) {
  std::vector<io::Image> a = sd_->generate(request_);
  std::vector<io::Image> b = sd_->generate(request_);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].width, 32);
  EXPECT_EQ(a[0].height, 32);
  EXPECT_EQ(a[0].channels, 3);
  EXPECT_EQ(a[0].pixels, b[0].pixels);
  request_.seed = 6;
  EXPECT_NE(sd_->generate(request_)[0].pixels, a[0].pixels);
}

// 100000 threads crashed OpenMP: a count above the machine's is cut to it, with a warning,
// and gives the same image.
TEST_F(TinyPipeline, AbsurdThreadCountsAreCutToTheMachines) {
  const std::vector<uint8_t> expected = sd_->generate(request_)[0].pixels;
  for (int threads : {100000, 2147483647}) {
    ModelOptions o = options_;
    o.threads = threads;
    std::vector<std::string> notes;
    o.note = [&](const std::string& n) { notes.push_back(n); };
    StableDiffusion sd(o);
    EXPECT_EQ(sd.generate(request_)[0].pixels, expected) << threads;
    bool warned = false;
    for (const std::string& n : notes)
      warned =
          warned || n.find(std::to_string(threads) + " threads asked for") != std::string::npos;
    EXPECT_TRUE(warned) << threads;
  }
}

TEST_F(TinyPipeline, AnInvertedSkipLayerRangeIsRefused) {
  request_.skip_layer.start = 0.8f;
  request_.skip_layer.end = 0.2f;
  EXPECT_THROW(sd_->generate(request_), Error);
}

TEST_F(TinyPipeline, RngAndTilingChangeTheImage) {
  const std::vector<uint8_t> plain = sd_->generate(request_)[0].pixels;
  ImageRequest r = request_;
  r.rng = sampling::RngType::Cpu;
  EXPECT_NE(sd_->generate(r)[0].pixels, plain);
  r = request_;
  r.vae_tiling = models::TilingParams{};
  r.vae_tiling->tile_size_x = r.vae_tiling->tile_size_y = 8;  // 2x2 tiles of the 16x16 latent
  EXPECT_NE(sd_->generate(r)[0].pixels, plain);
}

TEST_F(TinyPipeline, BatchUsesConsecutiveSeeds) {
  request_.batch_count = 2;
  std::vector<io::Image> batch = sd_->generate(request_);
  ASSERT_EQ(batch.size(), 2u);
  request_.batch_count = 1;
  request_.seed = 6;
  EXPECT_EQ(batch[1].pixels, sd_->generate(request_)[0].pixels);
}

TEST_F(TinyPipeline, ProgressCountsEverySamplingStep) {
  std::vector<int> steps;
  request_.progress = [&](int step, int total, double) {
    steps.push_back(step);
    EXPECT_EQ(total, 3);
  };
  sd_->generate(request_);
  EXPECT_EQ(steps, (std::vector<int>{1, 2, 3}));
}

// A cancel after the last sampling step stops the decode too (a server's SIGTERM waited
// for a whole decode), and the next generation runs as if nothing happened.
TEST_F(TinyPipeline, ACancelStopsTheDecodeMidGraph) {
  const std::vector<uint8_t> expected = sd_->generate(request_)[0].pixels;
  bool sampled = false;
  ImageRequest r = request_;
  r.progress = [&](int step, int total, double) { sampled = step == total; };
  r.cancelled = [&] { return sampled; };
  try {
    sd_->generate(r);
    ADD_FAILURE() << "the decode ran to the end after a cancel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation cancelled"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sd_->generate(request_)[0].pixels, expected);
}

TEST_F(TinyPipeline, PreviewsComeEveryIntervalSteps) {
  std::vector<int> steps;
  request_.steps = 4;
  request_.preview.mode = ImageRequest::Preview::Mode::Proj;
  request_.preview.interval = 2;
  request_.preview.callback = [&](int step, const std::vector<io::Image>& frames, bool noisy) {
    steps.push_back(step);
    EXPECT_FALSE(noisy);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].width, 16);  // one pixel per latent pixel
    EXPECT_EQ(frames[0].channels, 3);
  };
  sd_->generate(request_);
  EXPECT_EQ(steps, (std::vector<int>{2, 4}));
  request_.preview.mode = ImageRequest::Preview::Mode::Tae;
  EXPECT_THROW(sd_->generate(request_), Error);  // no TAESD given
}

TEST_F(TinyPipeline, ImageToImageStartsFromTheInitImage) {
  io::Image init;
  init.width = init.height = 32;
  init.channels = 3;
  init.pixels.assign(32 * 32 * 3, 200);
  request_.init_image = &init;
  request_.strength = 0.5f;
  std::vector<int> steps;
  request_.progress = [&](int step, int, double) { steps.push_back(step); };
  std::vector<io::Image> out = sd_->generate(request_);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(steps.size(), 2u);  // (size_t)(3 * 0.5) + 1 steps of the schedule's tail
  EXPECT_EQ(sd_->generate(request_)[0].pixels, out[0].pixels) << "same seed, same image";
  // The image starts from the init image: another init image gives another image, and
  // both differ from text-to-image with the same seed.
  io::Image dark = init;
  dark.pixels.assign(dark.pixels.size(), 20);
  request_.init_image = &dark;
  const io::Image from_dark = sd_->generate(request_)[0];
  EXPECT_NE(from_dark.pixels, out[0].pixels);
  request_.init_image = nullptr;
  const io::Image from_noise = sd_->generate(request_)[0];
  EXPECT_NE(from_noise.pixels, out[0].pixels);
  EXPECT_NE(from_noise.pixels, from_dark.pixels);
  // The brighter init image gives the brighter result (half its noise is kept).
  auto mean = [](const io::Image& im) {
    double sum = 0;
    for (uint8_t v : im.pixels) sum += v;
    return sum / static_cast<double>(im.pixels.size());
  };
  EXPECT_GT(mean(out[0]), mean(from_dark));
}

TEST_F(TinyPipeline, InpaintingKeepsTheUnmaskedLatent) {
  io::Image init, mask;
  init.width = init.height = mask.width = mask.height = 32;
  init.channels = 3;
  init.pixels.assign(32 * 32 * 3, 90);
  mask.channels = 1;
  mask.pixels.assign(32 * 32, 0);  // nothing to repaint
  request_.init_image = &init;
  request_.mask = &mask;
  request_.strength = 1.0f;
  std::vector<io::Image> a = sd_->generate(request_);
  request_.prompt = "a dog";  // with nothing masked the prompt cannot change the result
  std::vector<io::Image> b = sd_->generate(request_);
  EXPECT_EQ(a[0].pixels, b[0].pixels);
}

TEST_F(TinyPipeline, BadRequestsAreClearErrors) {
  auto expect_error = [&](ImageRequest r, const char* fragment) {
    try {
      sd_->generate(r);
      ADD_FAILURE() << "expected an error containing '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  ImageRequest r = request_;
  r.width = 30;
  expect_error(r, "multiples of 8");
  r = request_;
  r.strength = 1.5f;
  expect_error(r, "--strength");
  r = request_;
  r.steps = 0;
  expect_error(r, "--steps");
  r = request_;
  r.cfg_scale = -1;
  expect_error(r, "--cfg-scale");
}

TEST_F(TinyPipeline, OddSizesAreAlignedWithAWarning) {
  request_.width = 40;  // the tiny model's unit is 4 pixels... 8 from the size rule
  std::string warning;
  request_.warn = [&](const std::string& w) { warning = w; };
  std::vector<io::Image> out = sd_->generate(request_);
  EXPECT_EQ(out[0].width, 40);
  EXPECT_TRUE(warning.empty()) << warning;
}

TEST_F(TinyPipeline, ReferenceImagesAreIgnoredWithAWarningByUNetModels) {
  const io::Image ref{32, 32, 3, std::vector<uint8_t>(32 * 32 * 3, 200)};
  ImageRequest r = request_;
  std::string warning;
  r.warn = [&](const std::string& w) { warning = w; };
  r.ref_images = {&ref};
  EXPECT_EQ(sd_->generate(r)[0].pixels, sd_->generate(request_)[0].pixels);
  EXPECT_NE(warning.find("reference images (-r) are for FLUX.1 Kontext, FLUX.2 and "
                         "Qwen-Image-Edit models; SD 1.x does not take them: ignored"),
            std::string::npos)
      << warning;
}

TEST_F(TinyPipeline, DefaultSchedulerFollowsTheModel) {
  EXPECT_EQ(sd_->default_sample_method(), sampling::SampleMethod::EulerA);
  EXPECT_EQ(sd_->default_scheduler(sampling::SampleMethod::Euler), sampling::Scheduler::Discrete);
  EXPECT_EQ(sd_->default_scheduler(sampling::SampleMethod::Lcm), sampling::Scheduler::Lcm);
  ModelOptions o = options_;
  o.prediction = sampling::Prediction::EdmV;  // EDM v-prediction samples on exponential sigmas
  StableDiffusion edm(o);
  EXPECT_EQ(edm.default_scheduler(sampling::SampleMethod::Euler), sampling::Scheduler::Exponential);
}

TEST_F(TinyPipeline, StopNewImagesEndsTheBatchAfterTheCurrentImage) {
  request_.batch_count = 3;
  int asked = 0;
  request_.stop_new_images = [&] { return ++asked >= 1; };
  std::vector<io::Image> out = sd_->generate(request_);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(asked, 1);
}

TEST_F(TinyPipeline, StepCachesRunFewerNetworkEvaluationsAndSaySo) {
  request_.steps = 20;
  request_.method = sampling::SampleMethod::Euler;
  std::vector<std::string> info;
  request_.info = [&](const std::string& text) { info.push_back(text); };
  const std::vector<uint8_t> plain = sd_->generate(request_)[0].pixels;
  for (auto mode : {sampling::CacheMode::Spectrum, sampling::CacheMode::UCache}) {
    SCOPED_TRACE(sampling::cache_mode_name(mode));
    info.clear();
    ImageRequest r = request_;
    r.cache.mode = mode;
    r.cache.ucache.threshold = 10.0f;  // aggressive, so the tiny model skips for sure
    const std::vector<uint8_t> cached = sd_->generate(r)[0].pixels;
    std::string summary;
    for (const std::string& line : info)
      if (line.find("network evaluations run") != std::string::npos) summary = line;
    ASSERT_FALSE(summary.empty());
    EXPECT_EQ(summary.find(" of 20 network evaluations run"), summary.find(" of ")) << summary;
    EXPECT_EQ(summary.find("20 of 20"), std::string::npos) << "nothing was skipped: " << summary;
    EXPECT_NE(cached, plain);  // skipped evaluations change the image a little
  }
  // The transformer modes have no UNet form: a one-line error naming the modes that do,
  // before any step runs.
  for (auto mode : {sampling::CacheMode::EasyCache, sampling::CacheMode::DbCache,
                    sampling::CacheMode::TaylorSeer, sampling::CacheMode::CacheDit}) {
    SCOPED_TRACE(sampling::cache_mode_name(mode));
    ImageRequest r = request_;
    r.cache.mode = mode;
    int steps_run = 0;
    r.progress = [&](int, int, double) { ++steps_run; };
    try {
      sd_->generate(r);
      ADD_FAILURE() << "a transformer cache mode ran on a UNet";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("does not work on"), std::string::npos) << what;
      EXPECT_NE(what.find("use one of: ucache, spectrum"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_EQ(steps_run, 0);
  }
}

TEST_F(TinyPipeline, GuidanceScheduleAndApgChangeTheGuidanceOnly) {
  request_.method = sampling::SampleMethod::Euler;
  const std::vector<uint8_t> plain = sd_->generate(request_)[0].pixels;
  ImageRequest same = request_;
  same.guidance_schedule.assign(3, request_.cfg_scale);  // the same scale every step
  EXPECT_EQ(sd_->generate(same)[0].pixels, plain);
  ImageRequest scheduled = request_;
  scheduled.guidance_schedule = {1.0f, 12.0f, 3.0f};
  EXPECT_NE(sd_->generate(scheduled)[0].pixels, plain);
  ImageRequest apg = request_;
  apg.apg.eta = 0.0f;
  EXPECT_NE(sd_->generate(apg)[0].pixels, plain);
}

}  // namespace
}  // namespace sd::pipeline
