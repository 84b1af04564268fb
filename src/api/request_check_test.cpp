// sd_img_gen_params_check: a request checked against the loaded model as generate_image
// checks it before any work, without generating (sd-server refuses requests with it before
// queueing them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "pipeline/tiny_model_test_util.h"
#include "stable-diffusion.h"

namespace {

std::string take(char* text) {
  if (!text) return "";
  std::string s = text;
  std::free(text);
  return s;
}

class RequestCheck : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static const std::string model = sd::pipeline::test::write_tiny_sdxl_checkpoint();
    sd_ctx_params_t c;
    sd_ctx_params_init(&c);
    c.model_path = model.c_str();
    c.n_threads = 2;
    ctx_ = new_sd_ctx(&c);
  }
  static void TearDownTestSuite() {
    if (ctx_) free_sd_ctx(ctx_);
    ctx_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(ctx_, nullptr);
    sd_img_gen_params_init(&p_);
    p_.prompt = "a cat";
    p_.width = p_.height = 64;
    p_.sample_params.sample_steps = 1;
  }
  static sd_ctx_t* ctx_;
  sd_img_gen_params_t p_;
};
sd_ctx_t* RequestCheck::ctx_ = nullptr;

TEST_F(RequestCheck, AGoodRequestPasses) {
  EXPECT_EQ(take(sd_img_gen_params_check(ctx_, &p_)), "");
}

TEST_F(RequestCheck, WhatOnlyTheModelKnowsIsRefusedAsGenerateRefusesIt) {
  // A clip_skip past the text encoders' layers.
  p_.clip_skip = 64;
  const std::string clip = take(sd_img_gen_params_check(ctx_, &p_));
  EXPECT_NE(clip.find("--clip-skip 64 is more than the text encoder's"), std::string::npos) << clip;
  sd_image_t* images = nullptr;
  int count = 0;
  EXPECT_FALSE(generate_image(ctx_, &p_, &images, &count));
  EXPECT_EQ(images, nullptr);
  // A step cache for transformers on a UNet.
  p_.clip_skip = -1;
  p_.cache.mode = SD_CACHE_EASYCACHE;
  const std::string cache = take(sd_img_gen_params_check(ctx_, &p_));
  EXPECT_NE(cache.find("--cache-mode easycache does not work on"), std::string::npos) << cache;
  // Checks without a model need none.
  p_.cache.mode = SD_CACHE_DISABLED;
  p_.width = 65;
  EXPECT_NE(take(sd_img_gen_params_check(ctx_, &p_)).find("multiples of 8"), std::string::npos);
}

TEST(RequestCheckWithoutAModel, NamesWhatIsMissing) {
  sd_img_gen_params_t p;
  sd_img_gen_params_init(&p);
  EXPECT_NE(take(sd_img_gen_params_check(nullptr, &p)).find("no model context"), std::string::npos);
}

}  // namespace
