#include "tensor/ops/pad.h"

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* pad(Context& ctx, Tensor* a, const std::array<int, 8>& pads, float value) {
  SD_CHECK(is_float(a->type), "[pad] '%s' is %s; pad takes f32, f16 or bf16", a->name.c_str(),
           dtype_name(a->type).data());
  Shape ne = a->ne;
  for (int i = 0; i < kMaxDims; ++i) {
    const int before = pads[2 * i], after = pads[2 * i + 1];
    SD_CHECK(before >= 0 && after >= 0,
             "[pad] negative padding (%d, %d) on dim %d of '%s' %s; use slice() to crop", before,
             after, i, a->name.c_str(), a->shape_string().c_str());
    ne[i] += static_cast<int64_t>(before) + after;
  }
  Tensor* t = ctx.new_op(Op::Pad, DType::F32, ne, {a});
  for (int i = 0; i < 8; ++i) t->params[i] = pads[i];
  t->set_param_f32(8, value);
  return t;
}

void reference_pad(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const float value = dst->param_f32(8);
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t i[kMaxDims] = {i0, i1, i2, i3};
    int64_t s[kMaxDims];
    bool inside = true;
    for (int d = 0; d < kMaxDims; ++d) {
      s[d] = i[d] - dst->params[2 * d];
      inside = inside && s[d] >= 0 && s[d] < a->ne[d];
    }
    store_f32(dst, inside ? load_f32(a, s[0], s[1], s[2], s[3]) : value, i0, i1, i2, i3);
  });
}

}  // namespace sd
