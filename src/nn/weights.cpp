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

bool Scope::has(std::string_view name) const {
  return weights_->contains(prefix_ + std::string(name));
}

}  // namespace sd::nn
