#include "backend/registry.h"

#include <strings.h>

#include "backend/cpu/cpu_device.h"
#ifdef SD_HAVE_VULKAN
#include "backend/vulkan/vulkan_device.h"
#endif
#include "tensor/error.h"

namespace sd {

DeviceRegistry& DeviceRegistry::instance() {
  static DeviceRegistry* registry = [] {
    auto* r = new DeviceRegistry();
    r->add(std::make_unique<CpuDevice>());
#ifdef SD_HAVE_VULKAN
    vulkan::register_vulkan_devices(*r);
#endif
    return r;
  }();
  return *registry;
}

void DeviceRegistry::add(std::unique_ptr<Device> device) {
  SD_CHECK(!find(device->name()), "[devices] device %s is registered twice",
           device->name().c_str());
  devices_.push_back(std::move(device));
}

Device* DeviceRegistry::find(const std::string& name) const {
  for (const auto& d : devices_) {
    if (strcasecmp(d->name().c_str(), name.c_str()) == 0) return d.get();
  }
  return nullptr;
}

Device& DeviceRegistry::get(const std::string& name) const {
  Device* d = find(name);
  SD_CHECK(d, "unknown device '%s'; available devices: %s (see --list-devices)", name.c_str(),
           names().c_str());
  return *d;
}

std::string DeviceRegistry::names() const {
  std::string s;
  for (const auto& d : devices_) s += (s.empty() ? "" : ", ") + d->name();
  return s;
}

}  // namespace sd
