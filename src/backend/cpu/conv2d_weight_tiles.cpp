// A convolution as im2col and a matrix product whose weights stay in their stored dtype.
//
// Converting an f16 weight whole to oneDNN's f32 layout writes and rereads 4 bytes per
// value through memory. Where each weight value serves thousands of output pixels (a
// UNet's 64x64 level) that is a few percent of the convolution; at its 8x8 level (128
// pixels for both guidance halves) it cost as much as the convolution itself. Caching the
// converted weights would make that free, but they are twice the f16 weights: the memory
// users pick f16 files to save.
//
// So small outputs run as a GEMM over the weight matrix [Cout, Cin*KH*KW] (the weight's own
// rows, as stored) against the input unfolded into columns (im2col, [pixels, Cin*KH*KW]):
// cpu_matmul dequantizes the weights tile by tile into cache, so each weight value is read
// once as stored and never written out converted. The unfolded input is KH*KW times the
// input, small at these sizes.
#include "backend/cpu/conv2d_weight_tiles.h"

#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/linalg_kernels.h"
#include "tensor/ops/conv2d.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

// A dense 2-D tensor of `type` over `data`: `cols` values per row, `rows` rows.
Tensor matrix(DType type, int64_t cols, int64_t rows, void* data) {
  Tensor t;
  t.type = type;
  t.ne = {cols, rows, 1, 1};
  t.nb[0] = type_size(type);
  t.nb[1] = t.nb[0] * static_cast<size_t>(cols);
  t.nb[2] = t.nb[3] = t.nb[1] * static_cast<size_t>(rows);
  t.data = data;
  return t;
}

// Unfolds x ([W, H, C, N] in ne order, any strides) into cols[pixel][c][ky][kx], pixel =
// (n * OH + oy) * OW + ox: the input values each output pixel's dot product reads, zero
// where the kernel reaches into the padding.
void im2col(const CpuContext& ctx, const Tensor* dst, float* cols) {
  const Tensor* x = dst->src[0];
  const Tensor* w = dst->src[1];
  const Conv2dParams p = conv2d_params(dst);
  const int64_t kw = w->ne[0], kh = w->ne[1], cin = w->ne[2];
  const int64_t ow = dst->ne[0], oh = dst->ne[1], batch = dst->ne[3];
  const int64_t k = kw * kh * cin;
  const auto* base = static_cast<const char*>(x->data);
#pragma omp parallel for num_threads(ctx.threads) schedule(static) collapse(2)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        float* out = cols + ((n * oh + oy) * ow + ox) * k;
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = oy * p.s1 - p.p1 + ky * p.d1;
            const bool row_in = iy >= 0 && iy < x->ne[1];
            // No pointer is formed into the padding (outside the tensor, undefined).
            const char* row = row_in ? base + c * x->nb[2] + n * x->nb[3] + iy * x->nb[1] : nullptr;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = ox * p.s0 - p.p0 + kx * p.d0;
              *out++ = row_in && ix >= 0 && ix < x->ne[0]
                           ? *reinterpret_cast<const float*>(row + ix * x->nb[0])
                           : 0.0f;
            }
          }
      }
}

// dst[n][c][pixel] = product[n * pixels + pixel][c] + bias[c]: the GEMM's pixel-major
// result into the op's channel planes.
void to_channel_planes(const CpuContext& ctx, const float* product, const Tensor* bias,
                       Tensor* dst) {
  const int64_t pixels = dst->ne[0] * dst->ne[1], cout = dst->ne[2], batch = dst->ne[3];
  auto* out = static_cast<float*>(dst->data);
  const auto* b = bias ? static_cast<const char*>(bias->data) : nullptr;
#pragma omp parallel for num_threads(ctx.threads) schedule(static) collapse(2)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < cout; ++c) {
      float add = 0;
      if (b) dequantize_row(bias->type, b + c * bias->nb[0], &add, 1);
      const float* from = product + n * pixels * cout + c;
      float* to = out + (n * cout + c) * pixels;
      for (int64_t i = 0; i < pixels; ++i) to[i] = from[i * cout] + add;
    }
}

}  // namespace

bool cpu_conv2d_weight_tiles(CpuContext& ctx, Tensor* dst) {
  DnnlState& st = *ctx.dnnl;
  const Tensor* w = dst->src[1];
  if (st.reads_as_stored(w->type) || conv2d_params(dst).groups != 1 || !w->is_contiguous())
    return false;
  const int64_t rows = dst->ne[0] * dst->ne[1] * dst->ne[3];
  if (rows > st.weight_tiles_max_rows) return false;
  const int64_t k = w->ne[0] * w->ne[1] * w->ne[2], cout = w->ne[3];

  auto* cols = static_cast<float*>(st.scratch(DnnlScratch::Columns, sizeof(float) * rows * k));
  auto* product =
      static_cast<float*>(st.scratch(DnnlScratch::Product, sizeof(float) * rows * cout));
  im2col(ctx, dst, cols);
  // The weight's rows [Cout][Cin][KH][KW] are the GEMM's [K, Cout] weight matrix as stored.
  Tensor weights = matrix(w->type, k, cout, w->data);
  weights.buffer = w->buffer;
  weights.flags = w->flags;
  Tensor columns = matrix(DType::F32, k, rows, cols);
  Tensor out = matrix(DType::F32, cout, rows, product);
  out.op = Op::MatMul;
  out.src[0] = &weights;
  out.src[1] = &columns;
  if (!cpu_matmul(ctx, &out)) return false;
  to_channel_planes(ctx, product, dst->src[2], dst);
  return true;
}

}  // namespace sd
