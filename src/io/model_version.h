// Which model a set of weights is, from tensor names and shapes alone (no metadata, no
// bytes): what the loader uses to choose the network preset and the defaults.
//
// What weights cannot tell: SD2.x eps vs v prediction (768-v and 512-base have identical
// tensors) and SD3/Flux sampling details; those come from a flag or file metadata.
#pragma once

#include <string>
#include <vector>

#include "io/tensor_info.h"

namespace sd::io {

enum class ModelVersion {
  Unknown,
  SD1,
  SD1Inpaint,  // UNet input has 9 channels: latent + mask + masked-image latent
  SD1Pix2Pix,  // 8 channels: latent + input-image latent
  SD2,         // OpenCLIP ViT-H text encoder, context 1024
  SD2Inpaint,
  SDXL,
  SDXLInpaint,
  SDXLPix2Pix,
  SDXLRefiner,  // OpenCLIP-bigG only, context 1280
  SDXLSSD1B,    // Segmind SSD-1B: no middle transformer, fewer transformer blocks
  SDXLVega,     // Segmind Vega: as SSD-1B, fewer still
  SD3,          // SD3 Medium: 24 joint blocks
  SD3_5Medium,  // MMDiT-X: x_block.attn2 in the first joint blocks
  SD3_5Large,   // 38 joint blocks
  Flux,         // Flux.1 dev: guidance embedding (guidance_in)
  FluxSchnell,  // no guidance_in
  FluxFill,     // img_in takes 384 channels (64 latent + 320 mask/image)
  Chroma,       // FLUX.1 blocks without modulation linears: distilled_guidance_layer
  ZImage,       // Z-Image Turbo / Base: an LLM-conditioned single-stream DiT (cap_embedder)
  Flux2,        // FLUX.2 dev: shared modulations (double_stream_modulation_img), 48 single blocks
  Flux2Klein,   // FLUX.2 klein 4B / 9B: as dev with fewer single blocks, no guidance
  QwenImage,    // Qwen-Image (and -Edit): an MMDiT of transformer_blocks.N.img_mod
  Wan,          // Wan 2.1 / 2.2 text-to-video: blocks.N.cross_attn over umT5, a video latent
  WanI2V,       // Wan 2.1 I2V / FLF2V, Wan 2.2 I2V: the latent plus a conditioning clip's mask and
                // latent
  WanTI2V,      // Wan 2.2 TI2V-5B: Wan 2.2's 48-channel latent, text or a first frame to video
  WanVace,      // Wan 2.1 VACE: the text-to-video transformer plus VACE blocks (vace_blocks.N)
                // reading a control video
};

enum class ModelFamily {
  Unknown,
  SD1,
  SD2,
  SDXL,
  SD3,
  Flux,
  Chroma,
  ZImage,
  Flux2,
  QwenImage,
  Wan
};

ModelFamily family_of(ModelVersion v);
// sd.cpp's strings where it has the version ("SD 1.x", "SD 2.x Inpaint", "SDXL", "Flux
// Fill"), otherwise in the same style ("SDXL Refiner", "SD3.5 Large", "Flux Schnell").
const char* version_name(ModelVersion v);
const char* family_name(ModelFamily f);
bool is_unet_family(ModelVersion v);  // encoders under cond_stage_model. (name_conversion.h)
// Inpainting variants: the diffusion net also takes the mask and the masked image's latent.
bool is_inpaint(ModelVersion v);
// Instruct-pix2pix: the UNet also takes the latent of the image to edit.
bool is_pix2pix(ModelVersion v);

// What detection measured, for messages and presets.
struct ModelDescription {
  ModelVersion version = ModelVersion::Unknown;
  int64_t in_channels = 0;  // of the UNet's conv_in / the DiT's patch input
  int64_t context_dim = 0;  // cross-attention key width (UNets)
  int depth = 0;            // joint blocks (SD3) or double blocks (Flux)
};

// Accepts raw checkpoint names or canonical ones (names are canonicalized as a checkpoint
// first). Returns version Unknown when nothing matches.
ModelDescription describe_model(const std::vector<TensorInfo>& tensors);

// As describe_model, but an unknown model is an sd::Error:
// "unknown model: saw N tensors, e.g. <first names>; expected one of SD1.x, ...".
ModelVersion detect_version(const std::vector<TensorInfo>& tensors);

}  // namespace sd::io
