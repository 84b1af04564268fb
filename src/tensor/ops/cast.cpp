#include "tensor/ops/cast.h"

#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"
#include "tensor/quant/quant.h"

namespace sd {

Tensor* cast(Context& ctx, Tensor* a, DType type) {
  SD_CHECK(
      type != DType::I32 && a->type != DType::I32 && type != DType::Q8_K && type < DType::Count,
      "[cast] cannot cast '%s' from %s to %s", a->name.c_str(),
      std::string(dtype_name(a->type)).c_str(), std::string(dtype_name(type)).c_str());
  SD_CHECK(!is_quantized(a->type) || type == DType::F32,
           "[cast] block type %s converts only to f32", std::string(dtype_name(a->type)).c_str());
  SD_CHECK(a->ne[0] % block_size(type) == 0,
           "[cast] %s needs rows of a multiple of %lld values, got %lld",
           std::string(dtype_name(type)).c_str(), static_cast<long long>(block_size(type)),
           static_cast<long long>(a->ne[0]));
  return ctx.new_op(Op::Cast, type, a->ne, {a});
}

void reference_cast(Tensor* dst) {
  const Tensor* a = dst->src[0];
  std::vector<float> row(static_cast<size_t>(a->ne[0]));
  for (int64_t i3 = 0; i3 < a->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < a->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < a->ne[1]; ++i1) {
        load_row_f32(a, i1, i2, i3, row.data());
        if (is_quantized(dst->type)) {
          quantize_row(dst->type, row.data(), element_ptr(dst, 0, i1, i2, i3), a->ne[0]);
        } else {
          for (int64_t i0 = 0; i0 < a->ne[0]; ++i0) store_f32(dst, row[i0], i0, i1, i2, i3);
        }
      }
}

}  // namespace sd
