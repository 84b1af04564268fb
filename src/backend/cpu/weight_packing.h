// Weights packed into the blocked layout oneDNN's AVX-512 GEMM reads them in, by our own
// transpose instead of oneDNN's reorder. A weight the cache does not keep (an f16 file's
// weights widened to f32 tile by tile, bf16 weights beyond the cache's bound) is packed on
// every call, and oneDNN's reorder took twice as long as this packer (an SDXL UNet call in
// bf16 packs 400 weights per call: 0.35 s of reorders, 0.18 s here; a 5120 x 1280 weight
// in cache 2.2 ms against 0.65), which at a few hundred GEMM rows is up to a fifth of the
// product's time. Copies made once for the cache are packed the same way.
//
// The layout, for weights [K, N] (K summed, N outputs): blocks of 64 outputs, each a run
// of K blocks of 16 32-bit units by those 64 outputs, a unit being one f32 or a pair of
// bf16 values adjacent in K (oneDNN's BA16a64b for f32, BA16a64b2a for bf16). The weight's
// rows (one output's K values, contiguous) are 64-byte runs of 16 units, so each block is
// four 16x16 transposes of 32-bit units.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_context.h"

namespace sd {

// Whether `layout` is that blocked layout of a 2-D f32 or bf16 weight and this CPU runs the
// packer (AVX-512).
bool packs_as_blocked_rows(const dnnl::memory::desc& layout);

// Packs N rows of K values each (`src`, rows `row_bytes` apart, in the layout's dtype)
// into `layout` (packs_as_blocked_rows) at `out`, padding with zeros.
void pack_blocked_rows(CpuContext& ctx, const void* src, size_t row_bytes,
                       const dnnl::memory::desc& layout, void* out);

}  // namespace sd
