// Fast MatMul through oneDNN's matmul primitive. In oneDNN's row-major terms b is the
// source [rows, K], a the weights [K, M] (a's rows are the weight matrix's columns) and dst
// the [rows, M] result, so out[m, n] lands at dst[n * M + m] as the op defines.
//
// Weight dtype policy (what the GEMM runs in):
//   f32                 f32 GEMM over the whole weight, packed once into oneDNN's blocked
//                       layout (cached for weights, packed per call otherwise).
//   bf16                bf16 GEMM (activations converted to bf16), f32 accumulation and
//                       output, on CPUs with native bf16; f32 tiles below otherwise.
//   f16                 widened to f32 in registers by the f16 GEMM (f16_gemm.h) up to
//                       512 rows, else rows dequantized tile by tile to f32; both exact:
//                       an f16 file computes as its f32 original would.
//   q8_0, q4_0, q4_1,   on AVX-512 VNNI CPUs, the int8 GEMM (int8_gemm.h): activations
//   q5_0, q5_1, q4_K,   rounded to 8 bits per 32 values, as the reference's dot products
//   q5_K                round them, and integer multiply-adds at twice the bf16 rate. 2-D
//                       weights only; SD_CPU_INT8=0 turns it off (the bf16 tiles below).
//   q8_0, q2_K..q6_K,   tiles dequantized to bf16 (native bf16 CPUs): these types' own error
//   q4_0..q5_1          (q8_0: up to half a step of a block's max / 127, 0.4%; the others
//                       max / 31 or coarser) is the size of bf16's rounding or larger, and
//                       the bf16 GEMM runs at about twice the f32 rate, so a quantized file
//                       runs faster than its f16 original (q8_0 SD1.5 at 512x512: 3.5
//                       against 3.9 s per step; its image moved from 47.3 to 46.7 dB
//                       against the f16 file's). sd.cpp rounds activations to 8 bits
//                       for these types too.
// Tiles bound the staging memory: a weight is never dequantized whole.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/dnnl_state.h"
#include "backend/cpu/f16_gemm.h"
#include "backend/cpu/int8_gemm.h"
#include "backend/cpu/linalg_kernels.h"
#include "backend/cpu/weight_packing.h"
#include "tensor/quant/quant.h"

namespace sd {

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// Values of dequantized weights per tile: 4 MiB of f32 staging, while every tile's GEMM
// stays large enough (>= 64 output columns) to run at full speed.
constexpr int64_t kTileValues = int64_t{1} << 20;
// GEMM rows up to which f32 tiles go to the GEMM unpacked (measured on 11520 x 1280 weights:
// 128 rows 10.6 -> 9.0 ms per product; 512 rows the same either way; 8192 rows of a UNet
// linear 15-17% slower unpacked).
constexpr int64_t kPlainTileMaxRows = 256;
// GEMM rows up to which f16 weights go to the f16 GEMM (f16_gemm.h), which widens them in
// registers; with more rows the f32 tiles, packed once per call, catch up (sd-bench
// MatMul, GFLOP/s, the f32 tiles -> the f16 GEMM, two runs: 2 rows 25 -> 178, 77 rows
// 247-251 -> 302-315, 192 rows 215-224 -> 243-249, 512 rows 260-295 -> 269-306, 720 rows
// 290-311 -> 305, 2048 rows 311-340 -> 289-307).
constexpr int64_t kF16GemmMaxRows = 512;
// Activation values converted per GEMM call when they need converting: 2 MiB of bf16, in
// cache still when the GEMM reads it, and rows enough that each GEMM call runs at full
// speed (of 256 Ki, 1 Mi and 4 Mi values, 1 Mi measured fastest on the UNet shapes).
constexpr int64_t kChunkValues = int64_t{1} << 20;
// GEMM rows up to which bf16 weights without a cached packed copy are read as stored
// rather than packed per call (reads_as_stored).
constexpr int64_t kStoredBf16MaxRows = 256;

int64_t dt_size(dt t) {
  return t == dt::f32 ? 4 : 2;
}

// A source tensor as a dense 4-D [B3, B2, N, K] matrix stack of dtype `type`: b itself when
// it already is one, else a copy in scratch (a permuted view, or bf16 for a bf16 GEMM).
// oneDNN's fast matmul kernels want dense operands (strided ones get its slower gemm
// kernels); the copy reads b once, where the GEMM does 2 M flops per value of b.
void* dense_src(CpuContext& ctx, const Tensor* b, dt type) {
  DnnlState& st = *ctx.dnnl;
  const memory::dims dims = {b->ne[3], b->ne[2], b->ne[1], b->ne[0]};
  if (type == dt::f32 && b->is_contiguous()) return b->data;
  const memory::dims strides = {
      static_cast<int64_t>(b->nb[3] / 4), static_cast<int64_t>(b->nb[2] / 4),
      static_cast<int64_t>(b->nb[1] / 4), static_cast<int64_t>(b->nb[0] / 4)};
  const memory::desc user(dims, dt::f32, strides);
  const memory::desc dense(dims, type, tag::abcd);
  DnnlKey key("reorder-src");
  for (int i = 0; i < 4; ++i) key << dims[i] << strides[i];
  key << static_cast<int64_t>(type) << ctx.threads;
  memory out = st.scratch_memory(DnnlScratch::Src, dense);
  st.reorder(key, user, b->data, out);
  return out.get_data_handle();
}

// Identifies a GEMM by its shapes and dtype (and the thread count oneDNN planned for).
DnnlKey gemm_key(CpuContext& ctx, const char* kind, const memory::dims& src,
                 const memory::dims& weights, dt type) {
  DnnlKey key(kind);
  for (auto d : src) key << d;
  for (auto d : weights) key << d;
  key << static_cast<int64_t>(type) << ctx.threads;
  return key;
}

// A matmul primitive for dense src/dst and weights in whatever layout oneDNN prefers, or,
// given `weights_layout`, in that one.
const DnnlPrimitive& gemm_primitive(CpuContext& ctx, const DnnlKey& key, const memory::dims& src,
                                    const memory::dims& weights, const memory::dims& dst, dt type,
                                    const memory::desc& weights_layout = {}) {
  DnnlState& st = *ctx.dnnl;
  return st.primitive(key, [&] {
    const tag plain = src.size() == 2 ? tag::ab : tag::abcdef;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc w =
        weights_layout.is_zero() ? memory::desc(weights, type, tag::any) : weights_layout;
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(memory::desc(src, type, plain), w, memory::desc(dst, dt::f32, plain)),
        attr, st.engine);
    return DnnlPrimitive{dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(),
                         pd.scratchpad_desc()};
  });
}

// Whether 2-D weights `user` ([K, M] in oneDNN's terms) have each output's K values
// contiguous, as a weight matrix's rows lie.
bool rows_contiguous(const memory::desc& user) {
  const dnnl_memory_desc_t& d = user.data;
  return d.ndims == 2 && d.format_kind == dnnl_blocked && d.format_desc.blocking.inner_nblks == 0 &&
         d.format_desc.blocking.strides[0] == 1;
}

// Packs weights given as `user` at `data` into `layout` (a GEMM's weights layout; `key`
// names the pair): the cached copy of `owner` when `cache`, else a per-call copy in `slot`;
// `data` itself when `layout` is `user`. Rows in the layout's dtype go through our packer
// where it knows the layout (weight_packing.h: half the time of oneDNN's reorder), the rest
// through a reorder.
memory pack_weights(CpuContext& ctx, const DnnlKey& key, const Tensor* owner,
                    const memory::desc& user, const void* data, const memory::desc& layout,
                    bool cache, DnnlScratch slot = DnnlScratch::Weights) {
  DnnlState& st = *ctx.dnnl;
  if (layout == user) return memory(user, st.engine, const_cast<void*>(data));  // as stored
  auto pack = [&](const memory& to) {
    if (rows_contiguous(user) && user.data.data_type == layout.data.data_type &&
        packs_as_blocked_rows(layout)) {
      const size_t row_bytes =
          user.data.format_desc.blocking.strides[1] * dt_size(user.data_type());
      pack_blocked_rows(ctx, data, row_bytes, layout, to.get_data_handle());
    } else {
      st.reorder(key, user, data, to);
    }
  };
  memory packed = cache ? st.cached_weights(owner, layout, pack) : memory();
  if (!packed) {
    packed = st.scratch_memory(slot, layout);
    pack(packed);
  }
  return packed;
}

void run_gemm(CpuContext& ctx, const DnnlPrimitive& p, void* src, const memory& weights,
              void* dst) {
  DnnlState& st = *ctx.dnnl;
  st.execute(p.prim,
             {{DNNL_ARG_SRC, memory(p.src, st.engine, src)},
              {DNNL_ARG_WEIGHTS, weights},
              {DNNL_ARG_DST, memory(p.dst, st.engine, dst)},
              {DNNL_ARG_SCRATCHPAD, st.scratch_memory(DnnlScratch::Scratchpad, p.scratchpad)}});
}

struct MatmulDims {
  int64_t K, M, N, A2, A3, B2, B3, r2, r3;
};

// The reorder that packs a's weights for the GEMM named `key`, from a's strides.
DnnlKey weights_key(DnnlKey key, const memory::dims& user_strides) {
  key << -1;
  for (auto st : user_strides) key << st;
  return key;
}

// Whether the GEMM reads 2-D bf16 weights `a` (row-major, [K, M] in oneDNN's terms) as
// they lie instead of from a packed copy: at up to kStoredBf16MaxRows rows, when the cache
// will not keep a copy. Packing one into scratch on every call then costs about as much
// as the GEMM (SDXL's 154-row context projections: 265-315 GFLOP/s packed per call,
// 450-500 read as stored, bf16 peak 660-770); with more rows the packing pays for itself
// (2048 rows: 655-726 packed per call, 533-630 as stored).
bool reads_as_stored(CpuContext& ctx, const Tensor* a, dt type, const MatmulDims& s,
                     const memory::dims& user_strides, int64_t rows) {
  return type == dt::bf16 && a->type == DType::BF16 && rows <= kStoredBf16MaxRows &&
         user_strides[0] == 1 && user_strides[1] == s.K && !ctx.dnnl->would_cache(a, a->nbytes());
}

// 2-D weights and activations that need converting (to bf16, or out of a strided view):
// chunks of rows are converted and multiplied in turn, so the converted copy stays in
// cache; converting b whole would write it to memory and read it back, which cost ~10% of
// the bf16 GEMM with 320 outputs (4096 x 1280 -> 320). When b's batches follow each other
// at its row stride (a contiguous b) they are one stack of rows: classifier-free
// guidance's two halves then make one GEMM of twice the rows, which runs closer to peak
// at the UNet's small token counts (256 and 77 rows per half).
void chunked_rows(CpuContext& ctx, Tensor* dst, const MatmulDims& s, dt type,
                  const memory::dims& user_strides) {
  DnnlState& st = *ctx.dnnl;
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  const memory::desc user({s.K, s.M}, type, user_strides);
  const bool flat = b->nb[2] == b->nb[1] * static_cast<size_t>(b->ne[1]) &&
                    b->nb[3] == b->nb[2] * static_cast<size_t>(b->ne[2]);
  const int64_t rows = flat ? s.N * s.B2 * s.B3 : s.N;  // per GEMM stack
  const int64_t max_chunk = std::max<int64_t>(64, kChunkValues / s.K / 64 * 64);
  const int64_t chunks = (rows + max_chunk - 1) / max_chunk;
  // Equal chunks (a multiple of 16 rows), so at most the last one needs another primitive.
  const int64_t chunk = std::min(rows, ((rows + chunks - 1) / chunks + 15) / 16 * 16);
  const int64_t sb0 = static_cast<int64_t>(b->nb[0] / 4), sb1 = static_cast<int64_t>(b->nb[1] / 4);
  const bool as_stored = reads_as_stored(ctx, a, type, s, user_strides, rows);
  const memory::desc weights_layout = as_stored ? user : memory::desc();
  memory packed;
  for (int64_t i3 = 0; i3 < (flat ? 1 : s.B3); ++i3)
    for (int64_t i2 = 0; i2 < (flat ? 1 : s.B2); ++i2)
      for (int64_t n0 = 0; n0 < rows; n0 += chunk) {
        const int64_t c = std::min(chunk, rows - n0);
        DnnlKey key = gemm_key(ctx, "matmul", {c, s.K}, {s.K, s.M}, type);
        key << as_stored;
        const DnnlPrimitive& p =
            gemm_primitive(ctx, key, {c, s.K}, {s.K, s.M}, {c, s.M}, type, weights_layout);
        // Packed (and cached) once, for the first chunk; a shorter tail chunk's GEMM may
        // want another layout, packed per call beside the first.
        memory w = packed;
        if (!packed) {
          w = packed = pack_weights(ctx, weights_key(key, user_strides), a, user, a->data,
                                    p.weights, DnnlState::cacheable(a));
        } else if (packed.get_desc() != p.weights) {
          w = pack_weights(ctx, weights_key(key, user_strides), a, user, a->data, p.weights, false,
                           DnnlScratch::TailWeights);
        }
        const memory::desc strided({c, s.K}, dt::f32, memory::dims{sb1, sb0});
        const memory::desc dense({c, s.K}, type, tag::ab);
        DnnlKey rkey("matmul-rows");
        rkey << c << s.K << sb1 << sb0 << static_cast<int64_t>(type) << ctx.threads;
        const memory converted = st.scratch_memory(DnnlScratch::Src, dense);
        st.reorder(rkey, strided,
                   static_cast<char*>(b->data) + n0 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3],
                   converted);
        float* out = static_cast<float*>(dst->data) + ((i3 * s.B2 + i2) * s.N + n0) * s.M;
        run_gemm(ctx, p, converted.get_data_handle(), w, out);
      }
}

// f32 or bf16 weights, in one GEMM: a's batch dims broadcast over b's by splitting b's
// [B2, B3] into [A2, r2] x [A3, r3] and giving the weights size-1 dims where b has r2, r3.
void whole_weight(CpuContext& ctx, Tensor* dst, const MatmulDims& s, dt type) {
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  const int64_t es = static_cast<int64_t>(type_size(a->type));
  const int64_t sa0 = static_cast<int64_t>(a->nb[0]) / es,
                sa1 = static_cast<int64_t>(a->nb[1]) / es;
  const int64_t sa2 = static_cast<int64_t>(a->nb[2]) / es,
                sa3 = static_cast<int64_t>(a->nb[3]) / es;
  const bool in_place = type == dt::f32 && b->is_contiguous();
  if (s.A2 * s.A3 == 1 && !in_place) return chunked_rows(ctx, dst, s, type, {sa0, sa1});
  memory::dims src, weights, out, user_strides;
  if (s.A2 * s.A3 == 1) {
    const int64_t rows = s.N * s.B2 * s.B3;
    src = {rows, s.K};
    weights = {s.K, s.M};
    out = {rows, s.M};
    user_strides = {sa0, sa1};
  } else {
    src = {s.A3, s.r3, s.A2, s.r2, s.N, s.K};
    weights = {s.A3, 1, s.A2, 1, s.K, s.M};
    out = {s.A3, s.r3, s.A2, s.r2, s.N, s.M};
    user_strides = {sa3, sa3, sa2, sa2, sa0, sa1};
  }
  const DnnlKey key = gemm_key(ctx, "matmul", src, weights, type);
  const DnnlPrimitive& p = gemm_primitive(ctx, key, src, weights, out, type);
  void* src_data = dense_src(ctx, b, type);
  const memory::desc user(weights, type, user_strides);
  const memory packed = pack_weights(ctx, weights_key(key, user_strides), a, user, a->data,
                                     p.weights, DnnlState::cacheable(a));
  run_gemm(ctx, p, src_data, packed, dst->data);
}

// Row m of a's batch (i2, i3) as f32.
void load_weight_row(const Tensor* a, int64_t m, int64_t i2, int64_t i3, float* out) {
  const char* row =
      static_cast<const char*>(a->data) + m * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
  if (a->rows_contiguous()) {
    dequantize_row(a->type, row, out, a->ne[0]);
  } else {  // a strided view of a float weight
    for (int64_t k = 0; k < a->ne[0]; ++k) dequantize_row(a->type, row + k * a->nb[0], out + k, 1);
  }
}

// f16 and block-type weights: tiles of `mt` rows of a are dequantized to f32, packed into
// the GEMM dtype `type` by a oneDNN reorder and multiplied, tile after tile.
void tiled_weight(CpuContext& ctx, Tensor* dst, const MatmulDims& s, dt type) {
  DnnlState& st = *ctx.dnnl;
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  const bool batched = s.A2 * s.A3 > 1;
  const int64_t rows = batched ? s.N : s.N * s.B2 * s.B3;  // GEMM rows per call
  // Few rows (a UNet's 8x8 convolutions as GEMMs) read each tile too few times to repay
  // packing it: the GEMM reads the f32 rows as they are, in tiles twice as large.
  const bool plain = type == dt::f32 && rows <= kPlainTileMaxRows;
  const int64_t tile_values = plain ? 2 * kTileValues : kTileValues;
  int64_t mt = s.M;
  if (s.M * s.K > tile_values)
    mt = std::min(s.M, std::max<int64_t>(64, tile_values / s.K / 64 * 64));

  auto* src = static_cast<char*>(dense_src(ctx, b, type));
  auto* stage = static_cast<float*>(st.scratch(DnnlScratch::Stage, sizeof(float) * mt * s.K));
  auto* out = static_cast<float*>(dst->data);
  for (int64_t ia3 = 0; ia3 < s.A3; ++ia3)
    for (int64_t ia2 = 0; ia2 < s.A2; ++ia2)
      for (int64_t m0 = 0; m0 < s.M; m0 += mt) {
        const int64_t mc = std::min(mt, s.M - m0);
        const memory::desc staged({s.K, mc}, dt::f32, memory::dims{1, s.K});
        const DnnlKey key = gemm_key(ctx, plain ? "matmul-tile-plain" : "matmul-tile", {rows, s.K},
                                     {s.K, mc}, type);
        const DnnlPrimitive& p = gemm_primitive(ctx, key, {rows, s.K}, {s.K, mc}, {rows, mc}, type,
                                                plain ? staged : memory::desc());
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
        for (int64_t r = 0; r < mc; ++r) load_weight_row(a, m0 + r, ia2, ia3, stage + r * s.K);
        const memory packed = plain ? memory(staged, st.engine, stage)
                                    : pack_weights(ctx, weights_key(key, {1, s.K}), a, staged,
                                                   stage, p.weights, false);
        for (int64_t j3 = 0; j3 < (batched ? s.r3 : 1); ++j3)
          for (int64_t j2 = 0; j2 < (batched ? s.r2 : 1); ++j2) {
            const int64_t batch = batched ? (ia3 * s.r3 + j3) * s.B2 + ia2 * s.r2 + j2 : 0;
            char* src_rows = src + batch * s.N * s.K * dt_size(type);
            float* dst_rows = out + batch * s.N * s.M;
            if (mc == s.M) {
              run_gemm(ctx, p, src_rows, packed, dst_rows);
              continue;
            }
            // A column tile: oneDNN's fast kernels want a dense dst, so copy it into place.
            auto* tile =
                static_cast<float*>(st.scratch(DnnlScratch::Dst, sizeof(float) * rows * mc));
            run_gemm(ctx, p, src_rows, packed, tile);
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
            for (int64_t r = 0; r < rows; ++r)
              std::memcpy(dst_rows + r * s.M + m0, tile + r * mc, sizeof(float) * mc);
          }
      }
}

// Whether `a` goes to the int8 GEMM: a 2-D weight of a block-code type on a CPU with VNNI.
bool use_int8_gemm(const Tensor* a, const MatmulDims& s) {
  static const bool enabled = [] {
    const char* flag = std::getenv("SD_CPU_INT8");
    return int8_gemm_available() && !(flag && std::strcmp(flag, "0") == 0);
  }();
  return enabled && int8_gemm_supports(a->type) && s.A2 * s.A3 == 1 && a->rows_contiguous();
}

// Whether `a` goes to the f16 GEMM: a 2-D f16 weight on a CPU with AVX-512, multiplied
// into at most kF16GemmMaxRows rows. SD_CPU_F16_GEMM=0 turns it off (the f32 tiles above).
bool use_f16_gemm(const Tensor* a, const MatmulDims& s) {
  static const bool enabled = [] {
    const char* flag = std::getenv("SD_CPU_F16_GEMM");
    return f16_gemm_available() && !(flag && std::strcmp(flag, "0") == 0);
  }();
  return enabled && a->type == DType::F16 && s.A2 * s.A3 == 1 && a->rows_contiguous() &&
         s.N * s.B2 * s.B3 <= kF16GemmMaxRows;
}

}  // namespace

bool cpu_matmul(CpuContext& ctx, Tensor* dst) {
  const Tensor* a = dst->src[0];
  const Tensor* b = dst->src[1];
  if (b->type != DType::F32 || !dst->is_contiguous()) return false;
  const MatmulDims s{a->ne[0],           a->ne[1], b->ne[1], a->ne[2],
                     a->ne[3],           b->ne[2], b->ne[3], b->ne[2] / a->ne[2],
                     b->ne[3] / a->ne[3]};
  if (dst->nelements() == 0) return true;
  if (s.K == 0) {
    std::memset(dst->data, 0, dst->nbytes());
    return true;
  }
  const bool bf16 = ctx.dnnl->native_bf16;
  try {
    if (a->type == DType::F32) {
      whole_weight(ctx, dst, s, dt::f32);
    } else if (a->type == DType::BF16 && bf16) {
      whole_weight(ctx, dst, s, dt::bf16);
    } else if (use_int8_gemm(a, s)) {
      const auto* x = static_cast<const float*>(dense_src(ctx, b, dt::f32));
      int8_gemm(ctx, a->type, a->data, a->nb[1], s.M, s.K, x, s.N * s.B2 * s.B3,
                static_cast<float*>(dst->data));
    } else if (use_f16_gemm(a, s)) {
      const auto* x = static_cast<const float*>(dense_src(ctx, b, dt::f32));
      f16_gemm(ctx, a->data, a->nb[1], s.M, s.K, x, s.N * s.B2 * s.B3,
               static_cast<float*>(dst->data));
    } else {
      const bool bf16_tile = bf16 && is_quantized(a->type) && a->type != DType::Q8_K;
      tiled_weight(ctx, dst, s, bf16_tile ? dt::bf16 : dt::f32);
    }
  } catch (const dnnl::error&) {
    return false;  // a shape or dtype this oneDNN build has no kernel for: reference runs
  }
  return true;
}

}  // namespace sd
