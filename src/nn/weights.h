// Where model code gets its parameters. A model asks for each weight by its canonical
// name (io/name_conversion.h) and the shape it expects; the source checks the shape and
// returns a leaf of the caller's graph context whose data is ready when the graph runs.
// Model code never sees files, devices or residency: the ModelManager (src/weights) is
// the production source, tests use random weights.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "tensor/context.h"
#include "tensor/ops/attention.h"
#include "tensor/ops/conv2d.h"

namespace sd::nn {

// The layout of kernel `w` that get_conv_kernel() returned for a [k, k, in, out] request.
ConvKernelLayout conv_kernel_layout(const Tensor* w, int64_t kernel);

// bf16 for a bf16 projection weight, else f32: the default of Weights::attention_precision.
AttentionPrecision attention_precision_for(const Tensor* projection_weight);

class Weights {
 public:
  virtual ~Weights() = default;
  // The parameter `name` as a kFlagParam leaf of `ctx`, with data bound. Throws an
  // sd::Error naming the tensor when it is missing or its shape is not `ne`.
  virtual Tensor* get(Context& ctx, const std::string& name, const Shape& ne) = 0;
  virtual bool contains(const std::string& name) const = 0;
  // A Conv2d kernel asked for as [KW, KH, Cin, Cout] (`ne`), for a convolution of the given
  // stride. A source may hold it in another layout of ops/conv2d.h instead, only where Cin
  // differs from KW so the shape tells them apart: channels-last [Cin, KW, KH, Cout], or for
  // a 3x3 kernel at stride 1 its Winograd transform [Cin, 4, 4, Cout]
  // (weights/model_manager.h, --quantize-convs). conv_kernel_layout() reads which.
  virtual Tensor* get_conv_kernel(Context& ctx, const std::string& name, const Shape& ne,
                                  int stride) {
    (void)stride;
    return get(ctx, name, ne);
  }
  // The precision of an attention whose query projection is `projection` (a leaf from
  // get()): bf16 when the projection is bf16 (a model run in bf16), else f32. A source may
  // choose bf16 for every attention of the module that owns the projection (--fa,
  // weights/model_manager.h).
  virtual AttentionPrecision attention_precision(const Tensor* projection) {
    return attention_precision_for(projection);
  }
  // Called by runners after a graph that read these weights ran: sources that staged
  // copies for it (weights kept on another device) drop them here.
  virtual void after_compute() {}
};

// A model's view of its weights below a name prefix, with the context it builds in:
//   Scope unet(ctx, weights, "model.diffusion_model.");
//   Tensor* w = unet["input_blocks.0.0"].param("weight", {3, 3, 4, 320});
class Scope {
 public:
  Scope(Context& ctx, Weights& weights, std::string prefix = {})
      : ctx_(&ctx), weights_(&weights), prefix_(std::move(prefix)) {}

  // The scope of a child module: prefix + child + ".".
  Scope operator[](std::string_view child) const;
  Scope operator[](int index) const { return (*this)[std::to_string(index)]; }

  Tensor* param(std::string_view name, std::initializer_list<int64_t> ne) const;
  // A Conv2d kernel [k, k, in, out] for a convolution of `stride`, possibly in another
  // layout (Weights::get_conv_kernel).
  Tensor* conv_kernel(std::string_view name, std::initializer_list<int64_t> ne, int stride) const;
  bool has(std::string_view name) const;
  // The precision of an attention whose query projection is `projection`
  // (Weights::attention_precision).
  AttentionPrecision attention_precision(const Tensor* projection) const {
    return weights_->attention_precision(projection);
  }

  Context& ctx() const { return *ctx_; }
  Weights& weights() const { return *weights_; }
  const std::string& prefix() const { return prefix_; }

 private:
  Context* ctx_;
  Weights* weights_;
  std::string prefix_;
};

}  // namespace sd::nn
