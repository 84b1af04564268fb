// A tensor: dtype, shape, byte strides, and where its data lives. The layout is GGUF's
// (ne[0] fastest, nb[] in bytes), so weight files map onto tensors without reshuffling.
// Tensors produced by ops also record the op, its parameters and sources; that record is
// the graph.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/dtype.h"
#include "tensor/op.h"

namespace sd {

class Buffer;

constexpr int kMaxDims = 4;
constexpr int kMaxSrc = 4;
constexpr int kMaxOpParams = 16;

enum TensorFlags : uint32_t {
  kFlagInput = 1u << 0,   // data set by the caller before compute
  kFlagOutput = 1u << 1,  // read by the caller after compute: never reused
  kFlagParam = 1u << 2,   // a weight: owned by whoever loads weights, not by the graph
};

struct Tensor {
  DType type = DType::F32;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};
  std::array<size_t, kMaxDims> nb{};

  Op op = Op::None;
  std::array<int32_t, kMaxOpParams> params{};
  std::array<Tensor*, kMaxSrc> src{};

  Tensor* view_src = nullptr;  // the tensor whose memory this one aliases
  size_t view_offset = 0;      // bytes from view_src->data

  Buffer* buffer = nullptr;
  void* data = nullptr;

  uint32_t flags = 0;
  std::string name;

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  // Bytes spanned from the first to one past the last element (strides may leave gaps).
  size_t nbytes() const;
  bool is_contiguous() const;
  // Rows are contiguous (nb[0] is the element size) even if the rows are strided.
  bool rows_contiguous() const;
  bool has_flag(TensorFlags f) const { return (flags & f) != 0; }
  // The tensor that owns the memory a view chain aliases.
  const Tensor* storage_root() const;
  Tensor* storage_root();

  float param_f32(int i) const {
    float f;
    std::memcpy(&f, &params[i], 4);
    return f;
  }
  void set_param_f32(int i, float f) { std::memcpy(&params[i], &f, 4); }

  // "[4, 64, 64, 1]" for messages.
  std::string shape_string() const;
};

// Contiguous strides for a shape of `type`.
std::array<size_t, kMaxDims> contiguous_strides(DType type,
                                                const std::array<int64_t, kMaxDims>& ne);

bool same_shape(const Tensor& a, const Tensor& b);
// b can be broadcast to a: every dim of b is 1 or equal to a's.
bool can_broadcast(const Tensor& a, const Tensor& b);

}  // namespace sd
