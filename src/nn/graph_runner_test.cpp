#include "nn/graph_runner.h"

#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_device.h"
#include "limited_device.h"
#include "tensor/error.h"
#include "tensor/host_memory.h"
#include "tensor/ops/cast.h"
#include "tensor/ops/concat.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/unary.h"
#include "tensor/ops/view.h"
#include "tensor/quant/kernels.h"
#include "test_support.h"

namespace sd::nn {
namespace {

constexpr int64_t kDim = 128;
constexpr size_t kWeightBytes = kDim * kDim * 4;  // 64 KiB
constexpr int kLayers = 8;

// Weights in host RAM, as the weights manager keeps a streamed module's.
class HostWeights {
 public:
  HostWeights() {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (int i = 0; i < kLayers; ++i) {
      std::vector<float> values(kDim * kDim);
      for (float& v : values) v = normal(rng);
      Tensor t;
      t.type = DType::F32;
      t.ne = {kDim, kDim, 1, 1};
      t.nb = contiguous_strides(DType::F32, t.ne);
      t.name = "layer" + std::to_string(i) + ".weight";
      buffers_.push_back(cpu_.buffer_type().allocate(t.nbytes()));
      bind_tensor(t, *buffers_.back(), 0);
      tensor_set(t, values.data());
      tensors_.push_back(t);
    }
  }
  // A leaf of `ctx` reading weight i where it lives.
  Tensor* leaf(Context& ctx, int i) {
    const Tensor& w = tensors_[static_cast<size_t>(i)];
    Tensor* t = ctx.new_tensor(w.type, w.ne, w.name);
    t->flags |= kFlagParam;
    t->buffer = w.buffer;
    t->data = w.data;
    return t;
  }

 private:
  CpuDevice cpu_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<Tensor> tensors_;
};

// Eight layers h = gelu(W h); layer 3 reads layer 2's weight again.
std::vector<float> run_mlp(GraphRunner& runner, HostWeights& weights, int64_t batch = 4) {
  std::vector<float> x(static_cast<size_t>(kDim * batch));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  GraphCall call;
  Tensor* h = call.input_f32("x", make_shape({kDim, batch}), x.data());
  for (int i = 0; i < kLayers; ++i)
    h = gelu(call.ctx(), matmul(call.ctx(), weights.leaf(call.ctx(), i == 3 ? 2 : i), h));
  return runner.run(call, h);
}

class Streaming : public ::testing::Test {
 protected:
  std::vector<float> reference(int64_t batch = 4) {
    CpuDevice cpu;
    std::unique_ptr<Backend> backend = cpu.create_backend(BackendOptions{2});
    GraphRunner runner(*backend);
    return run_mlp(runner, weights_, batch);
  }
  HostWeights weights_;
};

TEST_F(Streaming, CutGraphGivesTheSameValuesWithinTheBudget) {
  const std::vector<float> expected = reference();
  for (bool prefetch : {false, true}) {
    test::LimitedDevice device(size_t{1} << 30);
    std::unique_ptr<Backend> backend = device.create_backend(BackendOptions{2});
    // Room for the compute buffer and three of the seven distinct weights.
    const size_t budget = 3 * kWeightBytes + 64 * 1024;
    backend->set_memory_budget(MemoryBudget{budget, prefetch});
    GraphRunner runner(*backend);
    EXPECT_EQ(run_mlp(runner, weights_), expected) << "prefetch " << prefetch;
    EXPECT_LE(device.peak_bytes(), budget) << "prefetch " << prefetch;
    const StreamStats& s = runner.streaming_stats();
    EXPECT_GE(s.segments, prefetch ? 4u : 3u) << "prefetch " << prefetch;
    EXPECT_EQ(s.bytes_uploaded, 7 * kWeightBytes);
    EXPECT_NE(runner.streaming_report().find("segments on LIMITED0"), std::string::npos)
        << runner.streaming_report();
    // Every weight is sent again each run: the slots take turns.
    EXPECT_EQ(run_mlp(runner, weights_), expected);
    EXPECT_EQ(runner.streaming_stats().bytes_uploaded, 14 * kWeightBytes);
    runner.release();
    EXPECT_EQ(device.live_bytes(), 0u);
  }
}

TEST_F(Streaming, WeightsThatFitAreSentOnce) {
  const std::vector<float> expected = reference();
  test::LimitedDevice device(size_t{1} << 30);
  std::unique_ptr<Backend> backend = device.create_backend(BackendOptions{2});
  GraphRunner runner(*backend);  // no budget: everything in one slot
  EXPECT_EQ(run_mlp(runner, weights_), expected);
  EXPECT_EQ(run_mlp(runner, weights_), expected);
  EXPECT_EQ(runner.streaming_stats().segments, 2u);
  EXPECT_EQ(runner.streaming_stats().bytes_uploaded, 7 * kWeightBytes);
}

TEST_F(Streaming, ADeviceWithSmallAllocationsGetsItsMemoryInChunks) {
  // Activations of 50 KiB (batch 100) and weights of 64 KiB each fit one 80 KiB allocation;
  // the compute buffer and the slot of seven weights do not.
  const std::vector<float> expected = reference(100);
  test::LimitedDevice device(size_t{1} << 30, 80 * 1024);
  std::unique_ptr<Backend> backend = device.create_backend(BackendOptions{2});
  GraphRunner runner(*backend);
  EXPECT_EQ(run_mlp(runner, weights_, 100), expected);
  EXPECT_GT(runner.compute_buffer_size(), 80u * 1024);  // in more than one buffer
  EXPECT_EQ(runner.streaming_stats().segments, 7u);     // one weight per allocation
}

TEST_F(Streaming, ABudgetTooSmallIsAnErrorThatSaysWhatToRaise) {
  test::LimitedDevice device(size_t{1} << 30);
  std::unique_ptr<Backend> backend = device.create_backend(BackendOptions{2});
  GraphRunner runner(*backend);
  backend->set_memory_budget(MemoryBudget{1024, false});  // not even the compute buffer
  try {
    run_mlp(runner, weights_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("compute buffer"), std::string::npos) << m;
    EXPECT_NE(m.find("raise --max-vram"), std::string::npos) << m;
  }
  // Room for half a weight beside the compute buffer.
  test::LimitedDevice unlimited(size_t{1} << 30);
  std::unique_ptr<Backend> measure = unlimited.create_backend(BackendOptions{2});
  GraphRunner measured(*measure);
  run_mlp(measured, weights_);
  backend->set_memory_budget(
      MemoryBudget{measured.compute_buffer_size() + kWeightBytes / 2, false});
  try {
    run_mlp(runner, weights_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot be split"), std::string::npos) << m;
    EXPECT_NE(m.find("LIMITED0"), std::string::npos) << m;
  }
}

// run_into copies each output in its own type to where the caller says; a destination may
// be an input's own data, since inputs are uploaded before anything computes.
TEST(GraphRunner, RunIntoWritesOutputsInTheirOwnTypeEvenOverAnInput) {
  GraphRunner runner(sd::test::cpu_backend());
  std::vector<float> input = {1.0f, -2.0f, 0.5f, 4.0f};
  std::vector<uint16_t> halves(4);
  GraphCall call;
  Tensor* x = call.input_f32("x", make_shape({4}), input.data());
  Tensor* doubled = scale(call.ctx(), x, 2.0f);
  runner.run_into(call, {{cast(call.ctx(), doubled, DType::F16), halves.data()},
                         {scale(call.ctx(), x, 3.0f), input.data()}});
  const std::vector<float> doubled_values = {2.0f, -4.0f, 1.0f, 8.0f};
  std::vector<uint16_t> expected_halves(4);
  quant::convert_f32_to_f16(doubled_values.data(), expected_halves.data(), 4);
  EXPECT_EQ(halves, expected_halves);
  EXPECT_EQ(input, (std::vector<float>{3.0f, -6.0f, 1.5f, 12.0f}));
}

// The runner tallies each call's products, convolutions and attention and the time they
// took, for the rate a phase reports; release() starts a new tally.
TEST(GraphRunner, TalliesTheArithmeticOfItsCalls) {
  GraphRunner runner(sd::test::cpu_backend());
  EXPECT_EQ(runner.work_report(), "");
  std::vector<float> w(6 * 4, 0.5f), x(6 * 5, 1.0f);
  for (int i = 0; i < 2; ++i) {
    GraphCall call;
    Tensor* y = matmul(call.ctx(), call.input_f32("w", make_shape({6, 4}), w.data()),
                       call.input_f32("x", make_shape({6, 5}), x.data()));
    EXPECT_EQ(runner.run(call, add(call.ctx(), y, y)), std::vector<float>(20, 6.0f));
  }
  EXPECT_EQ(runner.work().calls, 2);
  EXPECT_EQ(runner.work().flops, 2 * (2.0 * 6 * 4 * 5));
  EXPECT_GT(runner.work().seconds, 0.0);
  EXPECT_NE(runner.work_report().find("2 calls"), std::string::npos) << runner.work_report();
  runner.release();
  EXPECT_EQ(runner.work().calls, 0);
  EXPECT_EQ(runner.work_report(), "");
}

// On the CPU an input is read where its caller holds it (aligned as the device's buffers
// are): the compute buffer holds only computed values, the input's views read the caller's
// memory, and the tensor is unbound afterwards. An input the device cannot read in place
// (misaligned here; any input of a device with its own memory) is uploaded as before.
TEST(GraphRunner, TheCpuReadsAlignedInputsWhereTheCallerHoldsThem) {
  constexpr int64_t n = 4096;
  HostVector<float> storage(n + 1);
  for (int64_t i = 0; i <= n; ++i) storage[static_cast<size_t>(i)] = static_cast<float>(i % 13);
  // y = 2 x + (the second half of x repeated twice, through a view)
  auto run = [&](GraphRunner& runner, const float* data, float* destination, bool borrowed) {
    GraphCall call;
    Tensor* x = call.input_f32("x", make_shape({n}), data);
    Tensor* half = cont(call.ctx(), slice(call.ctx(), x, 0, n / 2, n));
    Tensor* y = add(call.ctx(), scale(call.ctx(), x, 2.0f), concat(call.ctx(), half, half, 0));
    runner.run_into(call, {{y, destination}});
    if (borrowed)
      EXPECT_EQ(x->data, nullptr);  // unbound
    else
      EXPECT_NE(x->data, static_cast<const void*>(data));  // its copy in the compute buffer
  };
  std::vector<float> expected(n);
  for (int64_t i = 0; i < n; ++i)
    expected[static_cast<size_t>(i)] =
        2.0f * static_cast<float>(i % 13) + static_cast<float>((n / 2 + i % (n / 2)) % 13);
  const size_t input_bytes = n * sizeof(float);

  GraphRunner cpu(sd::test::cpu_backend());
  std::vector<float> out(n);
  run(cpu, storage.data(), out.data(), true);
  EXPECT_EQ(out, expected);
  const size_t borrowed_buffer = cpu.compute_buffer_size();

  test::LimitedDevice device(size_t{1} << 30);
  std::unique_ptr<Backend> backend = device.create_backend(BackendOptions{2});
  GraphRunner uploading(*backend);
  std::fill(out.begin(), out.end(), 0.0f);
  run(uploading, storage.data(), out.data(), false);
  EXPECT_EQ(out, expected);
  EXPECT_GE(uploading.compute_buffer_size(), borrowed_buffer + input_bytes);

  // Misaligned by one value: copied into the compute buffer.
  HostVector<float> shifted(n + 1);
  std::copy(storage.begin(), storage.begin() + n, shifted.begin() + 1);
  GraphRunner copying(sd::test::cpu_backend());
  run(copying, shifted.data() + 1, out.data(), false);
  EXPECT_EQ(out, expected);
  EXPECT_GE(copying.compute_buffer_size(), borrowed_buffer + input_bytes);

  // The result over the input's own memory: written after the graph has read it.
  run(cpu, storage.data(), storage.data(), true);
  EXPECT_EQ(std::vector<float>(storage.begin(), storage.begin() + n), expected);
}

TEST(GraphRunner, RunIntoRefusesAnOutputThatIsNotContiguous) {
  GraphRunner runner(sd::test::cpu_backend());
  std::vector<float> input(6, 1.0f), out(6);
  GraphCall call;
  Tensor* x = call.input_f32("x", make_shape({3, 2}), input.data());
  Tensor* transposed = permute(call.ctx(), scale(call.ctx(), x, 2.0f), {1, 0, 2, 3});
  EXPECT_THROW(runner.run_into(call, {{transposed, out.data()}}), Error);
}

}  // namespace
}  // namespace sd::nn
