// What a weight-file reader reports for one tensor: enough to create the engine tensor
// (dtype, shape) and to find and convert its bytes later, without reading them now.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "io/file_dtype.h"
#include "tensor/dtype.h"

namespace sd::io {

constexpr int kMaxTensorDims = 4;

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;                // engine dtype once loaded
  FileDType file_dtype = FileDType::None;  // how the bytes are stored, if not as `dtype`
  int n_dims = 0;                          // as the file gives it (0: a scalar)
  std::array<int64_t, kMaxTensorDims> ne{1, 1, 1, 1};  // engine order: ne[0] fastest
  uint64_t offset = 0;                                 // of the first byte, from file start
  uint64_t size = 0;                                   // bytes in the file
  std::string path;

  bool needs_conversion() const { return file_dtype != FileDType::None; }
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  // Bytes the tensor occupies once loaded as `dtype`.
  uint64_t loaded_size() const;
};

// "[4, 320, 3, 3]"-style shape in engine order (ne[0] first), for messages.
std::string shape_string(const TensorInfo& t);
// "f16", or "F8_E4M3 (loads as f16)".
std::string dtype_string(const TensorInfo& t);

// Copies a tensor's file bytes `src` (info.size bytes) into `dst` (info.loaded_size()
// bytes), converting when the file dtype differs. Throws sd::Error naming the file and
// tensor when a value does not fit the engine dtype.
void load_tensor_data(const TensorInfo& info, const void* src, void* dst);

}  // namespace sd::io
