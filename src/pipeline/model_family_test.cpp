#include "pipeline/model_family.h"

#include <gtest/gtest.h>

#include <string>

#include "io/name_conversion.h"
#include "tensor/error.h"

namespace sd::pipeline {
namespace {

using io::ModelVersion;

TEST(ModelFamily, SD1IsClipLAndAnEpsUnet) {
  const FamilyDescription& d = family_description(ModelVersion::SD1);
  EXPECT_EQ(d.family, io::ModelFamily::SD1);
  ASSERT_EQ(d.text_encoders.size(), 1u);
  EXPECT_EQ(d.text_encoders[0].config().hidden, models::ClipTextConfig::vit_l14().hidden);
  EXPECT_EQ(d.diffusion(ModelVersion::SD1).in_channels, 4);
  EXPECT_EQ(d.diffusion(ModelVersion::SD1Inpaint).in_channels, 9);
  EXPECT_EQ(d.prediction, sampling::Prediction::Eps);
  EXPECT_EQ(d.sample_method, sampling::SampleMethod::EulerA);
  EXPECT_EQ(d.ays_levels, sampling::AysLevels::SD1);
}

TEST(ModelFamily, SD2IsOpenClipHAndProbesItsPrediction) {
  const FamilyDescription& d = family_description(ModelVersion::SD2Inpaint);
  EXPECT_EQ(d.family, io::ModelFamily::SD2);
  EXPECT_EQ(d.text_encoders[0].config().hidden, models::ClipTextConfig::vit_h14().hidden);
  EXPECT_EQ(d.text_encoders[0].config().default_clip_skip, 2);
  EXPECT_EQ(d.diffusion(ModelVersion::SD2).context_dim, 1024);
  EXPECT_EQ(d.diffusion(ModelVersion::SD2Inpaint).in_channels, 9);
  EXPECT_FALSE(d.prediction.has_value());
  EXPECT_EQ(d.ays_levels, sampling::AysLevels::SD1);  // AYS has no SD2 levels
}

// The presets the description gives are the ones the pipeline used before the registry.
TEST(ModelFamily, SDXLIsTwoEncodersAndAVector) {
  const FamilyDescription& d = family_description(ModelVersion::SDXL);
  EXPECT_EQ(d.family, io::ModelFamily::SDXL);
  ASSERT_EQ(d.text_encoders.size(), 2u);
  EXPECT_EQ(d.text_encoders[0].config().hidden + d.text_encoders[1].config().hidden, 2048);
  EXPECT_FALSE(d.text_encoders[0].config().final_layer_norm);
  EXPECT_EQ(d.text_encoders[1].config().projection_dim, 1280);
  EXPECT_EQ(d.text_encoders[1].config().default_clip_skip, 2);
  EXPECT_EQ(d.conditioning, ConditioningKind::ContextAndVector);
  const models::UnetConfig u = d.diffusion(ModelVersion::SDXL);
  EXPECT_EQ(u.context_dim, 2048);
  EXPECT_EQ(u.adm_in_channels, 2816);
  EXPECT_EQ(u.depth_at(0), 0);
  EXPECT_EQ(u.depth_at(1), 2);
  EXPECT_EQ(u.depth_at(2), 10);
  EXPECT_EQ(u.depth_middle(), 10);
  EXPECT_EQ(d.vae_config().scale_factor, 0.13025f);
  EXPECT_EQ(d.prediction, sampling::Prediction::Eps);
  EXPECT_TRUE(d.shapes_from_file);
  EXPECT_TRUE(d.zero_context_for_empty_negative);
  // Every SDXL UNet but Instruct-Pix2Pix runs; its blocks come from the file.
  for (ModelVersion v :
       {ModelVersion::SDXLInpaint, ModelVersion::SDXLSSD1B, ModelVersion::SDXLVega})
    EXPECT_EQ(family_description(v).diffusion(v).context_dim, 2048) << io::version_name(v);
  EXPECT_THROW(d.diffusion(ModelVersion::SDXLPix2Pix), Error);
}

TEST(ModelFamily, SDXLRefinerIsBigGAloneAndAnAestheticVector) {
  const FamilyDescription& d = family_description(ModelVersion::SDXLRefiner);
  EXPECT_EQ(d.family, io::ModelFamily::SDXL);
  ASSERT_EQ(d.text_encoders.size(), 1u);
  const models::ClipTextConfig bigg = d.text_encoders[0].config();
  EXPECT_EQ(bigg.hidden, 1280);
  EXPECT_EQ(bigg.projection_dim, 1280);
  EXPECT_EQ(bigg.pad_token, 0);  // OpenCLIP's padding
  EXPECT_EQ(bigg.default_clip_skip, 2);
  EXPECT_EQ(d.conditioning, ConditioningKind::ContextAndAestheticVector);
  const models::UnetConfig u = d.diffusion(ModelVersion::SDXLRefiner);
  EXPECT_EQ(u.context_dim, 1280);
  EXPECT_EQ(u.adm_in_channels, 2560);
  EXPECT_EQ(u.channel_mult.size(), 4u);
  EXPECT_FALSE(d.zero_context_for_empty_negative);
  EXPECT_EQ(d.vae_config().scale_factor, 0.13025f);
  // The base keeps its own description.
  EXPECT_EQ(family_description(ModelVersion::SDXL).conditioning,
            ConditioningKind::ContextAndVector);
}

TEST(ModelFamily, LatentSpaceIsTheSdVae) {
  for (ModelVersion v : {ModelVersion::SD1, ModelVersion::SD2}) {
    const models::VaeConfig c = family_description(v).vae_config();
    const models::VaeConfig sd = models::VaeConfig::sd();
    EXPECT_EQ(c.z_channels, sd.z_channels);
    EXPECT_EQ(c.embed_dim, sd.embed_dim);
    EXPECT_EQ(c.scale_factor, sd.scale_factor);
    EXPECT_EQ(c.downscale(), 8);
  }
}

TEST(ModelFamily, DefaultSchedulerFollowsSamplerAndPrediction) {
  const FamilyDescription& d = family_description(ModelVersion::SD1);
  using sampling::Prediction;
  using sampling::SampleMethod;
  using sampling::Scheduler;
  EXPECT_EQ(d.default_scheduler(SampleMethod::EulerA, Prediction::Eps), Scheduler::Discrete);
  EXPECT_EQ(d.default_scheduler(SampleMethod::Lcm, Prediction::Eps), Scheduler::Lcm);
  EXPECT_EQ(d.default_scheduler(SampleMethod::Euler, Prediction::EdmV), Scheduler::Exponential);
}

TEST(ModelFamily, TextEncodersLiveBelowTheTextEncoderRoot) {
  for (const FamilyDescription* f : supported_families())
    for (const TextEncoderSpec& t : f->text_encoders) {
      // SD3 checkpoints keep theirs under text_encoders.clip_l. / clip_g. (io::kClipLRoot).
      const std::string_view root = f->family == io::ModelFamily::SD3
                                        ? std::string_view("text_encoders.")
                                        : io::kTextEncoderRoot;
      EXPECT_EQ(t.scope.substr(0, root.size()), root) << io::family_name(f->family);
    }
}

TEST(ModelFamily, Sd3IsTwoClipsAndT5AnMmditAnd16Channels) {
  const FamilyDescription& d = family_description(ModelVersion::SD3_5Medium);
  EXPECT_EQ(d.family, io::ModelFamily::SD3);
  EXPECT_EQ(d.conditioning, ConditioningKind::ClipAndT5JointContext);
  ASSERT_EQ(d.text_encoders.size(), 2u);
  EXPECT_EQ(d.text_encoders[0].config().hidden + d.text_encoders[1].config().projection_dim,
            2048);                                      // the pooled vector
  EXPECT_EQ(d.text_encoders[1].config().pad_token, 0);  // OpenCLIP pads with "!"
  EXPECT_EQ(d.diffusion, nullptr);
  EXPECT_EQ(d.mmdit(ModelVersion::SD3).x_self_attn_blocks, 0);
  EXPECT_EQ(d.mmdit(ModelVersion::SD3_5Medium).x_self_attn_blocks, 13);
  EXPECT_EQ(d.mmdit(ModelVersion::SD3_5Large).depth, 38);
  const models::VaeConfig v = d.vae_config();
  EXPECT_EQ(v.z_channels, 16);
  EXPECT_EQ(v.scale_factor, 1.5305f);
  EXPECT_EQ(v.shift_factor, 0.0609f);
  EXPECT_FALSE(v.use_quant_conv);
  EXPECT_EQ(d.prediction, sampling::Prediction::Sd3Flow);
  EXPECT_EQ(d.sample_method, sampling::SampleMethod::Euler);
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Euler, *d.prediction),
            sampling::Scheduler::Discrete);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::SD3), 3.0f);
  EXPECT_FALSE(d.zero_context_for_empty_negative);
}

TEST(ModelFamily, FluxIsT5AndClipLAFlowTransformerAnd16Channels) {
  const FamilyDescription& d = family_description(ModelVersion::FluxSchnell);
  EXPECT_EQ(d.family, io::ModelFamily::Flux);
  EXPECT_EQ(d.conditioning, ConditioningKind::T5ContextClipVector);
  EXPECT_EQ(d.diffusion, nullptr);
  EXPECT_TRUE(d.flux(ModelVersion::Flux).guidance_embed);
  EXPECT_FALSE(d.flux(ModelVersion::FluxSchnell).guidance_embed);
  // Fill: dev's guidance, and the masked image's latent and the folded mask in img_in.
  EXPECT_TRUE(d.flux(ModelVersion::FluxFill).guidance_embed);
  EXPECT_EQ(d.flux(ModelVersion::FluxFill).in_channels, 384);
  EXPECT_EQ(d.flux(ModelVersion::FluxFill).out_channels, 64);
  const models::VaeConfig v = d.vae_config();
  EXPECT_EQ(v.z_channels, 16);
  EXPECT_EQ(v.embed_dim, 16);
  EXPECT_EQ(v.scale_factor, 0.3611f);
  EXPECT_EQ(v.shift_factor, 0.1159f);
  EXPECT_FALSE(v.use_quant_conv);
  EXPECT_EQ(d.prediction, sampling::Prediction::FluxFlow);
  EXPECT_EQ(d.sample_method, sampling::SampleMethod::Euler);
  // sd.cpp: the flux scheduler unless the sampler brings its own; shift 1.15 for dev only.
  using sampling::Scheduler;
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Euler, *d.prediction), Scheduler::Flux);
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Lcm, *d.prediction), Scheduler::Lcm);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::Flux), 1.15f);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::FluxSchnell), 1.0f);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::FluxFill), 1.15f);
}

TEST(ModelFamily, UnsupportedVersionsAreNamed) {
  for (ModelVersion v : {ModelVersion::Unknown}) {
    try {
      family_description(v);
      ADD_FAILURE() << io::version_name(v);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(io::version_name(v)), std::string::npos) << what;
      EXPECT_NE(what.find("SD1.x, SD2.x, SDXL, Flux, SD3 and Chroma"), std::string::npos) << what;
    }
  }
  // A variant of a supported family this build cannot run.
  EXPECT_THROW(family_description(ModelVersion::SDXLPix2Pix).diffusion(ModelVersion::SDXLPix2Pix),
               Error);
  // Instruct-pix2pix: SD 1.x's UNet with the edited image's latent as 4 more input channels.
  EXPECT_EQ(
      family_description(ModelVersion::SD1Pix2Pix).diffusion(ModelVersion::SD1Pix2Pix).in_channels,
      8);
}

}  // namespace
}  // namespace sd::pipeline
