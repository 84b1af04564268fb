#include "tensor/op.h"

#include <array>

#include "tensor/op_table.h"

namespace sd {

namespace {

// One entry per op, keyed by the op itself; the check makes a new op without a name fail
// the build.
constexpr auto kOpNames = make_op_table<std::string_view>({
    {Op::None, "none"},
    {Op::View, "view"},
    {Op::Reshape, "reshape"},
    {Op::Permute, "permute"},
    {Op::Add, "add"},
    {Op::Sub, "sub"},
    {Op::Mul, "mul"},
    {Op::Div, "div"},
    {Op::Scale, "scale"},
    {Op::Clamp, "clamp"},
    {Op::Unary, "unary"},
    {Op::Cast, "cast"},
    {Op::Cont, "cont"},
    {Op::Concat, "concat"},
    {Op::Pad, "pad"},
    {Op::GetRows, "get_rows"},
    {Op::Upscale, "upscale"},
    {Op::Sum, "sum"},
    {Op::Mean, "mean"},
    {Op::Softmax, "softmax"},
    {Op::GroupNorm, "group_norm"},
    {Op::LayerNorm, "layer_norm"},
    {Op::RmsNorm, "rms_norm"},
    {Op::MatMul, "matmul"},
    {Op::Conv2d, "conv2d"},
    {Op::Attention, "attention"},
    {Op::Arange, "arange"},
    {Op::TimestepEmbedding, "timestep_embedding"},
});
static_assert(op_table_covers(kOpNames, [](Op) { return true; }), "an op has no name");

constexpr size_t kUnaryCount = static_cast<size_t>(UnaryOp::Count);

constexpr std::array<std::string_view, kUnaryCount> make_unary_names() {
  struct Entry {
    UnaryOp op;
    std::string_view name;
  };
  constexpr Entry kEntries[] = {
      {UnaryOp::Gelu, "gelu"}, {UnaryOp::GeluErf, "gelu_erf"}, {UnaryOp::GeluQuick, "gelu_quick"},
      {UnaryOp::Silu, "silu"}, {UnaryOp::Relu, "relu"},        {UnaryOp::LeakyRelu, "leaky_relu"},
      {UnaryOp::Tanh, "tanh"}, {UnaryOp::Sigmoid, "sigmoid"},  {UnaryOp::Exp, "exp"},
      {UnaryOp::Sin, "sin"},   {UnaryOp::Cos, "cos"},          {UnaryOp::Sqrt, "sqrt"},
      {UnaryOp::Neg, "neg"},
  };
  std::array<std::string_view, kUnaryCount> names{};
  for (const Entry& e : kEntries) names[static_cast<size_t>(e.op)] = e.name;
  return names;
}
constexpr auto kUnaryNames = make_unary_names();
static_assert(
    [] {
      for (std::string_view n : kUnaryNames)
        if (n.empty()) return false;
      return true;
    }(),
    "a unary op has no name");

}  // namespace

std::string_view op_name(Op op) {
  auto i = static_cast<size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : "invalid";
}

std::string_view unary_name(UnaryOp op) {
  auto i = static_cast<size_t>(op);
  return i < kUnaryNames.size() ? kUnaryNames[i] : "invalid";
}

}  // namespace sd
