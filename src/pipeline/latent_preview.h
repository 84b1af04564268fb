// A cheap look at a latent while sampling runs (--preview proj): each latent pixel's channels
// projected linearly to RGB with factors fitted per latent space, one image pixel per latent
// pixel (FLUX.2's 2x2-patchified latent: per patch position), as stable-diffusion.cpp draws
// it. A video latent gives one image per latent frame.
#pragma once

#include <cstdint>
#include <vector>

#include "io/image.h"
#include "models/vae.h"

namespace sd::pipeline {

// The latent space whose RGB factors apply: SD 1.x/2.x's and SDXL's 4 channels, SD3's and
// FLUX.1's 16 (FLUX.1's also Chroma's and Z-Image's), FLUX.2's 32 patchified 2x2 into 128,
// the Wan 2.1 autoencoder's 16 (Wan, Qwen-Image) and the Wan 2.2 one's 48 (TI2V-5B).
enum class LatentColors { Sd, Sdxl, Sd3, Flux, Flux2, Wan21, Wan22 };

// The colours of a family's latent (`family_colors`), unless its autoencoder brings a latent
// space of its own (Wan 2.2's autoencoder under Wan).
LatentColors latent_colors_for(LatentColors family_colors, const models::VaeConfig& vae);

// The channels `colors` reads from a latent (FLUX.2: 128).
int64_t latent_color_channels(LatentColors colors);

// latent [w, h, frames, C] (C >= latent_color_channels) -> one RGB image per frame, w x h
// pixels (FLUX.2: 2w x 2h).
std::vector<io::Image> project_latent_to_rgb(const std::vector<float>& latent, int64_t w, int64_t h,
                                             int64_t frames, LatentColors colors);

}  // namespace sd::pipeline
