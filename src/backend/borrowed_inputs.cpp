#include "backend/borrowed_inputs.h"

#include <cstdint>
#include <cstring>
#include <unordered_set>

#include "tensor/error.h"

namespace sd {

namespace {

// The caller's memory as a buffer: read by the graph, never written through it.
class BorrowedBuffer final : public Buffer {
 public:
  BorrowedBuffer(BufferType& type, const void* data, size_t size)
      : Buffer(type, size), data_(data) {}
  void* base() override { return const_cast<void*>(data_); }
  bool is_host() const override { return true; }
  void set(Tensor& t, const void*, size_t, size_t) override {
    sd::fail("[graph] input '%s' is read where its caller holds it, not written", t.name.c_str());
  }
  void get(const Tensor& t, void* data, size_t offset, size_t size) const override {
    std::memcpy(data, static_cast<const char*>(t.data) + offset, size);
  }
  void clear(uint8_t) override { sd::fail("[graph] a borrowed input is read-only"); }

 private:
  const void* data_;
};

}  // namespace

BorrowedInputs::BorrowedInputs(Device& device, const Graph& graph,
                               const std::vector<std::pair<Tensor*, const void*>>& inputs) {
  if (!device.caps().host_addressable) return;
  BufferType& type = device.buffer_type();
  const std::unordered_set<const Tensor*> read(graph.leafs.begin(), graph.leafs.end());
  for (const auto& [t, data] : inputs) {
    if (!data || t->data || !read.count(t) || !t->is_contiguous() ||
        reinterpret_cast<uintptr_t>(data) % type.alignment() != 0)
      continue;
    auto buffer = std::make_unique<BorrowedBuffer>(type, data, t->nbytes());
    bind_tensor(*t, *buffer, 0);
    bound_.emplace_back(t, std::move(buffer));
  }
}

BorrowedInputs::~BorrowedInputs() {
  for (auto& [t, buffer] : bound_) {
    t->data = nullptr;
    t->buffer = nullptr;
  }
}

bool BorrowedInputs::borrowed(const Tensor* t) const {
  for (const auto& [b, buffer] : bound_)
    if (b == t) return true;
  return false;
}

}  // namespace sd
