#include "tensor/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

namespace {

void check_f32(const Tensor* t, const char* role) {
  SD_CHECK(t->type == DType::F32, "[attention] %s ('%s') is %s; attention takes f32", role,
           t->name.c_str(), std::string(dtype_name(t->type)).c_str());
}

}  // namespace

Tensor* attention(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                  AttentionPrecision precision) {
  SD_CHECK(precision == AttentionPrecision::F32 || precision == AttentionPrecision::BF16,
           "[attention] precision %d is neither f32 (0) nor bf16 (1)", static_cast<int>(precision));
  check_f32(q, "q");
  check_f32(k, "k");
  check_f32(v, "v");
  SD_CHECK(q->ne[0] == k->ne[0],
           "[attention] q ('%s') %s and k ('%s') %s must have the same head size ne[0]",
           q->name.c_str(), q->shape_string().c_str(), k->name.c_str(), k->shape_string().c_str());
  SD_CHECK(k->ne[1] == v->ne[1],
           "[attention] k ('%s') %s and v ('%s') %s must have the same number of keys ne[1]",
           k->name.c_str(), k->shape_string().c_str(), v->name.c_str(), v->shape_string().c_str());
  SD_CHECK(
      q->ne[2] == k->ne[2] && k->ne[2] == v->ne[2] && q->ne[3] == k->ne[3] && k->ne[3] == v->ne[3],
      "[attention] q %s, k %s and v %s must have the same heads ne[2] and batch ne[3]",
      q->shape_string().c_str(), k->shape_string().c_str(), v->shape_string().c_str());
  if (mask) {
    check_f32(mask, "mask");
    SD_CHECK(
        mask->ne[0] == k->ne[1] && mask->ne[1] == q->ne[1] && mask->ne[2] == 1 && mask->ne[3] == 1,
        "[attention] mask ('%s') %s must be [Lk, Lq] = [%lld, %lld]", mask->name.c_str(),
        mask->shape_string().c_str(), static_cast<long long>(k->ne[1]),
        static_cast<long long>(q->ne[1]));
  }
  const Shape ne = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
  Tensor* t = mask ? ctx.new_op(Op::Attention, DType::F32, ne, {q, k, v, mask})
                   : ctx.new_op(Op::Attention, DType::F32, ne, {q, k, v});
  t->set_param_f32(0, scale);
  t->params[1] = static_cast<int32_t>(precision);
  return t;
}

AttentionPrecision attention_precision(const Tensor* node) {
  return static_cast<AttentionPrecision>(node->params[1]);
}

void reference_attention(Tensor* dst) {
  const Tensor* q = dst->src[0];
  const Tensor* k = dst->src[1];
  const Tensor* v = dst->src[2];
  const Tensor* mask = dst->src[3];
  const float scale = dst->param_f32(0);
  const int64_t D = q->ne[0], Lq = q->ne[1], Lk = k->ne[1], Dv = v->ne[0];
  std::vector<double> p(static_cast<size_t>(Lk)), o(static_cast<size_t>(Dv));
  for (int64_t n = 0; n < q->ne[3]; ++n)
    for (int64_t h = 0; h < q->ne[2]; ++h)
      for (int64_t i = 0; i < Lq; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < Lk; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += static_cast<double>(load_f32(q, d, i, h, n)) * load_f32(k, d, j, h, n);
          p[j] = scale * s + (mask ? load_f32(mask, j, i) : 0.0f);
          max = std::fmax(max, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < Lk; ++j) {
          p[j] = max == -INFINITY ? 0.0 : std::exp(p[j] - max);
          sum += p[j];
        }
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < Lk; ++j)
          for (int64_t e = 0; e < Dv; ++e) o[e] += p[j] * load_f32(v, e, j, h, n);
        for (int64_t e = 0; e < Dv; ++e)
          store_f32(dst, sum > 0 ? static_cast<float>(o[e] / sum) : 0.0f, e, h, i, n);
      }
}

}  // namespace sd
