// A cheap look at a latent while sampling runs (--preview proj): each latent pixel's four
// channels projected linearly to RGB with SD's fitted factors, one image pixel per latent
// pixel, as stable-diffusion.cpp draws it.
#pragma once

#include <cstdint>
#include <vector>

#include "io/image.h"

namespace sd::pipeline {

// latent [w, h, 4] -> RGB image of w x h.
io::Image project_latent_to_rgb(const std::vector<float>& latent, int64_t w, int64_t h);

}  // namespace sd::pipeline
