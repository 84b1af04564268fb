// What the sampling loop needs from a diffusion network, whatever its architecture (a UNet,
// FLUX.1's transformer, SD3's MMDiT): one prediction per conditioning for a latent and a
// timestep, the weights it reads, and the sizes it takes. What only some networks can do
// (reference images, skip layers, ControlNet guidance) is a capability the network offers,
// absent (null) where unsupported, so the pipeline asks instead of casting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/flux_kontext.h"
#include "models/unet.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "pipeline/conditioning.h"
#include "sampling/schedule.h"

namespace sd::pipeline {

class ControlNetRunner;

// An encoded reference image: a [w, h, C] latent (w and h even).
struct ReferenceLatent {
  std::vector<float> latent;
  int64_t w = 0, h = 0;
};

// Reference images whose tokens join the image's (FLUX.1 Kontext, FLUX.2, Qwen-Image-Edit).
class ReferenceInput {
 public:
  virtual ~ReferenceInput() = default;
  // In every following prediction, placed by `mode` (models/flux_kontext.h; unset: the
  // network's own way); none to stop.
  virtual void set_references(std::vector<ReferenceLatent> references,
                              std::optional<models::RefIndexMode> mode) = 0;
  // Resized references have latents whose sides are multiples of this many latent pixels
  // (times the VAE's downscale in pixels).
  virtual int reference_latent_multiple() const = 0;
  // Leaves the references set but out of the following predictions (false) or back in
  // them (true): image guidance's unconditional pass. set_references turns them back on.
  virtual void use_references(bool on) = 0;
};

// Predictions with some of the network's blocks left out (skip-layer guidance).
class SkipLayerInput {
 public:
  virtual ~SkipLayerInput() = default;
  virtual std::vector<float> predict_skipping(const std::vector<float>& x, int64_t w, int64_t h,
                                              float timestep, const Conditioning& c,
                                              const std::vector<int>& skip_layers) = 0;
};

// ControlNet residuals added to the network's skip connections (SD's UNets).
class ControlInput {
 public:
  virtual ~ControlInput() = default;
  // The UNet a ControlNet must match.
  virtual const models::UnetConfig& config() const = 0;
  // ControlNet guidance for the predictions that follow: its runner, the control image
  // [8 w, 8 h, hint_channels] in [0, 1] and the strength. A null runner turns it off.
  virtual void set_control(ControlNetRunner* net, std::vector<float> hint = {},
                           float strength = 1.0f) = 0;
};

// Image tokens the network attends to beside the text (Wan's image to video: CLIP vision's
// tokens of the given first and last frames).
class ImageTokenInput {
 public:
  virtual ~ImageTokenInput() = default;
  // f32 [image_token_width(), n], for every following prediction.
  virtual void set_image_tokens(std::vector<float> tokens) = 0;
  virtual int64_t image_token_width() const = 0;
  // Whether the tokens are the first frame's then the last frame's (FLF2V), or the first's.
  virtual bool reads_last_frame_tokens() const = 0;
};

// Frames of a video latent the request fixes (Wan 2.2 TI2V's first frame): the network
// takes them as clean, at timestep 0, while the other frames are at the step's timestep.
class FixedFrameInput {
 public:
  virtual ~FixedFrameInput() = default;
  // One flag per latent frame, for every following prediction; empty: none fixed.
  virtual void set_fixed_frames(std::vector<bool> fixed) = 0;
};

// VACE (Wan 2.1 VACE): a context its VACE blocks read beside the latent, latent planes
// [w, h, frames, vace_channels()] (the control video's latents and mask), their hints to the
// main blocks scaled by a strength.
class VaceInput {
 public:
  virtual ~VaceInput() = default;
  // For every following prediction; the frames must be the latent's.
  virtual void set_vace_context(std::vector<float> context, float strength) = 0;
  virtual int64_t vace_channels() const = 0;
};

class DiffusionNet {
 public:
  virtual ~DiffusionNet() = default;

  // x: [w, h, C] latent planes; `concat` (inpainting models): more channels appended, or
  // empty. Returns one [w, h, C_out] prediction per conditioning, in order.
  virtual std::vector<std::vector<float>> predict(
      const std::vector<float>& x, int64_t w, int64_t h, float timestep,
      const std::vector<const Conditioning*>& conditionings,
      const std::vector<float>& concat = {}) = 0;

  // Every weight a prediction reads, with its shape (graph built, nothing computed).
  virtual std::vector<nn::ParamDecl> parameters() const = 0;
  // The runner its predictions compute through: how its weights were streamed within a
  // --max-vram budget and the arithmetic it ran since the last release() (report_runner).
  virtual const nn::GraphRunner& graph_runner() const = 0;
  // Frees the compute buffer (sampling is over).
  virtual void release() = 0;
  // The latent's width and height must be multiples of this (UNet: one halving per level
  // but the last; FLUX.1: its 2x2 patches).
  virtual int64_t latent_multiple() const = 0;
  // The distilled guidance strength of guidance-distilled models (FLUX.1 dev's
  // --guidance); networks without such an input ignore it.
  virtual void set_distilled_guidance(float) {}
  // A UNet (its step caches differ from a transformer's: sampling/step_cache.h).
  virtual bool is_unet() const { return false; }
  // What the network predicts, found by running it, for files that do not say (SD 2.x);
  // none where it cannot tell.
  virtual std::optional<sampling::Prediction> probe_prediction() { return std::nullopt; }

  // Capabilities: null where the network has none.
  virtual ReferenceInput* references() { return nullptr; }
  virtual SkipLayerInput* skip_layers() { return nullptr; }
  virtual ControlInput* control() { return nullptr; }
  virtual ImageTokenInput* image_tokens() { return nullptr; }
  virtual FixedFrameInput* fixed_frames() { return nullptr; }
  virtual VaceInput* vace() { return nullptr; }
};

}  // namespace sd::pipeline
