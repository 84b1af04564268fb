// A device for tests of memory budgets: it computes with the CPU's kernels, but says the
// host cannot address its memory, so weights living in RAM must be staged into it, and it
// holds at most `limit` bytes. It records the most it held at once.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_device.h"
#include "tensor/error.h"

namespace sd::test {

class LimitedDevice;

class LimitedBuffer final : public Buffer {
 public:
  LimitedBuffer(BufferType& type, size_t size, size_t& live, size_t& peak)
      : Buffer(type, size),
        bytes_(static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64))),
        live_(live) {
    SD_CHECK(bytes_, "test device: out of host memory");
    live_ += size;
    peak = std::max(peak, live_);
  }
  ~LimitedBuffer() override {
    live_ -= size();
    std::free(bytes_);
  }
  void* base() override { return bytes_; }
  // The CPU kernels that compute for this device read it directly.
  bool is_host() const override { return true; }
  void set(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(static_cast<uint8_t*>(t.data) + offset, data, size);
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }
  void clear(uint8_t value) override { std::memset(bytes_, value, size()); }

 private:
  uint8_t* bytes_;
  size_t& live_;
};

class LimitedBufferType final : public BufferType {
 public:
  LimitedBufferType(Device& device, size_t limit) : device_(device), limit_(limit) {}
  std::string name() const override { return device_.name(); }
  size_t alignment() const override { return 64; }
  bool is_host() const override { return false; }
  Device& device() const override { return device_; }
  std::unique_ptr<Buffer> allocate(size_t size) override {
    SD_CHECK(live + size <= limit_, "%s: %zu bytes asked for, %zu of %zu in use",
             device_.name().c_str(), size, live, limit_);
    return std::make_unique<LimitedBuffer>(*this, size, live, peak);
  }
  size_t live = 0, peak = 0;

 private:
  Device& device_;
  size_t limit_;
};

class LimitedDevice final : public Device {
 public:
  explicit LimitedDevice(size_t limit) : type_(*this, limit) {}
  std::string name() const override { return "LIMITED0"; }
  std::string description() const override { return "test device with little memory"; }
  DeviceKind kind() const override { return DeviceKind::Gpu; }
  DeviceMemory memory() const override { return {0, 0}; }
  DeviceCaps caps() const override { return {}; }  // not host-addressable
  BufferType& buffer_type() override { return type_; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override {
    return std::make_unique<LimitedBackend>(*this, cpu_.create_backend(options));
  }
  bool supports_op(const Tensor& node) const override { return cpu_.supports_op(node); }
  size_t live_bytes() const { return type_.live; }
  size_t peak_bytes() const { return type_.peak; }

 private:
  class LimitedBackend final : public Backend {
   public:
    LimitedBackend(LimitedDevice& device, std::unique_ptr<Backend> cpu)
        : device_(device), cpu_(std::move(cpu)) {}
    Device& device() override { return device_; }
    void compute_nodes(const Graph& graph, size_t first, size_t end) override {
      cpu_->compute_nodes(graph, first, end);
    }

   private:
    LimitedDevice& device_;
    std::unique_ptr<Backend> cpu_;
  };

  CpuDevice cpu_;
  LimitedBufferType type_;
};

}  // namespace sd::test
