#include "backend/vulkan/vulkan_context.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "backend/byte_units.h"
#include "backend/vulkan/vulkan_shaders.h"
#include "tensor/cache_folder.h"
#include "tensor/error.h"

namespace sd::vulkan {

void check_vk(VkResult result, const char* call, const std::string& device) {
  if (result == VK_SUCCESS) return;
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY)
    fail(
        "[%s] %s: out of %s memory; place some modules elsewhere with --backend, or keep "
        "weights off the device with --params-backend",
        device.c_str(), call, result == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "device" : "host");
  if (result == VK_ERROR_DEVICE_LOST)
    fail("[%s] %s: the device was lost (driver reset or crash); restart the program",
         device.c_str(), call);
  fail("[%s] %s failed (VkResult %d)", device.c_str(), call, static_cast<int>(result));
}

VulkanContext::VulkanContext(VkPhysicalDevice physical, const std::string& name)
    : physical_(physical), name_(name) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  limits_ = props.limits;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family_props(families);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &families, family_props.data());
  bool found = false;
  for (uint32_t i = 0; i < families && !found; ++i) {
    if (family_props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = i;
      found = true;
    }
  }
  SD_CHECK(found, "[%s] has no compute queue", name_.c_str());

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  check_vk(vkCreateDevice(physical_, &device_info, nullptr, &device_), "vkCreateDevice", name_);
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = queue_family_;
  check_vk(vkCreateCommandPool(device_, &pool_info, nullptr, &command_pool_), "vkCreateCommandPool",
           name_);
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check_vk(vkCreateFence(device_, &fence_info, nullptr, &fence_), "vkCreateFence", name_);

  VkDescriptorSetLayoutBinding bindings[kBindings];
  for (uint32_t i = 0; i < kBindings; ++i) {
    bindings[i] = {};
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = kBindings;
  set_info.pBindings = bindings;
  check_vk(vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &set_layout_),
           "vkCreateDescriptorSetLayout", name_);
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(uint32_t)};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  check_vk(vkCreatePipelineLayout(device_, &layout_info, nullptr, &pipeline_layout_),
           "vkCreatePipelineLayout", name_);

  // The driver checks the saved data's header (its own UUID) and ignores what is not its own.
  static const char* hex = "0123456789abcdef";
  std::string uuid;
  for (uint8_t b : props.pipelineCacheUUID) uuid += {hex[b >> 4], hex[b & 15]};
  pipeline_cache_path_ = cache_folder_path("vulkan/" + uuid + ".bin");
  std::vector<char> saved;
  if (!pipeline_cache_path_.empty()) {
    std::ifstream in(pipeline_cache_path_, std::ios::binary);
    saved.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  cache_info.initialDataSize = saved.size();
  cache_info.pInitialData = saved.empty() ? nullptr : saved.data();
  if (vkCreatePipelineCache(device_, &cache_info, nullptr, &pipeline_cache_) != VK_SUCCESS) {
    cache_info.initialDataSize = 0;
    cache_info.pInitialData = nullptr;
    check_vk(vkCreatePipelineCache(device_, &cache_info, nullptr, &pipeline_cache_),
             "vkCreatePipelineCache", name_);
  }
}

void VulkanContext::save_pipeline_cache() const {
  if (pipeline_cache_path_.empty()) return;
  size_t size = 0;
  // Some drivers (lavapipe) keep nothing: then there is nothing to write.
  if (vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) != VK_SUCCESS || size == 0)
    return;
  std::vector<char> data(size);
  if (vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) != VK_SUCCESS) return;
  // Written beside and renamed over the old file: a reader never sees half of one. A cache
  // that cannot be written only costs the next run its compile time.
  std::error_code ec;
  const std::filesystem::path path(pipeline_cache_path_);
  std::filesystem::create_directories(path.parent_path(), ec);
  const std::string tmp = pipeline_cache_path_ + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(size));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

VulkanContext::~VulkanContext() {
  if (!device_) return;
  vkDeviceWaitIdle(device_);
  for (auto& [name, pipeline] : pipelines_) vkDestroyPipeline(device_, pipeline, nullptr);
  vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
  vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
  vkDestroyFence(device_, fence_, nullptr);
  vkDestroyCommandPool(device_, command_pool_, nullptr);
  vkDestroyDevice(device_, nullptr);
}

uint32_t VulkanContext::memory_type(uint32_t allowed, VkMemoryPropertyFlags required,
                                    VkMemoryPropertyFlags preferred) const {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[i].propertyFlags;
    if (!(allowed & (1u << i)) || (flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

VkDeviceMemory VulkanContext::allocate(const VkMemoryRequirements& req, bool prefer_mapped,
                                       bool& host_visible) {
  const VkMemoryPropertyFlags mapped =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                              prefer_mapped ? mapped : 0);
  if (type == UINT32_MAX) type = memory_type(req.memoryTypeBits, 0, 0);
  SD_CHECK(type != UINT32_MAX, "[%s] has no memory type for a buffer", name_.c_str());
  host_visible = prefer_mapped && (memory_.memoryTypes[type].propertyFlags & mapped) == mapped;
  VkMemoryAllocateInfo info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  info.allocationSize = req.size;
  info.memoryTypeIndex = type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const VkResult r = vkAllocateMemory(device_, &info, nullptr, &memory);
  SD_CHECK(r == VK_SUCCESS,
           "[%s] cannot allocate %.1f MiB of device memory (VkResult %d); place some modules "
           "elsewhere with --backend, or keep weights off the device with --params-backend",
           name_.c_str(), mib(req.size), static_cast<int>(r));
  const size_t now = device_bytes_ += req.size;
  size_t peak = peak_device_bytes_.load();
  while (now > peak && !peak_device_bytes_.compare_exchange_weak(peak, now)) {
  }
  return memory;
}

void VulkanContext::free_device_memory(VkDeviceMemory memory, size_t bytes) {
  vkFreeMemory(device_, memory, nullptr);
  device_bytes_ -= bytes;
}

VkDeviceMemory VulkanContext::allocate_host(const VkMemoryRequirements& req) {
  const uint32_t type =
      memory_type(req.memoryTypeBits,
                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
  SD_CHECK(type != UINT32_MAX, "[%s] has no host-visible memory", name_.c_str());
  VkMemoryAllocateInfo info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  info.allocationSize = req.size;
  info.memoryTypeIndex = type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const VkResult r = vkAllocateMemory(device_, &info, nullptr, &memory);
  SD_CHECK(r == VK_SUCCESS, "[%s] cannot allocate %.1f MiB of host-visible memory (VkResult %d)",
           name_.c_str(), mib(req.size), static_cast<int>(r));
  return memory;
}

VkPipeline VulkanContext::pipeline(const std::string& shader) {
  std::lock_guard<std::mutex> lock(pipelines_mutex_);
  if (auto it = pipelines_.find(shader); it != pipelines_.end()) return it->second;
  const ShaderBlob* blob = nullptr;
  for (const ShaderBlob& b : shader_blobs())
    if (b.name == shader) blob = &b;
  SD_CHECK(blob, "[%s] no shader named '%s' is built in", name_.c_str(), shader.c_str());
  std::vector<uint32_t> code(blob->size / 4);
  std::copy(blob->spirv, blob->spirv + blob->size, reinterpret_cast<unsigned char*>(code.data()));
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = blob->size;
  module_info.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check_vk(vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule",
           name_);
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.layout = pipeline_layout_;
  VkPipeline pipeline = VK_NULL_HANDLE;
  const VkResult r =
      vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline);
  vkDestroyShaderModule(device_, module, nullptr);
  check_vk(r, ("vkCreateComputePipelines(" + shader + ")").c_str(), name_);
  pipelines_[shader] = pipeline;
  return pipeline;
}

VkCommandBuffer VulkanContext::begin_one_off() {
  VkCommandBufferAllocateInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  info.commandPool = command_pool_;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  check_vk(vkAllocateCommandBuffers(device_, &info, &cmd), "vkAllocateCommandBuffers", name_);
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer", name_);
  return cmd;
}

void VulkanContext::end_one_off(VkCommandBuffer cmd) {
  check_vk(vkEndCommandBuffer(cmd), "vkEndCommandBuffer", name_);
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  check_vk(vkResetFences(device_, 1, &fence_), "vkResetFences", name_);
  const VkResult r = vkQueueSubmit(queue_, 1, &submit, fence_);
  if (r == VK_SUCCESS)
    check_vk(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences", name_);
  vkFreeCommandBuffers(device_, command_pool_, 1, &cmd);
  check_vk(r, "vkQueueSubmit", name_);
}

void VulkanContext::submit(VkCommandBuffer cmd, VkFence fence) {
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  check_vk(vkQueueSubmit(queue_, 1, &submit, fence), "vkQueueSubmit", name_);
}

}  // namespace sd::vulkan
