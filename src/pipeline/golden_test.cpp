// End-to-end comparison with the reference implementation's outputs in
// ../shared/golden: the same random-weight checkpoint, flags and seed must give the same
// image (PSNR >= 40 dB). The checkpoints are 2-7 GB, made by ../shared/tools/make_random_sd.py;
// tests find them through SD_TEST_SD15_MODEL / SD_TEST_SD2_MODEL / SD_TEST_SDXL_MODEL and
// skip without them. The tiny FLUX.1 (../shared/tools/make_random_flux.py --seed 1, four
// files) is found through SD_TEST_FLUX_DIR; the tiny SD3 (tools/make_random_sd3.py --split
// --seed 1, five files, and --variant sd3.5m --attn2 13 for the SD3.5 Medium transformer)
// through SD_TEST_SD3_DIR, its golden images in ../shared/golden/sd3_tiny/ (cases.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "golden_image.h"
#include "io/image.h"
#include "pipeline/stable_diffusion.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

struct GoldenCase {
  const char* model_env;
  const char* golden;  // under ../shared/golden
  const char* sampler;
  std::optional<sampling::Prediction> prediction;
  int size = 256;
  int steps = 4;
};

void expect_golden(const io::Image& image, const std::string& golden) {
  sd::test::expect_matches_golden(image, sd::test::shared_dir() + "/golden/" + golden);
}

void run_golden(const GoldenCase& g) {
  const char* model = std::getenv(g.model_env);
  const std::string shared = sd::test::shared_dir();
  if (!model || shared.empty()) GTEST_SKIP() << g.model_env << " or ../shared not available";
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
  expect_golden(images[0], g.golden);
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

// FLUX.1 dev as four files (../shared/golden/flux_tiny/cases.txt): euler on the flux
// schedule, distilled guidance 3.5, no CFG; T5 reads the synthetic vocabulary.
TEST(Golden, FluxDevEuler) {
  const char* dir = std::getenv("SD_TEST_FLUX_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_FLUX_DIR or ../shared not available";
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/flux_dit.safetensors";
  options.clip_l = d + "/clip_l.safetensors";
  options.t5xxl = d + "/t5xxl.safetensors";
  options.vae = d + "/ae.safetensors";
  options.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
  options.t5_tokenizer = shared + "/data/t5/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  EXPECT_EQ(sd.version(), io::ModelVersion::Flux);
  EXPECT_EQ(sd.default_scheduler(sampling::SampleMethod::Euler), sampling::Scheduler::Flux);
  ImageRequest r;
  r.prompt = "a photograph of an astronaut riding a horse";
  r.seed = 42;
  r.steps = 4;
  r.width = r.height = 256;
  r.cfg_scale = 1.0f;
  r.guidance = 3.5f;
  r.method = sampling::SampleMethod::Euler;
  std::vector<io::Image> images = sd.generate(r);
  ASSERT_EQ(images.size(), 1u);
  expect_golden(images[0], "flux_tiny/euler_256.png");
}

// SD3 Medium and SD3.5 Medium as separate files, 128x128, euler, 4 steps, CFG 4.5:
// sd-cli --diffusion-model DIR/<dit> --clip_l DIR/clip_l.safetensors --clip_g
// DIR/clip_g.safetensors [--t5xxl DIR/t5xxl.safetensors] --vae DIR/vae.safetensors -p PROMPT
// -s 42 --steps 4 -W 128 -H 128 --cfg-scale 4.5 [--slg-scale 2.5 --skip-layer-end 0.5].
// SD3 runs without T5 on the astronaut prompt; SD3.5 Medium with T5 on the empty prompt,
// whose T5 ids (</s>, then <pad>) do not depend on the T5 vocabulary the reference embeds.
struct Sd3Case {
  const char* dit;
  const char* golden;
  const char* prompt;
  bool t5;
  float slg_scale;
};

void run_sd3_golden(const Sd3Case& g) {
  const char* dir = std::getenv("SD_TEST_SD3_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_SD3_DIR or ../shared not available";
  if (!std::filesystem::exists(shared + "/golden/" + g.golden))
    GTEST_SKIP() << "no golden image " << g.golden;
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/" + g.dit;
  options.clip_l = d + "/clip_l.safetensors";
  options.clip_g = d + "/clip_g.safetensors";
  if (g.t5) options.t5xxl = d + "/t5xxl.safetensors";
  options.vae = d + "/vae.safetensors";
  options.clip_vocab = shared + "/data/clip/bpe_simple_vocab_16e6.txt.gz";
  options.t5_tokenizer = shared + "/data/t5/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  ImageRequest r;
  r.prompt = g.prompt;
  r.seed = 42;
  r.steps = 4;
  r.width = r.height = 128;
  r.cfg_scale = 4.5f;
  r.skip_layer.scale = g.slg_scale;
  r.skip_layer.end = 0.5f;
  std::vector<io::Image> images = sd.generate(r);
  ASSERT_EQ(images.size(), 1u);
  expect_golden(images[0], g.golden);
}

TEST(Golden, Sd3MediumEulerWithoutT5) {
  run_sd3_golden({"diffusion.safetensors", "sd3_tiny/euler_128_no_t5.png",
                  "a photograph of an astronaut riding a horse", false, 0.0f});
}

TEST(Golden, Sd35MediumSkipLayerGuidance) {
  run_sd3_golden(
      {"sd35m_diffusion.safetensors", "sd3_tiny/sd35m_slg_128_empty_prompt.png", "", true, 2.5f});
}

}  // namespace
}  // namespace sd::pipeline
