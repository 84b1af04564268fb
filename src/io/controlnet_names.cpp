#include "io/controlnet_names.h"

#include <string>

#include "io/name_conversion.h"

namespace sd::io {

namespace {

// diffusers' ControlNetModel names for the blocks the UNet does not have.
std::string from_diffusers(std::string_view name) {
  struct Prefix {
    std::string_view from, to;
  };
  // controlnet_cond_embedding: conv_in, six blocks, conv_out are the original's eight convs
  // input_hint_block.0, 2, ..., 14 (SiLUs at the odd indices).
  static constexpr Prefix kPrefixes[] = {
      {"controlnet_cond_embedding.conv_in.", "input_hint_block.0."},
      {"controlnet_cond_embedding.blocks.0.", "input_hint_block.2."},
      {"controlnet_cond_embedding.blocks.1.", "input_hint_block.4."},
      {"controlnet_cond_embedding.blocks.2.", "input_hint_block.6."},
      {"controlnet_cond_embedding.blocks.3.", "input_hint_block.8."},
      {"controlnet_cond_embedding.blocks.4.", "input_hint_block.10."},
      {"controlnet_cond_embedding.blocks.5.", "input_hint_block.12."},
      {"controlnet_cond_embedding.conv_out.", "input_hint_block.14."},
      {"controlnet_mid_block.", "middle_block_out.0."},
  };
  for (const Prefix& p : kPrefixes)
    if (name.starts_with(p.from)) return std::string(p.to) += name.substr(p.from.size());
  constexpr std::string_view kDown = "controlnet_down_blocks.";
  if (name.starts_with(kDown)) {
    const std::string_view rest = name.substr(kDown.size());  // "3.weight"
    const size_t dot = rest.find('.');
    if (dot != std::string_view::npos)
      return "zero_convs." + std::string(rest.substr(0, dot)) + ".0" +
             std::string(rest.substr(dot));
  }
  return std::string(name);
}

}  // namespace

std::string controlnet_name(std::string_view loaded) {
  std::string_view rest = loaded;
  if (rest.starts_with(kControlNetRoot))
    rest.remove_prefix(kControlNetRoot.size());
  else if (rest.starts_with(kUnetRoot))
    rest.remove_prefix(kUnetRoot.size());
  return std::string(kControlNetRoot) += from_diffusers(rest);
}

}  // namespace sd::io
