#include "tensor/ops/conv2d.h"

#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

struct KernelShape {
  int64_t kw, kh, cin_per_group;
};

KernelShape kernel_shape(const Tensor* w, ConvKernelLayout layout) {
  if (layout == ConvKernelLayout::WinogradF2x3) return {3, 3, w->ne[0]};
  if (layout == ConvKernelLayout::ChannelsLast) return {w->ne[1], w->ne[2], w->ne[0]};
  return {w->ne[0], w->ne[1], w->ne[2]};
}

// The reference of a Winograd-layout convolution: the 2x2 output blocks as the layout
// defines them, in double.
void reference_winograd_f2x3(Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const Conv2dParams p = conv2d_params(dst);
  const int64_t cin = w->ne[0], cout = w->ne[3];
  std::vector<float> u(static_cast<size_t>(16 * cin * cout));  // [co][k][ci]
  for (int64_t co = 0; co < cout; ++co)
    for (int64_t k = 0; k < 16; ++k)
      dequantize_row(w->type, element_ptr(w, 0, k % 4, k / 4, co), u.data() + (co * 16 + k) * cin,
                     cin);
  std::vector<double> v(static_cast<size_t>(16 * cin));  // [k][ci] of one block
  for (int64_t n = 0; n < x->ne[3]; ++n)
    for (int64_t ty = 0; ty < dst->ne[1]; ty += 2)
      for (int64_t tx = 0; tx < dst->ne[0]; tx += 2) {
        for (int64_t ci = 0; ci < cin; ++ci) {
          double d[4][4];
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
              const int64_t iy = ty - p.p1 + a, ix = tx - p.p0 + b;
              const bool inside = iy >= 0 && iy < x->ne[1] && ix >= 0 && ix < x->ne[0];
              d[a][b] = inside ? load_f32(x, ix, iy, ci, n) : 0.0;
            }
          // B^T d B with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
          double t[4][4];
          for (int b = 0; b < 4; ++b) {
            t[0][b] = d[0][b] - d[2][b];
            t[1][b] = d[1][b] + d[2][b];
            t[2][b] = d[2][b] - d[1][b];
            t[3][b] = d[1][b] - d[3][b];
          }
          for (int a = 0; a < 4; ++a) {
            v[static_cast<size_t>((4 * a + 0) * cin + ci)] = t[a][0] - t[a][2];
            v[static_cast<size_t>((4 * a + 1) * cin + ci)] = t[a][1] + t[a][2];
            v[static_cast<size_t>((4 * a + 2) * cin + ci)] = t[a][2] - t[a][1];
            v[static_cast<size_t>((4 * a + 3) * cin + ci)] = t[a][1] - t[a][3];
          }
        }
        for (int64_t co = 0; co < cout; ++co) {
          double m[16];
          for (int64_t k = 0; k < 16; ++k) {
            double s = 0;
            const float* uk = u.data() + (co * 16 + k) * cin;
            for (int64_t ci = 0; ci < cin; ++ci)
              s += static_cast<double>(uk[ci]) * v[static_cast<size_t>(k * cin + ci)];
            m[k] = s;
          }
          // A^T m A with A^T = [1 1 1 0; 0 1 -1 -1].
          double r[2][4];
          for (int b = 0; b < 4; ++b) {
            r[0][b] = m[b] + m[4 + b] + m[8 + b];
            r[1][b] = m[4 + b] - m[8 + b] - m[12 + b];
          }
          const double b0 = bias ? load_f32(bias, co) : 0.0;
          for (int a = 0; a < 2; ++a) {
            const double y[2] = {r[a][0] + r[a][1] + r[a][2], r[a][1] - r[a][2] - r[a][3]};
            for (int b = 0; b < 2; ++b)
              if (ty + a < dst->ne[1] && tx + b < dst->ne[0])
                store_f32(dst, static_cast<float>(y[b] + b0), tx + b, ty + a, co, n);
          }
        }
      }
}

// Output length of one spatial dim, or <= 0 when the kernel does not fit.
int64_t out_size(int64_t in, int64_t k, int s, int p, int d) {
  return (in + 2 * static_cast<int64_t>(p) - static_cast<int64_t>(d) * (k - 1) - 1) / s + 1;
}

}  // namespace

Tensor* conv2d(Context& ctx, Tensor* x, Tensor* w, Tensor* bias, int s0, int s1, int p0, int p1,
               int d0, int d1, int groups, ConvKernelLayout layout) {
  const bool winograd = layout == ConvKernelLayout::WinogradF2x3;
  const bool channels_last = layout == ConvKernelLayout::ChannelsLast || winograd;
  SD_CHECK(layout == ConvKernelLayout::Standard || channels_last,
           "[conv2d] kernel layout %d is unknown", static_cast<int>(layout));
  SD_CHECK(
      !winograd || (w->ne[1] == 4 && w->ne[2] == 4 && s0 == 1 && s1 == 1 && d0 == 1 && d1 == 1),
      "[conv2d] weight '%s' %s is a Winograd F(2x2, 3x3) kernel, which needs a [Cin, 4, 4, "
      "Cout] weight, stride 1 and dilation 1 (given %d, %d and %d, %d)",
      w->name.c_str(), w->shape_string().c_str(), s0, s1, d0, d1);
  SD_CHECK(x->type == DType::F32, "[conv2d] input '%s' is %s; conv2d takes f32 input",
           x->name.c_str(), std::string(dtype_name(x->type)).c_str());
  SD_CHECK(is_float(w->type) || (channels_last && is_quantized(w->type)),
           "[conv2d] weight '%s' is %s; conv2d takes f32, f16 or bf16 weights (block types "
           "in the channels-last layout)",
           w->name.c_str(), std::string(dtype_name(w->type)).c_str());
  SD_CHECK(!channels_last || groups == 1,
           "[conv2d] weight '%s' is channels-last, which grouped convolutions (groups = %d) "
           "do not take",
           w->name.c_str(), groups);
  const KernelShape k = kernel_shape(w, layout);
  SD_CHECK(s0 >= 1 && s1 >= 1 && d0 >= 1 && d1 >= 1 && p0 >= 0 && p1 >= 0,
           "[conv2d] stride (%d, %d) and dilation (%d, %d) must be >= 1 and padding (%d, %d) >= 0",
           s0, s1, d0, d1, p0, p1);
  SD_CHECK(groups >= 1 && x->ne[2] % groups == 0 && w->ne[3] % groups == 0,
           "[conv2d] groups = %d must divide the input channels (%lld, '%s') and the output "
           "channels (%lld, '%s')",
           groups, static_cast<long long>(x->ne[2]), x->name.c_str(),
           static_cast<long long>(w->ne[3]), w->name.c_str());
  SD_CHECK(k.cin_per_group * groups == x->ne[2],
           "[conv2d] weight '%s' %s expects %lld input channels per group, but input '%s' %s has "
           "%lld channels in %d groups",
           w->name.c_str(), w->shape_string().c_str(), static_cast<long long>(k.cin_per_group),
           x->name.c_str(), x->shape_string().c_str(), static_cast<long long>(x->ne[2]), groups);
  const int64_t cout = w->ne[3];
  if (bias) {
    SD_CHECK(is_float(bias->type) && bias->ne[0] == cout && bias->nelements() == cout,
             "[conv2d] bias '%s' %s (%s) must be a float vector of %lld output channels",
             bias->name.c_str(), bias->shape_string().c_str(),
             std::string(dtype_name(bias->type)).c_str(), static_cast<long long>(cout));
  }
  const int64_t ow = out_size(x->ne[0], k.kw, s0, p0, d0);
  const int64_t oh = out_size(x->ne[1], k.kh, s1, p1, d1);
  SD_CHECK(ow > 0 && oh > 0,
           "[conv2d] kernel of '%s' %s (dilation %d, %d) does not fit input '%s' %s with padding "
           "(%d, %d)",
           w->name.c_str(), w->shape_string().c_str(), d0, d1, x->name.c_str(),
           x->shape_string().c_str(), p0, p1);
  Tensor* t = bias ? ctx.new_op(Op::Conv2d, DType::F32, {ow, oh, cout, x->ne[3]}, {x, w, bias})
                   : ctx.new_op(Op::Conv2d, DType::F32, {ow, oh, cout, x->ne[3]}, {x, w});
  const int params[] = {s0, s1, p0, p1, d0, d1, groups, static_cast<int>(layout)};
  for (int i = 0; i < 8; ++i) t->params[i] = params[i];
  return t;
}

Conv2dParams conv2d_params(const Tensor* dst) {
  const auto& p = dst->params;
  const auto layout = static_cast<ConvKernelLayout>(p[7]);
  const KernelShape k = kernel_shape(dst->src[1], layout);
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], layout, k.kw, k.kh, k.cin_per_group};
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

void winograd_f2x3_filters(const float* g, int64_t n, float* u) {
  // Per filter i (a loop the compiler runs in vectors): G g (4x3), then (G g) G^T (4x4).
  for (int64_t i = 0; i < n; ++i) {
    auto at = [&](int ky, int kx) { return g[(3 * ky + kx) * n + i]; };
    float t[4][3];
    for (int c = 0; c < 3; ++c) {
      t[0][c] = at(0, c);
      t[1][c] = 0.5f * (at(0, c) + at(1, c) + at(2, c));
      t[2][c] = 0.5f * (at(0, c) - at(1, c) + at(2, c));
      t[3][c] = at(2, c);
    }
    for (int r = 0; r < 4; ++r) {
      u[(4 * r + 0) * n + i] = t[r][0];
      u[(4 * r + 1) * n + i] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
      u[(4 * r + 2) * n + i] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
      u[(4 * r + 3) * n + i] = t[r][2];
    }
  }
}

void winograd_f2x3_filter(const float g[9], float u[16]) {
  winograd_f2x3_filters(g, 1, u);
}

void reference_conv2d(Tensor* dst) {
  if (conv2d_params(dst).layout == ConvKernelLayout::WinogradF2x3)
    return reference_winograd_f2x3(dst);
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const Conv2dParams p = conv2d_params(dst);
  const int64_t KW = p.kw, KH = p.kh, cin_g = p.cin_per_group, cout_g = w->ne[3] / p.groups;
  // A channels-last weight is read as f32 [KW, KH, Cin, Cout] (its rows may be blocks).
  std::vector<float> standard;
  if (p.layout == ConvKernelLayout::ChannelsLast) {
    standard.resize(static_cast<size_t>(KW * KH * cin_g * w->ne[3]));
    std::vector<float> row(static_cast<size_t>(cin_g));
    for (int64_t oc = 0; oc < w->ne[3]; ++oc)
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx) {
          dequantize_row(w->type, element_ptr(w, 0, kx, ky, oc), row.data(), cin_g);
          for (int64_t ic = 0; ic < cin_g; ++ic)
            standard[static_cast<size_t>(((oc * cin_g + ic) * KH + ky) * KW + kx)] = row[ic];
        }
  }
  auto weight = [&](int64_t kx, int64_t ky, int64_t ic, int64_t oc) {
    if (standard.empty()) return load_f32(w, kx, ky, ic, oc);
    return standard[static_cast<size_t>(((oc * cin_g + ic) * KH + ky) * KW + kx)];
  };
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
          sum +=
              static_cast<double>(weight(kx, ky, ic, oc)) * load_f32(x, ix, iy, g * cin_g + ic, n);
        }
      }
    store_f32(dst, static_cast<float>(sum), ox, oy, oc, n);
  });
}

}  // namespace sd
