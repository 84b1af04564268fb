// One Vulkan physical device opened for compute: the logical device, its compute queue, the
// memory types buffers come from, and the pipelines built from the embedded shaders. Made
// when a device is first used (listing devices opens none), shared by its buffers and
// backends, and closed when the process ends.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace sd::vulkan {

// Storage buffers every shader declares (shaders/common.glsl): the node records, then the
// output and up to four sources.
constexpr uint32_t kBindings = 6;

class VulkanContext {
 public:
  VulkanContext(VkPhysicalDevice physical, const std::string& name);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }
  const std::string& name() const { return name_; }

  // Memory for a buffer: device-local, host-visible too where the device has such memory
  // (integrated GPUs, software devices, resizable BAR) so copies need no staging.
  // `host_visible` says what was found. Throws sd::Error naming the size when memory is short.
  VkDeviceMemory allocate(const VkMemoryRequirements& req, bool prefer_mapped, bool& host_visible);
  // Host-visible, coherent memory for staging and parameters.
  VkDeviceMemory allocate_host(const VkMemoryRequirements& req);
  // Frees what allocate() gave, `bytes` being its requirement's size.
  void free_device_memory(VkDeviceMemory memory, size_t bytes);
  // The bytes allocate() has handed out and not yet seen freed, and the most at once.
  size_t device_bytes() const { return device_bytes_.load(); }
  size_t peak_device_bytes() const { return peak_device_bytes_.load(); }

  // The pipeline of a named shader, built on first use.
  VkPipeline pipeline(const std::string& shader);
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

  // Runs `record` in a one-off command buffer on the queue and waits for it.
  template <typename F>
  void run_now(F&& record);
  // Submits a recorded command buffer; `fence` is signalled when it has run.
  void submit(VkCommandBuffer cmd, VkFence fence);
  VkCommandPool command_pool() const { return command_pool_; }
  std::mutex& queue_mutex() { return queue_mutex_; }

 private:
  VkCommandBuffer begin_one_off();
  void end_one_off(VkCommandBuffer cmd);
  uint32_t memory_type(uint32_t allowed, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred) const;

  VkPhysicalDevice physical_;
  std::string name_;
  VkPhysicalDeviceLimits limits_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  void save_pipeline_cache() const;

  // Compiled pipelines kept across runs (a software device spends most of a small run
  // compiling them): the user cache folder's vulkan/<driver's cache UUID>.bin.
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string pipeline_cache_path_;
  std::map<std::string, VkPipeline> pipelines_;
  std::mutex pipelines_mutex_;
  std::mutex queue_mutex_;
  std::atomic<size_t> device_bytes_{0};
  std::atomic<size_t> peak_device_bytes_{0};
};

template <typename F>
void VulkanContext::run_now(F&& record) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  VkCommandBuffer cmd = begin_one_off();
  record(cmd);
  end_one_off(cmd);
}

// Throws sd::Error naming the call and the device when a Vulkan call fails.
void check_vk(VkResult result, const char* call, const std::string& device);

}  // namespace sd::vulkan
