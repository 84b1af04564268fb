#include "io/model_version.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io_test_util.h"

namespace sd::io {
namespace {

// A tensor with a PyTorch (slowest-first) shape, as a file states it.
TensorInfo t(const std::string& name, std::vector<int64_t> torch_shape = {1}) {
  TensorInfo info;
  info.name = name;
  info.n_dims = static_cast<int>(torch_shape.size());
  for (size_t i = 0; i < torch_shape.size(); ++i) {
    info.ne[i] = torch_shape[torch_shape.size() - 1 - i];
  }
  return info;
}

// The tensors detection looks at, for a UNet model in checkpoint spelling.
std::vector<TensorInfo> unet_model(int64_t in_channels, int64_t context, bool first_level_attn,
                                   const std::vector<TensorInfo>& text) {
  const std::string d = "model.diffusion_model.";
  std::vector<TensorInfo> v = {
      t(d + "input_blocks.0.0.weight", {320, in_channels, 3, 3}),
      t(d + "input_blocks.0.0.bias", {320}),
      t(d + "middle_block.1.transformer_blocks.0.attn2.to_k.weight", {1280, context}),
      t("first_stage_model.decoder.conv_out.weight", {3, 128, 3, 3}),
  };
  if (first_level_attn) {
    v.push_back(t(d + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight", {320, context}));
  }
  v.insert(v.end(), text.begin(), text.end());
  return v;
}

const std::vector<TensorInfo> kClipL = {
    t("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", {49408, 768})};
const std::vector<TensorInfo> kOpenClipH = {
    t("cond_stage_model.model.token_embedding.weight", {49408, 1024}),
    t("cond_stage_model.model.transformer.resblocks.0.attn.in_proj_weight", {3072, 1024})};
const std::vector<TensorInfo> kSdxlText = {
    t("conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight",
      {49408, 768}),
    t("conditioner.embedders.1.model.token_embedding.weight", {49408, 1280})};

std::vector<TensorInfo> sdxl(int64_t in_channels) {
  auto v = unet_model(in_channels, 2048, false, kSdxlText);
  v.push_back(t("model.diffusion_model.label_emb.0.0.weight", {1280, 2816}));
  return v;
}

TEST(ModelVersion, UnetFamilies) {
  EXPECT_EQ(detect_version(unet_model(4, 768, true, kClipL)), ModelVersion::SD1);
  EXPECT_EQ(detect_version(unet_model(9, 768, true, kClipL)), ModelVersion::SD1Inpaint);
  EXPECT_EQ(detect_version(unet_model(8, 768, true, kClipL)), ModelVersion::SD1Pix2Pix);
  EXPECT_EQ(detect_version(unet_model(4, 1024, true, kOpenClipH)), ModelVersion::SD2);
  EXPECT_EQ(detect_version(unet_model(9, 1024, true, kOpenClipH)), ModelVersion::SD2Inpaint);
  EXPECT_EQ(detect_version(sdxl(4)), ModelVersion::SDXL);
  EXPECT_EQ(detect_version(sdxl(9)), ModelVersion::SDXLInpaint);
  EXPECT_EQ(detect_version(sdxl(8)), ModelVersion::SDXLPix2Pix);
  // The refiner's only encoder is OpenCLIP-bigG, as embedder 0.
  auto refiner = unet_model(
      4, 1280, false, {t("conditioner.embedders.0.model.token_embedding.weight", {49408, 1280})});
  refiner.push_back(t("model.diffusion_model.label_emb.0.0.weight", {1536, 2560}));
  EXPECT_EQ(detect_version(refiner), ModelVersion::SDXLRefiner);
}

// sd.cpp's test: no middle transformer is a Segmind distilled UNet; two transformer blocks
// in output_blocks.3 make it SSD-1B, fewer Vega.
TEST(ModelVersion, SegmindDistilledUnets) {
  const std::string d = "model.diffusion_model.";
  auto without_middle = [&](bool output3_has_two) {
    std::vector<TensorInfo> v;
    for (TensorInfo& i : sdxl(4))
      if (i.name.find("middle_block.1.") == std::string::npos) v.push_back(i);
    v.push_back(t(d + "input_blocks.4.1.transformer_blocks.0.attn2.to_k.weight", {640, 2048}));
    v.push_back(t(d + "output_blocks.3.1.transformer_blocks.0.norm1.weight", {640}));
    if (output3_has_two)
      v.push_back(t(d + "output_blocks.3.1.transformer_blocks.1.norm1.weight", {640}));
    return v;
  };
  EXPECT_EQ(detect_version(without_middle(true)), ModelVersion::SDXLSSD1B);
  EXPECT_EQ(detect_version(without_middle(false)), ModelVersion::SDXLVega);
  EXPECT_STREQ(version_name(ModelVersion::SDXLSSD1B), "SDXL (SSD1B)");
  EXPECT_STREQ(version_name(ModelVersion::SDXLVega), "SDXL (Vega)");
  EXPECT_EQ(family_of(ModelVersion::SDXLVega), ModelFamily::SDXL);
}

// Narrowed refiners (tests, distillations) keep its signature: a vector and one encoder
// with a text projection.
TEST(ModelVersion, RefinerAtAnyWidth) {
  auto refiner =
      unet_model(4, 128, false,
                 {t("conditioner.embedders.0.model.token_embedding.weight", {49408, 128}),
                  t("conditioner.embedders.0.model.text_projection", {128, 128})});
  refiner.push_back(t("model.diffusion_model.label_emb.0.0.weight", {128, 1408}));
  EXPECT_EQ(detect_version(refiner), ModelVersion::SDXLRefiner);
}

TEST(ModelVersion, DescriptionReportsWhatWasMeasured) {
  ModelDescription d = describe_model(unet_model(9, 1024, true, kOpenClipH));
  EXPECT_EQ(d.version, ModelVersion::SD2Inpaint);
  EXPECT_EQ(d.in_channels, 9);
  EXPECT_EQ(d.context_dim, 1024);
  EXPECT_EQ(family_of(d.version), ModelFamily::SD2);
  EXPECT_STREQ(version_name(d.version), "SD 2.x Inpaint");
  EXPECT_STREQ(family_name(family_of(ModelVersion::SDXLRefiner)), "SDXL");
  EXPECT_TRUE(is_unet_family(ModelVersion::SDXLRefiner));
  EXPECT_FALSE(is_unet_family(ModelVersion::FluxFill));
}

TEST(ModelVersion, UnetWithoutCrossAttentionFallsBackOnTextEncoder) {
  const std::string d = "model.diffusion_model.";
  EXPECT_EQ(detect_version({t(d + "input_blocks.0.0.weight", {320, 4, 3, 3}), kClipL[0]}),
            ModelVersion::SD1);
  EXPECT_EQ(detect_version({t(d + "input_blocks.0.0.weight", {320, 9, 3, 3}), kOpenClipH[0]}),
            ModelVersion::SD2Inpaint);
}

TEST(ModelVersion, RawDiffusersUnetFile) {
  // A --diffusion-model file in diffusers spelling is canonicalized before detection.
  std::vector<TensorInfo> unet = {
      t("conv_in.weight", {320, 4, 3, 3}),
      t("down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight", {320, 768}),
      t("time_embedding.linear_1.weight", {1280, 320})};
  EXPECT_EQ(detect_version(unet), ModelVersion::SD1);
}

std::vector<TensorInfo> sd3(int depth, bool attn2, bool qk_norm) {
  const std::string d = "model.diffusion_model.";
  std::vector<TensorInfo> v = {t(d + "x_embedder.proj.weight", {1536, 16, 2, 2}),
                               t(d + "context_embedder.weight", {1536, 4096})};
  for (int i = 0; i < depth; ++i) {
    std::string b = d + "joint_blocks." + std::to_string(i) + ".";
    v.push_back(t(b + "x_block.attn.qkv.weight", {4608, 1536}));
    if (qk_norm) v.push_back(t(b + "x_block.attn.ln_q.weight", {64}));
    if (attn2 && i < 13) v.push_back(t(b + "x_block.attn2.qkv.weight", {4608, 1536}));
  }
  return v;
}

TEST(ModelVersion, Sd3Variants) {
  EXPECT_EQ(detect_version(sd3(24, false, false)), ModelVersion::SD3);
  EXPECT_EQ(detect_version(sd3(24, true, true)), ModelVersion::SD3_5Medium);
  EXPECT_EQ(detect_version(sd3(38, false, true)), ModelVersion::SD3_5Large);
  ModelDescription d = describe_model(sd3(38, false, true));
  EXPECT_EQ(d.depth, 38);
  EXPECT_EQ(d.in_channels, 16);
}

std::vector<TensorInfo> flux(int64_t in_channels, bool guidance) {
  const std::string d = "model.diffusion_model.";
  std::vector<TensorInfo> v = {t(d + "img_in.weight", {3072, in_channels}),
                               t(d + "double_blocks.0.img_attn.qkv.weight", {9216, 3072}),
                               t(d + "double_blocks.18.img_attn.qkv.weight", {9216, 3072}),
                               t(d + "single_blocks.37.linear1.weight", {21504, 3072})};
  if (guidance) v.push_back(t(d + "guidance_in.in_layer.weight", {3072, 256}));
  return v;
}

TEST(ModelVersion, FluxVariants) {
  EXPECT_EQ(detect_version(flux(64, true)), ModelVersion::Flux);
  EXPECT_EQ(detect_version(flux(64, false)), ModelVersion::FluxSchnell);
  EXPECT_EQ(detect_version(flux(384, true)), ModelVersion::FluxFill);
  EXPECT_EQ(describe_model(flux(64, true)).depth, 19);
  EXPECT_STREQ(version_name(ModelVersion::FluxFill), "Flux Fill");
}

// FLUX.2: one modulation per stream kind instead of per block; dev has 48 single blocks.
std::vector<TensorInfo> flux2(int single_blocks, bool guidance) {
  const std::string d = "model.diffusion_model.";
  std::vector<TensorInfo> v = {
      t(d + "img_in.weight", {3072, 128}),
      t(d + "double_stream_modulation_img.lin.weight", {18432, 3072}),
      t(d + "double_blocks.0.img_attn.qkv.weight", {9216, 3072}),
      t(d + "double_blocks.4.img_attn.qkv.weight", {9216, 3072}),
      t(d + "single_blocks." + std::to_string(single_blocks - 1) + ".linear1.weight",
        {27648, 3072})};
  if (guidance) v.push_back(t(d + "guidance_in.in_layer.weight", {3072, 256}));
  return v;
}

TEST(ModelVersion, Flux2KleinAndDev) {
  EXPECT_EQ(detect_version(flux2(20, false)), ModelVersion::Flux2Klein);
  EXPECT_EQ(detect_version(flux2(24, false)), ModelVersion::Flux2Klein);  // klein 9B
  EXPECT_EQ(detect_version(flux2(48, true)), ModelVersion::Flux2);
  EXPECT_EQ(describe_model(flux2(20, false)).in_channels, 128);
  EXPECT_EQ(family_of(ModelVersion::Flux2Klein), ModelFamily::Flux2);
  EXPECT_EQ(family_of(ModelVersion::Flux2), ModelFamily::Flux2);
  EXPECT_STREQ(version_name(ModelVersion::Flux2Klein), "Flux.2 klein");
  EXPECT_FALSE(is_unet_family(ModelVersion::Flux2Klein));
}

TEST(ModelVersion, QwenImageFromItsBlocksModulation) {
  const std::string d = "model.diffusion_model.";
  const std::vector<TensorInfo> qwen = {
      t(d + "img_in.weight", {3072, 64}),
      t(d + "transformer_blocks.0.img_mod.1.weight", {18432, 3072}),
      t(d + "txt_in.weight", {3072, 3584})};
  EXPECT_EQ(detect_version(qwen), ModelVersion::QwenImage);
  EXPECT_EQ(describe_model(qwen).in_channels, 16);
  EXPECT_EQ(family_of(ModelVersion::QwenImage), ModelFamily::QwenImage);
  EXPECT_FALSE(is_unet_family(ModelVersion::QwenImage));
}

TEST(ModelVersion, ChromaFromItsApproximator) {
  // Chroma: schnell's blocks and the approximator.
  std::vector<TensorInfo> chroma = flux(64, false);
  chroma.push_back(t("model.diffusion_model.distilled_guidance_layer.in_proj.weight", {5120, 64}));
  EXPECT_EQ(detect_version(chroma), ModelVersion::Chroma);
  EXPECT_EQ(describe_model(chroma).depth, 19);
  EXPECT_EQ(family_of(ModelVersion::Chroma), ModelFamily::Chroma);
  EXPECT_STREQ(version_name(ModelVersion::Chroma), "Chroma");
  EXPECT_FALSE(is_unet_family(ModelVersion::Chroma));
}

TEST(ModelVersion, UnknownModelIsAnErrorNamingWhatWasSeen) {
  std::vector<TensorInfo> vae = {t("first_stage_model.encoder.conv_in.weight", {128, 3, 3, 3}),
                                 t("first_stage_model.encoder.conv_in.bias", {128})};
  EXPECT_EQ(describe_model(vae).version, ModelVersion::Unknown);
  test::expect_error([&] { detect_version(vae); },
                     {"unknown model: saw 2 tensors", "first_stage_model.encoder.conv_in.weight",
                      "expected one of SD1.x, SD2.x, SDXL, SD3, Flux"});
  test::expect_error([] { detect_version({}); }, {"saw 0 tensors"});
  // A UNet with a context width no family has.
  test::expect_error([] { detect_version(unet_model(4, 512, true, {})); },
                     {"4 input channels and context width 512"});
}

}  // namespace
}  // namespace sd::io
