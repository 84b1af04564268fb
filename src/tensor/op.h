// The engine's one enumerated op set. Every op has a shape rule (in ops/<op>.cpp, where
// its builder lives), a plain reference kernel (the test oracle) and, per backend, an
// optional fast kernel. Graphs are plain data: op id, int32 parameters, sources.
#pragma once

#include <cstdint>
#include <string_view>

namespace sd {

enum class Op : uint8_t {
  None,  // a leaf: weight or input
  // views: no compute, they alias their source's memory
  View,
  Reshape,
  Permute,
  // elementwise
  Add,
  Sub,
  Mul,
  Div,
  Scale,
  Clamp,
  Unary,
  Cast,
  // shape and data movement
  Cont,
  Concat,
  Pad,
  GetRows,
  Upscale,
  // reductions and normalization
  Sum,
  Mean,
  Softmax,
  GroupNorm,
  LayerNorm,
  RmsNorm,
  // linear algebra
  MatMul,
  Conv2d,
  Attention,
  // generators
  Arange,
  TimestepEmbedding,
  Count,
};

constexpr int kOpCount = static_cast<int>(Op::Count);

enum class UnaryOp : int32_t {
  Gelu,       // tanh approximation, as GELU in SD's feed-forward layers
  GeluErf,    // exact erf form
  GeluQuick,  // x * sigmoid(1.702 x), OpenAI CLIP
  Silu,
  Relu,
  LeakyRelu,  // alpha in param 1
  Tanh,
  Sigmoid,
  Exp,
  Sin,
  Cos,
  Sqrt,
  Neg,
  Count,
};

enum class UpscaleMode : int32_t { Nearest, Bilinear, BilinearAlignCorners };

std::string_view op_name(Op op);
std::string_view unary_name(UnaryOp op);

inline bool is_view_op(Op op) {
  return op == Op::View || op == Op::Reshape || op == Op::Permute;
}

}  // namespace sd
