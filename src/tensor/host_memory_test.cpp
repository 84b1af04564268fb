#include "tensor/host_memory.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace sd {
namespace {

uintptr_t address(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

// Large arrays start on a 2 MiB boundary (so the kernel can back them with huge pages from
// their first byte); small ones are cache-line aligned.
TEST(HostMemory, LargeArraysAreHugePageAligned) {
  HostVector<float> large(size_t{3} << 20);  // 12 MiB
  EXPECT_EQ(address(large.data()) % (size_t{2} << 20), 0u);
  HostVector<uint16_t> small(100);
  EXPECT_EQ(address(small.data()) % 64, 0u);
}

// Values written survive growth, and a copy is equal (the allocator keeps std::vector's
// meaning apart from the zero fill of new values).
TEST(HostMemory, VectorsKeepTheirValues) {
  HostVector<float> v(5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  v.resize(size_t{4} << 20);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(v[i], static_cast<float>(i));
  v.resize(5);
  const HostVector<float> copy = v;
  EXPECT_EQ(copy, v);
  HostVector<float> filled(3, 2.5f);
  EXPECT_EQ(filled, HostVector<float>({2.5f, 2.5f, 2.5f}));
}

}  // namespace
}  // namespace sd
