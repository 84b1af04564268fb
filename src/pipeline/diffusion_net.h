// What the sampling loop needs from a diffusion network, whatever its architecture (a UNet,
// FLUX.1's transformer): one prediction per conditioning for a latent and a timestep, the
// weights it reads, and the sizes it takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/param_recorder.h"
#include "pipeline/conditioning.h"

namespace sd::pipeline {

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
  // How weights were streamed within a --max-vram budget since the last release().
  virtual std::string streaming_report() const = 0;
  // Frees the compute buffer (sampling is over).
  virtual void release() = 0;
  // The latent's width and height must be multiples of this (UNet: one halving per level
  // but the last; FLUX.1: its 2x2 patches).
  virtual int64_t latent_multiple() const = 0;
  // The distilled guidance strength of guidance-distilled models (FLUX.1 dev's
  // --guidance); networks without such an input ignore it.
  virtual void set_distilled_guidance(float) {}
};

}  // namespace sd::pipeline
