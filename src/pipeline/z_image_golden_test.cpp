// Z-Image end to end against the reference implementation's images of the same random
// model (tests/golden/z_image_tiny: cases.txt lists the flags, README.md how they were
// made). The model's three files come from tools/make_random_z_image.py, found through
// SD_TEST_Z_IMAGE_DIR (scripts/test.sh makes them); the Qwen tokenizer from ../shared.
#include <gtest/gtest.h>

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

struct ZImageCase {
  const char* golden;
  const char* prompt;
  const char* negative = "";
  int64_t seed = 42;
  int width = 128, height = 128;
  int steps = 4;
  float cfg = 1.0f;
  sampling::SampleMethod method = sampling::SampleMethod::Euler;
  std::optional<sampling::Scheduler> scheduler = std::nullopt;
  std::optional<float> flow_shift = std::nullopt;
};

void run_z_image_case(const ZImageCase& c) {
  const char* dir = std::getenv("SD_TEST_Z_IMAGE_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_Z_IMAGE_DIR or ../shared not available";
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/z_image.safetensors";
  options.llm = d + "/qwen3.safetensors";
  options.vae = d + "/ae.safetensors";
  options.llm_tokenizer = shared + "/data/qwen/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  ASSERT_EQ(sd.version(), io::ModelVersion::ZImage);
  ImageRequest r;
  r.prompt = c.prompt;
  r.negative_prompt = c.negative;
  r.seed = c.seed;
  r.steps = c.steps;
  r.width = c.width;
  r.height = c.height;
  r.cfg_scale = c.cfg;
  r.method = c.method;
  r.scheduler = c.scheduler;
  if (c.flow_shift) r.flow_shift = *c.flow_shift;
  const io::Image image = sd.generate(r)[0];

  sd::test::expect_matches_golden(image,
                                  (sd::test::golden_folder("z_image_tiny") / c.golden).string());
}

TEST(GoldenZImage, Euler) {
  run_z_image_case({"euler_128.png", "a photograph of an astronaut riding a horse"});
}

// CFG runs the negative prompt through the same template, as its own pass.
TEST(GoldenZImage, CfgWithANegativePrompt) {
  ZImageCase c{"cfg4_negative_128.png", "a photograph of an astronaut riding a horse"};
  c.negative = "blurry, low quality";
  c.cfg = 4.0f;
  run_z_image_case(c);
}

// Emphasis on the LLM's states, and 60 image tokens padded to 64.
TEST(GoldenZImage, EmphasisAndPaddedImageTokens) {
  ZImageCase c{"emphasis_160x96.png", "a photograph of an (astronaut:1.3) riding a [horse]"};
  c.seed = 7;
  c.width = 160;
  c.height = 96;
  run_z_image_case(c);
}

TEST(GoldenZImage, DpmPlusPlus2mOnTheSimpleScheduleWithShift2) {
  ZImageCase c{"dpmpp2m_simple_shift2_128.png", "a red cube on a table"};
  c.steps = 5;
  c.method = sampling::SampleMethod::Dpmpp2m;
  c.scheduler = sampling::Scheduler::Simple;
  c.flow_shift = 2.0f;
  run_z_image_case(c);
}

}  // namespace
}  // namespace sd::pipeline
