// --auto-fit: where each module computes and where its weights live, chosen from the
// modules' weight sizes and the devices' memory, and said in a plan users can read.
//
// Biggest module first, each goes to the GPU or remote device with the most memory left
// that holds its weights beside a compute reserve; its weights stay there. A module no
// device holds whole computes on the device with the most memory, its weights streamed
// from host memory within that device's budget (--max-vram cuts). Without such a device,
// or when even that leaves no room to compute, it runs on the CPU, which reads the weights
// where they are.
#pragma once

#include <string>
#include <vector>

#include "backend/max_vram.h"
#include "backend/placement.h"
#include "backend/registry.h"

namespace sd {

struct ModuleSize {
  Module module;
  size_t weight_bytes = 0;
};

struct FitPlan {
  std::string backend;             // for --backend
  std::string params_backend;      // for --params-backend
  std::string max_vram;            // budgets for devices with streamed modules; "" if none
  std::vector<std::string> lines;  // one per module, and why
};

// A device's memory for auto-fit: its --max-vram budget when one is given, else its
// free memory less a margin for the runtime (512 MiB).
size_t fit_budget(const Device& device, const MaxVram& budgets);

// `compute_reserve`: room kept beside a module's weights for its compute buffers.
FitPlan plan_auto_fit(const std::vector<ModuleSize>& modules, const DeviceRegistry& registry,
                      const MaxVram& budgets, size_t compute_reserve = size_t{1} << 30);

}  // namespace sd
