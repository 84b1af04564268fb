// FLUX.2 klein end to end against the reference implementation's images of the same random
// model (tests/golden/flux2_tiny: cases.txt lists the flags, README.md how they were made).
// The model's three files come from tools/make_random_flux2.py, found through
// SD_TEST_FLUX2_DIR (scripts/test.sh makes them); the Qwen tokenizer from ../shared.
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

struct Flux2Case {
  const char* golden;
  const char* prompt = "a photograph of an astronaut riding a horse";
  const char* negative = "";
  int width = 128, height = 128;
  int steps = 4;
  float cfg = 1.0f;
  const char* reference = nullptr;  // a file of the golden folder, as -r
};

void run_flux2_case(const Flux2Case& c) {
  const char* dir = std::getenv("SD_TEST_FLUX2_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_FLUX2_DIR or ../shared not available";
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/flux2_klein.safetensors";
  options.llm = d + "/qwen3.safetensors";
  options.vae = d + "/ae.safetensors";
  options.llm_tokenizer = shared + "/data/qwen/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  ASSERT_EQ(sd.version(), io::ModelVersion::Flux2Klein);
  ImageRequest r;
  r.prompt = c.prompt;
  r.negative_prompt = c.negative;
  r.seed = 42;
  r.steps = c.steps;
  r.width = c.width;
  r.height = c.height;
  r.cfg_scale = c.cfg;
  io::Image reference;
  if (c.reference) {
    reference = io::read_image((sd::test::golden_folder("flux2_tiny") / c.reference).string());
    r.ref_images = {&reference};
  }
  const io::Image image = sd.generate(r)[0];

  sd::test::expect_matches_golden(image,
                                  (sd::test::golden_folder("flux2_tiny") / c.golden).string());
}

// klein's distilled setting: 4 euler steps on the FLUX.2 schedule, no guidance pass.
TEST(GoldenFlux2, Euler) {
  run_flux2_case({"euler_128.png"});
}

// CFG runs the negative prompt through the same template and padding, as its own pass.
TEST(GoldenFlux2, CfgWithANegativePrompt) {
  Flux2Case c{"cfg4_negative_128.png"};
  c.negative = "blurry, low quality";
  c.cfg = 4.0f;
  run_flux2_case(c);
}

TEST(GoldenFlux2, NonSquare) {
  Flux2Case c{"size_160x96.png"};
  c.width = 160;
  c.height = 96;
  run_flux2_case(c);
}

TEST(GoldenFlux2, AnotherPrompt) {
  Flux2Case c{"other_prompt_128.png"};
  c.prompt = "a red cube on a table";
  run_flux2_case(c);
}

// klein base's setting: 20 steps with guidance 4.
TEST(GoldenFlux2, TwentyStepsWithGuidance) {
  Flux2Case c{"base_20steps_cfg4_128.png"};
  c.steps = 20;
  c.cfg = 4.0f;
  run_flux2_case(c);
}

// A reference image, encoded and appended to the image tokens at image index 10.
TEST(GoldenFlux2, ReferenceImage) {
  Flux2Case c{"reference_image_128.png"};
  c.reference = "euler_128.png";
  run_flux2_case(c);
}

}  // namespace
}  // namespace sd::pipeline
