#include "models/tiling.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace sd::models {
namespace {

// sd.cpp's smallest tile side and its default (latent pixels).
constexpr int kMinTile = 4;
constexpr int kDefaultTile = 32;

// How many tiles cover `small_dim` along one axis and the overlap fraction they end up with
// (sd.cpp's sd_tiling_calc_tiles): the target overlap is kept unless one more tile fits
// without the overlap passing half a tile; two tiles share whatever they must.
struct AxisTiles {
  int count = 1;
  float overlap = 0.0f;
};

AxisTiles plan_axis(int small_dim, int tile_size, float target_overlap, bool circular) {
  const int tile_overlap = static_cast<int>(tile_size * target_overlap);
  const int stride = tile_size - tile_overlap;
  AxisTiles t;
  if (circular) {  // the last tile wraps around onto the first
    t.count = std::max(small_dim / stride, 1);
    t.overlap = (tile_size - small_dim / t.count) / static_cast<float>(tile_size);
    if (t.count == 1 && t.overlap > 0) {  // at least two overlapping tiles
      t.count = 2;
      t.overlap = 0.5f;
    }
    return t;
  }
  t.count = (small_dim - tile_overlap) / stride;
  const int overshoot = ((t.count + 1) * stride + tile_overlap) % small_dim;
  if (overshoot != stride && overshoot <= t.count * (tile_size / 2 - tile_overlap)) ++t.count;
  if (t.count <= 2) {
    if (small_dim <= tile_size) return AxisTiles{1, 0.0f};
    return AxisTiles{2, (2 * tile_size - small_dim) / static_cast<float>(tile_size)};
  }
  t.overlap = static_cast<float>(tile_size * t.count - small_dim) /
              static_cast<float>(tile_size * (t.count - 1));
  return t;
}

// Quintic smoothstep (Perlin's smootherstep) on [0, 1]: the blend ramp of an overlap.
float smootherstep(float x) {
  return x * x * x * (x * (6.0f * x - 15.0f) + 10.0f);
}

// Copies a w x h window at (x, y) of every plane of `in`, wrapping around the edges.
std::vector<float> cut_tile(const std::vector<float>& in, int64_t in_w, int64_t in_h,
                            int64_t planes, int64_t w, int64_t h, int64_t x, int64_t y) {
  std::vector<float> tile(static_cast<size_t>(w * h * planes));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t iy = 0; iy < h; ++iy) {
      const float* src_row = in.data() + (p * in_h + (iy + y) % in_h) * in_w;
      float* dst_row = tile.data() + (p * h + iy) * w;
      for (int64_t ix = 0; ix < w; ++ix) dst_row[ix] = src_row[(ix + x) % in_w];
    }
  return tile;
}

// Adds a tile's output into `out` at (x, y), weighted by smootherstep ramps over the
// overlaps with the tiles before and after it on each axis (weights of overlapping tiles
// sum to 1). The first skip_x columns and skip_y rows, already covered when the last tile
// was pulled back inside the image, are left out. Without overlap the tile is copied.
void blend_tile(const std::vector<float>& tile, int64_t w, int64_t h, TiledArray& out, int64_t x,
                int64_t y, int overlap_x, int overlap_y, bool circular_x, bool circular_y,
                int64_t skip_x, int64_t skip_y) {
  const bool ramps_x0 = circular_x || (overlap_x > 0 && x > 0);
  const bool ramps_x1 = circular_x || (overlap_x > 0 && x < out.width - w);
  const bool ramps_y0 = circular_y || (overlap_y > 0 && y > 0);
  const bool ramps_y1 = circular_y || (overlap_y > 0 && y < out.height - h);
  auto weight = [](bool ramp0, bool ramp1, int64_t i, int64_t skip, int64_t size, int overlap) {
    if (overlap <= 0) return 1.0f;  // also a circular axis without overlap: nothing to ramp
    const float f0 = ramp0 ? static_cast<float>(i - skip) / static_cast<float>(overlap) : 1.0f;
    const float f1 = ramp1 ? static_cast<float>(size - i) / static_cast<float>(overlap) : 1.0f;
    return smootherstep(std::min(std::min(f0, f1), 1.0f));
  };
  const bool blend = overlap_x > 0 || overlap_y > 0;
  for (int64_t iy = skip_y; iy < h; ++iy) {
    const int64_t oy = (y + iy) % out.height;
    const float wy = weight(ramps_y0, ramps_y1, iy, skip_y, h, overlap_y);
    for (int64_t ix = skip_x; ix < w; ++ix) {
      const int64_t ox = (x + ix) % out.width;
      const float wx = weight(ramps_x0, ramps_x1, ix, skip_x, w, overlap_x);
      for (int64_t p = 0; p < out.planes; ++p) {
        const float v = tile[static_cast<size_t>((p * h + iy) * w + ix)];
        float& dst = out.data[static_cast<size_t>((p * out.height + oy) * out.width + ox)];
        dst = blend ? dst + v * wy * wx : v;
      }
    }
  }
}

}  // namespace

TileSizes choose_tile_sizes(const TilingParams& params, int64_t latent_w, int64_t latent_h,
                            float encoding_factor) {
  TileSizes t;
  t.overlap = std::max(std::min(params.target_overlap, 0.5f), 0.0f);
  auto side = [&](int requested, float factor, int64_t latent) {
    int tile = kDefaultTile;
    if (factor > 0.0f) {
      // Above 1 the factor counts tiles; turn it into a fraction of the latent that many
      // overlapping tiles cover.
      if (factor > 1.0f) factor = 1 / (factor - factor * t.overlap + t.overlap);
      tile = static_cast<int>(std::round(latent * factor));
    } else if (requested >= kMinTile) {
      tile = requested;
    }
    tile = static_cast<int>(tile * encoding_factor);
    return std::max(std::min(tile, static_cast<int>(latent)), kMinTile);
  };
  t.x = side(params.tile_size_x, params.rel_size_x, latent_w);
  t.y = side(params.tile_size_y, params.rel_size_y, latent_h);
  return t;
}

TiledArray process_tiles_2d(const std::vector<float>& input, int64_t in_w, int64_t in_h,
                            int64_t planes, int64_t out_w, int64_t out_h, int scale, int tile_x,
                            int tile_y, float overlap, const TileFn& fn, bool circular_x,
                            bool circular_y) {
  SD_CHECK(in_w > 0 && in_h > 0 && planes > 0 && scale > 0 &&
               input.size() == static_cast<size_t>(in_w * in_h * planes),
           "[tiling] input of %zu values is not [%lld, %lld, %lld]", input.size(),
           static_cast<long long>(in_w), static_cast<long long>(in_h),
           static_cast<long long>(planes));
  const bool decode = out_w > in_w;
  SD_CHECK(decode ? (out_w == in_w * scale && out_h == in_h * scale)
                  : (in_w == out_w * scale && in_h == out_h * scale),
           "[tiling] %lldx%lld -> %lldx%lld is not a scaling by %d", static_cast<long long>(in_w),
           static_cast<long long>(in_h), static_cast<long long>(out_w),
           static_cast<long long>(out_h), scale);
  SD_CHECK(tile_x >= 1 && tile_y >= 1 && overlap >= 0.0f && overlap <= 0.5f,
           "[tiling] tile %dx%d with overlap %g: tiles need a side >= 1 and overlap in [0, 0.5]",
           tile_x, tile_y, overlap);
  // Tiles are planned on the smaller (latent) side.
  const int small_w = static_cast<int>(decode ? in_w : out_w);
  const int small_h = static_cast<int>(decode ? in_h : out_h);
  const AxisTiles plan_x = plan_axis(small_w, tile_x, overlap, circular_x);
  const AxisTiles plan_y = plan_axis(small_h, tile_y, overlap, circular_y);
  const int overlap_x = static_cast<int>(tile_x * plan_x.overlap);
  const int overlap_y = static_cast<int>(tile_y * plan_y.overlap);
  const int stride_x = tile_x - overlap_x, stride_y = tile_y - overlap_y;
  SD_CHECK(stride_x > 0 && stride_y > 0, "[tiling] tiles %dx%d do not advance", tile_x, tile_y);
  const int size_x = std::min(tile_x, small_w), size_y = std::min(tile_y, small_h);
  const int64_t in_tile_w = decode ? size_x : int64_t{size_x} * scale;
  const int64_t in_tile_h = decode ? size_y : int64_t{size_y} * scale;
  const int64_t out_tile_w = decode ? int64_t{size_x} * scale : size_x;
  const int64_t out_tile_h = decode ? int64_t{size_y} * scale : size_y;
  const int out_scale = decode ? scale : 1;  // latent -> output pixels

  TiledArray out;
  out.width = out_w;
  out.height = out_h;
  bool last_y = false;
  for (int y = 0; y < small_h && !last_y; y += stride_y) {
    int skip_y = 0;
    if (!circular_y && y + size_y >= small_h) {  // pull the last tile back inside
      skip_y = (y - (small_h - size_y)) * out_scale;
      y = small_h - size_y;
      last_y = true;
    }
    bool last_x = false;
    for (int x = 0; x < small_w && !last_x; x += stride_x) {
      int skip_x = 0;
      if (!circular_x && x + size_x >= small_w) {
        skip_x = (x - (small_w - size_x)) * out_scale;
        x = small_w - size_x;
        last_x = true;
      }
      const int64_t in_x = decode ? x : int64_t{x} * scale, in_y = decode ? y : int64_t{y} * scale;
      std::vector<float> result =
          fn(cut_tile(input, in_w, in_h, planes, in_tile_w, in_tile_h, in_x, in_y), in_tile_w,
             in_tile_h);
      const int64_t tile_plane = out_tile_w * out_tile_h;
      SD_CHECK(!result.empty() && result.size() % static_cast<size_t>(tile_plane) == 0,
               "[tiling] a %lldx%lld tile gave %zu values, not planes of %lldx%lld",
               static_cast<long long>(in_tile_w), static_cast<long long>(in_tile_h), result.size(),
               static_cast<long long>(out_tile_w), static_cast<long long>(out_tile_h));
      const int64_t result_planes = static_cast<int64_t>(result.size()) / tile_plane;
      if (out.data.empty()) {
        out.planes = result_planes;
        out.data.assign(static_cast<size_t>(out_w * out_h * out.planes), 0.0f);
      }
      SD_CHECK(result_planes == out.planes, "[tiling] tiles gave %lld and %lld planes",
               static_cast<long long>(out.planes), static_cast<long long>(result_planes));
      blend_tile(result, out_tile_w, out_tile_h, out, int64_t{x} * out_scale,
                 int64_t{y} * out_scale, overlap_x * out_scale, overlap_y * out_scale, circular_x,
                 circular_y, skip_x, skip_y);
    }
  }
  return out;
}

TiledArray tiled_decode(const std::vector<float>& latent, int64_t w, int64_t h, int64_t planes,
                        int scale, const TilingParams& params, const TileFn& fn, bool circular_x,
                        bool circular_y) {
  const TileSizes t = choose_tile_sizes(params, w, h);
  return process_tiles_2d(latent, w, h, planes, w * scale, h * scale, scale, t.x, t.y, t.overlap,
                          fn, circular_x && t.x >= w, circular_y && t.y >= h);
}

TiledArray tiled_encode(const std::vector<float>& image, int64_t width, int64_t height,
                        int64_t planes, int scale, const TilingParams& params, const TileFn& fn,
                        bool circular_x, bool circular_y) {
  SD_CHECK(scale > 0 && width % scale == 0 && height % scale == 0,
           "[tiling] encode of a %lldx%lld image needs sides that are multiples of %d",
           static_cast<long long>(width), static_cast<long long>(height), scale);
  const int64_t w = width / scale, h = height / scale;
  const TileSizes t = choose_tile_sizes(params, w, h, kEncodeTileFactor);
  // sd.cpp decides the wrapping from the decode tile size, for encoding too.
  const TileSizes decode_tiles = choose_tile_sizes(params, w, h);
  return process_tiles_2d(image, width, height, planes, w, h, scale, t.x, t.y, t.overlap, fn,
                          circular_x && decode_tiles.x >= w, circular_y && decode_tiles.y >= h);
}

}  // namespace sd::models
