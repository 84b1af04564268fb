#include "backend/cpu/cpu_device.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/int8_gemm.h"
#include "backend/cpu/simd_target.h"
#include "tensor/error.h"
#include "tensor/host_memory.h"
#include "tensor/ops/reference.h"

namespace sd {

namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(BufferType& type, void* data, size_t size) : Buffer(type, size), data_(data) {}
  ~CpuBuffer() override { std::free(data_); }
  void* base() override { return data_; }
  bool is_host() const override { return true; }
  void set(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(static_cast<char*>(t.data) + offset, data, size);
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const char*>(t.data) + offset, size);
  }
  void clear(uint8_t value) override { std::memset(data_, value, size()); }

 private:
  void* data_;
};

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// MemAvailable from /proc/meminfo: what can be allocated without swapping.
size_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

}  // namespace

std::unique_ptr<Buffer> CpuBufferType::allocate(size_t size) {
  // Larger than the machine: refuse before asking, since Linux overcommit would "succeed"
  // and fail later at first touch.
  const size_t total = device_.memory().total;
  SD_CHECK(size <= total,
           "[CPU] cannot allocate %.2f GiB: this machine has %.2f GiB; keep "
           "weights on disk with --params-backend disk or use a smaller model type",
           static_cast<double>(size) / (1u << 30), static_cast<double>(total) / (1u << 30));
  void* data = allocate_host(alignment(), std::max<size_t>(size, 1));
  SD_CHECK(data,
           "[CPU] cannot allocate %zu bytes (%.2f GiB) of host memory; free memory or "
           "keep weights on disk with --params-backend disk",
           size, static_cast<double>(size) / (1u << 30));
  return std::make_unique<CpuBuffer>(*this, data, size);
}

CpuDevice::CpuDevice() : buffer_type_(*this) {
  description_ = cpu_model_name() + " (" + std::to_string(omp_get_num_procs()) + " threads, " +
                 simd_target_name() + ")";
}

DeviceCaps CpuDevice::caps() const {
  DeviceCaps c;
  c.host_addressable = true;
  c.int8_convolutions = int8_gemm_available();
  return c;
}

DeviceMemory CpuDevice::memory() const {
  const size_t total =
      static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  return {available_memory(), total};
}

std::unique_ptr<Backend> CpuDevice::create_backend(const BackendOptions& options) {
  return create_backend(options, CpuKernels::Fast);
}

std::unique_ptr<Backend> CpuDevice::create_backend(const BackendOptions& options,
                                                   CpuKernels kernels) {
  return std::make_unique<CpuBackend>(*this, options, kernels);
}

bool CpuDevice::supports_op(const Tensor& node) const {
  // Every op has a reference kernel that runs on host memory.
  return reference_kernel(node.op) != nullptr;
}

}  // namespace sd
