// Vulkan device discovery: names, kinds, memory, and that a run that does not name a Vulkan
// device never loads a driver.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend_manager.h"
#include "backend/cpu/cpu_device.h"
#include "backend/registry.h"
#include "backend/vulkan/vulkan_device.h"
#include "tensor/error.h"

namespace sd::vulkan {
namespace {

TEST(VulkanDevice, DevicesAreNamedInOrderWithTheirMemory) {
  DeviceRegistry registry;
  register_vulkan_devices(registry);
  if (registry.devices().empty()) GTEST_SKIP() << "no Vulkan device here";
  for (size_t i = 0; i < registry.devices().size(); ++i) {
    const Device& d = *registry.devices()[i];
    EXPECT_EQ(d.name(), "Vulkan" + std::to_string(i));
    EXPECT_FALSE(d.description().empty());
    EXPECT_GT(d.memory().total, 0u);
    EXPECT_LE(d.memory().free, d.memory().total);
    EXPECT_FALSE(d.caps().host_addressable);
  }
}

TEST(VulkanDevice, NoneTurnsDiscoveryOff) {
  setenv("SD_VULKAN_DEVICES", "none", 1);
  DeviceRegistry registry;
  register_vulkan_devices(registry);
  unsetenv("SD_VULKAN_DEVICES");
  EXPECT_TRUE(registry.devices().empty());
}

TEST(VulkanDevice, AutoPicksNoVulkanDeviceAndLoadsNoDriver) {
  DeviceRegistry registry;
  registry.add(std::make_unique<CpuDevice>());
  bool discovered = false;
  registry.add_source([&](DeviceRegistry& r) {
    discovered = true;
    register_vulkan_devices(r);
  });
  BackendManager automatic("auto", "", {}, registry);
  EXPECT_EQ(automatic.compute_device(Module::Diffusion).name(), "CPU");
  EXPECT_FALSE(discovered) << "resolving auto ran the Vulkan discovery";
  if (!registry.find("vulkan0")) GTEST_SKIP() << "no Vulkan device here";
  EXPECT_TRUE(discovered);
  // Still the CPU once the devices are known: Vulkan devices are picked by name.
  BackendManager again("auto", "", {}, registry);
  EXPECT_EQ(again.compute_device(Module::Diffusion).name(), "CPU");
  BackendManager named("vulkan0", "", {}, registry);
  EXPECT_EQ(named.compute_device(Module::Diffusion).name(), "Vulkan0");
}

TEST(VulkanDevice, SoftwareDevicesAreNotPickedByGpu) {
  DeviceRegistry registry;
  registry.add(std::make_unique<CpuDevice>());
  register_vulkan_devices(registry);
  bool software = false;
  for (const auto& d : registry.devices()) software |= d->kind() == DeviceKind::Software;
  bool gpu = false;
  for (const auto& d : registry.devices()) gpu |= d->kind() == DeviceKind::Gpu;
  if (!software || gpu) GTEST_SKIP() << "needs a software Vulkan device and no GPU";
  EXPECT_THROW(BackendManager("gpu", "", {}, registry), Error);
}

}  // namespace
}  // namespace sd::vulkan
