// Wan 2.2 A14B's two experts through the whole pipeline: a tiny high-noise transformer beside
// the tiny Wan model (--high-noise-diffusion-model), its share of the steps, its own
// guidance and sampler, its LoRAs (|high_noise|), and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "io/io_test_util.h"
#include "pipeline/lora_merge_test_util.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "pipeline/tiny_wan_test_util.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::pipeline {
namespace {

int max_abs_diff(const io::Image& a, const io::Image& b) {
  if (a.pixels.size() != b.pixels.size()) return 256;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i)
    worst = std::max(worst, std::abs(int{a.pixels[i]} - int{b.pixels[i]}));
  return worst;
}

class TinyWanA14B : public ::testing::Test {
 protected:
  void SetUp() override {
    static const io::test::TempDir dir;
    static const test::TinyWanFiles files = [] {
      test::TinyWanFiles f = test::write_tiny_wan(dir.file("wan"));
      test::write_tiny_wan_dit(dir.file("wan/high_noise.safetensors"), test::tiny_wan_config(), 61);
      return f;
    }();
    files_ = files;
    high_noise_ = dir.file("wan/high_noise.safetensors");
    temp_ = dir.file("");
    options_.diffusion_model = files_.dit;
    options_.high_noise_diffusion_model = high_noise_;
    options_.t5xxl = files_.umt5;
    options_.vae = files_.vae;
    options_.threads = 2;
    request_.prompt = "a cat";
    request_.width = request_.height = 16;
    request_.steps = 4;
    request_.cfg_scale = 1.0f;
    request_.high_noise.cfg_scale = 1.0f;
    request_.video_frames = 5;
    request_.info = [this](const std::string& line) { info_.push_back(line); };
    const char* env = std::getenv("SD_UMT5_TOKENIZER");
    saved_env_ = env ? env : "";
    unsetenv("SD_UMT5_TOKENIZER");
  }
  void TearDown() override {
    if (!saved_env_.empty()) setenv("SD_UMT5_TOKENIZER", saved_env_.c_str(), 1);
  }
  static std::vector<uint8_t> last_frame(const std::vector<io::Image>& clip) {
    return clip.back().pixels;
  }
  static std::string open_error(const ModelOptions& o) {
    try {
      StableDiffusion sd(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  test::TinyWanFiles files_;
  std::string high_noise_, temp_, saved_env_;
  std::vector<std::string> info_;
  ModelOptions options_;
  ImageRequest request_;
};

// Two copies of one network take turns without a seam: the latent is handed on, nothing is
// re-noised, and the sampler's RNG runs on (euler_a draws every step).
TEST_F(TinyWanA14B, TheSplitHandsTheLatentOn) {
  ModelOptions single = options_;
  single.high_noise_diffusion_model.clear();
  request_.method = request_.high_noise.method = sampling::SampleMethod::EulerA;
  const std::vector<io::Image> whole = StableDiffusion(single).generate(request_);
  ModelOptions twice = options_;
  twice.high_noise_diffusion_model = files_.dit;
  StableDiffusion sd(twice);
  EXPECT_TRUE(sd.has_high_noise_expert());
  request_.high_noise.moe_boundary = 0.5f;  // the expert takes some steps, not all
  const std::vector<io::Image> split = sd.generate(request_);
  bool said = false;
  for (const std::string& line : info_)
    said |= line.find("high-noise expert: ") != std::string::npos &&
            line.find("of 4 steps") != std::string::npos;
  EXPECT_TRUE(said);
  ASSERT_EQ(split.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_LE(max_abs_diff(split[i], whole[i]), 1) << "frame " << i;
}

TEST_F(TinyWanA14B, TheExpertSamplesTheNoisySteps) {
#if SD_TEST_ASAN
  // Five clips of the paths TheSplitHandsTheLatentOn runs under the sanitizers already.
  GTEST_SKIP() << "runs in the Release pass";
#endif
  ModelOptions single = options_;
  single.high_noise_diffusion_model.clear();
  const std::vector<uint8_t> main_alone = last_frame(StableDiffusion(single).generate(request_));
  StableDiffusion sd(options_);
  // A boundary no sigma is below (sd.cpp's rule): the main network alone.
  ImageRequest r = request_;
  r.high_noise.moe_boundary = 0.0f;
  EXPECT_EQ(last_frame(sd.generate(r)), main_alone);
  // The default boundary gives the expert the first steps: another clip.
  const std::vector<uint8_t> both = last_frame(sd.generate(request_));
  EXPECT_NE(both, main_alone);
  // Given as a count, the expert's steps come on top of --steps, with its own guidance.
  r = request_;
  r.high_noise.steps = 2;
  const std::vector<uint8_t> counted = last_frame(sd.generate(r));
  EXPECT_NE(counted, both);
  r.high_noise.cfg_scale = 4.0f;
  EXPECT_NE(last_frame(sd.generate(r)), counted);
}

// A LoRA marked |high_noise| changes the expert's weights (not the main network's): the
// clip is the one of an expert with the LoRA merged by hand; unmarked, it goes to the main.
TEST_F(TinyWanA14B, HighNoiseLorasChangeTheExpert) {
  test::DitWeights w = test::read_dit_weights(high_noise_);
  const std::string lora = temp_ + "/expert_lora.safetensors";
  const std::string merged = temp_ + "/expert_merged.safetensors";
  test::write_lora_and_merged(w,
                              {{"diffusion_model.blocks.0.self_attn.q.lora_down.weight",
                                "diffusion_model.blocks.0.self_attn.q.lora_up.weight",
                                "blocks.0.self_attn.q", 0, test::tiny_wan_config().dim}},
                              1.0f, 0.5f, lora, merged);
  ModelOptions by_hand = options_;
  by_hand.high_noise_diffusion_model = merged;
  const std::vector<io::Image> want = StableDiffusion(by_hand).generate(request_);
  StableDiffusion sd(options_);
  const std::vector<uint8_t> plain = last_frame(sd.generate(request_));
  ImageRequest r = request_;
  r.loras.push_back({lora, 1.0f, /*high_noise=*/true});
  const std::vector<io::Image> got = sd.generate(r);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(max_abs_diff(got[i], want[i]), 2) << "frame " << i;
  EXPECT_NE(got.back().pixels, plain);
  r.loras.back().high_noise = false;  // now the main network's
  const std::vector<uint8_t> on_main = last_frame(sd.generate(r));
  EXPECT_NE(on_main, plain);
  EXPECT_NE(on_main, got.back().pixels);
}

// Weights kept on disk: the expert's are read for its steps and freed before the main
// network's are read; the clip is the same.
TEST_F(TinyWanA14B, OnDiskTheExpertsTakeTurnsInMemory) {
#if SD_TEST_ASAN
  GTEST_SKIP() << "runs in the Release pass (residency's own tests run under the sanitizers)";
#endif
  const std::vector<uint8_t> in_memory = last_frame(StableDiffusion(options_).generate(request_));
  ModelOptions disk = options_;
  disk.params_backend = "disk";
  StableDiffusion sd(disk);
  EXPECT_EQ(last_frame(sd.generate(request_)), in_memory);
  EXPECT_EQ(sd.resident_weight_bytes(), 0u);
}

TEST_F(TinyWanA14B, RefusesWhatDoesNotFit) {
  // A LoRA for an expert the model does not have.
  ModelOptions single = options_;
  single.high_noise_diffusion_model.clear();
  StableDiffusion sd(single);
  EXPECT_FALSE(sd.has_high_noise_expert());
  ImageRequest r = request_;
  r.loras.push_back({temp_ + "/none.safetensors", 1.0f, true});
  try {
    sd.check(r);
    ADD_FAILURE() << "a |high_noise| LoRA without an expert was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--high-noise-diffusion-model"), std::string::npos)
        << e.what();
  }
  // A boundary outside [0, 1].
  StableDiffusion two(options_);
  r = request_;
  r.high_noise.moe_boundary = 1.5f;
  EXPECT_THROW(two.check(r), Error);
  // An expert file that holds no Wan transformer, and one of another shape.
  ModelOptions o = options_;
  o.high_noise_diffusion_model = files_.vae;
  EXPECT_NE(open_error(o).find("holds no Wan transformer"), std::string::npos) << open_error(o);
  const std::string i2v = temp_ + "/i2v_expert.safetensors";
  models::WanConfig wc = test::tiny_wan_config();
  wc.in_channels = 36;
  test::write_tiny_wan_dit(i2v, wc, 62);
  o.high_noise_diffusion_model = i2v;
  EXPECT_NE(open_error(o).find("does not match the --diffusion-model one"), std::string::npos)
      << open_error(o);
  // A model of another family with an expert.
  o = ModelOptions{};
  o.architecture = test::tiny_architecture();
  o.model = test::write_tiny_checkpoint(*o.architecture);
  o.high_noise_diffusion_model = high_noise_;
  EXPECT_NE(open_error(o).find("--high-noise-diffusion-model"), std::string::npos) << open_error(o);
}

}  // namespace
}  // namespace sd::pipeline
