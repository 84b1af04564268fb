#include "tensor/ops/conv2d.h"

#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

namespace {

// Output length of one spatial dim, or <= 0 when the kernel does not fit.
int64_t out_size(int64_t in, int64_t k, int s, int p, int d) {
  return (in + 2 * static_cast<int64_t>(p) - static_cast<int64_t>(d) * (k - 1) - 1) / s + 1;
}

}  // namespace

Tensor* conv2d(Context& ctx, Tensor* x, Tensor* w, Tensor* bias, int s0, int s1, int p0, int p1,
               int d0, int d1, int groups) {
  SD_CHECK(x->type == DType::F32, "[conv2d] input '%s' is %s; conv2d takes f32 input",
           x->name.c_str(), std::string(dtype_name(x->type)).c_str());
  SD_CHECK(is_float(w->type), "[conv2d] weight '%s' is %s; conv2d takes f32, f16 or bf16 weights",
           w->name.c_str(), std::string(dtype_name(w->type)).c_str());
  SD_CHECK(s0 >= 1 && s1 >= 1 && d0 >= 1 && d1 >= 1 && p0 >= 0 && p1 >= 0,
           "[conv2d] stride (%d, %d) and dilation (%d, %d) must be >= 1 and padding (%d, %d) >= 0",
           s0, s1, d0, d1, p0, p1);
  SD_CHECK(groups >= 1 && x->ne[2] % groups == 0 && w->ne[3] % groups == 0,
           "[conv2d] groups = %d must divide the input channels (%lld, '%s') and the output "
           "channels (%lld, '%s')",
           groups, static_cast<long long>(x->ne[2]), x->name.c_str(),
           static_cast<long long>(w->ne[3]), w->name.c_str());
  SD_CHECK(w->ne[2] * groups == x->ne[2],
           "[conv2d] weight '%s' %s expects %lld input channels per group, but input '%s' %s has "
           "%lld channels in %d groups",
           w->name.c_str(), w->shape_string().c_str(), static_cast<long long>(w->ne[2]),
           x->name.c_str(), x->shape_string().c_str(), static_cast<long long>(x->ne[2]), groups);
  const int64_t cout = w->ne[3];
  if (bias) {
    SD_CHECK(is_float(bias->type) && bias->ne[0] == cout && bias->nelements() == cout,
             "[conv2d] bias '%s' %s (%s) must be a float vector of %lld output channels",
             bias->name.c_str(), bias->shape_string().c_str(),
             std::string(dtype_name(bias->type)).c_str(), static_cast<long long>(cout));
  }
  const int64_t ow = out_size(x->ne[0], w->ne[0], s0, p0, d0);
  const int64_t oh = out_size(x->ne[1], w->ne[1], s1, p1, d1);
  SD_CHECK(ow > 0 && oh > 0,
           "[conv2d] kernel of '%s' %s (dilation %d, %d) does not fit input '%s' %s with padding "
           "(%d, %d)",
           w->name.c_str(), w->shape_string().c_str(), d0, d1, x->name.c_str(),
           x->shape_string().c_str(), p0, p1);
  Tensor* t = bias ? ctx.new_op(Op::Conv2d, DType::F32, {ow, oh, cout, x->ne[3]}, {x, w, bias})
                   : ctx.new_op(Op::Conv2d, DType::F32, {ow, oh, cout, x->ne[3]}, {x, w});
  const int params[] = {s0, s1, p0, p1, d0, d1, groups};
  for (int i = 0; i < 7; ++i) t->params[i] = params[i];
  return t;
}

Conv2dParams conv2d_params(const Tensor* dst) {
  const auto& p = dst->params;
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
}

const Tensor* conv2d_upsampled_source(const Tensor* dst) {
  if (dst->op != Op::Conv2d) return nullptr;
  const Tensor* up = dst->src[0];
  if (!up || up->op != Op::Upscale ||
      static_cast<UpscaleMode>(up->params[0]) != UpscaleMode::Nearest)
    return nullptr;
  const Tensor* src = up->src[0];
  return up->ne[0] == 2 * src->ne[0] && up->ne[1] == 2 * src->ne[1] ? src : nullptr;
}

void reference_conv2d(Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const Conv2dParams p = conv2d_params(dst);
  const int64_t KW = w->ne[0], KH = w->ne[1], cin_g = w->ne[2], cout_g = w->ne[3] / p.groups;
  for_each_index(dst, [&](int64_t ox, int64_t oy, int64_t oc, int64_t n) {
    const int64_t g = oc / cout_g;
    double sum = bias ? load_f32(bias, oc) : 0.0;
    for (int64_t ic = 0; ic < cin_g; ++ic)
      for (int64_t ky = 0; ky < KH; ++ky) {
        const int64_t iy = oy * p.s1 - p.p1 + ky * p.d1;
        if (iy < 0 || iy >= x->ne[1]) continue;  // zero padding
        for (int64_t kx = 0; kx < KW; ++kx) {
          const int64_t ix = ox * p.s0 - p.p0 + kx * p.d0;
          if (ix < 0 || ix >= x->ne[0]) continue;
          sum += static_cast<double>(load_f32(w, kx, ky, ic, oc)) *
                 load_f32(x, ix, iy, g * cin_g + ic, n);
        }
      }
    store_f32(dst, static_cast<float>(sum), ox, oy, oc, n);
  });
}

}  // namespace sd
