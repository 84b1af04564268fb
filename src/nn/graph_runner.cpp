#include "nn/graph_runner.h"

#include <chrono>

#include "backend/borrowed_inputs.h"
#include "backend/release_after_use.h"
#include "tensor/error.h"
#include "tensor/graph.h"
#include "tensor/graph_flops.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/view.h"

namespace sd::nn {

Tensor* GraphCall::input(const std::string& name, DType type, const Shape& ne, const void* data) {
  Tensor* t = ctx_.new_tensor(type, ne, name);
  t->flags |= kFlagInput;
  inputs_.emplace_back(t, data);
  return t;
}

GraphRunner::GraphRunner(Backend& backend)
    : backend_(backend), memory_(backend.device().buffer_type()), streamer_(backend) {}

std::vector<std::vector<float>> GraphRunner::run(GraphCall& call,
                                                 const std::vector<Tensor*>& outputs) {
  std::vector<std::vector<float>> values;
  std::vector<std::pair<Tensor*, void*>> destinations;
  for (Tensor* out : outputs) {
    out = f32_output(call.ctx(), out);
    values.emplace_back(static_cast<size_t>(out->nelements()));
    destinations.emplace_back(out, values.back().data());
  }
  run_into(call, destinations);
  return values;
}

Tensor* GraphRunner::f32_output(Context& ctx, Tensor* out) {
  if (out->type != DType::F32) return cast(ctx, out, DType::F32);
  return out->is_contiguous() ? out : cont(ctx, out);
}

void GraphRunner::run_into(GraphCall& call, const std::vector<std::pair<Tensor*, void*>>& outputs) {
  std::vector<Tensor*> results;
  for (const auto& [out, destination] : outputs) {
    SD_CHECK(out->is_contiguous() && destination,
             "[graph] output '%s' must be contiguous and have somewhere to go", out->name.c_str());
    results.push_back(out);
  }
  Graph graph = Graph::build(results);
  check_supported(backend_.device(), graph);
  const std::vector<Tensor*> staged = WeightStreamer::off_device_weights(graph, backend_.device());
  // Inputs the device reads where the caller holds them take no compute buffer memory.
  const BorrowedInputs borrowed(backend_.device(), graph, call.inputs());
  memory_.allocate(graph);
  if (!staged.empty()) streamer_.bind(graph, staged, memory_.capacity());
  const auto start = std::chrono::steady_clock::now();
  // An input the graph does not read has no memory; there is nothing to upload.
  for (auto& [t, data] : call.inputs())
    if (t->data && !borrowed.borrowed(t)) tensor_set(*t, data);
  if (staged.empty())
    compute_releasing_weights(backend_, graph);
  else
    streamer_.run(graph);
  backend_.synchronize();
  work_.calls += 1;
  work_.flops += graph_flops(graph);
  work_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [out, destination] : outputs) tensor_get(*out, destination);
}

std::string GraphRunner::work_report() const {
  if (work_.calls == 0 || work_.seconds <= 0) return "";
  return format(
      "%lld calls, %.2f TFLOP of products, convolutions and attention in %.1f s: %.0f GFLOP/s",
      static_cast<long long>(work_.calls), work_.flops / 1e12, work_.seconds,
      work_.flops / 1e9 / work_.seconds);
}

}  // namespace sd::nn
