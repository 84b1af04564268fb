// Latents <-> images through the first-stage model: the AutoencoderKL, or TAESD when
// one is given, whole or in overlapping tiles (--vae-tiling). Images here are [W, H, 3]
// planes in [0, 1]; latents are the sampler's (already scaled) latents.
#pragma once

#include <optional>
#include <vector>

#include "backend/backend.h"
#include "io/name_conversion.h"
#include "models/taehv.h"
#include "models/tiling.h"
#include "models/vae.h"
#include "models/wan_vae.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/weights.h"

namespace sd::pipeline {

// Frame t of a video latent [w, h, frames, C] (`plane` = w * h): its C planes.
std::vector<float> latent_frame(const std::vector<float>& clip, int64_t plane, int64_t frames,
                                int64_t t);

class VaeRunner {
 public:
  // `taesd`: weights holding a TAESD under "tae." to use instead of the VAE for decoding
  // (and encoding), or null.
  VaeRunner(nn::Weights& weights, models::VaeConfig config, Backend& backend,
            nn::Weights* taesd = nullptr, bool taesd_for_previews_only = false);

  // The tiny autoencoder given (`taesd`) is a TAEHV of this configuration: a clip's, for
  // Wan's latents (the VAE decodes video).
  void set_video_tae(const models::TaehvConfig& config);
  bool has_video_tae() const { return taehv_.has_value(); }

  // Tiling for both directions; nullopt decodes and encodes whole images.
  void set_tiling(std::optional<models::TilingParams> tiling) { tiling_ = tiling; }

  // latent [w, h, 4] -> image [w * 8, h * 8, 3] in [0, 1] (not yet clamped).
  std::vector<float> decode(const std::vector<float>& latent, int64_t w, int64_t h);

  // A video latent [w, h, frames, C] (Wan's causal VAE) -> its video frames, each
  // [w * 8, h * 8, 3] in [0, 1] (not yet clamped), decoded one latent frame at a time so
  // that memory holds one frame's activations, not the clip's; with tiling, one tile's
  // (each tile decoded over the whole clip).
  std::vector<std::vector<float>> decode_video(const std::vector<float>& latent, int64_t w,
                                               int64_t h, int64_t frames);
  // Video frames, each [width, height, 3] in [0, 1] (1 + 4 k of them) -> the clip's latent
  // [width / 8, height / 8, 1 + k, C] for sampling, encoded as Wan's VAE does: the first
  // frame, then chunks of four, one graph per chunk.
  std::vector<float> encode_video(const std::vector<std::vector<float>>& frames, int64_t width,
                                  int64_t height);
  // Whether this autoencoder decodes clips (decode_video) and encodes them (encode_video).
  bool decodes_video() const { return config_.causal_3d(); }

  // image [W, H, 3] in [0, 1] -> the VAE's moments [W / 8, H / 8, 8] (mean, log-variance),
  // or, with TAESD, directly the latent [W / 8, H / 8, 4].
  std::vector<float> encode(const std::vector<float>& image, int64_t width, int64_t height);
  // (FLUX.2's autoencoder gives the latent itself: its mean, patched and normalized.)
  bool encodes_moments() const {
    return (taesd_ == nullptr || taesd_preview_only_) && !config_.batch_norm_latent &&
           !config_.causal_3d();
  }

  // A preview of a latent: through TAESD (when given) or the VAE, whole, untiled.
  std::vector<float> decode_preview(const std::vector<float>& latent, int64_t w, int64_t h,
                                    bool use_taesd);
  // A preview of a clip's latent, every frame, through its TAEHV (has_video_tae), untiled.
  std::vector<std::vector<float>> decode_video_preview(const std::vector<float>& latent, int64_t w,
                                                       int64_t h, int64_t frames);
  bool has_taesd() const { return taesd_ != nullptr; }

  const models::VaeConfig& config() const { return config_; }
  // Every weight decoding (and, when the file has an encoder, encoding) reads; and TAESD's.
  std::vector<nn::ParamDecl> parameters() const;
  std::vector<nn::ParamDecl> taesd_parameters() const;
  // Frees the compute buffer (decoding is over).
  // How weights were streamed within a --max-vram budget since the last release().
  std::string streaming_report() const { return runner_.streaming_report(); }
  void release() { runner_.release(); }
  static constexpr const char* kScope = io::kVaeRoot.data();
  static constexpr const char* kTaesdScope = "tae.";

 private:
  std::vector<float> decode_whole(const std::vector<float>& latent, int64_t w, int64_t h,
                                  bool use_taesd);
  std::vector<float> encode_whole(const std::vector<float>& image, int64_t width, int64_t height);
  // Runs a clip's graph (out and what the clip cache saves), the cache then keeping its
  // frames; returns out's values.
  HostVector<float> run_clip_graph(nn::GraphCall& call, Tensor* out, models::WanClipCache& clip);
  std::vector<std::vector<float>> decode_video_whole(const std::vector<float>& latent, int64_t w,
                                                     int64_t h, int64_t frames);
  // Through the TAEHV: a clip of `frames` latent frames -> its video frames in [0, 1]; and
  // video frames in [0, 1] -> the clip's latent.
  std::vector<std::vector<float>> decode_video_tae(const std::vector<float>& latent, int64_t w,
                                                   int64_t h, int64_t frames);
  std::vector<float> encode_video_tae(const std::vector<std::vector<float>>& frames, int64_t width,
                                      int64_t height);
  // Whether decoding and encoding go through the TAEHV.
  bool uses_video_tae() const { return taehv_ && !taesd_preview_only_; }

  nn::Weights& weights_;
  models::VaeConfig config_;
  nn::Weights* taesd_;
  bool taesd_preview_only_;
  std::optional<models::TaehvConfig> taehv_;
  nn::GraphRunner runner_;
  std::optional<models::TilingParams> tiling_;
};

}  // namespace sd::pipeline
