// Fused attention (tensor/ops/attention.h): one workgroup per block of queries, head and
// batch, keys and values streamed through shared memory in tiles, by
// shaders/attention_rows_body.glsl: 1, 2, 4 or 8 threads per query, the query's dims and
// its output held in their registers, 64 dims each.
#include <algorithm>

#include "backend/vulkan/vulkan_ops.h"
#include "tensor/ops/attention.h"

namespace sd::vulkan {

namespace {

// The shader variants, smallest first: each one's queries per workgroup and largest head
// (its shared tiles and per-thread accumulators are sized for them).
struct AttentionShape {
  const char* shader;
  int64_t queries_per_group;
  int64_t max_head_dim;
};
constexpr AttentionShape kShapes[] = {
    {"attention_rows", 64, 64},    // one thread per query: SDXL, SD3, SD 1.5's first level
    {"attention_rows2", 32, 128},  // two: FLUX, SD3.5, the LLM-conditioned DiTs
    {"attention_rows4", 16, 256},  // four: SD 1.5's deeper levels, text encoders
    {"attention_rows8", 8, 512},   // eight: the VAEs' single-head attention
};
constexpr int64_t kMaxGroups = 65535;  // per dispatch dimension

// The smallest variant that holds the node's heads; null where none does.
const AttentionShape* shape_for(const Tensor& node) {
  const int64_t dim = std::max(node.src[0]->ne[0], node.src[2]->ne[0]);
  for (const AttentionShape& s : kShapes)
    if (dim <= s.max_head_dim) return &s;
  return nullptr;
}

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
  const AttentionShape* shape = shape_for(node);
  if (q->ne[0] < 1 || !shape) return false;
  // Both precisions are computed in f32: bf16 only permits rounding, it does not ask for it.
  const AttentionPrecision precision = attention_precision(&node);
  if (precision != AttentionPrecision::F32 && precision != AttentionPrecision::BF16) return false;
  const int64_t query_blocks = (q->ne[1] + shape->queries_per_group - 1) / shape->queries_per_group;
  return query_blocks <= kMaxGroups && q->ne[2] <= kMaxGroups && q->ne[3] <= kMaxGroups;
}

Dispatch plan_attention(const Tensor& node) {
  const Tensor* q = node.src[0];
  const AttentionShape& shape = *shape_for(node);
  Dispatch d;
  d.shader = shape.shader;
  d.groups[0] =
      static_cast<uint32_t>((q->ne[1] + shape.queries_per_group - 1) / shape.queries_per_group);
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
