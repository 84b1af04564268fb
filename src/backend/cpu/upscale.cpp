// Fast Upscale: source columns and weights are computed once per call (the coordinate
// rule is the reference's upscale_source_coord), then each output row reads one source
// row (nearest) or blends two (bilinear); rows spread over threads.
#include <algorithm>
#include <vector>

#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/strided_loop.h"
#include "tensor/ops/upscale.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> f;  // weight of i1
};

Taps make_taps(UpscaleMode mode, int64_t in, int64_t out) {
  Taps t;
  t.i0.resize(out);
  t.i1.resize(out);
  t.f.resize(out);
  for (int64_t o = 0; o < out; ++o) {
    const double s = upscale_source_coord(mode, o, in, out);
    t.i0[o] = std::min(static_cast<int64_t>(s), in - 1);
    t.i1[o] = std::min(t.i0[o] + 1, in - 1);
    t.f[o] = static_cast<float>(s - t.i0[o]);
  }
  return t;
}

}  // namespace

bool cpu_upscale(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  if (dst->type != DType::F32 || !dst->rows_contiguous() || !is_float(a->type) ||
      !a->rows_contiguous()) {
    return false;
  }
  const auto mode = static_cast<UpscaleMode>(dst->params[0]);
  const bool nearest = mode == UpscaleMode::Nearest;
  const int64_t in_w = a->ne[0], in_h = a->ne[1], out_w = dst->ne[0], out_h = dst->ne[1];
  const Taps tx = make_taps(mode, in_w, out_w), ty = make_taps(mode, in_h, out_h);
  const int64_t rows = dst->nrows();
#pragma omp parallel num_threads(ctx.threads) if (rows * out_w >= kMinParallelValues)
  {
    std::vector<float> scratch(a->type == DType::F32 ? 0 : static_cast<size_t>(2 * in_w));
    // Source row (y, c, n) as f32; `slot` picks the scratch half for converted rows.
    auto source_row = [&](int64_t y, int64_t c, int64_t n, int slot) {
      const char* p =
          static_cast<const char*>(a->data) + y * a->nb[1] + c * a->nb[2] + n * a->nb[3];
      if (a->type == DType::F32) return reinterpret_cast<const float*>(p);
      float* s = scratch.data() + slot * in_w;
      dequantize_row(a->type, p, s, in_w);
      return static_cast<const float*>(s);
    };
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t y = r % out_h, c = r / out_h % dst->ne[2], n = r / (out_h * dst->ne[2]);
      auto* out = reinterpret_cast<float*>(tensor_row(dst, r));
      const float* r0 = source_row(ty.i0[y], c, n, 0);
      if (nearest) {
        for (int64_t x = 0; x < out_w; ++x) out[x] = r0[tx.i0[x]];
        continue;
      }
      const float* r1 = source_row(ty.i1[y], c, n, 1);
      const float fy = ty.f[y];
      for (int64_t x = 0; x < out_w; ++x) {
        const float fx = tx.f[x];
        const float top = (1 - fx) * r0[tx.i0[x]] + fx * r0[tx.i1[x]];
        const float bottom = (1 - fx) * r1[tx.i0[x]] + fx * r1[tx.i1[x]];
        out[x] = (1 - fy) * top + fy * bottom;
      }
    }
  }
  return true;
}

}  // namespace sd
