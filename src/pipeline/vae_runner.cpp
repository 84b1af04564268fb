#include "pipeline/vae_runner.h"

#include <algorithm>
#include <array>
#include <functional>

#include "models/taesd.h"
#include "models/wan_vae.h"
#include "tensor/error.h"

namespace sd::pipeline {

VaeRunner::VaeRunner(nn::Weights& weights, models::VaeConfig config, Backend& backend,
                     nn::Weights* taesd, bool taesd_for_previews_only)
    : weights_(weights),
      config_(std::move(config)),
      taesd_(taesd),
      taesd_preview_only_(taesd_for_previews_only),
      runner_(backend) {}

namespace {

// The sampler's latent <-> the VAE's, through per-channel statistics (config.latent_mean).
void normalize_latent(std::vector<float>& z, const models::VaeConfig& c, bool to_vae) {
  const size_t channels = c.latent_mean.size();
  if (channels == 0) return;
  SD_CHECK(z.size() % channels == 0 && c.latent_std.size() == channels,
           "[vae] a latent of %zu values is not %zu channels", z.size(), channels);
  const size_t plane = z.size() / channels;
  for (size_t ch = 0; ch < channels; ++ch)
    for (size_t i = ch * plane; i < (ch + 1) * plane; ++i)
      z[i] = to_vae ? z[i] * c.latent_std[ch] + c.latent_mean[ch]
                    : (z[i] - c.latent_mean[ch]) / c.latent_std[ch];
}

}  // namespace

std::vector<float> VaeRunner::decode_whole(const std::vector<float>& sampler_latent, int64_t w,
                                           int64_t h, bool use_taesd) {
  std::vector<float> latent = sampler_latent;
  if (!use_taesd) normalize_latent(latent, config_, true);
  if (use_taesd && taehv_) return decode_video_tae(latent, w, h, 1)[0];  // an image
  nn::GraphCall call;
  Tensor* z =
      call.input_f32("latent", make_shape({w, h, config_.latent_channels(), 1}), latent.data());
  if (use_taesd) {
    // TAESD decodes to [0, 1] directly.
    std::vector<float> image =
        runner_.run(call, models::taesd_decode(nn::Scope(call.ctx(), *taesd_, kTaesdScope), z));
    taesd_->after_compute();
    return image;
  }
  std::vector<float> image =
      runner_.run(call, models::vae_decode(nn::Scope(call.ctx(), weights_, kScope), config_, z));
  weights_.after_compute();
  for (float& v : image) v = (v + 1.0f) * 0.5f;
  return image;
}

std::vector<float> VaeRunner::decode(const std::vector<float>& latent, int64_t w, int64_t h) {
  const bool use_taesd = taesd_ && !taesd_preview_only_;
  if (!tiling_) return decode_whole(latent, w, h, use_taesd);
  const int scale = static_cast<int>(config_.downscale());
  models::TiledArray out =
      models::tiled_decode(latent, w, h, config_.latent_channels(), scale, *tiling_,
                           [&](const std::vector<float>& tile, int64_t tw, int64_t th) {
                             return decode_whole(tile, tw, th, use_taesd);
                           });
  return std::move(out.data);
}

std::vector<float> latent_frame(const std::vector<float>& clip, int64_t plane, int64_t frames,
                                int64_t t) {
  const int64_t channels = static_cast<int64_t>(clip.size()) / (plane * frames);
  std::vector<float> frame(static_cast<size_t>(plane * channels));
  for (int64_t c = 0; c < channels; ++c)
    std::copy_n(clip.begin() + (c * frames + t) * plane, plane, frame.begin() + c * plane);
  return frame;
}

std::vector<std::vector<float>> VaeRunner::decode_video(const std::vector<float>& latent, int64_t w,
                                                        int64_t h, int64_t frames) {
  SD_CHECK(decodes_video(), "[vae] this autoencoder decodes images, not video clips");
  if (!tiling_) return decode_video_whole(latent, w, h, frames);
  // Tiles over the frame's area, each decoded over the whole clip (its own causal memory):
  // the clip's latent frames and video frames are planes to the tiler.
  const int64_t c = config_.latent_channels();
  const int scale = static_cast<int>(config_.downscale());
  int64_t video_frames = 0;
  models::TiledArray out = models::tiled_decode(
      latent, w, h, c * frames, scale, *tiling_,
      [&](const std::vector<float>& tile, int64_t tw, int64_t th) {
        std::vector<std::vector<float>> clip = decode_video_whole(tile, tw, th, frames);
        video_frames = static_cast<int64_t>(clip.size());
        std::vector<float> planes;
        planes.reserve(clip.size() * clip[0].size());
        for (const std::vector<float>& f : clip) planes.insert(planes.end(), f.begin(), f.end());
        return planes;
      });
  const size_t frame = static_cast<size_t>(w * scale * h * scale * 3);
  std::vector<std::vector<float>> video;
  for (int64_t i = 0; i < video_frames; ++i)
    video.emplace_back(out.data.begin() + static_cast<std::ptrdiff_t>(i * frame),
                       out.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * frame));
  return video;
}

HostVector<float> VaeRunner::run_clip_graph(nn::GraphCall& call, Tensor* out,
                                            models::WanClipCache& clip) {
  HostVector<float> result = clip.run(runner_, call, out);
  weights_.after_compute();
  return result;
}

namespace {

// A clip's decoder run one frame and stage per graph (a stage's graph reads one frame and
// gives one or more), depth first: each frame a stage gives goes through every later stage
// before its sibling does (each layer still meets the clip's frames in order), so only one
// frame is held per stage, not all of a latent frame's at full resolution.
struct StagedClipDecoder {
  nn::GraphRunner& runner;
  nn::Weights& weights;
  models::WanClipCache& clip;
  int stages;
  // Builds stage `stage` on the frame x [W, H, C, 1].
  std::function<Tensor*(nn::GraphCall& call, int stage, Tensor* x)> build;
  // Takes each video frame the last stage gives, in order.
  std::function<void(HostVector<float> frame)> emit;

  void feed(int stage, HostVector<float> in, const std::array<int64_t, 3>& ne) {
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x = call.input_f32("x", make_shape({ne[0], ne[1], ne[2], 1}), in.data());
    Tensor* out = build(call, stage, x);
    const std::array<int64_t, 3> frame_ne = {out->ne[0], out->ne[1], out->ne[2]};
    const int64_t count = out->ne[3];
    // The result goes into the input's memory where it fits: a frame's buffer then passes
    // from stage to stage, where new memory (at 832x480 up to 300 MB a stage) would cost a
    // page fault per page and a zero fill, a fifth of the decoding's time.
    HostVector<float> result = clip.run(runner, call, out, std::move(in));
    weights.after_compute();
    const auto size = static_cast<size_t>(frame_ne[0] * frame_ne[1] * frame_ne[2]);
    for (int64_t i = 0; i < count; ++i) {
      HostVector<float> frame;
      if (i + 1 < count) {
        frame.assign(result.begin() + static_cast<std::ptrdiff_t>(i * size),
                     result.begin() + static_cast<std::ptrdiff_t>((i + 1) * size));
      } else {  // the last frame moves to the front of the stage's own buffer
        std::copy(result.begin() + static_cast<std::ptrdiff_t>(i * size), result.end(),
                  result.begin());
        result.resize(size);
        frame = std::move(result);
      }
      if (stage + 1 < stages)
        feed(stage + 1, std::move(frame), frame_ne);
      else
        emit(std::move(frame));
    }
  }
};

void check_clip_latent(const std::vector<float>& latent, int64_t w, int64_t h, int64_t frames,
                       int64_t c) {
  SD_CHECK(frames > 0 && latent.size() == static_cast<size_t>(w * h * frames * c),
           "[vae] a video latent of %zu values is not %lld frames of %lldx%lldx%lld", latent.size(),
           static_cast<long long>(frames), static_cast<long long>(w), static_cast<long long>(h),
           static_cast<long long>(c));
}

}  // namespace

std::vector<std::vector<float>> VaeRunner::decode_video_whole(
    const std::vector<float>& sampler_latent, int64_t w, int64_t h, int64_t frames) {
  if (uses_video_tae()) return decode_video_tae(sampler_latent, w, h, frames);
  const int64_t c = config_.latent_channels();
  check_clip_latent(sampler_latent, w, h, frames, c);
  const int64_t f = config_.downscale(), plane = w * h;
  const int64_t pixels = plane * f * f;
  models::WanClipCache clip;
  std::vector<std::vector<float>> video;
  StagedClipDecoder decoder{
      runner_,
      weights_,
      clip,
      models::wan_vae_decode_stages(config_),
      [&](nn::GraphCall& call, int stage, Tensor* x) {
        return models::wan_vae_decode_stage(nn::Scope(call.ctx(), weights_, kScope), config_, stage,
                                            x, clip);
      },
      [&](HostVector<float> frame) {
        SD_CHECK(frame.size() == static_cast<size_t>(3 * pixels),
                 "[vae] a decoded frame of %zu values, expected %lldx%lld RGB", frame.size(),
                 static_cast<long long>(w * f), static_cast<long long>(h * f));
        std::vector<float>& rgb = video.emplace_back(frame.size());
        std::transform(frame.begin(), frame.end(), rgb.begin(),
                       [](float v) { return (v + 1.0f) * 0.5f; });
      }};
  for (int64_t t = 0; t < frames; ++t) {
    // Latent frame t with the VAE's statistics undone.
    std::vector<float> z = latent_frame(sampler_latent, plane, frames, t);
    normalize_latent(z, config_, true);
    decoder.feed(0, HostVector<float>(z.begin(), z.end()), {w, h, c});
  }
  return video;
}

void VaeRunner::set_video_tae(const models::TaehvConfig& tae) {
  SD_CHECK(taesd_ && config_.causal_3d(),
           "[vae] a TAEHV decodes Wan's video latents; this model's autoencoder is not Wan's");
  SD_CHECK(
      tae.latent_channels == config_.latent_channels() && tae.downscale() == config_.downscale(),
      "this TAEHV decodes %lld-channel latents at %lldx (%s), the model's are "
      "%lld-channel at %lldx: use taew2_1 for Wan 2.1 and Wan 2.2 A14B latents, taew2_2 "
      "for Wan 2.2 TI2V-5B's",
      static_cast<long long>(tae.latent_channels), static_cast<long long>(tae.downscale()),
      tae.latent_channels == 48 ? "taew2_2" : "taew2_1",
      static_cast<long long>(config_.latent_channels()),
      static_cast<long long>(config_.downscale()));
  const int64_t down = tae.time_downscale[0] * tae.time_downscale[1] * tae.time_downscale[2];
  SD_CHECK(tae.time_factor() == 4 && (!tae.has_encoder || down == 4),
           "this TAEHV makes %lld video frames of a latent frame; Wan's latents hold 4",
           static_cast<long long>(tae.time_factor()));
  taehv_ = tae;
}

std::vector<std::vector<float>> VaeRunner::decode_video_tae(const std::vector<float>& latent,
                                                            int64_t w, int64_t h, int64_t frames) {
  const models::TaehvConfig& tae = *taehv_;
  check_clip_latent(latent, w, h, frames, tae.latent_channels);
  const int64_t plane = w * h, pixels = plane * tae.downscale() * tae.downscale();
  models::WanClipCache clip;
  std::vector<std::vector<float>> video;
  // The clip's first time_factor() - 1 frames come before its first (the reference drops
  // them too).
  int64_t skip = tae.time_factor() - 1;
  StagedClipDecoder decoder{runner_,
                            *taesd_,
                            clip,
                            models::TaehvConfig::kLevels,
                            [&](nn::GraphCall& call, int stage, Tensor* x) {
                              return models::taehv_decode_stage(
                                  nn::Scope(call.ctx(), *taesd_, kTaesdScope), tae, stage, x, clip);
                            },
                            [&](HostVector<float> frame) {
                              SD_CHECK(
                                  frame.size() == static_cast<size_t>(3 * pixels),
                                  "[taehv] a decoded frame of %zu values, expected %lld pixels RGB",
                                  frame.size(), static_cast<long long>(pixels));
                              if (skip > 0) {
                                --skip;
                                return;
                              }
                              video.emplace_back(frame.begin(), frame.end());
                            }};
  for (int64_t t = 0; t < frames; ++t) {
    const std::vector<float> z = latent_frame(latent, plane, frames, t);
    decoder.feed(0, HostVector<float>(z.begin(), z.end()), {w, h, tae.latent_channels});
  }
  return video;
}

std::vector<float> VaeRunner::encode_video_tae(const std::vector<std::vector<float>>& frames,
                                               int64_t width, int64_t height) {
  const models::TaehvConfig& tae = *taehv_;
  const int64_t f = tae.downscale(), c = tae.latent_channels;
  SD_CHECK(tae.has_encoder,
           "--tae: this TAEHV file has no encoder, which encoding the "
           "conditioning frames needs; pass --taesd-preview-only to encode with the VAE");
  SD_CHECK(!frames.empty() && width % f == 0 && height % f == 0,
           "[taehv] a clip to encode has sides multiples of %lld: got %zu frames of %lldx%lld",
           static_cast<long long>(f), frames.size(), static_cast<long long>(width),
           static_cast<long long>(height));
  const size_t frame_size = static_cast<size_t>(width * height * 3);
  // Chunks of four frames, the last padded with copies of the clip's last frame.
  const int64_t chunk = 4;
  const auto count = static_cast<int64_t>(frames.size());
  const int64_t latent_frames = (count + chunk - 1) / chunk;
  const int64_t plane = (width / f) * (height / f);
  std::vector<float> latent(static_cast<size_t>(plane * latent_frames * c));
  models::WanClipCache clip;
  std::vector<float> pixels(frame_size * static_cast<size_t>(chunk));
  for (int64_t t = 0; t < latent_frames; ++t) {
    for (int64_t i = 0; i < chunk; ++i) {
      const std::vector<float>& frame =
          frames[static_cast<size_t>(std::min(t * chunk + i, count - 1))];
      SD_CHECK(frame.size() == frame_size, "[taehv] a frame of %zu values, not %lldx%lld RGB",
               frame.size(), static_cast<long long>(width), static_cast<long long>(height));
      std::copy(frame.begin(), frame.end(),
                pixels.begin() +
                    static_cast<std::ptrdiff_t>(i) * static_cast<std::ptrdiff_t>(frame_size));
    }
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x = call.input_f32("frames", make_shape({width, height, 3, chunk}), pixels.data());
    Tensor* out =
        models::taehv_encode_chunk(nn::Scope(call.ctx(), *taesd_, kTaesdScope), tae, x, clip);
    const HostVector<float> z = clip.run(runner_, call, out);
    taesd_->after_compute();
    for (int64_t ch = 0; ch < c; ++ch)
      std::copy_n(z.begin() + ch * plane, plane, latent.begin() + (ch * latent_frames + t) * plane);
  }
  return latent;
}

std::vector<std::vector<float>> VaeRunner::decode_video_preview(const std::vector<float>& latent,
                                                                int64_t w, int64_t h,
                                                                int64_t frames) {
  SD_CHECK(taehv_, "--preview tae of a clip needs a TAEHV model (--tae)");
  return decode_video_tae(latent, w, h, frames);
}

std::vector<float> VaeRunner::encode_whole(const std::vector<float>& image, int64_t width,
                                           int64_t height) {
  if (uses_video_tae() && taehv_->has_encoder) return encode_video_tae({image}, width, height);
  nn::GraphCall call;
  if (taesd_ && !taesd_preview_only_) {
    Tensor* x = call.input_f32("image", make_shape({width, height, 3, 1}), image.data());
    std::vector<float> latent =
        runner_.run(call, models::taesd_encode(nn::Scope(call.ctx(), *taesd_, kTaesdScope), x,
                                               config_.latent_channels()));
    taesd_->after_compute();
    return latent;
  }
  std::vector<float> signed_image = image;
  for (float& v : signed_image) v = v * 2.0f - 1.0f;
  Tensor* x = call.input_f32("image", make_shape({width, height, 3, 1}), signed_image.data());
  std::vector<float> moments =
      runner_.run(call, models::vae_encode(nn::Scope(call.ctx(), weights_, kScope), config_, x));
  weights_.after_compute();
  normalize_latent(moments, config_, false);  // (Wan's VAE gives the mean itself)
  return moments;
}

std::vector<float> VaeRunner::encode_video(const std::vector<std::vector<float>>& frames,
                                           int64_t width, int64_t height) {
  SD_CHECK(decodes_video(), "[vae] this autoencoder encodes images, not video clips");
  // (A TAEHV file without an encoder leaves encoding to the VAE.)
  if (uses_video_tae() && taehv_->has_encoder) return encode_video_tae(frames, width, height);
  const int64_t f = config_.downscale(), c = config_.latent_channels();
  const size_t frame_size = static_cast<size_t>(width * height * 3);
  SD_CHECK(!frames.empty() && (frames.size() - 1) % 4 == 0 && width % f == 0 && height % f == 0,
           "[vae] a clip to encode is 1 + 4 k frames with sides multiples of %lld: got %zu frames "
           "of %lldx%lld",
           static_cast<long long>(f), frames.size(), static_cast<long long>(width),
           static_cast<long long>(height));
  const int64_t latent_frames = static_cast<int64_t>(frames.size() - 1) / 4 + 1;
  const int64_t plane = (width / f) * (height / f);
  std::vector<float> latent(static_cast<size_t>(plane * latent_frames * c));
  models::WanClipCache clip;
  size_t next = 0;
  for (int64_t t = 0; t < latent_frames; ++t) {
    const size_t count = t == 0 ? 1 : 4;
    // The first level frame by frame (the full-resolution activations, one frame's at a
    // time), then the rest on the chunk's features.
    std::vector<float> features;
    std::array<int64_t, 3> ne{};
    for (size_t i = 0; i < count; ++i, ++next) {
      SD_CHECK(frames[next].size() == frame_size,
               "[vae] frame %zu has %zu values, not %lldx%lld RGB", next, frames[next].size(),
               static_cast<long long>(width), static_cast<long long>(height));
      std::vector<float> image(frame_size);
      std::transform(frames[next].begin(), frames[next].end(), image.begin(),
                     [](float v) { return v * 2.0f - 1.0f; });
      nn::GraphCall call;
      clip.begin(call);
      Tensor* x = call.input_f32("frame", make_shape({width, height, 3, 1}), image.data());
      Tensor* out = models::wan_vae_encode_first_level(nn::Scope(call.ctx(), weights_, kScope),
                                                       config_, x, clip);
      ne = {out->ne[0], out->ne[1], out->ne[2]};
      const HostVector<float> first_level = run_clip_graph(call, out, clip);
      features.insert(features.end(), first_level.begin(), first_level.end());
    }
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x =
        call.input_f32("features", make_shape({ne[0], ne[1], ne[2], static_cast<int64_t>(count)}),
                       features.data());
    Tensor* out =
        models::wan_vae_encode_rest(nn::Scope(call.ctx(), weights_, kScope), config_, x, clip);
    const HostVector<float> mean = run_clip_graph(call, out, clip);
    // Latent frame t of every channel plane.
    for (int64_t ch = 0; ch < c; ++ch)
      std::copy_n(mean.begin() + ch * plane, plane,
                  latent.begin() + (ch * latent_frames + t) * plane);
  }
  normalize_latent(latent, config_, false);
  return latent;
}

std::vector<float> VaeRunner::decode_preview(const std::vector<float>& latent, int64_t w, int64_t h,
                                             bool use_taesd) {
  SD_CHECK(!use_taesd || taesd_, "--preview tae needs a TAESD model (--taesd)");
  return decode_whole(latent, w, h, use_taesd);
}

std::vector<float> VaeRunner::encode(const std::vector<float>& image, int64_t width,
                                     int64_t height) {
  const int scale = static_cast<int>(config_.downscale());
  SD_CHECK(width % scale == 0 && height % scale == 0,
           "[vae] image %lldx%lld is not a multiple of %d pixels", static_cast<long long>(width),
           static_cast<long long>(height), scale);
  if (!tiling_) return encode_whole(image, width, height);
  models::TiledArray out =
      models::tiled_encode(image, width, height, 3, scale, *tiling_,
                           [&](const std::vector<float>& tile, int64_t tw, int64_t th) {
                             return encode_whole(tile, tw, th);
                           });
  return std::move(out.data);
}

std::vector<nn::ParamDecl> VaeRunner::parameters() const {
  nn::ParamRecorder recorder(weights_);
  Context ctx;
  const nn::Scope scope(ctx, recorder, kScope);
  models::vae_decode(scope, config_,
                     ctx.new_tensor(DType::F32, {8, 8, config_.latent_channels(), 1}));
  // A clip's decoding reads the temporal upsamplers too; image-only uses of the Wan
  // autoencoder (Qwen-Image) do not need them in the file.
  if (decodes_video() && scope.has(models::wan_vae_first_time_conv(config_, true))) {
    // Every stage twice: its temporal upsampler runs on the second frame a clip shows it.
    nn::GraphCall call;
    models::WanClipCache clip;
    clip.begin(call);
    const nn::Scope s(call.ctx(), recorder, kScope);
    Tensor* x = call.ctx().new_tensor(DType::F32, {8, 8, config_.latent_channels(), 1});
    for (int stage = 0; stage < models::wan_vae_decode_stages(config_); ++stage) {
      models::wan_vae_decode_stage(s, config_, stage, x, clip);
      Tensor* out = models::wan_vae_decode_stage(s, config_, stage, x, clip);
      x = call.ctx().new_tensor(DType::F32, {out->ne[0], out->ne[1], out->ne[2], 1});
    }
  }
  // Decoder-only files serve text-to-image; encoding then fails when first asked.
  if (scope["encoder"][config_.causal_3d() ? "conv1" : "conv_in"].has("weight")) {
    const int64_t side = 8 * config_.downscale();
    models::vae_encode(scope, config_, ctx.new_tensor(DType::F32, {side, side, 3, 1}));
    // A clip's encoding reads the temporal downsamplers too, where the file has them.
    if (decodes_video() && scope.has(models::wan_vae_first_time_conv(config_, false))) {
      // The first chunk, then one of four frames on what it left behind.
      models::WanClipCache clip;
      nn::GraphCall first, second;
      clip.begin(first);
      models::wan_vae_encode_chunk(nn::Scope(first.ctx(), recorder, kScope), config_,
                                   first.ctx().new_tensor(DType::F32, {side, side, 3, 1}), clip);
      clip.keep_zeros();
      clip.begin(second);
      models::wan_vae_encode_chunk(nn::Scope(second.ctx(), recorder, kScope), config_,
                                   second.ctx().new_tensor(DType::F32, {side, side, 3, 4}), clip);
    }
  }
  return recorder.params();
}

std::vector<nn::ParamDecl> VaeRunner::taesd_parameters() const {
  if (!taesd_) return {};
  nn::ParamRecorder recorder(*taesd_);
  Context ctx;
  const nn::Scope scope(ctx, recorder, kTaesdScope);
  if (taehv_) {
    models::taehv_record_parameters(recorder, kTaesdScope, *taehv_);
    return recorder.params();
  }
  models::taesd_decode(scope, ctx.new_tensor(DType::F32, {8, 8, config_.latent_channels(), 1}));
  if (scope["encoder"]["layers"]["0"].has("weight"))
    models::taesd_encode(scope, ctx.new_tensor(DType::F32, {64, 64, 3, 1}),
                         config_.latent_channels());
  return recorder.params();
}

}  // namespace sd::pipeline
