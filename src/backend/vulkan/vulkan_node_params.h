// What a shader knows of the node it computes: the same record for every op, written by
// the backend into one storage buffer per submission and found by the node's index (a push
// constant). Tensors are described like the engine's (ne, nb in bytes) so a shader reads any
// view or permutation in place; shaders/common.glsl reads this layout.
#pragma once

#include <cstdint>

namespace sd::vulkan {

// Dtype codes the shaders understand: the scalar types (shaders/common.glsl) and the GGUF
// block types, decoded by shaders/dequant.glsl.
enum class ShaderType : uint32_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  I32 = 3,
  Q4_0 = 4,
  Q4_1 = 5,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 9,
  Q3_K = 10,
  Q4_K = 11,
  Q5_K = 12,
  Q6_K = 13,
};

struct TensorWords {
  uint32_t offset;  // bytes from the start of the binding to element (0,0,0,0)
  uint32_t type;    // ShaderType
  uint32_t ne[4];
  uint32_t nb[4];
};

// Slot 0 is the node's output, slots 1..4 its sources.
constexpr int kTensorSlots = 5;
constexpr int kOpParamWords = 16;

struct NodeWords {
  TensorWords tensors[kTensorSlots];
  int32_t params[kOpParamWords];  // the node's op parameters, as the engine stores them
  uint32_t op;                    // Op, for shaders that serve several ops
  uint32_t extra;                 // op-specific: what the backend derives for the shader
};

static_assert(sizeof(NodeWords) == 68 * 4, "shaders/common.glsl reads 68 words per node");

}  // namespace sd::vulkan
