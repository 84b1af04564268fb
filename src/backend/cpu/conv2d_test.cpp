// Fast Conv2d (oneDNN) against the reference kernel: kernel sizes, stride, padding,
// dilation, groups (depthwise included), bias, strided input views and weight dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "backend/cpu/conv2d_weight_tiles.h"
#include "backend/cpu/conv2d_winograd_bf16.h"
#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/linalg_kernels.h"
#include "simd_test_util.h"
#include "tensor/ops/conv2d.h"
#include "tensor/ops/upscale.h"
#include "tensor/ops/view.h"

namespace sd {
namespace {

// Error bounds, for values uniform in [-1, 1] summed over R = Cin/groups * KH * KW taps:
// - f32 (f32 and f16 weights; f16 converts to f32 exactly): blocked f32 sums against the
//   reference's double sums, observed up to 5e-8 R; 3e-7 R leaves a margin of 6 and stays
//   far below an indexing bug's O(1) error.
// - bf16 weights: the input is rounded to bf16 too, 2^-8 relative error per product, a
//   random walk over R taps: 2^-7 sqrt(R) is a bound with margin (observed up to a
//   quarter of it; see matmul_test.cpp).
// - bf16 Winograd: each output sums 9 transformed products per channel, whose operands are
//   sums of up to four inputs or nine weights, each rounded to bf16: an error variance
//   about 2.8x the direct sum's (1.7x its spread). Twice the direct bound holds it
//   (observed up to 0.45 of that).
double atol_for(DType w, int64_t taps) {
  return w == DType::BF16 ? std::sqrt(static_cast<double>(taps)) / 128
                          : 3e-7 * static_cast<double>(taps);
}
double winograd_bf16_atol(int64_t taps) {
  return 2 * atol_for(DType::BF16, taps);
}

struct ConvCase {
  int64_t W, H, cin, N, KW, KH, cout;
  int s0, s1, p0, p1, d0, d1, groups;
  bool bias;
};

test::GraphCase conv_case(const ConvCase& k, DType wt, bool permuted_x = false) {
  test::GraphCase c;
  c.build = [=](Context& ctx) {
    // A permuted view: the leaf is [W, Cin, H, N] and the op sees [W, H, Cin, N].
    Tensor* x = permuted_x ? permute(ctx, ctx.new_tensor(DType::F32, {k.W, k.cin, k.H, k.N}, "x_p"),
                                     {0, 2, 1, 3})
                           : ctx.new_tensor(DType::F32, {k.W, k.H, k.cin, k.N}, "x");
    Tensor* w = ctx.new_tensor(wt, {k.KW, k.KH, k.cin / k.groups, k.cout}, "w");
    Tensor* b = k.bias ? ctx.new_tensor(DType::F32, {k.cout}, "b") : nullptr;
    return std::vector<Tensor*>{conv2d(ctx, x, w, b, k.s0, k.s1, k.p0, k.p1, k.d0, k.d1, k.groups)};
  };
  return c;
}

void expect_matches(const ConvCase& k, DType wt, bool permuted_x = false) {
  const int64_t taps = k.cin / k.groups * k.KW * k.KH + (k.bias ? 1 : 0);
  test::expect_fast_path(conv_case(k, wt, permuted_x), atol_for(wt, taps), 0);
}

TEST(CpuConv2d, KernelsStridesPaddingDilation) {
  const ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, groups, bias
      {9, 7, 5, 2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, true},       // SD's 3x3, odd sizes
      {16, 16, 32, 1, 3, 3, 16, 2, 2, 1, 1, 1, 1, 1, true},   // downsampling conv
      {13, 11, 19, 1, 1, 1, 23, 1, 1, 0, 0, 1, 1, 1, false},  // 1x1 projection
      {12, 10, 4, 2, 3, 2, 5, 2, 1, 0, 2, 2, 3, 1, false},    // asymmetric everything
      {5, 8, 3, 1, 5, 3, 4, 3, 2, 1, 0, 1, 1, 1, true},       // stride that does not divide
      {4, 4, 2, 1, 1, 1, 2, 2, 2, 0, 0, 1, 1, 1, false},      // right edge cut off (pad_r < 0)
      {8, 6, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},       // one input channel
  };
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << " k " << k.KW << "x"
                                    << k.KH << " s " << k.s0 << "," << k.s1 << " p " << k.p0 << ","
                                    << k.p1 << " d " << k.d0 << "," << k.d1);
    expect_matches(k, DType::F32);
  }
}

TEST(CpuConv2d, Groups) {
  expect_matches({10, 9, 8, 2, 3, 3, 12, 1, 1, 1, 1, 1, 1, 4, true}, DType::F32);
  expect_matches({10, 9, 6, 1, 3, 3, 6, 1, 1, 1, 1, 1, 1, 6, true}, DType::F32);  // depthwise
  expect_matches({7, 7, 6, 1, 3, 3, 12, 2, 2, 1, 1, 2, 2, 3, false}, DType::F16);
}

TEST(CpuConv2d, WeightDtypes) {
  const ConvCase k{11, 9, 20, 2, 3, 3, 17, 1, 1, 1, 1, 1, 1, 1, true};
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    expect_matches(k, t);
    expect_matches({11, 9, 20, 2, 3, 3, 16, 1, 1, 1, 1, 1, 1, 2, false}, t);
  }
}

TEST(CpuConv2d, StridedInputView) {
  expect_matches({9, 7, 6, 2, 3, 3, 5, 1, 1, 1, 1, 1, 1, 1, true}, DType::F32, true);
  expect_matches({9, 7, 6, 2, 3, 3, 5, 2, 2, 1, 1, 1, 1, 1, true}, DType::BF16, true);
}

// The conv node of case k in CPU memory, its inputs random values from `seed` on.
struct FilledConv {
  FilledConv(const ConvCase& k, DType wt, uint32_t seed, bool permuted_x = false)
      : FilledConv([&](Context& c) { return conv_case(k, wt, permuted_x).build(c).back(); }, seed) {
  }
  // The conv node `build` makes.
  FilledConv(const std::function<Tensor*(Context&)>& build, uint32_t seed)
      : memory(DeviceRegistry::instance().get("CPU").buffer_type()) {
    out = build(ctx);
    Graph graph = Graph::build({out});
    memory.allocate(graph);
    for (size_t i = 0; i < graph.leafs.size(); ++i) {
      Tensor& leaf = *graph.leafs[i];
      const std::vector<float> values = test::random_values(leaf.nelements(), seed + i);
      std::vector<uint8_t> bytes(leaf.nbytes());
      quantize_rows(leaf.type, values.data(), bytes.data(), leaf.nrows(), leaf.ne[0]);
      tensor_set(leaf, bytes.data());
    }
  }
  std::vector<float> output() const {
    std::vector<float> values(out->nelements());
    tensor_get(*out, values.data());
    return values;
  }
  Context ctx;
  ComputeBuffer memory;
  Tensor* out = nullptr;
};

// The conv of case k run by `kernel` in a context that `configure` sets up, against the
// reference kernel. False, with nothing compared, when the kernel declined the node.
bool kernel_matches(const ConvCase& k, DType wt,
                    const std::function<void(DnnlState&, const Tensor* out)>& configure,
                    bool (*kernel)(CpuContext&, Tensor*), double atol, bool permuted_x = false) {
  FilledConv conv(k, wt, 7, permuted_x);
  Tensor* out = conv.out;
  reference_kernel(Op::Conv2d)(out);
  const std::vector<float> expected = conv.output();
  // NaN where the kernel writes nothing, so an output it skips cannot pass as the
  // reference's.
  const std::vector<float> unwritten(expected.size(), std::nanf(""));
  tensor_set(*out, unwritten.data());
  CpuContext cpu_ctx;
  cpu_ctx.threads = 2;
  configure(*cpu_ctx.dnnl, out);
  if (!kernel(cpu_ctx, out)) return false;
  const std::vector<float> fast = conv.output();
  for (size_t i = 0; i < fast.size(); ++i) {
    EXPECT_NEAR(fast[i], expected[i], atol) << "output " << i << " of " << out->shape_string();
    if (std::abs(fast[i] - expected[i]) > atol) break;
  }
  return true;
}

// The conv of case k run by the fast kernel in bands of `band_rows` output rows (a context
// whose band budget is that many rows), and by the reference kernel.
void expect_bands_match(const ConvCase& k, DType wt, int64_t band_rows, bool permuted_x = false) {
  const auto configure = [&](DnnlState& st, const Tensor* out) {
    st.conv_band_min_bytes = 0;
    st.conv_band_bytes =
        static_cast<size_t>(band_rows * out->ne[0] * out->ne[2] * out->ne[3]) * sizeof(float);
  };
  const double atol = atol_for(wt, k.cin / k.groups * k.KW * k.KH + 1);
  EXPECT_TRUE(kernel_matches(k, wt, configure, cpu_conv2d, atol, permuted_x));
}

TEST(CpuConv2d, RowBands) {
  const ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, groups, bias
      {9, 13, 5, 2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, true},    // SD's 3x3
      {16, 15, 8, 1, 3, 3, 8, 2, 2, 0, 0, 1, 1, 1, true},   // VAE downsample, no padding
      {12, 14, 4, 1, 3, 3, 5, 1, 2, 1, 2, 2, 3, 1, false},  // stride, dilation, wide pad
      {4, 9, 2, 1, 1, 1, 2, 2, 2, 0, 0, 1, 1, 1, false},    // bottom rows cut off
      {10, 11, 6, 1, 3, 3, 12, 1, 1, 1, 1, 1, 1, 3, true},  // groups
  };
  for (const ConvCase& k : cases) {
    for (int64_t rows : {1, 2, 5}) {
      SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << " s " << k.s1 << " p " << k.p1
                                      << " d " << k.d1 << ", bands of " << rows << " rows");
      expect_bands_match(k, DType::F32, rows);
    }
  }
  expect_bands_match(cases[0], DType::BF16, 2);
  expect_bands_match(cases[0], DType::F16, 3, true);  // a permuted input view
}

// 3x3 convolutions of 128x128 outputs and more with 16-channel blocks run Winograd in f32
// (oneDNN picks F(2x2, 3x3) at these channel counts, F(4x4, 3x3) at SD's). Its transforms
// round differently from direct sums but not worse here: observed up to 3e-8 R, so the
// direct path's bound holds.
TEST(CpuConv2d, WinogradSizes) {
  const ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, groups, bias
      {128, 128, 16, 1, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, true},   // a VAE level, padded
      {134, 130, 16, 2, 3, 3, 16, 1, 1, 0, 0, 1, 1, 1, false},  // no padding, batch 2
      {131, 129, 16, 1, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, true},   // sizes that cut 4x4 tiles
  };
  for (const ConvCase& k : cases) {
    for (DType wt : {DType::F32, DType::F16}) {
      SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << " " << k.cin << "->" << k.cout
                                      << " p " << k.p0 << " " << dtype_name(wt));
      const int64_t taps = k.cin * 9 + (k.bias ? 1 : 0);
      test::expect_fast_path(conv_case(k, wt), atol_for(wt, taps), 0);
    }
  }
}

// Winograd in bands of output rows: the transformed weights are made once for all bands.
TEST(CpuConv2d, WinogradRowBands) {
  const ConvCase k{128, 136, 16, 1, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, true};
  for (int64_t rows : {16, 27}) {
    SCOPED_TRACE(testing::Message() << "bands of " << rows << " rows");
    expect_bands_match(k, DType::F16, rows);
  }
}

// bf16 weights: Winograd F(2x2, 3x3) with our transforms and a batched bf16 GEMM, on
// CPUs with AVX512_BF16 (elsewhere the kernel declines and the direct one runs). Run
// directly, with the size threshold off, on odd channel counts, sizes that cut 2x2
// tiles, both paddings, batches, and bands of one or several tile rows (an edge case at
// each band's or chunk's first and last tile row).
TEST(CpuConv2d, WinogradBf16) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, groups, bias
      {9, 7, 5, 2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, true},       // odd everything, batch 2
      {40, 33, 32, 1, 3, 3, 48, 1, 1, 1, 1, 1, 1, 1, true},   // more than one vector of tiles
      {37, 18, 19, 2, 3, 3, 17, 1, 1, 0, 0, 1, 1, 1, false},  // no padding
      {35, 21, 16, 1, 3, 3, 16, 1, 1, 1, 0, 1, 1, 1, true},   // padding on one axis only
      {70, 12, 64, 1, 3, 3, 32, 1, 1, 0, 1, 1, 1, 1, false},  // the other axis
  };
  // Bands over all threads (budgets of one tile row, several, all), and chunks per thread
  // (of one tile row, several, all).
  struct Split {
    const char* name;
    size_t band_bytes;
    int64_t chunk_tiles, min_chunks_per_thread;
  };
  constexpr int64_t kNever = int64_t{1} << 40;  // chunks per thread
  const Split splits[] = {
      {"bands of 1 row", 1, 512, kNever},
      {"bands of 64 KiB", size_t{64} << 10, 512, kNever},
      {"one band", size_t{64} << 20, 512, kNever},
      {"chunks of 1 row", 0, 1, 0},
      {"chunks of 64 tiles", 0, 64, 0},
      {"one chunk", 0, kNever, 0},
  };
  for (const ConvCase& k : cases) {
    const int64_t taps = k.cin * 9 + (k.bias ? 1 : 0);
    for (const Split& split : splits) {
      SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << "->" << k.cout
                                      << " p " << k.p0 << "," << k.p1 << ", " << split.name);
      const auto configure = [&](DnnlState& st, const Tensor*) {
        st.winograd_bf16_min_pixels = 0;
        st.winograd_bf16_min_out_channels = 0;
        st.winograd_band_bytes = split.band_bytes;
        st.winograd_chunk_tiles = split.chunk_tiles;
        st.winograd_min_chunks_per_thread = split.min_chunks_per_thread;
      };
      EXPECT_TRUE(kernel_matches(k, DType::BF16, configure, cpu_conv2d_winograd_bf16,
                                 winograd_bf16_atol(taps)));
    }
  }
}

// A convolution of a nearest 2x upscale reads the upscale's source instead (its 2x2 tiles
// repeat rows and columns: 9 of the 16 GEMMs), in bands and in chunks. The upscale's own
// output holds NaN, so reading it would show.
TEST(CpuConv2d, WinogradBf16ReadsThroughAnUpscale) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  struct Case {
    int64_t W, H, cin, N, cout;  // W and H of the source
  };
  for (const Case& k : {Case{5, 4, 5, 2, 6}, Case{20, 9, 32, 1, 48}, Case{24, 3, 17, 1, 16}}) {
    for (const bool chunks : {false, true}) {
      SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << "->" << k.cout
                                      << (chunks ? ", chunks" : ", bands"));
      Tensor* up = nullptr;
      FilledConv conv(
          [&](Context& ctx) {
            up = upscale_nearest(ctx, ctx.new_tensor(DType::F32, {k.W, k.H, k.cin, k.N}, "x"), 2);
            Tensor* w = ctx.new_tensor(DType::BF16, {3, 3, k.cin, k.cout}, "w");
            Tensor* b = ctx.new_tensor(DType::F32, {k.cout}, "b");
            return conv2d(ctx, up, w, b, 1, 1, 1, 1, 1, 1);
          },
          5);
      reference_kernel(Op::Upscale)(up);
      reference_kernel(Op::Conv2d)(conv.out);
      const std::vector<float> expected = conv.output();
      const std::vector<float> nan_up(static_cast<size_t>(up->nelements()), std::nanf(""));
      tensor_set(*up, nan_up.data());
      const std::vector<float> nan_out(expected.size(), std::nanf(""));
      tensor_set(*conv.out, nan_out.data());

      CpuContext cpu_ctx;
      cpu_ctx.threads = 2;
      cpu_ctx.dnnl->winograd_bf16_min_pixels = 0;
      cpu_ctx.dnnl->winograd_bf16_min_out_channels = 0;
      cpu_ctx.dnnl->winograd_chunk_tiles = 1;
      cpu_ctx.dnnl->winograd_min_chunks_per_thread = chunks ? 0 : int64_t{1} << 40;
      ASSERT_TRUE(cpu_conv2d_winograd_bf16(cpu_ctx, conv.out));
      const std::vector<float> fast = conv.output();
      const double atol = winograd_bf16_atol(k.cin * 9 + 1);
      for (size_t i = 0; i < fast.size(); ++i) {
        ASSERT_NEAR(fast[i], expected[i], atol) << "output " << i;
      }
    }
  }
}

// What the Winograd kernel declines: other filter sizes, strides, dilations, groups,
// paddings beyond 1, weights that are not bf16, and outputs under the size threshold.
TEST(CpuConv2d, WinogradBf16Declines) {
  const ConvCase cases[] = {
      {16, 16, 16, 1, 1, 1, 16, 1, 1, 0, 0, 1, 1, 1, false},  // 1x1
      {16, 16, 16, 1, 3, 3, 16, 2, 2, 1, 1, 1, 1, 1, false},  // stride 2
      {16, 16, 16, 1, 3, 3, 16, 1, 1, 2, 2, 2, 2, 1, false},  // dilation 2
      {16, 16, 16, 1, 3, 3, 16, 1, 1, 1, 1, 1, 1, 2, false},  // groups
      {16, 16, 16, 1, 3, 3, 16, 1, 1, 2, 2, 1, 1, 1, false},  // padding 2
  };
  const auto no_threshold = [](DnnlState& st, const Tensor*) {
    st.winograd_bf16_min_pixels = 0;
    st.winograd_bf16_min_out_channels = 0;
  };
  for (const ConvCase& k : cases)
    EXPECT_FALSE(kernel_matches(k, DType::BF16, no_threshold, cpu_conv2d_winograd_bf16, 1.0));
  const ConvCase fits{16, 16, 16, 1, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, false};
  EXPECT_FALSE(kernel_matches(fits, DType::F16, no_threshold, cpu_conv2d_winograd_bf16, 1.0));
  const auto threshold = [](DnnlState& st, const Tensor*) {
    st.winograd_bf16_min_pixels = 257;
    st.winograd_bf16_min_out_channels = 0;
  };
  EXPECT_FALSE(kernel_matches(fits, DType::BF16, threshold, cpu_conv2d_winograd_bf16, 1.0));
  const auto few_outputs = [](DnnlState& st, const Tensor*) {
    st.winograd_bf16_min_pixels = 0;
    st.winograd_bf16_min_out_channels = 17;
  };
  EXPECT_FALSE(kernel_matches(fits, DType::BF16, few_outputs, cpu_conv2d_winograd_bf16, 1.0));
}

// f16 weights are never converted whole and kept: small outputs run as im2col and a GEMM
// over weight tiles converted in cache, larger ones in slices of output channels. Both
// match the reference, and the packed-weight cache stays empty.
TEST(CpuConv2d, F16WeightsByTilesAndBySlices) {
  const ConvCase cases[] = {
      // W, H, Cin, N, KW, KH, Cout, s0, s1, p0, p1, d0, d1, groups, bias
      {9, 7, 5, 2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, true},     // SD's 3x3, odd sizes
      {12, 10, 4, 2, 3, 2, 5, 2, 1, 0, 2, 2, 3, 1, false},  // asymmetric everything
      {5, 8, 3, 1, 5, 3, 4, 3, 2, 1, 0, 1, 1, 1, true},     // stride that does not divide
      {4, 4, 2, 1, 1, 1, 2, 2, 2, 0, 0, 1, 1, 1, false},    // right edge cut off
      {8, 6, 16, 2, 3, 3, 40, 1, 1, 1, 1, 1, 1, 1, true},   // slices of 16, 16 and 8
  };
  for (const ConvCase& k : cases) {
    for (bool tiles : {true, false}) {
      SCOPED_TRACE(testing::Message() << k.W << "x" << k.H << "x" << k.cin << " -> " << k.cout
                                      << (tiles ? " by weight tiles" : " by slices"));
      const auto configure = [tiles](DnnlState& st, const Tensor*) {
        st.weight_tiles_max_rows = tiles ? int64_t{1} << 40 : 0;
        st.converted_slice_bytes = 1;  // the smallest slices: 16 channels
      };
      const double atol = atol_for(DType::F16, k.cin * k.KW * k.KH + 1);
      EXPECT_TRUE(kernel_matches(k, DType::F16, configure, cpu_conv2d, atol));
      EXPECT_TRUE(kernel_matches(k, DType::F16, configure,
                                 tiles ? cpu_conv2d_weight_tiles : cpu_conv2d, atol));
      // Run twice, as a UNet's weights are every step: nothing is kept converted.
      FilledConv conv(k, DType::F16, 5);
      CpuContext cpu_ctx;
      cpu_ctx.threads = 2;
      configure(*cpu_ctx.dnnl, conv.out);
      ASSERT_TRUE(cpu_conv2d(cpu_ctx, conv.out));
      ASSERT_TRUE(cpu_conv2d(cpu_ctx, conv.out));
      EXPECT_EQ(cpu_ctx.dnnl->weight_cache_bytes(), 0u) << "an f16 weight was kept converted";
    }
  }
}

TEST(CpuConv2d, WeightTilesDeclineWeightsTheGemmReadsAsStored) {
  const ConvCase k{9, 7, 5, 2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, true};
  const auto all_rows = [](DnnlState& st, const Tensor*) { st.weight_tiles_max_rows = 1 << 30; };
  EXPECT_FALSE(kernel_matches(k, DType::F32, all_rows, cpu_conv2d_weight_tiles, 1.0));
  const auto no_rows = [](DnnlState& st, const Tensor*) { st.weight_tiles_max_rows = 0; };
  EXPECT_FALSE(kernel_matches(k, DType::F16, no_rows, cpu_conv2d_weight_tiles, 1.0));
  const ConvCase grouped{10, 9, 8, 2, 3, 3, 12, 1, 1, 1, 1, 1, 1, 4, true};
  EXPECT_FALSE(kernel_matches(grouped, DType::F16, all_rows, cpu_conv2d_weight_tiles, 1.0));
}

// Transformed weights are made per call on a weight's first use and cached from its
// second (a UNet's are reused every step, a VAE's once per image), within
// winograd_cache_limit; cached or not, the output is the same.
TEST(CpuConv2d, WinogradBf16CachesWeightsFromTheirSecondUse) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const ConvCase k{20, 18, 32, 1, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, true};
  for (size_t limit : {size_t{0}, size_t{64} << 20}) {
    SCOPED_TRACE(testing::Message() << "cache limit " << limit);
    FilledConv conv(k, DType::BF16, 11);
    CpuContext cpu_ctx;
    cpu_ctx.threads = 2;
    cpu_ctx.dnnl->winograd_bf16_min_pixels = 0;
    cpu_ctx.dnnl->winograd_bf16_min_out_channels = 0;
    cpu_ctx.dnnl->winograd_cache_limit = limit;
    ASSERT_TRUE(cpu_conv2d_winograd_bf16(cpu_ctx, conv.out));
    const std::vector<float> first = conv.output();
    EXPECT_EQ(cpu_ctx.dnnl->weight_cache_bytes(), 0u) << "cached on its first use";
    ASSERT_TRUE(cpu_conv2d_winograd_bf16(cpu_ctx, conv.out));
    EXPECT_EQ(cpu_ctx.dnnl->weight_cache_bytes() > 0, limit > 0);
    EXPECT_EQ(conv.output(), first);
  }
}

}  // namespace
}  // namespace sd
