// Fast GroupNorm, LayerNorm and RmsNorm. Statistics use two passes (mean, then the sum
// of squared deviations; E[x^2] - E[x]^2 cancels badly) with f32 vector partial sums over
// chunks of kRunChunk values and double accumulation across chunks, which keeps SD's
// 64 x 64 x 10-value groups accurate to ~1e-7 relative.
#include "backend/cpu/simd_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/strided_loop.h"
#include "tensor/ops/norm.h"
#include "tensor/quant/quant.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sd {
namespace HWY_NAMESPACE {
namespace {

// Sum of (x[i] - mean)^2, or of x[i]^2 when mean is 0.
float sum_sq_dev(const float* x, float mean, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF vm = hn::Set(d, mean);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const VF d0 = hn::Sub(hn::LoadU(d, x + i), vm), d1 = hn::Sub(hn::LoadU(d, x + i + N), vm);
    s0 = hn::MulAdd(d0, d0, s0);
    s1 = hn::MulAdd(d1, d1, s1);
  }
  for (; i + N <= n; i += N) {
    const VF d0 = hn::Sub(hn::LoadU(d, x + i), vm);
    s0 = hn::MulAdd(d0, d0, s0);
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
  return s;
}

float sum_values(const float* x, int64_t n) {
  return sum_row(x, n);
}

// y = (x - mean) * s + b: one channel of a group norm, or a whole row without affine.
void normalize_scalar(const float* x, float mean, float s, float b, float* y, int64_t n) {
  map_unary(x, y, n, [=](DF d, VF v) {
    return hn::MulAdd(hn::Sub(v, hn::Set(d, mean)), hn::Set(d, s), hn::Set(d, b));
  });
}

// y = silu((x - mean) * s + b): the same with the activation fused.
void normalize_scalar_silu(const float* x, float mean, float s, float b, float* y, int64_t n) {
  map_unary(x, y, n, [=](DF d, VF v) {
    const VF t = hn::MulAdd(hn::Sub(v, hn::Set(d, mean)), hn::Set(d, s), hn::Set(d, b));
    return hn::Mul(t, sigmoid_f32(d, t));
  });
}

// y = (x - mean) * inv * w[i] + b[i]; w or b null means 1 or 0.
void normalize_affine(const float* x, float mean, float inv, const float* w, const float* b,
                      float* y, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF vm = hn::Set(d, mean), vi = hn::Set(d, inv);
  auto one = [&](int64_t i, VF v) {
    VF t = hn::Mul(hn::Sub(v, vm), vi);
    if (w) t = hn::Mul(t, hn::LoadU(d, w + i));
    if (b) t = hn::Add(t, hn::LoadU(d, b + i));
    return t;
  };
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(one(i, hn::LoadU(d, x + i)), d, y + i);
  for (; i < n; ++i) {
    float t = (x[i] - mean) * inv;
    if (w) t *= w[i];
    if (b) t += b[i];
    y[i] = t;
  }
}

// y = silu(y), in place: RmsNorm's fused activation.
void silu_in_place(float* y, int64_t n) {
  map_unary(y, y, n, [](DF d, VF v) { return hn::Mul(v, sigmoid_f32(d, v)); });
}

// acc[p] += x[p]^2: one channel's share of each pixel's sum of squares.
void add_squares(const float* x, float* acc, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::LoadU(d, x + i);
    hn::StoreU(hn::MulAdd(v, v, hn::LoadU(d, acc + i)), d, acc + i);
  }
  for (; i < n; ++i) acc[i] += x[i] * x[i];
}

// y[p] = x[p] * inv[p] * s, then SiLU when asked: one channel of each pixel's norm.
void scale_by_pixel(const float* x, const float* inv, float s, bool silu, float* y, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF vs = hn::Set(d, s);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    VF t = hn::Mul(hn::Mul(hn::LoadU(d, x + i), hn::LoadU(d, inv + i)), vs);
    if (silu) t = hn::Mul(t, sigmoid_f32(d, t));
    hn::StoreU(t, d, y + i);
  }
  for (; i < n; ++i) {
    const float t = x[i] * inv[i] * s;
    y[i] = silu ? t / (1.0f + std::exp(-t)) : t;
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace sd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sd {

HWY_EXPORT(sum_sq_dev);
HWY_EXPORT(sum_values);
HWY_EXPORT(normalize_scalar);
HWY_EXPORT(normalize_scalar_silu);
HWY_EXPORT(normalize_affine);
HWY_EXPORT(silu_in_place);
HWY_EXPORT(add_squares);
HWY_EXPORT(scale_by_pixel);

namespace {

// The n values of a vector-shaped affine parameter (one dim of n, the others 1, any float
// dtype and stride) as f32; empty when absent.
std::vector<float> affine_f32(const Tensor* p, int64_t n) {
  if (!p) return {};
  size_t stride = type_size(p->type);
  for (int d = 0; d < kMaxDims; ++d) {
    if (p->ne[d] != 1) stride = p->nb[d];
  }
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    dequantize_row(p->type, static_cast<const char*>(p->data) + i * stride, &v[i], 1);
  }
  return v;
}

bool affine_ok(const Tensor* p) {
  return !p || is_float(p->type);
}

// Runs [W*H] of one channel, as f32 (converted in pieces into scratch when needed).
struct ChannelReader {
  const Tensor* x;
  int64_t len;  // values per channel
  template <typename F>
  void each_piece(int64_t c, int64_t n, float* scratch, F&& f) const {
    const char* base = static_cast<const char*>(x->data) + c * x->nb[2] + n * x->nb[3];
    const size_t es = type_size(x->type);
    for (int64_t i = 0; i < len; i += kRunChunk) {
      const int64_t m = std::min(kRunChunk, len - i);
      const char* p = base + i * es;
      if (x->type == DType::F32) {
        f(reinterpret_cast<const float*>(p), i, m);
      } else {
        dequantize_row(x->type, p, scratch, m);
        f(scratch, i, m);
      }
    }
  }
};

// Rows of x normalized over ne[0] (LayerNorm when centered, else RmsNorm), then SiLU when
// asked.
bool normalize_rows(CpuContext& ctx, Tensor* dst, bool centered, bool silu = false) {
  const Tensor* x = dst->src[0];
  const Tensor* weight = dst->src[1];
  const Tensor* bias = centered ? dst->src[2] : nullptr;
  if (dst->type != DType::F32 || !dst->rows_contiguous() || !is_float(x->type) ||
      !x->rows_contiguous() || !affine_ok(weight) || !affine_ok(bias)) {
    return false;
  }
  const double eps = dst->param_f32(0);
  const int64_t n = x->ne[0], rows = x->nrows();
  const std::vector<float> w = affine_f32(weight, n), b = affine_f32(bias, n);
#pragma omp parallel num_threads(ctx.threads) if (rows > 1 && rows * n >= kMinParallelValues)
  {
    std::vector<float> scratch(x->type == DType::F32 ? 0 : static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = reinterpret_cast<const float*>(tensor_row(x, r));
      if (x->type != DType::F32) {
        dequantize_row(x->type, xr, scratch.data(), n);
        xr = scratch.data();
      }
      float mean = 0;
      if (centered) mean = static_cast<float>(HWY_DYNAMIC_DISPATCH(sum_values)(xr, n) / n);
      const double ss = HWY_DYNAMIC_DISPATCH(sum_sq_dev)(xr, mean, n);
      const auto inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
      HWY_DYNAMIC_DISPATCH(normalize_affine)
      (xr, mean, inv, w.empty() ? nullptr : w.data(), b.empty() ? nullptr : b.data(),
       reinterpret_cast<float*>(tensor_row(dst, r)), n);
      if (silu)
        HWY_DYNAMIC_DISPATCH(silu_in_place)(reinterpret_cast<float*>(tensor_row(dst, r)), n);
    }
  }
  return true;
}

// Whether each channel's W x H plane is one dense run.
bool planes_dense(const Tensor* t) {
  return t->rows_contiguous() &&
         (t->ne[1] == 1 || t->nb[1] == type_size(t->type) * static_cast<size_t>(t->ne[0]));
}

// RmsNorm over each pixel's channels of x [W, H, C, N] (dim 2). The pixels go in chunks:
// the sums of squares of a chunk's pixels accumulate channel by channel, vectors along the
// pixels, and the chunk's values (kPixels x C, converted to f32 when stored narrower) are
// still in L2 when the second pass scales them.
bool normalize_channels(CpuContext& ctx, Tensor* dst, bool silu) {
  constexpr int64_t kPixels = 256;
  const Tensor* x = dst->src[0];
  const Tensor* weight = dst->src[1];
  if (dst->type != DType::F32 || !is_float(x->type) || !planes_dense(x) || !planes_dense(dst) ||
      !affine_ok(weight)) {
    return false;
  }
  const double eps = dst->param_f32(0);
  const int64_t plane = x->ne[0] * x->ne[1], channels = x->ne[2], batch = x->ne[3];
  const std::vector<float> w = affine_f32(weight, channels);
  const int64_t chunks = (plane + kPixels - 1) / kPixels, tasks = chunks * batch;
  const size_t es = type_size(x->type);
#pragma omp parallel num_threads(ctx.threads) if (tasks > 1 && \
                                                  plane * channels * batch >= kMinParallelValues)
  {
    std::vector<float> converted(x->type == DType::F32 ? 0
                                                       : static_cast<size_t>(kPixels * channels));
    std::vector<float> inv(kPixels);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t n = t / chunks, p0 = (t % chunks) * kPixels;
      const int64_t m = std::min(kPixels, plane - p0);
      const char* chunk = static_cast<const char*>(x->data) + n * x->nb[3] + p0 * es;
      if (x->type != DType::F32) {
        for (int64_t c = 0; c < channels; ++c)
          dequantize_row(x->type, chunk + c * x->nb[2], converted.data() + c * kPixels, m);
      }
      auto values = [&](int64_t c) {  // channel c of the chunk, f32
        return x->type == DType::F32 ? reinterpret_cast<const float*>(chunk + c * x->nb[2])
                                     : converted.data() + c * kPixels;
      };
      // Each pixel's sum of squares, then its 1 / RMS.
      std::fill_n(inv.begin(), m, 0.0f);
      for (int64_t c = 0; c < channels; ++c)
        HWY_DYNAMIC_DISPATCH(add_squares)(values(c), inv.data(), m);
      for (int64_t i = 0; i < m; ++i)
        inv[i] = static_cast<float>(1.0 / std::sqrt(inv[i] / channels + eps));
      for (int64_t c = 0; c < channels; ++c) {
        float* y = reinterpret_cast<float*>(static_cast<char*>(dst->data) + c * dst->nb[2] +
                                            n * dst->nb[3]) +
                   p0;
        HWY_DYNAMIC_DISPATCH(scale_by_pixel)
        (values(c), inv.data(), w.empty() ? 1.0f : w[c], silu, y, m);
      }
    }
  }
  return true;
}

}  // namespace

bool cpu_group_norm(CpuContext& ctx, Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* weight = dst->src[1];
  const Tensor* bias = dst->src[2];
  // Each channel's W x H plane must be one dense run, in x and in dst.
  if (dst->type != DType::F32 || !is_float(x->type) || !planes_dense(x) || !planes_dense(dst) ||
      !affine_ok(weight) || !affine_ok(bias)) {
    return false;
  }
  const int groups = dst->params[0];
  const double eps = dst->param_f32(1);
  const bool silu = static_cast<NormActivation>(dst->params[2]) == NormActivation::Silu;
  const int64_t channels = x->ne[2], per_group = channels / groups, batch = x->ne[3];
  const int64_t plane = x->ne[0] * x->ne[1];
  const double count = static_cast<double>(plane * per_group);
  const std::vector<float> w = affine_f32(weight, channels), b = affine_f32(bias, channels);
  const ChannelReader reader{x, plane};
  const int64_t tasks = batch * groups;
#pragma omp parallel num_threads(ctx.threads) if (tasks > 1 && \
                                                  tasks * plane * per_group >= kMinParallelValues)
  {
    std::vector<float> scratch(x->type == DType::F32 ? 0 : static_cast<size_t>(kRunChunk));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t n = t / groups, c0 = (t % groups) * per_group;
      double sum = 0;
      for (int64_t c = c0; c < c0 + per_group; ++c) {
        reader.each_piece(c, n, scratch.data(), [&](const float* p, int64_t, int64_t m) {
          sum += HWY_DYNAMIC_DISPATCH(sum_values)(p, m);
        });
      }
      const auto mean = static_cast<float>(sum / count);
      double ss = 0;
      for (int64_t c = c0; c < c0 + per_group; ++c) {
        reader.each_piece(c, n, scratch.data(), [&](const float* p, int64_t, int64_t m) {
          ss += HWY_DYNAMIC_DISPATCH(sum_sq_dev)(p, mean, m);
        });
      }
      const double inv = 1.0 / std::sqrt(ss / count + eps);
      for (int64_t c = c0; c < c0 + per_group; ++c) {
        const auto s = static_cast<float>(w.empty() ? inv : inv * w[c]);
        const float shift = b.empty() ? 0.0f : b[c];
        float* y = reinterpret_cast<float*>(static_cast<char*>(dst->data) + c * dst->nb[2] +
                                            n * dst->nb[3]);
        reader.each_piece(c, n, scratch.data(), [&](const float* p, int64_t i, int64_t m) {
          if (silu) {
            HWY_DYNAMIC_DISPATCH(normalize_scalar_silu)(p, mean, s, shift, y + i, m);
          } else {
            HWY_DYNAMIC_DISPATCH(normalize_scalar)(p, mean, s, shift, y + i, m);
          }
        });
      }
    }
  }
  return true;
}

bool cpu_layer_norm(CpuContext& ctx, Tensor* dst) {
  return normalize_rows(ctx, dst, true);
}
bool cpu_rms_norm(CpuContext& ctx, Tensor* dst) {
  const bool silu = static_cast<NormActivation>(dst->params[2]) == NormActivation::Silu;
  if (dst->params[1] == 2) return normalize_channels(ctx, dst, silu);
  return normalize_rows(ctx, dst, false, silu);
}

}  // namespace sd
#endif  // HWY_ONCE
