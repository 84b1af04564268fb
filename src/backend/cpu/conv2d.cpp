// Fast Conv2d through oneDNN's direct or Winograd convolution. Our tensors are NCHW ([W, H,
// C, N] in ne order); oneDNN runs on whatever layout it prefers for the shape and we
// reorder into and out of it (see kActivationLayout for why).
//
// Large 3x3 convolutions in f32 (f32 or f16 weights; a VAE's 128-512 channels at 128x128 to
// 512x512) run Winograd (Lavin and Gray 2015; oneDNN's F(4x4, 3x3) or F(2x2, 3x3)): 36
// multiplies per 16 outputs where the direct method does 144, so they run at 1.8-2.5x the
// f32 direct rate (the f16 VAE decode at 512x512: convolutions 8.5 s -> 5.4 s). Their
// transformed weights are 4x the f32 weights, so they are made per call into scratch,
// once for all bands, never cached. That transform (oneDNN's is scalar) is why smaller
// outputs (the UNet's) stay direct in f32.
//
// bf16 weights on a CPU with AVX512_BF16 run our own bf16 Winograd kernel from 16x16
// outputs up (conv2d_winograd_bf16.cpp); oneDNN's bf16 direct kernel takes the rest.
//
// Weights oneDNN cannot read as stored (f16) are never kept converted: a UNet's would be
// 2x its f16 weights. Small outputs run as im2col and a GEMM over weight tiles converted
// in cache (conv2d_weight_tiles.cpp); the rest convert per call in slices of output
// channels (run_conv_in_slices), a few percent of a convolution with that many outputs.
// Weights in the GEMM's own dtype (f32, bf16) are packed once and kept (DnnlState).
#include <algorithm>

#include "backend/cpu/conv2d_int8.h"
#include "backend/cpu/conv2d_weight_tiles.h"
#include "backend/cpu/conv2d_winograd_bf16.h"
#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/linalg_kernels.h"
#include "tensor/ops/conv2d.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// Layout of the convolution's input and output. Plain nchw needs no reorders but gets
// oneDNN's im2col + GEMM implementation; its direct (brgemm) kernels want nhwc or a blocked
// nChw16c layout, at the cost of a reorder on each side. On the SD1.5 3x3 convolutions
// (bench/conv2d_bench.cpp, BM_Conv2dLayout; figures in bench/README.md) the reorders cost
// far less than they win: nchw ran 15-21% slower in f32 and 30-42% slower in bf16, while
// nhwc and the blocked layout tied within 2% on two threads (nhwc 1-4% ahead on one).
constexpr tag kActivationLayout = tag::nhwc;

// Output pixels from which a 3x3 convolution runs Winograd: the VAE's levels above 64x64.
constexpr int64_t kWinogradMinPixels = 128 * 128;

// Winograd fits a stride-1, undilated, ungrouped 3x3 convolution with channels in whole
// 16-lane blocks and padding of at most 1, computed in f32.
bool use_winograd(const Tensor* dst) {
  const Tensor* w = dst->src[1];
  const Conv2dParams p = conv2d_params(dst);
  return w->ne[0] == 3 && w->ne[1] == 3 && p.groups == 1 && p.s0 == 1 && p.s1 == 1 && p.d0 == 1 &&
         p.d1 == 1 && p.p0 <= 1 && p.p1 <= 1 && w->ne[2] % 16 == 0 && w->ne[3] % 16 == 0 &&
         dst->ne[0] * dst->ne[1] >= kWinogradMinPixels;
}

memory::dims strides_of(const Tensor* t, std::initializer_list<int> dims) {
  memory::dims s;
  for (int d : dims) s.push_back(static_cast<int64_t>(t->nb[d] / type_size(t->type)));
  return s;
}

// The weight as f32 or bf16 in `to`'s layout: converted (f16) and reordered; `key` names
// the convolution.
void pack_conv_weights(CpuContext& ctx, DnnlKey key, const Tensor* w, const memory::dims& dims,
                       const memory::dims& user_strides, dt type, const memory& to) {
  DnnlState& st = *ctx.dnnl;
  const bool convert = (type == dt::f32) != (w->type == DType::F32);
  memory::desc user(dims, type, user_strides);
  void* data = w->data;
  if (convert) {
    // f16 (or bf16 without native bf16) to dense f32 [KW, KH, Cin/g, Cout].
    const int64_t count = w->nelements();
    auto* f = static_cast<float*>(st.scratch(DnnlScratch::Stage, sizeof(float) * count));
    const auto* src = static_cast<const char*>(w->data);
    if (w->is_contiguous()) {
      constexpr int64_t kChunk = 1 << 16;
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
      for (int64_t i = 0; i < count; i += kChunk)
        dequantize_row(w->type, src + i * w->nb[0], f + i, std::min(kChunk, count - i));
    } else {  // a strided view: element by element
      for (int64_t i = 0; i < count; ++i) {
        const int64_t i0 = i % w->ne[0], i1 = (i / w->ne[0]) % w->ne[1];
        const int64_t i2 = (i / w->ne[0] / w->ne[1]) % w->ne[2],
                      i3 = i / w->ne[0] / w->ne[1] / w->ne[2];
        dequantize_row(w->type, src + i0 * w->nb[0] + i1 * w->nb[1] + i2 * w->nb[2] + i3 * w->nb[3],
                       f + i, 1);
      }
    }
    memory::dims dense(dims.size());
    int64_t stride = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      dense[i] = stride;
      stride *= dims[i];
    }
    user = memory::desc(dims, dt::f32, dense);
    data = f;
  }
  key << -3 << static_cast<int64_t>(w->type);
  for (auto v : user_strides) key << v;
  st.reorder(key, user, data, to);
}

// Output rows per band: about DnnlState::conv_band_bytes of f32 input or output, whichever
// is larger, once either exceeds conv_band_min_bytes (else all rows). Bands keep the
// layout-converted input and the output of a large convolution (a VAE's 512x512 levels:
// 128-256 MiB each) small enough to stay in cache between the reorders and the
// convolution, and spare that much fresh scratch memory.
int64_t band_rows(const DnnlState& st, const Tensor* dst) {
  const Tensor* x = dst->src[0];
  const int64_t stride = conv2d_params(dst).s1;
  const auto row_bytes = static_cast<size_t>(std::max(dst->ne[0] * dst->ne[2] * dst->ne[3],
                                                      x->ne[0] * x->ne[2] * x->ne[3] * stride)) *
                         sizeof(float);
  if (row_bytes * static_cast<size_t>(dst->ne[1]) <= st.conv_band_min_bytes) return dst->ne[1];
  return std::max<int64_t>(1, static_cast<int64_t>(st.conv_band_bytes / row_bytes));
}

void run_conv(CpuContext& ctx, Tensor* dst, dt type, bool winograd) {
  DnnlState& st = *ctx.dnnl;
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const Conv2dParams p = conv2d_params(dst);
  const int64_t g = p.groups, cout = w->ne[3];
  memory::dims w_dims, w_strides;
  const memory::dims ws = strides_of(w, {3, 2, 1, 0});
  if (g == 1) {
    w_dims = {cout, w->ne[2], w->ne[1], w->ne[0]};
    w_strides = ws;
  } else {
    w_dims = {g, cout / g, w->ne[2], w->ne[1], w->ne[0]};
    w_strides = {ws[0] * (cout / g), ws[0], ws[1], ws[2], ws[3]};
  }
  // oneDNN takes both paddings and 0-based dilation; the right padding is what makes the
  // output width come out as the op's floor((...) / stride) + 1 (negative when it cuts).
  const memory::dims strides = {p.s1, p.s0}, dilates = {p.d1 - 1, p.d0 - 1};
  const int64_t pad_w_r = (dst->ne[0] - 1) * p.s0 + (w->ne[0] - 1) * p.d0 + 1 - x->ne[0] - p.p0;
  const memory::dims x_strides = strides_of(x, {3, 2, 1, 0});
  const memory::dims out_strides = strides_of(dst, {3, 2, 1, 0});

  memory bias_mem;
  if (bias) {
    const memory::desc bias_md({cout}, dt::f32, tag::a);
    if (bias->type == DType::F32 && bias->rows_contiguous()) {
      bias_mem = memory(bias_md, st.engine, bias->data);
    } else {
      bias_mem = st.scratch_memory(DnnlScratch::Bias, bias_md);
      auto* f = static_cast<float*>(bias_mem.get_data_handle());
      const auto* b = static_cast<const char*>(bias->data);
      for (int64_t c = 0; c < cout; ++c) dequantize_row(bias->type, b + c * bias->nb[0], f + c, 1);
    }
  }

  // Each band of output rows [y0, y1) reads input rows [y0 s - p, (y1 - 1) s - p + span);
  // the part of that outside the input is the band's own top and bottom padding.
  const int64_t rows = band_rows(st, dst), span = (w->ne[1] - 1) * p.d1 + 1;
  memory per_call;
  for (int64_t y0 = 0; y0 < dst->ne[1]; y0 += rows) {
    const int64_t y1 = std::min(dst->ne[1], y0 + rows);
    const int64_t first = y0 * p.s1 - p.p1, last = (y1 - 1) * p.s1 - p.p1 + span;
    const int64_t in0 = std::clamp<int64_t>(first, 0, x->ne[1]);
    const int64_t in1 = std::clamp<int64_t>(last, in0, x->ne[1]);
    const memory::dims src_dims = {x->ne[3], x->ne[2], in1 - in0, x->ne[0]};
    const memory::dims dst_dims = {dst->ne[3], dst->ne[2], y1 - y0, dst->ne[0]};
    const memory::dims pad_l = {in0 - first, p.p0}, pad_r = {last - in1, pad_w_r};

    DnnlKey key("conv2d");
    for (auto v : src_dims) key << v;
    for (auto v : w_dims) key << v;
    for (auto v : {strides, dilates, pad_l, pad_r})
      for (auto e : v) key << e;
    key << static_cast<int64_t>(type) << (bias != nullptr) << ctx.threads << winograd;
    const DnnlPrimitive& conv = st.primitive(key, [&] {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      // Winograd takes only oneDNN's blocked layouts.
      const tag layout = winograd ? tag::any : kActivationLayout;
      const memory::desc src_md(src_dims, type, layout);
      const memory::desc w_md(w_dims, type, tag::any);
      const memory::desc dst_md(dst_dims, dt::f32, layout);
      const memory::desc bias_md = bias ? memory::desc({cout}, dt::f32, tag::a) : memory::desc();
      dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          winograd ? dnnl::algorithm::convolution_winograd
                                                   : dnnl::algorithm::convolution_direct,
                                          src_md, w_md, bias_md, dst_md, strides, dilates, pad_l,
                                          pad_r),
          attr, st.engine);
      return DnnlPrimitive{dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(),
                           pd.dst_desc(), pd.scratchpad_desc()};
    });

    // Input: the band's rows of x itself if already in the convolution's layout, else
    // reordered.
    const void* x_band = static_cast<const char*>(x->data) + in0 * x->nb[1];
    const memory x_mem(memory::desc(src_dims, dt::f32, x_strides), st.engine,
                       const_cast<void*>(x_band));
    memory src = x_mem;
    if (conv.src != x_mem.get_desc()) {
      src = st.scratch_memory(DnnlScratch::Src, conv.src);
      DnnlKey rkey = key;
      for (auto v : x_strides) rkey << v;
      st.reorder(rkey << -1, x_mem.get_desc(), x_band, src);
    }

    // Bands share one weight layout in practice; a band whose primitive wants another
    // packs its own copy rather than evicting the cached one.
    auto pack = [&](const memory& to) {
      pack_conv_weights(ctx, key, w, w_dims, w_strides, type, to);
    };
    // Winograd weights (see the top) and weights the cache does not keep (another dtype)
    // are packed per call, once for all bands that share a layout.
    memory weights = winograd
                         ? memory()
                         : st.cached_weights(w, conv.weights, pack, /*keep_other_layout=*/y0 > 0);
    if (!weights) {
      if (!per_call || per_call.get_desc() != conv.weights) {
        per_call = st.scratch_memory(DnnlScratch::Weights, conv.weights);
        pack(per_call);
      }
      weights = per_call;
    }

    const memory out(memory::desc(dst_dims, dt::f32, out_strides), st.engine,
                     static_cast<char*>(dst->data) + y0 * dst->nb[1]);
    const bool direct = conv.dst == out.get_desc();
    const memory conv_dst = direct ? out : st.scratch_memory(DnnlScratch::Dst, conv.dst);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, conv_dst},
        {DNNL_ARG_SCRATCHPAD, st.scratch_memory(DnnlScratch::Scratchpad, conv.scratchpad)}};
    if (bias) args[DNNL_ARG_BIAS] = bias_mem;
    st.execute(conv.prim, args);
    if (!direct) {
      DnnlKey okey = key;
      for (auto v : out_strides) okey << v;
      st.reorder(okey << -2, conv.dst, conv_dst.get_data_handle(), out);
    }
  }
}

// Runs the ungrouped convolution `dst` as slices of its output channels (at most about
// DnnlState::converted_slice_bytes of f32 weights each), each a view of its weights, bias
// and output channel planes.
void run_conv_in_slices(CpuContext& ctx, Tensor* dst, dt type) {
  const Tensor* w = dst->src[1];
  const Tensor* bias = dst->src[2];
  const int64_t cout = w->ne[3];
  const auto per_channel = static_cast<size_t>(w->ne[0] * w->ne[1] * w->ne[2]) * sizeof(float);
  const int64_t fit =
      std::max<int64_t>(16, static_cast<int64_t>(ctx.dnnl->converted_slice_bytes / per_channel));
  const int64_t slices = (cout + fit - 1) / fit;
  // Equal slices, in whole 16-channel blocks where the weight has them.
  const int64_t slice = std::min(cout, ((cout + slices - 1) / slices + 15) / 16 * 16);
  for (int64_t c0 = 0; c0 < cout; c0 += slice) {
    const int64_t n = std::min(slice, cout - c0);
    Tensor ws = *w, bs, part = *dst;
    ws.ne[3] = n;
    ws.data = static_cast<char*>(w->data) + c0 * w->nb[3];
    part.src[1] = &ws;
    if (bias) {
      bs = *bias;
      bs.ne[0] = n;
      bs.data = static_cast<char*>(bias->data) + c0 * bias->nb[0];
      part.src[2] = &bs;
    }
    part.ne[2] = n;
    part.data = static_cast<char*>(dst->data) + c0 * dst->nb[2];
    run_conv(ctx, &part, type, /*winograd=*/false);
  }
}

}  // namespace

bool cpu_conv2d(CpuContext& ctx, Tensor* dst) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  // Channels-last weights are the int8 kernel's (or, where it cannot run, the reference's).
  if (conv2d_params(dst).layout != ConvKernelLayout::Standard) {
    if (dst->nelements() == 0) return true;
    return cpu_conv2d_int8(ctx, dst);
  }
  if (x->type != DType::F32 || !is_float(w->type) || !dst->is_contiguous()) return false;
  if (dst->nelements() == 0) return true;
  const bool bf16 = w->type == DType::BF16 && ctx.dnnl->native_bf16;
  if (bf16 && cpu_conv2d_winograd_bf16(ctx, dst)) return true;
  if (cpu_conv2d_weight_tiles(ctx, dst)) return true;
  if (!bf16 && use_winograd(dst)) {
    try {
      run_conv(ctx, dst, dt::f32, /*winograd=*/true);
      return true;
    } catch (const dnnl::error&) {
      // no Winograd kernel for this CPU (it needs AVX-512): the direct one below
    }
  }
  try {
    // Weights the kernel cannot read as stored are converted per call, in slices.
    if (!ctx.dnnl->reads_as_stored(w->type) && conv2d_params(dst).groups == 1)
      run_conv_in_slices(ctx, dst, dt::f32);
    else
      run_conv(ctx, dst, bf16 ? dt::bf16 : dt::f32, /*winograd=*/false);
  } catch (const dnnl::error&) {
    return false;  // a shape this oneDNN build has no kernel for: the reference runs
  }
  return true;
}

}  // namespace sd
