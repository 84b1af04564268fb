#include "models/esrgan.h"

#include <string>

#include "nn/layers.h"
#include "tensor/error.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/upscale.h"

namespace sd::models {
namespace {

// rrdbnet_arch.py: LeakyReLU(negative_slope=0.2) everywhere, residuals scaled by 0.2.
constexpr float kSlope = 0.2f;
constexpr float kResidualScale = 0.2f;

Tensor* lrelu(Context& ctx, Tensor* x) {
  return unary(ctx, x, UnaryOp::LeakyRelu, kSlope);
}

Tensor* conv3x3(const nn::Scope& s, Tensor* x, int64_t in, int64_t out) {
  return nn::conv2d(s, x, in, out, 3, 1, 1);
}

// ResidualDenseBlock: each conv sees the block input and every earlier conv's output;
// conv5 maps back to num_feat and the result is added to the input, scaled by 0.2.
Tensor* residual_dense_block(const nn::Scope& s, const EsrganConfig& c, Tensor* x) {
  Context& ctx = s.ctx();
  const int64_t nf = c.num_feat, gc = c.num_grow_ch;
  Tensor* features = x;  // [W, H, nf + k * gc, N]
  for (int k = 1; k <= 4; ++k) {
    Tensor* xk =
        lrelu(ctx, conv3x3(s["conv" + std::to_string(k)], features, nf + (k - 1) * gc, gc));
    features = concat(ctx, features, xk, 2);
  }
  Tensor* x5 = conv3x3(s["conv5"], features, nf + 4 * gc, nf);
  return add(ctx, scale(ctx, x5, kResidualScale), x);
}

// RRDB: three dense blocks in a row, with a residual around them scaled by 0.2.
Tensor* rrdb(const nn::Scope& s, const EsrganConfig& c, Tensor* x) {
  Context& ctx = s.ctx();
  Tensor* h = residual_dense_block(s["rdb1"], c, x);
  h = residual_dense_block(s["rdb2"], c, h);
  h = residual_dense_block(s["rdb3"], c, h);
  return add(ctx, scale(ctx, h, kResidualScale), x);
}

}  // namespace

Tensor* rrdbnet(const nn::Scope& s, const EsrganConfig& c, Tensor* x) {
  Context& ctx = s.ctx();
  SD_CHECK(x->ne[2] == c.num_in_ch, "[esrgan] the input has %lld channels, conv_first reads %lld",
           static_cast<long long>(x->ne[2]), static_cast<long long>(c.num_in_ch));
  SD_CHECK(c.num_upsample >= 0 && c.num_upsample <= 2, "[esrgan] %d upsampling layers (0 to 2)",
           c.num_upsample);
  const int64_t nf = c.num_feat;

  // 1. Input conv.
  Tensor* feat = conv3x3(s["conv_first"], x, c.num_in_ch, nf);  // [W, H, nf, N]

  // 2. Trunk of RRDBs, a conv, and the long skip.
  Tensor* body = feat;
  for (int i = 0; i < c.num_block; ++i) {
    body = set_name(rrdb(s["body"][i], c, body), "esrgan_body." + std::to_string(i));
  }
  body = conv3x3(s["conv_body"], body, nf, nf);
  feat = add(ctx, feat, body);

  // 3. Upsampling: nearest 2x then conv, per layer.
  const char* up_names[] = {"conv_up1", "conv_up2"};
  for (int u = 0; u < c.num_upsample; ++u) {
    feat = lrelu(ctx, conv3x3(s[up_names[u]], upscale_nearest(ctx, feat, 2), nf, nf));
  }  // [W * 2^u, H * 2^u, nf, N]

  // 4. Output convs.
  Tensor* hr = lrelu(ctx, conv3x3(s["conv_hr"], feat, nf, nf));
  return set_name(conv3x3(s["conv_last"], hr, nf, c.num_out_ch), "esrgan_image");
}

void pixel_unshuffle(const float* in, int64_t w, int64_t h, int64_t c, int r, float* out) {
  const int64_t ow = w / r, oh = h / r;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < r; ++j) {
        float* plane = out + ((ch * r + i) * r + j) * ow * oh;
        for (int64_t y = 0; y < oh; ++y) {
          const float* row = in + (ch * h + y * r + i) * w;
          for (int64_t x = 0; x < ow; ++x) plane[y * ow + x] = row[x * r + j];
        }
      }
}

}  // namespace sd::models
