// One description per model family: the networks it is made of, where their weights live,
// its latent space and the defaults it samples with. The pipeline builds and drives a
// model from its family's description alone, looked up from the detected version, so
// adding a family is its model file(s) and presets (src/models), one detection entry
// (io/model_version.cpp) and one entry in model_family.cpp.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "io/model_version.h"
#include "models/clip_text.h"
#include "models/flux.h"
#include "models/mmdit.h"
#include "models/unet.h"
#include "models/vae.h"
#include "sampling/samplers.h"
#include "sampling/schedule.h"
#include "sampling/schedulers.h"

namespace sd::pipeline {

// How a family turns a prompt into what its diffusion network is conditioned on.
enum class ConditioningKind {
  // One CLIP text encoder's last (or clip-skipped) hidden states as the cross-attention
  // context, in 77-token windows (SD 1.x, SD 2.x).
  CrossAttentionContext,
  // Two text encoders' clip-skipped hidden states concatenated per token as the context,
  // plus a vector: the second encoder's pooled output and the image-size embeddings
  // (SDXL's label_emb input).
  ContextAndVector,
  // One text encoder's clip-skipped hidden states as the context, plus a vector: its pooled
  // output, the image-size embeddings and an aesthetic-score embedding (SDXL refiner).
  ContextAndAestheticVector,
  // T5-XXL's hidden states as the context and CLIP-L's pooled output as the vector
  // (FLUX.1; pipeline/flux_conditioner.h).
  T5ContextClipVector,
  // SD3: CLIP-L's and CLIP-G's clip-skipped hidden states side by side, padded to T5's
  // width, then T5-XXL's tokens (zeros without a T5 file) as the context; both pooled
  // outputs as the vector (pipeline/sd3_conditioner.h).
  ClipAndT5JointContext,
  // T5-XXL's hidden states alone as the context, in 512-token windows, with its padding
  // mask for T5 and the transformer (Chroma; pipeline/chroma_conditioner.h). No CLIP.
  T5ContextWithMask,
};

// A text encoder of the family and where its weights live (below io::kTextEncoderRoot
// in canonical checkpoints).
struct TextEncoderSpec {
  models::ClipTextConfig (*config)();
  std::string_view scope;
};

struct FamilyDescription {
  io::ModelFamily family = io::ModelFamily::Unknown;

  // The networks.
  std::vector<TextEncoderSpec> text_encoders;
  ConditioningKind conditioning = ConditioningKind::CrossAttentionContext;
  // The diffusion network for one version of the family (inpaint variants take more
  // input channels); an sd::Error for a version this build cannot run.
  models::UnetConfig (*diffusion)(io::ModelVersion version) = nullptr;
  // Set instead of `diffusion` for families whose network is FLUX.1's transformer.
  models::FluxConfig (*flux)(io::ModelVersion version) = nullptr;
  // Set instead for families whose network is SD3's MMDiT.
  models::MmditConfig (*mmdit)(io::ModelVersion version) = nullptr;
  models::VaeConfig (*vae)() = nullptr;

  // The latent space: channels, and the factor the VAE latent is scaled by for sampling.
  int64_t latent_channels = 4;
  float scale_factor = 0.18215f;
  float shift_factor = 0.0f;

  // Sampling defaults. prediction unset: the files do not say (SD 2.x 768-v and 512-base
  // have the same tensors), so the UNet is probed once before the first generation.
  sampling::SampleMethod sample_method = sampling::SampleMethod::EulerA;
  std::optional<sampling::Prediction> prediction;
  sampling::AysLevels ays_levels = sampling::AysLevels::None;
  // The scheduler of samplers that have none of their own (sd.cpp: flux for FLUX.1);
  // unset: discrete.
  std::optional<sampling::Scheduler> scheduler;
  // The flow schedule's shift for a version (flow predictions only); null: 3 (SD3's).
  float (*flow_shift)(io::ModelVersion version) = nullptr;

  // The networks' dimensions come from the file (pipeline/model_shapes.h), the presets
  // giving only what tensors cannot tell.
  bool shapes_from_file = false;
  // sd.cpp compatibility: an empty negative prompt gives an all-zero context (SDXL eps
  // models); its vector is still computed from the empty prompt.
  bool zero_context_for_empty_negative = false;
  // --timestep-shift applies (sd.cpp: SDXL only).
  bool timestep_shift = false;

  // The VAE config with this family's latent space.
  models::VaeConfig vae_config() const;
  // Without a --scheduler: the sampler's and prediction's choice, as sd.cpp makes it.
  sampling::Scheduler default_scheduler(sampling::SampleMethod method,
                                        sampling::Prediction prediction) const;
  float default_flow_shift(io::ModelVersion version) const {
    return flow_shift ? flow_shift(version) : 3.0f;
  }
};

// The description of `version`'s family. Throws sd::Error naming the version for a
// family this build does not run.
const FamilyDescription& family_description(io::ModelVersion version);

// Every family this build runs, for messages and tests.
const std::vector<const FamilyDescription*>& supported_families();

}  // namespace sd::pipeline
