// A latent [w, h, C] cut into p x p patches, one token each ([p * p * C, (h/p) * (w/p)],
// tokens row by row), and back: the input and output of every diffusion transformer. They
// differ only in how a token orders its p * p * C values.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::nn {

enum class PatchOrder {
  ChannelMajor,  // (c, dy, dx), dx fastest: FLUX.1's rearrange "c (ph pw)"
  ChannelMinor,  // (dy, dx, c), c fastest: MMDiT's unpatchify, Z-Image
};

// `w` and `h` must be multiples of `p`.
std::vector<float> patchify(const std::vector<float>& latent, int64_t w, int64_t h, int64_t c,
                            int p, PatchOrder order);
std::vector<float> unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h, int64_t c,
                              int p, PatchOrder order);

}  // namespace sd::nn
