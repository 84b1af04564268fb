// A Weights that records which parameters a graph asks for (name and shape) instead of
// giving data: runners build their graphs once with it to declare their parameters, so
// the ModelManager can check them against the files up front and load them ahead of use.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nn/weights.h"

namespace sd::nn {

struct ParamDecl {
  std::string name;
  Shape ne;
  int conv_stride = 0;  // > 0: a conv kernel, asked for through get_conv_kernel()
};

class ParamRecorder final : public Weights {
 public:
  // `source` answers contains(), so optional parameters are chosen as the real run would.
  explicit ParamRecorder(const Weights& source) : source_(source) {}

  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
    if (seen_.insert(name).second) params_.push_back({name, ne});
    Tensor* leaf = ctx.new_tensor(DType::F32, ne, name);
    leaf->flags |= kFlagParam;
    return leaf;
  }
  Tensor* get_conv_kernel(Context& ctx, const std::string& name, const Shape& ne,
                          int stride) override {
    Tensor* leaf = get(ctx, name, ne);
    for (ParamDecl& p : params_)
      if (p.name == name) p.conv_stride = stride;
    return leaf;
  }
  bool contains(const std::string& name) const override { return source_.contains(name); }

  // In first-use order, each once.
  const std::vector<ParamDecl>& params() const { return params_; }

 private:
  const Weights& source_;
  std::set<std::string> seen_;
  std::vector<ParamDecl> params_;
};

}  // namespace sd::nn
