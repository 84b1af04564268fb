// How LoRA trainers spell SD3/SD3.5's MMDiT weights besides the names the model file uses
// (joint_blocks.N.x_block.attn.qkv, ...): diffusers' SD3Transformer2DModel names
// (diffusers/PEFT, "transformer.transformer_blocks.0.attn.to_q.lora_A.weight"). Diffusers
// keeps q, k and v as separate Linears where the MMDiT fuses them into one qkv weight, so
// such a LoRA changes a run of rows of the fused weight (flux_fused_rows() gives them: the
// same q;k;v layout as FLUX.1's). Kohya's "lora_unet_joint_blocks_0_x_block_attn_qkv" is
// the model's own name with '_' for '.', which the name index matches without help.
#pragma once

#include <string_view>
#include <vector>

#include "weights/lora_flux_names.h"

namespace sd::weights {

// The diffusers spellings of one MMDiT weight base below model.diffusion_model.
// ("joint_blocks.0.x_block.attn.qkv" -> transformer_blocks.0.attn.to_q part 0, to_k part 1,
// to_v part 2); empty for a name that is not the MMDiT's.
std::vector<FluxSpelling> sd3_diffusers_spellings(std::string_view mmdit_base);

}  // namespace sd::weights
