#include "models/taesd.h"

#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"

namespace sd::models {
namespace {

// Width of every hidden layer in taesd.py.
constexpr int64_t kChannels = 64;
// Blocks per resolution in taesd.py's Encoder and Decoder.
constexpr int kBlocksPerLevel = 3;

Tensor* conv3x3(const nn::Scope& s, Tensor* x, int64_t in, int64_t out, int stride = 1,
                bool bias = true) {
  return nn::conv2d(s, x, in, out, 3, stride, 1, bias);
}

// taesd.py's Block(n, n): relu(conv(relu(conv(relu(conv(x))))) + x). The skip is the
// identity because every block keeps 64 channels.
Tensor* block(const nn::Scope& s, Tensor* x) {
  Context& ctx = s.ctx();
  const nn::Scope conv = s["conv"];
  Tensor* h = relu(ctx, conv3x3(conv["0"], x, kChannels, kChannels));
  h = relu(ctx, conv3x3(conv["2"], h, kChannels, kChannels));
  h = conv3x3(conv["4"], h, kChannels, kChannels);
  return relu(ctx, add(ctx, h, x));
}

}  // namespace

Tensor* taesd_decode(const nn::Scope& taesd, Tensor* z) {
  Context& ctx = taesd.ctx();
  const int64_t z_channels = z->ne[2];
  SD_CHECK(z_channels > 0, "[taesd] decode needs a latent [w, h, C, N], got %s",
           z->shape_string().c_str());
  const nn::Scope layers = taesd["decoder"]["layers"];
  // Clamp.forward: tanh(z / 3) * 3 keeps out-of-range latents from blowing up.
  Tensor* h = scale(ctx, unary(ctx, scale(ctx, z, 1.0f / 3.0f), UnaryOp::Tanh), 3.0f);
  // Sequential indices: 0 conv, 1 ReLU, then per level 3 blocks, Upsample, conv (no bias).
  h = relu(ctx, conv3x3(layers[0], h, z_channels, kChannels));
  int index = 2;
  for (int level = 0; level < 3; ++level) {
    for (int b = 0; b < kBlocksPerLevel; ++b) h = block(layers[index++], h);
    h = upscale_nearest(ctx, h, 2);  // [2w, 2h, 64, N]
    ++index;
    h = conv3x3(layers[index++], h, kChannels, kChannels, 1, false);
  }
  h = block(layers[index++], h);                                            // 17
  return set_name(conv3x3(layers[index], h, kChannels, 3), "taesd_image");  // 18: [W, H, 3, N]
}

Tensor* taesd_encode(const nn::Scope& taesd, Tensor* image, int64_t z_channels) {
  SD_CHECK(image->ne[2] == 3 && image->ne[0] % 8 == 0 && image->ne[1] % 8 == 0,
           "[taesd] encode needs an RGB image [W, H, 3, N] with W and H multiples of 8, got %s",
           image->shape_string().c_str());
  SD_CHECK(z_channels > 0, "[taesd] z_channels must be positive");
  const nn::Scope layers = taesd["encoder"]["layers"];
  // Sequential indices: 0 conv, 1 block, then per level a stride-2 conv (no bias) and 3
  // blocks, then the output conv.
  Tensor* h = conv3x3(layers[0], image, 3, kChannels);
  h = block(layers[1], h);
  int index = 2;
  for (int level = 0; level < 3; ++level) {
    h = conv3x3(layers[index++], h, kChannels, kChannels, 2, false);  // [W/2, H/2, 64, N]
    for (int b = 0; b < kBlocksPerLevel; ++b) h = block(layers[index++], h);
  }
  return set_name(conv3x3(layers[index], h, kChannels, z_channels), "taesd_latent");  // 14
}

}  // namespace sd::models
