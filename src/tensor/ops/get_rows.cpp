#include "tensor/ops/get_rows.h"

#include <cstring>
#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* get_rows(Context& ctx, Tensor* a, Tensor* ids) {
  SD_CHECK(a->type != DType::I32, "[get_rows] table '%s' is i32; tables hold float or block data",
           a->name.c_str());
  SD_CHECK(a->ne[2] == 1 && a->ne[3] == 1, "[get_rows] table '%s' %s must be 2-D [K, R]",
           a->name.c_str(), a->shape_string().c_str());
  SD_CHECK(ids->type == DType::I32, "[get_rows] ids '%s' are %s; ids must be i32",
           ids->name.c_str(), dtype_name(ids->type).data());
  SD_CHECK(ids->ne[2] == 1 && ids->ne[3] == 1, "[get_rows] ids '%s' %s must be [n] or [n, B]",
           ids->name.c_str(), ids->shape_string().c_str());
  return ctx.new_op(Op::GetRows, DType::F32, make_shape({a->ne[0], ids->ne[0], ids->ne[1]}),
                    {a, ids});
}

void reference_get_rows(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* ids = dst->src[1];
  std::vector<float> row(static_cast<size_t>(a->ne[0]));
  for (int64_t b = 0; b < ids->ne[1]; ++b)
    for (int64_t i = 0; i < ids->ne[0]; ++i) {
      int32_t id;
      std::memcpy(&id, element_ptr(ids, i, b, 0, 0), 4);
      // Ids are data (token ids from a tokenizer, class labels): check before reading.
      SD_CHECK(id >= 0 && id < a->ne[1],
               "[get_rows] id %d at ids '%s' (%lld, %lld) is outside table '%s' of %lld rows", id,
               ids->name.c_str(), static_cast<long long>(i), static_cast<long long>(b),
               a->name.c_str(), static_cast<long long>(a->ne[1]));
      load_row_f32(a, id, 0, 0, row.data());
      for (int64_t k = 0; k < a->ne[0]; ++k) store_f32(dst, row[k], k, i, b, 0);
    }
}

}  // namespace sd
