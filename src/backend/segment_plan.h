// Cuts a graph whose weights live off its device into segments whose weights fit a budget
// (--max-vram). The compute buffer is planned for the whole graph as usual, so what one
// segment computes stays where the next reads it and every node boundary could be a cut;
// a cut is only made where no weight is read on both sides, so each weight is staged once
// per run, at one place. Segments take turns in weight slots: one slot, or two with
// prefetch (the next segment uploads into the other slot while one computes).
#pragma once

#include <cstddef>
#include <vector>

#include "tensor/graph.h"

namespace sd {

struct SegmentWeight {
  Tensor* leaf;
  size_t offset;  // in its segment's slot
};

struct Segment {
  size_t first = 0, end = 0;  // nodes [first, end)
  int slot = 0;
  size_t bytes = 0;  // the slot bytes its weights take, alignment included
  std::vector<SegmentWeight> weights;
};

struct SegmentPlan {
  std::vector<Segment> segments;
  std::vector<size_t> slot_bytes;  // the size of each slot: the most any segment in it needs
  size_t weight_bytes = 0;         // the staged weights' bytes, once each
};

// `staged`: the weight leaves of `graph` that must be copied into the device to be read;
// leaves with the same memory are one weight, staged once.
// `slot_capacity`: the most bytes one slot may hold; `slots`: 1, or 2 for prefetch.
// Throws sd::Error when a piece of the graph that cannot be cut needs more than a slot.
SegmentPlan plan_segments(const Graph& graph, const std::vector<Tensor*>& staged,
                          size_t slot_capacity, int slots, size_t alignment);

}  // namespace sd
