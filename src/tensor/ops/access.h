// Element access for reference kernels: plain, stride-aware and dtype-generic, so each
// reference kernel reads like the op's definition. Fast kernels live in the backends.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/error.h"
#include "tensor/float16.h"
#include "tensor/tensor.h"

namespace sd {

inline const char* element_ptr(const Tensor* t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
         i3 * t->nb[3];
}

inline char* element_ptr(Tensor* t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
         i3 * t->nb[3];
}

// Reads one element of an f32, f16, bf16 or i32 tensor as float.
inline float load_f32(const Tensor* t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  const char* p = element_ptr(t, i0, i1, i2, i3);
  switch (t->type) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return fp16_to_f32(v);
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_f32(v);
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    default:
      fail("[reference] element access on %s tensor '%s'; dequantize rows instead",
           std::string(dtype_name(t->type)).c_str(), t->name.c_str());
  }
}

// Writes one element, converting from float to the tensor's dtype.
inline void store_f32(Tensor* t, float v, int64_t i0, int64_t i1 = 0, int64_t i2 = 0,
                      int64_t i3 = 0) {
  char* p = element_ptr(t, i0, i1, i2, i3);
  switch (t->type) {
    case DType::F32:
      std::memcpy(p, &v, 4);
      return;
    case DType::F16: {
      uint16_t h = f32_to_fp16(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::BF16: {
      uint16_t h = f32_to_bf16(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::I32: {
      int32_t i = static_cast<int32_t>(v);
      std::memcpy(p, &i, 4);
      return;
    }
    default:
      fail("[reference] element store into %s tensor '%s'",
           std::string(dtype_name(t->type)).c_str(), t->name.c_str());
  }
}

// Index of a broadcast source: dims of size 1 repeat.
inline int64_t bcast(const Tensor* t, int dim, int64_t i) {
  return t->ne[dim] == 1 ? 0 : i;
}

// Calls f(i0, i1, i2, i3) for every element of a shape; the loop of every reference kernel.
template <typename F>
inline void for_each_index(const Tensor* t, F&& f) {
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) f(i0, i1, i2, i3);
}

// Dequantizes row (i1, i2, i3) of any dtype (block types included) into `out` (ne[0] floats).
void load_row_f32(const Tensor* t, int64_t i1, int64_t i2, int64_t i3, float* out);

}  // namespace sd
