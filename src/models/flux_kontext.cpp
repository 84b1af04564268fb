#include "models/flux_kontext.h"

#include <algorithm>

namespace sd::models {

std::vector<FluxPosition> flux_ref_positions(const std::vector<FluxRefGrid>& refs, int patch,
                                             RefIndexMode mode, int index_step, bool centred) {
  std::vector<FluxPosition> positions;
  int64_t extent_h = 0, extent_w = 0;  // of the references placed so far, latent pixels
  int index = mode == RefIndexMode::Increase ? index_step : 1;
  for (const FluxRefGrid& ref : refs) {
    int64_t h_offset = 0, w_offset = 0;
    if (mode == RefIndexMode::Fixed) {
      if (ref.h + extent_h > ref.w + extent_w)
        w_offset = extent_w;
      else
        h_offset = extent_h;
    } else if (mode == RefIndexMode::Decrease) {
      --index;
    }
    // A side that is not a whole number of patches is padded to one.
    const int64_t rows = (ref.h + patch / 2) / patch, cols = (ref.w + patch / 2) / patch;
    const bool centre = centred && mode != RefIndexMode::Fixed;
    const int64_t row0 = h_offset - (centre ? rows / 2 : 0);
    const int64_t col0 = w_offset - (centre ? cols / 2 : 0);
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t col = 0; col < cols; ++col)
        positions.push_back({static_cast<float>(index), static_cast<float>(row0 + row),
                             static_cast<float>(col0 + col)});
    if (mode == RefIndexMode::Increase) index += index_step;
    extent_h = std::max(extent_h, ref.h + h_offset);
    extent_w = std::max(extent_w, ref.w + w_offset);
  }
  return positions;
}

}  // namespace sd::models
