// Elementwise ops: the binary arithmetic ops and the one-input maps (cont, cast, scale,
// clamp, unary functions). One thread per output element.
#include "backend/vulkan/vulkan_ops.h"

namespace sd::vulkan {

namespace {

// binary.comp and map.comp read and write elements with decode()/store(): scalar types
// only (a block-typed cont, cast or sum would need a block codec in the shader).
bool any_float(const Tensor& node) {
  return scalar_types_only(node) && node.type != DType::I32 && node.src[0]->type != DType::I32;
}

uint32_t binary_code(Op op) {
  switch (op) {
    case Op::Add:
      return 0;
    case Op::Sub:
      return 1;
    case Op::Mul:
      return 2;
    default:
      return 3;  // Div
  }
}

Dispatch plan_binary(const Tensor& node) {
  Dispatch d;
  d.shader = "binary";
  d.groups[0] = groups_for(node.nelements(), kThreads);
  d.extra = binary_code(node.op);
  return d;
}

bool supports_binary(const Tensor& node) {
  return any_float(node) && node.src[1] && node.src[1]->type != DType::I32;
}

// map.comp's kinds.
enum MapKind : uint32_t { kCont = 0, kCast = 1, kScale = 2, kClamp = 3, kUnary = 4 };

MapKind map_kind(Op op) {
  switch (op) {
    case Op::Cont:
      return kCont;
    case Op::Cast:
      return kCast;
    case Op::Scale:
      return kScale;
    case Op::Clamp:
      return kClamp;
    default:
      return kUnary;
  }
}

Dispatch plan_map(const Tensor& node) {
  Dispatch d;
  d.shader = "map";
  d.groups[0] = groups_for(node.nelements(), kThreads);
  d.extra = map_kind(node.op);
  return d;
}

bool supports_map(const Tensor& node) {
  if (node.op == Op::Cont) return scalar_types_only(node) && node.type == node.src[0]->type;
  // i32 values beyond 2^24 do not survive a trip through f32.
  return any_float(node);
}

constexpr VulkanOp kBinary{supports_binary, plan_binary};
constexpr VulkanOp kMap{supports_map, plan_map};

}  // namespace

const VulkanOp* elementwise_op(Op op) {
  switch (op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
      return &kBinary;
    case Op::Cont:
    case Op::Cast:
    case Op::Scale:
    case Op::Clamp:
    case Op::Unary:
      return &kMap;
    default:
      return nullptr;
  }
}

}  // namespace sd::vulkan
