// The block part of llama.cpp's GGUF tensor names ("<blk>N.<part>..."), renamed the way a
// text encoder's Hugging Face names spell it ("<hf_block>N.<hf part>..."), shared by the T5
// and decoder-LLM name tables (t5_gguf_names.h, llm_gguf_names.h).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace sd::io {

// One part of a block: llama.cpp's spelling and the Hugging Face one, each with its dot.
using BlockPart = std::pair<std::string_view, std::string_view>;

// `name` = `blk` N "." part ... -> `hf_block` N "." hf_part ...; the first matching part in
// `parts` wins (put longer spellings first). nullopt when `name` is not such a name.
std::optional<std::string> rename_llama_cpp_block(std::string_view name, std::string_view blk,
                                                  std::string_view hf_block,
                                                  std::span<const BlockPart> parts);

}  // namespace sd::io
