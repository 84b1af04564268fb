// Linear algebra: matmul and conv2d, both as shared-memory tiled GEMMs (shaders/gemm_tile.glsl)
// of 64 x 64 output tiles per workgroup; conv2d reads its input patches in place (implicit
// GEMM, shaders/conv2d.comp). matmul's weights may be block-quantized.
#include "backend/vulkan/vulkan_ops.h"

#include "tensor/ops/conv2d.h"

namespace sd::vulkan {

namespace {

constexpr uint32_t kTile = 64;  // output tile edge of matmul.comp and conv2d.comp

// Float dtypes the fetches decode element by element.
bool float_operand(const Tensor* t) {
  return t && (t->type == DType::F32 || t->type == DType::F16 || t->type == DType::BF16);
}

// matmul's weights may also be rows of blocks, which its fetch of A decodes
// (shaders/dequant.glsl); conv2d reads its weights as taps, so it takes floats only.
bool weight_operand(const Tensor* t) {
  return float_operand(t) || (t && block_rows(*t));
}

int64_t tiles(int64_t count) {
  return (count + kTile - 1) / kTile;
}

bool supports_matmul(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  // The shader stores f32 words, and reads a's batch slice i2 / (B2 / A2), as matmul() allows.
  return node.type == DType::F32 && weight_operand(a) && float_operand(b) && a->ne[0] == b->ne[0] &&
         a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
}

Dispatch plan_matmul(const Tensor& node) {
  Dispatch d;
  d.shader = "matmul";
  d.groups[0] = groups_for(node.ne[0], kTile);  // m tiles
  d.groups[1] = groups_for(node.ne[1], kTile);  // n tiles
  d.groups[2] = groups_for(node.ne[2] * node.ne[3], 1);
  return d;
}

bool supports_conv2d(const Tensor& node) {
  const Tensor* x = node.src[0];
  const Tensor* w = node.src[1];
  const Tensor* bias = node.src[2];
  if (node.type != DType::F32 || !float_operand(x) || !float_operand(w)) return false;
  if (bias && !float_operand(bias)) return false;
  const Conv2dParams p = conv2d_params(&node);
  return p.layout == ConvKernelLayout::Standard && p.s0 >= 1 && p.s1 >= 1 && p.d0 >= 1 &&
         p.d1 >= 1 && p.p0 >= 0 && p.p1 >= 0 && p.groups >= 1 && w->ne[3] % p.groups == 0 &&
         w->ne[2] * p.groups == x->ne[2] && node.ne[2] == w->ne[3];
}

Dispatch plan_conv2d(const Tensor& node) {
  const int64_t groups = conv2d_params(&node).groups;
  Dispatch d;
  d.shader = "conv2d";
  d.groups[0] = groups_for(node.ne[0] * node.ne[1] * node.ne[3], kTile);  // pixel tiles
  d.groups[1] = groups_for(groups * tiles(node.ne[2] / groups), 1);       // channel tiles
  d.extra = node.src[2] ? 1 : 0;                                          // has a bias
  return d;
}

constexpr VulkanOp kMatMul{supports_matmul, plan_matmul};
constexpr VulkanOp kConv2d{supports_conv2d, plan_conv2d};

}  // namespace

const VulkanOp* linalg_op(Op op) {
  switch (op) {
    case Op::MatMul:
      return &kMatMul;
    case Op::Conv2d:
      return &kConv2d;
    default:
      return nullptr;
  }
}

}  // namespace sd::vulkan
