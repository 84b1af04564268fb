// The highres fix (stable-diffusion-webui's "Hires. fix", as stable-diffusion.cpp runs it):
// sample at the size the model was trained for, upscale the result, then denoise it again
// at the larger size from part way down a fresh schedule, so the composition comes from the
// first pass and the detail from the second.
//
// Upscaling works either on the latent (interpolated directly) or on the image (decoded,
// resized with Lanczos or nearest, or enlarged by an ESRGAN model, then encoded again). The
// second pass reuses the prompt's conditioning, the sampler and the scheduler; each batch
// entry reseeds the generation RNG with its seed first, so its draws (the VAE posterior
// sample, then the noise) are sd.cpp's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/upscaler.h"
#include "sampling/rng.h"

namespace sd::pipeline {

// In the order and with the names of the C API's sd_hires_upscaler_t.
enum class HiresUpscaler {
  Latent,  // bilinear
  LatentNearest,
  LatentNearestExact,
  LatentAntialiased,
  LatentBicubic,
  LatentBicubicAntialiased,
  Lanczos,
  Nearest,
  Model,  // an ESRGAN model file
};

// "Latent", "Latent (nearest)", ..., "Lanczos", "Nearest", "Model".
const char* hires_upscaler_name(HiresUpscaler upscaler);
// The upscaler of that name; anything else throws an sd::Error listing the valid names.
HiresUpscaler parse_hires_upscaler(std::string_view name);
// The valid names, comma separated, for messages.
std::string hires_upscaler_names();
bool upscales_latent(HiresUpscaler upscaler);

struct HiresOptions {
  bool enabled = false;
  HiresUpscaler upscaler = HiresUpscaler::Latent;
  std::string model;   // HiresUpscaler::Model: the ESRGAN file
  float scale = 2.0f;  // used when neither target side is given
  int width = 0;       // target size; one side alone makes a square
  int height = 0;
  int steps = 0;  // steps of the second pass; 0: the first pass's
  float denoising_strength = 0.7f;
  std::vector<float> custom_sigmas;  // replace the second pass's schedule
  int upscale_tile_size = 128;       // the ESRGAN model's tile (<= 0: whole images)
};

// The second pass's sigmas. As sd-webui, the schedule is stretched to n = steps / strength
// steps and then trimmed as img2img trims (its last t_enc + 1, t_enc = n * strength), so
// the second pass takes about `steps` steps whatever the strength, where img2img's count
// shrinks with it. `schedule(n)` makes an n-step schedule.
std::vector<float> hires_sigmas(const HiresOptions& options, int default_steps,
                                const std::function<std::vector<float>(int)>& schedule);

// What the second pass needs from the pipeline that owns the networks.
struct HiresStages {
  // A first-pass latent -> its image, [W, H, 3] planes clamped to [0, 1].
  std::function<std::vector<float>(const std::vector<float>& latent)> decode;
  // An image at the target size -> its latent, drawing the posterior sample from `rng`.
  std::function<std::vector<float>(const std::vector<float>& image, sampling::Rng& rng)> encode;
  // Decoding and encoding are over (the VAE may give its memory back).
  std::function<void()> images_done;
  // Denoises batch entry `b` from `init_latent` (target size) with `mask` (the denoise
  // mask at the target latent size; empty: all of it), drawing the noise from `rng`.
  std::function<std::vector<float>(const std::vector<float>& init_latent,
                                   const std::vector<float>& mask, int b, sampling::Rng& rng)>
      sample;
};

class HiresFix {
 public:
  // Checks the options and works out the target size for a first pass of width x height:
  // given sides must be multiples of 8; the size is aligned up to `unit` pixels as the
  // first pass's is (told through `warn`). A model upscaler's file is opened and checked
  // now. Throws sd::Error before any work for anything invalid.
  HiresFix(const HiresOptions& options, int width, int height, int unit,
           const UpscalerOptions& model_options,
           const std::function<void(const std::string&)>& warn);
  ~HiresFix();

  int width() const { return width_; }
  int height() const { return height_; }
  const HiresOptions& options() const { return options_; }

  // The second pass for every first-pass latent (`channels` x base/factor): upscale all
  // (one VAE phase), then sample each. `mask` is the first pass's denoise mask (empty:
  // none). Entry b's RNG is `rng` seeded with seed + b.
  std::vector<std::vector<float>> run(const std::vector<std::vector<float>>& latents,
                                      int64_t channels, int64_t factor,
                                      const std::vector<float>& mask, sampling::RngType rng,
                                      int64_t seed, const HiresStages& stages);

 private:
  // [W, H, 3] planes at the first pass's size -> the target size.
  std::vector<float> upscale_image(const std::vector<float>& planes);

  HiresOptions options_;
  int base_width_, base_height_;
  int width_ = 0, height_ = 0;
  std::unique_ptr<Upscaler> model_;
};

}  // namespace sd::pipeline
