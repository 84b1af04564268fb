#include "io/t5_gguf_names.h"

#include <gtest/gtest.h>

#include "io/name_conversion.h"

namespace sd::io {
namespace {

TEST(T5GgufNames, MapsLlamaCppNamesOntoHuggingFaceNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"token_embd.weight", "shared.weight"},
      {"enc.output_norm.weight", "encoder.final_layer_norm.weight"},
      {"enc.blk.0.attn_q.weight", "encoder.block.0.layer.0.SelfAttention.q.weight"},
      {"enc.blk.3.attn_k.weight", "encoder.block.3.layer.0.SelfAttention.k.weight"},
      {"enc.blk.12.attn_v.weight", "encoder.block.12.layer.0.SelfAttention.v.weight"},
      {"enc.blk.23.attn_o.weight", "encoder.block.23.layer.0.SelfAttention.o.weight"},
      {"enc.blk.0.attn_rel_b.weight",
       "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"},
      {"enc.blk.1.attn_norm.weight", "encoder.block.1.layer.0.layer_norm.weight"},
      {"enc.blk.1.ffn_norm.weight", "encoder.block.1.layer.1.layer_norm.weight"},
      {"enc.blk.2.ffn_gate.weight", "encoder.block.2.layer.1.DenseReluDense.wi_0.weight"},
      {"enc.blk.2.ffn_up.weight", "encoder.block.2.layer.1.DenseReluDense.wi_1.weight"},
      {"enc.blk.2.ffn_down.weight", "encoder.block.2.layer.1.DenseReluDense.wo.weight"},
  };
  for (const auto& [from, to] : cases) {
    EXPECT_EQ(t5_name_from_llama_cpp(from).value_or("<none>"), to) << from;
    // Through the loader's mapping, under the --t5xxl root.
    const NameMapping m =
        convert_name(from, SourceLayout::Ldm, file_prefix(FileRole::T5xxl, false));
    EXPECT_EQ(m.name, std::string(kT5Root) + to);
    EXPECT_TRUE(m.known);
  }
}

TEST(T5GgufNames, LeavesOtherNamesAlone) {
  for (const char* name : {"shared.weight", "encoder.block.0.layer.0.SelfAttention.q.weight",
                           "enc.blk.x.attn_q.weight", "enc.blk.0.attn_qq.weight", "enc.blk.0",
                           "blk.0.attn_q.weight", ""}) {
    EXPECT_FALSE(t5_name_from_llama_cpp(name).has_value()) << name;
  }
  // Not under the T5 root: a diffusion model's names are not T5's.
  EXPECT_EQ(convert_name("token_embd.weight", SourceLayout::Ldm, kUnetRoot).name,
            std::string(kUnetRoot) + "token_embd.weight");
}

}  // namespace
}  // namespace sd::io
