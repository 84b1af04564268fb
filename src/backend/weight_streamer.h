// Runs graphs whose weights live off the compute device (in RAM, mapped from the file)
// within the device's memory budget (--max-vram): the weights are copied into device
// memory segment by segment (segment_plan.h) right before their nodes run, into slots
// kept across calls. With prefetch (--stream-layers) the next segment uploads into the
// other slot while the current one computes. Without a budget every weight is staged at
// once into one slot, and a slot already holding a segment's weights is not sent again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/segment_plan.h"

namespace sd {

// What streaming cost, for logs and benchmarks.
struct StreamStats {
  uint64_t runs = 0;            // graphs run
  uint64_t segments = 0;        // segments computed
  uint64_t bytes_uploaded = 0;  // weight bytes copied into the device
};

class WeightStreamer {
 public:
  explicit WeightStreamer(Backend& backend) : backend_(backend) {}

  // The weights of `graph` its device cannot read where they are: they must be staged.
  static std::vector<Tensor*> off_device_weights(const Graph& graph, const Device& device);

  // Plans the segments of `graph` (its compute buffer of `compute_bytes` allocated) and
  // binds `staged` into the slots, views of them included. Throws sd::Error, naming the
  // budget and what does not fit, when no plan fits.
  void bind(const Graph& graph, const std::vector<Tensor*>& staged, size_t compute_bytes);
  // Uploads and computes segment after segment; bind() first.
  void run(const Graph& graph);
  // Frees the slots and starts the counts anew (a phase ended).
  void release();

  const SegmentPlan& plan() const { return plan_; }
  const StreamStats& stats() const { return stats_; }
  // "3 segments within RPC0's 1.00 GiB budget: 171 MiB compute buffer, 2 weight slots of
  // 412 MiB, 1719 MiB uploaded per run", or "" when nothing was streamed.
  std::string describe() const;

 private:
  struct Source {
    Tensor tensor;  // the weight where it lives (host memory, or another device)
    size_t offset;  // in its slot
  };
  void upload(size_t segment);

  Backend& backend_;
  SegmentPlan plan_;
  size_t compute_bytes_ = 0;
  std::vector<std::vector<Source>> sources_;  // per segment
  std::vector<std::unique_ptr<Buffer>> slots_;
  // What each slot holds now, by source address and offset: a slot that holds a segment's
  // weights already is not sent again (one segment, or the same graph run again).
  std::vector<std::vector<std::pair<const void*, size_t>>> held_;
  StreamStats stats_;
};

}  // namespace sd
