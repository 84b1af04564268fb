// POST /sdcpp/v1/vid_gen's fields for Wan 2.2 A14B's high-noise expert: read into the
// generation options where the server's model has the expert, a 400 naming the field where
// it does not.
#include "server/request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/io_test_util.h"
#include "server/json_fields.h"

namespace sd::server {
namespace {

class VideoRequest : public ::testing::Test {
 protected:
  void SetUp() override {
    loras_ = dir_.file("loras");
    std::filesystem::create_directories(loras_);
    std::ofstream(loras_ + "/fast.safetensors") << "x";
    rc_.context.lora_model_dir = loras_;
  }
  std::string error_of(const nlohmann::json& body) {
    try {
      parse_native_video_request(body, rc_);
    } catch (const BadRequest& e) {
      return e.what();
    }
    return "";
  }

  io::test::TempDir dir_;
  std::string loras_;
  RequestContext rc_;
};

TEST_F(VideoRequest, HighNoiseFieldsNeedTheExpert) {
  const nlohmann::json with_params = {{"prompt", "a cat"},
                                      {"high_noise_sample_params", {{"sample_steps", 2}}}};
  EXPECT_NE(error_of(with_params).find("high_noise_sample_params"), std::string::npos);
  const nlohmann::json with_lora = {
      {"prompt", "a cat"},
      {"lora", nlohmann::json::array({{{"path", "fast"}, {"is_high_noise", true}}})}};
  EXPECT_NE(error_of(with_lora).find("is_high_noise"), std::string::npos);
}

TEST_F(VideoRequest, HighNoiseFieldsReachTheGeneration) {
  rc_.context.high_noise_diffusion_model_path = "high_noise.safetensors";
  const nlohmann::json body = {
      {"prompt", "a cat"},
      {"moe_boundary", 0.9},
      {"high_noise_sample_params",
       {{"sample_steps", 3}, {"sample_method", "euler_a"}, {"guidance", {{"txt_cfg", 2.5}}}}},
      {"lora", nlohmann::json::array({{{"path", "fast"}, {"is_high_noise", true}},
                                      {{"path", "fast"}, {"multiplier", 0.5}}})}};
  const GenRequest r = parse_native_video_request(body, rc_);
  const cli::GenerationOptions& g = r.generation;
  EXPECT_FLOAT_EQ(g.moe_boundary, 0.9f);
  EXPECT_EQ(g.high_noise_sample_params.sample_steps, 3);
  EXPECT_EQ(g.high_noise_sample_params.sample_method, EULER_A_SAMPLE_METHOD);
  EXPECT_FLOAT_EQ(g.high_noise_sample_params.guidance.txt_cfg, 2.5f);
  ASSERT_EQ(g.high_noise_lora_map.size(), 1u);
  EXPECT_FLOAT_EQ(g.high_noise_lora_map.begin()->second, 1.0f);
  ASSERT_EQ(g.lora_map.size(), 1u);
  EXPECT_FLOAT_EQ(g.lora_map.begin()->second, 0.5f);
  // Unknown keys inside it, and a boundary outside [0, 1], are 400s naming the field.
  EXPECT_NE(error_of({{"prompt", "a"}, {"high_noise_sample_params", {{"custom_sigmas", {1}}}}})
                .find("high_noise_sample_params.custom_sigmas"),
            std::string::npos);
  EXPECT_NE(error_of({{"prompt", "a"}, {"moe_boundary", 2}}).find("moe_boundary"),
            std::string::npos);
}

}  // namespace
}  // namespace sd::server
