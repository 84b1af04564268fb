#include "io/llm_gguf_names.h"

#include <array>

#include "io/llama_cpp_blocks.h"

namespace sd::io {
namespace {

// What follows "blk.N." in llama.cpp's names, and the Hugging Face name below "layers.N.".
// Longer spellings first: attn_q_norm must win over attn_q.
constexpr std::array<BlockPart, 11> kBlockParts{{
    {"attn_q_norm.", "self_attn.q_norm."},
    {"attn_k_norm.", "self_attn.k_norm."},
    {"attn_norm.", "input_layernorm."},
    {"attn_q.", "self_attn.q_proj."},
    {"attn_k.", "self_attn.k_proj."},
    {"attn_v.", "self_attn.v_proj."},
    {"attn_output.", "self_attn.o_proj."},
    {"ffn_norm.", "post_attention_layernorm."},
    {"ffn_gate.", "mlp.gate_proj."},
    {"ffn_up.", "mlp.up_proj."},
    {"ffn_down.", "mlp.down_proj."},
}};

// The vision blocks' parts ("v.blk.N.<part>"), onto the tower's names below "blocks.N.".
constexpr std::array<BlockPart, 9> kVisionBlockParts{{
    {"attn_q.", "attn.q_proj."},
    {"attn_k.", "attn.k_proj."},
    {"attn_v.", "attn.v_proj."},
    {"attn_out.", "attn.proj."},
    {"ffn_gate.", "mlp.gate_proj."},
    {"ffn_up.", "mlp.up_proj."},
    {"ffn_down.", "mlp.down_proj."},
    {"ln1.", "norm1."},
    {"ln2.", "norm2."},
}};

}  // namespace

std::optional<std::string> llm_vision_name_from_llama_cpp(std::string_view name) {
  // The 3-D patch kernel is stored as its two frames, the second with a ".1" suffix.
  if (name == "v.patch_embd.weight") return "patch_embed.proj.0.weight";
  if (name == "v.patch_embd.weight.1") return "patch_embed.proj.1.weight";
  if (name.starts_with("v.post_ln.")) return "merger.ln_q." + std::string(name.substr(10));
  if (name.starts_with("mm.")) return "merger.mlp." + std::string(name.substr(3));
  return rename_llama_cpp_block(name, "v.blk.", "blocks.", kVisionBlockParts);
}

std::optional<std::string> llm_name_from_llama_cpp(std::string_view name) {
  if (name.starts_with("token_embd.")) return "model.embed_tokens." + std::string(name.substr(11));
  if (name.starts_with("output_norm.")) return "model.norm." + std::string(name.substr(12));
  if (name.starts_with("output.")) return "lm_head." + std::string(name.substr(7));
  return rename_llama_cpp_block(name, "blk.", "model.layers.", kBlockParts);
}

}  // namespace sd::io
