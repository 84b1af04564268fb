// Weights for building (not running) a full-size graph in a test: records every parameter
// a model asks for, with its shape, and hands out leaves without data.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "nn/weights.h"
#include "tensor/context.h"

namespace sd::test {

class RecordingWeights final : public nn::Weights {
 public:
  // Matrices get `matrix_type` (as a checkpoint stores them), vectors f32.
  explicit RecordingWeights(DType matrix_type = DType::F32) : matrix_type_(matrix_type) {}

  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
    auto [it, fresh] = requested_.emplace(name, ne);
    EXPECT_TRUE(fresh || it->second == ne) << name << " requested with two shapes";
    Tensor* t = ctx.new_tensor(ne[1] > 1 ? matrix_type_ : DType::F32, ne, name);
    t->flags |= kFlagParam;
    return t;
  }
  bool contains(const std::string&) const override { return true; }
  const std::map<std::string, Shape>& requested() const { return requested_; }

 private:
  DType matrix_type_;
  std::map<std::string, Shape> requested_;
};

}  // namespace sd::test
