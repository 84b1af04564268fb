#include "backend/backend_manager.h"

#include <cctype>

#include "backend/max_vram.h"
#include "tensor/error.h"
#include "tensor/text.h"

namespace sd {

std::string residency_name(const Residency& r) {
  switch (r.kind) {
    case Residency::Kind::Compute:
      return "on its compute device";
    case Residency::Kind::Device:
      return "on " + r.device->name();
    case Residency::Kind::Disk:
      return "on disk";
  }
  return "?";
}

BackendManager::BackendManager(std::string_view backend_spec, std::string_view params_backend_spec,
                               BackendOptions options, const DeviceRegistry& registry)
    : registry_(registry), options_(options) {
  const Assignment runtime = parse_assignment(backend_spec, "--backend");
  const Assignment params = parse_assignment(params_backend_spec, "--params-backend");
  for (Module m : all_modules()) {
    Placement p;
    const std::string& compute_name = runtime.get(m);
    SD_CHECK(!is_disk_name(compute_name),
             "--backend %s: 'disk' holds weights, it cannot compute; use --params-backend "
             "%s=disk to keep the weights on disk and --backend for the device that computes",
             compute_name == runtime.default_name ? compute_name.c_str()
                                                  : (std::string(module_name(m)) + "=disk").c_str(),
             module_name(m));
    p.compute = &resolve(compute_name, "--backend", m);
    const std::string& params_name = params.get(m);
    if (is_disk_name(params_name)) {
      p.params.kind = Residency::Kind::Disk;
    } else if (!is_default_device_name(params_name)) {
      Device& d = resolve(params_name, "--params-backend", m);
      if (&d != p.compute) {
        p.params.kind = Residency::Kind::Device;
        p.params.device = &d;
      }
    }
    placement_[m] = p;
  }
}

BackendManager::~BackendManager() = default;

Device& BackendManager::resolve(const std::string& name, const char* flag, Module m) const {
  if (is_default_device_name(name)) return registry_.default_device();
  auto first_gpu = [&]() -> Device* {
    for (const auto& d : registry_.devices())
      if (d->kind() == DeviceKind::Gpu) return d.get();
    return nullptr;
  };
  const std::string lower = ascii_lower(name);
  if (lower == "gpu") {
    Device* gpu = first_gpu();
    SD_CHECK(gpu, "%s %s=gpu: no GPU device here; devices: %s (see --list-devices)", flag,
             module_name(m), registry_.names().c_str());
    return *gpu;
  }
  Device* d = registry_.find(name);
  SD_CHECK(d, "%s: unknown device '%s' for %s; devices: %s, or auto, gpu%s (see --list-devices)",
           flag, name.c_str(), module_name(m), registry_.names().c_str(),
           std::string_view(flag) == "--params-backend" ? ", disk" : "");
  return *d;
}

Backend& BackendManager::backend(Module m) {
  Device* d = placement_.at(m).compute;
  std::unique_ptr<Backend>& b = backends_[d];
  if (!b) {
    b = d->create_backend(options_);
    if (auto it = budgets_.find(d); it != budgets_.end()) b->set_memory_budget(it->second);
  }
  return *b;
}

std::vector<std::string> BackendManager::set_memory_budgets(std::string_view max_vram,
                                                            bool stream_layers) {
  SD_CHECK(backends_.empty(), "[plan] memory budgets are set before any backend is made");
  const MaxVram spec = parse_max_vram(max_vram);
  std::vector<std::string> notes;
  for (const auto& [name, gib] : spec.by_device) {
    SD_CHECK(registry_.find(name),
             "--max-vram: unknown device '%s'; devices: %s (see --list-devices)", name.c_str(),
             registry_.names().c_str());
  }
  if (spec.empty()) {
    if (stream_layers)
      notes.push_back(
          "--stream-layers streams weights within a --max-vram budget; without one it does "
          "nothing");
    return notes;
  }
  Device* host = nullptr;
  for (const auto& d : registry_.devices())
    if (d->kind() == DeviceKind::Cpu) host = d.get();
  SD_CHECK(host, "[plan] --max-vram needs the CPU device to hold the weights");
  std::string in_place;
  bool applied = false;
  for (Module m : all_modules()) {
    Placement& p = placement_.at(m);
    const size_t bytes = spec.bytes_for(*p.compute);
    if (bytes == 0) continue;
    if (p.compute->caps().host_addressable) {
      // Reads mapped weights where they are: nothing to budget. Said once per device.
      if (in_place.find(p.compute->name()) == std::string::npos)
        in_place += (in_place.empty() ? "" : ", ") + p.compute->name();
      continue;
    }
    applied = true;
    budgets_[p.compute] = MemoryBudget{bytes, stream_layers};
    if (p.params.kind == Residency::Kind::Compute) {
      p.params.kind = Residency::Kind::Device;
      p.params.device = host;
    } else if (p.params.kind == Residency::Kind::Disk) {
      p.params.device = host;
    }
    p.params.streamed = true;
  }
  if (!in_place.empty())
    notes.push_back("--max-vram: " + in_place +
                    " reads the weights where they are (mapped from the file), so no budget "
                    "applies there; it budgets GPU and remote devices");
  if (stream_layers && !applied)
    notes.push_back(
        "--stream-layers: no module computes on a budgeted GPU or remote device; nothing to "
        "stream");
  return notes;
}

std::string BackendManager::describe(Module m) const {
  const Placement& p = placement_.at(m);
  std::string s = std::string(module_name(m)) + ": " + p.compute->name();
  if (p.params.kind != Residency::Kind::Compute) s += ", weights " + residency_name(p.params);
  if (p.params.streamed) {
    auto it = budgets_.find(p.compute);
    s += format(", streamed within %.2f GiB%s", static_cast<double>(it->second.bytes) / (1 << 30),
                it->second.prefetch ? " with prefetch" : "");
  }
  return s;
}

void BackendManager::release_caches() {
  for (auto& [device, backend] : backends_) backend->release_caches();
}

}  // namespace sd
