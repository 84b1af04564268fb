#include "io/llama_cpp_blocks.h"

#include <charconv>

namespace sd::io {

std::optional<std::string> rename_llama_cpp_block(std::string_view name, std::string_view blk,
                                                  std::string_view hf_block,
                                                  std::span<const BlockPart> parts) {
  if (name.substr(0, blk.size()) != blk) return std::nullopt;
  std::string_view rest = name.substr(blk.size());
  int block = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), block);
  if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '.')
    return std::nullopt;
  rest.remove_prefix(static_cast<size_t>(end - rest.data()) + 1);
  for (const auto& [from, to] : parts)
    if (rest.substr(0, from.size()) == from)
      return std::string(hf_block) + std::to_string(block) + "." + std::string(to) +
             std::string(rest.substr(from.size()));
  return std::nullopt;
}

}  // namespace sd::io
