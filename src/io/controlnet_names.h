// ControlNet tensor names. ControlNets come in the original layout (cldm.py, tensors under
// control_model.: input_hint_block, zero_convs, middle_block_out beside the UNet encoder's
// input_blocks and middle_block), sometimes without the control_model. prefix, and in
// diffusers' layout (controlnet_cond_embedding, controlnet_down_blocks,
// controlnet_mid_block beside down_blocks and mid_block). The engine reads one naming: the
// original, under kControlNetRoot.
#pragma once

#include <string>
#include <string_view>

namespace sd::io {

inline constexpr std::string_view kControlNetRoot = "control_model.";

// The engine's name for a tensor of a ControlNet file, given the name the ModelLoader gave
// it (a diffusers file's encoder names already converted to the UNet's original names under
// kUnetRoot; other names as stored).
std::string controlnet_name(std::string_view loaded);

}  // namespace sd::io
