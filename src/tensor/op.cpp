#include "tensor/op.h"

#include <array>

namespace sd {

namespace {

constexpr std::array<std::string_view, kOpCount> kOpNames = {
    "none",       "view",     "reshape", "permute", "add",       "sub",     "mul",
    "div",        "scale",    "clamp",   "unary",   "cast",      "cont",    "concat",
    "pad",        "get_rows", "upscale", "sum",     "mean",      "softmax", "group_norm",
    "layer_norm", "rms_norm", "matmul",  "conv2d",  "attention", "arange",  "timestep_embedding",
};

constexpr std::array<std::string_view, static_cast<size_t>(UnaryOp::Count)> kUnaryNames = {
    "gelu",    "gelu_erf", "gelu_quick", "silu", "relu", "leaky_relu", "tanh",
    "sigmoid", "exp",      "sin",        "cos",  "sqrt", "neg",
};

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
