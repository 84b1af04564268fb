#include "tensor/ops/matmul.h"

#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* matmul(Context& ctx, Tensor* a, Tensor* b) {
  const std::string a_type(dtype_name(a->type)), b_type(dtype_name(b->type));
  SD_CHECK(b->type == DType::F32, "[matmul] b ('%s') is %s; the activation operand must be f32",
           b->name.c_str(), b_type.c_str());
  SD_CHECK(a->type != DType::I32, "[matmul] a ('%s') is i32; weights are float or block types",
           a->name.c_str());
  SD_CHECK(a->ne[0] == b->ne[0],
           "[matmul] a ('%s') %s and b ('%s') %s differ in ne[0] (K, the summed dim); "
           "transpose or reshape one of them",
           a->name.c_str(), a->shape_string().c_str(), b->name.c_str(), b->shape_string().c_str());
  SD_CHECK(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0,
           "[matmul] a ('%s') %s cannot broadcast over the batch dims of b ('%s') %s: b's "
           "ne[2] and ne[3] must be multiples of a's",
           a->name.c_str(), a->shape_string().c_str(), b->name.c_str(), b->shape_string().c_str());
  SD_CHECK(!is_quantized(a->type) || a->rows_contiguous(),
           "[matmul] a ('%s') is %s with strided blocks; block types need contiguous rows",
           a->name.c_str(), a_type.c_str());
  return ctx.new_op(Op::MatMul, DType::F32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
}

void reference_matmul(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
  const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  std::vector<float> a_rows(static_cast<size_t>(M * K)), b_row(static_cast<size_t>(K));
  for (int64_t i3 = 0; i3 < b->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < b->ne[2]; ++i2) {
      // a's slice for this batch, dequantized once: block types have no per-element access.
      for (int64_t m = 0; m < M; ++m) load_row_f32(a, m, i2 / r2, i3 / r3, &a_rows[m * K]);
      for (int64_t n = 0; n < N; ++n) {
        load_row_f32(b, n, i2, i3, b_row.data());
        for (int64_t m = 0; m < M; ++m) {
          double sum = 0;  // double: the oracle should not share the fast kernels' rounding
          for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(a_rows[m * K + k]) * b_row[k];
          store_f32(dst, static_cast<float>(sum), m, n, i2, i3);
        }
      }
    }
}

}  // namespace sd
