// Wan text-to-video end to end against the reference implementation's frames of the same
// random model (tests/golden/wan_tiny: README.md says how they were made). The model's three
// files come from tools/make_random_wan.py, found through SD_TEST_WAN_DIR (scripts/test.sh
// makes them); the tokenizer, a synthetic umT5 stand-in, from ../shared.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "golden_image.h"
#include "io/image.h"
#include "pipeline/stable_diffusion.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

struct WanCase {
  const char* golden;  // frame i is golden + "_%03d.png"
  const char* prompt = "a lovely cat";
  const char* negative = "";
  int width = 64, height = 64, frames = 9, steps = 2;
  float cfg = 6.0f;
  int64_t seed = 42;
};

void run_wan_case(const WanCase& c) {
  const char* dir = std::getenv("SD_TEST_WAN_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_WAN_DIR or ../shared not available";
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/wan.safetensors";
  options.t5xxl = d + "/umt5.safetensors";
  options.vae = d + "/wan_vae.safetensors";
  options.t5_tokenizer = shared + "/data/t5/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  ASSERT_EQ(sd.version(), io::ModelVersion::Wan);
  ImageRequest r;
  r.prompt = c.prompt;
  r.negative_prompt = c.negative;
  r.seed = c.seed;
  r.steps = c.steps;
  r.width = c.width;
  r.height = c.height;
  r.cfg_scale = c.cfg;
  r.video_frames = c.frames;
  const std::vector<io::Image> frames = sd.generate(r);
  ASSERT_EQ(static_cast<int>(frames.size()), c.frames);
  for (int i = 0; i < c.frames; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "%s_%03d.png", c.golden, i);
    sd::test::expect_matches_golden(frames[static_cast<size_t>(i)],
                                    (sd::test::golden_folder("wan_tiny") / name).string());
  }
}

// Three latent frames: the temporal upsamplers and the clip cache at work.
TEST(GoldenWan, NineFrames) {
  run_wan_case({"cat_9f"});
}

// Four latent frames, not square, more steps, a negative prompt.
TEST(GoldenWan, ThirteenFramesNonSquareWithANegativePrompt) {
  WanCase c{"fox_13f"};
  c.prompt = "a red fox running through snow";
  c.negative = "blurry, static";
  c.width = 96;
  c.height = 64;
  c.frames = 13;
  c.steps = 4;
  c.cfg = 5.0f;
  c.seed = 7;
  run_wan_case(c);
}

}  // namespace
}  // namespace sd::pipeline
