#include "nn/weights.h"

namespace sd::nn {

Scope Scope::operator[](std::string_view child) const {
  std::string p = prefix_;
  p.append(child);
  p.push_back('.');
  return Scope(*ctx_, *weights_, std::move(p));
}

Tensor* Scope::param(std::string_view name, std::initializer_list<int64_t> ne) const {
  return weights_->get(*ctx_, prefix_ + std::string(name), make_shape(ne));
}

Tensor* Scope::conv_kernel(std::string_view name, std::initializer_list<int64_t> ne,
                           int stride) const {
  return weights_->get_conv_kernel(*ctx_, prefix_ + std::string(name), make_shape(ne), stride);
}

ConvKernelLayout conv_kernel_layout(const Tensor* w, int64_t kernel) {
  if (w->ne[0] == kernel) return ConvKernelLayout::Standard;
  return w->ne[1] == kernel ? ConvKernelLayout::ChannelsLast : ConvKernelLayout::WinogradF2x3;
}

AttentionPrecision attention_precision_for(const Tensor* projection_weight) {
  return projection_weight->type == DType::BF16 ? AttentionPrecision::BF16
                                                : AttentionPrecision::F32;
}

bool Scope::has(std::string_view name) const {
  return weights_->contains(prefix_ + std::string(name));
}

}  // namespace sd::nn
