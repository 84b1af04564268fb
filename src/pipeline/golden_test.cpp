// End-to-end comparison with the reference implementation's outputs in
// ../shared/golden: the same random-weight checkpoint, flags and seed must give the same
// image (PSNR >= 40 dB). The checkpoints are 2-7 GB, made by ../shared/tools/make_random_sd.py;
// tests find them through SD_TEST_SD15_MODEL / SD_TEST_SD2_MODEL / SD_TEST_SDXL_MODEL and
// skip without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/image.h"
#include "pipeline/stable_diffusion.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

double psnr(const io::Image& a, const io::Image& b) {
  double se = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const double d = static_cast<double>(a.pixels[i]) - b.pixels[i];
    se += d * d;
  }
  const double mse = se / static_cast<double>(a.pixels.size());
  return mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

struct GoldenCase {
  const char* model_env;
  const char* golden;  // under ../shared/golden
  const char* sampler;
  std::optional<sampling::Prediction> prediction;
  int size = 256;
  int steps = 4;
};

void run_golden(const GoldenCase& g) {
  const char* model = std::getenv(g.model_env);
  const std::string shared = test::shared_dir();
  if (!model || shared.empty()) GTEST_SKIP() << g.model_env << " or ../shared not available";
  const std::string golden_path = shared + "/golden/" + g.golden;
  ModelOptions options;
  options.model = model;
  options.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
  options.threads = 2;
  options.prediction = g.prediction;
  StableDiffusion sd(options);
  ImageRequest r;
  r.prompt = "a photograph of an astronaut riding a horse";
  r.seed = 42;
  r.steps = g.steps;
  r.width = r.height = g.size;
  r.method = sampling::parse_sample_method(g.sampler);
  std::vector<io::Image> images = sd.generate(r);
  ASSERT_EQ(images.size(), 1u);
  const io::Image expected = io::read_image(golden_path);
  ASSERT_EQ(expected.width, images[0].width);
  ASSERT_EQ(expected.height, images[0].height);
  const io::Image got = io::to_channels(images[0], expected.channels);
  const double db = psnr(got, expected);
  ::testing::Test::RecordProperty("psnr_db", std::to_string(db));
  std::printf("PSNR %.2f dB against %s\n", db, g.golden);
  if (const char* out = std::getenv("SD_TEST_OUTPUT_DIR")) {
    std::string name = g.golden;  // "<set>/<image>.png" -> "<set>_<image>.png"
    std::replace(name.begin(), name.end(), '/', '_');
    io::write_image(std::string(out) + "/" + name, got, "");
  }
  EXPECT_GE(db, 40.0) << "against " << golden_path;
}

TEST(Golden, Sd15EulerA) {
  run_golden({"SD_TEST_SD15_MODEL", "sd15_rand/eulera_256.png", "euler_a", {}});
}
TEST(Golden, Sd15Euler) {
  run_golden({"SD_TEST_SD15_MODEL", "sd15_rand/euler_256.png", "euler", {}});
}
TEST(Golden, Sd2EulerA) {
  run_golden({"SD_TEST_SD2_MODEL", "sd2_rand/eulera_256.png", "euler_a", {}});
}
TEST(Golden, Sd2EulerAV) {
  run_golden(
      {"SD_TEST_SD2_MODEL", "sd2_rand/eulera_256_v.png", "euler_a", sampling::Prediction::V});
}

// SDXL base layout at 512x512, 2 steps (../shared/golden/sdxl_rand/README.md).
TEST(Golden, SdxlEulerA) {
  run_golden({"SD_TEST_SDXL_MODEL", "sdxl_rand/eulera_512.png", "euler_a", {}, 512, 2});
}

}  // namespace
}  // namespace sd::pipeline
