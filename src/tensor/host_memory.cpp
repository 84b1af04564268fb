#include "tensor/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace sd {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void* allocate_host(size_t alignment, size_t size) {
  if (size < 4 * kHugePage)
    return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  const size_t padded = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* data = std::aligned_alloc(kHugePage, padded);
  if (data) madvise(data, padded, MADV_HUGEPAGE);  // only advice: failure changes nothing
  return data;
}

}  // namespace sd
