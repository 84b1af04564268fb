// Fast GetRows: rows gathered in parallel, each converted by the fast row dequantizer
// (a memcpy for f32 tables).
#include <cstring>

#include "backend/cpu/simd_kernels.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

int32_t load_id(const Tensor* ids, int64_t i, int64_t b) {
  int32_t id;
  std::memcpy(&id, static_cast<const char*>(ids->data) + i * ids->nb[0] + b * ids->nb[1], 4);
  return id;
}

}  // namespace

bool cpu_get_rows(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* ids = dst->src[1];
  if (dst->type != DType::F32 || !dst->rows_contiguous() || a->type == DType::I32 ||
      !a->rows_contiguous() || ids->type != DType::I32) {
    return false;
  }
  const int64_t n = ids->ne[0], batch = ids->ne[1], rows = a->ne[1], k = a->ne[0];
  // An id outside the table is an error the reference kernel reports with its position;
  // checking up front keeps the throw out of the parallel region.
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = load_id(ids, i, b);
      if (id < 0 || id >= rows) return false;
    }
  }
  const int64_t total = n * batch;
#pragma omp parallel for num_threads(ctx.threads) \
    schedule(static) if (total > 1 && total * k >= 32768)
  for (int64_t t = 0; t < total; ++t) {
    const int64_t i = t % n, b = t / n;
    const char* src = static_cast<const char*>(a->data) + load_id(ids, i, b) * a->nb[1];
    auto* out =
        reinterpret_cast<float*>(static_cast<char*>(dst->data) + i * dst->nb[1] + b * dst->nb[2]);
    dequantize_row(a->type, src, out, k);
  }
  return true;
}

}  // namespace sd
