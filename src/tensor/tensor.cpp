#include "tensor/tensor.h"

namespace sd {

size_t Tensor::nbytes() const {
  for (int i = 0; i < kMaxDims; ++i) {
    if (ne[i] <= 0) return 0;
  }
  const int64_t bs = block_size(type);
  size_t bytes = type_size(type) * static_cast<size_t>(ne[0] / bs);
  for (int i = 1; i < kMaxDims; ++i) bytes += static_cast<size_t>(ne[i] - 1) * nb[i];
  return bytes;
}

bool Tensor::is_contiguous() const {
  size_t expect = type_size(type);
  if (nb[0] != expect) return false;
  expect *= static_cast<size_t>(ne[0] / block_size(type));
  for (int i = 1; i < kMaxDims; ++i) {
    if (ne[i] != 1 && nb[i] != expect) return false;
    expect *= static_cast<size_t>(ne[i]);
  }
  return true;
}

bool Tensor::rows_contiguous() const {
  return nb[0] == type_size(type);
}

const Tensor* Tensor::storage_root() const {
  const Tensor* t = this;
  while (t->view_src) t = t->view_src;
  return t;
}

Tensor* Tensor::storage_root() {
  Tensor* t = this;
  while (t->view_src) t = t->view_src;
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < kMaxDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

std::array<size_t, kMaxDims> contiguous_strides(DType type,
                                                const std::array<int64_t, kMaxDims>& ne) {
  std::array<size_t, kMaxDims> nb{};
  nb[0] = type_size(type);
  nb[1] = row_size(type, ne[0]);
  for (int i = 2; i < kMaxDims; ++i) nb[i] = nb[i - 1] * static_cast<size_t>(ne[i - 1]);
  return nb;
}

bool same_shape(const Tensor& a, const Tensor& b) {
  return a.ne == b.ne;
}

bool can_broadcast(const Tensor& a, const Tensor& b) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (b.ne[i] != 1 && b.ne[i] != a.ne[i]) return false;
  }
  return true;
}

}  // namespace sd
