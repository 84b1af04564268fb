#include "backend/segment_plan.h"
#include "backend/byte_units.h"

#include <algorithm>
#include <unordered_map>

#include "tensor/error.h"

namespace sd {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

const Tensor* storage_of(const Tensor* t) {
  while (t->view_src) t = t->view_src;
  return t;
}

size_t round_up(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

SegmentPlan plan_segments(const Graph& graph, const std::vector<Tensor*>& staged,
                          size_t slot_capacity, int slots, size_t alignment) {
  SD_CHECK(slots >= 1, "[plan] a segment plan needs at least one weight slot");
  alignment = std::max<size_t>(alignment, 1);
  const size_t n = graph.nodes.size();

  // Leaves reading the same memory are one weight (a model may ask for a weight twice).
  std::unordered_map<const void*, size_t> by_storage;
  std::unordered_map<const Tensor*, size_t> index;
  std::vector<std::vector<Tensor*>> leaves;  // per weight
  std::vector<size_t> sizes;
  for (Tensor* leaf : staged) {
    const void* storage = leaf->data ? leaf->data : static_cast<const void*>(leaf);
    auto [it, added] = by_storage.emplace(storage, leaves.size());
    if (added) {
      leaves.emplace_back();
      sizes.push_back(0);
    }
    leaves[it->second].push_back(leaf);
    sizes[it->second] = std::max(sizes[it->second], leaf->nbytes());
    index.emplace(leaf, it->second);
  }
  const size_t count = leaves.size();

  // Where each weight is read first and last (through views of it too).
  std::vector<size_t> first(count, kNone), last(count, kNone);
  auto use = [&](const Tensor* t, size_t node) {
    auto it = index.find(storage_of(t));
    if (it == index.end()) return;
    size_t& f = first[it->second];
    if (f == kNone) f = node;
    last[it->second] = node;
  };
  // Views read nothing (they are bound to the slot with their source); the nodes reading
  // through them do.
  for (size_t i = 0; i < n; ++i) {
    const Tensor* node = graph.nodes[i];
    if (is_view_op(node->op)) continue;
    for (const Tensor* s : node->src)
      if (s) use(s, i);
  }

  // A cut before node k is allowed when no weight is read both before and after it.
  std::vector<int> spanning(n + 1, 0);
  for (size_t w = 0; w < count; ++w) {
    if (first[w] == kNone || first[w] == last[w]) continue;
    ++spanning[first[w] + 1];
    --spanning[last[w] + 1];
  }
  for (size_t k = 1; k <= n; ++k) spanning[k] += spanning[k - 1];

  // The weights each node reads first, in node order.
  std::vector<std::vector<size_t>> starts(n);
  for (size_t w = 0; w < count; ++w)
    if (first[w] != kNone) starts[first[w]].push_back(w);

  SegmentPlan plan;
  Segment current;
  auto close = [&](size_t end) {
    current.end = end;
    current.slot = static_cast<int>(plan.segments.size() % static_cast<size_t>(slots));
    plan.segments.push_back(std::move(current));
    current = Segment();
    current.first = end;
  };
  // Walk the graph in uncuttable pieces; a piece joins the open segment while it fits.
  size_t piece_start = 0;
  std::vector<SegmentWeight> piece;
  size_t piece_bytes = 0;
  for (size_t k = 0; k < n; ++k) {
    for (size_t w : starts[k]) {
      for (Tensor* leaf : leaves[w]) piece.push_back({leaf, piece_bytes});
      piece_bytes += round_up(sizes[w], alignment);
    }
    const bool piece_ends = k + 1 == n || spanning[k + 1] == 0;
    if (!piece_ends) continue;
    if (piece_bytes > slot_capacity) {
      const Tensor* w = piece.front().leaf;
      fail(
          "nodes %zu..%zu (from '%s' on) read %.1f MiB of weights that cannot be split, more "
          "than the %.1f MiB one segment may hold",
          piece_start, k + 1, w->name.c_str(), mib(piece_bytes), mib(slot_capacity));
    }
    if (current.bytes + piece_bytes > slot_capacity) close(piece_start);
    for (SegmentWeight& sw : piece) {
      sw.offset += current.bytes;
      current.weights.push_back(sw);
    }
    current.bytes += piece_bytes;
    plan.weight_bytes += piece_bytes;
    piece.clear();
    piece_bytes = 0;
    piece_start = k + 1;
  }
  close(n);

  plan.slot_bytes.assign(static_cast<size_t>(std::min<size_t>(slots, plan.segments.size())), 0);
  for (const Segment& s : plan.segments)
    plan.slot_bytes[static_cast<size_t>(s.slot)] =
        std::max(plan.slot_bytes[static_cast<size_t>(s.slot)], s.bytes);
  return plan;
}

}  // namespace sd
