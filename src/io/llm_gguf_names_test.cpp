#include "io/llm_gguf_names.h"

#include <gtest/gtest.h>

#include "io/name_conversion.h"

namespace sd::io {
namespace {

TEST(LlmGgufNames, MapOntoTransformersNames) {
  EXPECT_EQ(llm_name_from_llama_cpp("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(llm_name_from_llama_cpp("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(llm_name_from_llama_cpp("blk.12.attn_q.weight"),
            "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(llm_name_from_llama_cpp("blk.3.attn_q_norm.weight"),
            "model.layers.3.self_attn.q_norm.weight");
  EXPECT_EQ(llm_name_from_llama_cpp("blk.0.attn_v.bias"), "model.layers.0.self_attn.v_proj.bias");
  EXPECT_EQ(llm_name_from_llama_cpp("blk.0.attn_output.weight"),
            "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(llm_name_from_llama_cpp("blk.35.ffn_norm.weight"),
            "model.layers.35.post_attention_layernorm.weight");
  EXPECT_EQ(llm_name_from_llama_cpp("blk.1.ffn_down.weight"),
            "model.layers.1.mlp.down_proj.weight");
  EXPECT_FALSE(llm_name_from_llama_cpp("blk.x.attn_q.weight"));
  EXPECT_FALSE(llm_name_from_llama_cpp("blk.1"));
  EXPECT_FALSE(llm_name_from_llama_cpp("model.layers.0.mlp.up_proj.weight"));
}

TEST(LlmGgufNames, EverySpellingOfAnLlmFileLandsUnderItsRoot) {
  const std::string want = "text_encoders.llm.model.layers.2.mlp.up_proj.weight";
  for (const char* name :
       {"blk.2.ffn_up.weight", "model.layers.2.mlp.up_proj.weight", "layers.2.mlp.up_proj.weight"})
    EXPECT_EQ(to_canonical(name, SourceLayout::Ldm, file_prefix(FileRole::Llm, false)), want)
        << name;
}

TEST(LlmGgufNames, MmprojNamesMapOntoTheVisionTower) {
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.patch_embd.weight"), "patch_embed.proj.0.weight");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.patch_embd.weight.1"), "patch_embed.proj.1.weight");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.blk.7.attn_q.bias"), "blocks.7.attn.q_proj.bias");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.blk.0.attn_out.weight"), "blocks.0.attn.proj.weight");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.blk.31.ffn_gate.weight"),
            "blocks.31.mlp.gate_proj.weight");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.blk.2.ln2.weight"), "blocks.2.norm2.weight");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("v.post_ln.weight"), "merger.ln_q.weight");
  EXPECT_EQ(llm_vision_name_from_llama_cpp("mm.2.bias"), "merger.mlp.2.bias");
  EXPECT_FALSE(llm_vision_name_from_llama_cpp("blk.0.attn_q.weight"));
}

TEST(LlmGgufNames, EverySpellingOfTheVisionTowerLandsUnderItsRoot) {
  const std::string want = "text_encoders.llm.visual.blocks.3.mlp.up_proj.bias";
  // The mmproj file (--llm_vision), a tower file in Hugging Face names with or without its
  // root, and the tower inside a --llm file (older and newer transformers).
  const std::pair<const char*, FileRole> spellings[] = {
      {"v.blk.3.ffn_up.bias", FileRole::LlmVision},
      {"blocks.3.mlp.up_proj.bias", FileRole::LlmVision},
      {"visual.blocks.3.mlp.up_proj.bias", FileRole::LlmVision},
      {"visual.blocks.3.mlp.up_proj.bias", FileRole::Llm},
      {"model.visual.blocks.3.mlp.up_proj.bias", FileRole::Llm},
  };
  for (const auto& [name, role] : spellings)
    EXPECT_EQ(to_canonical(name, SourceLayout::Ldm, file_prefix(role, false)), want) << name;
}

TEST(LlmGgufNames, TheFusedVisionAttentionIsSplitIntoItsThreeProjections) {
  const NameMapping m = convert_name("visual.blocks.0.attn.qkv.weight", SourceLayout::Ldm,
                                     file_prefix(FileRole::Llm, false));
  EXPECT_EQ(m.transform, Transform::SplitQkv);
  const auto parts = qkv_split_names(m.name);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ((*parts)[0], "text_encoders.llm.visual.blocks.0.attn.q_proj.weight");
  EXPECT_EQ((*parts)[2], "text_encoders.llm.visual.blocks.0.attn.v_proj.weight");
  EXPECT_EQ(convert_name("visual.blocks.0.attn.proj.weight", SourceLayout::Ldm,
                         file_prefix(FileRole::Llm, false))
                .transform,
            Transform::None);
}

}  // namespace
}  // namespace sd::io
