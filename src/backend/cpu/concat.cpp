// Fast Concat: a byte copy of whole rows (both halves of a row when concatenating along
// dim 0), rows spread over threads.
#include <cstdint>
#include <cstring>

#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/strided_loop.h"

namespace sd {

namespace {

// out[2i] = a[i], out[2i + 1] = b[i]: the rotated halves of rotary pairs put back side by
// side (nn::apply_rope), where a row of two values made two memcpy calls per pair.
template <typename T>
void interleave(CpuContext& ctx, const void* a, const void* b, void* out, int64_t n) {
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  T* o = static_cast<T*>(out);
#pragma omp parallel for num_threads(ctx.threads) schedule(static) if (n >= 1 << 15)
  for (int64_t i = 0; i < n; ++i) {
    o[2 * i] = x[i];
    o[2 * i + 1] = y[i];
  }
}

}  // namespace

bool cpu_concat(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  const int dim = dst->params[0];
  if (is_quantized(dst->type) || !dst->rows_contiguous() || !a->rows_contiguous() ||
      !b->rows_contiguous()) {
    return false;
  }
  const size_t es = type_size(dst->type);
  if (dim == 0 && a->ne[0] == 1 && b->ne[0] == 1 && a->is_contiguous() && b->is_contiguous() &&
      dst->is_contiguous() && (es == 4 || es == 2)) {
    if (es == 4)
      interleave<uint32_t>(ctx, a->data, b->data, dst->data, a->nelements());
    else
      interleave<uint16_t>(ctx, a->data, b->data, dst->data, a->nelements());
    return true;
  }
  const int64_t rows = dst->nrows();
  const size_t row_bytes = static_cast<size_t>(dst->ne[0]) * es;
#pragma omp parallel for num_threads(ctx.threads) schedule(static) if (rows * row_bytes >= 1 << 17)
  for (int64_t r = 0; r < rows; ++r) {
    char* out = tensor_row(dst, r);
    if (dim == 0) {
      const size_t a_bytes = static_cast<size_t>(a->ne[0]) * es;
      std::memcpy(out, tensor_row(a, r), a_bytes);
      std::memcpy(out + a_bytes, tensor_row(b, r), row_bytes - a_bytes);
      continue;
    }
    int64_t i[kMaxDims] = {0, r % dst->ne[1], r / dst->ne[1] % dst->ne[2],
                           r / (dst->ne[1] * dst->ne[2])};
    const Tensor* from = a;
    if (i[dim] >= a->ne[dim]) {
      from = b;
      i[dim] -= a->ne[dim];
    }
    std::memcpy(out,
                static_cast<const char*>(from->data) + i[1] * from->nb[1] + i[2] * from->nb[2] +
                    i[3] * from->nb[3],
                row_bytes);
  }
  return true;
}

}  // namespace sd
