// Resampling of [W, H, C] planes (W fastest) to another size, with the filters the highres
// fix offers: nearest, nearest-exact, bilinear, bicubic and Lanczos, optionally
// antialiased. The filters follow PyTorch's F.interpolate (half-pixel centres,
// align_corners=False, edge pixels repeated, bicubic with a = -0.75), as stable-diffusion.cpp
// does, so an upscaled latent or image matches it.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::pipeline {

enum class ResampleFilter {
  Nearest,       // src = floor(dst * in / out), PyTorch's "nearest"
  NearestExact,  // src = round((dst + 0.5) * in / out - 0.5), PyTorch's "nearest-exact"
  Bilinear,
  Bicubic,
  Lanczos,  // Lanczos-3, weights normalised to sum 1
};

// [in_w, in_h, channels] -> [out_w, out_h, channels]. `antialias` widens the filter by the
// downscale factor when shrinking (PIL's and PyTorch's antialias=True); it changes nothing
// when enlarging except that weights are normalised.
std::vector<float> resample(const std::vector<float>& planes, int64_t in_w, int64_t in_h,
                            int64_t channels, int64_t out_w, int64_t out_h, ResampleFilter filter,
                            bool antialias = false);

// The maximum over each output pixel's source window when either side shrinks, else
// nearest: resizes a mask so that every masked source pixel stays masked.
std::vector<float> resample_nearest_max(const std::vector<float>& planes, int64_t in_w,
                                        int64_t in_h, int64_t channels, int64_t out_w,
                                        int64_t out_h);

}  // namespace sd::pipeline
