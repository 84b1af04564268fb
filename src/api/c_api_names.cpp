// Enum <-> name conversions of the C API. The names are sd.cpp's, character for
// character: they appear on command lines, in image metadata and in bindings' code.
// Lookups are case-sensitive, as there.
#include <cstring>

#include "pipeline/hires_fix.h"
#include "stable-diffusion.h"

namespace {

// What a name function returns for a value outside its enum.
constexpr const char* kNone = "NONE";

// GGUF's type names by id (ggml_type_name); retired ids keep the text ggml gives them.
constexpr const char* kTypeNames[SD_TYPE_COUNT] = {
    "f32",
    "f16",
    "q4_0",
    "q4_1",
    "DEPRECATED",
    "DEPRECATED",
    "q5_0",
    "q5_1",
    "q8_0",
    "q8_1",
    "q2_K",
    "q3_K",
    "q4_K",
    "q5_K",
    "q6_K",
    "q8_K",
    "iq2_xxs",
    "iq2_xs",
    "iq3_xxs",
    "iq1_s",
    "iq4_nl",
    "iq3_s",
    "iq2_s",
    "iq4_xs",
    "i8",
    "i16",
    "i32",
    "i64",
    "f64",
    "iq1_m",
    "bf16",
    "TYPE_Q4_0_4_4 REMOVED, use Q4_0 with runtime repacking",
    "TYPE_Q4_0_4_8 REMOVED, use Q4_0 with runtime repacking",
    "TYPE_Q4_0_8_8 REMOVED, use Q4_0 with runtime repacking",
    "tq1_0",
    "tq2_0",
    "TYPE_IQ4_NL_4_4 REMOVED, use IQ4_NL with runtime repacking",
    "TYPE_IQ4_NL_4_8 REMOVED, use IQ4_NL with runtime repacking",
    "TYPE_IQ4_NL_8_8 REMOVED, use IQ4_NL with runtime repacking",
    "mxfp4",
    "nvfp4",
    "q1_0",
};

constexpr const char* kRngNames[RNG_TYPE_COUNT] = {"std_default", "cuda", "cpu"};

constexpr const char* kPredictionNames[PREDICTION_COUNT] = {
    "eps", "v", "edm_v", "sd3_flow", "flux_flow", "sefi_flow", "minit2i_flow",
};

constexpr const char* kPreviewNames[PREVIEW_COUNT] = {"none", "proj", "tae", "vae"};

constexpr const char* kLoraApplyModeNames[LORA_APPLY_MODE_COUNT] = {"auto", "immediately",
                                                                    "at_runtime"};

// The hires upscalers are the pipeline's, in the same order, after "None".
static_assert(SD_HIRES_UPSCALER_COUNT - SD_HIRES_UPSCALER_LATENT ==
                  static_cast<int>(sd::pipeline::HiresUpscaler::Model) + 1,
              "sd_hires_upscaler_t and pipeline::HiresUpscaler list the same upscalers");
constexpr const char* kNoHiresUpscaler = "None";

// A C caller may pass any int as an enum; reading it as the C++ enum type is undefined past
// the enum's values, so its bytes are read as an int.
template <class Enum>
int c_enum_value(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int), "the C API's enums are int-sized");
  int i = 0;
  std::memcpy(&i, &value, sizeof i);
  return i;
}

template <class Enum, int N>
const char* name_of(const char* const (&names)[N], const Enum& value) {
  const int i = c_enum_value(value);
  return i >= 0 && i < N ? names[i] : kNone;
}

// The first value whose name is `str`, else `not_found` (the enum's *_COUNT).
template <class Enum, int N>
Enum value_of(const char* const (&names)[N], const char* str, Enum not_found) {
  if (!str) return not_found;
  for (int i = 0; i < N; ++i) {
    if (std::strcmp(str, names[i]) == 0) return static_cast<Enum>(i);
  }
  return not_found;
}

}  // namespace

extern "C" {

const char* sample_method_to_str[] = {
    "euler",         "euler_a",        "heun",    "dpm2",         "dpm++2s_a",      "dpm++2m",
    "dpm++2mv2",     "ipndm",          "ipndm_v", "lcm",          "ddim_trailing",  "tcd",
    "res_multistep", "res_2s",         "er_sde",  "euler_cfg_pp", "euler_a_cfg_pp", "euler_ge",
    "dpm++2m_sde",   "dpm++2m_sde_bt", "lms",
};
static_assert(sizeof(sample_method_to_str) / sizeof(sample_method_to_str[0]) == SAMPLE_METHOD_COUNT,
              "one name per sample_method_t");

const char* scheduler_to_str[] = {
    "discrete",     "karras",     "exponential", "ays",  "gits",         "sgm_uniform",
    "simple",       "smoothstep", "kl_optimal",  "lcm",  "bong_tangent", "ltx2",
    "logit_normal", "flux2",      "flux",        "beta",
};
static_assert(sizeof(scheduler_to_str) / sizeof(scheduler_to_str[0]) == SCHEDULER_COUNT,
              "one name per scheduler_t");

const char* sd_type_name(enum sd_type_t type) {
  return name_of(kTypeNames, type);
}
enum sd_type_t str_to_sd_type(const char* str) {
  return value_of(kTypeNames, str, SD_TYPE_COUNT);
}

const char* sd_rng_type_name(enum rng_type_t rng_type) {
  return name_of(kRngNames, rng_type);
}
enum rng_type_t str_to_rng_type(const char* str) {
  return value_of(kRngNames, str, RNG_TYPE_COUNT);
}

const char* sd_sample_method_name(enum sample_method_t sample_method) {
  const int i = c_enum_value(sample_method);
  return i >= 0 && i < SAMPLE_METHOD_COUNT ? sample_method_to_str[i] : kNone;
}
enum sample_method_t str_to_sample_method(const char* str) {
  if (!str) return SAMPLE_METHOD_COUNT;
  for (int i = 0; i < SAMPLE_METHOD_COUNT; ++i) {
    if (std::strcmp(str, sample_method_to_str[i]) == 0) return static_cast<sample_method_t>(i);
  }
  return SAMPLE_METHOD_COUNT;
}

const char* sd_scheduler_name(enum scheduler_t scheduler) {
  const int i = c_enum_value(scheduler);
  return i >= 0 && i < SCHEDULER_COUNT ? scheduler_to_str[i] : kNone;
}
enum scheduler_t str_to_scheduler(const char* str) {
  if (!str) return SCHEDULER_COUNT;
  // "normal" is the name ComfyUI and webui use for the discrete schedule.
  if (std::strcmp(str, "normal") == 0) return DISCRETE_SCHEDULER;
  for (int i = 0; i < SCHEDULER_COUNT; ++i) {
    if (std::strcmp(str, scheduler_to_str[i]) == 0) return static_cast<scheduler_t>(i);
  }
  return SCHEDULER_COUNT;
}

const char* sd_prediction_name(enum prediction_t prediction) {
  return name_of(kPredictionNames, prediction);
}
enum prediction_t str_to_prediction(const char* str) {
  return value_of(kPredictionNames, str, PREDICTION_COUNT);
}

const char* sd_preview_name(enum preview_t preview) {
  return name_of(kPreviewNames, preview);
}
enum preview_t str_to_preview(const char* str) {
  return value_of(kPreviewNames, str, PREVIEW_COUNT);
}

const char* sd_lora_apply_mode_name(enum lora_apply_mode_t mode) {
  return name_of(kLoraApplyModeNames, mode);
}
enum lora_apply_mode_t str_to_lora_apply_mode(const char* str) {
  return value_of(kLoraApplyModeNames, str, LORA_APPLY_MODE_COUNT);
}

const char* sd_hires_upscaler_name(enum sd_hires_upscaler_t upscaler) {
  const int i = c_enum_value(upscaler);
  if (i == SD_HIRES_UPSCALER_NONE) return kNoHiresUpscaler;
  if (i < SD_HIRES_UPSCALER_NONE || i >= SD_HIRES_UPSCALER_COUNT) return kNone;
  return sd::pipeline::hires_upscaler_name(
      static_cast<sd::pipeline::HiresUpscaler>(i - SD_HIRES_UPSCALER_LATENT));
}
enum sd_hires_upscaler_t str_to_sd_hires_upscaler(const char* str) {
  if (!str) return SD_HIRES_UPSCALER_COUNT;
  for (int i = 0; i < SD_HIRES_UPSCALER_COUNT; ++i)
    if (std::strcmp(str, sd_hires_upscaler_name(static_cast<sd_hires_upscaler_t>(i))) == 0)
      return static_cast<sd_hires_upscaler_t>(i);
  return SD_HIRES_UPSCALER_COUNT;
}

}  // extern "C"
