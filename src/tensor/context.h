// Owns the tensors of one graph-building session. Tensors carry shapes and op records
// only; memory is placed later by a GraphAllocator or a weight loader.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>

#include "tensor/tensor.h"

namespace sd {

using Shape = std::array<int64_t, kMaxDims>;

// {64, 64, 320} -> {64, 64, 320, 1}
Shape make_shape(std::initializer_list<int64_t> dims);

class Context {
 public:
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // A leaf (weight or input) of contiguous layout.
  Tensor* new_tensor(DType type, const Shape& ne, std::string name = {});
  Tensor* new_tensor(DType type, std::initializer_list<int64_t> ne, std::string name = {}) {
    return new_tensor(type, make_shape(ne), std::move(name));
  }

  // The result of `op` on `srcs`: a fresh contiguous tensor. Used by op builders.
  Tensor* new_op(Op op, DType type, const Shape& ne, std::initializer_list<Tensor*> srcs);

  // A view of `src`'s memory with its own shape and strides, `offset` bytes in.
  Tensor* new_view(Op op, Tensor* src, DType type, const Shape& ne,
                   const std::array<size_t, kMaxDims>& nb, size_t offset);

  size_t tensor_count() const { return tensors_.size(); }

 private:
  std::deque<Tensor> tensors_;  // deque: pointers stay valid as it grows
};

// Names a tensor for debug dumps and errors; returns it so calls chain.
Tensor* set_name(Tensor* t, std::string name);

}  // namespace sd
