// 3x3 Conv2d at Stable Diffusion 1.5 (512x512) UNet shapes, batch 2 (classifier-free
// guidance): 320 channels at 64x64 latents, 640 at 32x32, 1280 at 16x16 and 8x8; f32, bf16
// and f16 weights (f16: converted per call, by weight tiles at 8x8). BM_Conv2dLayout times
// oneDNN alone on the same shapes with plain nchw input and output against its blocked
// layout (+ reorders) and nhwc (+ reorders), the measurement behind conv2d.cpp's
// kActivationLayout.
// Run: OMP_NUM_THREADS=2 sd-bench --benchmark_filter=Conv2d
#include <oneapi/dnnl/dnnl.hpp>

#include "linalg_bench.h"
#include "tensor/ops/conv2d.h"

namespace sd {
namespace {

struct ConvShape {
  const char* name;
  int64_t C, HW;
};

constexpr ConvShape kConvShapes[] = {{"320@64x64", 320, 64},
                                     {"640@32x32", 640, 32},
                                     {"1280@16x16", 1280, 16},
                                     {"1280@8x8", 1280, 8}};
constexpr DType kConvTypes[] = {DType::F32, DType::BF16, DType::F16};
constexpr int64_t kConvBatch = 2;

double conv_flops(const ConvShape& s) {
  return 2.0 * kConvBatch * s.C * s.C * 9 * s.HW * s.HW;
}

// Args: shape index, weight dtype index.
void BM_Conv2d(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  const DType t = kConvTypes[state.range(1)];
  bench::run_linalg_bench(
      state, conv_flops(s),
      [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {s.HW, s.HW, s.C, kConvBatch}, "x");
        return conv2d(ctx, x, bench::weight(ctx, t, {3, 3, s.C, s.C}, "w"),
                      bench::weight(ctx, DType::F32, {s.C}, "b"), 1, 1, 1, 1, 1, 1);
      },
      std::string(s.name) + " " + std::string(dtype_name(t)));
}

BENCHMARK(BM_Conv2d)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

// The int8 convolutions (--quantize-convs) on the same shapes, q8_0 kernels: arg 1 is 0 for
// channels-last (the direct kernel), 1 for the Winograd transform. FLOP/s count the direct
// method's multiply-adds, as for bf16 Winograd above.
void BM_Conv2dInt8(benchmark::State& state) {
  const ConvShape& s = kConvShapes[state.range(0)];
  const bool winograd = state.range(1) == 1;
  bench::run_linalg_bench(
      state, conv_flops(s),
      [&](Context& ctx) {
        Tensor* x = ctx.new_tensor(DType::F32, {s.HW, s.HW, s.C, kConvBatch}, "x");
        const int64_t taps = winograd ? 4 : 3;
        return conv2d(ctx, x, bench::weight(ctx, DType::Q8_0, {s.C, taps, taps, s.C}, "w"),
                      bench::weight(ctx, DType::F32, {s.C}, "b"), 1, 1, 1, 1, 1, 1, 1,
                      winograd ? ConvKernelLayout::WinogradF2x3 : ConvKernelLayout::ChannelsLast);
      },
      std::string(s.name) + (winograd ? " q8_0 Winograd" : " q8_0 channels-last"));
}

BENCHMARK(BM_Conv2dInt8)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

// oneDNN alone, f32 input and output in nchw, weights packed once. Arg 1: 0 plain nchw
// convolution, 1 blocked layout of oneDNN's choice, 2 nhwc; the reorders into and out of
// the convolution's layout are timed with it. Arg 2: 0 f32, 1 bf16 convolution.
void BM_Conv2dLayout(benchmark::State& state) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const ConvShape& s = kConvShapes[state.range(0)];
  const tag layouts[] = {tag::nchw, tag::any, tag::nhwc};
  const tag layout = layouts[state.range(1)];
  const auto type = state.range(2) ? memory::data_type::bf16 : memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const memory::dims act = {kConvBatch, s.C, s.HW, s.HW}, w_dims = {s.C, s.C, 3, 3};
  const memory::desc user(act, memory::data_type::f32, tag::nchw);
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          memory::desc(act, type, layout), memory::desc(w_dims, type, tag::any),
          memory::desc({s.C}, memory::data_type::f32, tag::a),
          memory::desc(act, memory::data_type::f32, layout), {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      eng);
  memory x(user, eng), y(user, eng), w(pd.weights_desc(), eng), b(pd.bias_desc(), eng);
  for (memory* m : {&x, &w, &b}) {
    std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
  }
  const bool reorder_in = pd.src_desc() != user, reorder_out = pd.dst_desc() != user;
  memory src = reorder_in ? memory(pd.src_desc(), eng) : x;
  memory dst = reorder_out ? memory(pd.dst_desc(), eng) : y;
  dnnl::convolution_forward conv(pd);
  dnnl::reorder to_conv = reorder_in ? dnnl::reorder(x, src) : dnnl::reorder();
  dnnl::reorder from_conv = reorder_out ? dnnl::reorder(dst, y) : dnnl::reorder();
  auto run = [&] {
    if (reorder_in) to_conv.execute(stream, x, src);
    conv.execute(
        stream,
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, dst}});
    if (reorder_out) from_conv.execute(stream, dst, y);
    stream.wait();
  };
  run();
  for (auto _ : state) run();
  state.counters["FLOPS"] = benchmark::Counter(
      conv_flops(s) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(s.name) + " " + pd.impl_info_str());
}

BENCHMARK(BM_Conv2dLayout)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->ComputeStatistics("max", sd::bench::max_value);

}  // namespace
}  // namespace sd
