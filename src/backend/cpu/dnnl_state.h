// oneDNN objects a CPU backend keeps across graphs: one engine and stream, primitives
// keyed by shape, scratch memory that persists between calls (nothing is allocated per op
// once shapes repeat), and weights reordered once into oneDNN's preferred layout, keyed by
// their memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/cpu_context.h"
#include "tensor/tensor.h"

namespace sd {

// Scratch buffers of the linear-algebra kernels; each slot grows to the largest request
// and is kept, so repeated shapes allocate nothing.
enum class DnnlScratch {
  Src,          // activations converted to the GEMM's dtype and a dense layout
  Weights,      // weights packed per call when they are not cached
  TailWeights,  // the same weights packed for a GEMM that wants another layout
  Stage,        // dequantized weight rows before packing
  Dst,          // results in oneDNN's layout (or a column tile) before the final copy
  Bias,         // a bias converted to f32
  Scratchpad,   // oneDNN's own temporary memory (scratchpad_mode::user)
  Kernel,       // our own kernels' per-thread buffers (attention)
  Columns,      // a convolution's input unfolded into GEMM rows (im2col)
  Product,      // that convolution's GEMM result, before it becomes channel planes
  Codes,        // activations as 8-bit codes for the int8 GEMM (int8_gemm.cpp)
  Count,
};

// A primitive with the memory layouts it was created for.
struct DnnlPrimitive {
  dnnl::primitive prim;
  dnnl::memory::desc src, weights, dst, scratchpad;
};

// Identifies a primitive by the integers that shaped it: "matmul", dims, dtypes, strides.
class DnnlKey {
 public:
  // The kind's terminating zero keeps "matmul" + dims apart from "matmul-tile" + dims.
  explicit DnnlKey(const char* kind) : key_(kind, std::strlen(kind) + 1) {}
  DnnlKey& operator<<(int64_t v) {
    key_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  const std::string& str() const { return key_; }

 private:
  std::string key_;
};

struct DnnlState {
  DnnlState();
  ~DnnlState();

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // The CPU has bf16 dot products (AVX512_BF16 or AMX): a bf16 GEMM runs at about twice
  // the f32 rate. Without them oneDNN emulates bf16, slower than f32, so kernels use f32.
  bool native_bf16 = false;

  // Packed weight copies are kept only in the weight's own dtype (never a whole-model copy
  // in another precision: an f16 weight is converted per call, tile by tile). A copy of a
  // read-only mapped weight replaces the mapped pages, which are dropped once packed, so it
  // costs no memory and is always kept. Any other copy (of weights converted on load, or a
  // transform larger than the weight) is memory on top of the weights: such copies are
  // kept while they hold at most weight_cache_limit bytes in all. The first weights seen
  // stay cached: a model's layers run in the same order every step, and evicting in that
  // order would miss on every call.
  size_t weight_cache_limit = size_t{1280} << 20;

  // A convolution whose f32 input or output is larger than conv_band_min_bytes runs in
  // bands of output rows of about conv_band_bytes (conv2d.cpp): small enough to stay in
  // cache between the layout reorders and the convolution. The threshold leaves SD's UNet
  // convolutions at 512x512 (10 MiB at most) whole; the VAE's 512x512 levels (32-256 MiB)
  // are banded.
  size_t conv_band_min_bytes = size_t{16} << 20;
  // Convolutions whose weights the GEMM cannot read as stored (f16) and whose outputs have
  // at most this many pixels (all images together) run as im2col and a GEMM over weight
  // tiles converted in cache (conv2d_weight_tiles.cpp); larger ones convert their weights
  // whole per call, a small part of their work.
  int64_t weight_tiles_max_rows = 256;
  // Larger convolutions with such weights run in slices of output channels of at most
  // about this many bytes of converted f32 weights, so the converted copy (and the stage
  // it is made from) stays that small whatever the weight (a UNet's 2560 -> 1280
  // convolution: 113 MiB of f32 whole).
  size_t converted_slice_bytes = size_t{16} << 20;
  size_t conv_band_bytes = size_t{4} << 20;

  // bf16 3x3 convolutions with at least this many output pixels per image run Winograd
  // F(2x2, 3x3) (conv2d_winograd_bf16.cpp): from SD's 16x16 UNet level up it beat the
  // direct kernel (8x8 outputs make too few tiles for an efficient GEMM). They run in
  // bands of tile rows whose transformed input and GEMM output take about
  // winograd_band_bytes; 16-32 MiB measured best on the VAE's convolutions (larger GEMMs
  // beat smaller, cache-resident bands).
  int64_t winograd_bf16_min_pixels = 16 * 16;
  // ... and at least this many output channels: the input transform is made once per
  // input channel and tile whatever the outputs, so with fewer (ESRGAN's dense blocks: 32)
  // it took more time than the GEMM, and the direct kernel ran the whole upscale 20% faster.
  int64_t winograd_bf16_min_out_channels = 64;
  // Their transformed weights (16/9 of the weights) are made per call on a weight's first
  // use and cached from its second on while the copies on top of the weights stay under
  // this (and weight_cache_limit).
  size_t winograd_cache_limit = size_t{1280} << 20;
  size_t winograd_band_bytes = size_t{16} << 20;
  // Large images instead run in chunks of about winograd_chunk_tiles 2x2 tiles, each on one
  // thread from input to output, once that makes at least winograd_min_chunks_per_thread
  // chunks per thread (the VAE's 128x128 levels up): their decode ran 8% faster (3.21 ->
  // 2.96 s, alternated). With fewer, larger-channel chunks (the UNet's 64x64 level) the
  // single-threaded GEMMs ran slower than one two-thread GEMM over the band.
  int64_t winograd_chunk_tiles = 512;
  int64_t winograd_min_chunks_per_thread = 4;

  // Whether the GEMM and convolution kernels compute from weights of type `t` as stored
  // (f32; bf16 with native bf16): other dtypes are converted per call, never kept.
  bool reads_as_stored(DType t) const {
    return t == DType::F32 || (t == DType::BF16 && native_bf16);
  }

  // `bytes` of 64-byte aligned memory in `slot`, valid until the slot's next request.
  void* scratch(DnnlScratch slot, size_t bytes);
  // A memory object of layout `desc` over scratch `slot`.
  dnnl::memory scratch_memory(DnnlScratch slot, const dnnl::memory::desc& desc);

  // The primitive cached under `key`, created by `make` on first use.
  const DnnlPrimitive& primitive(const DnnlKey& key, const std::function<DnnlPrimitive()>& make);
  // A reorder from layout `from` to `to`, cached under `key`, run on `from_data` into `to`.
  void reorder(const DnnlKey& key, const dnnl::memory::desc& from, const void* from_data,
               const dnnl::memory& to);

  // Whether `t`'s packed copy may be cached: weights and other leaves the caller does not
  // rewrite between calls (kFlagInput leaves change every call).
  static bool cacheable(const Tensor* t);
  // The packed copy of weight `t` in `layout`, filled by `pack` on first use and whenever
  // the bytes of `t` changed (a sampled fingerprint: LoRA applied in place, or another
  // weight loaded at the same address). An empty memory when `t` is not cacheable or the
  // cache is full; the caller then packs into scratch. A copy cached in another layout is
  // replaced, unless `keep_other_layout` (the caller then gets an empty memory too).
  // A copy in another dtype than `t`'s is never cached. A new copy that does not replace
  // `t`'s mapped pages is made only while such copies hold at most `limit` bytes with it
  // (and weight_cache_limit).
  dnnl::memory cached_weights(const Tensor* t, const dnnl::memory::desc& layout,
                              const std::function<void(const dnnl::memory&)>& pack,
                              bool keep_other_layout = false, size_t limit = SIZE_MAX);
  // Whether cached_weights would hand out a cached copy of `t` taking `bytes`: one is
  // cached already, or a new one replaces `t`'s mapped pages or fits in the cache.
  bool would_cache(const Tensor* t, size_t bytes) const;
  // Whether weight `t` was passed here before (since the last forget_weights); records it.
  // For copies worth caching only when a weight is used again (a UNet's, every step)
  // rather than once (a VAE's, once per image).
  bool seen_before(const Tensor* t);
  // Drops every packed copy (call after freeing weights, to give the memory back).
  void forget_weights();
  // Frees the scratch slots: a phase's largest requests (a 1024x1024 UNet's activations
  // converted for a GEMM) need not sit beside the next phase's.
  void release_scratch();
  size_t weight_cache_bytes() const { return weight_bytes_; }

  // Runs a primitive on the stream and waits.
  void execute(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args);

 private:
  struct Block {
    void* data = nullptr;
    size_t size = 0;
  };
  struct PackedWeights {
    dnnl::memory::desc layout;
    std::shared_ptr<void> storage;  // what `memory` points into
    dnnl::memory memory;
    uint64_t fingerprint = 0;
    bool extra = false;  // memory on top of the weight (it did not replace mapped pages)
  };
  using WeightKey =
      std::tuple<const void*, DType, std::array<int64_t, kMaxDims>, std::array<size_t, kMaxDims>>;

  // Whether a packed copy of `t` taking `bytes` would replace its read-only mapped pages
  // (costing no memory) rather than add to them.
  static bool replaces_pages(const Tensor* t, size_t bytes);

  Block scratch_[static_cast<int>(DnnlScratch::Count)];
  std::map<std::string, DnnlPrimitive> primitives_;
  std::map<WeightKey, PackedWeights> weights_;
  std::set<WeightKey> seen_;
  size_t weight_bytes_ = 0;
  size_t extra_bytes_ = 0;
};

}  // namespace sd
