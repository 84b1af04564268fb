// Network shapes read off a model's tensors. Users bring variants of a family's networks
// (fewer blocks, other widths, distilled UNets), so a family whose presets only name its
// layout (SDXL) takes every dimension a file states from the file, keeping from the preset
// only what tensors cannot tell (head width, activation, clip-skip default).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "models/clip_text.h"
#include "models/flux.h"
#include "models/mmdit.h"
#include "models/t5.h"
#include "models/taehv.h"
#include "models/unet.h"
#include "models/vae.h"

namespace sd::pipeline {

// The engine-order shape of a canonical tensor, or nullopt when the files have none.
using ShapeOf = std::function<std::optional<std::array<int64_t, 4>>(const std::string& name)>;

// The UNet under `scope` (io::kUnetRoot): input and output channels, model channels,
// levels and their channel multipliers, res blocks per level, transformer depth per level
// and in the middle, context width, projection kind and vector width. Throws sd::Error
// naming the tensor when the blocks do not form a UNet.
models::UnetConfig unet_config_from_shapes(models::UnetConfig preset, std::string_view scope,
                                           const ShapeOf& shape_of);

// A CLIP text encoder under `scope`: vocabulary, positions, width, MLP width, layers (heads
// of 64 channels) and text_projection width.
models::ClipTextConfig clip_config_from_shapes(models::ClipTextConfig preset,
                                               std::string_view scope, const ShapeOf& shape_of);

// The VAE under `scope` (io::kVaeRoot), from its decoder: base channels, channel
// multipliers and res blocks per level. Latent channels, scale and shift stay the preset's.
models::VaeConfig vae_config_from_shapes(models::VaeConfig preset, std::string_view scope,
                                         const ShapeOf& shape_of);
// A Wan autoencoder under `scope`: Wan 2.1's (the preset, arch Wan21) or, where the file
// nests its blocks per level, Wan 2.2's (VaeConfig::wan22); the base widths from the
// decoder's output norm (and Wan 2.2's encoder's input conv) and the latent channels from
// its input conv; the levels and blocks stay the preset's (the module numbering follows
// from them).
models::VaeConfig wan_vae_config_from_shapes(models::VaeConfig preset, std::string_view scope,
                                             const ShapeOf& shape_of);

// A TAEHV under `scope` (a --tae file for Wan's latents): latent channels, pixel patch,
// the decoder's widths and time strides, and the encoder's where the file has one. Throws
// sd::Error naming the tensor when the file is no TAEHV, or one of a kind not built here.
models::TaehvConfig taehv_config_from_shapes(std::string_view scope, const ShapeOf& shape_of);

// FLUX.1's transformer under `scope` (io::kUnetRoot): input, output, hidden, MLP, context
// and vector widths, head width (from the QK norm scales), double and single block counts,
// guidance embedding present or not. RoPE axes and theta stay the preset's.
models::FluxConfig flux_config_from_shapes(models::FluxConfig preset, std::string_view scope,
                                           const ShapeOf& shape_of);

// SD3's MMDiT under `scope` (io::kUnetRoot): patch size, input, output, hidden, context and
// pooled widths, joint blocks (also the head count), position-table size, q/k norm kind
// and the MMDiT-X blocks with a second attention.
models::MmditConfig mmdit_config_from_shapes(models::MmditConfig preset, std::string_view scope,
                                             const ShapeOf& shape_of);

// The T5 encoder under `scope`: vocabulary, model, inner and feed-forward widths, layers and
// heads (from the relative attention bias table).
models::T5Config t5_config_from_shapes(models::T5Config preset, std::string_view scope,
                                       const ShapeOf& shape_of);

}  // namespace sd::pipeline
