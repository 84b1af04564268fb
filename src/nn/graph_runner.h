// Runs a graph that model code built for one call on one backend: places intermediates
// in a compute buffer kept across calls (same shape: no allocation), uploads the call's
// inputs, computes and reads the outputs back as f32. Weights the device cannot read
// where they live are staged segment by segment within its memory budget
// (backend/weight_streamer.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/compute_buffer.h"
#include "backend/weight_streamer.h"
#include "tensor/context.h"

namespace sd::nn {

// One call's graph context and its input data.
class GraphCall {
 public:
  Context& ctx() { return ctx_; }
  // A kFlagInput leaf whose data (host memory, alive and unchanged until run() returns) is
  // uploaded after allocation, or read in place where the device reads host memory.
  Tensor* input(const std::string& name, DType type, const Shape& ne, const void* data);
  Tensor* input_f32(const std::string& name, const Shape& ne, const float* data) {
    return input(name, DType::F32, ne, data);
  }
  const std::vector<std::pair<Tensor*, const void*>>& inputs() const { return inputs_; }

 private:
  Context ctx_;
  std::vector<std::pair<Tensor*, const void*>> inputs_;
};

class GraphRunner {
 public:
  explicit GraphRunner(Backend& backend);

  // Computes `outputs` and returns each as contiguous f32 values.
  std::vector<std::vector<float>> run(GraphCall& call, const std::vector<Tensor*>& outputs);
  // Computes `outputs` (each contiguous) and copies each, in its own dtype, to its
  // destination (nbytes() there): no conversion, no allocation. Outputs are copied after
  // everything has computed, so a destination may be an input's own data (on the CPU the
  // graph reads its inputs where they are, backend/borrowed_inputs.h).
  void run_into(GraphCall& call, const std::vector<std::pair<Tensor*, void*>>& outputs);
  // `out` as run() hands it back: contiguous f32 (a cast or copy in the graph where needed).
  static Tensor* f32_output(Context& ctx, Tensor* out);
  std::vector<float> run(GraphCall& call, Tensor* output) {
    return std::move(run(call, std::vector<Tensor*>{output})[0]);
  }

  Backend& backend() { return backend_; }
  size_t compute_buffer_size() const { return memory_.capacity(); }
  // Frees the compute buffer and the weight slots (when a phase ends); the next run
  // allocates again.
  void release() {
    memory_.release();
    streamer_.release();
    work_ = Work{};
  }
  // The arithmetic of the calls since the last release() and the seconds they computed
  // (from inputs uploaded to outputs ready): the rate a network ran at, beside the
  // device's peak (tensor/graph_flops.h).
  struct Work {
    int64_t calls = 0;
    double flops = 0, seconds = 0;
  };
  const Work& work() const { return work_; }
  // The same in words, "" before any call.
  std::string work_report() const;
  // How weights were streamed since this runner was made; "" when they were not.
  std::string streaming_report() const { return streamer_.describe(); }
  const StreamStats& streaming_stats() const { return streamer_.stats(); }

 private:
  Backend& backend_;
  ComputeBuffer memory_;
  WeightStreamer streamer_;
  Work work_;
};

}  // namespace sd::nn
