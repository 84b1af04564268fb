// The BackendManager turns --backend and --params-backend into devices: for each module,
// the device it computes on and where its weights live, and one Backend (stream) per
// device, shared by every module placed there and freed with the manager.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/placement.h"
#include "backend/registry.h"

namespace sd {

// Where a module's weights live between uses (ARCHITECTURE.md, "Placement and residency").
struct Residency {
  enum class Kind {
    Compute,  // on the device the module computes on (the default)
    Device,   // on another device (e.g. RAM for a GPU module); staged in before each use
    Disk,     // read from the model file when a phase needs them, freed when it ends
  };
  Kind kind = Kind::Compute;
  Device* device = nullptr;  // Kind::Device, and Kind::Disk when streamed
  // The compute device has a memory budget (--max-vram): the weights stay in host memory
  // (mapped where they can be) and the graph runner stages them segment by segment
  // (backend/weight_streamer.h), instead of the weights manager staging a whole graph's.
  bool streamed = false;
};

// "CPU", "disk" or "on its compute device", for messages.
std::string residency_name(const Residency& r);

class BackendManager {
 public:
  // Parses and resolves both assignments for every module now, so a typo fails before any
  // weight is read. Throws sd::Error naming the flag, the entry and the valid names.
  BackendManager(std::string_view backend_spec, std::string_view params_backend_spec,
                 BackendOptions options = {},
                 const DeviceRegistry& registry = DeviceRegistry::instance());
  ~BackendManager();
  BackendManager(const BackendManager&) = delete;
  BackendManager& operator=(const BackendManager&) = delete;

  Device& compute_device(Module m) const { return *placement_.at(m).compute; }
  Residency residency(Module m) const { return placement_.at(m).params; }
  // The backend of the module's compute device, created on first use.
  Backend& backend(Module m);
  // "diffusion: CPU, weights on disk" for the log.
  std::string describe(Module m) const;
  // --max-vram and --stream-layers: budgets for the devices modules compute on. A module
  // on a budgeted device that holds its own copy of the weights (a GPU, a remote device)
  // gets its weights streamed from host memory within the budget. Call before backend().
  // Returns notes for the log (budgets that apply to nothing, prefetch without a budget).
  std::vector<std::string> set_memory_budgets(std::string_view max_vram, bool stream_layers);
  // Every created backend's caches (Backend::release_caches).
  void release_caches();

 private:
  struct Placement {
    Device* compute = nullptr;
    Residency params;
  };
  Device& resolve(const std::string& name, const char* flag, Module m) const;

  const DeviceRegistry& registry_;
  BackendOptions options_;
  std::map<Module, Placement> placement_;
  std::map<Device*, std::unique_ptr<Backend>> backends_;
  std::map<Device*, MemoryBudget> budgets_;
};

}  // namespace sd
