// Prompt text -> what the diffusion network is conditioned on, whatever text encoders a
// family uses (CLIP windows for SD, T5 and CLIP-L for FLUX.1).
#pragma once

#include <string>
#include <vector>

#include "nn/param_recorder.h"
#include "pipeline/conditioning.h"

namespace sd::pipeline {

class PromptEncoder {
 public:
  virtual ~PromptEncoder() = default;
  // clip_skip <= 0: the encoder's default.
  virtual Conditioning encode(const std::string& prompt, int clip_skip) = 0;
  // The largest clip_skip the encoders take (their CLIP layers); 0: clip_skip is ignored.
  virtual int max_clip_skip() const { return 0; }
  // Every weight the encoders read, with its shape (graph built, nothing computed).
  virtual std::vector<nn::ParamDecl> parameters() const = 0;
  // How weights were streamed within a --max-vram budget since the last release().
  virtual std::string streaming_report() const = 0;
  // Frees the compute buffers (the text phase is over).
  virtual void release() = 0;
};

}  // namespace sd::pipeline
