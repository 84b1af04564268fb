// How LoRA trainers spell Z-Image's transformer weights besides the names the released file
// uses (layers.N.attention.qkv, ...): diffusers' ZImageTransformer2DModel names (ai-toolkit,
// musubi-tuner, diffusers/PEFT: "diffusion_model.layers.0.attention.to_q.lora_A.weight").
// Diffusers keeps q, k and v as separate Linears where the file fuses them into one qkv
// weight, so such a LoRA changes a run of rows of it (flux_fused_rows(): the same q;k;v
// layout, each `hidden` rows, as Z-Image's query and key/value heads are as many); its
// output projection is to_out.0, and the patch embedder and final layer sit under
// "all_x_embedder.2-1" and "all_final_layer.2-1" (one per patch size, 2 for the released
// models). Names the two share (feed_forward.w1, adaLN_modulation.0, ...) need no help.
#pragma once

#include <string_view>
#include <vector>

#include "weights/lora_flux_names.h"

namespace sd::weights {

// The diffusers spellings of one Z-Image weight base below model.diffusion_model.
// ("layers.0.attention.qkv" -> layers.0.attention.to_q part 0, to_k part 1, to_v part 2);
// empty for a name that is not Z-Image's or needs no other spelling.
std::vector<FluxSpelling> z_image_diffusers_spellings(std::string_view base);

}  // namespace sd::weights
