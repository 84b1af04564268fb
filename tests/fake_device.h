// A device for tests of placement and residency: its memory is ordinary RAM but it says
// it is a GPU whose buffers the host cannot address, so weights placed "elsewhere" must be
// staged into it. It counts the bytes it holds. It cannot compute.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tensor/error.h"

namespace sd::test {

class FakeDevice;

class FakeBuffer final : public Buffer {
 public:
  FakeBuffer(BufferType& type, size_t size, size_t& live)
      : Buffer(type, size), bytes_(size), live_(live) {
    live_ += size;
  }
  ~FakeBuffer() override { live_ -= size(); }
  void* base() override { return bytes_.data(); }
  bool is_host() const override { return false; }
  void set(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(static_cast<uint8_t*>(t.data) + offset, data, size);
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }
  void clear(uint8_t value) override { std::memset(bytes_.data(), value, bytes_.size()); }

 private:
  std::vector<uint8_t> bytes_;
  size_t& live_;
};

class FakeBufferType final : public BufferType {
 public:
  explicit FakeBufferType(Device& device) : device_(device) {}
  std::string name() const override { return device_.name() + "_buffer"; }
  size_t alignment() const override { return 64; }
  bool is_host() const override { return false; }
  Device& device() const override { return device_; }
  std::unique_ptr<Buffer> allocate(size_t size) override {
    return std::make_unique<FakeBuffer>(*this, size, live_bytes);
  }
  size_t live_bytes = 0;

 private:
  Device& device_;
};

class FakeDevice final : public Device {
 public:
  explicit FakeDevice(std::string name, DeviceKind kind = DeviceKind::Gpu,
                      size_t memory = size_t{1} << 30)
      : name_(std::move(name)), kind_(kind), memory_(memory), type_(*this) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "test device"; }
  DeviceKind kind() const override { return kind_; }
  DeviceMemory memory() const override { return {memory_, memory_}; }
  DeviceCaps caps() const override { return {}; }
  BufferType& buffer_type() override { return type_; }
  std::unique_ptr<Backend> create_backend(const BackendOptions&) override {
    sd::fail("%s is a test device and cannot compute", name_.c_str());
  }
  bool supports_op(const Tensor&) const override { return false; }
  // Bytes in this device's buffers now.
  size_t live_bytes() const { return type_.live_bytes; }

 private:
  std::string name_;
  DeviceKind kind_;
  size_t memory_;
  FakeBufferType type_;
};

}  // namespace sd::test
