// A view of weights under another name prefix: TAESD files name their tensors
// decoder.layers.* / encoder.layers.*, and the VAE runner reads them under "tae.", as
// sd.cpp prefixes a --taesd file.
#pragma once

#include <string>
#include <vector>

#include "nn/param_recorder.h"
#include "nn/weights.h"

namespace sd::pipeline {

class PrefixedWeights final : public nn::Weights {
 public:
  PrefixedWeights(nn::Weights& inner, std::string prefix)
      : inner_(inner), prefix_(std::move(prefix)) {}
  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
    return inner_.get(ctx, strip(name), ne);
  }
  Tensor* get_conv_kernel(Context& ctx, const std::string& name, const Shape& ne,
                          int stride) override {
    return inner_.get_conv_kernel(ctx, strip(name), ne, stride);
  }
  bool contains(const std::string& name) const override { return inner_.contains(strip(name)); }
  AttentionPrecision attention_precision(const Tensor* projection) override {
    return inner_.attention_precision(projection);
  }
  void after_compute() override { inner_.after_compute(); }

  // The parameters a runner reads, named as the inner weights name them.
  std::vector<nn::ParamDecl> strip(std::vector<nn::ParamDecl> params) const {
    for (nn::ParamDecl& p : params) p.name = strip(p.name);
    return params;
  }

 private:
  std::string strip(const std::string& name) const {
    return name.compare(0, prefix_.size(), prefix_) == 0 ? name.substr(prefix_.size()) : name;
  }
  nn::Weights& inner_;
  std::string prefix_;
};

}  // namespace sd::pipeline
