#include "io/name_conversion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sd::io {
namespace {

struct Case {
  std::string from, to;
};

void expect_maps(const std::vector<Case>& cases, SourceLayout layout, std::string_view prefix) {
  for (const Case& c : cases) {
    NameMapping m = convert_name(c.from, layout, prefix);
    EXPECT_EQ(m.name, c.to) << layout_name(layout) << ": " << c.from;
    EXPECT_TRUE(m.known) << c.from;
  }
}

TEST(NameConversion, DiffusersUnetSd) {
  expect_maps(
      {
          {"conv_in.weight", "model.diffusion_model.input_blocks.0.0.weight"},
          {"time_embedding.linear_1.weight", "model.diffusion_model.time_embed.0.weight"},
          {"time_embedding.linear_2.bias", "model.diffusion_model.time_embed.2.bias"},
          {"down_blocks.0.resnets.0.norm1.weight",
           "model.diffusion_model.input_blocks.1.0.in_layers.0.weight"},
          {"down_blocks.0.resnets.1.conv1.bias",
           "model.diffusion_model.input_blocks.2.0.in_layers.2.bias"},
          {"down_blocks.1.resnets.0.time_emb_proj.weight",
           "model.diffusion_model.input_blocks.4.0.emb_layers.1.weight"},
          {"down_blocks.1.resnets.0.conv_shortcut.weight",
           "model.diffusion_model.input_blocks.4.0.skip_connection.weight"},
          {"down_blocks.2.resnets.1.norm2.bias",
           "model.diffusion_model.input_blocks.8.0.out_layers.0.bias"},
          {"down_blocks.3.resnets.1.conv2.weight",
           "model.diffusion_model.input_blocks.11.0.out_layers.3.weight"},
          {"down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight",
           "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight"},
          {"down_blocks.1.attentions.1.proj_in.weight",
           "model.diffusion_model.input_blocks.5.1.proj_in.weight"},
          {"down_blocks.2.attentions.0.transformer_blocks.0.attn2.to_out.0.bias",
           "model.diffusion_model.input_blocks.7.1.transformer_blocks.0.attn2.to_out.0.bias"},
          {"down_blocks.0.downsamplers.0.conv.weight",
           "model.diffusion_model.input_blocks.3.0.op.weight"},
          {"down_blocks.2.downsamplers.0.conv.bias",
           "model.diffusion_model.input_blocks.9.0.op.bias"},
          {"mid_block.resnets.0.norm1.weight",
           "model.diffusion_model.middle_block.0.in_layers.0.weight"},
          {"mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj.weight",
           "model.diffusion_model.middle_block.1.transformer_blocks.0.ff.net.0.proj.weight"},
          {"mid_block.resnets.1.conv2.bias",
           "model.diffusion_model.middle_block.2.out_layers.3.bias"},
          {"up_blocks.0.resnets.2.conv_shortcut.bias",
           "model.diffusion_model.output_blocks.2.0.skip_connection.bias"},
          // SD's first up level has no attention: its upsampler follows the ResBlock.
          {"up_blocks.0.upsamplers.0.conv.weight",
           "model.diffusion_model.output_blocks.2.1.conv.weight"},
          {"up_blocks.1.attentions.2.proj_out.bias",
           "model.diffusion_model.output_blocks.5.1.proj_out.bias"},
          {"up_blocks.1.upsamplers.0.conv.weight",
           "model.diffusion_model.output_blocks.5.2.conv.weight"},
          {"up_blocks.3.resnets.2.norm1.weight",
           "model.diffusion_model.output_blocks.11.0.in_layers.0.weight"},
          {"up_blocks.3.attentions.2.norm.weight",
           "model.diffusion_model.output_blocks.11.1.norm.weight"},
          {"conv_norm_out.weight", "model.diffusion_model.out.0.weight"},
          {"conv_out.bias", "model.diffusion_model.out.2.bias"},
      },
      SourceLayout::DiffusersUnet, "");
}

TEST(NameConversion, DiffusersUnetSdxl) {
  expect_maps(
      {
          {"add_embedding.linear_1.weight", "model.diffusion_model.label_emb.0.0.weight"},
          {"add_embedding.linear_2.bias", "model.diffusion_model.label_emb.0.2.bias"},
          // Transformer depth 10 in the deepest level: inner indices pass through.
          {"down_blocks.2.attentions.1.transformer_blocks.9.attn1.to_q.weight",
           "model.diffusion_model.input_blocks.8.1.transformer_blocks.9.attn1.to_q.weight"},
          {"down_blocks.1.attentions.0.transformer_blocks.1.norm3.bias",
           "model.diffusion_model.input_blocks.4.1.transformer_blocks.1.norm3.bias"},
          {"mid_block.attentions.0.transformer_blocks.9.attn2.to_k.weight",
           "model.diffusion_model.middle_block.1.transformer_blocks.9.attn2.to_k.weight"},
          {"up_blocks.0.attentions.2.transformer_blocks.5.ff.net.2.weight",
           "model.diffusion_model.output_blocks.2.1.transformer_blocks.5.ff.net.2.weight"},
          // SDXL's first two up levels have attention: the upsampler sits at index 2.
          {"up_blocks.0.upsamplers.0.conv.weight",
           "model.diffusion_model.output_blocks.2.2.conv.weight"},
          {"up_blocks.1.upsamplers.0.conv.bias",
           "model.diffusion_model.output_blocks.5.2.conv.bias"},
          {"up_blocks.2.resnets.2.conv2.weight",
           "model.diffusion_model.output_blocks.8.0.out_layers.3.weight"},
          {"down_blocks.1.downsamplers.0.conv.weight",
           "model.diffusion_model.input_blocks.6.0.op.weight"},
          {"conv_in.bias", "model.diffusion_model.input_blocks.0.0.bias"},
          {"time_embedding.linear_1.bias", "model.diffusion_model.time_embed.0.bias"},
      },
      SourceLayout::DiffusersUnetXl, kUnetRoot);
}

TEST(NameConversion, DiffusersVae) {
  expect_maps(
      {
          {"encoder.conv_in.weight", "first_stage_model.encoder.conv_in.weight"},
          {"encoder.down_blocks.0.resnets.1.norm1.bias",
           "first_stage_model.encoder.down.0.block.1.norm1.bias"},
          {"encoder.down_blocks.1.resnets.0.conv_shortcut.weight",
           "first_stage_model.encoder.down.1.block.0.nin_shortcut.weight"},
          {"encoder.down_blocks.2.downsamplers.0.conv.weight",
           "first_stage_model.encoder.down.2.downsample.conv.weight"},
          {"encoder.mid_block.resnets.0.conv1.weight",
           "first_stage_model.encoder.mid.block_1.conv1.weight"},
          {"encoder.mid_block.attentions.0.group_norm.weight",
           "first_stage_model.encoder.mid.attn_1.norm.weight"},
          {"encoder.mid_block.attentions.0.to_q.weight",
           "first_stage_model.encoder.mid.attn_1.q.weight"},
          {"encoder.conv_norm_out.bias", "first_stage_model.encoder.norm_out.bias"},
          {"quant_conv.weight", "first_stage_model.quant_conv.weight"},
          {"post_quant_conv.bias", "first_stage_model.post_quant_conv.bias"},
          {"decoder.mid_block.resnets.1.norm2.weight",
           "first_stage_model.decoder.mid.block_2.norm2.weight"},
          {"decoder.mid_block.attentions.0.to_out.0.bias",
           "first_stage_model.decoder.mid.attn_1.proj_out.bias"},
          {"decoder.mid_block.attentions.0.value.weight",  // diffusers < 0.14
           "first_stage_model.decoder.mid.attn_1.v.weight"},
          // Up levels reverse: diffusers counts from the lowest resolution.
          {"decoder.up_blocks.0.resnets.0.conv1.weight",
           "first_stage_model.decoder.up.3.block.0.conv1.weight"},
          {"decoder.up_blocks.0.upsamplers.0.conv.weight",
           "first_stage_model.decoder.up.3.upsample.conv.weight"},
          {"decoder.up_blocks.2.resnets.0.conv_shortcut.bias",
           "first_stage_model.decoder.up.1.block.0.nin_shortcut.bias"},
          {"decoder.up_blocks.2.upsamplers.0.conv.bias",
           "first_stage_model.decoder.up.1.upsample.conv.bias"},
          {"decoder.up_blocks.3.resnets.2.norm2.weight",
           "first_stage_model.decoder.up.0.block.2.norm2.weight"},
          {"decoder.conv_norm_out.weight", "first_stage_model.decoder.norm_out.weight"},
          {"decoder.conv_out.bias", "first_stage_model.decoder.conv_out.bias"},
      },
      SourceLayout::DiffusersVae, "");
}

TEST(NameConversion, VaeAttentionLinearsBecomeConv1x1) {
  EXPECT_EQ(
      convert_name("encoder.mid_block.attentions.0.to_k.weight", SourceLayout::DiffusersVae, "")
          .transform,
      Transform::Conv1x1);
  EXPECT_EQ(convert_name("encoder.mid_block.attentions.0.to_k.bias", SourceLayout::DiffusersVae, "")
                .transform,
            Transform::None);
  EXPECT_EQ(convert_name("encoder.mid_block.attentions.0.group_norm.weight",
                         SourceLayout::DiffusersVae, "")
                .transform,
            Transform::None);
}

// Black Forest Labs' autoencoder files (FLUX.2's) nest the latent-moment convs.
TEST(NameConversion, NestedQuantConvsOfAnLdmAutoencoder) {
  EXPECT_EQ(convert_name("encoder.quant_conv.weight", SourceLayout::Ldm, "first_stage_model.").name,
            "first_stage_model.quant_conv.weight");
  EXPECT_EQ(
      convert_name("decoder.post_quant_conv.bias", SourceLayout::Ldm, "first_stage_model.").name,
      "first_stage_model.post_quant_conv.bias");
  EXPECT_EQ(convert_name("vae.encoder.quant_conv.bias", SourceLayout::Ldm, "").name,
            "first_stage_model.quant_conv.bias");
  EXPECT_EQ(convert_name("bn.running_mean", SourceLayout::Ldm, "first_stage_model.").name,
            "first_stage_model.bn.running_mean");
}

TEST(NameConversion, TransformersTextEncoders) {
  expect_maps(
      {
          {"text_model.embeddings.token_embedding.weight",
           "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"},
          {"text_model.encoder.layers.11.self_attn.q_proj.weight",
           "cond_stage_model.transformer.text_model.encoder.layers.11.self_attn.q_proj.weight"},
          {"text_model.final_layer_norm.bias",
           "cond_stage_model.transformer.text_model.final_layer_norm.bias"},
      },
      SourceLayout::HfTransformers, "");
  // SDXL's text_encoder_2 (OpenCLIP-bigG in HF format) under the second encoder's root.
  expect_maps(
      {
          {"text_model.encoder.layers.31.mlp.fc2.weight",
           "cond_stage_model.1.transformer.text_model.encoder.layers.31.mlp.fc2.weight"},
          {"text_projection.weight", "cond_stage_model.1.transformer.text_model.text_projection"},
      },
      SourceLayout::HfTransformers, kTextEncoder2Root);
  // A DiT's --clip_l / --t5xxl files.
  expect_maps(
      {{"text_model.embeddings.position_embedding.weight",
        "text_encoders.clip_l.transformer.text_model.embeddings.position_embedding.weight"}},
      SourceLayout::HfTransformers, file_prefix(FileRole::ClipL, false));
  expect_maps({{"encoder.block.0.layer.0.SelfAttention.q.weight",
                "text_encoders.t5xxl.transformer.encoder.block.0.layer.0.SelfAttention.q.weight"},
               {"shared.weight", "text_encoders.t5xxl.transformer.shared.weight"}},
              SourceLayout::HfTransformers, file_prefix(FileRole::T5xxl, false));
}

// Every T5 root sd.cpp reads lands under one root: the --t5xxl file's bare Hugging Face
// names, a single-file checkpoint's (or an sd.cpp-converted file's) text_encoders.t5xxl.
// transformer.*, our own earlier text_encoders.t5xxl.*, and llama.cpp's GGUF names with or
// without the root.
TEST(NameConversion, T5RootsLandUnderOneRoot) {
  const std::string q = "encoder.block.0.layer.0.SelfAttention.q.weight";
  const std::string want = std::string(kT5Root) + q;
  const std::string_view t5_file = file_prefix(FileRole::T5xxl, false);
  for (const std::string& from :
       {q, "text_encoders.t5xxl.transformer." + q, "text_encoders.t5xxl." + q,
        std::string("enc.blk.0.attn_q.weight"),
        std::string("text_encoders.t5xxl.transformer.enc.blk.0.attn_q.weight"),
        std::string("text_encoders.t5xxl.enc.blk.0.attn_q.weight")}) {
    expect_maps({{from, want}}, SourceLayout::Ldm, t5_file);
    // The same names inside a whole checkpoint (-m), where nothing is prefixed.
    if (from.rfind("text_encoders.", 0) == 0) expect_maps({{from, want}}, SourceLayout::Ldm, "");
  }
  expect_maps(
      {{"text_encoders.t5xxl.transformer.shared.weight", std::string(kT5Root) + "shared.weight"},
       {"token_embd.weight", std::string(kT5Root) + "shared.weight"}},
      SourceLayout::Ldm, t5_file);
}

TEST(NameConversion, CheckpointTextEncoders) {
  expect_maps(
      {
          // SD1.x: already canonical.
          {"cond_stage_model.transformer.text_model.encoder.layers.0.mlp.fc1.weight",
           "cond_stage_model.transformer.text_model.encoder.layers.0.mlp.fc1.weight"},
          // Saved by transformers < 4.17, without text_model.
          {"cond_stage_model.transformer.encoder.layers.3.layer_norm1.bias",
           "cond_stage_model.transformer.text_model.encoder.layers.3.layer_norm1.bias"},
          // SD2.x OpenCLIP ViT-H.
          {"cond_stage_model.model.token_embedding.weight",
           "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"},
          {"cond_stage_model.model.positional_embedding",
           "cond_stage_model.transformer.text_model.embeddings.position_embedding.weight"},
          {"cond_stage_model.model.transformer.resblocks.22.ln_1.weight",
           "cond_stage_model.transformer.text_model.encoder.layers.22.layer_norm1.weight"},
          {"cond_stage_model.model.transformer.resblocks.0.mlp.c_proj.bias",
           "cond_stage_model.transformer.text_model.encoder.layers.0.mlp.fc2.bias"},
          {"cond_stage_model.model.transformer.resblocks.5.attn.out_proj.weight",
           "cond_stage_model.transformer.text_model.encoder.layers.5.self_attn.out_proj.weight"},
          {"cond_stage_model.model.ln_final.weight",
           "cond_stage_model.transformer.text_model.final_layer_norm.weight"},
          // SDXL: embedder 0 is CLIP-L, embedder 1 OpenCLIP-bigG.
          {"conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight",
           "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"},
          {"conditioner.embedders.1.model.transformer.resblocks.31.mlp.c_fc.weight",
           "cond_stage_model.1.transformer.text_model.encoder.layers.31.mlp.fc1.weight"},
          {"conditioner.embedders.1.model.ln_final.bias",
           "cond_stage_model.1.transformer.text_model.final_layer_norm.bias"},
          // UNet and VAE names of a checkpoint are canonical as they are.
          {"model.diffusion_model.input_blocks.0.0.weight",
           "model.diffusion_model.input_blocks.0.0.weight"},
          {"first_stage_model.decoder.up.3.upsample.conv.weight",
           "first_stage_model.decoder.up.3.upsample.conv.weight"},
      },
      SourceLayout::Ldm, "");

  NameMapping qkv =
      convert_name("conditioner.embedders.1.model.transformer.resblocks.2.attn.in_proj_weight",
                   SourceLayout::Ldm, "");
  EXPECT_EQ(qkv.name,
            "cond_stage_model.1.transformer.text_model.encoder.layers.2.self_attn.in_proj.weight");
  EXPECT_EQ(qkv.transform, Transform::SplitQkv);
  auto split = qkv_split_names(qkv.name);
  ASSERT_TRUE(split);
  EXPECT_EQ((*split)[0],
            "cond_stage_model.1.transformer.text_model.encoder.layers.2.self_attn.q_proj.weight");
  EXPECT_EQ((*split)[2],
            "cond_stage_model.1.transformer.text_model.encoder.layers.2.self_attn.v_proj.weight");
  auto split_bias = qkv_split_names("x.self_attn.in_proj.bias");
  ASSERT_TRUE(split_bias);
  EXPECT_EQ((*split_bias)[1], "x.self_attn.k_proj.bias");
  EXPECT_FALSE(qkv_split_names("x.self_attn.q_proj.weight"));

  NameMapping proj =
      convert_name("conditioner.embedders.1.model.text_projection", SourceLayout::Ldm, "");
  EXPECT_EQ(proj.name, "cond_stage_model.1.transformer.text_model.text_projection");
  // Kept as stored, as sd.cpp reads it (name_conversion.cpp says why).
  EXPECT_EQ(proj.transform, Transform::None);
}

TEST(NameConversion, PartFilesGetTheirRoot) {
  // --diffusion-model with LDM names, with or without the root already present.
  EXPECT_EQ(to_canonical("input_blocks.1.1.proj_in.weight", SourceLayout::Ldm,
                         file_prefix(FileRole::DiffusionModel, true)),
            "model.diffusion_model.input_blocks.1.1.proj_in.weight");
  EXPECT_EQ(to_canonical("model.diffusion_model.out.2.bias", SourceLayout::Ldm,
                         file_prefix(FileRole::DiffusionModel, true)),
            "model.diffusion_model.out.2.bias");
  // --vae with LDM names; sd.cpp's "vae." prefix also lands on the VAE root.
  EXPECT_EQ(
      to_canonical("decoder.norm_out.weight", SourceLayout::Ldm, file_prefix(FileRole::Vae, true)),
      "first_stage_model.decoder.norm_out.weight");
  EXPECT_EQ(to_canonical("vae.decoder.norm_out.weight", SourceLayout::Ldm, ""),
            "first_stage_model.decoder.norm_out.weight");
  // --clip_g of an SDXL model, in OpenCLIP spelling.
  EXPECT_EQ(to_canonical("model.transformer.resblocks.0.ln_2.bias", SourceLayout::Ldm,
                         file_prefix(FileRole::ClipG, true)),
            "cond_stage_model.1.transformer.text_model.encoder.layers.0.layer_norm2.bias");
  EXPECT_EQ(file_prefix(FileRole::ClipG, false), "text_encoders.clip_g.");
  EXPECT_EQ(file_prefix(FileRole::Model, true), "");
  // --high-noise-diffusion-model: bare names, and a whole diffusion model's names, both
  // below the high-noise root (not the main network's).
  const std::string_view high = file_prefix(FileRole::HighNoiseDiffusionModel, false);
  EXPECT_EQ(to_canonical("blocks.0.self_attn.q.weight", SourceLayout::Ldm, high),
            "model.high_noise_diffusion_model.blocks.0.self_attn.q.weight");
  EXPECT_EQ(to_canonical("model.diffusion_model.head.head.bias", SourceLayout::Ldm, high),
            "model.high_noise_diffusion_model.head.head.bias");
}

TEST(NameConversion, CheckpointConversionIsIdempotent) {
  for (const char* n : {"conditioner.embedders.1.model.transformer.resblocks.7.attn.in_proj_bias",
                        "cond_stage_model.model.token_embedding.weight",
                        "cond_stage_model.transformer.encoder.layers.3.layer_norm1.bias",
                        "model.diffusion_model.middle_block.1.proj_out.weight"}) {
    std::string once = to_canonical(n, SourceLayout::Ldm, "");
    EXPECT_EQ(to_canonical(once, SourceLayout::Ldm, ""), once) << n;
  }
}

TEST(NameConversion, UnknownNamesPassThroughAndAreListed) {
  // Out-of-range indices would collide with other blocks, so no rule takes them.
  std::vector<std::string> unet = {"down_blocks.0.resnets.2.norm1.weight",   // 3rd down resnet
                                   "up_blocks.4.resnets.0.conv1.weight",     // 5th level
                                   "down_blocks.0.resnets.0.norm9.weight",   // unknown member
                                   "down_blocks.01.resnets.0.norm1.weight",  // leading zero
                                   "controlnet_mid_block.weight",           "conv_in.weight"};
  EXPECT_EQ(to_canonical(unet[0], SourceLayout::DiffusersUnet, ""),
            "model.diffusion_model.down_blocks.0.resnets.2.norm1.weight");
  std::vector<std::string> expected(unet.begin(), unet.end() - 1);
  EXPECT_EQ(unmapped_names(unet, SourceLayout::DiffusersUnet, ""), expected);

  std::vector<std::string> ckpt = {"model_ema.decay", "alphas_cumprod",
                                   "cond_stage_model.model.logit_scale",
                                   "model.diffusion_model.time_embed.0.weight"};
  EXPECT_EQ(unmapped_names(ckpt, SourceLayout::Ldm, ""),
            (std::vector<std::string>{"model_ema.decay", "alphas_cumprod",
                                      "cond_stage_model.model.logit_scale"}));
  EXPECT_EQ(to_canonical("model_ema.decay", SourceLayout::Ldm, ""), "model_ema.decay");
  EXPECT_TRUE(is_unused_tensor("model_ema.decay"));
  EXPECT_TRUE(is_unused_tensor("alphas_cumprod"));
  EXPECT_TRUE(is_unused_tensor("cond_stage_model.model.logit_scale"));
  EXPECT_TRUE(is_unused_tensor("cond_stage_model.transformer.text_model.embeddings.position_ids"));
  EXPECT_FALSE(is_unused_tensor("model.diffusion_model.time_embed.0.weight"));
}

TEST(NameConversion, GuessLayout) {
  EXPECT_EQ(guess_layout({"conv_in.weight", "down_blocks.0.resnets.0.conv1.weight"}),
            SourceLayout::DiffusersUnet);
  EXPECT_EQ(guess_layout({"add_embedding.linear_1.weight", "down_blocks.0.resnets.0.conv1.weight"}),
            SourceLayout::DiffusersUnetXl);
  EXPECT_EQ(guess_layout({"encoder.down_blocks.0.resnets.0.conv1.weight", "quant_conv.weight"}),
            SourceLayout::DiffusersVae);
  EXPECT_EQ(guess_layout({"text_model.final_layer_norm.weight"}), SourceLayout::HfTransformers);
  EXPECT_EQ(guess_layout({"encoder.down.0.block.0.conv1.weight"}), SourceLayout::Ldm);
  EXPECT_EQ(guess_layout({}), SourceLayout::Ldm);
}

}  // namespace
}  // namespace sd::io
