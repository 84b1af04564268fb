// Wan text-to-video and image-to-video end to end against the reference implementation's
// frames of the same random models (tests/golden/wan_tiny: README.md says how they were
// made). The models' files come from tools/make_random_wan.py, found through SD_TEST_WAN_DIR,
// SD_TEST_WAN_I2V_DIR (the I2V transformer and CLIP vision) and SD_TEST_WAN_TI2V_DIR (Wan 2.2
// TI2V-5B's transformer layout and Wan 2.2's autoencoder) and SD_TEST_WAN_VACE_DIR (a Wan
// 2.1 VACE transformer; scripts/test.sh makes all four);
// the tokenizer, a synthetic umT5 stand-in, from ../shared. Wan 2.2 A14B's pair of experts
// is the T2V transformer given twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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
  // Image to video: the first and last frames, in tests/golden/wan_tiny (null: none).
  const char* first = nullptr;
  const char* last = nullptr;
  // Wan 2.2 A14B: the transformer again as the high-noise expert, for this many steps
  // before `steps` (0: no expert), with its own guidance and sampler.
  int high_noise_steps = 0;
  float high_noise_cfg = 7.0f;
  std::optional<sampling::SampleMethod> high_noise_method = std::nullopt;
  // Wan 2.2 TI2V-5B (its transformer and autoencoder; the first and last frames, when
  // given, are pinned in the latent).
  bool ti2v = false;
  // Decoded (and encoded) by the model folder's TAEHV, taehv.safetensors (--tae).
  bool tae = false;
  // Wan 2.1 VACE (SD_TEST_WAN_VACE_DIR's transformer): the control video's frames, a folder
  // in tests/golden/wan_tiny read in name order; `first` is then its reference image.
  const char* control_video = nullptr;
  float vace_strength = 1.0f;
  double min_db = 40.0;
};

void run_wan_case(const WanCase& c) {
  const char* dir = std::getenv("SD_TEST_WAN_DIR");
  const std::string shared = sd::test::shared_dir();
  if (!dir || shared.empty()) GTEST_SKIP() << "SD_TEST_WAN_DIR or ../shared not available";
  const std::string d = dir;
  const char* i2v_dir = std::getenv("SD_TEST_WAN_I2V_DIR");
  const bool i2v = c.first && !c.ti2v && !c.control_video;
  if (i2v && !i2v_dir) GTEST_SKIP() << "SD_TEST_WAN_I2V_DIR not available";
  const char* ti2v_dir = std::getenv("SD_TEST_WAN_TI2V_DIR");
  if (c.ti2v && !ti2v_dir) GTEST_SKIP() << "SD_TEST_WAN_TI2V_DIR not available";
  const char* vace_dir = std::getenv("SD_TEST_WAN_VACE_DIR");
  const bool vace = c.control_video != nullptr;
  if (vace && !vace_dir) GTEST_SKIP() << "SD_TEST_WAN_VACE_DIR not available";
  ModelOptions options;
  options.diffusion_model = (i2v ? std::string(i2v_dir) : d) + "/wan.safetensors";
  if (i2v) options.clip_vision = std::string(i2v_dir) + "/clip_vision.safetensors";
  if (c.high_noise_steps > 0) options.high_noise_diffusion_model = options.diffusion_model;
  options.t5xxl = d + "/umt5.safetensors";
  options.vae = d + "/wan_vae.safetensors";
  if (c.ti2v) {
    options.diffusion_model = std::string(ti2v_dir) + "/wan.gguf";
    options.vae = std::string(ti2v_dir) + "/wan_vae.safetensors";
  }
  if (vace) options.diffusion_model = std::string(vace_dir) + "/wan.gguf";
  if (c.tae) options.taesd = (c.ti2v ? std::string(ti2v_dir) : d) + "/taehv.safetensors";
  options.t5_tokenizer = shared + "/data/t5/tokenizer.json";
  options.threads = 2;
  StableDiffusion sd(options);
  ASSERT_EQ(sd.version(), c.ti2v ? io::ModelVersion::WanTI2V
                          : i2v  ? io::ModelVersion::WanI2V
                          : vace ? io::ModelVersion::WanVace
                                 : io::ModelVersion::Wan);
  ImageRequest r;
  io::Image first, last;
  if (c.first) {
    // Fitted to the size as sd-cli (and the reference's CLI) fit -i and --end-img.
    first =
        io::fit_to_size(io::read_image((sd::test::golden_folder("wan_tiny") / c.first).string()),
                        c.width, c.height);
    r.init_image = &first;
  }
  if (c.last) {
    last = io::fit_to_size(io::read_image((sd::test::golden_folder("wan_tiny") / c.last).string()),
                           c.width, c.height);
    r.end_image = &last;
  }
  std::vector<io::Image> control;
  if (vace) {
    std::vector<std::filesystem::path> files;
    for (const auto& e :
         std::filesystem::directory_iterator(sd::test::golden_folder("wan_tiny") / c.control_video))
      files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      control.push_back(io::fit_to_size(io::read_image(f.string()), c.width, c.height));
    for (const io::Image& frame : control) r.control_frames.push_back(&frame);
    r.vace_strength = c.vace_strength;
  }
  r.prompt = c.prompt;
  r.negative_prompt = c.negative;
  r.seed = c.seed;
  r.steps = c.steps;
  r.width = c.width;
  r.height = c.height;
  r.cfg_scale = c.cfg;
  r.video_frames = c.frames;
  r.high_noise.steps = c.high_noise_steps;
  r.high_noise.cfg_scale = c.high_noise_cfg;
  r.high_noise.method = c.high_noise_method;
  const std::vector<io::Image> frames = sd.generate(r);
  ASSERT_EQ(static_cast<int>(frames.size()), c.frames);
  for (int i = 0; i < c.frames; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "%s_%03d.png", c.golden, i);
    sd::test::expect_matches_golden(frames[static_cast<size_t>(i)],
                                    (sd::test::golden_folder("wan_tiny") / name).string(),
                                    c.min_db);
  }
}

// Wan 2.2 A14B's two experts (one file twice, so the reference's run is cheap): two
// euler_a steps at CFG 3 by the high-noise expert, its latent handed to three euler steps at
// CFG 6 (the noise drawn once, the sampler's RNG running on).
TEST(GoldenWan, TwoExpertsSplitTheSteps) {
  WanCase c{"a14b_cat_5f"};
  c.frames = 5;
  c.steps = 3;
  c.high_noise_steps = 2;
  c.high_noise_cfg = 3.0f;
  c.high_noise_method = sampling::SampleMethod::EulerA;
  run_wan_case(c);
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

// Wan 2.1 I2V (1.3B-shaped, ViT-H CLIP vision): the clip from a first and a last frame,
// both conditioning the latent, the first also through its image tokens.
TEST(GoldenWan, ImageToVideoFromAFirstAndALastFrame) {
  WanCase c{"i2v_fox_13f"};
  c.prompt = "a red fox running through snow";
  c.negative = "blurry, static";
  c.width = 96;
  c.height = 64;
  c.frames = 13;
  c.steps = 3;
  c.cfg = 5.0f;
  c.seed = 7;
  c.first = "i2v_first.png";
  c.last = "i2v_last.png";
  run_wan_case(c);
}

// Wan 2.2 TI2V-5B's layout (its blocks zero, so the velocity is the patch embedding's,
// the time embedding's and the head's; see make_random_wan.py) with Wan 2.2's autoencoder:
// text to video, not square (tokens 3 x 2 per frame), decoded by the 48-channel latent's
// 16x autoencoder.
TEST(GoldenWan, Wan22TextToVideo) {
  WanCase c{"ti2v_cat_5f"};
  c.width = 96;
  c.frames = 5;
  c.steps = 3;
  c.cfg = 1.0f;
  c.ti2v = true;
  run_wan_case(c);
}

// The same from a first and a last frame, each encoded by Wan 2.2's encoder into its latent
// frame and kept there while the frames between are sampled, the transformer taking those
// two at timestep 0.
TEST(GoldenWan, Wan22FromAFirstAndALastFrame) {
  WanCase c{"ti2v_flf_9f"};
  c.prompt = "a red fox running through snow";
  c.frames = 9;
  c.steps = 3;
  c.cfg = 1.0f;
  c.seed = 7;
  c.first = "i2v_first.png";
  c.last = "i2v_last.png";
  c.ti2v = true;
  run_wan_case(c);
}

// The tiny video autoencoder (TAEHV, as taew2_1) decoding a three-latent-frame clip, its
// memory blocks carrying each frame into the next.
TEST(GoldenWan, TinyAutoencoderDecodes) {
  WanCase c{"taehv_cat_9f"};
  c.cfg = 1.0f;
  c.tae = true;
  run_wan_case(c);
}

// Wan 2.2 TI2V-5B with its TAEHV (as taew2_2: 48 channels, 2x2 pixel patches), which also
// encodes the first frame (four copies of it make its latent frame).
TEST(GoldenWan, Wan22TinyAutoencoderFromAFirstFrame) {
  WanCase c{"taehv_ti2v_5f"};
  c.frames = 5;
  c.cfg = 1.0f;
  c.first = "i2v_first.png";
  c.ti2v = true;
  c.tae = true;
  run_wan_case(c);
}

// Wan 2.1 VACE (its main blocks zero, two VACE blocks after blocks 0 and 15; see
// make_random_wan.py): a control video of three frames for a nine-frame clip (grey after
// them), a reference image as a latent frame before the clip, the hints at strength 0.8.
// Held to 50 dB: strength 1 instead of 0.8 is 41-46 dB from these frames.
TEST(GoldenWan, VaceFollowsAControlVideoAndAReferenceImage) {
  WanCase c{"vace_fox_9f"};
  c.prompt = "a red fox running through snow";
  c.negative = "blurry, static";
  c.width = 96;
  c.frames = 9;
  c.steps = 3;
  c.cfg = 5.0f;
  c.seed = 7;
  c.first = "i2v_first.png";
  c.control_video = "vace_control";
  c.vace_strength = 0.8f;
  c.min_db = 50.0;
  run_wan_case(c);
}

}  // namespace
}  // namespace sd::pipeline
