// Host memory for large arrays that are written soon after they are made: compute buffers
// and the frames a clip's decoder hands from graph to graph (hundreds of MB each at
// 832x480). Allocations of 8 MiB and more are 2 MiB aligned and ask for transparent huge
// pages, so their first touch faults once per 2 MiB instead of once per 4 KiB: on a virtual
// machine 3.9 s against 2.3 s per GiB, a tenth of a Wan clip's decoding.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace sd {

// Memory of `size` bytes aligned to `alignment` (a power of two), released with std::free;
// null when there is none.
void* allocate_host(size_t alignment, size_t size);

// std::vector's allocator through allocate_host(). Values a vector grows by are left unset
// (no zero fill, which would touch every page before the graph that fills them does): each
// array is written whole before it is read.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) {
    void* p = allocate_host(alignof(T) < 64 ? 64 : alignof(T), n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialized: no zero fill
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

// A large array of values in huge-page-advised memory.
template <typename T>
using HostVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace sd
