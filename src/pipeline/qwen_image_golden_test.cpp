// Qwen-Image end to end against the reference implementation's images of the same random
// model (tests/golden/qwen_image_tiny: cases.txt lists the flags, README.md how they were made).
// The model's three files come from tools/make_random_qwen_image.py, found through
// SD_TEST_QWEN_IMAGE_DIR (scripts/test.sh makes them); the Qwen tokenizer from ../shared.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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
  const char* init = nullptr;          // a file of the golden folder, as -i
  std::vector<const char*> refs = {};  // files of the golden folder, as -r (Qwen-Image-Edit)
  bool vision = true;                  // with the vision tower (--llm_vision) where refs are given
  // The tower in Hugging Face's names (fused q/k/v, the Conv3d kernel) instead of the mmproj.
  bool hf_tower = false;
  const char* model_args = "";
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
  if (!c.refs.empty() && c.vision) {
    options.llm_vision =
        d + (c.hf_tower ? "/qwen2_5_vl_visual.safetensors" : "/qwen2_5_vl_mmproj.gguf");
    if (!std::filesystem::exists(options.llm_vision))
      GTEST_SKIP() << options.llm_vision << " not made (--vision-layers)";
  }
  options.model_args = c.model_args;
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
  std::vector<io::Image> refs;
  for (const char* ref : c.refs)
    refs.push_back(io::read_image((sd::test::golden_folder("qwen_image_tiny") / ref).string()));
  for (const io::Image& ref : refs) r.ref_images.push_back(&ref);
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

// Qwen-Image-Edit: the reference image seen by the vision tower (in the edit template) and
// joining the transformer's tokens.
TEST(GoldenQwenImage, EditWithTheVisionTower) {
  QwenImageCase c{"edit_128.png"};
  c.prompt = "make the horse blue";
  c.refs = {"euler_128.png"};
  run_qwen_image_case(c);
}

// The same tower in a checkpoint's visual.* names: split and stacked when read, the same
// image.
TEST(GoldenQwenImage, EditWithTheTowerInHuggingFaceNames) {
  QwenImageCase c{"edit_128.png"};
  c.prompt = "make the horse blue";
  c.refs = {"euler_128.png"};
  c.hf_tower = true;
  run_qwen_image_case(c);
}

// Two references of other sizes than the output: each sized for the tower (504x308 and
// 392x392, so windows of 2 and 3 groups at the edges) and numbered 1, 2 in both models.
TEST(GoldenQwenImage, EditWithTwoReferences) {
  QwenImageCase c{"edit_two_refs_160x96.png"};
  c.prompt = "put the astronaut on the red cube";
  c.width = 160;
  c.height = 96;
  c.refs = {"euler_128.png", "size_160x96.png"};
  run_qwen_image_case(c);
}

// Qwen-Image-Edit-2511's switch: the reference tokens modulated at timestep 0.
TEST(GoldenQwenImage, EditWithZeroConditionTimestep) {
  QwenImageCase c{"edit_zero_cond_t_128.png"};
  c.prompt = "make the cube green";
  c.refs = {"other_prompt_128.png"};
  c.model_args = "qwen_image_zero_cond_t=true";
  run_qwen_image_case(c);
}

// Without a vision tower the references reach the transformer only, as in the reference.
TEST(GoldenQwenImage, EditWithoutTheVisionTower) {
  QwenImageCase c{"edit_without_vision_128.png"};
  c.prompt = "make the horse blue";
  c.refs = {"euler_128.png"};
  c.vision = false;
  run_qwen_image_case(c);
}

}  // namespace
}  // namespace sd::pipeline
