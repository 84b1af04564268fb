// Fast Pad: each output row is either all padding or [padding, converted source row,
// padding], rows spread over threads.
#include <algorithm>

#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/strided_loop.h"
#include "tensor/quant/quant.h"

namespace sd {

bool cpu_pad(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  if (dst->type != DType::F32 || !dst->rows_contiguous() || !is_float(a->type) ||
      !a->rows_contiguous()) {
    return false;
  }
  const float value = dst->param_f32(8);
  const int64_t rows = dst->nrows(), n = dst->ne[0], before0 = dst->params[0];
#pragma omp parallel for num_threads(ctx.threads) \
    schedule(static) if (rows * n >= kMinParallelValues)
  for (int64_t r = 0; r < rows; ++r) {
    auto* out = reinterpret_cast<float*>(tensor_row(dst, r));
    const int64_t i[kMaxDims] = {0, r % dst->ne[1], r / dst->ne[1] % dst->ne[2],
                                 r / (dst->ne[1] * dst->ne[2])};
    bool inside = true;
    size_t offset = 0;
    for (int d = 1; d < kMaxDims; ++d) {
      const int64_t s = i[d] - dst->params[2 * d];
      inside = inside && s >= 0 && s < a->ne[d];
      offset += static_cast<size_t>(s) * a->nb[d];
    }
    if (!inside) {
      std::fill(out, out + n, value);
      continue;
    }
    std::fill(out, out + before0, value);
    dequantize_row(a->type, static_cast<const char*>(a->data) + offset, out + before0, a->ne[0]);
    std::fill(out + before0 + a->ne[0], out + n, value);
  }
  return true;
}

}  // namespace sd
