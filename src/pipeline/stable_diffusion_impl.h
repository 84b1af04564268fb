// The orchestrator's state and steps, shared by its files (one step each):
//   model_assembly.cpp  opening a model: placement, files, the family's networks, the VAE;
//   request_checks.cpp  every check of a request before any work;
//   image_inputs.cpp    the sampler plan and the image side: init image, masks, the
//                       diffusion net's image input, reference images;
//   sample_loop.cpp     one batch entry's sampling, and the highres fix's second pass;
//   generate.cpp        a whole request: text, sampling, hires, decoding.
// Nothing here names a model family: what differs between families is asked of the family
// object (families/family.h) and of the diffusion net's capabilities (diffusion_net.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend_manager.h"
#include "pipeline/clip_vision_runner.h"
#include "pipeline/control_net.h"
#include "pipeline/diffusion_net.h"
#include "pipeline/families/family.h"
#include "pipeline/hires_fix.h"
#include "pipeline/model_args.h"
#include "pipeline/phase_timer.h"
#include "pipeline/prefixed_weights.h"
#include "pipeline/prompt_encoder.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/vae_runner.h"
#include "sampling/guided_denoiser.h"
#include "sampling/schedule.h"
#include "weights/model_loader.h"
#include "weights/model_manager.h"

namespace sd::pipeline {

struct StableDiffusion::Impl {
  ModelOptions options;
  ModelArgs model_args;  // --model-args, read before any file
  weights::ModelLoader loader;
  weights::ModelLoader taesd_loader;
  io::ModelVersion version = io::ModelVersion::Unknown;
  const Family* family = nullptr;
  sampling::Prediction prediction = sampling::Prediction::Eps;
  bool prediction_probed = false;
  std::unique_ptr<BackendManager> backends;
  std::unique_ptr<weights::ModelManager> weights;
  std::unique_ptr<weights::ModelManager> taesd_weights;
  std::unique_ptr<PrefixedWeights> taesd_view;  // the TAESD weights as the VAE runner names them
  std::unique_ptr<PromptEncoder> text;
  std::unique_ptr<DiffusionNet> diffusion;
  // A high-noise expert (Wan 2.2 A14B): the first steps' network; its weights are their own
  // module of the manager (kHighNoiseModule), placed as the diffusion net's.
  std::unique_ptr<DiffusionNet> high_noise;
  static constexpr const char* kHighNoiseModule = "high-noise diffusion";
  std::unique_ptr<ClipVisionRunner> image_encoder;  // CLIP vision, for image tokens
  float default_flow_shift = 3.0f;
  std::unique_ptr<VaeRunner> vae;
  std::unique_ptr<LoadedControlNet> control_net;  // --control-net
  sampling::DiscreteSchedule schedule;

  // What setup() prepares for the batch.
  struct Plan {
    sampling::SampleMethod method = sampling::SampleMethod::EulerA;
    sampling::Scheduler scheduler = sampling::Scheduler::Discrete;
    sampling::SchedulerOptions scheduler_options;
    int sample_steps = 0;  // what the first pass runs before any img2img trimming
    std::vector<float> sigmas;
    // With a high-noise expert: the first steps (sigmas[0..high_noise_steps], at most all)
    // are its, with its own sampler; 0 without one.
    int high_noise_steps = 0;
    sampling::SampleMethod high_noise_method = sampling::SampleMethod::Euler;
    int64_t w = 0, h = 0, c = 0;  // the latent
    int64_t frames = 1;           // video models: latent frames
    // Latent frames before the clip's (a VACE reference image's), cut before decoding.
    int64_t leading_frames = 0;
    std::vector<float> init_latent;        // the encoded init image; zeros for text-to-image
    std::vector<float> concat;             // the diffusion net's image input (ImageInput)
    std::vector<float> img_uncond_concat;  // the same with the image part zeroed
    sampling::DenoiseMask mask;            // empty mask: nothing kept from the init image
    float img_cfg_scale = 1.0f;            // resolved --img-cfg-scale (1: no image guidance)
    std::vector<ReferenceLatent> refs;     // encoded reference images (ReferenceInput)

    // The clip's frames of a video latent [w, h, frames, C]: the leading frames cut.
    int64_t clip_frames() const { return frames - leading_frames; }
    std::vector<float> clip_latent(const std::vector<float>& latent) const;
  };

  // model_assembly.cpp
  explicit Impl(const ModelOptions& o);
  // --auto-fit: chooses placements from the modules' weight sizes and the devices' memory,
  // says the plan, and makes the BackendManager from it. Returns the --max-vram to use.
  std::string fit_placement();
  // The detected (or given) version's family, its files checked, and its networks with
  // every dimension the files state. A model this build cannot run is an error naming
  // the file.
  Architecture open_architecture(const ModelFiles& files);
  // A VAE of another family (a 16-channel autoencoder on SDXL) fails here, naming the
  // file, before anything is loaded.
  void check_vae_latent(const Architecture& arch) const;
  // The --tae file against the VAE: a TAESD for image latents, a TAEHV (read into the VAE
  // runner) for Wan's; the wrong kind fails naming the file and the right one.
  void check_tiny_autoencoder();
  // A ControlNet guides a network that takes control (SD's UNets), of its own family;
  // checked from the files' metadata.
  void load_control_net(const std::string& path);
  // Reads a module's weights now (--eager-load), reporting progress.
  void load(weights::ModelManager& manager, Module m);
  void load(weights::ModelManager& manager, const std::string& module);
  // A phase of module `m` is over: its compute buffers go back, and its weights too when
  // they are kept on disk.
  void phase_done(Module m);
  // The high-noise expert's phase is over (as phase_done for the diffusion net).
  void high_noise_done();
  // Files that do not say what the network predicts: it is probed once.
  void probe_prediction();
  // The side lengths the diffusion net takes are multiples of this many pixels.
  int size_unit() const {
    // A UNet halves the latent at every level but the last: SD's 3 halvings after the
    // VAE's 8x make 64 pixels the unit (FLUX.1's 2x2 patches: 16).
    return static_cast<int>(vae->config().downscale() * diffusion->latent_multiple());
  }
  // Reference images (-r) are resized to sides that are multiples of this many pixels.
  int reference_unit() const {
    return static_cast<int>(vae->config().downscale()) *
           diffusion->references()->reference_latent_multiple();
  }

  // request_checks.cpp
  ImageRequest validate(const ImageRequest& request) const;
  void check_video(ImageRequest& r) const;
  void check_high_noise(const ImageRequest& r) const;
  // Reference images: dropped with a warning where the model does not take them, and
  // their sizes checked, before any work.
  void check_references(ImageRequest& r) const;

  // image_inputs.cpp
  Plan setup(const ImageRequest& r);
  // Image planes [W, H, 3] in [0, 1] -> the sampler's latent; the VAE's posterior sample
  // draws from `rng`.
  std::vector<float> encode(const std::vector<float>& planes, int width, int height,
                            sampling::Rng& rng);
  // Image to video: the conditioning clip (first and last frames given, grey between) as
  // the diffusion net's extra input, and the image tokens of those frames set on the net.
  std::vector<float> video_frames_input(const ImageRequest& r, const Plan& p);
  // Text-image to video: the given first (and last) frames encoded into the plan's init
  // latent and kept there by its mask, the net told which frames are fixed (none without).
  void pin_frames(const ImageRequest& r, Plan& p);
  // VACE: the control video and the reference image (-i) encoded into the network's VACE
  // context; a reference adds a latent frame before the clip (Plan::leading_frames).
  void vace_input(const ImageRequest& r, Plan& p);
  // Each reference image resized as the options say and encoded, in order.
  std::vector<ReferenceLatent> encode_references(const ImageRequest& r, sampling::Rng& rng);
  // Instruct-pix2pix's image input: the posterior's mean without the latent scale, no RNG
  // draw (sd.cpp; diffusers' `latent_dist.mode()`).
  std::vector<float> encode_mean(const std::vector<float>& planes, int width, int height);

  // sample_loop.cpp
  // Noise from `rng` (seeded with `seed` and perhaps drawn from already), then the sampler
  // (the high-noise expert's first, where there is one).
  std::vector<float> sample(const ImageRequest& r, const Plan& p, const Conditioning& cond,
                            const Conditioning& uncond, int64_t seed, sampling::Rng& rng);
  // One network's run of the sampler over `sigmas`, from the latent `x`: its steps are
  // counted from `first_step` in progress reports.
  struct Stage {
    DiffusionNet& net;
    std::vector<float> sigmas;
    sampling::SampleMethod method;
    float cfg_scale;
    std::optional<float> eta;
    int first_step;
  };
  std::vector<float> run_stage(const ImageRequest& r, const Plan& p, const Stage& stage,
                               const Conditioning& cond, const Conditioning& uncond,
                               std::vector<float> x, sampling::Rng& sampler_rng);
  // The highres fix's second pass over the first pass's latents (pipeline/hires_fix.h).
  std::vector<std::vector<float>> hires_pass(const ImageRequest& r, const Plan& plan,
                                             HiresFix& hires, const Conditioning& cond,
                                             const Conditioning& uncond,
                                             const std::vector<std::vector<float>>& latents,
                                             PhaseTimer& timer);
};

}  // namespace sd::pipeline
