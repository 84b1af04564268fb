#include "weights/lora_names.h"

#include <array>
#include <charconv>
#include <vector>

#include "io/name_conversion.h"
#include "weights/lora_flux_names.h"
#include "weights/lora_sd3_names.h"
#include "weights/lora_z_image_names.h"

namespace sd::weights {
namespace {

// Reads "<number>." from the front of `s`, advancing it.
std::optional<int> take_index(std::string_view& s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end == s.data() || end == s.data() + s.size() || *end != '.')
    return std::nullopt;
  s.remove_prefix(static_cast<size_t>(end - s.data()) + 1);
  return v;
}

// LDM ResBlock -> diffusers ResnetBlock2D (the inverse of the loader's rename).
std::optional<std::string> resnet_to_diffusers(std::string_view rest) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kRenames{{
      {"in_layers.0.", "norm1."},
      {"in_layers.2.", "conv1."},
      {"emb_layers.1.", "time_emb_proj."},
      {"out_layers.0.", "norm2."},
      {"out_layers.3.", "conv2."},
      {"skip_connection.", "conv_shortcut."},
  }};
  for (const auto& [ldm, diffusers] : kRenames)
    if (rest.starts_with(ldm)) return std::string(diffusers) += rest.substr(ldm.size());
  return std::nullopt;
}

std::string num(int v) {
  return std::to_string(v);
}

// input_blocks: conv_in at 0, then per level two (ResBlock[, SpatialTransformer]) and a
// Downsample at 3i+3.
std::optional<std::string> input_block_to_diffusers(std::string_view s) {
  const std::optional<int> block = take_index(s), layer = take_index(s);
  if (!block || !layer) return std::nullopt;
  if (*block == 0) {
    if (*layer != 0) return std::nullopt;
    return "conv_in." + std::string(s);
  }
  const int level = (*block - 1) / 3, j = (*block - 1) % 3;
  if (j == 2) {
    if (*layer != 0 || !s.starts_with("op.")) return std::nullopt;
    return "down_blocks." + num(level) + ".downsamplers.0.conv." + std::string(s.substr(3));
  }
  const std::string base = "down_blocks." + num(level);
  if (*layer == 0) {
    auto r = resnet_to_diffusers(s);
    return r ? std::optional(base + ".resnets." + num(j) + "." + *r) : std::nullopt;
  }
  if (*layer == 1) return base + ".attentions." + num(j) + "." + std::string(s);
  return std::nullopt;
}

// output_blocks: per level three (ResBlock[, SpatialTransformer]), the last of them with
// the Upsample appended (at layer 1 without attention, 2 with).
std::optional<std::string> output_block_to_diffusers(std::string_view s) {
  const std::optional<int> block = take_index(s), layer = take_index(s);
  if (!block || !layer) return std::nullopt;
  const std::string base = "up_blocks." + num(*block / 3);
  const int j = *block % 3;
  if (*layer == 0) {
    auto r = resnet_to_diffusers(s);
    return r ? std::optional(base + ".resnets." + num(j) + "." + *r) : std::nullopt;
  }
  // LDM's Upsample holds only `conv`; a SpatialTransformer has no `conv`.
  if (s.starts_with("conv.")) {
    if (j != 2) return std::nullopt;
    return base + ".upsamplers.0." + std::string(s);
  }
  if (*layer == 1) return base + ".attentions." + num(j) + "." + std::string(s);
  return std::nullopt;
}

std::optional<std::string> middle_block_to_diffusers(std::string_view s) {
  const std::optional<int> layer = take_index(s);
  if (!layer) return std::nullopt;
  if (*layer == 1) return "mid_block.attentions.0." + std::string(s);
  if (*layer != 0 && *layer != 2) return std::nullopt;
  auto r = resnet_to_diffusers(s);
  return r ? std::optional("mid_block.resnets." + num(*layer / 2) + "." + *r) : std::nullopt;
}

}  // namespace

std::optional<std::string> ldm_to_diffusers_unet(std::string_view ldm) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kFixed{{
      {"time_embed.0.", "time_embedding.linear_1."},
      {"time_embed.2.", "time_embedding.linear_2."},
      {"label_emb.0.0.", "add_embedding.linear_1."},
      {"label_emb.0.2.", "add_embedding.linear_2."},
      {"out.0.", "conv_norm_out."},
      {"out.2.", "conv_out."},
  }};
  for (const auto& [from, to] : kFixed)
    if (ldm.starts_with(from)) return std::string(to) += ldm.substr(from.size());
  if (ldm.starts_with("input_blocks.")) return input_block_to_diffusers(ldm.substr(13));
  if (ldm.starts_with("output_blocks.")) return output_block_to_diffusers(ldm.substr(14));
  if (ldm.starts_with("middle_block.")) return middle_block_to_diffusers(ldm.substr(13));
  return std::nullopt;
}

std::string underscore_form(std::string_view name) {
  std::string s(name);
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

std::optional<LoraNetworkGuess> guess_lora_network(const std::vector<std::string>& keys) {
  struct Marker {
    std::string_view network;
    std::vector<std::string_view> words;  // compared in underscore form
  };
  // Most telling first; diffusers' transformer_blocks.N.attn.add_q_proj is FLUX.1's and
  // SD3's alike.
  static const Marker kMarkers[] = {
      {"FLUX.1", {"double_blocks_", "single_blocks_", "single_transformer_blocks_"}},
      {"SD3", {"joint_blocks_"}},
      {"a Stable Diffusion UNet (SD 1.x/2.x, SDXL)",
       {"down_blocks_", "up_blocks_", "mid_block_", "input_blocks_", "output_blocks_",
        "middle_block_"}},
      {"a diffusion transformer (FLUX.1 or SD3)",
       {"add_q_proj", "add_k_proj", "add_v_proj", "norm1_context", "ff_context"}},
  };
  for (const Marker& m : kMarkers)
    for (const std::string& key : keys) {
      const std::string u = underscore_form(key);
      for (std::string_view w : m.words)
        if (u.find(w) != std::string::npos) return LoraNetworkGuess{std::string(m.network), key};
    }
  return std::nullopt;
}

namespace {

// Where each part's tensors sit among the canonical names: HF CLIP names for the text
// encoders sit below their root's "transformer.".
constexpr std::string_view kTextEncoderBase = "cond_stage_model.transformer.";
constexpr std::string_view kTextEncoder2Base = "cond_stage_model.1.transformer.";
// SD3 checkpoints keep CLIP-L and CLIP-G here; T5-XXL (SD3's third encoder) at io::kT5Root.
constexpr std::string_view kClipLBase = "text_encoders.clip_l.transformer.";
constexpr std::string_view kClipGBase = "text_encoders.clip_g.transformer.";

}  // namespace

LoraNameIndex::LoraNameIndex(const std::map<std::string, Shape>& model_weights) {
  for (const auto& entry : model_weights) {
    const std::string& name = entry.first;
    std::string_view base(name);
    if (base.ends_with(".weight"))
      base.remove_suffix(7);
    else if (base.ends_with(".bias"))
      base.remove_suffix(5);
    else
      continue;
    const std::string base_name(base);
    if (base.starts_with(io::kUnetRoot)) {
      const std::string_view rel = base.substr(io::kUnetRoot.size());
      add(Part::Unet, std::string(rel), base_name);
      // Mapped with a ".weight" tail so the inverse sees the whole name, then cut back.
      if (auto d = ldm_to_diffusers_unet(std::string(rel) + ".weight")) {
        const std::string diffusers = d->substr(0, d->size() - 7);
        add(Part::Unet, diffusers, base_name);
        // Old diffusers attention processors name the output projection to_out_lora.
        if (diffusers.ends_with(".to_out.0"))
          add(Part::Unet, diffusers.substr(0, diffusers.size() - 2), base_name);
      }
      // The diffusers names of the DiT families (a name is only one family's).
      for (const auto& spellings : {flux_diffusers_spellings(rel), sd3_diffusers_spellings(rel),
                                    z_image_diffusers_spellings(rel)})
        for (const FluxSpelling& f : spellings) {
          if (f.part < 0)
            add(Part::Unet, f.diffusers, base_name);
          else
            fused_parts_[underscore_form(f.diffusers)] = {base_name, f.part};
        }
    } else if (base.starts_with(kTextEncoder2Base)) {
      add(Part::TextEncoder2, std::string(base.substr(kTextEncoder2Base.size())), base_name);
    } else if (base.starts_with(kTextEncoderBase)) {
      add(Part::TextEncoder, std::string(base.substr(kTextEncoderBase.size())), base_name);
    } else if (base.starts_with(kClipLBase)) {
      add(Part::TextEncoder, std::string(base.substr(kClipLBase.size())), base_name);
    } else if (base.starts_with(kClipGBase)) {
      add(Part::TextEncoder2, std::string(base.substr(kClipGBase.size())), base_name);
    } else if (base.starts_with(io::kT5Root)) {
      add(Part::TextEncoder3, std::string(base.substr(io::kT5Root.size())), base_name);
    } else if (base.starts_with(io::kVaeRoot)) {
      add(Part::Vae, std::string(base.substr(io::kVaeRoot.size())), base_name);
    }
  }
}

void LoraNameIndex::add(Part part, const std::string& spelling, const std::string& base) {
  auto [it, inserted] = spellings_[part].emplace(underscore_form(spelling), base);
  if (!inserted && it->second != base) it->second.clear();
}

std::pair<LoraNameIndex::Part, std::string_view> LoraNameIndex::split_prefix(
    std::string_view stem) const {
  struct Prefix {
    std::string_view text;
    Part part;
  };
  // Most specific first: "text_encoder.2." before "text_encoder.", "lora_te2_" before
  // "lora_te_"-like prefixes.
  static constexpr Prefix kPrefixes[] = {
      {"lora_unet_", Part::Unet},
      {"model.diffusion_model.", Part::Unet},
      {"diffusion_model.", Part::Unet},
      {"unet.", Part::Unet},
      {"transformer.", Part::Unet},       // diffusers DiT LoRAs (FLUX.1, SD3)
      {"lora_transformer_", Part::Unet},  // the same, kohya-spelled
      {"lora_te2_", Part::TextEncoder2},
      {"te2.", Part::TextEncoder2},
      {"text_encoder_2.", Part::TextEncoder2},
      {"text_encoder.2.", Part::TextEncoder2},
      {"cond_stage_model.1.transformer.", Part::TextEncoder2},
      {"clip_g.", Part::TextEncoder2},
      {"lora_te3_", Part::TextEncoder3},  // SD3's T5-XXL
      {"te3.", Part::TextEncoder3},
      {"text_encoder_3.", Part::TextEncoder3},
      {"t5xxl.", Part::TextEncoder3},
      {"lora_te1_", Part::TextEncoder},
      {"lora_te_", Part::TextEncoder},
      {"te1.", Part::TextEncoder},
      {"te.", Part::TextEncoder},
      {"text_encoder.", Part::TextEncoder},
      {"cond_stage_model.transformer.", Part::TextEncoder},
      {"clip_l.", Part::TextEncoder},
      {"lora_vae_", Part::Vae},
      {"vae.", Part::Vae},
      {"first_stage_model.", Part::Vae},
  };
  for (const Prefix& p : kPrefixes)
    if (stem.starts_with(p.text)) return {p.part, stem.substr(p.text.size())};
  return {Part::Unet, stem};  // diffusers UNet LoRAs may come without a prefix
}

std::optional<LoraNameIndex::FusedPart> LoraNameIndex::find_part(std::string_view stem) const {
  const auto [part, rel] = split_prefix(stem);
  if (part != Part::Unet) return std::nullopt;
  auto it = fused_parts_.find(underscore_form(rel));
  if (it == fused_parts_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> LoraNameIndex::find(std::string_view stem) const {
  const auto [part, rel] = split_prefix(stem);
  auto table = spellings_.find(part);
  if (table == spellings_.end()) return std::nullopt;
  auto it = table->second.find(underscore_form(rel));
  if (it == table->second.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

}  // namespace sd::weights
