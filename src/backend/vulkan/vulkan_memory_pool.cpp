#include "backend/vulkan/vulkan_memory_pool.h"

#include <algorithm>

#include "backend/vulkan/vulkan_context.h"
#include "tensor/error.h"

namespace sd::vulkan {

MemoryBlock::~MemoryBlock() {
  VkDevice device = ctx->device();
  if (mapped) vkUnmapMemory(device, memory);
  vkDestroyBuffer(device, buffer, nullptr);
  if (memory != VK_NULL_HANDLE) ctx->free_device_memory(memory, memory_bytes);
}

std::shared_ptr<MemoryBlock> VulkanMemoryPool::new_block(size_t size) {
  auto block = std::make_shared<MemoryBlock>();
  block->ctx = &ctx_;
  block->size = std::max<size_t>(4, (size + 3) / 4 * 4);  // fills write whole words
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = block->size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  check_vk(vkCreateBuffer(ctx_.device(), &info, nullptr, &buffer), "vkCreateBuffer", ctx_.name());
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx_.device(), buffer, &req);
  bool host_visible = false;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  try {
    memory = ctx_.allocate(req, mapped_, host_visible);
  } catch (...) {
    vkDestroyBuffer(ctx_.device(), buffer, nullptr);
    throw;
  }
  // From here the block owns both and frees them however this ends.
  block->buffer = buffer;
  block->memory = memory;
  block->memory_bytes = req.size;
  check_vk(vkBindBufferMemory(ctx_.device(), buffer, memory, 0), "vkBindBufferMemory", ctx_.name());
  if (host_visible) {
    void* p = nullptr;
    check_vk(vkMapMemory(ctx_.device(), memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory",
             ctx_.name());
    block->mapped = static_cast<uint8_t*>(p);
  }
  block->free[0] = block->size;
  return block;
}

MemoryRange VulkanMemoryPool::allocate(size_t size, size_t alignment) {
  const size_t need = std::max<size_t>(alignment, (size + alignment - 1) / alignment * alignment);
  std::lock_guard<std::mutex> lock(mutex_);
  if (need > kBlockBytes / 4) {
    MemoryRange r{new_block(need), 0, need};
    r.block->free.clear();
    r.block->used = need;
    return r;
  }
  // First fit over the shared blocks; a new block when none has room.
  shared_blocks_.erase(std::remove_if(shared_blocks_.begin(), shared_blocks_.end(),
                                      [](const auto& b) { return b.expired(); }),
                       shared_blocks_.end());
  for (const auto& weak : shared_blocks_) {
    std::shared_ptr<MemoryBlock> block = weak.lock();
    for (auto it = block->free.begin(); it != block->free.end(); ++it) {
      const size_t start = (it->first + alignment - 1) / alignment * alignment;
      const size_t end = it->first + it->second;
      if (start + need > end) continue;
      const size_t before = start - it->first, after = end - start - need;
      const size_t free_start = it->first;
      block->free.erase(it);
      if (before) block->free[free_start] = before;
      if (after) block->free[start + need] = after;
      block->used += need;
      return {block, start, need};
    }
  }
  std::shared_ptr<MemoryBlock> block = new_block(kBlockBytes);
  shared_blocks_.push_back(block);
  block->free.clear();
  if (kBlockBytes > need) block->free[need] = kBlockBytes - need;
  block->used = need;
  return {block, 0, need};
}

void VulkanMemoryPool::release(const MemoryRange& range) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryBlock& block = *range.block;
  block.used -= range.size;
  // Back into the free list, joined with its neighbours.
  size_t start = range.offset, size = range.size;
  auto next = block.free.lower_bound(start);
  if (next != block.free.end() && next->first == start + size) {
    size += next->second;
    next = block.free.erase(next);
  }
  if (next != block.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      block.free.erase(prev);
    }
  }
  block.free[start] = size;
  // The block itself is freed when its last range (holding it) is gone.
}

}  // namespace sd::vulkan
