#include "pipeline/families/family.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "io/name_conversion.h"
#include "pipeline/families/registry.h"
#include "pipeline/families/unet_family.h"
#include "tensor/error.h"

namespace sd::pipeline {
namespace {

using io::ModelVersion;

const UnetFamily& unet_family(ModelVersion v) {
  const auto* f = dynamic_cast<const UnetFamily*>(&family_for(v));
  if (!f) fail("%s is not a UNet family", io::version_name(v));
  return *f;
}

TEST(Family, SD1IsClipLAndAnEpsUnet) {
  const UnetFamily& d = unet_family(ModelVersion::SD1);
  EXPECT_EQ(d.id(), io::ModelFamily::SD1);
  ASSERT_EQ(d.text_encoders().size(), 1u);
  EXPECT_EQ(d.text_encoders()[0].config().hidden, models::ClipTextConfig::vit_l14().hidden);
  EXPECT_EQ(d.unet(ModelVersion::SD1).in_channels, 4);
  EXPECT_EQ(d.unet(ModelVersion::SD1Inpaint).in_channels, 9);
  EXPECT_EQ(d.defaults().prediction, sampling::Prediction::Eps);
  EXPECT_EQ(d.defaults().sample_method, sampling::SampleMethod::EulerA);
  EXPECT_EQ(d.defaults().ays_levels, sampling::AysLevels::SD1);
  EXPECT_EQ(d.image_input(ModelVersion::SD1), ImageInput::None);
  EXPECT_EQ(d.image_input(ModelVersion::SD1Inpaint), ImageInput::MaskedImage);
  EXPECT_EQ(d.image_input(ModelVersion::SD1Pix2Pix), ImageInput::EditImage);
}

TEST(Family, SD2IsOpenClipHAndProbesItsPrediction) {
  const UnetFamily& d = unet_family(ModelVersion::SD2Inpaint);
  EXPECT_EQ(d.id(), io::ModelFamily::SD2);
  EXPECT_EQ(d.text_encoders()[0].config().hidden, models::ClipTextConfig::vit_h14().hidden);
  EXPECT_EQ(d.text_encoders()[0].config().default_clip_skip, 2);
  EXPECT_EQ(d.unet(ModelVersion::SD2).context_dim, 1024);
  EXPECT_EQ(d.unet(ModelVersion::SD2Inpaint).in_channels, 9);
  EXPECT_FALSE(d.defaults().prediction.has_value());
  EXPECT_EQ(d.defaults().ays_levels, sampling::AysLevels::SD1);  // AYS has no SD2 levels
}

TEST(Family, SDXLIsTwoEncodersAndAVector) {
  const UnetFamily& d = unet_family(ModelVersion::SDXL);
  EXPECT_EQ(d.id(), io::ModelFamily::SDXL);
  ASSERT_EQ(d.text_encoders().size(), 2u);
  EXPECT_EQ(d.text_encoders()[0].config().hidden + d.text_encoders()[1].config().hidden, 2048);
  EXPECT_FALSE(d.text_encoders()[0].config().final_layer_norm);
  EXPECT_EQ(d.text_encoders()[1].config().projection_dim, 1280);
  EXPECT_EQ(d.text_encoders()[1].config().default_clip_skip, 2);
  const models::UnetConfig u = d.unet(ModelVersion::SDXL);
  EXPECT_EQ(u.context_dim, 2048);
  EXPECT_EQ(u.adm_in_channels, 2816);
  EXPECT_EQ(u.depth_at(0), 0);
  EXPECT_EQ(u.depth_at(1), 2);
  EXPECT_EQ(u.depth_at(2), 10);
  EXPECT_EQ(u.depth_middle(), 10);
  EXPECT_EQ(d.vae_config().scale_factor, 0.13025f);
  EXPECT_EQ(d.defaults().prediction, sampling::Prediction::Eps);
  EXPECT_TRUE(d.defaults().timestep_shift);
  // Every SDXL UNet but Instruct-Pix2Pix runs; its blocks come from the file.
  for (ModelVersion v :
       {ModelVersion::SDXLInpaint, ModelVersion::SDXLSSD1B, ModelVersion::SDXLVega})
    EXPECT_EQ(unet_family(v).unet(v).context_dim, 2048) << io::version_name(v);
  EXPECT_THROW(d.unet(ModelVersion::SDXLPix2Pix), Error);
}

// sd.cpp: an empty negative prompt is an all-zero context; the vector is the pooled text
// and the image sizes either way.
TEST(Family, SDXLConditioningGetsItsSizeVector) {
  const Family& d = family_for(ModelVersion::SDXL);
  Conditioning c;
  c.context.assign(8, 1.0f);
  c.pooled.assign(1280, 0.5f);
  Conditioning negative = c;
  d.complete_conditioning(c, "", false, 1024, 768);
  EXPECT_EQ(c.context, std::vector<float>(8, 1.0f));  // the prompt's context is kept
  EXPECT_EQ(c.vector.size(), 2816u);
  d.complete_conditioning(negative, "", true, 1024, 768);
  EXPECT_EQ(negative.context, std::vector<float>(8, 0.0f));
  EXPECT_EQ(negative.vector, c.vector);
  Conditioning written = c;
  d.complete_conditioning(written, "blurry", true, 1024, 768);
  EXPECT_EQ(written.context, std::vector<float>(8, 1.0f));
}

TEST(Family, SDXLRefinerIsBigGAloneAndAnAestheticVector) {
  const UnetFamily& d = unet_family(ModelVersion::SDXLRefiner);
  EXPECT_NE(&d, &family_for(ModelVersion::SDXL));  // an object of its own
  EXPECT_EQ(d.id(), io::ModelFamily::SDXL);
  ASSERT_EQ(d.text_encoders().size(), 1u);
  const models::ClipTextConfig bigg = d.text_encoders()[0].config();
  EXPECT_EQ(bigg.hidden, 1280);
  EXPECT_EQ(bigg.projection_dim, 1280);
  EXPECT_EQ(bigg.pad_token, 0);  // OpenCLIP's padding
  EXPECT_EQ(bigg.default_clip_skip, 2);
  const models::UnetConfig u = d.unet(ModelVersion::SDXLRefiner);
  EXPECT_EQ(u.context_dim, 1280);
  EXPECT_EQ(u.adm_in_channels, 2560);
  EXPECT_EQ(u.channel_mult.size(), 4u);
  EXPECT_EQ(d.vae_config().scale_factor, 0.13025f);
  // An empty negative prompt is encoded, not zeroed; its aesthetic score differs.
  Conditioning c;
  c.context.assign(4, 1.0f);
  c.pooled.assign(1280, 0.5f);
  Conditioning negative = c;
  d.complete_conditioning(c, "", false, 1024, 1024);
  d.complete_conditioning(negative, "", true, 1024, 1024);
  EXPECT_EQ(negative.context, std::vector<float>(4, 1.0f));
  EXPECT_EQ(c.vector.size(), 2560u);
  EXPECT_NE(c.vector, negative.vector);
}

TEST(Family, LatentSpaceIsTheSdVae) {
  for (ModelVersion v : {ModelVersion::SD1, ModelVersion::SD2}) {
    const models::VaeConfig c = family_for(v).vae_config();
    const models::VaeConfig sd = models::VaeConfig::sd();
    EXPECT_EQ(c.z_channels, sd.z_channels);
    EXPECT_EQ(c.embed_dim, sd.embed_dim);
    EXPECT_EQ(c.scale_factor, sd.scale_factor);
    EXPECT_EQ(c.downscale(), 8);
  }
}

TEST(Family, DefaultSchedulerFollowsSamplerAndPrediction) {
  const Family& d = family_for(ModelVersion::SD1);
  using sampling::Prediction;
  using sampling::SampleMethod;
  using sampling::Scheduler;
  EXPECT_EQ(d.default_scheduler(SampleMethod::EulerA, Prediction::Eps), Scheduler::Discrete);
  EXPECT_EQ(d.default_scheduler(SampleMethod::Lcm, Prediction::Eps), Scheduler::Lcm);
  EXPECT_EQ(d.default_scheduler(SampleMethod::Euler, Prediction::EdmV), Scheduler::Exponential);
}

TEST(Family, TextEncodersLiveBelowTheTextEncoderRoot) {
  for (const Family* f : supported_families()) {
    const auto* unet = dynamic_cast<const UnetFamily*>(f);
    if (!unet) continue;
    for (const TextEncoderSpec& t : unet->text_encoders())
      EXPECT_EQ(t.scope.substr(0, io::kTextEncoderRoot.size()), io::kTextEncoderRoot) << f->name();
  }
}

TEST(Family, Sd3IsAFlowMmditOn16Channels) {
  const Family& d = family_for(ModelVersion::SD3_5Medium);
  EXPECT_EQ(d.id(), io::ModelFamily::SD3);
  EXPECT_EQ(dynamic_cast<const UnetFamily*>(&d), nullptr);
  const models::VaeConfig v = d.vae_config();
  EXPECT_EQ(v.z_channels, 16);
  EXPECT_EQ(v.scale_factor, 1.5305f);
  EXPECT_EQ(v.shift_factor, 0.0609f);
  EXPECT_FALSE(v.use_quant_conv);
  EXPECT_EQ(d.defaults().prediction, sampling::Prediction::Sd3Flow);
  EXPECT_EQ(d.defaults().sample_method, sampling::SampleMethod::Euler);
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Euler, *d.defaults().prediction),
            sampling::Scheduler::Discrete);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::SD3), 3.0f);
  // Its checkpoints keep the encoders under text_encoders.
  const std::vector<std::string> roots = d.text_encoder_roots(Architecture{});
  EXPECT_NE(std::find(roots.begin(), roots.end(), "text_encoders."), roots.end());
  EXPECT_EQ(d.image_input(ModelVersion::SD3_5Medium), ImageInput::None);
}

TEST(Family, FluxIsAFlowTransformerOn16Channels) {
  const Family& d = family_for(ModelVersion::FluxSchnell);
  EXPECT_EQ(d.id(), io::ModelFamily::Flux);
  const models::VaeConfig v = d.vae_config();
  EXPECT_EQ(v.z_channels, 16);
  EXPECT_EQ(v.embed_dim, 16);
  EXPECT_EQ(v.scale_factor, 0.3611f);
  EXPECT_EQ(v.shift_factor, 0.1159f);
  EXPECT_FALSE(v.use_quant_conv);
  EXPECT_EQ(d.defaults().prediction, sampling::Prediction::FluxFlow);
  EXPECT_EQ(d.defaults().sample_method, sampling::SampleMethod::Euler);
  // sd.cpp: the flux scheduler unless the sampler brings its own; shift 1.15 for dev only.
  using sampling::Scheduler;
  const sampling::Prediction p = *d.defaults().prediction;
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Euler, p), Scheduler::Flux);
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Lcm, p), Scheduler::Lcm);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::Flux), 1.15f);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::FluxSchnell), 1.0f);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::FluxFill), 1.15f);
  // Fill inpaints through the transformer's input; it takes no reference images.
  EXPECT_EQ(d.image_input(ModelVersion::FluxFill), ImageInput::MaskedImage);
  EXPECT_EQ(d.image_input(ModelVersion::Flux), ImageInput::None);
  ImageRequest r;
  io::Image ref;
  r.ref_images = {&ref};
  EXPECT_THROW(d.check_request(ModelVersion::FluxFill, r), Error);
  EXPECT_NO_THROW(d.check_request(ModelVersion::Flux, r));
  // Fill's image input: the masked latent's planes, then the mask folded 8x8 (64 planes).
  const int W = 16, H = 16, f = 8;
  const std::vector<float> latent(2 * 2 * 16, 0.25f), mask(W * H, 1.0f), latent_mask(4, 1.0f);
  EXPECT_EQ(d.masked_image_input(latent, mask, latent_mask, W, H, f).size(), 4u * (16 + 64));
}

TEST(Family, ChromaIsFluxOnT5AloneWithShift1) {
  const Family& d = family_for(ModelVersion::Chroma);
  EXPECT_EQ(d.id(), io::ModelFamily::Chroma);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::Chroma), 1.0f);
  EXPECT_EQ(d.vae_config().z_channels, 16);
}

// Z-Image: FLUX.1's latent space, euler on the discrete flow schedule shifted by 3 (sd.cpp's
// defaults for it), and an LLM as its only text encoder.
TEST(Family, ZImageIsFluxLatentsOnAShiftedFlow) {
  const Family& d = family_for(ModelVersion::ZImage);
  EXPECT_EQ(d.id(), io::ModelFamily::ZImage);
  EXPECT_EQ(d.vae_config().z_channels, 16);
  EXPECT_EQ(d.defaults().scale_factor, 0.3611f);
  EXPECT_EQ(d.defaults().shift_factor, 0.1159f);
  EXPECT_EQ(d.defaults().prediction, sampling::Prediction::Sd3Flow);
  EXPECT_EQ(d.defaults().sample_method, sampling::SampleMethod::Euler);
  EXPECT_FALSE(d.defaults().scheduler.has_value());
  EXPECT_EQ(d.default_flow_shift(ModelVersion::ZImage), 3.0f);
  Architecture arch;
  EXPECT_EQ(d.text_encoder_roots(arch), (std::vector<std::string>{"text_encoders.llm."}));
}

// FLUX.2: 32-channel latents in 2x2 patches under batch-norm statistics (no scale or shift
// factors), euler on FLUX.2's own schedule with the timestep being sigma, and an LLM as its
// only text encoder.
TEST(Family, Flux2IsPatchedLatentsOnItsOwnSchedule) {
  const Family& d = family_for(ModelVersion::Flux2Klein);
  EXPECT_EQ(d.id(), io::ModelFamily::Flux2);
  const models::VaeConfig vae = d.vae_config();
  EXPECT_EQ(vae.z_channels, 32);
  EXPECT_EQ(vae.latent_channels(), 128);
  EXPECT_EQ(vae.downscale(), 16);
  EXPECT_TRUE(vae.batch_norm_latent);
  EXPECT_TRUE(vae.use_quant_conv);
  EXPECT_EQ(vae.scale_factor, 1.0f);
  EXPECT_EQ(d.defaults().prediction, sampling::Prediction::FluxFlow);
  EXPECT_EQ(d.defaults().sample_method, sampling::SampleMethod::Euler);
  EXPECT_EQ(d.default_scheduler(sampling::SampleMethod::Euler, sampling::Prediction::FluxFlow),
            sampling::Scheduler::Flux2);
  EXPECT_EQ(d.default_flow_shift(ModelVersion::Flux2Klein), 1.0f);
  Architecture arch;
  EXPECT_EQ(d.text_encoder_roots(arch), (std::vector<std::string>{"text_encoders.llm."}));
}

// The SD inpainting UNets read the latent mask, then the masked image's latent.
TEST(Family, UnetInpaintInputIsTheMaskThenTheLatent) {
  const Family& d = family_for(ModelVersion::SD1Inpaint);
  const std::vector<float> latent = {1, 2, 3, 4}, mask(64, 1.0f), latent_mask = {9};
  EXPECT_EQ(d.masked_image_input(latent, mask, latent_mask, 8, 8, 8),
            (std::vector<float>{9, 1, 2, 3, 4}));
}

// Each detected version has exactly one family object, and every family is listed.
TEST(Family, EveryVersionHasOneFamily) {
  std::set<io::ModelFamily> ids;
  for (const Family* f : supported_families()) ids.insert(f->id());
  EXPECT_EQ(ids.size(), 10u);
  for (int i = 1; i <= static_cast<int>(ModelVersion::Wan); ++i) {
    const auto v = static_cast<ModelVersion>(i);
    int runners = 0;
    for (const Family* f : supported_families()) runners += f->runs(v) ? 1 : 0;
    EXPECT_EQ(runners, 1) << io::version_name(v);
    EXPECT_EQ(family_for(v).id(), io::family_of(v)) << io::version_name(v);
  }
}

TEST(Family, UnsupportedVersionsAreNamed) {
  try {
    family_for(ModelVersion::Unknown);
    ADD_FAILURE() << "Unknown has a family";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(io::version_name(ModelVersion::Unknown)), std::string::npos) << what;
    EXPECT_NE(
        what.find("SD1.x, SD2.x, SDXL, Flux, SD3, Chroma, Z-Image, Flux.2, Qwen-Image and Wan"),
        std::string::npos)
        << what;
  }
  // A variant of a supported family this build cannot run.
  EXPECT_THROW(unet_family(ModelVersion::SDXLPix2Pix).unet(ModelVersion::SDXLPix2Pix), Error);
  // Instruct-pix2pix: SD 1.x's UNet with the edited image's latent as 4 more input channels.
  EXPECT_EQ(unet_family(ModelVersion::SD1Pix2Pix).unet(ModelVersion::SD1Pix2Pix).in_channels, 8);
}

}  // namespace
}  // namespace sd::pipeline
