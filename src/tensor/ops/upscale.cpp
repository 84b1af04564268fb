#include "tensor/ops/upscale.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* upscale(Context& ctx, Tensor* a, int64_t out_w, int64_t out_h, UpscaleMode mode) {
  SD_CHECK(is_float(a->type), "[upscale] '%s' is %s; upscale takes f32, f16 or bf16",
           a->name.c_str(), dtype_name(a->type).data());
  SD_CHECK(out_w > 0 && out_h > 0, "[upscale] output size %lldx%lld of '%s' %s must be positive",
           static_cast<long long>(out_w), static_cast<long long>(out_h), a->name.c_str(),
           a->shape_string().c_str());
  SD_CHECK(a->ne[0] > 0 && a->ne[1] > 0, "[upscale] '%s' %s is empty", a->name.c_str(),
           a->shape_string().c_str());
  SD_CHECK(mode == UpscaleMode::Nearest || mode == UpscaleMode::Bilinear ||
               mode == UpscaleMode::BilinearAlignCorners,
           "[upscale] unknown mode %d", static_cast<int>(mode));
  Tensor* t = ctx.new_op(Op::Upscale, DType::F32, {out_w, out_h, a->ne[2], a->ne[3]}, {a});
  t->params[0] = static_cast<int32_t>(mode);
  return t;
}

Tensor* upscale_nearest(Context& ctx, Tensor* a, int factor) {
  SD_CHECK(factor >= 1, "[upscale] factor %d of '%s' must be at least 1", factor, a->name.c_str());
  return upscale(ctx, a, a->ne[0] * factor, a->ne[1] * factor, UpscaleMode::Nearest);
}

double upscale_source_coord(UpscaleMode mode, int64_t dst, int64_t in, int64_t out) {
  switch (mode) {
    case UpscaleMode::Nearest:
      // Exact integer floor(dst * in / out); PyTorch's float scale agrees for the integer
      // ratios models use.
      return static_cast<double>(std::min((dst * in) / out, in - 1));
    case UpscaleMode::Bilinear:
      // Half-pixel centers; PyTorch clamps negative coordinates to the first pixel.
      return std::max(0.0, (dst + 0.5) * static_cast<double>(in) / out - 0.5);
    case UpscaleMode::BilinearAlignCorners:
      return out > 1 ? static_cast<double>(dst) * (in - 1) / (out - 1) : 0.0;
  }
  return 0.0;
}

void reference_upscale(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const auto mode = static_cast<UpscaleMode>(dst->params[0]);
  const int64_t in_w = a->ne[0], in_h = a->ne[1];
  const int64_t out_w = dst->ne[0], out_h = dst->ne[1];
  for_each_index(dst, [&](int64_t x, int64_t y, int64_t c, int64_t n) {
    const double sx = upscale_source_coord(mode, x, in_w, out_w);
    const double sy = upscale_source_coord(mode, y, in_h, out_h);
    const int64_t x0 = std::min(static_cast<int64_t>(sx), in_w - 1);
    const int64_t y0 = std::min(static_cast<int64_t>(sy), in_h - 1);
    if (mode == UpscaleMode::Nearest) {
      store_f32(dst, load_f32(a, x0, y0, c, n), x, y, c, n);
      return;
    }
    const int64_t x1 = std::min(x0 + 1, in_w - 1), y1 = std::min(y0 + 1, in_h - 1);
    const double fx = sx - x0, fy = sy - y0;
    const double top = (1 - fx) * load_f32(a, x0, y0, c, n) + fx * load_f32(a, x1, y0, c, n);
    const double bottom = (1 - fx) * load_f32(a, x0, y1, c, n) + fx * load_f32(a, x1, y1, c, n);
    store_f32(dst, static_cast<float>((1 - fy) * top + fy * bottom), x, y, c, n);
  });
}

}  // namespace sd
