// The devices this process can use, in a stable order: CPU first, then GPUs, then remote
// devices. Names are case-insensitive.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sd {

class DeviceRegistry {
 public:
  // The process-wide registry with every compiled-in local device registered.
  static DeviceRegistry& instance();

  void add(std::unique_ptr<Device> device);
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  // nullptr when no device has that name.
  Device* find(const std::string& name) const;
  // Like find, but throws an error listing the valid names.
  Device& get(const std::string& name) const;
  std::string names() const;  // "CPU, CUDA0"

 private:
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace sd
