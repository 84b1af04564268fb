#include "weights/lora_z_image_names.h"

#include <gtest/gtest.h>

#include <map>

#include "weights/lora_names.h"

namespace sd::weights {
namespace {

TEST(LoraZImageNames, DiffusersSpellingsOfTheFusedAndRenamedWeights) {
  const std::vector<FluxSpelling> qkv =
      z_image_diffusers_spellings("noise_refiner.1.attention.qkv");
  ASSERT_EQ(qkv.size(), 3u);
  EXPECT_EQ(qkv[0].diffusers, "noise_refiner.1.attention.to_q");
  EXPECT_EQ(qkv[1].part, 1);
  EXPECT_EQ(qkv[2].diffusers, "noise_refiner.1.attention.to_v");
  const std::vector<FluxSpelling> out = z_image_diffusers_spellings("layers.12.attention.out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].diffusers, "layers.12.attention.to_out.0");
  EXPECT_EQ(out[0].part, -1);
  EXPECT_EQ(z_image_diffusers_spellings("x_embedder")[0].diffusers, "all_x_embedder.2-1");
  EXPECT_EQ(z_image_diffusers_spellings("final_layer.adaLN_modulation.1")[0].diffusers,
            "all_final_layer.2-1.adaLN_modulation.1");
  // Shared names need no other spelling; other families' names are not Z-Image's.
  EXPECT_TRUE(z_image_diffusers_spellings("layers.0.feed_forward.w1").empty());
  EXPECT_TRUE(z_image_diffusers_spellings("double_blocks.0.img_attn.qkv").empty());
  EXPECT_TRUE(z_image_diffusers_spellings("layers.attention.qkv").empty());
}

TEST(LoraZImageNames, TheIndexFindsDiffusersKeys) {
  const std::string root = "model.diffusion_model.";
  const std::map<std::string, Shape> model = {
      {root + "layers.0.attention.qkv.weight", {256, 768, 1, 1}},
      {root + "layers.0.attention.out.weight", {256, 256, 1, 1}},
      {root + "layers.0.feed_forward.w1.weight", {256, 512, 1, 1}},
  };
  const LoraNameIndex index(model);
  EXPECT_EQ(index.find("diffusion_model.layers.0.attention.to_out.0"),
            root + "layers.0.attention.out");
  EXPECT_EQ(index.find("diffusion_model.layers.0.feed_forward.w1"),
            root + "layers.0.feed_forward.w1");
  EXPECT_EQ(index.find("lora_unet_layers_0_attention_qkv"), root + "layers.0.attention.qkv");
  const auto part = index.find_part("diffusion_model.layers.0.attention.to_k");
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(part->base, root + "layers.0.attention.qkv");
  EXPECT_EQ(part->part, 1);
}

}  // namespace
}  // namespace sd::weights
