#include "pipeline/hires_fix.h"

#include <algorithm>
#include <cmath>

#include "pipeline/resample.h"
#include "tensor/error.h"

namespace sd::pipeline {

namespace {

constexpr const char* kNames[] = {
    "Latent",
    "Latent (nearest)",
    "Latent (nearest-exact)",
    "Latent (antialiased)",
    "Latent (bicubic)",
    "Latent (bicubic antialiased)",
    "Lanczos",
    "Nearest",
    "Model",
};
constexpr int kCount = static_cast<int>(sizeof(kNames) / sizeof(kNames[0]));
static_assert(kCount == static_cast<int>(HiresUpscaler::Model) + 1, "a name per upscaler");

// Beyond this the sizes stop being images (and int arithmetic on them overflows).
constexpr double kMaxSide = 65536.0;

}  // namespace

const char* hires_upscaler_name(HiresUpscaler upscaler) {
  const int i = static_cast<int>(upscaler);
  return i >= 0 && i < kCount ? kNames[i] : "unknown";
}

std::string hires_upscaler_names() {
  std::string s;
  for (const char* name : kNames) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

HiresUpscaler parse_hires_upscaler(std::string_view name) {
  for (int i = 0; i < kCount; ++i)
    if (name == kNames[i]) return static_cast<HiresUpscaler>(i);
  fail("unknown hires upscaler '%.*s'; valid: %s", static_cast<int>(name.size()), name.data(),
       hires_upscaler_names().c_str());
}

bool upscales_latent(HiresUpscaler upscaler) {
  return upscaler != HiresUpscaler::Lanczos && upscaler != HiresUpscaler::Nearest &&
         upscaler != HiresUpscaler::Model;
}

std::vector<float> hires_sigmas(const HiresOptions& o, int default_steps,
                                const std::function<std::vector<float>(int)>& schedule) {
  if (!o.custom_sigmas.empty()) return o.custom_sigmas;
  // sd.cpp compatibility: a strength of 0 runs as 0.0001, the last steps of a long schedule.
  const float strength = std::clamp(o.denoising_strength, 0.0001f, 1.0f);
  const int steps = std::max(1, o.steps > 0 ? o.steps : default_steps);
  const int total = std::max(1, static_cast<int>(static_cast<float>(steps) / strength));
  const std::vector<float> sigmas = schedule(total);
  SD_CHECK(sigmas.size() == static_cast<size_t>(total) + 1,
           "[hires] a %d-step schedule came back with %zu sigmas", total, sigmas.size());
  auto t_enc = static_cast<size_t>(static_cast<float>(total) * strength);
  t_enc = std::min(t_enc, static_cast<size_t>(total) - 1);
  return std::vector<float>(sigmas.begin() + (total - static_cast<int>(t_enc) - 1), sigmas.end());
}

HiresFix::HiresFix(const HiresOptions& options, int width, int height, int unit,
                   const UpscalerOptions& model_options,
                   const std::function<void(const std::string&)>& warn)
    : options_(options), base_width_(width), base_height_(height) {
  const HiresOptions& o = options_;
  const int u = static_cast<int>(o.upscaler);
  SD_CHECK(u >= 0 && u < kCount, "hires upscaler %d is not one of: %s", u,
           hires_upscaler_names().c_str());
  SD_CHECK(o.upscaler != HiresUpscaler::Model || !o.model.empty(),
           "--hires-upscaler Model needs a model file: name one in --hires-upscalers-dir");
  SD_CHECK(o.width >= 0 && o.height >= 0 && o.width % 8 == 0 && o.height % 8 == 0 &&
               o.width <= kMaxSide && o.height <= kMaxSide,
           "--hires-width %d / --hires-height %d: must be multiples of 8 up to %.0f (0: from "
           "--hires-scale)",
           o.width, o.height, kMaxSide);
  SD_CHECK(o.width > 0 || o.height > 0 || (std::isfinite(o.scale) && o.scale > 0.0f),
           "--hires-scale must be a positive number when no --hires-width/--hires-height is "
           "given (got %g)",
           o.scale);
  SD_CHECK(o.steps >= 0, "--hires-steps must not be negative (got %d); 0 reuses --steps", o.steps);
  SD_CHECK(std::isfinite(o.denoising_strength) && o.denoising_strength >= 0.0f &&
               o.denoising_strength <= 1.0f,
           "--hires-denoising-strength %g is outside [0, 1]", o.denoising_strength);
  SD_CHECK(o.custom_sigmas.empty() || o.custom_sigmas.size() >= 2,
           "--hires-sigmas needs at least two values (a start and the final 0)");
  for (float s : o.custom_sigmas)
    SD_CHECK(std::isfinite(s) && s >= 0.0f, "--hires-sigmas: %g is not a sigma (finite, >= 0)", s);

  if (o.width > 0 && o.height > 0) {
    width_ = o.width;
    height_ = o.height;
  } else if (o.width > 0 || o.height > 0) {
    width_ = height_ = std::max(o.width, o.height);  // sd.cpp: one side makes a square
  } else {
    const double w = std::round(static_cast<double>(width) * o.scale);
    const double h = std::round(static_cast<double>(height) * o.scale);
    SD_CHECK(w >= 1 && h >= 1 && w <= kMaxSide && h <= kMaxSide,
             "--hires-scale %g makes a %.0fx%.0f image from %dx%d; sides must be 1 to %.0f",
             o.scale, w, h, width, height, kMaxSide);
    width_ = static_cast<int>(w);
    height_ = static_cast<int>(h);
  }
  const int aligned_w = (width_ + unit - 1) / unit * unit;
  const int aligned_h = (height_ + unit - 1) / unit * unit;
  if ((aligned_w != width_ || aligned_h != height_) && warn)
    warn(format("hires target %dx%d aligned up to %dx%d (a multiple of %d)", width_, height_,
                aligned_w, aligned_h, unit));
  width_ = aligned_w;
  height_ = aligned_h;

  if (o.upscaler == HiresUpscaler::Model) {
    UpscalerOptions m = model_options;
    m.model = o.model;
    m.tile_size = o.upscale_tile_size;
    model_ = std::make_unique<Upscaler>(m);
  }
}

HiresFix::~HiresFix() = default;

std::vector<float> HiresFix::upscale_image(const std::vector<float>& planes) {
  if (options_.upscaler == HiresUpscaler::Model) {
    const int s = model_->scale();
    std::vector<float> up = model_->upscale_planes(planes, base_width_, base_height_);
    // sd.cpp compatibility: the model's output is brought to the target size by nearest
    // neighbour, and not clamped.
    return resample(up, int64_t{base_width_} * s, int64_t{base_height_} * s, 3, width_, height_,
                    ResampleFilter::Nearest);
  }
  const ResampleFilter filter = options_.upscaler == HiresUpscaler::Lanczos
                                    ? ResampleFilter::Lanczos
                                    : ResampleFilter::Nearest;
  std::vector<float> up =
      resample(planes, base_width_, base_height_, 3, width_, height_, filter, false);
  for (float& v : up) v = std::clamp(v, 0.0f, 1.0f);  // Lanczos rings past the range
  return up;
}

std::vector<std::vector<float>> HiresFix::run(const std::vector<std::vector<float>>& latents,
                                              int64_t channels, int64_t factor,
                                              const std::vector<float>& mask,
                                              sampling::RngType rng_type, int64_t seed,
                                              const HiresStages& stages) {
  const int64_t w = base_width_ / factor, h = base_height_ / factor;
  const int64_t tw = width_ / factor, th = height_ / factor;
  std::vector<std::unique_ptr<sampling::Rng>> rngs;
  for (size_t b = 0; b < latents.size(); ++b)
    rngs.push_back(sampling::make_rng(rng_type, static_cast<uint64_t>(seed + int64_t(b))));

  // 1. Upscale every entry.
  std::vector<std::vector<float>> upscaled;
  const HiresUpscaler u = options_.upscaler;
  if (upscales_latent(u)) {
    const ResampleFilter filter =
        u == HiresUpscaler::LatentNearest        ? ResampleFilter::Nearest
        : u == HiresUpscaler::LatentNearestExact ? ResampleFilter::NearestExact
        : u == HiresUpscaler::LatentBicubic || u == HiresUpscaler::LatentBicubicAntialiased
            ? ResampleFilter::Bicubic
            : ResampleFilter::Bilinear;
    const bool antialias =
        u == HiresUpscaler::LatentAntialiased || u == HiresUpscaler::LatentBicubicAntialiased;
    for (const std::vector<float>& latent : latents)
      upscaled.push_back(resample(latent, w, h, channels, tw, th, filter, antialias));
  } else {
    for (size_t b = 0; b < latents.size(); ++b) {
      const std::vector<float> image = upscale_image(stages.decode(latents[b]));
      upscaled.push_back(stages.encode(image, *rngs[b]));
    }
    model_.reset();  // the ESRGAN weights are not needed again
    if (stages.images_done) stages.images_done();
  }

  // 2. The mask keeps every masked latent pixel masked at the new size.
  std::vector<float> hires_mask;
  if (!mask.empty()) hires_mask = resample_nearest_max(mask, w, h, 1, tw, th);

  // 3. Denoise each again at the target size.
  std::vector<std::vector<float>> out;
  for (size_t b = 0; b < upscaled.size(); ++b)
    out.push_back(stages.sample(upscaled[b], hires_mask, static_cast<int>(b), *rngs[b]));
  return out;
}

}  // namespace sd::pipeline
