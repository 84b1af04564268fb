// Vulkan devices: every physical device with a compute queue is Vulkan0, Vulkan1, ... in the
// loader's order. Buffers live in device-local memory; host copies go through a mapping
// where that memory is host-visible and through a staging buffer where not. A software
// device (Mesa's lavapipe: Vulkan on the CPU) is listed as such and never picked by `auto`
// or `gpu`; it is how the Vulkan path is tested without a GPU.
#pragma once

#include <vulkan/vulkan.h>

#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "backend/vulkan/vulkan_instance.h"
#include "backend/vulkan/vulkan_memory_pool.h"

namespace sd {
class DeviceRegistry;
}

namespace sd::vulkan {

class VulkanContext;
class VulkanDevice;

class VulkanBufferType final : public BufferType {
 public:
  explicit VulkanBufferType(VulkanDevice& device) : device_(device) {}
  std::string name() const override;
  size_t alignment() const override;
  size_t max_size() const override;
  bool is_host() const override { return false; }
  Device& device() const override;
  std::unique_ptr<Buffer> allocate(size_t size) override;

 private:
  VulkanDevice& device_;
};

class VulkanBuffer final : public Buffer {
 public:
  VulkanBuffer(BufferType& type, VulkanMemoryPool& pool, size_t size, void* base);
  ~VulkanBuffer() override;

  void* base() override { return base_; }
  bool is_host() const override { return false; }
  void set(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override;
  void clear(uint8_t value) override;

  // The VkBuffer this buffer is a range of, and that VkBuffer's size.
  VkBuffer handle() const { return range_.block->buffer; }
  size_t handle_size() const { return range_.block->size; }
  // Bytes from the start of the VkBuffer to the first byte of `t`.
  size_t offset_of(const Tensor& t) const;
  bool mapped() const { return range_.block->mapped != nullptr; }

 private:
  // Copies [offset, offset + size) of the VkBuffer from or to host memory.
  void copy(size_t offset, void* host, size_t size, bool to_device) const;

  VulkanMemoryPool& pool_;
  VulkanContext& ctx_;
  MemoryRange range_;
  void* base_;  // a token address, never dereferenced
};

class VulkanDevice final : public Device {
 public:
  // `physical` is valid only while `instance` is held: what the device needs later is
  // read now, and the device is found again by its UUID when it is first used.
  VulkanDevice(VulkanInstance& instance, VkPhysicalDevice physical, int index);
  ~VulkanDevice() override;

  std::string name() const override { return name_; }
  std::string description() const override { return description_; }
  DeviceKind kind() const override { return kind_; }
  DeviceMemory memory() const override;
  DeviceCaps caps() const override;
  BufferType& buffer_type() override { return buffer_type_; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  bool supports_op(const Tensor& node) const override;
  size_t peak_memory_used() const override;

  int index() const { return index_; }
  size_t min_binding_alignment() const { return min_binding_alignment_; }
  size_t max_allocation() const { return max_allocation_; }
  // The opened device, made on first use.
  VulkanContext& context();
  // Where buffers come from: host-visible device memory where `mapped` and the device has it.
  VulkanMemoryPool& pool(bool mapped);
  uint64_t next_buffer_id() { return ++buffers_made_; }

 private:
  // Calls f(physical device) with an instance held for the call.
  template <typename F>
  void with_physical(F&& f) const;

  int index_;
  DeviceUuid uuid_;
  std::string name_;
  std::string description_;
  DeviceKind kind_;
  size_t heap_bytes_ = 0;
  size_t max_binding_ = 0;
  size_t min_binding_alignment_ = 0;
  size_t max_allocation_ = 0;
  bool has_memory_budget_ = false;
  VulkanBufferType buffer_type_;
  std::shared_ptr<VulkanInstance> instance_;  // held from the first use on
  std::unique_ptr<VulkanContext> context_;
  std::unique_ptr<VulkanMemoryPool> pools_[2];  // [mapped]
  mutable std::mutex context_mutex_;
  uint64_t buffers_made_ = 0;
};

// Adds every Vulkan device this machine has to `registry`. Quietly adds none where there is
// no Vulkan loader or driver, or where SD_VULKAN_DEVICES is "none"; a comma-separated list
// of indices (SD_VULKAN_DEVICES=0,2) keeps only those devices.
void register_vulkan_devices(DeviceRegistry& registry);

}  // namespace sd::vulkan
