// The C API's video entry points on a tiny Wan: generate_video hands back the clip's frames
// as sd.cpp's does, sd_ctx_supports_video_generation tells video models from image models,
// and what this build cannot do yet is refused through the log, never by crashing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "pipeline/tiny_wan_test_util.h"
#include "pipeline/tiny_z_image_test_util.h"
#include "stable-diffusion.h"

namespace {

std::vector<std::string>* g_log = nullptr;
void remember(sd_log_level_t level, const char* text, void*) {
  if (g_log && level == SD_LOG_ERROR) g_log->push_back(text);
}

// A context of a tiny Wan's files (null when it fails to load).
sd_ctx_t* open_tiny_wan(const sd::pipeline::test::TinyWanFiles& f,
                        const std::string& clip_vision = "") {
  sd_ctx_params_t p;
  sd_ctx_params_init(&p);
  p.diffusion_model_path = f.dit.c_str();
  p.t5xxl_path = f.umt5.c_str();
  p.vae_path = f.vae.c_str();
  if (!clip_vision.empty()) p.clip_vision_path = clip_vision.c_str();
  p.n_threads = 2;
  return new_sd_ctx(&p);
}

// The small clip the tests ask for: 16x16, five frames, two steps.
sd_vid_gen_params_t tiny_clip_params() {
  sd_vid_gen_params_t v;
  sd_vid_gen_params_init(&v);
  v.prompt = "a cat";
  v.width = v.height = 16;
  v.sample_params.sample_steps = 2;
  v.seed = 42;
  v.video_frames = 5;
  return v;
}

// Generates the clip, expecting its five frames; returns the last one's pixels.
std::vector<uint8_t> last_frame_of(sd_ctx_t* ctx, const sd_vid_gen_params_t& v) {
  sd_image_t* frames = nullptr;
  int count = 0;
  EXPECT_TRUE(generate_video(ctx, &v, &frames, &count, nullptr));
  std::vector<uint8_t> last;
  if (count == 5) last.assign(frames[4].data, frames[4].data + 16 * 16 * 3);
  EXPECT_EQ(count, 5);
  free_sd_images(frames, count);
  return last;
}

class VideoApi : public ::testing::Test {
 protected:
  void SetUp() override {
    static const sd::io::test::TempDir dir;
    static const sd::pipeline::test::TinyWanFiles files =
        sd::pipeline::test::write_tiny_wan(dir.file("wan"));
    files_ = files;
    g_log = &errors_;
    sd_set_log_callback(remember, nullptr);
    ctx_ = open_tiny_wan(files_);
    ASSERT_NE(ctx_, nullptr);
    params_ = tiny_clip_params();
  }
  void TearDown() override {
    free_sd_ctx(ctx_);
    sd_set_log_callback(nullptr, nullptr);
    g_log = nullptr;
  }

  sd::pipeline::test::TinyWanFiles files_;
  std::vector<std::string> errors_;
  sd_ctx_t* ctx_ = nullptr;
  sd_vid_gen_params_t params_;
};

TEST_F(VideoApi, GeneratesTheClipsFrames) {
  EXPECT_TRUE(sd_ctx_supports_video_generation(ctx_));
  sd_image_t* frames = nullptr;
  int count = 0;
  sd_audio_t* audio = reinterpret_cast<sd_audio_t*>(0x1);
  ASSERT_TRUE(generate_video(ctx_, &params_, &frames, &count, &audio)) << errors_.at(0);
  EXPECT_EQ(audio, nullptr);  // no model of this build makes sound
  ASSERT_EQ(count, 5);
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(frames[i].width, 16u);
    EXPECT_EQ(frames[i].height, 16u);
    EXPECT_EQ(frames[i].channel, 3u);
    EXPECT_NE(frames[i].data, nullptr);
  }
  free_sd_images(frames, count);
}

// sd_vid_gen_params_check: what generate_video would refuse, said without running it.
TEST_F(VideoApi, ChecksARequestBeforeRunningIt) {
  auto take = [](char* text) {
    std::string s = text ? text : "";
    std::free(text);
    return s;
  };
  EXPECT_EQ(take(sd_vid_gen_params_check(ctx_, &params_)), "");
  std::vector<uint8_t> pixels(16 * 16 * 3, 100);
  params_.init_image = {16, 16, 3, pixels.data()};
  EXPECT_NE(take(sd_vid_gen_params_check(ctx_, &params_)).find("image-to-video"),
            std::string::npos);
  params_.init_image = {0, 0, 0, nullptr};
  params_.control_frames = &params_.init_image;
  params_.control_frames_size = 1;
  EXPECT_NE(take(sd_vid_gen_params_check(ctx_, &params_)).find("control frame 1"),
            std::string::npos);
  params_.control_frames = nullptr;
  params_.control_frames_size = 0;
  params_.video_frames = 5000;
  EXPECT_NE(take(sd_vid_gen_params_check(ctx_, &params_)).find("--video-frames"),
            std::string::npos);
  EXPECT_NE(take(sd_vid_gen_params_check(nullptr, &params_)).find("no model context"),
            std::string::npos);
  EXPECT_NE(take(sd_vid_gen_params_check(ctx_, nullptr)).find("missing"), std::string::npos);
  EXPECT_TRUE(errors_.empty());  // a check logs nothing
}

TEST_F(VideoApi, RefusesWhatItCannotDoYet) {
  std::vector<uint8_t> pixels(16 * 16 * 3, 100);
  params_.init_image = {16, 16, 3, pixels.data()};
  sd_image_t* frames = reinterpret_cast<sd_image_t*>(0x1);
  int count = 7;
  EXPECT_FALSE(generate_video(ctx_, &params_, &frames, &count, nullptr));
  EXPECT_EQ(frames, nullptr);
  EXPECT_EQ(count, 0);
  ASSERT_FALSE(errors_.empty());
  EXPECT_NE(errors_.back().find("image-to-video"), std::string::npos) << errors_.back();
  // Missing arguments fail cleanly.
  EXPECT_FALSE(generate_video(nullptr, &params_, &frames, &count, nullptr));
  EXPECT_FALSE(generate_video(ctx_, nullptr, &frames, &count, nullptr));
}

// Image to video: the first frame (init_image) and the last (end_image) of an FLF2V model,
// with its CLIP vision file.
TEST(VideoApiImageToVideo, TakesTheFirstAndLastFrames) {
  static const sd::io::test::TempDir dir;
  const sd::pipeline::test::TinyWanI2VFiles f = sd::pipeline::test::write_tiny_wan_i2v(
      dir.file("flf2v"), sd::pipeline::test::TinyWanI2VKind::Flf2v);
  sd_ctx_t* ctx = open_tiny_wan(f.base, f.clip_vision);
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(sd_ctx_supports_video_generation(ctx));
  sd_vid_gen_params_t v = tiny_clip_params();
  std::vector<uint8_t> first(16 * 16 * 3), last(16 * 16 * 3);
  for (size_t i = 0; i < first.size(); ++i) {
    first[i] = static_cast<uint8_t>(i * 7);
    last[i] = static_cast<uint8_t>(255 - i * 3);
  }
  v.init_image = {16, 16, 3, first.data()};
  v.end_image = {16, 16, 3, last.data()};
  const std::vector<uint8_t> a = last_frame_of(ctx, v);
  std::vector<uint8_t> other(16 * 16 * 3, 30);
  v.end_image = {16, 16, 3, other.data()};
  EXPECT_NE(last_frame_of(ctx, v), a);
  // Without the first frame: refused.
  v.init_image = {0, 0, 0, nullptr};
  sd_image_t* frames = nullptr;
  int count = 0;
  EXPECT_FALSE(generate_video(ctx, &v, &frames, &count, nullptr));
  free_sd_ctx(ctx);
}

// VACE: control_frames (the control video) and vace_strength are read; a count without
// frames, and control frames for a model without VACE blocks, are refused.
TEST(VideoApiVace, TakesAControlVideo) {
  static const sd::io::test::TempDir dir;
  const sd::pipeline::test::TinyWanFiles f =
      sd::pipeline::test::write_tiny_wan_vace(dir.file("vace"));
  sd_ctx_t* ctx = open_tiny_wan(f);
  ASSERT_NE(ctx, nullptr);
  sd_vid_gen_params_t v = tiny_clip_params();
  std::vector<std::vector<uint8_t>> pixels;
  for (int k = 0; k < 3; ++k) {
    pixels.emplace_back(16 * 16 * 3);
    for (size_t i = 0; i < pixels.back().size(); ++i)
      pixels.back()[i] = static_cast<uint8_t>(i * (5 + 2 * k));
  }
  std::vector<sd_image_t> control;
  for (auto& px : pixels) control.push_back({16, 16, 3, px.data()});
  v.control_frames = control.data();
  v.control_frames_size = 3;
  const std::vector<uint8_t> a = last_frame_of(ctx, v);
  v.vace_strength = 0.3f;
  EXPECT_NE(last_frame_of(ctx, v), a);
  v.control_frames = nullptr;
  char* problem = sd_vid_gen_params_check(ctx, &v);
  ASSERT_NE(problem, nullptr);
  EXPECT_NE(std::string(problem).find("control_frames_size"), std::string::npos) << problem;
  std::free(problem);
  free_sd_ctx(ctx);
}

// Wan 2.2 A14B: the high-noise expert's file, its sampling parameters and the boundary are
// read; the expert's steps change the clip, and its LoRAs need the expert.
TEST_F(VideoApi, RunsAHighNoiseExpert) {
  static const sd::io::test::TempDir dir;
  const std::string expert = dir.file("high_noise.safetensors");
  sd::pipeline::test::write_tiny_wan_dit(expert, sd::pipeline::test::tiny_wan_config(), 71);
  sd_ctx_params_t p;
  sd_ctx_params_init(&p);
  p.diffusion_model_path = files_.dit.c_str();
  p.high_noise_diffusion_model_path = expert.c_str();
  p.t5xxl_path = files_.umt5.c_str();
  p.vae_path = files_.vae.c_str();
  p.n_threads = 2;
  sd_ctx_t* ctx = new_sd_ctx(&p);
  ASSERT_NE(ctx, nullptr) << (errors_.empty() ? "" : errors_.back());
  auto last_frame = [&](sd_ctx_t* c) {
    sd_image_t* frames = nullptr;
    int count = 0;
    EXPECT_TRUE(generate_video(c, &params_, &frames, &count, nullptr));
    std::vector<uint8_t> last;
    if (count == 5) last.assign(frames[4].data, frames[4].data + 16 * 16 * 3);
    free_sd_images(frames, count);
    return last;
  };
  const std::vector<uint8_t> main_alone = last_frame(ctx_);
  params_.moe_boundary = 0.0f;  // no step for the expert
  EXPECT_EQ(last_frame(ctx), main_alone);
  params_.moe_boundary = 0.875f;
  params_.high_noise_sample_params.sample_steps = 1;
  const std::vector<uint8_t> one = last_frame(ctx);
  EXPECT_NE(one, main_alone);
  params_.high_noise_sample_params.guidance.txt_cfg = 3.0f;
  EXPECT_NE(last_frame(ctx), one);
  // A |high_noise| LoRA on a model without the expert is refused, naming the flag.
  const sd_lora_t lora{true, 1.0f, expert.c_str()};
  params_.loras = &lora;
  params_.lora_count = 1;
  sd_image_t* frames = nullptr;
  int count = 0;
  EXPECT_FALSE(generate_video(ctx_, &params_, &frames, &count, nullptr));
  ASSERT_FALSE(errors_.empty());
  EXPECT_NE(errors_.back().find("--high-noise-diffusion-model"), std::string::npos)
      << errors_.back();
  free_sd_ctx(ctx);
}

TEST(VideoApiImageModel, SaysItMakesNoVideo) {
  static const sd::io::test::TempDir dir;
  const sd::pipeline::test::TinyZImageFiles f =
      sd::pipeline::test::write_tiny_z_image(dir.file("z"));
  sd_ctx_params_t p;
  sd_ctx_params_init(&p);
  p.diffusion_model_path = f.dit.c_str();
  p.llm_path = f.llm.c_str();
  p.vae_path = f.vae.c_str();
  sd_ctx_t* ctx = new_sd_ctx(&p);
  ASSERT_NE(ctx, nullptr);
  EXPECT_FALSE(sd_ctx_supports_video_generation(ctx));
  EXPECT_TRUE(sd_ctx_supports_image_generation(ctx));
  free_sd_ctx(ctx);
  EXPECT_FALSE(sd_ctx_supports_video_generation(nullptr));
}

}  // namespace
