// The devices this process can use, in a stable order: CPU first, then GPUs, then remote
// devices. Names are case-insensitive. Devices whose discovery is costly (Vulkan loads its
// driver: 50 ms and, for a software device, 50 MB that stay mapped) come from sources that
// run only when every device is asked for or a name is not among those found so far, so a
// run on the CPU never loads them.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sd {

class DeviceRegistry {
 public:
  // The process-wide registry with every compiled-in local device registered.
  static DeviceRegistry& instance();

  void add(std::unique_ptr<Device> device);
  // Adds a source of devices, run once when first needed (see above).
  void add_source(std::function<void(DeviceRegistry&)> discover);
  // Every device, running the sources not yet run.
  const std::vector<std::unique_ptr<Device>>& devices() const;
  // The devices found so far, running no source: for reports after a run, which must not
  // load a driver the run did not use.
  const std::vector<std::unique_ptr<Device>>& found() const { return devices_; }
  // The device `auto` picks: the first GPU added without a source, else the first device.
  // Devices from sources (Vulkan) are picked by name or by `gpu` only.
  Device& default_device() const;
  // nullptr when no device has that name.
  Device* find(const std::string& name) const;
  // Like find, but throws an error listing the valid names.
  Device& get(const std::string& name) const;
  std::string names() const;  // "CPU, CUDA0"

 private:
  Device* find_added(const std::string& name) const;
  void run_sources() const;

  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<const Device*> discovered_;  // added by a source
  bool discovering_ = false;
  mutable std::vector<std::function<void(DeviceRegistry&)>> sources_;
  mutable std::recursive_mutex sources_mutex_;
};

// "Vulkan0 1234 MiB, ..." for each device found so far that counts its memory and held
// some; empty when none did.
std::string peak_memory_report(const DeviceRegistry& registry);

}  // namespace sd
