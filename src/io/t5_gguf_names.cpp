#include "io/t5_gguf_names.h"

#include <array>

#include "io/llama_cpp_blocks.h"

namespace sd::io {
namespace {

// What follows "enc.blk.N." in llama.cpp's T5 names, and the HF name below "block.N.".
constexpr std::array<BlockPart, 10> kBlockParts{{
    {"attn_q.", "layer.0.SelfAttention.q."},
    {"attn_k.", "layer.0.SelfAttention.k."},
    {"attn_v.", "layer.0.SelfAttention.v."},
    {"attn_o.", "layer.0.SelfAttention.o."},
    {"attn_rel_b.", "layer.0.SelfAttention.relative_attention_bias."},
    {"attn_norm.", "layer.0.layer_norm."},
    {"ffn_norm.", "layer.1.layer_norm."},
    {"ffn_gate.", "layer.1.DenseReluDense.wi_0."},
    {"ffn_up.", "layer.1.DenseReluDense.wi_1."},
    {"ffn_down.", "layer.1.DenseReluDense.wo."},
}};

}  // namespace

std::optional<std::string> t5_name_from_llama_cpp(std::string_view name) {
  if (name.starts_with("token_embd.")) return "shared." + std::string(name.substr(11));
  if (name.starts_with("enc.output_norm."))
    return "encoder.final_layer_norm." + std::string(name.substr(16));
  return rename_llama_cpp_block(name, "enc.blk.", "encoder.block.", kBlockParts);
}

}  // namespace sd::io
