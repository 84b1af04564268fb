#include "tensor/context.h"

#include "tensor/error.h"

namespace sd {

Shape make_shape(std::initializer_list<int64_t> dims) {
  SD_CHECK(dims.size() >= 1 && dims.size() <= kMaxDims, "[tensor] a shape has 1 to 4 dims, got %zu",
           dims.size());
  Shape ne{1, 1, 1, 1};
  int i = 0;
  for (int64_t d : dims) ne[i++] = d;
  return ne;
}

static void check_shape(DType type, const Shape& ne) {
  for (int i = 0; i < kMaxDims; ++i) {
    SD_CHECK(ne[i] >= 0, "[tensor] dim %d is negative (%lld)", i, static_cast<long long>(ne[i]));
  }
  SD_CHECK(ne[0] % block_size(type) == 0,
           "[tensor] %s rows hold blocks of %lld values, but ne[0] = %lld",
           std::string(dtype_name(type)).c_str(), static_cast<long long>(block_size(type)),
           static_cast<long long>(ne[0]));
}

Tensor* Context::new_tensor(DType type, const Shape& ne, std::string name) {
  check_shape(type, ne);
  Tensor& t = tensors_.emplace_back();
  t.type = type;
  t.ne = ne;
  t.nb = contiguous_strides(type, ne);
  t.name = std::move(name);
  return &t;
}

Tensor* Context::new_op(Op op, DType type, const Shape& ne, std::initializer_list<Tensor*> srcs) {
  Tensor* t = new_tensor(type, ne);
  t->op = op;
  int i = 0;
  for (Tensor* s : srcs) t->src[i++] = s;
  return t;
}

Tensor* Context::new_view(Op op, Tensor* src, DType type, const Shape& ne,
                          const std::array<size_t, kMaxDims>& nb, size_t offset) {
  check_shape(type, ne);
  Tensor& t = tensors_.emplace_back();
  t.type = type;
  t.ne = ne;
  t.nb = nb;
  t.op = op;
  t.src[0] = src;
  t.view_src = src;
  t.view_offset = offset;
  t.name = src->name.empty() ? std::string() : src->name + " (view)";
  SD_CHECK(offset + t.nbytes() <= src->nbytes(),
           "[view] view of %s bytes at offset %zu ends past the source '%s' (%zu bytes)",
           std::to_string(t.nbytes()).c_str(), offset, src->name.c_str(), src->nbytes());
  return &t;
}

Tensor* set_name(Tensor* t, std::string name) {
  t->name = std::move(name);
  return t;
}

}  // namespace sd
