#include "tensor/ops/access.h"

#include "tensor/quant/quant.h"

namespace sd {

void load_row_f32(const Tensor* t, int64_t i1, int64_t i2, int64_t i3, float* out) {
  if (t->type == DType::I32 || !t->rows_contiguous()) {
    for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) out[i0] = load_f32(t, i0, i1, i2, i3);
    return;
  }
  dequantize_row(t->type, element_ptr(t, 0, i1, i2, i3), out, t->ne[0]);
}

}  // namespace sd
