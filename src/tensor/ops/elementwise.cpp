#include "tensor/ops/elementwise.h"

#include <algorithm>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

namespace {

void check_float_input(const char* op, const Tensor* t) {
  SD_CHECK(is_float(t->type), "[%s] '%s' is %s; elementwise ops take f32, f16 or bf16", op,
           t->name.c_str(), std::string(dtype_name(t->type)).c_str());
}

Tensor* binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  const char* name = op_name(op).data();
  check_float_input(name, a);
  check_float_input(name, b);
  SD_CHECK(can_broadcast(*a, *b), "[%s] cannot broadcast %s ('%s') to %s ('%s')", name,
           b->shape_string().c_str(), b->name.c_str(), a->shape_string().c_str(), a->name.c_str());
  return ctx.new_op(op, DType::F32, a->ne, {a, b});
}

}  // namespace

Tensor* add(Context& ctx, Tensor* a, Tensor* b) {
  return binary(ctx, Op::Add, a, b);
}
Tensor* sub(Context& ctx, Tensor* a, Tensor* b) {
  return binary(ctx, Op::Sub, a, b);
}
Tensor* mul(Context& ctx, Tensor* a, Tensor* b) {
  return binary(ctx, Op::Mul, a, b);
}
Tensor* div(Context& ctx, Tensor* a, Tensor* b) {
  return binary(ctx, Op::Div, a, b);
}

Tensor* scale(Context& ctx, Tensor* a, float s, float bias) {
  check_float_input("scale", a);
  Tensor* t = ctx.new_op(Op::Scale, DType::F32, a->ne, {a});
  t->set_param_f32(0, s);
  t->set_param_f32(1, bias);
  return t;
}

Tensor* clamp(Context& ctx, Tensor* a, float lo, float hi) {
  check_float_input("clamp", a);
  SD_CHECK(lo <= hi, "[clamp] lower bound %g is above upper bound %g", lo, hi);
  Tensor* t = ctx.new_op(Op::Clamp, DType::F32, a->ne, {a});
  t->set_param_f32(0, lo);
  t->set_param_f32(1, hi);
  return t;
}

void reference_binary(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float x = load_f32(a, i0, i1, i2, i3);
    float y = load_f32(b, bcast(b, 0, i0), bcast(b, 1, i1), bcast(b, 2, i2), bcast(b, 3, i3));
    float r = 0;
    switch (dst->op) {
      case Op::Add:
        r = x + y;
        break;
      case Op::Sub:
        r = x - y;
        break;
      case Op::Mul:
        r = x * y;
        break;
      case Op::Div:
        r = x / y;
        break;
      default:
        fail("[reference] not a binary op: %s", op_name(dst->op).data());
    }
    store_f32(dst, r, i0, i1, i2, i3);
  });
}

void reference_scale(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const float s = dst->param_f32(0), bias = dst->param_f32(1);
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    store_f32(dst, load_f32(a, i0, i1, i2, i3) * s + bias, i0, i1, i2, i3);
  });
}

void reference_clamp(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const float lo = dst->param_f32(0), hi = dst->param_f32(1);
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    store_f32(dst, std::clamp(load_f32(a, i0, i1, i2, i3), lo, hi), i0, i1, i2, i3);
  });
}

}  // namespace sd
