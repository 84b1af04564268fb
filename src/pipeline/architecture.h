// The networks one model is made of, with their shapes: what a family object reads from
// the files (families/family.h), or what tests give to run the pipeline on tiny networks.
#pragma once

#include <optional>

#include "io/model_version.h"
#include "models/clip_text.h"
#include "models/clip_vision.h"
#include "models/flux.h"
#include "models/llm.h"
#include "models/mmdit.h"
#include "models/qwen_image.h"
#include "models/qwen_vl_vision.h"
#include "models/t5.h"
#include "models/unet.h"
#include "models/vae.h"
#include "models/wan.h"
#include "models/z_image.h"

namespace sd::pipeline {

// Normally chosen from the detected model version; tests give tiny ones (with the SD 1.x
// names) to run the whole pipeline in milliseconds. Which members a model uses is its
// family's business: the orchestrator reads only `version` and `vae`.
struct Architecture {
  io::ModelVersion version = io::ModelVersion::SD1;
  models::UnetConfig unet;
  models::ClipTextConfig text;
  std::optional<models::ClipTextConfig> text2;          // a second CLIP encoder (with a projection)
  std::optional<models::FluxConfig> flux;               // a FLUX.1 transformer instead of the UNet
  std::optional<models::MmditConfig> mmdit;             // an MMDiT instead of the UNet
  std::optional<models::T5Config> t5;                   // a T5-XXL encoder
  std::optional<models::ZImageConfig> z_image;          // Z-Image's single-stream transformer
  std::optional<models::QwenImageConfig> qwen_image;    // Qwen-Image's MMDiT
  std::optional<models::WanConfig> wan;                 // Wan's video transformer
  std::optional<models::WanConfig> wan_high_noise;      // Wan 2.2 A14B's high-noise expert
  std::optional<models::LlmConfig> llm;                 // an LLM text encoder
  std::optional<models::QwenVisionConfig> llm_vision;   // its vision tower (Qwen2.5-VL's)
  std::optional<models::ClipVisionConfig> clip_vision;  // an image encoder (--clip_vision)
  models::VaeConfig vae;
};

}  // namespace sd::pipeline
