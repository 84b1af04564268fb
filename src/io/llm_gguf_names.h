// Decoder-LLM names as llama.cpp's GGUF converter writes them ("blk.N.attn_q.weight",
// "token_embd.weight", "output_norm.weight", ...), mapped onto the Hugging Face names the
// LLM text encoder reads ("model.layers.N.self_attn.q_proj.weight", ...).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sd::io {

// The Hugging Face name of a llama.cpp decoder name (relative to the LLM root); nullopt
// when `name` is not one (then it is kept as it is). The output head (output.weight) maps
// to lm_head.weight, which no text encoder reads.
std::optional<std::string> llm_name_from_llama_cpp(std::string_view name);

// The name below the vision tower's root (models/qwen_vl_vision.h) of a name of llama.cpp's
// Qwen2.5-VL mmproj file ("v.blk.N.attn_q.weight", "v.patch_embd.weight.1", "mm.0.bias",
// ...); nullopt when `name` is not one.
std::optional<std::string> llm_vision_name_from_llama_cpp(std::string_view name);

}  // namespace sd::io
