// The process's Vulkan instance: made when first needed (the device registry asks only when
// a Vulkan device is named or every device is listed) and destroyed when its last holder
// lets go; devices in use hold it for good.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace sd::vulkan {

class VulkanInstance {
 public:
  VulkanInstance(VkInstance instance, VkDebugUtilsMessengerEXT messenger);
  ~VulkanInstance();
  VulkanInstance(const VulkanInstance&) = delete;
  VulkanInstance& operator=(const VulkanInstance&) = delete;
  VkInstance handle() const { return instance_; }

  // Physical devices with a compute queue, in the loader's order: Vulkan0, Vulkan1, ...
  std::vector<VkPhysicalDevice> compute_devices() const;

 private:
  VkInstance instance_;
  VkDebugUtilsMessengerEXT messenger_;
};

// The live instance, or a new one; null where there is no Vulkan loader or driver.
// SD_VULKAN_VALIDATION=1 turns the Khronos validation layer on where it is installed.
std::shared_ptr<VulkanInstance> acquire_instance();

using DeviceUuid = std::array<uint8_t, VK_UUID_SIZE>;
DeviceUuid device_uuid(VkPhysicalDevice physical);

// Validation messages of severity "error" seen since the process started. Tests assert
// there are none.
int validation_errors();

}  // namespace sd::vulkan
