// Prompt text -> what the diffusion network is conditioned on, whatever text encoders a
// family uses (CLIP windows for SD, T5 and CLIP-L for FLUX.1).
#pragma once

#include <string>
#include <vector>

#include "nn/param_recorder.h"
#include "pipeline/conditioning.h"

namespace sd::io {
struct Image;
}

namespace sd::pipeline {

// Prompt encoders that can also be shown images (an LLM with a vision tower:
// Qwen-Image-Edit's references).
class PromptImageInput {
 public:
  virtual ~PromptImageInput() = default;
  // The images every following prompt is read with, in order; none to stop. They must
  // outlive their use.
  virtual void set_prompt_images(std::vector<const io::Image*> images) = 0;
};

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
  // Null where the encoder reads text only.
  virtual PromptImageInput* prompt_images() { return nullptr; }
};

}  // namespace sd::pipeline
