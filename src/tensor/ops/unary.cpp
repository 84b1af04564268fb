#include "tensor/ops/unary.h"

#include <cmath>

#include "tensor/error.h"
#include "tensor/ops/access.h"

namespace sd {

Tensor* unary(Context& ctx, Tensor* a, UnaryOp op, float alpha) {
  SD_CHECK(is_float(a->type), "[unary] '%s' is %s; unary ops take f32, f16 or bf16",
           a->name.c_str(), std::string(dtype_name(a->type)).c_str());
  SD_CHECK(static_cast<int32_t>(op) >= 0 && op < UnaryOp::Count, "[unary] unknown function %d",
           static_cast<int>(op));
  Tensor* t = ctx.new_op(Op::Unary, DType::F32, a->ne, {a});
  t->params[0] = static_cast<int32_t>(op);
  t->set_param_f32(1, alpha);
  return t;
}

float unary_reference_value(UnaryOp op, float x, float alpha) {
  switch (op) {
    case UnaryOp::Gelu: {
      // tanh form of Hendrycks & Gimpel 2016, as ggml's and PyTorch's approximate="tanh"
      const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case UnaryOp::GeluErf:
      return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f)));
    case UnaryOp::GeluQuick:
      return x / (1.0f + std::exp(-1.702f * x));
    case UnaryOp::Silu:
      return x / (1.0f + std::exp(-x));
    case UnaryOp::Relu:
      return x > 0 ? x : 0.0f;
    case UnaryOp::LeakyRelu:
      return x > 0 ? x : alpha * x;
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Sin:
      return std::sin(x);
    case UnaryOp::Cos:
      return std::cos(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Count:
      break;
  }
  fail("[unary] unknown function %d", static_cast<int>(op));
}

void reference_unary(Tensor* dst) {
  const Tensor* a = dst->src[0];
  const auto op = static_cast<UnaryOp>(dst->params[0]);
  const float alpha = dst->param_f32(1);
  for_each_index(dst, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    store_f32(dst, unary_reference_value(op, load_f32(a, i0, i1, i2, i3), alpha), i0, i1, i2, i3);
  });
}

}  // namespace sd
