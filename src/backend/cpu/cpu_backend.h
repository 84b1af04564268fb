// Runs graphs on the host: each node goes to its fast kernel when one exists and accepts
// the node's dtypes and layout, otherwise to the op's reference kernel.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_context.h"
#include "backend/cpu/cpu_device.h"

namespace sd {

class CpuBackend final : public Backend {
 public:
  CpuBackend(CpuDevice& device, const BackendOptions& options, CpuKernels kernels);
  Device& device() override { return device_; }
  void set_threads(int threads) override;
  void compute_nodes(const Graph& graph, size_t first, size_t end) override;
  void release_caches() override;
  void set_deadline(std::chrono::steady_clock::time_point deadline) override {
    deadline_ = deadline;
  }
  void set_stop(std::function<bool()> stop) override { stop_ = std::move(stop); }

 private:
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::function<bool()> stop_;
  CpuDevice& device_;
  CpuKernels kernels_;
  CpuContext ctx_;
};

}  // namespace sd
