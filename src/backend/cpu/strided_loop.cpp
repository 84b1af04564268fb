#include "backend/cpu/strided_loop.h"

#include <cstring>

#include "tensor/float16.h"
#include "tensor/quant/quant.h"

namespace sd {

StridedLoop make_strided_loop(Tensor* dst, std::initializer_list<const Tensor*> srcs) {
  StridedLoop loop;
  std::array<const Tensor*, kMaxLoopOperands> ts{};
  ts[loop.operands++] = dst;
  for (const Tensor* s : srcs) ts[loop.operands++] = s;
  for (int k = 0; k < loop.operands; ++k) {
    loop.data[k] = static_cast<char*>(ts[k]->data);
    loop.type[k] = ts[k]->type;
  }

  // Keep the dims where dst has extent > 1, merging each into the previous kept dim when
  // every operand steps through both as one: stride[d] == stride[prev] * ne[prev].
  int kept = 0;
  for (int d = 0; d < kMaxDims; ++d) {
    const int64_t n = dst->ne[d];
    if (n == 1) continue;
    auto stride = [&](int k) { return ts[k]->ne[d] == 1 ? size_t{0} : ts[k]->nb[d]; };
    bool merge = kept > 0;
    for (int k = 0; merge && k < loop.operands; ++k) {
      merge = stride(k) == loop.nb[k][kept - 1] * static_cast<size_t>(loop.ne[kept - 1]);
    }
    if (merge) {
      loop.ne[kept - 1] *= n;
      continue;
    }
    loop.ne[kept] = n;
    for (int k = 0; k < loop.operands; ++k) loop.nb[k][kept] = stride(k);
    ++kept;
  }
  // A single value: one run of one element, dense in every operand.
  if (kept == 0) {
    for (int k = 0; k < loop.operands; ++k) loop.nb[k][0] = type_size(loop.type[k]);
  }
  return loop;
}

namespace {

template <typename T>
T load_at(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// n values `step` bytes apart from p, as f32: a typed loop for f32 and bf16 (a
// dequantize_row call per value took 8% of a FLUX.1 step), one call per value otherwise.
void gather_f32(DType type, const char* p, size_t step, int64_t n, float* out) {
  switch (type) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) out[i] = load_at<float>(p + static_cast<size_t>(i) * step);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i)
        out[i] = bf16_to_f32(load_at<uint16_t>(p + static_cast<size_t>(i) * step));
      return;
    default:
      for (int64_t i = 0; i < n; ++i)
        dequantize_row(type, p + static_cast<size_t>(i) * step, out + i, 1);
  }
}

}  // namespace

const float* load_run_f32(const StridedLoop& loop, int k, int64_t row, int64_t i0, int64_t n,
                          float* scratch) {
  const size_t step = loop.nb[k][0];
  const char* p = loop.row_ptr(k, row) + static_cast<size_t>(i0) * step;
  if (!loop.dense_runs(k)) {  // every other value of a view (a rotary pair's halves)
    gather_f32(loop.type[k], p, step, n, scratch);
    return scratch;
  }
  if (loop.type[k] == DType::F32) return reinterpret_cast<const float*>(p);
  dequantize_row(loop.type[k], p, scratch, n);
  return scratch;
}

float load_scalar_f32(const StridedLoop& loop, int k, int64_t row) {
  float v;
  dequantize_row(loop.type[k], loop.row_ptr(k, row), &v, 1);
  return v;
}

}  // namespace sd
