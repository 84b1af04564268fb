// A model family (SD 1.x, SDXL, SD3, FLUX.1, ...) as one object: everything that differs
// between families, behind one interface, so the orchestrator (pipeline/stable_diffusion_*)
// never names a family and never looks at a network's type.
//
// What a family answers, in the order a model is opened and used:
//   1. the files: which parts it needs (named by their flag when missing), checked before
//      any heavy work, and the networks' dimensions read from them (architecture());
//   2. the networks: its prompt encoder and its diffusion net, and where their weights sit;
//   3. a request: its own checks, what the conditioning needs beyond the prompt (SDXL's
//      size vector), and which image the diffusion net reads beside the latent;
//   4. its defaults: latent space, sampler, scheduler, prediction, flow shift.
//
// Adding a family: its model file(s) in src/models, its family file here, one detection
// entry (io/model_version.cpp) and one line in families/registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "io/model_version.h"
#include "pipeline/architecture.h"
#include "pipeline/conditioning.h"
#include "pipeline/diffusion_net.h"
#include "pipeline/image_request.h"
#include "pipeline/latent_preview.h"
#include "pipeline/model_args.h"
#include "pipeline/model_options.h"
#include "pipeline/model_shapes.h"
#include "pipeline/prompt_encoder.h"
#include "sampling/samplers.h"
#include "sampling/schedule.h"
#include "sampling/schedulers.h"

namespace sd::weights {
class ModelLoader;
class ModelManager;
}  // namespace sd::weights

namespace sd::pipeline {

// What a family reads when it opens a model: the tensors of every file given (names and
// shapes, no bytes), the user's flags, and where warnings go.
struct ModelFiles {
  const weights::ModelLoader& loader;
  const ModelOptions& options;
  const ModelArgs& model_args;

  bool contains(std::string_view name) const;
  // The shape of a tensor of the files (for pipeline/model_shapes.h), or none.
  ShapeOf shape_of() const;
  void note(const std::string& text) const {
    if (options.note) options.note(text);
  }
};

// Where a family's networks read their weights and compute.
struct NetworkPlaces {
  weights::ModelManager& weights;
  Backend& text_backend;
  Backend& diffusion_backend;
};

// The image the diffusion net reads beside the latent, concatenated along channels.
enum class ImageInput {
  None,
  // Inpainting models: the mask and the latent of the image with the masked part made grey.
  MaskedImage,
  // Instruct-pix2pix: the latent of the image to edit (-r).
  EditImage,
  // Image to video (Wan I2V / FLF2V): a clip holding the first frame (-i) and the last
  // (--end-img), grey between, as a latent behind a 4-channel mask of the given frames.
  VideoFrames,
  // Text-image to video (Wan 2.2 TI2V): the first frame (-i) and the last (--end-img), when
  // given, encoded and fixed in the sampled latent; the network sees them clean.
  PinnedFrames,
  // VACE (Wan 2.1 VACE): a control video (--control-video) and a reference image (-i),
  // encoded into the context its VACE blocks read (StableDiffusion::Impl::vace_input).
  ControlVideo,
};

// The latent space and the sampling defaults of a family.
struct FamilyDefaults {
  models::VaeConfig (*vae)() = nullptr;  // the autoencoder's preset
  int64_t latent_channels = 4;           // the autoencoder's, before any patching (VaeConfig)
  float scale_factor = 0.18215f;         // what the VAE latent is scaled by for sampling
  float shift_factor = 0.0f;

  sampling::SampleMethod sample_method = sampling::SampleMethod::EulerA;
  // Unset: the files do not say (SD 2.x 768-v and 512-base have the same tensors), so the
  // diffusion net is probed once before the first generation.
  std::optional<sampling::Prediction> prediction;
  sampling::AysLevels ays_levels = sampling::AysLevels::None;
  // The scheduler of samplers that have none of their own (sd.cpp: flux for FLUX.1);
  // unset: discrete.
  std::optional<sampling::Scheduler> scheduler;
  // The flow schedule's shift for a version (flow predictions only); null: 3 (SD3's).
  float (*flow_shift)(io::ModelVersion version) = nullptr;
  // --timestep-shift applies (sd.cpp: SDXL only).
  bool timestep_shift = false;
  // The flag of the vision tower through which the text encoder reads reference images
  // (-r), where the family has one (Qwen-Image-Edit: --llm_vision); null: none.
  const char* prompt_vision_flag = nullptr;
  // Video models: video frames per latent frame after the first (Wan: 4); 0: an image model.
  int video_frame_stride = 0;
  // How --preview proj colours the latent (pipeline/latent_preview.h).
  LatentColors latent_colors = LatentColors::Sd;
};

class Family {
 public:
  Family(io::ModelFamily id, FamilyDefaults defaults) : id_(id), defaults_(defaults) {}
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  io::ModelFamily id() const { return id_; }
  const char* name() const { return io::family_name(id_); }
  // The detected versions this object runs (a family's variants may be objects of their
  // own, as the SDXL refiner is).
  virtual bool runs(io::ModelVersion version) const { return io::family_of(version) == id_; }

  // 1. Files. Every part the family needs is there, or an sd::Error names its flag; parts
  // given but not read are noted. Runs before any weight is read.
  virtual void require_files(const ModelFiles& files) const { (void)files; }
  // The networks of `version`: the family's presets with every dimension the files state
  // read from them, and the parts checked against each other (a T5 of another width).
  virtual Architecture architecture(io::ModelVersion version, const ModelFiles& files) const = 0;
  // --model-args keys this family reads; the others are noted as unused by this model.
  virtual void check_model_args(const ModelFiles& files) const;

  // 2. Networks. The weight prefixes of the text-encoder module.
  virtual std::vector<std::string> text_encoder_roots(const Architecture& arch) const;
  virtual std::unique_ptr<PromptEncoder> make_prompt_encoder(const Architecture& arch,
                                                             const ModelFiles& files,
                                                             const NetworkPlaces& places) const = 0;
  virtual std::unique_ptr<DiffusionNet> make_diffusion_net(const Architecture& arch,
                                                           const NetworkPlaces& places) const = 0;
  // A second diffusion network for the noisiest steps, its weights under
  // io::kHighNoiseUnetRoot (Wan 2.2 A14B's high-noise expert); null where the family has
  // none or the files hold none.
  virtual std::unique_ptr<DiffusionNet> make_high_noise_net(const Architecture& arch,
                                                            const NetworkPlaces& places) const {
    (void)arch;
    (void)places;
    return nullptr;
  }

  // 3. Requests. The family's own checks of a request (before any work), adjusting it
  // where it may (with a warning through r.warn).
  virtual void check_request(io::ModelVersion version, ImageRequest& r) const {
    (void)version;
    (void)r;
  }
  // The conditioning of `prompt` completed for a request of width x height: what the
  // diffusion net reads beside the text (SDXL's pooled text and image sizes). `negative`:
  // it is the negative prompt's.
  virtual void complete_conditioning(Conditioning& c, const std::string& prompt, bool negative,
                                     int width, int height) const {
    (void)c, (void)prompt, (void)negative, (void)width, (void)height;
  }
  virtual ImageInput image_input(io::ModelVersion version) const {
    (void)version;
    return ImageInput::None;
  }
  // ImageInput::MaskedImage: the diffusion net's extra input from the masked image's latent
  // [w, h, C], the mask in pixels [width, height] (1 = repaint) and the mask max-pooled to
  // the latent grid [w, h]. Default: SD's inpainting UNets, the latent mask then the latent.
  virtual std::vector<float> masked_image_input(const std::vector<float>& masked_latent,
                                                const std::vector<float>& mask,
                                                const std::vector<float>& latent_mask, int width,
                                                int height, int64_t downscale) const;

  // ImageInput::VideoFrames: the diffusion net's extra input from the conditioning clip's
  // latent [w, h, frames, C] (`plane` = w * h), knowing which of its ends were given.
  virtual std::vector<float> video_frames_input(const std::vector<float>& clip_latent,
                                                int64_t plane, int64_t frames, bool first_given,
                                                bool last_given) const;
  // 4. Defaults.
  const FamilyDefaults& defaults() const { return defaults_; }
  // The VAE preset with this family's latent space.
  models::VaeConfig vae_config() const;
  // Without a --scheduler: the sampler's and prediction's choice, as sd.cpp makes it.
  sampling::Scheduler default_scheduler(sampling::SampleMethod method,
                                        sampling::Prediction prediction) const;
  float default_flow_shift(io::ModelVersion version) const {
    return defaults_.flow_shift ? defaults_.flow_shift(version) : 3.0f;
  }

 private:
  io::ModelFamily id_;
  FamilyDefaults defaults_;
};

}  // namespace sd::pipeline
