#include "backend/backend.h"

#include <algorithm>
#include <thread>

#include "tensor/error.h"

namespace sd {

namespace {

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  SD_CHECK(t.buffer && t.data, "[%s] tensor '%s' has no memory yet", what, t.name.c_str());
  SD_CHECK(t.is_contiguous() || (offset == 0 && size == t.nbytes()),
           "[%s] partial transfer of non-contiguous tensor '%s'", what, t.name.c_str());
  SD_CHECK(offset <= t.nbytes() && size <= t.nbytes() - offset,
           "[%s] range %zu+%zu is outside tensor '%s' (%zu bytes)", what, offset, size,
           t.name.c_str(), t.nbytes());
}

}  // namespace

void tensor_set(Tensor& t, const void* data, size_t offset, size_t size) {
  check_range(t, offset, size, "tensor_set");
  t.buffer->set(t, data, offset, size);
}

void tensor_get(const Tensor& t, void* data, size_t offset, size_t size) {
  check_range(t, offset, size, "tensor_get");
  t.buffer->get(t, data, offset, size);
}

void Backend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  tensor_set(t, data, offset, size);
}

void Backend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  tensor_get(t, data, offset, size);
}

void bind_tensor(Tensor& t, Buffer& buffer, size_t offset) {
  SD_CHECK(offset <= buffer.size() && t.nbytes() <= buffer.size() - offset,
           "[bind] tensor '%s' (%zu bytes) does not fit at offset %zu of a %zu-byte buffer",
           t.name.c_str(), t.nbytes(), offset, buffer.size());
  t.buffer = &buffer;
  t.data = static_cast<char*>(buffer.base()) + offset;
}

void check_supported(const Device& device, const Graph& graph) {
  std::string missing;
  for (const Tensor* n : graph.nodes) {
    if (is_view_op(n->op) || device.supports_op(*n)) continue;
    std::string item = std::string(op_name(n->op)) + " (" + std::string(dtype_name(n->type));
    if (n->src[0]) item += " from " + std::string(dtype_name(n->src[0]->type));
    item += ")";
    if (missing.find(item) == std::string::npos) missing += (missing.empty() ? "" : ", ") + item;
  }
  SD_CHECK(missing.empty(),
           "[plan] backend %s cannot compute: %s; place this module on another "
           "device with --backend",
           device.name().c_str(), missing.c_str());
}

int usable_threads(int requested) {
  const int machine = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return requested <= 0 ? machine : std::min(requested, machine);
}

}  // namespace sd
