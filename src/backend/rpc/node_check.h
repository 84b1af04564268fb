// Server-side validation of graph tensors received from a client. A computed node is
// accepted only if it is exactly what the op's own builder makes from its sources and
// parameters, so kernels never see a shape, stride, dtype or parameter the engine itself
// could not have produced; views must also lie inside the memory they alias.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/tensor.h"

namespace sd::rpc {

// Largest tensor a client may describe, in bytes spanned and in elements: far above any
// model's activations, far below where size arithmetic overflows.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 40;

// Bytes from a tensor's first byte to one past its last element, for any strides
// (Tensor::nbytes() assumes nb[0] is the element size). Throws sd::Error unless the dtype
// is valid, every dim is in [1, kMaxTensorBytes], ne[0] holds whole blocks, block types
// have contiguous blocks, and both the element count and the span stay within
// kMaxTensorBytes.
size_t byte_span(const Tensor& t);

// Throws sd::Error (naming the node, its op and what is wrong) unless `node` is exactly what
// the op's builder in tensor/ops makes from node.src[] and node.params: same op, dtype, ne,
// nb (contiguous for computed ops), params, sources, view_src and view_offset; a view must
// also lie inside its view_src's bytes. A leaf (Op::None) needs a valid dtype, a sane
// layout (see byte_span) with nb[0] the element size and every stride at least that, no
// sources, no view_src and zero params. Sources must already have been checked.
void check_node(const Tensor& node);

}  // namespace sd::rpc
