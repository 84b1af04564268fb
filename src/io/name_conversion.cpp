#include "io/name_conversion.h"

#include <cstdint>
#include <span>
#include <string>

#include "io/llm_gguf_names.h"
#include "io/t5_gguf_names.h"

namespace sd::io {
namespace {

// ---------------------------------------------------------------------------------------
// Rule machinery. A rule matches the start of a part-relative name against a pattern in
// which '#' stands for a decimal number; the numbers are captured in order. A pattern that
// ends with '.' is a prefix (the rest of the name follows); any other pattern must match
// the whole name.

using Nums = std::array<int, 3>;

// Which UNet the diffusers names describe: the only thing that changes the mapping is
// whether an up level has attention, because the upsampler then sits at index 2 of its
// output block instead of 1 (LDM's openaimodel.py appends it after the optional attention).
struct UnetShape {
  std::array<bool, 4> up_level_has_attention;
};
// SD1.x/SD2.x: CrossAttn in up levels 1..3 (diffusers UpBlock2D, CrossAttnUpBlock2D x3).
constexpr UnetShape kSdUnet{{false, true, true, true}};
// SDXL: CrossAttn in up levels 0..1, the last level is a plain UpBlock2D.
constexpr UnetShape kSdxlUnet{{true, true, false, false}};

// A rename of what follows a rule's pattern: `from` as a prefix (ends with '.') or the
// whole remainder.
struct Rename {
  std::string_view from, to;
  Transform transform = Transform::None;
};

using Target = std::string (*)(const Nums& n, const UnetShape& shape);

struct Rule {
  std::string_view from;
  Target to;
  std::array<int, 2> limit{0, 0};         // exclusive bounds of the captures; 0: unbounded
  std::span<const Rename> inner = {};     // renames of the remainder; empty: kept as is
  Transform transform = Transform::None;  // for whole-name rules
};

std::string num(int v) {
  return std::to_string(v);
}

size_t match(std::string_view name, std::string_view pattern, Nums& nums) {
  size_t i = 0;
  int k = 0;
  for (char c : pattern) {
    if (c != '#') {
      if (i >= name.size() || name[i] != c) return std::string_view::npos;
      ++i;
      continue;
    }
    size_t start = i;
    int64_t v = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - start < 6) {
      v = v * 10 + (name[i] - '0');
      ++i;
    }
    // "01" is not the block 1 a checkpoint means; refusing it keeps the mapping 1:1.
    if (i == start || (name[start] == '0' && i - start > 1) || k >= 3) {
      return std::string_view::npos;
    }
    nums[k++] = static_cast<int>(v);
  }
  return i;
}

// Applies the first matching rule; nullopt when none matches (or its inner table does not
// know the remainder).
std::optional<NameMapping> apply_rules(std::string_view name, std::span<const Rule> rules,
                                       const UnetShape& shape = kSdUnet) {
  for (const Rule& r : rules) {
    Nums n{0, 0, 0};
    size_t used = match(name, r.from, n);
    if (used == std::string_view::npos) continue;
    bool prefix = r.from.back() == '.';
    if (!prefix && used != name.size()) continue;
    if ((r.limit[0] && n[0] >= r.limit[0]) || (r.limit[1] && n[1] >= r.limit[1])) continue;
    std::string_view rest = name.substr(used);
    NameMapping m{r.to(n, shape), r.transform, true};
    if (r.inner.empty()) {
      m.name += rest;
      return m;
    }
    for (const Rename& inner : r.inner) {
      bool inner_prefix = inner.from.back() == '.';
      if (inner_prefix ? rest.substr(0, inner.from.size()) == inner.from : rest == inner.from) {
        m.name.append(inner.to).append(rest.substr(inner.from.size()));
        m.transform = inner.transform;
        return m;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

#define FIXED(text) [](const Nums&, const UnetShape&) { return std::string(text); }

// ---------------------------------------------------------------------------------------
// diffusers UNet2DConditionModel -> LDM UNetModel (openaimodel.py). LDM numbers its blocks
// flat: input_blocks holds conv_in, then per level 2 (ResBlock[, SpatialTransformer]) and
// a Downsample; output_blocks holds per level 3 (ResBlock[, SpatialTransformer]) with the
// Upsample appended to the last one.

// ResnetBlock2D -> ResBlock.
constexpr Rename kUnetResnet[] = {
    {"norm1.", "in_layers.0."},              // GroupNorm before the first conv
    {"conv1.", "in_layers.2."},              // index 1 is the SiLU
    {"time_emb_proj.", "emb_layers.1."},     // index 0 is the SiLU
    {"norm2.", "out_layers.0."},             // GroupNorm before the second conv
    {"conv2.", "out_layers.3."},             // 1: SiLU, 2: Dropout
    {"conv_shortcut.", "skip_connection."},  // 1x1 conv when channels change
};

constexpr Rule kUnetRules[] = {
    // Stem and timestep MLP.
    {"conv_in.", FIXED("input_blocks.0.0.")},
    {"time_embedding.linear_1.", FIXED("time_embed.0.")},
    {"time_embedding.linear_2.", FIXED("time_embed.2.")},
    // SDXL's size/crop ("text_time") embedding MLP, LDM's label_emb.
    {"add_embedding.linear_1.", FIXED("label_emb.0.0.")},
    {"add_embedding.linear_2.", FIXED("label_emb.0.2.")},
    // down_blocks.i.resnets.j -> input_blocks.(3i+j+1).0
    {"down_blocks.#.resnets.#.",
     [](const Nums& n, const UnetShape&) {
       return "input_blocks." + num(3 * n[0] + n[1] + 1) + ".0.";
     },
     {4, 2},
     kUnetResnet},
    // down_blocks.i.attentions.j -> input_blocks.(3i+j+1).1 (Transformer2DModel and
    // SpatialTransformer share their inner names: proj_in, transformer_blocks.k.attn1.to_q...)
    {"down_blocks.#.attentions.#.",
     [](const Nums& n, const UnetShape&) {
       return "input_blocks." + num(3 * n[0] + n[1] + 1) + ".1.";
     },
     {4, 2}},
    // down_blocks.i.downsamplers.0.conv -> input_blocks.(3i+3).0.op
    {"down_blocks.#.downsamplers.0.conv.",
     [](const Nums& n, const UnetShape&) { return "input_blocks." + num(3 * n[0] + 3) + ".0.op."; },
     {4, 0}},
    // mid_block: ResBlock, SpatialTransformer, ResBlock
    {"mid_block.resnets.#.",
     [](const Nums& n, const UnetShape&) { return "middle_block." + num(2 * n[0]) + "."; },
     {2, 0},
     kUnetResnet},
    {"mid_block.attentions.0.", FIXED("middle_block.1.")},
    // up_blocks.i.resnets.j -> output_blocks.(3i+j).0
    {"up_blocks.#.resnets.#.",
     [](const Nums& n, const UnetShape&) {
       return "output_blocks." + num(3 * n[0] + n[1]) + ".0.";
     },
     {4, 3},
     kUnetResnet},
    // up_blocks.i.attentions.j -> output_blocks.(3i+j).1
    {"up_blocks.#.attentions.#.",
     [](const Nums& n, const UnetShape&) {
       return "output_blocks." + num(3 * n[0] + n[1]) + ".1.";
     },
     {4, 3}},
    // up_blocks.i.upsamplers.0 -> output_blocks.(3i+2).{1, or 2 after an attention}
    {"up_blocks.#.upsamplers.0.",
     [](const Nums& n, const UnetShape& s) {
       return "output_blocks." + num(3 * n[0] + 2) + "." +
              (s.up_level_has_attention[n[0]] ? "2." : "1.");
     },
     {4, 0}},
    // Output head: GroupNorm, SiLU, conv.
    {"conv_norm_out.", FIXED("out.0.")},
    {"conv_out.", FIXED("out.2.")},
};

// ---------------------------------------------------------------------------------------
// diffusers AutoencoderKL -> LDM AutoencoderKL (taming's Encoder/Decoder). The decoder's
// up levels are numbered from the lowest resolution in diffusers and from the highest in
// LDM, so the level index is reversed; every SD-family VAE has 4 levels.

constexpr int kVaeLevels = 4;

// ResnetBlock2D -> ResnetBlock: same names except the shortcut.
constexpr Rename kVaeResnet[] = {
    {"norm1.", "norm1."},
    {"conv1.", "conv1."},
    {"norm2.", "norm2."},
    {"conv2.", "conv2."},
    {"conv_shortcut.", "nin_shortcut."},
};

// Attention -> AttnBlock; both the current (to_q) and the pre-0.14 (query) diffusers names.
constexpr Rename kVaeAttention[] = {
    {"group_norm.", "norm."},
    {"to_q.", "q.", Transform::Conv1x1},
    {"to_k.", "k.", Transform::Conv1x1},
    {"to_v.", "v.", Transform::Conv1x1},
    {"to_out.0.", "proj_out.", Transform::Conv1x1},
    {"query.", "q.", Transform::Conv1x1},
    {"key.", "k.", Transform::Conv1x1},
    {"value.", "v.", Transform::Conv1x1},
    {"proj_attn.", "proj_out.", Transform::Conv1x1},
};

constexpr Rule kVaeRules[] = {
    // Encoder.
    {"encoder.conv_in.", FIXED("encoder.conv_in.")},
    // encoder.down_blocks.i.resnets.j -> encoder.down.i.block.j
    {"encoder.down_blocks.#.resnets.#.",
     [](const Nums& n, const UnetShape&) {
       return "encoder.down." + num(n[0]) + ".block." + num(n[1]) + ".";
     },
     {kVaeLevels, 2},
     kVaeResnet},
    // encoder.down_blocks.i.downsamplers.0.conv -> encoder.down.i.downsample.conv
    {"encoder.down_blocks.#.downsamplers.0.conv.",
     [](const Nums& n, const UnetShape&) {
       return "encoder.down." + num(n[0]) + ".downsample.conv.";
     },
     {kVaeLevels, 0}},
    // mid_block.resnets.j -> mid.block_(j+1); mid_block.attentions.0 -> mid.attn_1
    {"encoder.mid_block.resnets.#.",
     [](const Nums& n, const UnetShape&) { return "encoder.mid.block_" + num(n[0] + 1) + "."; },
     {2, 0},
     kVaeResnet},
    {"encoder.mid_block.attentions.0.", FIXED("encoder.mid.attn_1."), {}, kVaeAttention},
    {"encoder.conv_norm_out.", FIXED("encoder.norm_out.")},
    {"encoder.conv_out.", FIXED("encoder.conv_out.")},
    // Decoder.
    {"decoder.conv_in.", FIXED("decoder.conv_in.")},
    {"decoder.mid_block.resnets.#.",
     [](const Nums& n, const UnetShape&) { return "decoder.mid.block_" + num(n[0] + 1) + "."; },
     {2, 0},
     kVaeResnet},
    {"decoder.mid_block.attentions.0.", FIXED("decoder.mid.attn_1."), {}, kVaeAttention},
    // decoder.up_blocks.i.resnets.j -> decoder.up.(3-i).block.j
    {"decoder.up_blocks.#.resnets.#.",
     [](const Nums& n, const UnetShape&) {
       return "decoder.up." + num(kVaeLevels - 1 - n[0]) + ".block." + num(n[1]) + ".";
     },
     {kVaeLevels, 3},
     kVaeResnet},
    // decoder.up_blocks.i.upsamplers.0.conv -> decoder.up.(3-i).upsample.conv
    {"decoder.up_blocks.#.upsamplers.0.conv.",
     [](const Nums& n, const UnetShape&) {
       return "decoder.up." + num(kVaeLevels - 1 - n[0]) + ".upsample.conv.";
     },
     {kVaeLevels, 0}},
    {"decoder.conv_norm_out.", FIXED("decoder.norm_out.")},
    {"decoder.conv_out.", FIXED("decoder.conv_out.")},
    // Latent-moment convs; some exports nest them in encoder/decoder (sd.cpp accepts both).
    {"quant_conv.", FIXED("quant_conv.")},
    {"post_quant_conv.", FIXED("post_quant_conv.")},
    {"encoder.quant_conv.", FIXED("quant_conv.")},
    {"decoder.post_quant_conv.", FIXED("post_quant_conv.")},
};

// ---------------------------------------------------------------------------------------
// Text encoders, below a text-encoder root, in checkpoint (Ldm) spelling.

// OpenCLIP ResidualAttentionBlock -> HF CLIPEncoderLayer.
constexpr Rename kOpenClipBlock[] = {
    {"ln_1.", "layer_norm1."},
    {"ln_2.", "layer_norm2."},
    {"mlp.c_fc.", "mlp.fc1."},
    {"mlp.c_proj.", "mlp.fc2."},
    {"attn.out_proj.", "self_attn.out_proj."},
    {"attn.in_proj_weight", "self_attn.in_proj.weight", Transform::SplitQkv},
    {"attn.in_proj_bias", "self_attn.in_proj.bias", Transform::SplitQkv},
};

constexpr Rule kCheckpointTextRules[] = {
    // Already HF CLIP (SD1.x, SDXL's first encoder).
    {"transformer.text_model.", FIXED("transformer.text_model.")},
    // CLIPTextModelWithProjection saved under transformer. (sd.cpp's canonical name).
    {"transformer.text_projection.weight", FIXED("transformer.text_model.text_projection")},
    // Checkpoints saved with transformers < 4.17 lack the text_model level.
    {"transformer.embeddings.", FIXED("transformer.text_model.embeddings.")},
    {"transformer.encoder.", FIXED("transformer.text_model.encoder.")},
    {"transformer.final_layer_norm.", FIXED("transformer.text_model.final_layer_norm.")},
    // OpenCLIP TextTransformer (SD2.x's ViT-H, SDXL's ViT-bigG) -> HF CLIP.
    {"model.token_embedding.", FIXED("transformer.text_model.embeddings.token_embedding.")},
    {"model.positional_embedding",
     FIXED("transformer.text_model.embeddings.position_embedding.weight")},
    {"model.transformer.resblocks.#.",
     [](const Nums& n, const UnetShape&) {
       return "transformer.text_model.encoder.layers." + num(n[0]) + ".";
     },
     {},
     kOpenClipBlock},
    {"model.ln_final.", FIXED("transformer.text_model.final_layer_norm.")},
    // sd.cpp compatibility: OpenCLIP applies its projection as x @ P, sd.cpp reads P as
    // stored and applies it like an HF Linear weight (P x). We keep the stored tensor too,
    // so the pooled vector, and every SDXL image, match sd.cpp's.
    {"model.text_projection", FIXED("transformer.text_model.text_projection")},
};

// A transformers model's own state dict (text_encoder/, --clip_l/--clip_g/--t5xxl files).
constexpr Rule kTransformersRules[] = {
    {"text_model.", FIXED("transformer.text_model.")},
    {"text_projection.weight", FIXED("transformer.text_model.text_projection")},
    // T5EncoderModel.
    {"shared.", FIXED("transformer.shared.")},
    {"encoder.", FIXED("transformer.encoder.")},
};

#undef FIXED

// ---------------------------------------------------------------------------------------
// Whole-checkpoint roots.

struct RootRename {
  std::string_view from, to;
};
constexpr RootRename kRootRenames[] = {
    // SDXL's GeneralConditioner: embedder 0 is CLIP-L (the refiner's is OpenCLIP-bigG),
    // embedder 1 OpenCLIP-bigG; sd.cpp files them as cond_stage_model and
    // cond_stage_model.1.
    {"conditioner.embedders.0.", "cond_stage_model."},
    {"conditioner.embedders.1.", "cond_stage_model.1."},
    // sd.cpp's prefix for --vae files.
    {"vae.", "first_stage_model."},
};

enum class RootKind { Opaque, Text };
struct Root {
  std::string_view prefix;
  RootKind kind;
};
// Longest first: cond_stage_model.1. must win over cond_stage_model.
constexpr Root kRoots[] = {
    {kUnetRoot, RootKind::Opaque},          {kVaeRoot, RootKind::Opaque},
    {kTextEncoder2Root, RootKind::Text},    {kTextEncoderRoot, RootKind::Text},
    {kClipLRoot, RootKind::Text},           {kClipGRoot, RootKind::Text},
    {kT5xxlRoot, RootKind::Opaque},         {kClipVisionRoot, RootKind::Opaque},
    {kHighNoiseUnetRoot, RootKind::Opaque},
};

NameMapping convert_checkpoint_name(std::string_view name, std::string_view prefix) {
  // A high-noise expert saved as a whole diffusion model keeps its own root below ours.
  if (prefix == kHighNoiseUnetRoot && name.starts_with(kUnetRoot))
    name.remove_prefix(kUnetRoot.size());
  std::string full = name.starts_with(prefix) ? std::string(name) : std::string(prefix) += name;
  for (const RootRename& r : kRootRenames) {
    if (full.starts_with(r.from)) {
      full = std::string(r.to) + full.substr(r.from.size());
      break;
    }
  }
  // T5 under "text_encoders.t5xxl." with or without "transformer.", in Hugging Face names
  // or llama.cpp's (enc.blk.N.attn_q, token_embd, ...): all onto kT5Root.
  if (full.starts_with(kT5xxlRoot)) {
    std::string_view rest = std::string_view(full).substr(kT5xxlRoot.size());
    if (rest.starts_with("transformer.")) rest.remove_prefix(12);
    if (auto hf = t5_name_from_llama_cpp(rest))
      return {std::string(kT5Root) + *hf, Transform::None, true};
    return {std::string(kT5Root) += rest, Transform::None, true};
  }
  // An LLM under "text_encoders.llm.": a transformers state dict (model.*, or a bare
  // decoder's layers.* / embed_tokens / norm) or llama.cpp's names, all onto model.*; its
  // vision tower (visual.*, or an mmproj file's v.* / mm.* names) onto kLlmVisionRoot.
  if (full.starts_with(kLlmRoot)) {
    std::string_view rest = std::string_view(full).substr(kLlmRoot.size());
    if (rest.starts_with("model.visual.")) rest.remove_prefix(6);  // newer transformers
    if (rest.starts_with("visual.")) {
      rest.remove_prefix(7);
      if (rest.starts_with("visual.")) rest.remove_prefix(7);  // a tower saved with its root
      std::string name = std::string(kLlmVisionRoot) +
                         llm_vision_name_from_llama_cpp(rest).value_or(std::string(rest));
      const bool fused = name.ends_with(".attn.qkv.weight") || name.ends_with(".attn.qkv.bias");
      return {std::move(name), fused ? Transform::SplitQkv : Transform::None, true};
    }
    if (auto hf = llm_name_from_llama_cpp(rest))
      return {std::string(kLlmRoot) + *hf, Transform::None, true};
    if (rest.starts_with("layers.") || rest.starts_with("embed_tokens.") ||
        rest.starts_with("norm."))
      return {std::string(kLlmRoot) + "model." + std::string(rest), Transform::None, true};
    return {full, Transform::None, true};
  }
  // Black Forest Labs' autoencoders (FLUX.2's) keep the latent-moment convs inside the
  // encoder and decoder; sd.cpp accepts both spellings.
  if (full.starts_with(kVaeRoot)) {
    const std::string_view rest = std::string_view(full).substr(kVaeRoot.size());
    for (std::string_view nested : {"encoder.quant_conv.", "decoder.post_quant_conv."})
      if (rest.starts_with(nested))
        return {std::string(kVaeRoot) += rest.substr(nested.find('.') + 1), Transform::None, true};
  }
  for (const Root& root : kRoots) {
    if (!full.starts_with(root.prefix)) continue;
    if (root.kind == RootKind::Opaque) return {full, Transform::None, true};
    std::string_view rest = std::string_view(full).substr(root.prefix.size());
    if (auto m = apply_rules(rest, kCheckpointTextRules)) {
      m->name.insert(0, root.prefix);
      return *m;
    }
    return {full, Transform::None, false};
  }
  return {full, Transform::None, false};
}

}  // namespace

const char* layout_name(SourceLayout layout) {
  switch (layout) {
    case SourceLayout::Ldm:
      return "ldm";
    case SourceLayout::DiffusersUnet:
      return "diffusers-unet";
    case SourceLayout::DiffusersUnetXl:
      return "diffusers-unet-xl";
    case SourceLayout::DiffusersVae:
      return "diffusers-vae";
    case SourceLayout::HfTransformers:
      return "transformers";
  }
  return "?";
}

std::string_view file_prefix(FileRole role, bool unet_family) {
  switch (role) {
    case FileRole::Model:
      return "";
    case FileRole::DiffusionModel:
      return kUnetRoot;
    case FileRole::HighNoiseDiffusionModel:
      return kHighNoiseUnetRoot;
    case FileRole::Vae:
      return kVaeRoot;
    case FileRole::ClipL:
      return unet_family ? kTextEncoderRoot : kClipLRoot;
    case FileRole::ClipG:
      return unet_family ? kTextEncoder2Root : kClipGRoot;
    case FileRole::T5xxl:
      return kT5xxlRoot;
    case FileRole::Llm:
      return kLlmRoot;
    case FileRole::LlmVision:
      return kLlmVisionRoot;
    case FileRole::ClipVision:
      return kClipVisionRoot;
  }
  return "";
}

NameMapping convert_name(std::string_view name, SourceLayout layout, std::string_view prefix) {
  if (layout == SourceLayout::Ldm) return convert_checkpoint_name(name, prefix);

  std::span<const Rule> rules;
  UnetShape shape = kSdUnet;
  std::string_view root;
  switch (layout) {
    case SourceLayout::DiffusersUnetXl:
      shape = kSdxlUnet;
      [[fallthrough]];
    case SourceLayout::DiffusersUnet:
      rules = kUnetRules;
      root = kUnetRoot;
      break;
    case SourceLayout::DiffusersVae:
      rules = kVaeRules;
      root = kVaeRoot;
      break;
    default:
      rules = kTransformersRules;
      root = kTextEncoderRoot;
      break;
  }
  // Each diffusers part has one natural root; a caller only names another (clip_l of a
  // DiT, the second encoder) explicitly.
  if (!prefix.empty()) root = prefix;
  std::optional<NameMapping> m = apply_rules(name, rules, shape);
  if (!m) return {std::string(root) += name, Transform::None, false};
  if (m->transform == Transform::Conv1x1 && !m->name.ends_with(".weight")) {
    m->transform = Transform::None;  // biases are [C] either way
  }
  m->name.insert(0, root);
  return *m;
}

std::vector<std::string> unmapped_names(const std::vector<std::string>& names, SourceLayout layout,
                                        std::string_view prefix) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (!convert_name(n, layout, prefix).known) out.push_back(n);
  }
  return out;
}

std::optional<std::array<std::string, 3>> qkv_split_names(std::string_view canonical) {
  // Qwen2.5-VL's vision blocks: attn.qkv -> attn.{q,k,v}_proj.
  for (std::string_view kind : {std::string_view("weight"), std::string_view("bias")}) {
    const std::string fused = ".attn.qkv." + std::string(kind);
    if (!canonical.starts_with(kLlmVisionRoot) || !canonical.ends_with(fused)) continue;
    const std::string base(canonical.substr(0, canonical.size() - fused.size()));
    return std::array<std::string, 3>{base + ".attn.q_proj." + std::string(kind),
                                      base + ".attn.k_proj." + std::string(kind),
                                      base + ".attn.v_proj." + std::string(kind)};
  }
  for (std::string_view kind : {std::string_view("weight"), std::string_view("bias")}) {
    std::string fused = "self_attn.in_proj." + std::string(kind);
    if (!canonical.ends_with(fused)) continue;
    std::string base(canonical.substr(0, canonical.size() - fused.size()));
    return std::array<std::string, 3>{base + "self_attn.q_proj." + std::string(kind),
                                      base + "self_attn.k_proj." + std::string(kind),
                                      base + "self_attn.v_proj." + std::string(kind)};
  }
  return std::nullopt;
}

SourceLayout guess_layout(const std::vector<std::string>& names) {
  bool unet = false, xl = false, vae = false, transformers = false;
  for (const std::string& n : names) {
    if (n.starts_with("down_blocks.") || n.starts_with("time_embedding.")) unet = true;
    if (n.starts_with("add_embedding.")) xl = true;
    if (n.starts_with("encoder.down_blocks.") || n.starts_with("decoder.up_blocks.")) vae = true;
    if (n.starts_with("text_model.")) transformers = true;
  }
  if (unet) return xl ? SourceLayout::DiffusersUnetXl : SourceLayout::DiffusersUnet;
  if (vae) return SourceLayout::DiffusersVae;
  if (transformers) return SourceLayout::HfTransformers;
  return SourceLayout::Ldm;
}

bool is_unused_tensor(std::string_view n) {
  // DDPM schedule buffers that LDM checkpoints save with the model.
  static constexpr std::string_view kSchedule[] = {
      "betas",
      "alphas_cumprod",
      "alphas_cumprod_prev",
      "sqrt_alphas_cumprod",
      "sqrt_one_minus_alphas_cumprod",
      "log_one_minus_alphas_cumprod",
      "sqrt_recip_alphas_cumprod",
      "sqrt_recipm1_alphas_cumprod",
      "posterior_variance",
      "posterior_log_variance_clipped",
      "posterior_mean_coef1",
      "posterior_mean_coef2",
  };
  for (std::string_view s : kSchedule) {
    if (n == s) return true;
  }
  return n.starts_with("model_ema.") || n.ends_with("embeddings.position_ids") ||
         n.ends_with("logit_scale") || n.starts_with("embedding_manager.");
}

}  // namespace sd::io
