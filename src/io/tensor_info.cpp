#include "io/tensor_info.h"

#include <cstring>

#include "io/file_error.h"

namespace sd::io {

uint64_t TensorInfo::loaded_size() const {
  if (!needs_conversion()) return size;
  return static_cast<uint64_t>(n_elements()) * type_size(dtype);
}

std::string shape_string(const TensorInfo& t) {
  std::string s = "[";
  for (int i = 0; i < t.n_dims; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(t.ne[static_cast<size_t>(i)]);
  }
  return s + "]";
}

std::string dtype_string(const TensorInfo& t) {
  std::string engine(dtype_name(t.dtype));
  if (!t.needs_conversion()) return engine;
  return std::string(file_dtype_name(t.file_dtype)) + " (loads as " + engine + ")";
}

void load_tensor_data(const TensorInfo& info, const void* src, void* dst) {
  if (info.size == 0) return;  // empty tensors may come with null pointers
  if (!info.needs_conversion()) {
    std::memcpy(dst, src, static_cast<size_t>(info.size));
    return;
  }
  auto n = static_cast<size_t>(info.n_elements());
  auto bad = convert_elements(info.file_dtype, src, info.dtype, dst, n);
  if (bad) {
    fail_file(info.path, "tensor '" + info.name + "' holds a value at element " +
                             std::to_string(*bad) + " that does not fit in " +
                             std::string(dtype_name(info.dtype)) + " (stored as " +
                             std::string(file_dtype_name(info.file_dtype)) +
                             "; this engine keeps integers as i32)");
  }
}

}  // namespace sd::io
