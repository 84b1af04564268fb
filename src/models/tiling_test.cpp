#include "models/tiling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "backend/registry.h"
#include "models/vae.h"
#include "nn/graph_runner.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "test_support.h"

namespace sd::models {
namespace {

// Nearest upscaling by `scale`: what a decoder does to a constant image, so tiling it must
// give the upscaled input back wherever the blend weights sum to one.
std::vector<float> upscale_nearest(const std::vector<float>& in, int64_t w, int64_t h, int scale) {
  const int64_t planes = static_cast<int64_t>(in.size()) / (w * h);
  std::vector<float> out(in.size() * scale * scale);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < h * scale; ++y)
      for (int64_t x = 0; x < w * scale; ++x)
        out[(p * h * scale + y) * w * scale + x] = in[(p * h + y / scale) * w + x / scale];
  return out;
}

// Every scale-th pixel: an "encoder" that is exact on any tiling.
std::vector<float> subsample(const std::vector<float>& in, int64_t w, int64_t h, int scale) {
  const int64_t planes = static_cast<int64_t>(in.size()) / (w * h);
  std::vector<float> out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < h; y += scale)
      for (int64_t x = 0; x < w; x += scale) out.push_back(in[(p * h + y) * w + x]);
  return out;
}

TEST(Tiling, TileSizesFollowTheFlags) {
  TilingParams p;  // defaults: 32 latent pixels, overlap 0.5
  TileSizes t = choose_tile_sizes(p, 64, 64);
  EXPECT_EQ(t.x, 32);
  EXPECT_EQ(t.y, 32);
  EXPECT_FLOAT_EQ(t.overlap, 0.5f);
  EXPECT_EQ(choose_tile_sizes(p, 64, 64, kEncodeTileFactor).x, 64);  // encode: 2x tiles
  EXPECT_EQ(choose_tile_sizes(p, 20, 64).x, 20);                     // never past the latent
  p.tile_size_x = 16;
  p.tile_size_y = 2;  // below 4: the default
  p.target_overlap = 0.9f;
  t = choose_tile_sizes(p, 64, 64);
  EXPECT_EQ(t.x, 16);
  EXPECT_EQ(t.y, 32);
  EXPECT_FLOAT_EQ(t.overlap, 0.5f);  // clamped
  p.target_overlap = 0.5f;
  p.rel_size_x = 0.25f;  // a fraction of the latent
  p.rel_size_y = 3.0f;   // three tiles overlapping by half: each half the latent
  t = choose_tile_sizes(p, 64, 64);
  EXPECT_EQ(t.x, 16);
  EXPECT_EQ(t.y, 32);
}

// The x origins (latent pixels) of the tiles of one row, found from tile contents.
std::vector<int64_t> tile_origins(int64_t w, int tile, float overlap) {
  std::vector<float> latent(static_cast<size_t>(w));
  for (int64_t x = 0; x < w; ++x) latent[x] = static_cast<float>(x);
  std::vector<int64_t> origins;
  process_tiles_2d(latent, w, 1, 1, w * 2, 2, 2, tile, 1, overlap,
                   [&](const std::vector<float>& t, int64_t tw, int64_t th) {
                     origins.push_back(static_cast<int64_t>(t[0]));
                     return upscale_nearest(t, tw, th, 2);
                   });
  return origins;
}

TEST(Tiling, TilePlacementIsStableDiffusionCpps) {
  // 64 with tiles of 32 at overlap 0.5: strides of 16, the third tile ends at the edge.
  EXPECT_EQ(tile_origins(64, 32, 0.5f), (std::vector<int64_t>{0, 16, 32}));
  // 37 with tiles of 16: three tiles fit only at overlap 11/32 (stride 11); the last one is
  // pulled back from 22 to 21.
  EXPECT_EQ(tile_origins(37, 16, 0.5f), (std::vector<int64_t>{0, 11, 21}));
  // 24 with tiles of 16: two tiles sharing 8.
  EXPECT_EQ(tile_origins(24, 16, 0.5f), (std::vector<int64_t>{0, 8}));
  // One tile when it covers everything.
  EXPECT_EQ(tile_origins(12, 16, 0.5f), (std::vector<int64_t>{0}));
  // Even at overlap 0 a third tile of 16 over 40 overlaps its neighbours by 4.
  EXPECT_EQ(tile_origins(40, 16, 0.0f), (std::vector<int64_t>{0, 12, 24}));
}

TEST(Tiling, UpscalingCallbackReproducesTheInput) {
  struct Case {
    int64_t w, h;
    int tile;
    float overlap;
  };
  for (const Case& c : {Case{64, 64, 32, 0.5f}, Case{40, 24, 16, 0.3f}, Case{37, 29, 8, 0.5f},
                        Case{10, 10, 32, 0.5f}, Case{33, 17, 16, 0.0f}}) {
    const int64_t planes = 3;
    const std::vector<float> latent = test::random_values(c.w * c.h * planes, 11);
    TilingParams p;
    p.tile_size_x = p.tile_size_y = c.tile;
    p.target_overlap = c.overlap;
    int calls = 0;
    const TiledArray out = tiled_decode(latent, c.w, c.h, planes, 8, p,
                                        [&](const std::vector<float>& t, int64_t tw, int64_t th) {
                                          ++calls;
                                          return upscale_nearest(t, tw, th, 8);
                                        });
    ASSERT_EQ(out.width, c.w * 8);
    ASSERT_EQ(out.height, c.h * 8);
    ASSERT_EQ(out.planes, planes);
    EXPECT_LE(test::max_scaled_error(out.data, upscale_nearest(latent, c.w, c.h, 8), 1e-5, 1e-5),
              1.0)
        << c.w << "x" << c.h << " tile " << c.tile;
    EXPECT_EQ(calls > 1, c.w > c.tile || c.h > c.tile);
  }
}

TEST(Tiling, CircularTilesWrapAroundAndStillSumToOne) {
  // --circular with one tile spanning each axis: two tiles per axis, the second wrapping
  // around the edge; with a tile smaller than the axis sd.cpp does not wrap it.
  for (const int64_t w : {16, 40}) {
    const int64_t h = 12;
    const std::vector<float> latent = test::random_values(w * h, 15);
    TilingParams p;
    p.tile_size_x = p.tile_size_y = 16;
    std::set<int64_t> origins;
    const TiledArray out = tiled_decode(
        latent, w, h, 1, 2, p,
        [&](const std::vector<float>& t, int64_t tw, int64_t th) {
          origins.insert(
              static_cast<int64_t>(std::find(latent.begin(), latent.end(), t[0]) - latent.begin()));
          return upscale_nearest(t, tw, th, 2);
        },
        true, true);
    EXPECT_LE(test::max_scaled_error(out.data, upscale_nearest(latent, w, h, 2), 1e-5, 1e-5), 1.0)
        << w;
    if (w == 16) {  // tiles start at (0, 0), (8, 0), (0, 6), (8, 6)
      EXPECT_EQ(origins, (std::set<int64_t>{0, 8, 6 * w, 6 * w + 8}));
    } else {  // x tiles as without wrapping (0, 8, 16, 24), y wraps
      EXPECT_EQ(origins.size(), 8u);
      EXPECT_TRUE(origins.count(24));
    }
  }
}

TEST(Tiling, SubsamplingCallbackReproducesTheInputWhenEncoding) {
  const int64_t w = 200, h = 136;  // latent 25 x 17; tiles of 2 * 8 = 16
  const std::vector<float> image = test::random_values(w * h * 2, 12);
  TilingParams p;
  p.tile_size_x = p.tile_size_y = 8;
  int calls = 0;
  const TiledArray out =
      tiled_encode(image, w, h, 2, 8, p, [&](const std::vector<float>& t, int64_t tw, int64_t th) {
        EXPECT_EQ(tw, 128);
        EXPECT_EQ(th, 128);
        ++calls;
        return subsample(t, tw, th, 8);
      });
  EXPECT_GT(calls, 2);
  ASSERT_EQ(out.width, 25);
  ASSERT_EQ(out.height, 17);
  EXPECT_LE(test::max_scaled_error(out.data, subsample(image, w, h, 8), 1e-5, 1e-5), 1.0);
}

TEST(Tiling, BadInputIsAnError) {
  const std::vector<float> latent(16 * 16, 1.0f);
  auto upscale = [](const std::vector<float>& t, int64_t tw, int64_t th) {
    return upscale_nearest(t, tw, th, 8);
  };
  EXPECT_THROW(process_tiles_2d(latent, 16, 16, 1, 100, 128, 8, 8, 8, 0.5f, upscale), Error);
  EXPECT_THROW(process_tiles_2d(latent, 16, 8, 1, 128, 64, 8, 8, 8, 0.5f, upscale), Error);
  EXPECT_THROW(process_tiles_2d(latent, 16, 16, 1, 128, 128, 8, 8, 8, 0.5f,
                                [](const std::vector<float>&, int64_t, int64_t) {
                                  return std::vector<float>(7);
                                }),
               Error);
}

TEST(Tiling, TiledTinyVaeDecodeMatchesUntiledInTheInterior) {
  // A 2x tiny autoencoder. GroupNorm statistics are per tile and tile edges see zero
  // padding, so tiled and untiled differ somewhat everywhere; with a stationary latent the
  // difference is small next to the image, and where tiles overlap the blend hides seams.
  VaeConfig cfg;
  cfg.ch = 32;
  cfg.ch_mult = {1, 2};
  cfg.num_res_blocks = 1;
  cfg.scale_factor = 1.0f;
  nn::RandomWeights w;
  auto backend = DeviceRegistry::instance().get("CPU").create_backend(BackendOptions{2});
  nn::GraphRunner runner(*backend);
  auto decode = [&](const std::vector<float>& z, int64_t lw, int64_t lh) {
    nn::GraphCall call;
    Tensor* in = call.input_f32("z", make_shape({lw, lh, 4, 1}), z.data());
    return runner.run(call, vae_decode(nn::Scope(call.ctx(), w, "first_stage_model."), cfg, in));
  };
  const int64_t lw = 32, lh = 32;
  const std::vector<float> z = test::random_values(lw * lh * 4, 13, -1.0f, 1.0f);
  const std::vector<float> whole = decode(z, lw, lh);
  TilingParams p;
  p.tile_size_x = p.tile_size_y = 16;
  const TiledArray tiled = tiled_decode(z, lw, lh, 4, 2, p, decode);
  ASSERT_EQ(tiled.data.size(), whole.size());
  // RMS difference over the interior (4 latent pixels from the border) against the RMS of
  // the image.
  double diff = 0, norm = 0;
  const int64_t w2 = lw * 2, h2 = lh * 2, margin = 8;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = margin; y < h2 - margin; ++y)
      for (int64_t x = margin; x < w2 - margin; ++x) {
        const size_t i = static_cast<size_t>((c * h2 + y) * w2 + x);
        diff += (tiled.data[i] - whole[i]) * (tiled.data[i] - whole[i]);
        norm += whole[i] * whole[i];
      }
  // Measured: 0.21, against 1.58 for the decode of an unrelated latent below.
  EXPECT_LT(std::sqrt(diff / norm), 0.35);
  const std::vector<float> other = decode(test::random_values(lw * lh * 4, 14), lw, lh);
  double other_diff = 0;
  for (size_t i = 0; i < whole.size(); ++i)
    other_diff += (other[i] - whole[i]) * (other[i] - whole[i]);
  EXPECT_GT(std::sqrt(other_diff / norm), 0.5);
}

}  // namespace
}  // namespace sd::models
