#include "backend/compute_buffer.h"

namespace sd {

void ComputeBuffer::allocate(const Graph& graph) {
  plan_ = plan_allocation(graph, type_.alignment(), reuse_);
  if (!buffer_ || buffer_->size() < plan_.size || buffer_->lost()) {
    buffer_.reset();  // free the old buffer first: peak memory is the larger, not the sum
    buffer_ = type_.allocate(plan_.size);
  }
  for (auto& [t, offset] : plan_.offsets) bind_tensor(*t, *buffer_, offset);
  bind_views(graph);
}

}  // namespace sd
