// SD3/SD3.5 LoRAs as the name index sees them: kohya's names (the MMDiT's own, '.' as '_'),
// diffusers/PEFT names whose separate q, k, v are parts of the fused qkv, and the text
// encoders' prefixes (lora_te1_ CLIP-L, lora_te2_ CLIP-G, lora_te3_ T5-XXL).
#include <gtest/gtest.h>

#include "io/name_conversion.h"
#include "weights/lora_names.h"
#include "weights/lora_sd3_names.h"

namespace sd::weights {
namespace {

const std::string kSd3Root = "model.diffusion_model.";

LoraNameIndex tiny_sd3_index() {
  std::map<std::string, Shape> w;
  for (const char* name :
       {"joint_blocks.0.x_block.attn.qkv.weight", "joint_blocks.0.x_block.attn.qkv.bias",
        "joint_blocks.0.context_block.attn.qkv.weight", "joint_blocks.0.x_block.attn2.qkv.weight",
        "joint_blocks.0.x_block.attn.proj.weight", "joint_blocks.0.context_block.mlp.fc1.weight",
        "joint_blocks.0.x_block.adaLN_modulation.1.weight", "x_embedder.proj.weight",
        "t_embedder.mlp.2.weight", "final_layer.linear.weight", "context_embedder.weight"})
    w[kSd3Root + name] = {4, 4, 1, 1};
  w["text_encoders.clip_l.transformer.text_model.encoder.layers.0.mlp.fc1.weight"] = {4, 4, 1, 1};
  w["text_encoders.clip_g.transformer.text_model.encoder.layers.0.mlp.fc1.weight"] = {4, 4, 1, 1};
  w[std::string(io::kT5Root) + "encoder.block.0.layer.0.SelfAttention.q.weight"] = {4, 4, 1, 1};
  return LoraNameIndex(w);
}

TEST(LoraSd3Names, DiffusersSpellingsOfTheMmdit) {
  const std::vector<FluxSpelling> qkv = sd3_diffusers_spellings("joint_blocks.7.x_block.attn.qkv");
  ASSERT_EQ(qkv.size(), 3u);
  EXPECT_EQ(qkv[0].diffusers, "transformer_blocks.7.attn.to_q");
  EXPECT_EQ(qkv[2].diffusers, "transformer_blocks.7.attn.to_v");
  EXPECT_EQ(qkv[2].part, 2);
  const std::vector<FluxSpelling> proj =
      sd3_diffusers_spellings("joint_blocks.3.context_block.attn.proj");
  ASSERT_EQ(proj.size(), 1u);
  EXPECT_EQ(proj[0].diffusers, "transformer_blocks.3.attn.to_add_out");
  EXPECT_EQ(proj[0].part, -1);
  EXPECT_EQ(sd3_diffusers_spellings("x_embedder.proj")[0].diffusers, "pos_embed.proj");
  EXPECT_TRUE(sd3_diffusers_spellings("double_blocks.0.img_attn.qkv").empty());
  EXPECT_TRUE(sd3_diffusers_spellings("joint_blocks.x.x_block.attn.qkv").empty());
}

TEST(LoraSd3Names, IndexFindsEveryStyle) {
  const LoraNameIndex index = tiny_sd3_index();
  auto find = [&](const char* stem) { return index.find(stem).value_or("<none>"); };
  // kohya / LDM-style: the model's names.
  EXPECT_EQ(find("lora_unet_joint_blocks_0_x_block_attn_proj"),
            kSd3Root + "joint_blocks.0.x_block.attn.proj");
  EXPECT_EQ(find("lora_unet_joint_blocks_0_context_block_mlp_fc1"),
            kSd3Root + "joint_blocks.0.context_block.mlp.fc1");
  EXPECT_EQ(find("model.diffusion_model.final_layer.linear"), kSd3Root + "final_layer.linear");
  // diffusers, whole weights, with and without the transformer. prefix.
  EXPECT_EQ(find("transformer.transformer_blocks.0.attn.to_out.0"),
            kSd3Root + "joint_blocks.0.x_block.attn.proj");
  EXPECT_EQ(find("transformer_blocks.0.norm1.linear"),
            kSd3Root + "joint_blocks.0.x_block.adaLN_modulation.1");
  EXPECT_EQ(find("transformer.time_text_embed.timestep_embedder.linear_2"),
            kSd3Root + "t_embedder.mlp.2");
  EXPECT_EQ(find("lora_transformer_proj_out"), kSd3Root + "final_layer.linear");
  // diffusers q, k, v: parts of the fused qkv.
  const auto k = index.find_part("transformer.transformer_blocks.0.attn.to_k");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->base, kSd3Root + "joint_blocks.0.x_block.attn.qkv");
  EXPECT_EQ(k->part, 1);
  const auto v = index.find_part("transformer.transformer_blocks.0.attn.add_v_proj");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->base, kSd3Root + "joint_blocks.0.context_block.attn.qkv");
  EXPECT_EQ(v->part, 2);
  const auto q2 = index.find_part("lora_transformer_transformer_blocks_0_attn2_to_q");
  ASSERT_TRUE(q2.has_value());
  EXPECT_EQ(q2->base, kSd3Root + "joint_blocks.0.x_block.attn2.qkv");
  // The three text encoders.
  EXPECT_EQ(find("lora_te1_text_model_encoder_layers_0_mlp_fc1"),
            "text_encoders.clip_l.transformer.text_model.encoder.layers.0.mlp.fc1");
  EXPECT_EQ(find("lora_te2_text_model_encoder_layers_0_mlp_fc1"),
            "text_encoders.clip_g.transformer.text_model.encoder.layers.0.mlp.fc1");
  EXPECT_EQ(find("lora_te3_encoder_block_0_layer_0_SelfAttention_q"),
            std::string(io::kT5Root) + "encoder.block.0.layer.0.SelfAttention.q");
  EXPECT_EQ(find("te3.encoder.block.0.layer.0.SelfAttention.q"),
            std::string(io::kT5Root) + "encoder.block.0.layer.0.SelfAttention.q");
  // FLUX.1 names find nothing here.
  EXPECT_FALSE(index.find("lora_unet_double_blocks_0_img_attn_proj").has_value());
  EXPECT_FALSE(index.find_part("transformer.single_transformer_blocks.0.attn.to_q").has_value());
}

TEST(LoraSd3Names, GuessesTheFamilyALoraIsFor) {
  auto network = [](std::vector<std::string> keys) {
    const auto g = guess_lora_network(keys);
    return g ? g->network : "<none>";
  };
  EXPECT_EQ(network({"lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_up.weight",
                     "lora_unet_joint_blocks_0_x_block_attn_qkv.lora_up.weight"}),
            "SD3");
  EXPECT_EQ(network({"transformer.transformer_blocks.0.attn.add_q_proj.lora_A.weight",
                     "transformer.single_transformer_blocks.0.attn.to_q.lora_A.weight"}),
            "FLUX.1");
  EXPECT_NE(network({"unet.down_blocks.0.attentions.0.proj_in.lora_A.weight"}).find("UNet"),
            std::string::npos);
  EXPECT_EQ(network({"lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_up.weight"}), "<none>");
  const auto g = guess_lora_network({"a", "lora_unet_joint_blocks_3_x_block_mlp_fc1.alpha"});
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->example_key, "lora_unet_joint_blocks_3_x_block_mlp_fc1.alpha");
}

}  // namespace
}  // namespace sd::weights
