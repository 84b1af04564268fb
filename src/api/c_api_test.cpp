// The C API's contract with sd.cpp's users: default values, enum names, the sentinel for
// unknown names, callbacks, and clean failures of features not built.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "api/ignored_params.h"
#include "stable-diffusion.h"

namespace {

std::string take(char* s) {
  std::string out = s ? s : "";
  std::free(s);
  return out;
}

TEST(CApiDefaults, ContextParamsMatchReference) {
  sd_ctx_params_t p;
  std::memset(&p, 0xAB, sizeof p);  // init must overwrite everything
  sd_ctx_params_init(&p);
  EXPECT_EQ(p.model_path, nullptr);
  EXPECT_EQ(p.vae_path, nullptr);
  EXPECT_EQ(p.embeddings, nullptr);
  EXPECT_EQ(p.embedding_count, 0u);
  EXPECT_EQ(p.n_threads, sd_get_num_physical_cores());
  EXPECT_EQ(p.wtype, SD_TYPE_COUNT);
  EXPECT_EQ(p.rng_type, CUDA_RNG);
  EXPECT_EQ(p.sampler_rng_type, RNG_TYPE_COUNT);
  EXPECT_EQ(p.prediction, PREDICTION_COUNT);
  EXPECT_EQ(p.lora_apply_mode, LORA_APPLY_AUTO);
  EXPECT_EQ(p.vae_format, SD_VAE_FORMAT_AUTO);
  EXPECT_TRUE(p.enable_mmap);  // weights alias the mapped file
  EXPECT_FALSE(p.flash_attn);
  EXPECT_FALSE(p.diffusion_flash_attn);
  EXPECT_FALSE(p.tae_preview_only);
  EXPECT_FALSE(p.auto_fit);
  EXPECT_FALSE(p.stream_layers);
  EXPECT_EQ(p.max_vram, nullptr);
  EXPECT_EQ(p.backend, nullptr);
  EXPECT_EQ(p.params_backend, nullptr);
  EXPECT_EQ(p.rpc_servers, nullptr);
}

TEST(CApiDefaults, SampleParamsMatchReference) {
  sd_sample_params_t p;
  std::memset(&p, 0xAB, sizeof p);
  sd_sample_params_init(&p);
  EXPECT_EQ(p.guidance.txt_cfg, 7.0f);
  EXPECT_TRUE(std::isinf(p.guidance.img_cfg));
  EXPECT_EQ(p.guidance.distilled_guidance, 3.5f);
  EXPECT_EQ(p.guidance.slg.layers, nullptr);
  EXPECT_EQ(p.guidance.slg.layer_count, 0u);
  EXPECT_EQ(p.guidance.slg.layer_start, 0.01f);
  EXPECT_EQ(p.guidance.slg.layer_end, 0.2f);
  EXPECT_EQ(p.guidance.slg.scale, 0.f);
  EXPECT_EQ(p.scheduler, SCHEDULER_COUNT);
  EXPECT_EQ(p.sample_method, SAMPLE_METHOD_COUNT);
  EXPECT_EQ(p.sample_steps, 20);
  EXPECT_TRUE(std::isinf(p.eta));
  EXPECT_EQ(p.shifted_timestep, 0);
  EXPECT_EQ(p.custom_sigmas, nullptr);
  EXPECT_EQ(p.custom_sigmas_count, 0);
  EXPECT_TRUE(std::isinf(p.flow_shift));
  EXPECT_EQ(p.extra_sample_args, nullptr);
}

TEST(CApiDefaults, ImageGenerationParamsMatchReference) {
  sd_img_gen_params_t p;
  std::memset(&p, 0xAB, sizeof p);
  sd_img_gen_params_init(&p);
  EXPECT_EQ(p.loras, nullptr);
  EXPECT_EQ(p.lora_count, 0u);
  EXPECT_EQ(p.prompt, nullptr);
  EXPECT_EQ(p.clip_skip, -1);
  EXPECT_EQ(p.init_image.data, nullptr);
  EXPECT_EQ(p.mask_image.data, nullptr);
  EXPECT_STREQ(p.ref_image_args, "");
  EXPECT_EQ(p.width, 512);
  EXPECT_EQ(p.height, 512);
  EXPECT_EQ(p.sample_params.sample_steps, 20);
  EXPECT_EQ(p.strength, 0.75f);
  EXPECT_EQ(p.seed, -1);
  EXPECT_EQ(p.batch_count, 1);
  EXPECT_EQ(p.control_strength, 0.9f);
  EXPECT_EQ(p.ip_adapter_strength, 1.0f);
  EXPECT_EQ(p.pm_params.style_strength, 20.f);
  EXPECT_EQ(p.pm_params.id_images_count, 0);
  EXPECT_EQ(p.pulid_params.id_weight, 1.0f);
  EXPECT_FALSE(p.vae_tiling_params.enabled);
  EXPECT_EQ(p.vae_tiling_params.tile_size_x, 0);
  EXPECT_EQ(p.vae_tiling_params.target_overlap, 0.5f);
  EXPECT_EQ(p.vae_tiling_params.extra_tiling_args, nullptr);
  EXPECT_EQ(p.cache.mode, SD_CACHE_DISABLED);
  EXPECT_EQ(p.cache.start_percent, 0.15f);
  EXPECT_EQ(p.cache.Fn_compute_blocks, 8);
  EXPECT_FALSE(p.hires.enabled);
  EXPECT_EQ(p.hires.upscaler, SD_HIRES_UPSCALER_LATENT);
  EXPECT_EQ(p.hires.scale, 2.0f);
  EXPECT_EQ(p.hires.denoising_strength, 0.7f);
  EXPECT_EQ(p.hires.upscale_tile_size, 128);
  EXPECT_EQ(p.qwen_image_layers, 3);
  EXPECT_FALSE(p.circular_x);
  EXPECT_FALSE(p.circular_y);
}

TEST(CApiDefaults, VideoGenerationParamsMatchReference) {
  sd_vid_gen_params_t p;
  std::memset(&p, 0xAB, sizeof p);
  sd_vid_gen_params_init(&p);
  EXPECT_EQ(p.high_noise_sample_params.sample_steps, -1);
  EXPECT_EQ(p.sample_params.sample_steps, 20);
  EXPECT_EQ(p.video_frames, 6);
  EXPECT_EQ(p.fps, 16);
  EXPECT_EQ(p.moe_boundary, 0.875f);
  EXPECT_EQ(p.seed, -1);
  EXPECT_EQ(p.hires.upscale_tile_size, 128);
}

TEST(CApiDefaults, InitFunctionsAcceptNull) {
  sd_ctx_params_init(nullptr);
  sd_sample_params_init(nullptr);
  sd_img_gen_params_init(nullptr);
  sd_vid_gen_params_init(nullptr);
  sd_cache_params_init(nullptr);
  sd_hires_params_init(nullptr);
  EXPECT_EQ(sd_ctx_params_to_str(nullptr), nullptr);
}

// Without a model: sd.cpp's UNet defaults; with one, the model decides
// (pipeline::StableDiffusion::default_scheduler, tested with the pipeline).
TEST(CApiDefaults, SamplerAndSchedulerWithoutAModel) {
  EXPECT_EQ(sd_get_default_sample_method(nullptr), EULER_A_SAMPLE_METHOD);
  EXPECT_EQ(sd_get_default_scheduler(nullptr, EULER_A_SAMPLE_METHOD), DISCRETE_SCHEDULER);
  EXPECT_EQ(sd_get_default_scheduler(nullptr, LCM_SAMPLE_METHOD), LCM_SCHEDULER);
  EXPECT_EQ(sd_get_default_scheduler(nullptr, TCD_SAMPLE_METHOD), LCM_SCHEDULER);
  EXPECT_EQ(sd_get_default_scheduler(nullptr, DDIM_TRAILING_SAMPLE_METHOD), SIMPLE_SCHEDULER);
  EXPECT_EQ(sd_get_default_scheduler(nullptr, SAMPLE_METHOD_COUNT), DISCRETE_SCHEDULER);
}

TEST(CApiDescriptions, NameTheValues) {
  sd_ctx_params_t c;
  sd_ctx_params_init(&c);
  c.model_path = "model.safetensors";
  const std::string ctx = take(sd_ctx_params_to_str(&c));
  EXPECT_NE(ctx.find("model_path: model.safetensors\n"), std::string::npos) << ctx;
  EXPECT_NE(ctx.find("wtype: NONE\n"), std::string::npos) << ctx;
  EXPECT_NE(ctx.find("rng_type: cuda\n"), std::string::npos) << ctx;
  EXPECT_NE(ctx.find("vae_format: auto\n"), std::string::npos) << ctx;

  sd_img_gen_params_t g;
  sd_img_gen_params_init(&g);
  g.prompt = "a cat";
  g.sample_params.sample_method = EULER_A_SAMPLE_METHOD;
  const std::string gen = take(sd_img_gen_params_to_str(&g));
  EXPECT_NE(gen.find("prompt: a cat\n"), std::string::npos) << gen;
  EXPECT_NE(gen.find("sample_method: euler_a"), std::string::npos) << gen;
  EXPECT_NE(gen.find("scheduler: NONE"), std::string::npos) << gen;
  // img_cfg INFINITY reads as txt_cfg.
  EXPECT_NE(gen.find("img_cfg: 7.00"), std::string::npos) << gen;
  EXPECT_NE(gen.find("cache: disabled"), std::string::npos) << gen;
}

// Every name maps to its value and back, for every enum with names.
template <class Enum>
void expect_round_trip(int count, const char* (*name_of)(Enum), Enum (*value_of)(const char*)) {
  for (int i = 0; i < count; ++i) {
    const char* name = name_of(static_cast<Enum>(i));
    ASSERT_STRNE(name, "NONE") << i;
    EXPECT_EQ(value_of(name), static_cast<Enum>(i)) << name;
  }
  EXPECT_STREQ(name_of(static_cast<Enum>(count)), "NONE");
  EXPECT_STREQ(name_of(static_cast<Enum>(-1)), "NONE");
  EXPECT_EQ(value_of("no-such-name"), static_cast<Enum>(count));
  EXPECT_EQ(value_of(""), static_cast<Enum>(count));
  EXPECT_EQ(value_of(nullptr), static_cast<Enum>(count));
}

TEST(CApiNames, RoundTripAndUnknownSentinels) {
  expect_round_trip<rng_type_t>(RNG_TYPE_COUNT, sd_rng_type_name, str_to_rng_type);
  expect_round_trip<sample_method_t>(SAMPLE_METHOD_COUNT, sd_sample_method_name,
                                     str_to_sample_method);
  expect_round_trip<scheduler_t>(SCHEDULER_COUNT, sd_scheduler_name, str_to_scheduler);
  expect_round_trip<prediction_t>(PREDICTION_COUNT, sd_prediction_name, str_to_prediction);
  expect_round_trip<preview_t>(PREVIEW_COUNT, sd_preview_name, str_to_preview);
  expect_round_trip<lora_apply_mode_t>(LORA_APPLY_MODE_COUNT, sd_lora_apply_mode_name,
                                       str_to_lora_apply_mode);
  expect_round_trip<sd_hires_upscaler_t>(SD_HIRES_UPSCALER_COUNT, sd_hires_upscaler_name,
                                         str_to_sd_hires_upscaler);
}

TEST(CApiNames, ReferenceSpellings) {
  EXPECT_STREQ(sd_sample_method_name(DPMPP2S_A_SAMPLE_METHOD), "dpm++2s_a");
  EXPECT_STREQ(sd_sample_method_name(DPMPP2Mv2_SAMPLE_METHOD), "dpm++2mv2");
  EXPECT_STREQ(sd_sample_method_name(LMS_SAMPLE_METHOD), "lms");
  EXPECT_STREQ(sample_method_to_str[EULER_A_SAMPLE_METHOD], "euler_a");
  EXPECT_STREQ(scheduler_to_str[SGM_UNIFORM_SCHEDULER], "sgm_uniform");
  EXPECT_STREQ(sd_scheduler_name(BETA_SCHEDULER), "beta");
  EXPECT_EQ(str_to_scheduler("normal"), DISCRETE_SCHEDULER);  // alias
  EXPECT_STREQ(sd_rng_type_name(STD_DEFAULT_RNG), "std_default");
  EXPECT_STREQ(sd_prediction_name(FLOW_PRED), "sd3_flow");
  EXPECT_STREQ(sd_hires_upscaler_name(SD_HIRES_UPSCALER_LATENT_NEAREST_EXACT),
               "Latent (nearest-exact)");
  // Lookups are case-sensitive, as in the reference.
  EXPECT_EQ(str_to_sample_method("Euler"), SAMPLE_METHOD_COUNT);
}

TEST(CApiNames, TypeNamesAreGgufs) {
  EXPECT_STREQ(sd_type_name(SD_TYPE_F32), "f32");
  EXPECT_STREQ(sd_type_name(SD_TYPE_Q4_K), "q4_K");
  EXPECT_STREQ(sd_type_name(SD_TYPE_BF16), "bf16");
  EXPECT_STREQ(sd_type_name(SD_TYPE_Q1_0), "q1_0");
  EXPECT_STREQ(sd_type_name(SD_TYPE_COUNT), "NONE");
  EXPECT_STREQ(sd_type_name(static_cast<sd_type_t>(-3)), "NONE");
  const sd_type_t live[] = {
      SD_TYPE_F32,    SD_TYPE_F16,   SD_TYPE_Q4_0,  SD_TYPE_Q4_1,  SD_TYPE_Q5_0,
      SD_TYPE_Q5_1,   SD_TYPE_Q8_0,  SD_TYPE_Q8_1,  SD_TYPE_Q2_K,  SD_TYPE_Q3_K,
      SD_TYPE_Q4_K,   SD_TYPE_Q5_K,  SD_TYPE_Q6_K,  SD_TYPE_Q8_K,  SD_TYPE_IQ2_XXS,
      SD_TYPE_IQ4_XS, SD_TYPE_I8,    SD_TYPE_I32,   SD_TYPE_F64,   SD_TYPE_BF16,
      SD_TYPE_TQ1_0,  SD_TYPE_TQ2_0, SD_TYPE_MXFP4, SD_TYPE_NVFP4, SD_TYPE_Q1_0};
  for (sd_type_t t : live) EXPECT_EQ(str_to_sd_type(sd_type_name(t)), t) << sd_type_name(t);
  EXPECT_EQ(str_to_sd_type("q4_k"), SD_TYPE_COUNT);  // exact spelling only
  EXPECT_EQ(str_to_sd_type("q9_9"), SD_TYPE_COUNT);
}

struct LogCapture {
  std::vector<std::pair<sd_log_level_t, std::string>> lines;
  static void callback(sd_log_level_t level, const char* text, void* data) {
    static_cast<LogCapture*>(data)->lines.emplace_back(level, text);
  }
};

class CApiCallbacks : public ::testing::Test {
 protected:
  void SetUp() override { sd_set_log_callback(LogCapture::callback, &log_); }
  void TearDown() override {
    sd_set_log_callback(nullptr, nullptr);
    sd_set_progress_callback(nullptr, nullptr);
  }
  LogCapture log_;
};

TEST_F(CApiCallbacks, LogMessagesEndInNewline) {
  sd::api::log(SD_LOG_WARN, "%d apples", 3);
  sd::api::log(SD_LOG_INFO, "already ends\n");
  ASSERT_EQ(log_.lines.size(), 2u);
  EXPECT_EQ(log_.lines[0].first, SD_LOG_WARN);
  EXPECT_EQ(log_.lines[0].second, "3 apples\n");
  EXPECT_EQ(log_.lines[1].second, "already ends\n");
  sd_set_log_callback(nullptr, nullptr);
  sd::api::log(SD_LOG_ERROR, "dropped");
  EXPECT_EQ(log_.lines.size(), 2u);
}

TEST(CApiIgnoredFlags, DefaultsAreNotIgnoredFlags) {
  sd_img_gen_params_t p;
  sd_img_gen_params_init(&p);
  EXPECT_TRUE(sd::api::ignored_flags(p).empty());
  p.sample_params.guidance.img_cfg = p.sample_params.guidance.txt_cfg;  // "same as --cfg-scale"
  p.ref_image_args = "";
  EXPECT_TRUE(sd::api::ignored_flags(p).empty());
}

TEST(CApiIgnoredFlags, EachIsNamedByItsFlag) {
  sd_img_gen_params_t p;
  sd_img_gen_params_init(&p);
  p.sample_params.guidance.distilled_guidance = 5.0f;  // FLUX.1's: not listed
  p.sample_params.guidance.slg.scale = 2.5f;           // SD3's; the pipeline warns for others
  p.sample_params.flow_shift = 3.0f;                   // flow models': not listed
  p.sample_params.extra_sample_args = "beta_alpha=0.5";
  p.cache.mode = SD_CACHE_UCACHE;           // works now: not listed
  p.sample_params.guidance.img_cfg = 1.5f;  // image guidance: the pipeline warns without one
  p.vae_tiling_params.temporal_tiling = true;
  std::vector<std::string> flags;
  for (const sd::api::IgnoredFlag& f : sd::api::ignored_flags(p)) flags.push_back(f.flag);
  EXPECT_EQ(flags, (std::vector<std::string>{"--temporal-tiling"}));
}

TEST_F(CApiCallbacks, IgnoredFlagsWarnOncePerFlag) {
  sd_img_gen_params_t p;
  sd_img_gen_params_init(&p);
  p.vae_tiling_params.temporal_tiling = true;
  sd::api::warn_ignored_flags(p);
  sd::api::warn_ignored_flags(p);
  ASSERT_EQ(log_.lines.size(), 1u);
  EXPECT_EQ(log_.lines[0].first, SD_LOG_WARN);
  EXPECT_NE(log_.lines[0].second.find("--temporal-tiling"), std::string::npos)
      << log_.lines[0].second;
  p.qwen_image_layers += 1;  // a new flag is still said
  sd::api::warn_ignored_flags(p);
  ASSERT_EQ(log_.lines.size(), 2u);
  EXPECT_NE(log_.lines[1].second.find("--qwen-image-layers"), std::string::npos)
      << log_.lines[1].second;
}

TEST_F(CApiCallbacks, ProgressReachesTheCallback) {
  struct Seen {
    int step = -1, steps = -1;
    float time = -1;
  } seen;
  sd_set_progress_callback(
      [](int step, int steps, float time, void* data) {
        *static_cast<Seen*>(data) = {step, steps, time};
      },
      &seen);
  sd::api::progress(3, 20, 1.5f);
  EXPECT_EQ(seen.step, 3);
  EXPECT_EQ(seen.steps, 20);
  EXPECT_EQ(seen.time, 1.5f);
}

TEST(CApiProgressLine, ReadsLikeTheReference) {
  EXPECT_EQ(sd::api::progress_line(0, 20, 1.f), "");
  const std::string half = sd::api::progress_line(10, 20, 2.5f);
  EXPECT_EQ(half, "  |" + std::string(25, '=') + ">" + std::string(24, ' ') + "| 10/20 - 2.50s/it");
  const std::string done = sd::api::progress_line(4, 4, 0.25f);
  EXPECT_EQ(done, "  |" + std::string(50, '=') + "| 4/4 - 4.00it/s");
}

TEST_F(CApiCallbacks, BoundaryTurnsExceptionsIntoLoggedErrors) {
  const bool ok = sd::api::c_boundary(
      "generate_image", true, []() -> bool { throw std::runtime_error("width must be positive"); });
  EXPECT_TRUE(ok);  // the on_error value
  ASSERT_EQ(log_.lines.size(), 1u);
  EXPECT_EQ(log_.lines[0].first, SD_LOG_ERROR);
  EXPECT_EQ(log_.lines[0].second, "generate_image: width must be positive\n");
  EXPECT_EQ(sd::api::c_boundary("x", 0, [] { return 7; }), 7);
}

TEST_F(CApiCallbacks, PreviewRequestIsRemembered) {
  EXPECT_FALSE(sd::api::preview_due(1));
  sd_set_preview_callback([](int, int, sd_image_t*, bool, void*) {}, PREVIEW_PROJ, 2, true, false,
                          nullptr);
  EXPECT_FALSE(sd::api::preview_due(1));
  EXPECT_TRUE(sd::api::preview_due(2));
  EXPECT_EQ(sd::api::preview_request().mode, PREVIEW_PROJ);
  sd_set_preview_callback(nullptr, PREVIEW_NONE, 1, true, false, nullptr);
  EXPECT_FALSE(sd::api::preview_due(2));
}

TEST_F(CApiCallbacks, MissingFeaturesFailCleanly) {
  EXPECT_EQ(new_adetailer_ctx("x.safetensors", 1, nullptr, nullptr), nullptr);
  EXPECT_FALSE(load_imatrix("x.dat"));
  ASSERT_GE(log_.lines.size(), 2u);
  for (const auto& [level, text] : log_.lines) {
    EXPECT_EQ(level, SD_LOG_ERROR);
    EXPECT_NE(text.find("not supported"), std::string::npos) << text;
  }
}

TEST_F(CApiCallbacks, ConvertRefusesMissingArguments) {
  EXPECT_FALSE(convert(nullptr, nullptr, "out.gguf", SD_TYPE_COUNT, nullptr, false));
  EXPECT_FALSE(convert_with_components("in.safetensors", "clip_l.safetensors", nullptr, nullptr,
                                       nullptr, nullptr, "out.gguf", SD_TYPE_F16, nullptr, false,
                                       1));
  ASSERT_EQ(log_.lines.size(), 2u);
  EXPECT_NE(log_.lines[0].second.find("no input model"), std::string::npos);
  EXPECT_NE(log_.lines[1].second.find("--clip_l"), std::string::npos);
}

TEST(CApiSystem, DevicesAndFacts) {
  const size_t n = sd_list_devices(nullptr, 0);
  ASSERT_GT(n, 0u);
  std::vector<char> full(n + 1);
  EXPECT_EQ(sd_list_devices(full.data(), full.size()), n);
  const std::string list(full.data());
  EXPECT_EQ(list.rfind("CPU\t", 0), 0u) << list;
  EXPECT_EQ(list.back(), '\n');
  char small[4];
  EXPECT_EQ(sd_list_devices(small, sizeof small), n);
  EXPECT_STREQ(small, "CPU");  // truncated, still terminated

  EXPECT_GE(sd_get_num_physical_cores(), 1);
  EXPECT_EQ(std::string(sd_get_system_info()).rfind("System Info:", 0), 0u);
  EXPECT_NE(sd_version(), nullptr);
  EXPECT_NE(sd_commit(), nullptr);
  free_sd_images(nullptr, 3);
  free_sd_audio(nullptr);
}

}  // namespace

TEST_F(CApiCallbacks, ControlNetCallsNeedAContextAndCannyAnRgbImage) {
  EXPECT_FALSE(sd_ctx_load_control_net(nullptr, "cn.safetensors"));
  EXPECT_FALSE(sd_ctx_unload_control_net(nullptr));
  EXPECT_FALSE(sd_ctx_has_control_net(nullptr));
  sd_image_t empty = {0, 0, 3, nullptr};
  EXPECT_FALSE(preprocess_canny(empty, 0.08f, 0.08f, 0.8f, 1.f, false));
  std::vector<uint8_t> gray(32 * 32, 0), rgb(32 * 32 * 3, 0);
  EXPECT_FALSE(preprocess_canny({32, 32, 1, gray.data()}, 0.08f, 0.08f, 0.8f, 1.f, false));
  ASSERT_GE(log_.lines.size(), 3u);
  EXPECT_NE(log_.lines.back().second.find("RGB"), std::string::npos) << log_.lines.back().second;
  // A bright square: its outline becomes white, in place.
  for (int y = 8; y < 24; ++y)
    for (int x = 8; x < 24; ++x)
      for (int c = 0; c < 3; ++c) rgb[(y * 32 + x) * 3 + c] = 255;
  EXPECT_TRUE(preprocess_canny({32, 32, 3, rgb.data()}, 0.08f, 0.08f, 0.8f, 1.f, false));
  EXPECT_EQ(rgb[(16 * 32 + 16) * 3], 0);  // inside: flat
  int edges = 0;
  for (uint8_t v : rgb) edges += v == 255;
  EXPECT_GT(edges, 0);
}
