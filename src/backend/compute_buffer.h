// Memory for a graph's intermediates on one buffer type: plans with the graph allocator,
// keeps its buffer and grows it only when a graph needs more, so calls of the same shape
// allocate nothing. A device that caps its allocations (BufferType::max_size) gets the
// plan in chunks of at most that size, one buffer each.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "tensor/graph_allocator.h"

namespace sd {

class ComputeBuffer {
 public:
  explicit ComputeBuffer(BufferType& type, bool reuse = true) : type_(type), reuse_(reuse) {}

  // Gives every tensor of `graph` without memory a place, and binds views.
  void allocate(const Graph& graph);

  size_t capacity() const;
  // Gives the buffers back; the next allocate() makes new ones.
  void release() { buffers_.clear(); }
  const AllocationPlan& last_plan() const { return plan_; }

 private:
  BufferType& type_;
  bool reuse_;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // one per chunk of the plan
  AllocationPlan plan_;
};

}  // namespace sd
