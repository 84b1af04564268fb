#include "nn/patches.h"

#include <cstddef>

namespace sd::nn {
namespace {

// Calls f(token index, latent index) for every value.
template <typename F>
void for_each_value(int64_t w, int64_t h, int64_t c, int p, PatchOrder order, F f) {
  const int64_t pw = w / p, ph = h / p, width = c * p * p;
  for (int64_t row = 0; row < ph; ++row)
    for (int64_t col = 0; col < pw; ++col)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int dy = 0; dy < p; ++dy)
          for (int dx = 0; dx < p; ++dx) {
            const int64_t within = order == PatchOrder::ChannelMajor
                                       ? (ch * p + dy) * p + dx
                                       : (int64_t{dy} * p + dx) * c + ch;
            f(static_cast<size_t>((row * pw + col) * width + within),
              static_cast<size_t>((ch * h + row * p + dy) * w + col * p + dx));
          }
}

}  // namespace

std::vector<float> patchify(const std::vector<float>& latent, int64_t w, int64_t h, int64_t c,
                            int p, PatchOrder order) {
  std::vector<float> tokens(static_cast<size_t>(w * h * c));
  for_each_value(w, h, c, p, order, [&](size_t t, size_t l) { tokens[t] = latent[l]; });
  return tokens;
}

std::vector<float> unpatchify(const std::vector<float>& tokens, int64_t w, int64_t h, int64_t c,
                              int p, PatchOrder order) {
  std::vector<float> latent(static_cast<size_t>(w * h * c));
  for_each_value(w, h, c, p, order, [&](size_t t, size_t l) { latent[l] = tokens[t]; });
  return latent;
}

}  // namespace sd::nn
