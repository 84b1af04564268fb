#include "backend/vulkan/vulkan_ops.h"

#include <algorithm>

#include "tensor/dtype.h"

namespace sd::vulkan {

namespace {

bool scalar_type(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::I32;
}

// Shaders index with 32-bit words.
bool fits_32_bits(const Tensor& t) {
  for (int d = 0; d < 4; ++d)
    if (t.ne[d] < 0 || t.ne[d] > INT32_MAX || t.nb[d] > INT32_MAX) return false;
  return t.nelements() <= INT32_MAX;
}

}  // namespace

size_t tensor_extent(const Tensor& t) {
  if (t.nelements() == 0) return 0;
  // A block row's nb[0] steps over blocks, not elements: its extent is the row's bytes.
  const bool blocks = is_quantized(t.type);
  size_t last = 0;
  for (int d = blocks ? 1 : 0; d < 4; ++d) last += static_cast<size_t>(t.ne[d] - 1) * t.nb[d];
  return last + (blocks ? row_size(t.type, t.ne[0]) : type_size(t.type));
}

bool shader_block_type(DType t) {
  return is_quantized(t) && t != DType::Q8_K;
}

bool block_rows(const Tensor& t) {
  return shader_block_type(t.type) && t.rows_contiguous() && t.ne[0] % block_size(t.type) == 0;
}

bool scalar_types_only(const Tensor& node) {
  if (!scalar_type(node.type)) return false;
  for (const Tensor* s : node.src)
    if (s && !scalar_type(s->type)) return false;
  return true;
}

uint32_t groups_for(int64_t count, uint32_t per_group) {
  const int64_t groups = (count + per_group - 1) / per_group;
  return static_cast<uint32_t>(std::clamp<int64_t>(groups, 1, 65535));
}

const VulkanOp* find_op(Op op) {
  for (auto group : {elementwise_op, layout_op, norm_op, linalg_op, attention_op})
    if (const VulkanOp* found = group(op)) return found;
  return nullptr;
}

bool op_supported(const Tensor& node, size_t max_binding) {
  const VulkanOp* op = find_op(node.op);
  if (!op) return false;
  auto usable = [&](const Tensor& t) {
    // A binding starts at most 63 bytes before the tensor (buffer alignment). Block types
    // pass here; each op's supports() decides whether its shader decodes them.
    const bool readable = scalar_type(t.type) || shader_block_type(t.type);
    return readable && fits_32_bits(t) && tensor_extent(t) + 64 <= max_binding;
  };
  if (!usable(node)) return false;
  for (const Tensor* s : node.src)
    if (s && !usable(*s)) return false;
  return op->supports(node);
}

}  // namespace sd::vulkan
