// FLUX.2 dev end to end against the reference implementation's images of the same random
// model (tests/golden/flux2_dev_tiny: cases.txt lists the flags, README.md how they were
// made). The model's files come from tools/make_random_flux2_dev.py, found through
// SD_TEST_FLUX2_DEV_DIR (scripts/test.sh makes them): the transformer, Mistral as llama.cpp
// writes it into GGUF (its q/k rows in llama.cpp's rotary layout) carrying the synthetic
// tokenizer, and the autoencoder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "golden_image.h"
#include "io/image.h"
#include "pipeline/stable_diffusion.h"

namespace sd::pipeline {
namespace {

struct Flux2DevCase {
  const char* golden;
  const char* prompt = "a photograph of an astronaut riding a horse";
  int width = 128, height = 128;
  int steps = 4;
  float guidance = 3.5f;
  const char* reference = nullptr;  // a file of the golden folder, as -r
};

void run_flux2_dev_case(const Flux2DevCase& c) {
  const char* dir = std::getenv("SD_TEST_FLUX2_DEV_DIR");
  if (!dir) GTEST_SKIP() << "SD_TEST_FLUX2_DEV_DIR not set";
  const std::string d = dir;
  ModelOptions options;
  options.diffusion_model = d + "/flux2_dev.safetensors";
  options.llm = d + "/mistral.gguf";
  options.vae = d + "/ae.safetensors";
  options.threads = 2;
  StableDiffusion sd(options);
  ASSERT_EQ(sd.version(), io::ModelVersion::Flux2);
  ImageRequest r;
  r.prompt = c.prompt;
  r.seed = 42;
  r.steps = c.steps;
  r.width = c.width;
  r.height = c.height;
  r.cfg_scale = 1.0f;
  r.guidance = c.guidance;
  io::Image reference;
  if (c.reference) {
    reference = io::read_image((sd::test::golden_folder("flux2_dev_tiny") / c.reference).string());
    r.ref_images = {&reference};
  }
  const io::Image image = sd.generate(r)[0];

  sd::test::expect_matches_golden(image,
                                  (sd::test::golden_folder("flux2_dev_tiny") / c.golden).string());
}

TEST(GoldenFlux2Dev, Euler) {
  run_flux2_dev_case({"euler_128.png"});
}

TEST(GoldenFlux2Dev, AnotherGuidance) {
  Flux2DevCase c{"guidance_6_128.png"};
  c.guidance = 6.0f;
  run_flux2_dev_case(c);
}

TEST(GoldenFlux2Dev, NonSquare) {
  Flux2DevCase c{"size_160x96.png"};
  c.width = 160;
  c.height = 96;
  run_flux2_dev_case(c);
}

TEST(GoldenFlux2Dev, ReferenceImage) {
  Flux2DevCase c{"reference_image_128.png"};
  c.reference = "euler_128.png";
  run_flux2_dev_case(c);
}

}  // namespace
}  // namespace sd::pipeline
