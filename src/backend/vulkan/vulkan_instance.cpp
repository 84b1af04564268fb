#include "backend/vulkan/vulkan_instance.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace sd::vulkan {

namespace {

std::atomic<int> g_validation_errors{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    ++g_validation_errors;
    std::fprintf(stderr, "[Vulkan validation] %s\n", data->pMessage);
  }
  return VK_FALSE;
}

bool has_layer(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

std::shared_ptr<VulkanInstance> create_instance() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "stable-diffusion";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  const char* env = std::getenv("SD_VULKAN_VALIDATION");
  const bool validate = env && std::strcmp(env, "1") == 0;
  const char* layer = "VK_LAYER_KHRONOS_validation";
  const char* extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  const bool layer_found = validate && has_layer(layer);
  if (validate && !layer_found)
    std::fprintf(stderr,
                 "SD_VULKAN_VALIDATION=1: the validation layer is not installed (Debian: "
                 "vulkan-validationlayers); running without it\n");
  if (layer_found) {
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = &layer;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = &extension;
  }
  VkInstance instance = VK_NULL_HANDLE;
  if (vkCreateInstance(&info, nullptr, &instance) != VK_SUCCESS) return nullptr;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  if (layer_found) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerCreateInfoEXT m{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    m.pfnUserCallback = on_validation_message;
    if (create) create(instance, &m, nullptr, &messenger);
  }
  return std::make_shared<VulkanInstance>(instance, messenger);
}

}  // namespace

VulkanInstance::VulkanInstance(VkInstance instance, VkDebugUtilsMessengerEXT messenger)
    : instance_(instance), messenger_(messenger) {}

VulkanInstance::~VulkanInstance() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> VulkanInstance::compute_devices() const {
  uint32_t count = 0;
  if (vkEnumeratePhysicalDevices(instance_, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> all(count);
  vkEnumeratePhysicalDevices(instance_, &count, all.data());
  std::vector<VkPhysicalDevice> compute;
  for (VkPhysicalDevice p : all) {
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(p, &families, props.data());
    for (const auto& f : props) {
      if (f.queueFlags & VK_QUEUE_COMPUTE_BIT) {
        compute.push_back(p);
        break;
      }
    }
  }
  return compute;
}

std::shared_ptr<VulkanInstance> acquire_instance() {
  static std::mutex mutex;
  static std::weak_ptr<VulkanInstance> live;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto held = live.lock()) return held;
  auto made = create_instance();
  live = made;
  return made;
}

DeviceUuid device_uuid(VkPhysicalDevice physical) {
  VkPhysicalDeviceIDProperties id{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &id;
  vkGetPhysicalDeviceProperties2(physical, &props);
  DeviceUuid uuid;
  std::memcpy(uuid.data(), id.deviceUUID, VK_UUID_SIZE);
  return uuid;
}

int validation_errors() {
  return g_validation_errors.load();
}

}  // namespace sd::vulkan
