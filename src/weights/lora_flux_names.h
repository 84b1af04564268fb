// How LoRA trainers spell FLUX.1's transformer weights besides the Black Forest Labs names
// the model file uses: diffusers' FluxTransformer2DModel names (ai-toolkit, diffusers/PEFT,
// "transformer.transformer_blocks.0.attn.to_q.lora_A.weight"). Diffusers keeps q, k and v
// (and a single block's MLP input) as separate Linears where BFL fuses them into one
// weight (double_blocks.N.img_attn.qkv, single_blocks.N.linear1), so such a LoRA changes
// a run of rows of the fused weight: its part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sd::weights {

struct FluxSpelling {
  std::string diffusers;  // relative to the transformer, without ".weight"
  int part = -1;          // -1: the whole weight; else the index of its rows' run
};

// The diffusers spellings of one BFL weight base below model.diffusion_model.
// ("double_blocks.0.img_attn.qkv" -> transformer_blocks.0.attn.to_q part 0, to_k part 1,
// to_v part 2); empty for a name that is not FLUX.1's.
std::vector<FluxSpelling> flux_diffusers_spellings(std::string_view bfl_base);

// The rows [begin, begin + count) that `part` of a fused weight [out, in] takes: q, k and v
// `in` rows each (in = the hidden size), then the MLP input the rest (single blocks).
struct RowRun {
  int64_t begin = 0, count = 0;
};
RowRun flux_fused_rows(int part, int64_t in, int64_t out);

}  // namespace sd::weights
