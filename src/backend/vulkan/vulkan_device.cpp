#include "backend/vulkan/vulkan_device.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "backend/byte_units.h"
#include "backend/registry.h"
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_instance.h"
#include "backend/vulkan/vulkan_ops.h"
#include "tensor/error.h"

namespace sd::vulkan {

namespace {

// SD_VULKAN_DEVICES: unset keeps every device, "none" none, "0,2" those indices.
bool device_wanted(int index) {
  const char* env = std::getenv("SD_VULKAN_DEVICES");
  if (!env || !*env) return true;
  if (std::strcmp(env, "none") == 0) return false;
  std::stringstream list(env);
  std::string item;
  while (std::getline(list, item, ','))
    if (!item.empty() && std::atoi(item.c_str()) == index) return true;
  return false;
}

bool has_device_extension(VkPhysicalDevice physical, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
  for (const auto& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// Buffer ids become token base addresses: the device in the top byte, the buffer above
// 64 GiB steps. Distinct, never dereferenced.
void* base_token(int device_index, uint64_t id) {
  return reinterpret_cast<void*>((static_cast<uintptr_t>(device_index + 1) << 56) |
                                 (static_cast<uintptr_t>(id) << 36));
}

// Host copies to and from memory the host cannot map go through a staging buffer this big.
constexpr size_t kStagingChunk = size_t{64} << 20;

}  // namespace

void register_vulkan_devices(DeviceRegistry& registry) {
  const char* env = std::getenv("SD_VULKAN_DEVICES");
  if (env && std::strcmp(env, "none") == 0) return;
  // Held only while the devices are read: the driver unloads again when this returns.
  std::shared_ptr<VulkanInstance> instance = acquire_instance();
  if (!instance) return;
  const std::vector<VkPhysicalDevice> devices = instance->compute_devices();
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    if (device_wanted(index))
      registry.add(std::make_unique<VulkanDevice>(*instance, devices[i], index));
  }
}

// --- buffers ---

std::string VulkanBufferType::name() const {
  return device_.name();
}

size_t VulkanBufferType::alignment() const {
  // Storage-buffer bindings start at multiples of this; 64 keeps every dtype's rows aligned.
  return std::max<size_t>(64, device_.min_binding_alignment());
}

size_t VulkanBufferType::max_size() const {
  return device_.max_allocation();
}

Device& VulkanBufferType::device() const {
  return device_;
}

std::unique_ptr<Buffer> VulkanBufferType::allocate(size_t size) {
  SD_CHECK(size <= max_size(),
           "[%s] cannot allocate %.1f MiB in one buffer: the device's largest allocation is "
           "%.1f MiB",
           device_.name().c_str(), mib(size), mib(max_size()));
  const char* env = std::getenv("SD_VULKAN_STAGING");
  const bool allow_mapping = !(env && std::strcmp(env, "1") == 0);
  return std::make_unique<VulkanBuffer>(*this, device_.pool(allow_mapping), size,
                                        base_token(device_.index(), device_.next_buffer_id()));
}

VulkanBuffer::VulkanBuffer(BufferType& type, VulkanMemoryPool& pool, size_t size, void* base)
    : Buffer(type, size),
      pool_(pool),
      ctx_(static_cast<VulkanDevice&>(type.device()).context()),
      range_(pool.allocate(size, type.alignment())),
      base_(base) {}

VulkanBuffer::~VulkanBuffer() {
  pool_.release(range_);
}

size_t VulkanBuffer::offset_of(const Tensor& t) const {
  return range_.offset +
         static_cast<size_t>(static_cast<const char*>(t.data) - static_cast<const char*>(base_));
}

void VulkanBuffer::copy(size_t offset, void* host, size_t size, bool to_device) const {
  SD_CHECK(offset >= range_.offset && offset + size <= range_.offset + this->size(),
           "[%s] copy of %zu bytes at %zu runs past a buffer of %zu bytes", ctx_.name().c_str(),
           size, offset - range_.offset, this->size());
  if (uint8_t* mapped = range_.block->mapped) {
    if (to_device)
      std::memcpy(mapped + offset, host, size);
    else
      std::memcpy(host, mapped + offset, size);
    return;
  }
  // Staging. Copies move whole words: where the bytes start or end inside a word, the word
  // is read first so the bytes around them are written back unchanged.
  VkDevice device = ctx_.device();
  VkBuffer buffer = range_.block->buffer;
  const size_t chunk = std::min(kStagingChunk, (size + 8 + 3) / 4 * 4);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = chunk;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer staging;
  check_vk(vkCreateBuffer(device, &info, nullptr, &staging), "vkCreateBuffer", ctx_.name());
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, staging, &req);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  try {
    memory = ctx_.allocate_host(req);
  } catch (...) {
    vkDestroyBuffer(device, staging, nullptr);
    throw;
  }
  vkBindBufferMemory(device, staging, memory, 0);
  void* p = nullptr;
  vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &p);
  auto* bytes = static_cast<uint8_t*>(p);
  size_t done = 0;
  try {
    while (done < size) {
      const size_t start = offset + done;
      const size_t word_start = start / 4 * 4;
      const size_t lead = start - word_start;
      const size_t n = std::min(size - done, chunk - 8);
      const size_t word_end = (start + n + 3) / 4 * 4;  // within the block: sizes are words
      const bool whole_words = lead == 0 && (start + n) % 4 == 0;
      if (!to_device || !whole_words) {
        const VkBufferCopy from_device{word_start, 0, word_end - word_start};
        ctx_.run_now(
            [&](VkCommandBuffer cmd) { vkCmdCopyBuffer(cmd, buffer, staging, 1, &from_device); });
      }
      if (to_device) {
        std::memcpy(bytes + lead, static_cast<const uint8_t*>(host) + done, n);
        const VkBufferCopy back{0, word_start, word_end - word_start};
        ctx_.run_now([&](VkCommandBuffer cmd) { vkCmdCopyBuffer(cmd, staging, buffer, 1, &back); });
      } else {
        std::memcpy(static_cast<uint8_t*>(host) + done, bytes + lead, n);
      }
      done += n;
    }
  } catch (...) {
    vkUnmapMemory(device, memory);
    vkDestroyBuffer(device, staging, nullptr);
    vkFreeMemory(device, memory, nullptr);
    throw;
  }
  vkUnmapMemory(device, memory);
  vkDestroyBuffer(device, staging, nullptr);
  vkFreeMemory(device, memory, nullptr);
}

void VulkanBuffer::set(Tensor& t, const void* data, size_t offset, size_t size) {
  copy(offset_of(t) + offset, const_cast<void*>(data), size, true);
}

void VulkanBuffer::get(const Tensor& t, void* data, size_t offset, size_t size) const {
  copy(offset_of(t) + offset, data, size, false);
}

void VulkanBuffer::clear(uint8_t value) {
  if (uint8_t* mapped = range_.block->mapped) {
    std::memset(mapped + range_.offset, value, size());
    return;
  }
  // Ranges start at multiples of 64 and span whole words.
  const uint32_t word = 0x01010101u * value;
  ctx_.run_now([&](VkCommandBuffer cmd) {
    vkCmdFillBuffer(cmd, range_.block->buffer, range_.offset, range_.size, word);
  });
}

// --- the device ---

VulkanDevice::VulkanDevice(VulkanInstance& instance, VkPhysicalDevice physical, int index)
    : index_(index),
      uuid_(device_uuid(physical)),
      name_("Vulkan" + std::to_string(index)),
      buffer_type_(*this) {
  (void)instance;
  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &m3;
  vkGetPhysicalDeviceProperties2(physical, &props);
  const VkPhysicalDeviceProperties& p = props.properties;
  kind_ = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? DeviceKind::Software : DeviceKind::Gpu;
  description_ = p.deviceName;
  if (kind_ == DeviceKind::Software) description_ += " (software, runs on the CPU)";
  max_binding_ = p.limits.maxStorageBufferRange;
  min_binding_alignment_ = p.limits.minStorageBufferOffsetAlignment;
  max_allocation_ = m3.maxMemoryAllocationSize;
  has_memory_budget_ = has_device_extension(physical, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(physical, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      heap_bytes_ = std::max<size_t>(heap_bytes_, mem.memoryHeaps[i].size);
}

VulkanDevice::~VulkanDevice() = default;

template <typename F>
void VulkanDevice::with_physical(F&& f) const {
  std::shared_ptr<VulkanInstance> instance = instance_ ? instance_ : acquire_instance();
  SD_CHECK(instance, "[%s] the Vulkan driver is gone", name_.c_str());
  for (VkPhysicalDevice p : instance->compute_devices()) {
    if (device_uuid(p) == uuid_) {
      f(p);
      return;
    }
  }
  fail("[%s] the device is no longer there", name_.c_str());
}

DeviceMemory VulkanDevice::memory() const {
  DeviceMemory m{heap_bytes_, heap_bytes_};
  if (!has_memory_budget_) return m;
  with_physical([&](VkPhysicalDevice physical) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    props.pNext = &budget;
    vkGetPhysicalDeviceMemoryProperties2(physical, &props);
    for (uint32_t i = 0; i < props.memoryProperties.memoryHeapCount; ++i) {
      const VkMemoryHeap& heap = props.memoryProperties.memoryHeaps[i];
      if (!(heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) || heap.size != heap_bytes_) continue;
      const size_t used = budget.heapUsage[i], limit = budget.heapBudget[i];
      m.free = limit > used ? limit - used : 0;
      break;
    }
  });
  return m;
}

DeviceCaps VulkanDevice::caps() const {
  DeviceCaps c;
  c.host_addressable = false;
  c.async_copy = false;
  c.host_pinned_buffers = false;
  return c;
}

size_t VulkanDevice::peak_memory_used() const {
  std::lock_guard<std::mutex> lock(context_mutex_);
  return context_ ? context_->peak_device_bytes() : 0;
}

VulkanMemoryPool& VulkanDevice::pool(bool mapped) {
  VulkanContext& ctx = context();
  std::lock_guard<std::mutex> lock(context_mutex_);
  std::unique_ptr<VulkanMemoryPool>& p = pools_[mapped ? 1 : 0];
  if (!p) p = std::make_unique<VulkanMemoryPool>(ctx, mapped);
  return *p;
}

VulkanContext& VulkanDevice::context() {
  std::lock_guard<std::mutex> lock(context_mutex_);
  if (context_) return *context_;
  instance_ = acquire_instance();
  with_physical([&](VkPhysicalDevice physical) {
    context_ = std::make_unique<VulkanContext>(physical, name_);
  });
  return *context_;
}

std::unique_ptr<Backend> VulkanDevice::create_backend(const BackendOptions&) {
  return std::make_unique<VulkanBackend>(*this);
}

bool VulkanDevice::supports_op(const Tensor& node) const {
  return op_supported(node, max_binding_);
}

}  // namespace sd::vulkan
