// The upscaler part of the C API: sd.cpp's signatures and semantics on a small random
// ESRGAN file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "models/esrgan.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "stable-diffusion.h"

namespace {

struct LogCapture {
  std::vector<std::string> errors;
  static void callback(sd_log_level_t level, const char* text, void* data) {
    if (level == SD_LOG_ERROR) static_cast<LogCapture*>(data)->errors.emplace_back(text);
  }
};

class CApiUpscaler : public ::testing::Test {
 protected:
  void SetUp() override { sd_set_log_callback(LogCapture::callback, &log_); }
  void TearDown() override { sd_set_log_callback(nullptr, nullptr); }

  // An x2 model (one upsampling conv), 1 block of 8 features.
  static std::string write_model() {
    sd::models::EsrganConfig c;
    c.num_block = 1;
    c.num_upsample = 1;
    c.num_feat = 8;
    c.num_grow_ch = 4;
    sd::nn::RandomWeights w;
    sd::nn::ParamRecorder recorder(w);
    sd::Context ctx;
    sd::models::rrdbnet(sd::nn::Scope(ctx, recorder), c,
                        ctx.new_tensor(sd::DType::F32, {8, 8, 3, 1}));
    for (const sd::nn::ParamDecl& p : recorder.params()) w.get(ctx, p.name, p.ne);
    // One folder per test process: ctest runs this binary's tests side by side.
    static const sd::io::test::TempDir dir;
    const std::string path = dir.file("c_api_upscaler.safetensors");
    w.save_safetensors(path);
    return path;
  }
  LogCapture log_;
};

TEST_F(CApiUpscaler, UpscalesByTheModelsOwnFactor) {
  upscaler_ctx_t* ctx = new_upscaler_ctx(write_model().c_str(), false, 1, 4, nullptr, nullptr);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(get_upscale_factor(ctx), 2);
  std::vector<uint8_t> pixels(6 * 5 * 3, 128);
  const sd_image_t in = {6, 5, 3, pixels.data()};
  sd_image_t* out = nullptr;
  int count = 0;
  // The factor asked for is ignored, as in sd.cpp: the model's scale decides.
  ASSERT_TRUE(upscale(ctx, in, 4, &out, &count));
  ASSERT_EQ(count, 1);
  EXPECT_EQ(out[0].width, 12u);
  EXPECT_EQ(out[0].height, 10u);
  EXPECT_EQ(out[0].channel, 3u);
  ASSERT_NE(out[0].data, nullptr);
  free_sd_images(out, count);
  EXPECT_TRUE(upscale(ctx, in, 2, nullptr, nullptr));  // the result is freed
  const sd_image_t empty = {0, 0, 3, nullptr};
  out = reinterpret_cast<sd_image_t*>(0x1);
  count = 7;
  EXPECT_FALSE(upscale(ctx, empty, 2, &out, &count));
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(count, 0);
  free_upscaler_ctx(ctx);
  EXPECT_EQ(log_.errors.size(), 1u);
}

TEST_F(CApiUpscaler, ConvertsWeightsToTheTypeAsked) {
  upscaler_ctx_t* ctx = new_upscaler_ctx_with_type(write_model().c_str(), false, 1, 128, nullptr,
                                                   nullptr, SD_TYPE_BF16);
  ASSERT_NE(ctx, nullptr);
  std::vector<uint8_t> pixels(6 * 5 * 3, 90);
  sd_image_t* out = nullptr;
  int count = 0;
  ASSERT_TRUE(upscale(ctx, sd_image_t{6, 5, 3, pixels.data()}, 2, &out, &count));
  EXPECT_EQ(out[0].width, 12u);
  free_sd_images(out, count);
  free_upscaler_ctx(ctx);
  EXPECT_TRUE(log_.errors.empty());
}

TEST_F(CApiUpscaler, FailuresAreLoggedNotThrown) {
  EXPECT_EQ(new_upscaler_ctx("no_such_model.pth", false, 1, 128, nullptr, nullptr), nullptr);
  ASSERT_EQ(log_.errors.size(), 1u);
  EXPECT_NE(log_.errors[0].find("no_such_model.pth"), std::string::npos) << log_.errors[0];
  EXPECT_EQ(new_upscaler_ctx(nullptr, false, 1, 128, nullptr, nullptr), nullptr);
  EXPECT_EQ(new_upscaler_ctx(write_model().c_str(), false, 1, 128, "no_such_device", nullptr),
            nullptr);
  EXPECT_EQ(new_upscaler_ctx_with_type(write_model().c_str(), false, 1, 128, nullptr, nullptr,
                                       static_cast<sd_type_t>(SD_TYPE_COUNT + 1)),
            nullptr);
  EXPECT_EQ(get_upscale_factor(nullptr), 1);
  sd_image_t* out = nullptr;
  int count = 0;
  std::vector<uint8_t> pixels(3, 0);
  EXPECT_FALSE(upscale(nullptr, sd_image_t{1, 1, 3, pixels.data()}, 4, &out, &count));
  free_upscaler_ctx(nullptr);
  EXPECT_EQ(log_.errors.size(), 5u);
}

}  // namespace
