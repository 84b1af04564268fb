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

}  // namespace
}  // namespace sd::io
