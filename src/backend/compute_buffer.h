// Memory for a graph's intermediates on one buffer type: plans with the graph allocator,
// keeps one buffer and grows it only when a graph needs more, so calls of the same shape
// allocate nothing.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "tensor/graph_allocator.h"

namespace sd {

class ComputeBuffer {
 public:
  explicit ComputeBuffer(BufferType& type, bool reuse = true) : type_(type), reuse_(reuse) {}

  // Gives every tensor of `graph` without memory a place, and binds views.
  void allocate(const Graph& graph);

  size_t capacity() const { return buffer_ ? buffer_->size() : 0; }
  // Gives the buffer back; the next allocate() makes a new one.
  void release() { buffer_.reset(); }
  const AllocationPlan& last_plan() const { return plan_; }

 private:
  BufferType& type_;
  bool reuse_;
  std::unique_ptr<Buffer> buffer_;
  AllocationPlan plan_;
};

}  // namespace sd
