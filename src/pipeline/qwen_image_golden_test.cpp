// Qwen-Image end to end against the reference implementation's images of the same random
// model (tests/golden/qwen_image_tiny: cases.txt lists the flags, README.md how they were made).
// The model's three files come from tools/make_random_qwen_image.py, found through
// SD_TEST_QWEN_IMAGE_DIR (scripts/test.sh makes them); the Qwen tokenizer from ../shared.
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

struct QwenImageCase {
  const char* golden;
  const char* prompt = "a photograph of an astronaut riding a horse";
  const char* negative = "";
  int width = 128, height = 128;
  int steps = 8;
  float cfg = 2.5f;
  const char* init = nullptr;  // a file of the golden folder, as -i
};

void run_qwen_image_case(const QwenImageCase& c) {
  const char* dir = std::getenv("SD_TEST_QWEN_IMAGE_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_QWEN_IMAGE_DIR or ../shared not available";
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/qwen_image.safetensors";
  options.llm = d + "/qwen2_5_vl.safetensors";
  options.vae = d + "/qwen_image_vae.safetensors";
  options.llm_tokenizer = shared + "/data/qwen/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  ASSERT_EQ(sd.version(), io::ModelVersion::QwenImage);
  ImageRequest r;
  r.prompt = c.prompt;
  r.negative_prompt = c.negative;
  r.seed = 42;
  r.steps = c.steps;
  r.width = c.width;
  r.height = c.height;
  r.cfg_scale = c.cfg;
  io::Image init;
  if (c.init) {
    init = io::read_image((sd::test::golden_folder("qwen_image_tiny") / c.init).string());
    r.init_image = &init;
    r.strength = 0.6f;
  }
  const io::Image image = sd.generate(r)[0];

  sd::test::expect_matches_golden(image,
                                  (sd::test::golden_folder("qwen_image_tiny") / c.golden).string());
}

// The reference's documented setting: 8 euler steps here, CFG 2.5 (a negative-prompt pass).
TEST(GoldenQwenImage, Euler) {
  run_qwen_image_case({"euler_128.png"});
}

TEST(GoldenQwenImage, CfgWithANegativePrompt) {
  QwenImageCase c{"cfg4_negative_128.png"};
  c.negative = "blurry, low quality";
  c.cfg = 4.0f;
  run_qwen_image_case(c);
}

TEST(GoldenQwenImage, NonSquare) {
  QwenImageCase c{"size_160x96.png"};
  c.width = 160;
  c.height = 96;
  run_qwen_image_case(c);
}

TEST(GoldenQwenImage, AnotherPrompt) {
  QwenImageCase c{"other_prompt_128.png"};
  c.prompt = "a red cube on a table";
  run_qwen_image_case(c);
}

// Image to image: the init image through the Wan autoencoder's encoder.
TEST(GoldenQwenImage, ImageToImage) {
  QwenImageCase c{"img2img_strength06_128.png"};
  c.init = "euler_128.png";
  run_qwen_image_case(c);
}

}  // namespace
}  // namespace sd::pipeline
