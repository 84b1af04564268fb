#include "backend/compute_buffer.h"

#include <algorithm>

namespace sd {

void ComputeBuffer::allocate(const Graph& graph) {
  plan_ = plan_allocation(graph, type_.alignment(), reuse_, InPlace::Auto, type_.max_size());
  const size_t chunk = plan_.chunk;
  const size_t chunks = plan_.size == 0 ? 1 : (plan_.size - 1) / chunk + 1;
  auto need = [&](size_t k) {
    return std::max<size_t>(std::min(chunk, plan_.size - k * chunk), 1);
  };
  bool fits = buffers_.size() == chunks;
  for (size_t k = 0; fits && k < chunks; ++k)
    fits = buffers_[k]->size() >= need(k) && !buffers_[k]->lost();
  if (!fits) {
    buffers_.clear();  // free the old buffers first: peak memory is the larger, not the sum
    for (size_t k = 0; k < chunks; ++k) buffers_.push_back(type_.allocate(need(k)));
  }
  for (auto& [t, offset] : plan_.offsets)
    bind_tensor(*t, *buffers_[offset / chunk], offset % chunk);
  bind_views(graph);
}

size_t ComputeBuffer::capacity() const {
  size_t n = 0;
  for (const auto& b : buffers_) n += b->size();
  return n;
}

}  // namespace sd
