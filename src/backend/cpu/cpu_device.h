// The CPU device: host memory buffers and the CPU backend (oneDNN GEMM/convolution,
// Highway SIMD kernels, OpenMP threads).
#pragma once

#include "backend/backend.h"

namespace sd {

class CpuBufferType final : public BufferType {
 public:
  explicit CpuBufferType(Device& device) : device_(device) {}
  std::string name() const override { return "CPU"; }
  // 64 bytes: a cache line and an AVX-512 vector.
  size_t alignment() const override { return 64; }
  bool is_host() const override { return true; }
  Device& device() const override { return device_; }
  std::unique_ptr<Buffer> allocate(size_t size) override;

 private:
  Device& device_;
};

// Which kernels a CPU backend runs: the fast ones (falling back to reference where a fast
// kernel declines), or only the reference ones (the test oracle).
enum class CpuKernels { Fast, Reference };

class CpuDevice final : public Device {
 public:
  CpuDevice();
  std::string name() const override { return "CPU"; }
  std::string description() const override { return description_; }
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  DeviceMemory memory() const override;
  DeviceCaps caps() const override;
  BufferType& buffer_type() override { return buffer_type_; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  std::unique_ptr<Backend> create_backend(const BackendOptions& options, CpuKernels kernels);
  bool supports_op(const Tensor& node) const override;

 private:
  CpuBufferType buffer_type_;
  std::string description_;
};

}  // namespace sd
