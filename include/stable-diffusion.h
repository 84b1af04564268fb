/*
 * The C API. Names, values, struct layouts and signatures are those of
 * stable-diffusion.cpp's include/stable-diffusion.h, so programs and language bindings
 * written against it build and run unchanged. Parameters for features this engine does
 * not have yet are kept: a call that asks for one fails with a message through the log
 * callback instead of silently ignoring it.
 *
 * Conventions:
 *  - Call the *_init function of a parameter struct first; it writes the defaults.
 *  - Strings may be NULL or "" for "not given".
 *  - Functions returning bool return false after logging why (SD_LOG_ERROR).
 *  - Images returned by the library are freed with free_sd_images, strings returned by
 *    the *_to_str functions with free().
 */
#ifndef __STABLE_DIFFUSION_H__
#define __STABLE_DIFFUSION_H__

#if defined(_WIN32) || defined(__CYGWIN__)
#ifndef SD_BUILD_SHARED_LIB
#define SD_API
#else
#ifdef SD_BUILD_DLL
#define SD_API __declspec(dllexport)
#else
#define SD_API __declspec(dllimport)
#endif
#endif
#else
#if __GNUC__ >= 4
#define SD_API __attribute__((visibility("default")))
#else
#define SD_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Initial-noise generators. CUDA_RNG reproduces the Philox stream of
 * stable-diffusion-webui (also on CPU), CPU_RNG the torch CPU mt19937 stream (ComfyUI). */
enum rng_type_t {
  STD_DEFAULT_RNG,
  CUDA_RNG,
  CPU_RNG,
  RNG_TYPE_COUNT /* "not set" where a default applies */
};

enum sample_method_t {
  EULER_SAMPLE_METHOD,
  EULER_A_SAMPLE_METHOD,
  HEUN_SAMPLE_METHOD,
  DPM2_SAMPLE_METHOD,
  DPMPP2S_A_SAMPLE_METHOD,
  DPMPP2M_SAMPLE_METHOD,
  DPMPP2Mv2_SAMPLE_METHOD,
  IPNDM_SAMPLE_METHOD,
  IPNDM_V_SAMPLE_METHOD,
  LCM_SAMPLE_METHOD,
  DDIM_TRAILING_SAMPLE_METHOD,
  TCD_SAMPLE_METHOD,
  RES_MULTISTEP_SAMPLE_METHOD,
  RES_2S_SAMPLE_METHOD,
  ER_SDE_SAMPLE_METHOD,
  EULER_CFG_PP_SAMPLE_METHOD,
  EULER_A_CFG_PP_SAMPLE_METHOD,
  EULER_GE_SAMPLE_METHOD,
  DPMPP2M_SDE_SAMPLE_METHOD,
  DPMPP2M_SDE_BT_SAMPLE_METHOD,
  LMS_SAMPLE_METHOD,
  SAMPLE_METHOD_COUNT /* "not set": the model's default sampler */
};

/* The command-line names of the samplers, indexed by sample_method_t. */
extern SD_API const char* sample_method_to_str[];

enum scheduler_t {
  DISCRETE_SCHEDULER,
  KARRAS_SCHEDULER,
  EXPONENTIAL_SCHEDULER,
  AYS_SCHEDULER,
  GITS_SCHEDULER,
  SGM_UNIFORM_SCHEDULER,
  SIMPLE_SCHEDULER,
  SMOOTHSTEP_SCHEDULER,
  KL_OPTIMAL_SCHEDULER,
  LCM_SCHEDULER,
  BONG_TANGENT_SCHEDULER,
  LTX2_SCHEDULER,
  LOGIT_NORMAL_SCHEDULER,
  FLUX2_SCHEDULER,
  FLUX_SCHEDULER,
  BETA_SCHEDULER,
  SCHEDULER_COUNT /* "not set": the model's default schedule */
};

/* The command-line names of the schedulers, indexed by scheduler_t. */
extern SD_API const char* scheduler_to_str[];

enum prediction_t {
  EPS_PRED,
  V_PRED,
  EDM_V_PRED,
  FLOW_PRED,
  FLUX_FLOW_PRED,
  SEFI_FLOW_PRED,
  MINIT2I_FLOW_PRED,
  PREDICTION_COUNT /* "not set": detected from the model */
};

/* Tensor storage types; the values are GGUF's type ids, so they match ggml_type. */
enum sd_type_t {
  SD_TYPE_F32 = 0,
  SD_TYPE_F16 = 1,
  SD_TYPE_Q4_0 = 2,
  SD_TYPE_Q4_1 = 3,
  /* 4 and 5 were Q4_2 and Q4_3, long removed from GGUF */
  SD_TYPE_Q5_0 = 6,
  SD_TYPE_Q5_1 = 7,
  SD_TYPE_Q8_0 = 8,
  SD_TYPE_Q8_1 = 9,
  SD_TYPE_Q2_K = 10,
  SD_TYPE_Q3_K = 11,
  SD_TYPE_Q4_K = 12,
  SD_TYPE_Q5_K = 13,
  SD_TYPE_Q6_K = 14,
  SD_TYPE_Q8_K = 15,
  SD_TYPE_IQ2_XXS = 16,
  SD_TYPE_IQ2_XS = 17,
  SD_TYPE_IQ3_XXS = 18,
  SD_TYPE_IQ1_S = 19,
  SD_TYPE_IQ4_NL = 20,
  SD_TYPE_IQ3_S = 21,
  SD_TYPE_IQ2_S = 22,
  SD_TYPE_IQ4_XS = 23,
  SD_TYPE_I8 = 24,
  SD_TYPE_I16 = 25,
  SD_TYPE_I32 = 26,
  SD_TYPE_I64 = 27,
  SD_TYPE_F64 = 28,
  SD_TYPE_IQ1_M = 29,
  SD_TYPE_BF16 = 30,
  /* 31..33 were the repacked Q4_0 layouts, no longer stored in files */
  SD_TYPE_TQ1_0 = 34,
  SD_TYPE_TQ2_0 = 35,
  /* 36..38 were the repacked IQ4_NL layouts */
  SD_TYPE_MXFP4 = 39, /* one block of E2M1 values with an E8M0 scale */
  SD_TYPE_NVFP4 = 40, /* four blocks of E2M1 values with E4M3 scales */
  SD_TYPE_Q1_0 = 41,
  SD_TYPE_COUNT = 42, /* "not set": keep each tensor's stored type */
};

enum sd_log_level_t { SD_LOG_DEBUG, SD_LOG_INFO, SD_LOG_WARN, SD_LOG_ERROR };

/* How intermediate latents are turned into preview images. */
enum preview_t { PREVIEW_NONE, PREVIEW_PROJ, PREVIEW_TAE, PREVIEW_VAE, PREVIEW_COUNT };

enum lora_apply_mode_t {
  LORA_APPLY_AUTO, /* at runtime when the weights are quantized, else merged */
  LORA_APPLY_IMMEDIATELY,
  LORA_APPLY_AT_RUNTIME,
  LORA_APPLY_MODE_COUNT,
};

typedef struct {
  bool enabled;
  bool temporal_tiling;
  int tile_size_x; /* in latent pixels; 0: the default (32) */
  int tile_size_y;
  float target_overlap; /* fraction of a tile */
  float rel_size_x;     /* < 1: fraction of the image; >= 1: tiles per axis; 0: unused */
  float rel_size_y;
  const char* extra_tiling_args; /* "key=value,..." */
} sd_tiling_params_t;

typedef struct {
  const char* name; /* the word that triggers it in a prompt */
  const char* path;
} sd_embedding_t;

enum sd_vae_format_t {
  SD_VAE_FORMAT_AUTO = -1,
  SD_VAE_FORMAT_FLUX,
  SD_VAE_FORMAT_SD3,
  SD_VAE_FORMAT_FLUX2,
  SD_VAE_FORMAT_WAN,
  SD_VAE_FORMAT_COUNT,
};

/* Everything a context loads once and keeps: model files, devices, weight types. */
typedef struct {
  const char* model_path; /* a full checkpoint (or a diffusers folder) */
  const char* clip_l_path;
  const char* clip_g_path;
  const char* clip_vision_path;
  const char* t5xxl_path;
  const char* llm_path;
  const char* llm_vision_path;
  const char* diffusion_model_path; /* a standalone diffusion network */
  const char* high_noise_diffusion_model_path;
  const char* uncond_diffusion_model_path;
  const char* embeddings_connectors_path;
  const char* vae_path; /* replaces the checkpoint's VAE */
  const char* audio_vae_path;
  const char* taesd_path; /* tiny autoencoder: fast, low-quality decoding */
  const char* control_net_path;
  const char* ip_adapter_path;
  const char* motion_module_path;
  const sd_embedding_t* embeddings; /* textual-inversion embeddings */
  uint32_t embedding_count;
  const char* photo_maker_path;
  const char* pulid_weights_path;
  const char* tensor_type_rules; /* "regex=type,...", first match wins */
  int n_threads;                 /* <= 0: physical cores */
  enum sd_type_t wtype;          /* SD_TYPE_COUNT: keep the file's types */
  enum rng_type_t rng_type;
  enum rng_type_t sampler_rng_type; /* RNG_TYPE_COUNT: same as rng_type */
  enum prediction_t prediction;     /* PREDICTION_COUNT: detect */
  enum lora_apply_mode_t lora_apply_mode;
  bool enable_mmap; /* true after sd_ctx_params_init: weights alias the mapped file */
  bool flash_attn;
  bool diffusion_flash_attn;
  bool tae_preview_only; /* use the TAE for previews only, not the final decode */
  bool diffusion_conv_direct;
  bool vae_conv_direct;
  bool force_sdxl_vae_conv_scale;
  enum sd_vae_format_t vae_format;
  const char* max_vram;       /* GiB budget per device ("6" or "cuda0=6,..."); "0": no budget */
  bool stream_layers;         /* upload the next segment while one computes (max_vram) */
  bool eager_load;            /* read all weights when the context is made, not on first use */
  const char* backend;        /* where modules run: "cpu" or "te=cpu,vae=cuda0,..." */
  const char* params_backend; /* where weights live: "cpu", "disk" or per module */
  const char* split_mode;     /* multi-device modules: "layer" (default) or "row" */
  bool auto_fit;              /* choose placements from model size and free memory */
  const char* rpc_servers;    /* "host:port,..." */
  const char* model_args;     /* "key=value,..." */
  bool quantize_convs;        /* diffusion convolutions in q8_0 on 8-bit integer dot products */
} sd_ctx_params_t;

typedef struct {
  uint32_t sample_rate;
  uint32_t channels;
  uint64_t sample_count;
  float* data; /* interleaved */
} sd_audio_t;

/* 8-bit pixels, rows top to bottom, channels interleaved (1: gray, 3: RGB, 4: RGBA). */
typedef struct {
  uint32_t width;
  uint32_t height;
  uint32_t channel;
  uint8_t* data;
} sd_image_t;

typedef struct {
  sd_image_t* frames;
  int frame_count;
  int fps;
  sd_audio_t audio;
} sd_ref_video_t;

/* Skip-layer guidance (DiT models). */
typedef struct {
  int* layers;
  size_t layer_count;
  float layer_start; /* fraction of the steps */
  float layer_end;
  float scale; /* 0: off */
} sd_slg_params_t;

typedef struct {
  float txt_cfg;            /* classifier-free guidance scale */
  float img_cfg;            /* INFINITY: same as txt_cfg */
  float distilled_guidance; /* the guidance input of guidance-distilled models */
  sd_slg_params_t slg;
} sd_guidance_params_t;

typedef struct {
  sd_guidance_params_t guidance;
  enum scheduler_t scheduler;         /* SCHEDULER_COUNT: the model's default */
  enum sample_method_t sample_method; /* SAMPLE_METHOD_COUNT: the model's default */
  int sample_steps;
  float eta;            /* INFINITY: the sampler's default */
  int shifted_timestep; /* NitroFusion timestep shift; 0: off */
  float* custom_sigmas; /* replaces the scheduler when given */
  int custom_sigmas_count;
  float flow_shift; /* INFINITY: the model's default */
  const char* extra_sample_args;
} sd_sample_params_t;

/* PhotoMaker */
typedef struct {
  sd_image_t* id_images;
  int id_images_count;
  const char* id_embed_path;
  float style_strength;
} sd_pm_params_t;

typedef struct {
  const char* id_embedding_path;
  float id_weight;
} sd_pulid_params_t;

enum sd_cache_mode_t {
  SD_CACHE_DISABLED = 0,
  SD_CACHE_EASYCACHE,
  SD_CACHE_UCACHE,
  SD_CACHE_DBCACHE,
  SD_CACHE_TAYLORSEER,
  SD_CACHE_CACHE_DIT,
  SD_CACHE_SPECTRUM,
};

/* Step caching: reuse a network output when consecutive steps barely differ. */
typedef struct {
  enum sd_cache_mode_t mode;
  float reuse_threshold;
  float start_percent;
  float end_percent;
  float error_decay_rate;
  bool use_relative_threshold;
  bool reset_error_on_compute;
  int Fn_compute_blocks;
  int Bn_compute_blocks;
  float residual_diff_threshold;
  int max_warmup_steps;
  int max_cached_steps;
  int max_continuous_cached_steps;
  int taylorseer_n_derivatives;
  int taylorseer_skip_interval;
  const char* scm_mask;
  bool scm_policy_dynamic;
  float spectrum_w;
  int spectrum_m;
  float spectrum_lam;
  int spectrum_window_size;
  float spectrum_flex_window;
  int spectrum_warmup_steps;
  float spectrum_stop_percent;
} sd_cache_params_t;

typedef struct {
  bool is_high_noise;
  float multiplier;
  const char* path;
} sd_lora_t;

enum sd_hires_upscaler_t {
  SD_HIRES_UPSCALER_NONE,
  SD_HIRES_UPSCALER_LATENT,
  SD_HIRES_UPSCALER_LATENT_NEAREST,
  SD_HIRES_UPSCALER_LATENT_NEAREST_EXACT,
  SD_HIRES_UPSCALER_LATENT_ANTIALIASED,
  SD_HIRES_UPSCALER_LATENT_BICUBIC,
  SD_HIRES_UPSCALER_LATENT_BICUBIC_ANTIALIASED,
  SD_HIRES_UPSCALER_LANCZOS,
  SD_HIRES_UPSCALER_NEAREST,
  SD_HIRES_UPSCALER_MODEL,
  SD_HIRES_UPSCALER_COUNT,
};

/* Highres fix: generate, upscale, then denoise again at the larger size. */
typedef struct {
  bool enabled;
  enum sd_hires_upscaler_t upscaler;
  const char* model_path; /* for SD_HIRES_UPSCALER_MODEL */
  float scale;            /* used when no target size is given */
  int target_width;
  int target_height;
  int steps; /* 0: same as the first pass */
  float denoising_strength;
  int upscale_tile_size;
  float* custom_sigmas;
  int custom_sigmas_count;
} sd_hires_params_t;

/* One txt2img / img2img / inpaint request. A zero-sized init_image means txt2img. */
typedef struct {
  const sd_lora_t* loras;
  uint32_t lora_count;
  const char* prompt;
  const char* negative_prompt;
  int clip_skip; /* <= 0: the model's default (1 for SD 1.x, 2 for SD 2.x) */
  sd_image_t init_image;
  sd_image_t* ref_images;
  int ref_images_count;
  const char* ref_image_args;
  sd_image_t mask_image; /* 1 channel; white is repainted */
  int width;
  int height;
  sd_sample_params_t sample_params;
  float strength; /* img2img: how much of the init image is noised away, in [0, 1] */
  int64_t seed;   /* < 0: random */
  int batch_count;
  sd_image_t control_image;
  float control_strength;
  sd_image_t ip_adapter_image;
  float ip_adapter_strength;
  sd_pm_params_t pm_params;
  sd_pulid_params_t pulid_params;
  sd_tiling_params_t vae_tiling_params;
  sd_cache_params_t cache;
  sd_hires_params_t hires;
  int qwen_image_layers;
  bool circular_x; /* tileable output: wrap padding horizontally */
  bool circular_y;
} sd_img_gen_params_t;

typedef struct {
  const sd_lora_t* loras;
  uint32_t lora_count;
  const char* prompt;
  const char* negative_prompt;
  int clip_skip;
  sd_image_t init_image;
  sd_image_t end_image;
  sd_image_t* ref_images;
  int ref_images_count;
  sd_ref_video_t* ref_videos;
  int ref_videos_count;
  sd_audio_t* ref_audios;
  int ref_audios_count;
  sd_image_t* control_frames;
  int control_frames_size;
  int width;
  int height;
  sd_sample_params_t sample_params;
  sd_sample_params_t high_noise_sample_params;
  float moe_boundary;
  float strength;
  int64_t seed;
  int video_frames;
  int fps;
  float vace_strength;
  sd_tiling_params_t vae_tiling_params;
  sd_cache_params_t cache;
  sd_hires_params_t hires;
  bool circular_x;
  bool circular_y;
} sd_vid_gen_params_t;

typedef struct sd_ctx_t sd_ctx_t;
/* Kept so that code naming the graph-evaluation callback type compiles; this engine has
 * no ggml tensors and never calls that callback. */
struct ggml_tensor;

/* Messages end in '\n'. Called from the thread that runs the work. */
typedef void (*sd_log_cb_t)(enum sd_log_level_t level, const char* text, void* data);
/* step of steps done so far (0: starting); time is seconds per step. */
typedef void (*sd_progress_cb_t)(int step, int steps, float time, void* data);
typedef void (*sd_preview_cb_t)(int step, int frame_count, sd_image_t* frames, bool is_noisy,
                                void* data);
typedef bool (*sd_graph_eval_callback_t)(struct ggml_tensor* t, bool ask, void* user_data);

/* Process-wide callbacks; NULL restores the default (logs are dropped, progress is drawn
 * as a bar on stdout). */
SD_API void sd_set_log_callback(sd_log_cb_t sd_log_cb, void* data);
SD_API void sd_set_progress_callback(sd_progress_cb_t cb, void* data);
SD_API void sd_set_preview_callback(sd_preview_cb_t cb, enum preview_t mode, int interval,
                                    bool denoised, bool noisy, void* data);
SD_API void sd_set_backend_eval_callback(sd_graph_eval_callback_t cb, void* data);
SD_API int32_t sd_get_num_physical_cores(void);
SD_API const char* sd_get_system_info(void);
SD_API bool sd_ctx_supports_image_generation(const sd_ctx_t* sd_ctx);
SD_API bool sd_ctx_supports_video_generation(const sd_ctx_t* sd_ctx);

/* Not to be called while a generation runs on the same context. */
SD_API bool sd_ctx_load_control_net(sd_ctx_t* sd_ctx, const char* path);
SD_API bool sd_ctx_unload_control_net(sd_ctx_t* sd_ctx);
SD_API bool sd_ctx_has_control_net(const sd_ctx_t* sd_ctx);

/* Names <-> values. A name function returns "NONE" for a value out of range; a parse
 * function returns the enum's *_COUNT value for an unknown name. */
SD_API const char* sd_type_name(enum sd_type_t type);
SD_API enum sd_type_t str_to_sd_type(const char* str);
SD_API const char* sd_rng_type_name(enum rng_type_t rng_type);
SD_API enum rng_type_t str_to_rng_type(const char* str);
SD_API const char* sd_sample_method_name(enum sample_method_t sample_method);
SD_API enum sample_method_t str_to_sample_method(const char* str);
SD_API const char* sd_scheduler_name(enum scheduler_t scheduler);
SD_API enum scheduler_t str_to_scheduler(const char* str);
SD_API const char* sd_prediction_name(enum prediction_t prediction);
SD_API enum prediction_t str_to_prediction(const char* str);
SD_API const char* sd_preview_name(enum preview_t preview);
SD_API enum preview_t str_to_preview(const char* str);
SD_API const char* sd_lora_apply_mode_name(enum lora_apply_mode_t mode);
SD_API enum lora_apply_mode_t str_to_lora_apply_mode(const char* str);
SD_API const char* sd_hires_upscaler_name(enum sd_hires_upscaler_t upscaler);
SD_API enum sd_hires_upscaler_t str_to_sd_hires_upscaler(const char* str);

SD_API void sd_cache_params_init(sd_cache_params_t* cache_params);
SD_API void sd_hires_params_init(sd_hires_params_t* hires_params);

SD_API void sd_ctx_params_init(sd_ctx_params_t* sd_ctx_params);
SD_API char* sd_ctx_params_to_str(const sd_ctx_params_t* sd_ctx_params);

/* Loads the models; NULL (after logging why) when that fails. */
SD_API sd_ctx_t* new_sd_ctx(const sd_ctx_params_t* sd_ctx_params);
SD_API void free_sd_ctx(sd_ctx_t* sd_ctx);
SD_API void free_sd_audio(sd_audio_t* audio);

SD_API void sd_sample_params_init(sd_sample_params_t* sample_params);
SD_API char* sd_sample_params_to_str(const sd_sample_params_t* sample_params);

SD_API enum sample_method_t sd_get_default_sample_method(const sd_ctx_t* sd_ctx);
SD_API enum scheduler_t sd_get_default_scheduler(const sd_ctx_t* sd_ctx,
                                                 enum sample_method_t sample_method);

SD_API void sd_img_gen_params_init(sd_img_gen_params_t* sd_img_gen_params);
SD_API char* sd_img_gen_params_to_str(const sd_img_gen_params_t* sd_img_gen_params);
/* On success *images_out holds *num_images_out images (batch_count of them); free them
 * with free_sd_images. */
SD_API bool generate_image(sd_ctx_t* sd_ctx, const sd_img_gen_params_t* sd_img_gen_params,
                           sd_image_t** images_out, int* num_images_out);

/* Checks a request against the loaded model as generate_image does before any work, without
 * generating (and without its warnings): NULL when generate_image would take it, else the
 * reason, which the caller frees with free(). Safe to call from another thread while a
 * generation runs (sd-server checks requests before queueing them). */
SD_API char* sd_img_gen_params_check(sd_ctx_t* sd_ctx,
                                     const sd_img_gen_params_t* sd_img_gen_params);
/* The same for generate_video's parameters. */
SD_API char* sd_vid_gen_params_check(sd_ctx_t* sd_ctx,
                                     const sd_vid_gen_params_t* sd_vid_gen_params);

enum sd_cancel_mode_t {
  SD_CANCEL_ALL,         /* stop as soon as possible */
  SD_CANCEL_NEW_LATENTS, /* finish the image being sampled, start no more */
  SD_CANCEL_RESET        /* withdraw a pending request */
};

SD_API void sd_cancel_generation(sd_ctx_t* sd_ctx, enum sd_cancel_mode_t mode);

SD_API void sd_vid_gen_params_init(sd_vid_gen_params_t* sd_vid_gen_params);
SD_API bool generate_video(sd_ctx_t* sd_ctx, const sd_vid_gen_params_t* sd_vid_gen_params,
                           sd_image_t** frames_out, int* num_frames_out, sd_audio_t** audio_out);

typedef struct upscaler_ctx_t upscaler_ctx_t;

SD_API upscaler_ctx_t* new_upscaler_ctx(const char* esrgan_path, bool direct, int n_threads,
                                        int tile_size, const char* backend,
                                        const char* params_backend);
// new_upscaler_ctx with the weights converted to `wtype` as they load (sd-cli's --type);
// SD_TYPE_COUNT keeps the file's types, as new_upscaler_ctx does.
SD_API upscaler_ctx_t* new_upscaler_ctx_with_type(const char* esrgan_path, bool direct,
                                                  int n_threads, int tile_size, const char* backend,
                                                  const char* params_backend, enum sd_type_t wtype);
SD_API void free_upscaler_ctx(upscaler_ctx_t* upscaler_ctx);

SD_API bool upscale(upscaler_ctx_t* upscaler_ctx, sd_image_t input_image, uint32_t upscale_factor,
                    sd_image_t** images_out, int* num_images_out);

SD_API int get_upscale_factor(upscaler_ctx_t* upscaler_ctx);

typedef struct adetailer_ctx_t adetailer_ctx_t;

typedef struct {
  const char* prompt;
  const char* negative_prompt;
  const char* extra_ad_args;
} sd_adetailer_params_t;

SD_API adetailer_ctx_t* new_adetailer_ctx(const char* detector_path, int n_threads,
                                          const char* backend, const char* params_backend);
SD_API void free_adetailer_ctx(adetailer_ctx_t* adetailer_ctx);
SD_API bool adetail_image(adetailer_ctx_t* adetailer_ctx, sd_ctx_t* sd_ctx, sd_image_t input_image,
                          const sd_adetailer_params_t* adetailer_params,
                          const sd_img_gen_params_t* inpaint_params, sd_image_t** images_out,
                          int* num_images_out);

/* Writes a GGUF file; output_type SD_TYPE_COUNT keeps each tensor's type. */
SD_API bool convert(const char* input_path, const char* vae_path, const char* output_path,
                    enum sd_type_t output_type, const char* tensor_type_rules, bool convert_name);

SD_API bool convert_with_components(const char* model_path, const char* clip_l_path,
                                    const char* clip_g_path, const char* t5xxl_path,
                                    const char* diffusion_model_path, const char* vae_path,
                                    const char* output_path, enum sd_type_t output_type,
                                    const char* tensor_type_rules, bool convert_name,
                                    int n_threads);

SD_API bool preprocess_canny(sd_image_t image, float high_threshold, float low_threshold,
                             float weak, float strong, bool inverse);

/* Importance matrices for quantization. */
SD_API bool load_imatrix(const char* imatrix_path);
SD_API void save_imatrix(const char* imatrix_path);
SD_API void enable_imatrix_collection(void);
SD_API void disable_imatrix_collection(void);

SD_API const char* sd_commit(void);
SD_API const char* sd_version(void);

/* The devices this process can use, one "name<TAB>description\n" line each; the names are
 * those --backend and --params-backend accept. Returns the length of the whole list
 * (without the terminating NUL) and copies as much as fits into buffer, NUL-terminated.
 * With buffer NULL or buffer_size 0 it only measures. */
SD_API size_t sd_list_devices(char* buffer, size_t buffer_size);

/* Frees images returned by the library (each image's data, then the array), so that the
 * caller's C runtime never frees the library's memory. */
SD_API void free_sd_images(sd_image_t* result_images, int num_images);

#ifdef __cplusplus
}
#endif

#endif /* __STABLE_DIFFUSION_H__ */
