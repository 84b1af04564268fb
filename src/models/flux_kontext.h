// FLUX.1 Kontext (Black Forest Labs 2025, "FLUX.1 Kontext: Flow Matching for In-Context
// Image Generation and Editing in Latent Space"): the images to edit or draw from are
// VAE-encoded, cut into the same 2x2 patches as the generated latent and appended to its
// tokens. Only their rotary positions tell them apart: the generated image has image index
// 0, a reference index 1 (or 1, 2, ... / 0, -1, ... when the indices change per
// reference), and with one fixed index each reference is offset beside or below the ones
// before it. The transformer's output keeps the generated image's tokens only.
#pragma once

#include <cstdint>
#include <vector>

#include "models/flux.h"

namespace sd::models {

// How references are told apart on the image-index axis (sd.cpp's ref_index_mode).
enum class RefIndexMode {
  Fixed,     // all index 1, each offset past the earlier ones (FLUX.1 Kontext dev)
  Increase,  // indices 1, 2, 3, ... at row and column 0 (--increase-ref-index)
  Decrease,  // indices 0, -1, -2, ... at row and column 0
};

// A reference latent's width and height in latent pixels.
struct FluxRefGrid {
  int64_t w = 0, h = 0;
};

// The rotary position of every reference token: references in order, each one's patches
// row-major. Rows and columns count patches from the reference's offset; the offsets count
// the earlier references' extents in latent pixels (stable-diffusion.cpp's placement). A
// reference goes right of the earlier ones when that keeps the layout wider than tall,
// else below them. `index_step`: Increase's indices are step, 2 step, ... (FLUX.2: 10).
// `centred`: with Increase or Decrease, each reference's rows and columns count from minus
// half its patches, as the generated image's do in Qwen-Image.
std::vector<FluxPosition> flux_ref_positions(const std::vector<FluxRefGrid>& refs, int patch,
                                             RefIndexMode mode, int index_step = 1,
                                             bool centred = false);

}  // namespace sd::models
