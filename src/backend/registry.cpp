#include "backend/registry.h"

#include <strings.h>

#include <algorithm>

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
    r->add_source(vulkan::register_vulkan_devices);
#endif
    return r;
  }();
  return *registry;
}

void DeviceRegistry::add(std::unique_ptr<Device> device) {
  SD_CHECK(!find_added(device->name()), "[devices] device %s is registered twice",
           device->name().c_str());
  if (discovering_) discovered_.push_back(device.get());
  devices_.push_back(std::move(device));
}

void DeviceRegistry::add_source(std::function<void(DeviceRegistry&)> discover) {
  std::lock_guard<std::recursive_mutex> lock(sources_mutex_);
  sources_.push_back(std::move(discover));
}

void DeviceRegistry::run_sources() const {
  std::lock_guard<std::recursive_mutex> lock(sources_mutex_);
  while (!sources_.empty()) {
    auto discover = std::move(sources_.front());
    sources_.erase(sources_.begin());
    auto& self = const_cast<DeviceRegistry&>(*this);
    self.discovering_ = true;
    try {
      discover(self);
    } catch (...) {
      self.discovering_ = false;
      throw;
    }
    self.discovering_ = false;
  }
}

const std::vector<std::unique_ptr<Device>>& DeviceRegistry::devices() const {
  run_sources();
  return devices_;
}

Device& DeviceRegistry::default_device() const {
  SD_CHECK(!devices_.empty(), "no devices are registered");
  for (const auto& d : devices_) {
    const bool discovered =
        std::find(discovered_.begin(), discovered_.end(), d.get()) != discovered_.end();
    if (d->kind() == DeviceKind::Gpu && !discovered) return *d;
  }
  return *devices_.front();
}

Device* DeviceRegistry::find_added(const std::string& name) const {
  for (const auto& d : devices_) {
    if (strcasecmp(d->name().c_str(), name.c_str()) == 0) return d.get();
  }
  return nullptr;
}

Device* DeviceRegistry::find(const std::string& name) const {
  if (Device* d = find_added(name)) return d;
  run_sources();
  return find_added(name);
}

Device& DeviceRegistry::get(const std::string& name) const {
  Device* d = find(name);
  SD_CHECK(d, "unknown device '%s'; available devices: %s (see --list-devices)", name.c_str(),
           names().c_str());
  return *d;
}

std::string DeviceRegistry::names() const {
  std::string s;
  for (const auto& d : devices()) s += (s.empty() ? "" : ", ") + d->name();
  return s;
}

std::string peak_memory_report(const DeviceRegistry& registry) {
  std::string report;
  for (const auto& d : registry.found()) {
    const size_t peak = d->peak_memory_used();
    if (peak == 0) continue;
    report += (report.empty() ? "" : ", ") + d->name() + " " +
              std::to_string((peak + (1 << 20) - 1) >> 20) + " MiB";
  }
  return report;
}

}  // namespace sd
