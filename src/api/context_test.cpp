// new_sd_ctx's placement errors: reported through the log callback, no context returned.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stable-diffusion.h"

namespace {

std::vector<std::string> g_errors;

void capture(sd_log_level_t level, const char* text, void*) {
  if (level == SD_LOG_ERROR) g_errors.push_back(text);
}

class ContextPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    g_errors.clear();
    sd_set_log_callback(capture, nullptr);
    sd_ctx_params_init(&params_);
    params_.model_path = "never-read.safetensors";  // placement is checked first
  }
  void TearDown() override { sd_set_log_callback(nullptr, nullptr); }
  std::string error_of_new_context() {
    sd_ctx_t* ctx = new_sd_ctx(&params_);
    EXPECT_EQ(ctx, nullptr);
    if (ctx) free_sd_ctx(ctx);
    std::string all;
    for (const std::string& e : g_errors) all += e;
    return all;
  }
  sd_ctx_params_t params_;
};

TEST_F(ContextPlacement, DiskCannotCompute) {
  params_.backend = "disk";
  const std::string e = error_of_new_context();
  EXPECT_NE(e.find("--backend disk"), std::string::npos) << e;
}

TEST_F(ContextPlacement, UnknownDeviceAndModuleAreNamed) {
  params_.params_backend = "te=floppy";
  std::string e = error_of_new_context();
  EXPECT_NE(e.find("unknown device 'floppy'"), std::string::npos) << e;
  g_errors.clear();
  params_.params_backend = "decoder=cpu";
  e = error_of_new_context();
  EXPECT_NE(e.find("unknown module 'decoder'"), std::string::npos) << e;
}

TEST_F(ContextPlacement, ValidPlacementGoesOnToTheModelFile) {
  params_.backend = "te=cpu,*=auto";
  params_.params_backend = "diffusion=disk,te=cpu";
  const std::string e = error_of_new_context();
  EXPECT_NE(e.find("never-read.safetensors"), std::string::npos) << e;
  EXPECT_EQ(e.find("backend"), std::string::npos) << e;
}

// --tensor-type-rules applies at load too (as in stable-diffusion.cpp): a bad rule is named
// before any file is read, a good one lets the context go on to the model file.
TEST_F(ContextPlacement, TensorTypeRulesAreCheckedBeforeTheModelFile) {
  params_.tensor_type_rules = "^first_stage_model\\.=q9_0";
  std::string e = error_of_new_context();
  EXPECT_NE(e.find("--tensor-type-rules"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown type 'q9_0'"), std::string::npos) << e;
  EXPECT_EQ(e.find("never-read.safetensors"), std::string::npos) << e;
  g_errors.clear();
  params_.tensor_type_rules = "^first_stage_model\\.=bf16";
  e = error_of_new_context();
  EXPECT_NE(e.find("never-read.safetensors"), std::string::npos) << e;
  EXPECT_EQ(e.find("--tensor-type-rules"), std::string::npos) << e;
}

}  // namespace
