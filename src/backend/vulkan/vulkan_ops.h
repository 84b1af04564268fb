// Which shader computes each op and how it is dispatched. Each group of ops (elementwise,
// layout, normalization, linear algebra, ...) lives in its own vulkan_ops_*.cpp and answers
// for the ops it knows; an op no group knows is unsupported, which check_supported() names
// before any work starts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/tensor.h"

namespace sd::vulkan {

// local_size_x of the element-wise, layout and reduction shaders (shaders/*.comp,
// workgroup_reduce.glsl).
constexpr uint32_t kThreads = 256;

struct Dispatch {
  const char* shader = nullptr;
  uint32_t groups[3] = {1, 1, 1};
  uint32_t extra = 0;  // NodeWords::extra: what the shader needs beyond the node's params
};

struct VulkanOp {
  // Whether the shader handles this node's dtypes and shapes. All tensors are already known
  // to fit one storage binding and to be f32, f16, bf16, i32 or a block type of
  // shader_block_type(): only ops whose shaders decode blocks may accept the last.
  bool (*supports)(const Tensor& node);
  Dispatch (*plan)(const Tensor& node);
};

// Each group returns its entry for `op`, or null where the op is not one of its own.
const VulkanOp* elementwise_op(Op op);  // vulkan_ops_elementwise.cpp
const VulkanOp* layout_op(Op op);       // vulkan_ops_layout.cpp
const VulkanOp* norm_op(Op op);         // vulkan_ops_norm.cpp
const VulkanOp* linalg_op(Op op);       // vulkan_ops_linalg.cpp: matmul, conv2d
const VulkanOp* attention_op(Op op);    // vulkan_ops_attention.cpp

// The entry for `op` from whichever group knows it; null when none does.
const VulkanOp* find_op(Op op);

// Whether this device can compute `node`: an op some group knows, dtypes the shaders read,
// and every tensor within one storage binding of `max_binding` bytes.
bool op_supported(const Tensor& node, size_t max_binding);

// Bytes from a tensor's first element to one past its last (for block types: past the
// last row's last block).
size_t tensor_extent(const Tensor& t);

// The block types shaders/dequant.glsl decodes: the GGUF weight types (all but q8_K).
bool shader_block_type(DType t);

// A tensor dequant.glsl can read: a block type it knows, each row whole blocks packed one
// after another (rows and batches may lie anywhere).
bool block_rows(const Tensor& t);

// Whether the node and all its sources are scalar types (f32, f16, bf16, i32): what the
// shaders that read elements with common.glsl's decode() need.
bool scalar_types_only(const Tensor& node);

// Workgroups for a grid-stride loop over `count` items, `per_group` items per group.
uint32_t groups_for(int64_t count, uint32_t per_group);

}  // namespace sd::vulkan
