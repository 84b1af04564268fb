// Fused attention (tensor/ops/attention.h): shaders/attention.comp, one workgroup per block
// of queries, head and batch, keys and values streamed through shared memory in tiles.
#include "backend/vulkan/vulkan_ops.h"
#include "tensor/ops/attention.h"

namespace sd::vulkan {

namespace {

// Must match attention.comp's QUERY_ROWS and MAX_HEAD_DIM: the shader's shared tiles and
// per-thread accumulators are sized for heads of up to 256 dims.
constexpr int64_t kQueriesPerGroup = 16;
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kMaxGroups = 65535;  // per dispatch dimension

bool is_f32(const Tensor* t) {
  return t && t->type == DType::F32;
}

bool supports_attention(const Tensor& node) {
  const Tensor* q = node.src[0];
  const Tensor* k = node.src[1];
  const Tensor* v = node.src[2];
  const Tensor* mask = node.src[3];
  // The op takes f32 only; the shader would read 16-bit inputs, but nothing checks them.
  if (!is_f32(&node) || !is_f32(q) || !is_f32(k) || !is_f32(v)) return false;
  if (mask && (!is_f32(mask) || mask->ne[0] != k->ne[1] || mask->ne[1] != q->ne[1] ||
               mask->ne[2] != 1 || mask->ne[3] != 1))
    return false;
  const int64_t head_dim = q->ne[0], value_dim = v->ne[0];
  if (head_dim < 1 || head_dim > kMaxHeadDim || value_dim > kMaxHeadDim) return false;
  // Both precisions are computed in f32: bf16 only permits rounding, it does not ask for it.
  const AttentionPrecision precision = attention_precision(&node);
  if (precision != AttentionPrecision::F32 && precision != AttentionPrecision::BF16) return false;
  const int64_t query_blocks = (q->ne[1] + kQueriesPerGroup - 1) / kQueriesPerGroup;
  return query_blocks <= kMaxGroups && q->ne[2] <= kMaxGroups && q->ne[3] <= kMaxGroups;
}

Dispatch plan_attention(const Tensor& node) {
  const Tensor* q = node.src[0];
  Dispatch d;
  d.shader = "attention";
  d.groups[0] = static_cast<uint32_t>((q->ne[1] + kQueriesPerGroup - 1) / kQueriesPerGroup);
  d.groups[1] = static_cast<uint32_t>(q->ne[2]);  // heads
  d.groups[2] = static_cast<uint32_t>(q->ne[3]);  // batch
  return d;
}

constexpr VulkanOp kAttention{supports_attention, plan_attention};

}  // namespace

const VulkanOp* attention_op(Op op) {
  return op == Op::Attention ? &kAttention : nullptr;
}

}  // namespace sd::vulkan
