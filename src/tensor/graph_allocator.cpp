#include "tensor/graph_allocator.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <unordered_map>

#include "tensor/error.h"
#include "tensor/ops/conv2d.h"

namespace sd {

namespace {

size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

// First-fit-by-best-size free list over one growing address range, cut into chunks of
// `chunk` bytes that no block crosses (a device's largest allocation).
class FreeList {
 public:
  FreeList(size_t alignment, size_t chunk) : alignment_(alignment), chunk_(chunk) {}

  size_t allocate(size_t size) {
    size = align_up(std::max<size_t>(size, 1), alignment_);
    SD_CHECK(size <= chunk_,
             "[allocator] a tensor of %zu bytes is larger than the device's largest "
             "allocation (%zu bytes)",
             size, chunk_);
    // Best fit: the smallest free block that holds `size` keeps large holes for large tensors.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
    }
    if (best != free_.end()) {
      const size_t offset = best->first;
      const size_t rest = best->second - size;
      free_.erase(best);
      if (rest) free_[offset + size] = rest;
      return offset;
    }
    // A free block at the end can be grown instead of leaving it unused.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == end_ && same_chunk(last->first, size)) {
        const size_t offset = last->first;
        free_.erase(last);
        end_ = offset + size;
        return offset;
      }
    }
    if (!same_chunk(end_, size)) {
      // The rest of this chunk stays free for smaller tensors; this one starts the next.
      const size_t next = (end_ / chunk_ + 1) * chunk_;
      if (next > end_) release_range(end_, next - end_);
      end_ = next;
    }
    const size_t offset = end_;
    end_ += size;
    return offset;
  }

  void release(size_t offset, size_t size) {
    release_range(offset, align_up(std::max<size_t>(size, 1), alignment_));
  }

  size_t high_water() const { return end_; }

 private:
  // Whether [offset, offset + size) lies in one chunk.
  bool same_chunk(size_t offset, size_t size) const {
    return offset / chunk_ == (offset + size - 1) / chunk_;
  }

  void release_range(size_t offset, size_t size) {
    auto [it, inserted] = free_.emplace(offset, size);
    SD_CHECK(inserted, "[allocator] double free at offset %zu", offset);
    // Merge with the following and preceding blocks of the same chunk.
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first && next->first % chunk_ != 0) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first && it->first % chunk_ != 0) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  size_t alignment_;
  size_t chunk_;
  size_t end_ = 0;
  std::map<size_t, size_t> free_;  // offset -> size
};

bool needs_memory(const Tensor* t) {
  return t->data == nullptr && t->view_src == nullptr;
}

// Elementwise ops compute each output element from the same element of their sources, so
// their output may be written over a source of the same shape that no later node reads: a
// bias add, a residual add or an activation then needs no second activation-sized block
// (measured: the SD1.5 UNet's buffer at 512x512 shrank by a third).
bool elementwise(Op op) {
  switch (op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Scale:
    case Op::Clamp:
    case Op::Unary:
      return true;
    default:
      return false;
  }
}

// The source whose memory node `n` can take over, or null: an elementwise node's dense f32
// source of its own shape, owned by the graph (not a view, input, output or weight), whose
// only reader left is `n`.
const Tensor* in_place_source(const Tensor* n,
                              const std::unordered_map<const Tensor*, int>& readers,
                              const std::unordered_map<const Tensor*, size_t>& offset_of) {
  if (!elementwise(n->op) || !needs_memory(n) || n->has_flag(kFlagOutput) || !n->is_contiguous())
    return nullptr;
  for (const Tensor* s : n->src) {
    if (!s || s->view_src || s->op == Op::None || s->has_flag(kFlagOutput)) continue;
    if (s->type != n->type || s->ne != n->ne || !s->is_contiguous()) continue;
    // Read once by n: a source n reads twice (x * x) has two readers left.
    if (readers.at(s) != 1 || !offset_of.count(s)) continue;
    return s;
  }
  return nullptr;
}

}  // namespace

namespace {

AllocationPlan plan_with(const Graph& graph, size_t alignment, bool reuse, bool in_place,
                         size_t max_chunk) {
  AllocationPlan plan;
  plan.chunk = max_chunk / alignment * alignment;
  SD_CHECK(plan.chunk > 0, "[allocator] chunks of %zu bytes cannot hold %zu-byte alignment",
           max_chunk, alignment);
  FreeList list(alignment, plan.chunk);
  std::unordered_map<const Tensor*, size_t> offset_of;

  auto place = [&](Tensor* t) {
    const size_t off = list.allocate(t->nbytes());
    offset_of[t] = off;
    plan.offsets.emplace_back(t, off);
    plan.size_without_reuse += align_up(std::max<size_t>(t->nbytes(), 1), alignment);
  };

  // Readers left per storage: a tensor's memory is free once its last reader has run.
  // A conv of a nearest 2x upscale may read the upscale's source too (conv2d.h).
  auto sources = [](const Tensor* n) {
    std::array<const Tensor*, kMaxSrc + 1> s{};
    std::copy(n->src.begin(), n->src.end(), s.begin());
    s[kMaxSrc] = conv2d_upsampled_source(n);
    return s;
  };
  std::unordered_map<const Tensor*, int> readers;
  for (const Tensor* n : graph.nodes) {
    if (is_view_op(n->op)) continue;
    for (const Tensor* s : sources(n)) {
      if (s) ++readers[s->storage_root()];
    }
  }

  // Leaves (inputs) stay for the whole graph: the caller sets them before compute.
  // Weights are placed by whoever loads them, never here.
  for (Tensor* t : graph.leafs) {
    if (needs_memory(t) && !t->has_flag(kFlagParam)) place(t);
  }
  for (Tensor* n : graph.nodes) {
    if (is_view_op(n->op)) continue;
    const Tensor* donor = reuse && in_place ? in_place_source(n, readers, offset_of) : nullptr;
    if (donor) {
      // The node takes over its dying source's memory: no new block, and the source is
      // not released below.
      const size_t off = offset_of.at(donor);
      offset_of.erase(donor);
      offset_of[n] = off;
      plan.offsets.emplace_back(n, off);
      plan.size_without_reuse += align_up(std::max<size_t>(n->nbytes(), 1), alignment);
    } else if (needs_memory(n)) {
      place(n);
    }
    if (!reuse) continue;
    for (const Tensor* s : sources(n)) {
      if (!s) continue;
      const Tensor* root = s->storage_root();
      if (--readers[root] > 0) continue;
      auto it = offset_of.find(root);
      // Only graph-owned intermediates are freed: never inputs, outputs or weights.
      if (it == offset_of.end() || root->op == Op::None || root->has_flag(kFlagOutput)) continue;
      list.release(it->second, root->nbytes());
      offset_of.erase(it);
    }
  }
  plan.size = list.high_water();
  return plan;
}

}  // namespace

AllocationPlan plan_allocation(const Graph& graph, size_t alignment, bool reuse, InPlace in_place,
                               size_t max_chunk) {
  if (!reuse || in_place == InPlace::Never)
    return plan_with(graph, alignment, reuse, false, max_chunk);
  AllocationPlan written_over = plan_with(graph, alignment, reuse, true, max_chunk);
  if (in_place == InPlace::Always) return written_over;
  // Writing in place keeps a block busy that would otherwise be freed and merged with its
  // neighbours: usually smaller (the UNet), sometimes larger (a VAE's decoder). The
  // smaller of the two plans wins.
  AllocationPlan fresh = plan_with(graph, alignment, reuse, false, max_chunk);
  return written_over.size < fresh.size ? written_over : fresh;
}

void bind_views(const Graph& graph) {
  for (Tensor* n : graph.nodes) {
    if (!n->view_src) continue;
    const Tensor* src = n->view_src;
    SD_CHECK(src->data, "[allocator] view '%s' of '%s' which has no memory", n->name.c_str(),
             src->name.c_str());
    n->buffer = src->buffer;
    n->data = static_cast<char*>(src->data) + n->view_offset;
  }
}

}  // namespace sd
