#include "backend/weight_streamer.h"
#include "backend/byte_units.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <thread>

#include "tensor/error.h"
#include "tensor/graph_allocator.h"

namespace sd {

namespace {

bool readable_by(const Tensor& t, const Device& device) {
  return &t.buffer->type().device() == &device ||
         (t.buffer->is_host() && device.caps().host_addressable);
}

}  // namespace

std::vector<Tensor*> WeightStreamer::off_device_weights(const Graph& graph, const Device& device) {
  std::vector<Tensor*> staged;
  for (Tensor* leaf : graph.leafs)
    if (leaf->has_flag(kFlagParam) && leaf->buffer && leaf->nbytes() > 0 &&
        !readable_by(*leaf, device))
      staged.push_back(leaf);
  return staged;
}

void WeightStreamer::bind(const Graph& graph, const std::vector<Tensor*>& staged,
                          size_t compute_bytes) {
  Device& device = backend_.device();
  BufferType& type = device.buffer_type();
  const MemoryBudget& budget = backend_.memory_budget();
  const size_t alignment = type.alignment();
  size_t weight_bytes = 0;
  for (const Tensor* w : staged)
    weight_bytes += (w->nbytes() + alignment - 1) / alignment * alignment;

  // Everything in one slot when it fits (or no budget is set); otherwise segments, in two
  // slots with prefetch.
  size_t capacity = std::numeric_limits<size_t>::max();
  int slots = 1;
  if (budget.bytes > 0) {
    SD_CHECK(compute_bytes < budget.bytes,
             "--max-vram: %s's budget of %.2f GiB cannot hold this graph's compute buffer of "
             "%.0f MiB, before any weight; raise --max-vram, or make the image smaller",
             device.name().c_str(), gib(budget.bytes), mib(compute_bytes));
    capacity = budget.bytes - compute_bytes;
    if (weight_bytes > capacity && budget.prefetch) {
      slots = 2;
      capacity /= 2;
    }
  }
  capacity = std::min(capacity, type.max_size());
  try {
    plan_ = plan_segments(graph, staged, capacity, slots, alignment);
  } catch (const Error& e) {
    fail(
        "--max-vram %.2f GiB on %s is too small for this graph: %s (beside its %.0f MiB "
        "compute buffer%s); raise --max-vram",
        gib(budget.bytes), device.name().c_str(), e.what(), mib(compute_bytes),
        slots == 2 ? ", the budget halved for --stream-layers' two slots" : "");
  }
  compute_bytes_ = compute_bytes;

  // Slots: kept when large enough (the same graph every step), else made anew, the old
  // one freed first so the peak is not both.
  slots_.resize(plan_.slot_bytes.size());
  held_.resize(plan_.slot_bytes.size());
  for (size_t s = 0; s < plan_.slot_bytes.size(); ++s) {
    const size_t need = std::max<size_t>(plan_.slot_bytes[s], 1);
    if (!slots_[s] || slots_[s]->size() < need || slots_[s]->lost()) {
      slots_[s].reset();
      held_[s].clear();
      slots_[s] = type.allocate(need);
    }
  }

  sources_.assign(plan_.segments.size(), {});
  for (size_t j = 0; j < plan_.segments.size(); ++j) {
    const Segment& seg = plan_.segments[j];
    Buffer& slot = *slots_[static_cast<size_t>(seg.slot)];
    for (const SegmentWeight& w : seg.weights) {
      // Leaves of one weight come together, at one offset: it is sent once.
      if (sources_[j].empty() || sources_[j].back().offset != w.offset)
        sources_[j].push_back({*w.leaf, w.offset});
      bind_tensor(*w.leaf, slot, w.offset);
    }
  }
  bind_views(graph);
}

void WeightStreamer::upload(size_t segment) {
  const Segment& seg = plan_.segments[segment];
  const size_t slot = static_cast<size_t>(seg.slot);
  std::vector<std::pair<const void*, size_t>> content;
  for (const Source& s : sources_[segment]) content.emplace_back(s.tensor.data, s.offset);
  if (held_[slot] == content) return;
  held_[slot].clear();  // a failed upload leaves the slot's content unknown
  std::vector<uint8_t> bytes;
  for (const Source& s : sources_[segment]) {
    Tensor dst = s.tensor;  // a weight: the device may fetch it from its cache by content
    bind_tensor(dst, *slots_[slot], s.offset);
    const void* data = s.tensor.data;
    if (!s.tensor.buffer->is_host()) {
      bytes.resize(s.tensor.nbytes());
      tensor_get(s.tensor, bytes.data());
      data = bytes.data();
    }
    tensor_set(dst, data);
    // Sent: the host need not hold the file's pages (a later upload faults them back).
    if (s.tensor.buffer->read_only()) s.tensor.buffer->evict(s.tensor.data, s.tensor.nbytes());
    stats_.bytes_uploaded += s.tensor.nbytes();
  }
  held_[slot] = std::move(content);
}

void WeightStreamer::run(const Graph& graph) {
  const bool prefetch = plan_.slot_bytes.size() > 1;
  const size_t n = plan_.segments.size();
  if (n > 0) upload(0);
  for (size_t j = 0; j < n; ++j) {
    std::exception_ptr prefetch_error;
    std::thread next;
    if (prefetch && j + 1 < n) {
      next = std::thread([&, j] {
        try {
          upload(j + 1);
        } catch (...) {
          prefetch_error = std::current_exception();
        }
      });
    }
    try {
      backend_.compute_nodes(graph, plan_.segments[j].first, plan_.segments[j].end);
      backend_.synchronize();
    } catch (...) {
      if (next.joinable()) next.join();
      throw;
    }
    if (next.joinable()) next.join();
    if (prefetch_error) std::rethrow_exception(prefetch_error);
    if (!prefetch && j + 1 < n) upload(j + 1);
    ++stats_.segments;
  }
  ++stats_.runs;
}

void WeightStreamer::release() {
  slots_.clear();
  held_.clear();
  stats_ = StreamStats();
}

std::string WeightStreamer::describe() const {
  if (stats_.runs == 0) return "";
  const MemoryBudget& budget = backend_.memory_budget();
  std::string slots;
  for (size_t s = 0; s < plan_.slot_bytes.size(); ++s)
    slots += format("%s%.0f", s ? " + " : "", mib(plan_.slot_bytes[s]));
  std::string within =
      budget.bytes ? format(" within %.2f GiB", gib(budget.bytes)) : std::string(" (no budget)");
  return format(
      "%zu segment%s on %s%s: %.0f MiB compute buffer, weight slot%s of %s MiB%s; %.0f MiB of "
      "weights uploaded in %llu run%s",
      plan_.segments.size(), plan_.segments.size() == 1 ? "" : "s",
      backend_.device().name().c_str(), within.c_str(), mib(compute_bytes_),
      plan_.slot_bytes.size() == 1 ? "" : "s", slots.c_str(),
      plan_.slot_bytes.size() > 1 ? " (prefetch)" : "", mib(stats_.bytes_uploaded),
      static_cast<unsigned long long>(stats_.runs), stats_.runs == 1 ? "" : "s");
}

}  // namespace sd
