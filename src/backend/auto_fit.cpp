#include "backend/auto_fit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "tensor/error.h"

namespace sd {

namespace {

constexpr size_t kRuntimeMargin = size_t{512} << 20;

double gib(size_t bytes) {
  return static_cast<double>(bytes) / (size_t{1} << 30);
}

double mb(size_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

}  // namespace

size_t fit_budget(const Device& device, const MaxVram& budgets) {
  if (size_t b = budgets.bytes_for(device)) return b;
  const size_t free = device.memory().free;
  return free > kRuntimeMargin ? free - kRuntimeMargin : 0;
}

FitPlan plan_auto_fit(const std::vector<ModuleSize>& modules, const DeviceRegistry& registry,
                      const MaxVram& budgets, size_t compute_reserve) {
  // What each accelerator has left; the CPU takes whatever is left over.
  std::map<Device*, size_t> left;
  std::map<Device*, size_t> budget;
  for (const auto& d : registry.devices()) {
    // Software devices compute on the same cores as the CPU: nothing to offload to.
    if (d->kind() == DeviceKind::Cpu || d->kind() == DeviceKind::Software) continue;
    budget[d.get()] = fit_budget(*d, budgets);
    left[d.get()] = budget[d.get()];
  }
  std::vector<ModuleSize> order = modules;
  std::stable_sort(order.begin(), order.end(), [](const ModuleSize& a, const ModuleSize& b) {
    return a.weight_bytes > b.weight_bytes;
  });

  FitPlan plan;
  Device* streaming = nullptr;  // the device streamed modules share
  size_t stream_budget = 0;
  std::map<Module, std::string> where;
  for (const ModuleSize& m : order) {
    const char* name = module_name(m.module);
    Device* best = nullptr;
    for (auto& [d, room] : left)
      if (m.weight_bytes + compute_reserve <= room && (!best || room > left[best])) best = d;
    if (best) {
      left[best] -= m.weight_bytes;
      where[m.module] = best->name();
      plan.lines.push_back(format("%s (%.0f MB of weights) on %s: fits its %.2f GiB", name,
                                  mb(m.weight_bytes), best->name().c_str(), gib(budget[best])));
      continue;
    }
    // Streamed: the accelerator with the most memory left, if that leaves room to
    // compute; the device then holds no other module's weights, so streaming has all of it.
    Device* roomiest = streaming;
    for (auto& [d, room] : left)
      if (!roomiest || room > left[roomiest]) roomiest = d;
    if (roomiest && (roomiest == streaming || left[roomiest] > 2 * compute_reserve)) {
      if (!streaming) {
        streaming = roomiest;
        stream_budget = left[roomiest];
        left[roomiest] = 0;
      }
      where[m.module] = roomiest->name();
      const bool first = plan.params_backend.empty();
      plan.params_backend += format("%s%s=cpu", first ? "" : ",", name);
      plan.lines.push_back(
          format("%s (%.0f MB of weights) on %s, weights streamed from RAM within its %.2f GiB: %s",
                 name, mb(m.weight_bytes), roomiest->name().c_str(), gib(stream_budget),
                 first ? "no device holds them whole" : "that device streams the larger modules"));
      continue;
    }
    where[m.module] = "CPU";
    plan.lines.push_back(format("%s (%.0f MB of weights) on CPU: %s", name, mb(m.weight_bytes),
                                budget.empty() ? "no GPU or remote device here"
                                               : "no GPU or remote device has room to compute it"));
  }
  for (const ModuleSize& m : modules)
    plan.backend += format("%s%s=%s", plan.backend.empty() ? "" : ",", module_name(m.module),
                           where[m.module].c_str());
  // Rounded down, so the budget read back is never more than the memory there.
  if (streaming)
    plan.max_vram =
        format("%s=%.3f", streaming->name().c_str(), std::floor(gib(stream_budget) * 1000) / 1000);
  return plan;
}

}  // namespace sd
