#include "io/model_version.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "io/name_conversion.h"
#include "tensor/error.h"

namespace sd::io {
namespace {

// The block index after `prefix` in `name` ("...joint_blocks.12.x" -> 12), or -1.
int block_index(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return -1;
  int v = 0;
  size_t i = prefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && v < 100000; ++i) {
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// Cross-attention context widths of the UNet families (the text encoders' hidden sizes).
constexpr int64_t kSd1Context = 768;       // CLIP ViT-L/14
constexpr int64_t kSd2Context = 1024;      // OpenCLIP ViT-H/14
constexpr int64_t kSdxlContext = 2048;     // CLIP-L 768 + OpenCLIP-bigG 1280, concatenated
constexpr int64_t kRefinerContext = 1280;  // OpenCLIP-bigG alone

// Input channels beyond the 4 latent ones (SD UNets) / 64 packed ones (Flux).
constexpr int64_t kInpaintChannels = 9;
constexpr int64_t kPix2PixChannels = 8;
constexpr int64_t kFluxFillChannels = 384;
constexpr int64_t kWan22LatentChannels = 48;  // Wan 2.2's autoencoder (TI2V-5B)
// SD3.5 Large has 38 joint blocks, SD3 Medium and SD3.5 Medium 24.
constexpr int kSd35LargeDepth = 38;

ModelVersion unet_version(ModelFamily family, int64_t in_channels) {
  bool inpaint = in_channels == kInpaintChannels, pix2pix = in_channels == kPix2PixChannels;
  switch (family) {
    case ModelFamily::SD1:
      return inpaint   ? ModelVersion::SD1Inpaint
             : pix2pix ? ModelVersion::SD1Pix2Pix
                       : ModelVersion::SD1;
    case ModelFamily::SD2:
      return inpaint ? ModelVersion::SD2Inpaint : ModelVersion::SD2;
    default:
      return inpaint   ? ModelVersion::SDXLInpaint
             : pix2pix ? ModelVersion::SDXLPix2Pix
                       : ModelVersion::SDXL;
  }
}

}  // namespace

ModelFamily family_of(ModelVersion v) {
  switch (v) {
    case ModelVersion::SD1:
    case ModelVersion::SD1Inpaint:
    case ModelVersion::SD1Pix2Pix:
      return ModelFamily::SD1;
    case ModelVersion::SD2:
    case ModelVersion::SD2Inpaint:
      return ModelFamily::SD2;
    case ModelVersion::SDXL:
    case ModelVersion::SDXLInpaint:
    case ModelVersion::SDXLPix2Pix:
    case ModelVersion::SDXLRefiner:
    case ModelVersion::SDXLSSD1B:
    case ModelVersion::SDXLVega:
      return ModelFamily::SDXL;
    case ModelVersion::SD3:
    case ModelVersion::SD3_5Medium:
    case ModelVersion::SD3_5Large:
      return ModelFamily::SD3;
    case ModelVersion::Flux:
    case ModelVersion::FluxSchnell:
    case ModelVersion::FluxFill:
      return ModelFamily::Flux;
    case ModelVersion::Chroma:
      return ModelFamily::Chroma;
    case ModelVersion::ZImage:
      return ModelFamily::ZImage;
    case ModelVersion::Flux2:
    case ModelVersion::Flux2Klein:
      return ModelFamily::Flux2;
    case ModelVersion::QwenImage:
      return ModelFamily::QwenImage;
    case ModelVersion::Wan:
    case ModelVersion::WanI2V:
    case ModelVersion::WanTI2V:
    case ModelVersion::WanVace:
      return ModelFamily::Wan;
    case ModelVersion::Unknown:
      break;
  }
  return ModelFamily::Unknown;
}

const char* version_name(ModelVersion v) {
  switch (v) {
    case ModelVersion::Unknown:
      return "unknown";
    case ModelVersion::SD1:
      return "SD 1.x";
    case ModelVersion::SD1Inpaint:
      return "SD 1.x Inpaint";
    case ModelVersion::SD1Pix2Pix:
      return "Instruct-Pix2Pix";
    case ModelVersion::SD2:
      return "SD 2.x";
    case ModelVersion::SD2Inpaint:
      return "SD 2.x Inpaint";
    case ModelVersion::SDXL:
      return "SDXL";
    case ModelVersion::SDXLInpaint:
      return "SDXL Inpaint";
    case ModelVersion::SDXLPix2Pix:
      return "SDXL Instruct-Pix2Pix";
    case ModelVersion::SDXLRefiner:
      return "SDXL Refiner";
    case ModelVersion::SDXLSSD1B:
      return "SDXL (SSD1B)";
    case ModelVersion::SDXLVega:
      return "SDXL (Vega)";
    case ModelVersion::SD3:
      return "SD3 Medium";
    case ModelVersion::SD3_5Medium:
      return "SD3.5 Medium";
    case ModelVersion::SD3_5Large:
      return "SD3.5 Large";
    case ModelVersion::Flux:
      return "Flux";
    case ModelVersion::FluxSchnell:
      return "Flux Schnell";
    case ModelVersion::FluxFill:
      return "Flux Fill";
    case ModelVersion::Chroma:
      return "Chroma";
    case ModelVersion::ZImage:
      return "Z-Image";
    case ModelVersion::Flux2:
      return "Flux.2";
    case ModelVersion::Flux2Klein:
      return "Flux.2 klein";
    case ModelVersion::QwenImage:
      return "Qwen Image";
    case ModelVersion::Wan:
      return "Wan";
    case ModelVersion::WanI2V:
      return "Wan I2V";
    case ModelVersion::WanTI2V:
      return "Wan TI2V";
    case ModelVersion::WanVace:
      return "Wan VACE";
  }
  return "unknown";
}

const char* family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::SD1:
      return "SD1.x";
    case ModelFamily::SD2:
      return "SD2.x";
    case ModelFamily::SDXL:
      return "SDXL";
    case ModelFamily::SD3:
      return "SD3";
    case ModelFamily::Flux:
      return "Flux";
    case ModelFamily::Chroma:
      return "Chroma";
    case ModelFamily::ZImage:
      return "Z-Image";
    case ModelFamily::Flux2:
      return "Flux.2";
    case ModelFamily::QwenImage:
      return "Qwen-Image";
    case ModelFamily::Wan:
      return "Wan";
    case ModelFamily::Unknown:
      break;
  }
  return "unknown";
}

bool is_inpaint(ModelVersion v) {
  return v == ModelVersion::SD1Inpaint || v == ModelVersion::SD2Inpaint ||
         v == ModelVersion::SDXLInpaint || v == ModelVersion::FluxFill;
}

bool is_pix2pix(ModelVersion v) {
  return v == ModelVersion::SD1Pix2Pix || v == ModelVersion::SDXLPix2Pix;
}

bool is_unet_family(ModelVersion v) {
  ModelFamily f = family_of(v);
  return f == ModelFamily::SD1 || f == ModelFamily::SD2 || f == ModelFamily::SDXL;
}

ModelDescription describe_model(const std::vector<TensorInfo>& tensors) {
  // Canonical names first, so checkpoints, converted diffusers parts and part files with a
  // raw diffusers layout are all read the same way.
  std::vector<std::string> raw;
  raw.reserve(tensors.size());
  for (const TensorInfo& t : tensors) raw.push_back(t.name);
  SourceLayout layout = guess_layout(raw);
  std::unordered_map<std::string, const TensorInfo*> by_name;
  by_name.reserve(tensors.size());
  for (const TensorInfo& t : tensors) by_name.emplace(to_canonical(t.name, layout, ""), &t);
  auto find = [&](std::string_view suffix) -> const TensorInfo* {
    auto it = by_name.find(std::string(kUnetRoot) += suffix);
    return it == by_name.end() ? nullptr : it->second;
  };

  ModelDescription d;
  int joint_depth = 0, double_depth = 0;
  bool sd3_attn2 = false, has_text2 = false, has_middle_transformer = false;
  const TensorInfo* context_key = nullptr;
  const std::string joint_blocks = std::string(kUnetRoot) + "joint_blocks.";
  const std::string double_blocks = std::string(kUnetRoot) + "double_blocks.";
  const std::string middle_transformer = std::string(kUnetRoot) + "middle_block.1.";
  for (const auto& [name, info] : by_name) {
    std::string_view n = name;
    joint_depth = std::max(joint_depth, block_index(n, joint_blocks) + 1);
    double_depth = std::max(double_depth, block_index(n, double_blocks) + 1);
    if (joint_depth > 0 && n.find(".x_block.attn2.") != std::string_view::npos) sd3_attn2 = true;
    if (n.starts_with(kTextEncoder2Root)) has_text2 = true;
    if (n.starts_with(middle_transformer)) has_middle_transformer = true;
    // Any cross-attention key projection gives the context width; take the first by name
    // so the result does not depend on hash order.
    if (n.starts_with(kUnetRoot) && n.ends_with(".attn2.to_k.weight") &&
        (!context_key || info->name < context_key->name)) {
      context_key = info;
    }
  }

  if (joint_depth > 0) {
    d.depth = joint_depth;
    if (const TensorInfo* x = find("x_embedder.proj.weight")) d.in_channels = x->ne[2];
    d.version = sd3_attn2                        ? ModelVersion::SD3_5Medium
                : joint_depth >= kSd35LargeDepth ? ModelVersion::SD3_5Large
                                                 : ModelVersion::SD3;
    return d;
  }
  if (double_depth > 0) {
    d.depth = double_depth;
    if (const TensorInfo* img_in = find("img_in.weight")) d.in_channels = img_in->ne[0];
    // FLUX.2: one modulation per stream kind; dev has 48 single blocks, klein fewer (sd.cpp
    // tells them apart by the same names).
    if (find("double_stream_modulation_img.lin.weight")) {
      d.version =
          find("single_blocks.47.linear1.weight") ? ModelVersion::Flux2 : ModelVersion::Flux2Klein;
      return d;
    }
    // Chroma: every modulation comes from one approximator (sd.cpp looks for the same name).
    if (find("distilled_guidance_layer.in_proj.weight")) {
      d.version = ModelVersion::Chroma;
      return d;
    }
    d.version = d.in_channels == kFluxFillChannels    ? ModelVersion::FluxFill
                : find("guidance_in.in_layer.weight") ? ModelVersion::Flux
                                                      : ModelVersion::FluxSchnell;
    return d;
  }

  // Qwen-Image: its blocks' image modulation (sd.cpp looks for the same name).
  if (find("transformer_blocks.0.img_mod.1.weight")) {
    if (const TensorInfo* img_in = find("img_in.weight")) d.in_channels = img_in->ne[0] / 4;
    d.version = ModelVersion::QwenImage;
    return d;
  }

  // Z-Image: the caption embedder's RMS norm (sd.cpp looks for the same name).
  if (find("cap_embedder.0.weight")) {
    if (const TensorInfo* x = find("x_embedder.weight")) d.in_channels = x->ne[0] / 4;
    d.version = ModelVersion::ZImage;
    return d;
  }

  // Wan: its blocks' cross-attention key norm (sd.cpp looks for the same name).
  if (find("blocks.0.cross_attn.norm_k.weight")) {
    const TensorInfo* patch = find("patch_embedding.weight");
    const TensorInfo* bias = find("patch_embedding.bias");
    if (patch && bias && bias->ne[0] > 0) d.in_channels = patch->ne[3] / bias->ne[0];
    // Image to video reads more channels than it predicts (the conditioning clip's).
    const TensorInfo* head = find("head.head.weight");
    const int64_t out_channels = head ? head->ne[1] / 4 : 0;
    if (find("vace_patch_embedding.weight"))  // VACE's control stream (sd.cpp: vace_blocks)
      d.version = ModelVersion::WanVace;
    else if (head && d.in_channels > out_channels)
      d.version = ModelVersion::WanI2V;
    else  // TI2V-5B predicts Wan 2.2's 48-channel latent
      d.version = out_channels == kWan22LatentChannels ? ModelVersion::WanTI2V : ModelVersion::Wan;
    return d;
  }

  const TensorInfo* conv_in = find("input_blocks.0.0.weight");
  if (!conv_in) return d;
  d.in_channels = conv_in->ne[2];  // [out, in, kh, kw] in the file
  if (context_key) d.context_dim = context_key->ne[0];

  ModelFamily family = ModelFamily::Unknown;
  if (d.context_dim == kSdxlContext || (has_text2 && find("label_emb.0.0.weight"))) {
    family = ModelFamily::SDXL;
  } else if (d.context_dim == kRefinerContext ||
             (find("label_emb.0.0.weight") &&
              by_name.count(std::string(kTextEncoderRoot) +
                            "transformer.text_model.text_projection"))) {
    // A vector-conditioned UNet with one projecting text encoder: the refiner at any width.
    d.version = ModelVersion::SDXLRefiner;
    return d;
  } else if (d.context_dim == kSd2Context) {
    family = ModelFamily::SD2;
  } else if (d.context_dim == kSd1Context) {
    family = ModelFamily::SD1;
  } else if (d.context_dim == 0) {
    // A UNet without cross-attention tensors: fall back on the text encoder's width.
    auto tok = by_name.find(std::string(kTextEncoderRoot) +
                            "transformer.text_model.embeddings.token_embedding.weight");
    int64_t width = tok == by_name.end() ? 0 : tok->second->ne[0];
    if (width == kSd1Context) family = ModelFamily::SD1;
    if (width == kSd2Context) family = ModelFamily::SD2;
  }
  if (family != ModelFamily::Unknown) d.version = unet_version(family, d.in_channels);
  // Segmind's distilled SDXL UNets drop the middle transformer (and its second res block);
  // SSD-1B keeps two blocks in output_blocks.3's transformer, Vega one (sd.cpp's test).
  if (d.version == ModelVersion::SDXL && !has_middle_transformer)
    d.version = by_name.count(std::string(kUnetRoot) +
                              "output_blocks.3.1.transformer_blocks.1.norm1.weight")
                    ? ModelVersion::SDXLSSD1B
                    : ModelVersion::SDXLVega;
  return d;
}

ModelVersion detect_version(const std::vector<TensorInfo>& tensors) {
  ModelDescription d = describe_model(tensors);
  if (d.version != ModelVersion::Unknown) return d.version;
  std::string seen;
  constexpr size_t kShown = 4;
  for (size_t i = 0; i < tensors.size() && i < kShown; ++i) {
    if (i) seen += ", ";
    seen += tensors[i].name;
  }
  if (tensors.size() > kShown) seen += ", ...";
  std::string why;
  if (d.in_channels && d.context_dim) {
    why = sd::format(" (a UNet with %lld input channels and context width %lld)",
                     static_cast<long long>(d.in_channels), static_cast<long long>(d.context_dim));
  }
  fail(
      "unknown model: saw %zu tensors, e.g. %s%s; expected one of SD1.x, SD2.x, SDXL, SD3, Flux, "
      "Chroma, Z-Image (a VAE or text-encoder file goes with --vae / --clip_l, not -m)",
      tensors.size(), tensors.empty() ? "none" : seen.c_str(), why.c_str());
}

}  // namespace sd::io
