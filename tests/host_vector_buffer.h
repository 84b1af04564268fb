// A Buffer over a std::vector in host memory, for tests that need a host buffer with a
// property the CPU's own lacks (read-only as a file mapping, releasable after use):
// derive and override that property.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend.h"

namespace sd::test {

class HostVectorBuffer : public Buffer {
 public:
  HostVectorBuffer(BufferType& type, size_t size) : Buffer(type, size), bytes_(size) {}
  void* base() override { return bytes_.data(); }
  bool is_host() const override { return true; }
  void set(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(static_cast<uint8_t*>(t.data) + offset, data, size);
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }
  void clear(uint8_t value) override { std::fill(bytes_.begin(), bytes_.end(), value); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace sd::test
