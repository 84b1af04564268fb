// Device memory handed out in ranges of large blocks, each block one VkDeviceMemory bound
// to one VkBuffer. A model's weights are thousands of tensors, each its own Buffer: as
// separate allocations they would meet drivers' allocation-count limits (4096 on some) and
// each be rounded up to the driver's page (64 KiB and more). Large requests get a block of
// their own; a block whose last range is released goes back to the driver, so memory a
// phase frees is free for the next one.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace sd::vulkan {

class VulkanContext;

struct MemoryBlock {
  VulkanContext* ctx = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;      // where the memory is host-visible
  size_t size = 0;                // bytes of the VkBuffer
  size_t memory_bytes = 0;        // bytes of the VkDeviceMemory (the driver may round up)
  std::map<size_t, size_t> free;  // offset -> bytes of each free range, coalesced
  size_t used = 0;
  ~MemoryBlock();
};

struct MemoryRange {
  std::shared_ptr<MemoryBlock> block;
  size_t offset = 0;
  size_t size = 0;
};

class VulkanMemoryPool {
 public:
  // `mapped`: prefer host-visible device-local memory (copies by memcpy).
  VulkanMemoryPool(VulkanContext& ctx, bool mapped) : ctx_(ctx), mapped_(mapped) {}

  // `size` bytes at a multiple of `alignment` (a power of two). Throws sd::Error naming the
  // size when the device's memory is short.
  MemoryRange allocate(size_t size, size_t alignment);
  void release(const MemoryRange& range);

  // Blocks hold this much; a request above a quarter of it gets a block of its own.
  static constexpr size_t kBlockBytes = size_t{64} << 20;

 private:
  std::shared_ptr<MemoryBlock> new_block(size_t size);

  VulkanContext& ctx_;
  const bool mapped_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<MemoryBlock>> shared_blocks_;  // blocks that take small requests
};

}  // namespace sd::vulkan
