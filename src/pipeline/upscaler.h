// Image upscaling with an ESRGAN model (models/esrgan.h), whole or in overlapping tiles:
// what `sd-cli -M upscale`, `--upscale-model` and the C API's upscaler context run.
//
// Tiling follows stable-diffusion.cpp's upscaler: an image larger than the tile size on
// either side is cut into tiles of tile_size x tile_size input pixels overlapping by a
// quarter, each upscaled on its own and blended with smootherstep ramps (models/tiling.h),
// so the network's memory is bounded by the tile, not the image; tile_size <= 0 upscales
// whole images.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/image.h"
#include "models/esrgan.h"
#include "tensor/context.h"

namespace sd::pipeline {

struct UpscalerOptions {
  std::string model;  // an ESRGAN weight file: safetensors, GGUF, .pth/.ckpt
  int threads = 0;    // 0: every core
  int tile_size = 128;
  // --type: the weights converted to this type as they load (bf16: the CPU's bf16
  // convolution kernels, half the weight memory); unset keeps the file's types.
  std::optional<DType> weight_type;
  std::string backend, params_backend;  // --backend / --params-backend (module "upscaler")
};

// The RRDBNet configuration of a file's tensors (Real-ESRGAN names, shapes in engine
// order): block count from body.N, features and growth from the conv shapes, the upsampling
// layers from conv_up1/conv_up2 and the pixel-unshuffle factor from conv_first's input
// channels. Throws an sd::Error naming `what` when the tensors are not an RRDBNet.
models::EsrganConfig detect_esrgan_config(const std::map<std::string, Shape>& tensors,
                                          const std::string& what);

class Upscaler {
 public:
  // Reads the file's metadata and checks every tensor the network needs; weights are read
  // on first use.
  explicit Upscaler(const UpscalerOptions& options);
  ~Upscaler();
  Upscaler(const Upscaler&) = delete;
  Upscaler& operator=(const Upscaler&) = delete;

  const models::EsrganConfig& config() const;
  int scale() const { return config().scale(); }
  std::string placement() const;

  // An RGB image -> the image `scale()` times larger on each side.
  io::Image upscale(const io::Image& image);
  // [W, H, 3] planes in [0, 1] -> [W * scale, H * scale, 3], not clamped.
  std::vector<float> upscale_planes(const std::vector<float>& planes, int64_t width,
                                    int64_t height);
  // The largest compute buffer (the network's working memory) the last upscale used; it
  // is freed when an upscale ends.
  size_t last_peak_compute_buffer() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sd::pipeline
