// Places every intermediate of a graph into one compute buffer, reusing the memory of
// tensors whose last reader has run (liveness). Planning is pure arithmetic on offsets;
// a backend then allocates one buffer of `size` bytes and binds the tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/graph.h"

namespace sd {

struct AllocationPlan {
  // Tensors that need memory (no data yet, not views), with their offsets.
  std::vector<std::pair<Tensor*, size_t>> offsets;
  size_t size = 0;                // bytes of the compute buffer with this plan
  size_t size_without_reuse = 0;  // what one buffer per tensor would have taken
  // Offsets are in chunks of this many bytes that no tensor crosses: chunk k is one buffer
  // holding offsets [k * chunk, (k + 1) * chunk). One chunk unless the device caps its
  // allocations (BufferType::max_size).
  size_t chunk = SIZE_MAX;
};

// Whether an elementwise node may write over a same-shaped source that no later node reads:
// Auto plans both ways and keeps the smaller buffer; the others are for tests.
enum class InPlace { Auto, Never, Always };

// With reuse=false every tensor gets its own range; results must be identical (tests).
AllocationPlan plan_allocation(const Graph& graph, size_t alignment, bool reuse = true,
                               InPlace in_place = InPlace::Auto, size_t max_chunk = SIZE_MAX);

// Points every view of `graph` at its source's memory (after its source has memory).
void bind_views(const Graph& graph);

}  // namespace sd
