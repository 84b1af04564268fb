// T5 encoder names as llama.cpp's GGUF converter writes them (the T5-XXL GGUF files
// published for FLUX.1 use them): "enc.blk.N.attn_q.weight", "token_embd.weight", ...,
// mapped onto the Hugging Face T5EncoderModel names the T5 encoder reads
// ("encoder.block.N.layer.0.SelfAttention.q.weight", "shared.weight", ...).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sd::io {

// The Hugging Face name of a llama.cpp T5 encoder name (relative to the T5 root); nullopt
// when `name` is not one (then it is kept as it is).
std::optional<std::string> t5_name_from_llama_cpp(std::string_view name);

}  // namespace sd::io
