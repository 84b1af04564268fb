#include "backend/cpu/weight_packing.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include "backend/cpu/transpose16_avx512.h"
#define SD_HAVE_BLOCKED_PACKER 1
#define SD_AVX512_TARGET __attribute__((target("avx512f,avx512bw")))
#endif

namespace sd {

namespace {

using dnnl::memory;

constexpr int64_t kUnits = 16;    // 32-bit units per block along K
constexpr int64_t kOutputs = 64;  // outputs per block
constexpr int64_t kBlockUnits = kUnits * kOutputs;

// Bytes per value of the layout's dtype (0: not one the packer writes).
int64_t value_bytes(const memory::desc& layout) {
  switch (layout.data.data_type) {
    case dnnl_f32:
      return 4;
    case dnnl_bf16:
      return 2;
    default:
      return 0;
  }
}

#ifdef SD_HAVE_BLOCKED_PACKER
// GCC 12's AVX-512 headers start some intrinsics from a deliberately undefined vector,
// which its own -Wuninitialized then reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

struct Packing {
  const char* src;
  size_t row_bytes;
  int64_t rows;            // N
  int64_t row_bytes_used;  // K values' bytes per row
  int64_t k_blocks;        // blocks of 16 units in the padded K
  uint32_t* out;
};

// Block (nb, kb): outputs nb * 64 .. + 63, units kb * 16 .. + 15 of each.
SD_AVX512_TARGET void pack_block(const Packing& p, int64_t nb, int64_t kb) {
  uint32_t* block = p.out + (nb * p.k_blocks + kb) * kBlockUnits;
  const int64_t byte0 = kb * kUnits * 4;
  const int64_t bytes = std::clamp<int64_t>(p.row_bytes_used - byte0, 0, 64);
  const auto mask = static_cast<__mmask32>(bytes >= 64 ? ~0u : (1u << (bytes / 2)) - 1);
  for (int64_t t = 0; t < kOutputs / 16; ++t) {
    __m512i r[16];
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t n = nb * kOutputs + t * 16 + i;
      r[i] = n < p.rows && bytes > 0
                 ? _mm512_maskz_loadu_epi16(mask, p.src + n * p.row_bytes + byte0)
                 : _mm512_setzero_si512();
    }
    transpose16x16(r);
    for (int64_t u = 0; u < kUnits; ++u) _mm512_storeu_si512(block + u * kOutputs + t * 16, r[u]);
  }
}

#pragma GCC diagnostic pop

bool cpu_has_packer() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return ok;
}
#else
bool cpu_has_packer() {
  return false;
}
#endif

}  // namespace

bool packs_as_blocked_rows(const memory::desc& layout) {
  const dnnl_memory_desc_t& d = layout.data;
  const int64_t es = value_bytes(layout);
  if (!cpu_has_packer() || es == 0 || d.ndims != 2 || d.format_kind != dnnl_blocked ||
      d.extra.flags != 0 || d.offset0 != 0)
    return false;
  const auto& b = d.format_desc.blocking;
  const int64_t pair = 4 / es;  // values per unit
  if (b.inner_nblks != (pair == 1 ? 2 : 3) || b.inner_blks[0] != kUnits || b.inner_idxs[0] != 0 ||
      b.inner_blks[1] != kOutputs || b.inner_idxs[1] != 1)
    return false;
  if (pair == 2 && (b.inner_blks[2] != 2 || b.inner_idxs[2] != 0)) return false;
  const int64_t k_pad = d.padded_dims[0], n_pad = d.padded_dims[1];
  return k_pad % (kUnits * pair) == 0 && n_pad % kOutputs == 0 &&
         b.strides[0] == kBlockUnits * pair && b.strides[1] == k_pad * kOutputs;
}

void pack_blocked_rows(CpuContext& ctx, const void* src, size_t row_bytes,
                       const memory::desc& layout, void* out) {
#ifdef SD_HAVE_BLOCKED_PACKER
  const dnnl_memory_desc_t& d = layout.data;
  const int64_t es = value_bytes(layout);
  Packing p{static_cast<const char*>(src),
            row_bytes,
            d.dims[1],
            d.dims[0] * es,
            d.padded_dims[0] * es / 4 / kUnits,
            static_cast<uint32_t*>(out)};
  const int64_t n_blocks = d.padded_dims[1] / kOutputs, blocks = n_blocks * p.k_blocks;
#pragma omp parallel for num_threads(ctx.threads) schedule(static)
  for (int64_t i = 0; i < blocks; ++i) pack_block(p, i / p.k_blocks, i % p.k_blocks);
#else
  (void)ctx, (void)src, (void)row_bytes, (void)layout, (void)out;
#endif
}

}  // namespace sd
