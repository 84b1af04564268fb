#include "backend/cpu/dnnl_state.h"

#include "backend/backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tensor/error.h"

namespace sd {

namespace {

// A hash of `pieces` (>= 2: the first and the last included) evenly spaced 64-byte pieces
// of the tensor's bytes (all of them when small), taken 8 bytes at a time: about a
// microsecond per call for 64 pieces, and a rewritten weight changes the sampled bytes.
uint64_t fingerprint(const Tensor* t, size_t pieces) {
  const auto* p = static_cast<const unsigned char*>(t->data);
  const size_t n = t->nbytes();
  constexpr size_t kPiece = 64;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const unsigned char* q, size_t len) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t w;
      std::memcpy(&w, q + i, 8);
      h = (h ^ w) * 1099511628211ull;
      h ^= h >> 29;
    }
    for (; i < len; ++i) h = (h ^ q[i]) * 1099511628211ull;
  };
  if (n <= kPiece * pieces) {
    mix(p, n);
  } else {
    const size_t step = (n - kPiece) / (pieces - 1);
    for (size_t i = 0; i < pieces; ++i) mix(p + i * step, kPiece);
  }
  return h;
}

// ISA values are bit sets, each including the ones below it (AMX includes AVX512_BF16).
bool isa_has_bf16(dnnl::cpu_isa isa) {
  const auto bits = static_cast<unsigned>(isa),
             bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (bits & bf16) == bf16;
}

// 64-byte aligned memory for a packed weight copy. Large ones start on a 2 MiB boundary and
// ask for transparent huge pages over their whole 2 MiB pages (not the tail, which would
// waste up to a page each): packing writes fresh memory, whose first touch on a virtual
// machine costs far more than the copy itself (about 40% less with huge pages).
std::shared_ptr<void> packed_block(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t size = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (size < 2 * kHugePage) return {std::aligned_alloc(64, size), std::free};
  const size_t padded = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* data = std::aligned_alloc(kHugePage, padded);
  if (data) madvise(data, size / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
  return {data, std::free};
}

// Padding a packed layout may add (blocks rounded up to 16 or 64) and still count as the
// weight's own size.
constexpr size_t kReplaceSlack = size_t{64} << 10;

DType dtype_of(dnnl::memory::data_type t) {
  switch (t) {
    case dnnl::memory::data_type::f32:
      return DType::F32;
    case dnnl::memory::data_type::bf16:
      return DType::BF16;
    case dnnl::memory::data_type::f16:
      return DType::F16;
    default:
      return DType::I32;  // no weight dtype: never cached
  }
}

}  // namespace

DnnlState::DnnlState() : native_bf16(isa_has_bf16(dnnl::get_effective_cpu_isa())) {}

DnnlState::~DnnlState() {
  for (Block& b : scratch_) std::free(b.data);
}

void* DnnlState::scratch(DnnlScratch slot, size_t bytes) {
  Block& b = scratch_[static_cast<int>(slot)];
  if (bytes > b.size) {
    std::free(b.data);
    b.size = 0;
    // Rounded up to whole 64-byte lines, as aligned_alloc requires.
    const size_t size = (bytes + 63) / 64 * 64;
    b.data = std::aligned_alloc(64, size);
    SD_CHECK(b.data, "[CPU] cannot allocate %zu bytes of scratch memory for oneDNN", size);
    b.size = size;
  }
  return b.data;
}

dnnl::memory DnnlState::scratch_memory(DnnlScratch slot, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, engine, scratch(slot, desc.get_size()));
}

const DnnlPrimitive& DnnlState::primitive(const DnnlKey& key,
                                          const std::function<DnnlPrimitive()>& make) {
  auto it = primitives_.find(key.str());
  if (it == primitives_.end()) it = primitives_.emplace(key.str(), make()).first;
  return it->second;
}

void DnnlState::reorder(const DnnlKey& key, const dnnl::memory::desc& from, const void* from_data,
                        const dnnl::memory& to) {
  const DnnlPrimitive& r = primitive(key, [&] {
    DnnlPrimitive p;
    p.prim = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to.get_desc()));
    return p;
  });
  execute(r.prim, {{DNNL_ARG_FROM, dnnl::memory(from, engine, const_cast<void*>(from_data))},
                   {DNNL_ARG_TO, to}});
}

bool DnnlState::cacheable(const Tensor* t) {
  return t->op == Op::None && (t->has_flag(kFlagParam) || !t->has_flag(kFlagInput));
}

dnnl::memory DnnlState::cached_weights(const Tensor* t, const dnnl::memory::desc& layout,
                                       const std::function<void(const dnnl::memory&)>& pack,
                                       bool keep_other_layout, size_t limit) {
  if (!cacheable(t)) return {};
  const WeightKey key{t->data, t->type, t->ne, t->nb};
  // Bytes that cannot change (a read-only file mapping, whose pages were dropped once
  // packed) are checked at their first and last pieces only: enough to tell another weight
  // mapped at the same address, without faulting 64 pages of every weight back into RAM
  // every step.
  const bool read_only = t->buffer && t->buffer->read_only();
  const uint64_t fp = fingerprint(t, read_only ? 2 : 64);
  auto it = weights_.find(key);
  if (it != weights_.end()) {
    PackedWeights& w = it->second;
    if (w.layout == layout) {
      if (w.fingerprint != fp) {
        pack(w.memory);
        w.fingerprint = fp;
      }
      return w.memory;
    }
    if (keep_other_layout) return {};
    // Another consumer wants another layout: the newest wins.
    weight_bytes_ -= w.layout.get_size();
    if (w.extra) extra_bytes_ -= w.layout.get_size();
    weights_.erase(it);
  }
  if (dtype_of(layout.data_type()) != t->type) return {};
  const bool replaces = replaces_pages(t, layout.get_size());
  if (!replaces && extra_bytes_ + layout.get_size() > std::min(weight_cache_limit, limit))
    return {};
  std::shared_ptr<void> storage = packed_block(layout.get_size());
  SD_CHECK(storage, "[CPU] cannot allocate %zu bytes for a packed weight copy", layout.get_size());
  dnnl::memory memory(layout, engine, storage.get());
  PackedWeights w{layout, std::move(storage), std::move(memory), fp, !replaces};
  pack(w.memory);
  weight_bytes_ += layout.get_size();
  if (!replaces) extra_bytes_ += layout.get_size();
  // The packed copy serves every later call: the source need not stay in RAM as well.
  if (t->buffer) t->buffer->evict(t->data, t->nbytes());
  return weights_.emplace(key, std::move(w)).first->second.memory;
}

bool DnnlState::replaces_pages(const Tensor* t, size_t bytes) {
  // A copy no larger than a read-only mapped weight takes the place of its pages.
  return t->buffer && t->buffer->read_only() && bytes <= t->nbytes() + kReplaceSlack;
}

bool DnnlState::would_cache(const Tensor* t, size_t bytes) const {
  if (!cacheable(t)) return false;
  if (weights_.count(WeightKey{t->data, t->type, t->ne, t->nb})) return true;
  return replaces_pages(t, bytes) || extra_bytes_ + bytes <= weight_cache_limit;
}

bool DnnlState::seen_before(const Tensor* t) {
  return !seen_.insert(WeightKey{t->data, t->type, t->ne, t->nb}).second;
}

void DnnlState::forget_weights() {
  weights_.clear();
  seen_.clear();
  weight_bytes_ = 0;
  extra_bytes_ = 0;
}

void DnnlState::release_scratch() {
  for (Block& b : scratch_) {
    std::free(b.data);
    b = Block{};
  }
}

void DnnlState::execute(const dnnl::primitive& p,
                        const std::unordered_map<int, dnnl::memory>& args) {
  p.execute(stream, args);
  stream.wait();
}

}  // namespace sd
