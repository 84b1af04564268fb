// Normalization and reductions: GroupNorm, LayerNorm, RmsNorm, Softmax, Sum, Mean. Each
// reduces a row or group to a few statistics and then writes the row from them, so each
// shader runs one workgroup per row (group, output element) with a shared-memory tree
// reduction (shaders/workgroup_reduce.glsl).
#include "backend/vulkan/vulkan_ops.h"

#include <algorithm>

namespace sd::vulkan {

namespace {

// node_extra() bits of the shaders: which optional sources are bound, and variants.
constexpr uint32_t kHasWeight = 1, kHasBias = 2;     // group_norm.comp, row_norm.comp
constexpr uint32_t kCentered = 4;                    // row_norm.comp: LayerNorm, not RmsNorm
constexpr uint32_t kHasMask = 1;                     // softmax.comp
constexpr uint32_t kIsMean = 1, kPerInvocation = 2;  // reduce.comp

// Enough workgroups to fill any current GPU (a thousand or more resident 256-invocation
// groups); beyond that each workgroup loops over several rows.
constexpr uint32_t kMaxRowGroups = 2048;

Dispatch plan_rows(const char* shader, int64_t rows, uint32_t extra) {
  Dispatch d;
  d.shader = shader;
  d.groups[0] = std::min(groups_for(rows, 1), kMaxRowGroups);
  d.extra = extra;
  return d;
}

// Inputs are f32, f16 or bf16 and the output f32, as the ops' constructors make them; the
// shaders assume no more.
bool float_in_f32_out(const Tensor& node) {
  return node.type == DType::F32 && is_float(node.src[0]->type);
}

bool same_shape_as_input(const Tensor& node) {
  return node.ne == node.src[0]->ne;
}

// An optional affine parameter the shaders read with load_vector(): absent, or a float
// vector of n values (its one non-1 dim holds them).
bool affine_ok(const Tensor* p, int64_t n) {
  if (!p) return true;
  int non_unit_dims = 0;
  for (int d = 0; d < kMaxDims; ++d) non_unit_dims += p->ne[d] != 1;
  return is_float(p->type) && p->nelements() == n && non_unit_dims <= 1;
}

uint32_t affine_bits(const Tensor& node) {
  return (node.src[1] ? kHasWeight : 0) | (node.src[2] ? kHasBias : 0);
}

bool supports_group_norm(const Tensor& node) {
  const Tensor& x = *node.src[0];
  const int32_t groups = node.params[0];
  const int32_t activation = node.params[2];
  return float_in_f32_out(node) && same_shape_as_input(node) && groups >= 1 &&
         x.ne[2] % groups == 0 && (activation == 0 || activation == 1) &&
         affine_ok(node.src[1], x.ne[2]) && affine_ok(node.src[2], x.ne[2]);
}

Dispatch plan_group_norm(const Tensor& node) {
  return plan_rows("group_norm", node.params[0] * node.src[0]->ne[3], affine_bits(node));
}

// The dim a row norm normalizes over: LayerNorm's rows, RmsNorm's rows or channels.
int32_t norm_dim(const Tensor& node) {
  return node.op == Op::RmsNorm ? node.params[1] : 0;
}

bool supports_row_norm(const Tensor& node) {
  const int32_t dim = norm_dim(node);
  if (dim != 0 && dim != 2) return false;
  const int64_t n = node.src[0]->ne[dim];
  // RmsNorm has no bias; the shader would apply one if bound. LayerNorm has no activation.
  const bool layer = node.op == Op::LayerNorm;
  const bool bias_ok = layer ? affine_ok(node.src[2], n) : !node.src[2];
  const int32_t activation = layer ? 0 : node.params[2];
  return float_in_f32_out(node) && same_shape_as_input(node) && affine_ok(node.src[1], n) &&
         bias_ok && (activation == 0 || activation == 1);
}

Dispatch plan_row_norm(const Tensor& node) {
  const uint32_t centered = node.op == Op::LayerNorm ? kCentered : 0;
  const Tensor& x = *node.src[0];
  const int64_t lines = x.nelements() / x.ne[norm_dim(node)];
  return plan_rows("row_norm", lines, affine_bits(node) | centered);
}

bool supports_softmax(const Tensor& node) {
  const Tensor* mask = node.src[1];
  const bool mask_ok = !mask || ((mask->type == DType::F32 || mask->type == DType::F16) &&
                                 can_broadcast(*node.src[0], *mask));
  return float_in_f32_out(node) && same_shape_as_input(node) && mask_ok;
}

Dispatch plan_softmax(const Tensor& node) {
  return plan_rows("softmax", node.src[0]->nrows(), node.src[1] ? kHasMask : 0);
}

bool supports_reduce(const Tensor& node) {
  const int32_t dim = node.params[0];
  if (dim < 0 || dim >= kMaxDims || !float_in_f32_out(node)) return false;
  for (int d = 0; d < kMaxDims; ++d)
    if (node.ne[d] != (d == dim ? 1 : node.src[0]->ne[d])) return false;
  return true;
}

Dispatch plan_reduce(const Tensor& node) {
  const uint32_t mean_bit = node.op == Op::Mean ? kIsMean : 0;
  const int64_t length = node.src[0]->ne[node.params[0]];
  if (length >= kThreads) return plan_rows("reduce", node.nelements(), mean_bit);
  // Too short to share among a workgroup: one invocation per output element.
  Dispatch d;
  d.shader = "reduce";
  d.groups[0] = groups_for(node.nelements(), kThreads);
  d.extra = mean_bit | kPerInvocation;
  return d;
}

constexpr VulkanOp kGroupNorm{supports_group_norm, plan_group_norm};
constexpr VulkanOp kRowNorm{supports_row_norm, plan_row_norm};
constexpr VulkanOp kSoftmax{supports_softmax, plan_softmax};
constexpr VulkanOp kReduce{supports_reduce, plan_reduce};

}  // namespace

const VulkanOp* norm_op(Op op) {
  switch (op) {
    case Op::GroupNorm:
      return &kGroupNorm;
    case Op::LayerNorm:
    case Op::RmsNorm:
      return &kRowNorm;
    case Op::Softmax:
      return &kSoftmax;
    case Op::Sum:
    case Op::Mean:
      return &kReduce;
    default:
      return nullptr;
  }
}

}  // namespace sd::vulkan
