// Tiled VAE processing (--vae-tiling): the image or latent is cut into overlapping tiles,
// each tile goes through the network on its own (bounded memory), and the outputs are
// blended back with smootherstep ramps across the overlaps. The tile placement, the
// overlap each axis ends up with and the blend weights are stable-diffusion.cpp's, so a
// tiled decode gives the same image as sd.cpp's for the same flags.
//
// Arrays are host f32 in the engine's layout: [width, height, planes] with width fastest,
// where planes = channels x batch (each plane is tiled the same way).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace sd::models {

// What --vae-tile-size, --vae-relative-tile-size and --vae-tile-overlap ask for (sd.cpp's
// sd_tiling_params_t; defaults are sd.cpp's).
struct TilingParams {
  int tile_size_x = 0, tile_size_y = 0;  // latent pixels; below 4 means the default, 32
  float target_overlap = 0.5f;           // fraction of a tile, clamped to [0, 0.5]
  // --vae-relative-tile-size: in (0, 1] a fraction of the latent size, above 1 a number of
  // tiles per axis; 0 leaves the absolute size in charge.
  float rel_size_x = 0.0f, rel_size_y = 0.0f;
};

struct TileSizes {
  int x = 0, y = 0;      // in latent pixels
  float overlap = 0.0f;  // target overlap fraction
};

// sd.cpp's image VAE encode uses tiles this many times larger (64 latent pixels by
// default, so a 512x512 SD image encodes as one tile).
inline constexpr float kEncodeTileFactor = 2.0f;

// The tile size sd.cpp picks for a latent of latent_w x latent_h (get_tile_sizes):
// `encoding_factor` is 1 for decode and kEncodeTileFactor for encode.
TileSizes choose_tile_sizes(const TilingParams& params, int64_t latent_w, int64_t latent_h,
                            float encoding_factor = 1.0f);

// Runs one tile: `tile` is [tile_w, tile_h, planes]; returns the tile's output
// [tile_w * scale, tile_h * scale, out_planes] when decoding, [tile_w / scale,
// tile_h / scale, out_planes] when encoding (out_planes may differ from planes).
using TileFn = std::function<std::vector<float>(const std::vector<float>& tile, int64_t tile_w,
                                                int64_t tile_h)>;

struct TiledArray {
  std::vector<float> data;
  int64_t width = 0, height = 0, planes = 0;
};

// sd.cpp's process_tiles_2d. input [in_w, in_h, planes]; the output is out_w x out_h, one
// side `scale` times the other's (decode: out = in * scale, encode: in = out * scale).
// tile_x, tile_y are in pixels of the smaller (latent) side. Circular axes wrap tiles
// around the edge (--circular). Errors in `fn` propagate.
TiledArray process_tiles_2d(const std::vector<float>& input, int64_t in_w, int64_t in_h,
                            int64_t planes, int64_t out_w, int64_t out_h, int scale, int tile_x,
                            int tile_y, float overlap, const TileFn& fn, bool circular_x = false,
                            bool circular_y = false);

// Decode as sd.cpp's VAE::decode with tiling: latent [w, h, planes] -> [w * scale, h * scale,
// out_planes]. `fn` decodes one latent tile. circular_x/y are the --circular flags: as in
// sd.cpp, an axis wraps only where one decode tile spans it (otherwise tiles meet at the
// edge as usual).
TiledArray tiled_decode(const std::vector<float>& latent, int64_t w, int64_t h, int64_t planes,
                        int scale, const TilingParams& params, const TileFn& fn,
                        bool circular_x = false, bool circular_y = false);

// Encode as sd.cpp's VAE::encode with tiling: image [W, H, planes] (W, H multiples of
// scale) -> [W / scale, H / scale, out_planes], tiles kEncodeTileFactor times larger.
// Circular axes as for tiled_decode (decided by the decode tile size, as sd.cpp does).
TiledArray tiled_encode(const std::vector<float>& image, int64_t width, int64_t height,
                        int64_t planes, int scale, const TilingParams& params, const TileFn& fn,
                        bool circular_x = false, bool circular_y = false);

}  // namespace sd::models
