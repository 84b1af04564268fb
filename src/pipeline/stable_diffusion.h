// Stable Diffusion 1.x / 2.x / SDXL and FLUX.1 image generation: text-to-image, image-to-image and
// inpainting, computing what stable-diffusion.cpp computes for the same request, seed and
// RNG. Owns the loaded model (files, weights, runners) for as many requests as asked.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_manager.h"
#include "io/image.h"
#include "io/model_version.h"
#include "models/clip_text.h"
#include "models/flux.h"
#include "models/mmdit.h"
#include "models/t5.h"
#include "models/tiling.h"
#include "models/unet.h"
#include "models/vae.h"
#include "pipeline/hires_fix.h"
#include "pipeline/reference_images.h"
#include "sampling/guidance_extras.h"
#include "sampling/rng.h"
#include "sampling/samplers.h"
#include "sampling/schedule.h"
#include "sampling/schedulers.h"
#include "sampling/skip_layer_guidance.h"
#include "sampling/step_cache.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

// The networks' shapes. Normally chosen from the detected model version; tests give tiny
// ones (with the SD 1.x names) to run the whole pipeline in milliseconds.
struct Architecture {
  io::ModelVersion version = io::ModelVersion::SD1;
  models::UnetConfig unet;
  models::ClipTextConfig text;
  std::optional<models::ClipTextConfig> text2;  // SDXL's second encoder (with a projection)
  std::optional<models::FluxConfig> flux;       // FLUX.1: its transformer instead of the UNet
  std::optional<models::MmditConfig> mmdit;     // SD3: its MMDiT instead of the UNet
  std::optional<models::T5Config> t5;           // FLUX.1's (and Chroma's) T5-XXL encoder
  models::VaeConfig vae;
};

struct ModelOptions {
  std::string model;                 // -m: checkpoint file or diffusers folder
  std::string diffusion_model;       // --diffusion-model: a separate UNet file
  std::string vae;                   // --vae: replaces the checkpoint's VAE
  std::string taesd;                 // --taesd: decode (and encode) with TAESD instead
  bool taesd_preview_only = false;   // --taesd-preview-only: TAESD for previews only
  std::string clip_l;                // --clip_l: a separate text-encoder file
  std::string clip_g;                // --clip_g: SD3's CLIP-G text encoder
  std::string t5xxl;                 // --t5xxl: T5-XXL's encoder (FLUX.1, SD3)
  std::string t5_tokenizer;          // T5's tokenizer.json; empty: searched (t5_tokenizer.h)
  std::string embeddings_dir;        // --embd-dir: textual-inversion embeddings
  std::string control_net;           // --control-net: a ControlNet for the UNet
  std::string clip_vocab;            // the CLIP merges file; empty: searched (clip_tokenizer.h)
  int threads = 0;                   // 0: all cores
  std::optional<DType> weight_type;  // --type
  std::optional<sampling::Prediction> prediction;  // --prediction
  bool use_mmap = true;
  // Placement (backend/placement.h): where each module computes and where its weights live.
  std::string backend;         // --backend
  std::string params_backend;  // --params-backend
  bool eager_load = false;     // read every weight when the model is opened
  // --max-vram (backend/max_vram.h) and --stream-layers: device memory budgets, within
  // which weights of modules on GPU or remote devices are streamed segment by segment.
  std::string max_vram;
  bool stream_layers = false;
  // --auto-fit: placements chosen from the modules' sizes and the devices' free memory
  // (backend/auto_fit.h); --backend and --params-backend are then not read.
  bool auto_fit = false;
  // Told about placement decisions when the model is opened (budgets, auto-fit's plan).
  std::function<void(const std::string&)> note;
  // --lora-apply-mode: merged on load, added in each graph, or auto (at runtime for
  // quantized weights only).
  weights::ModelManagerOptions::LoraMode lora_mode = weights::ModelManagerOptions::LoraMode::Auto;
  // Told while --eager-load reads a module: (module, tensors done, tensors in all).
  std::function<void(const std::string&, size_t, size_t)> load_progress;
  std::optional<Architecture> architecture;  // unset: detected from the files
  // --model-args: "key=value,..." (pipeline/model_args.h); Chroma's masking options.
  std::string model_args;
};

struct ImageRequest {
  std::string prompt, negative_prompt;
  int clip_skip = -1;  // <= 0: the model's default
  // Multiples of 8; the UNet needs multiples of 64, so others are aligned up (as sd.cpp).
  int width = 512, height = 512;
  int steps = 20;
  float cfg_scale = 7.0f;
  // --img-cfg-scale: image guidance of models with an image input (instruct-pix2pix,
  // inpainting); unset: none (1), as sd.cpp. Other models ignore it with a warning.
  std::optional<float> img_cfg_scale;
  float guidance = 3.5f;                         // --guidance: distilled guidance (FLUX.1 dev)
  std::optional<float> flow_shift;               // --flow-shift; unset: the model's
  std::optional<sampling::SampleMethod> method;  // unset: the model's default
  std::optional<sampling::Scheduler> scheduler;  // unset: the sampler's default
  std::vector<float> custom_sigmas;              // --sigmas
  std::optional<float> eta;
  int timestep_shift = 0;
  sampling::RngType rng = sampling::RngType::Cuda;
  std::optional<sampling::RngType> sampler_rng;  // unset: the generation RNG
  int64_t seed = 42;
  int batch_count = 1;
  // Image-to-image and inpainting: 8-bit images, resized (nearest) to the output size.
  const io::Image* init_image = nullptr;
  const io::Image* mask = nullptr;  // white = repaint
  float strength = 0.75f;
  // Instruct-pix2pix: the image to edit (-r), 8-bit (pipeline/edit_image.h).
  const io::Image* edit_image = nullptr;
  // ControlNet guidance (with a ControlNet loaded): the control image, resized (nearest) to
  // the output size, and the residuals' scale.
  const io::Image* control_image = nullptr;
  float control_strength = 0.9f;
  // FLUX.1 Kontext's reference images (-r): VAE-encoded at about the output's area and
  // joined to the image's tokens (pipeline/reference_images.h). Other families ignore them
  // with a warning; FLUX.1 Fill refuses them.
  std::vector<const io::Image*> ref_images;
  ReferenceImageOptions ref_options;
  std::optional<models::TilingParams> vae_tiling;
  // The highres fix (pipeline/hires_fix.h): a second pass at a larger size.
  HiresOptions hires;
  // Step caching: fewer network evaluations than sampler calls (sampling/step_cache.h).
  sampling::CacheOptions cache;
  // Guidance extras (sampling/guidance_extras.h): a scale per step, and APG.
  std::vector<float> guidance_schedule;
  sampling::ApgOptions apg;
  // Skip-layer guidance (--slg-scale, --skip-layers, --skip-layer-start/-end): SD3's MMDiT;
  // other models ignore it with a warning. Its `predict` is the pipeline's to fill.
  sampling::SkipLayerGuidance skip_layer;
  // LoRAs merged into the weights for this request (and kept while the next request asks
  // for the same set).
  struct Lora {
    std::string path;
    float multiplier = 1.0f;
  };
  std::vector<Lora> loras;
  // Called after every sampling step: (step, steps, seconds since the previous call).
  std::function<void(int, int, double)> progress;
  // Polled before every model call; true stops the generation with an sd::Error.
  std::function<bool()> cancelled;
  // Polled before every batch entry after the first; true ends the batch there and
  // returns the images already sampled.
  std::function<bool()> stop_new_images;
  // Previews while sampling: every `interval` steps the denoised prediction (and/or the
  // noisy latent) is drawn, by latent projection, TAESD or the full VAE.
  struct Preview {
    enum class Mode { None, Proj, Tae, Vae } mode = Mode::None;
    int interval = 1;
    bool denoised = true;
    bool noisy = false;
    std::function<void(int step, const io::Image& image, bool noisy)> callback;
  } preview;
  // Told when a phase ends and how long it took ("sampling completed, taking 12.3s").
  std::function<void(const std::string&)> info;
  // Told about adjustments made to the request (e.g. a size aligned up to 64 pixels).
  std::function<void(const std::string&)> warn;
};

class StableDiffusion {
 public:
  // Reads the model files' metadata, detects the version and prepares the runners;
  // weights load when first used. Throws sd::Error for missing or unsupported files.
  explicit StableDiffusion(const ModelOptions& options);
  ~StableDiffusion();

  io::ModelVersion version() const;
  // "te: CPU, diffusion: CPU, weights on disk, vae: CPU", for the log.
  std::string placement() const;
  // Bytes of weights resident now (copied and mapped), for tests and benchmarks.
  size_t resident_weight_bytes() const;
  sampling::Prediction prediction() const;
  // What a request that names no sampler or scheduler gets with this model.
  sampling::SampleMethod default_sample_method() const;
  sampling::Scheduler default_scheduler(sampling::SampleMethod method) const;

  // One image per batch entry (seeds seed, seed + 1, ...), at the hires target size when
  // the highres fix is on. Throws sd::Error for invalid requests before any work is done.
  std::vector<io::Image> generate(const ImageRequest& request);

  // A ControlNet for the following requests (replacing one loaded before), or none. Throws
  // sd::Error naming the file when it does not fit this model; the old one stays then.
  void load_control_net(const std::string& path);
  void unload_control_net();
  bool has_control_net() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sd::pipeline
