// Which model weight a LoRA key changes. LoRA trainers name the weights in several ways:
//
//   kohya / A1111   lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight
//                   lora_unet_input_blocks_1_1_proj_in.lora_up.weight
//                   lora_te_text_model_encoder_layers_0_self_attn_q_proj.lora_down.weight
//   diffusers/PEFT  unet.down_blocks.0.attentions.0.proj_in.lora_B.weight
//                   text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight
//   LDM-style       model.diffusion_model.input_blocks.1.1.proj_in.lora_up.weight
//   DiT (FLUX.1, SD3) lora_unet_joint_blocks_0_x_block_attn_qkv.lora_down.weight
//                   transformer.transformer_blocks.0.attn.to_q.lora_A.weight (a part of
//                   the fused qkv: lora_flux_names.h, lora_sd3_names.h)
//   text encoders   lora_te1_ / lora_te2_ (CLIP-L, CLIP-G), lora_te3_ (SD3's T5-XXL)
//
// kohya replaces every '.' by '_', which cannot be undone from the key alone (proj_in is
// one word, input_blocks_1_1 three). So the index goes the other way: from each weight the
// model has, it derives every spelling a trainer could have used (LDM and diffusers names)
// and compares spellings with '.' and '_' treated alike.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensor/context.h"

namespace sd::weights {

// The diffusers UNet2DConditionModel name of a canonical (LDM) UNet name below
// model.diffusion_model. ("input_blocks.1.1.proj_in.weight" ->
// "down_blocks.0.attentions.0.proj_in.weight"), for SD1.x/SD2.x and SDXL; nullopt for a
// name diffusers does not have.
std::optional<std::string> ldm_to_diffusers_unet(std::string_view ldm);

// '.' -> '_': the form kohya keys use, and the form stems are compared in.
std::string underscore_form(std::string_view name);

// Which family's diffusion network a LoRA's keys were made for, judged from names only that
// family has ("double_blocks": FLUX.1, "joint_blocks": SD3, "down_blocks": a UNet), with
// the first key that shows it; nullopt when no key tells. For the error a LoRA for another
// family gets, which changes none of the model's diffusion weights.
struct LoraNetworkGuess {
  std::string network;
  std::string example_key;
};
std::optional<LoraNetworkGuess> guess_lora_network(const std::vector<std::string>& keys);

class LoraNameIndex {
 public:
  // `model_weights`: canonical names of the model's tensors (shapes are not used here).
  explicit LoraNameIndex(const std::map<std::string, Shape>& model_weights);

  // The canonical base name ("model.diffusion_model.input_blocks.1.1.proj_in", without
  // ".weight") of the weight a LoRA key stem names, the stem being the key without its
  // factor suffix (".lora_up.weight", ".alpha", ...). nullopt when it names none of the
  // model's weights, or more than one.
  std::optional<std::string> find(std::string_view stem) const;

  // A stem that names a run of rows of a fused weight (diffusers' separate q/k/v of FLUX.1,
  // lora_flux_names.h): the fused weight's canonical base and the part.
  struct FusedPart {
    std::string base;
    int part = 0;
  };
  std::optional<FusedPart> find_part(std::string_view stem) const;

 private:
  enum class Part { Unet, TextEncoder, TextEncoder2, TextEncoder3, Vae };
  void add(Part part, const std::string& spelling, const std::string& base);

  // Per part: underscore form of a part-relative spelling -> canonical base; "" when two
  // bases share a spelling (then neither is matched).
  std::map<Part, std::unordered_map<std::string, std::string>> spellings_;
  // Transformer spellings (underscore form) of parts of fused weights.
  std::unordered_map<std::string, FusedPart> fused_parts_;
  // The part-relative form of a stem, and its part.
  std::pair<Part, std::string_view> split_prefix(std::string_view stem) const;
};

}  // namespace sd::weights
