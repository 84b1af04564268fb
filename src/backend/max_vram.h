// --max-vram, as sd.cpp spells it: a memory budget in GiB for the devices modules compute
// on. "6" budgets every device; "-1" gives each device its free memory less 1 GiB; "0"
// (the default) sets none; "RPC0=1,cuda0=6" budgets devices by name (any case).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.h"

namespace sd {

struct MaxVram {
  std::optional<double> all;                // GiB for every device not named
  std::map<std::string, double> by_device;  // lower-case device name -> GiB

  bool empty() const { return !all && by_device.empty(); }
  // The budget for `device` in bytes (0: none). A negative value is the device's free
  // memory less that many GiB; throws when that leaves nothing.
  size_t bytes_for(const Device& device) const;
};

// Throws sd::Error naming the entry and the form expected.
MaxVram parse_max_vram(std::string_view spec);

}  // namespace sd
