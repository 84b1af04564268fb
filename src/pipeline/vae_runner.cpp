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

std::vector<float> VaeRunner::run_clip_graph(nn::GraphCall& call, Tensor* out,
                                             models::WanClipCache& clip) {
  std::vector<float> result = clip.run(runner_, call, out);
  weights_.after_compute();
  return result;
}

std::vector<std::vector<float>> VaeRunner::decode_video_whole(
    const std::vector<float>& sampler_latent, int64_t w, int64_t h, int64_t frames) {
  const int64_t c = config_.latent_channels();
  SD_CHECK(frames > 0 && sampler_latent.size() == static_cast<size_t>(w * h * frames * c),
           "[vae] a video latent of %zu values is not %lld frames of %lldx%lldx%lld",
           sampler_latent.size(), static_cast<long long>(frames), static_cast<long long>(w),
           static_cast<long long>(h), static_cast<long long>(c));
  const int64_t f = config_.downscale(), plane = w * h;
  const int64_t pixels = plane * f * f;
  models::WanClipCache clip;
  const int stages = models::wan_vae_decode_stages(config_);
  // One graph per frame and stage, so memory holds one frame's activations at a time.
  auto run_stage = [&](int stage, const std::vector<float>& in, const std::array<int64_t, 3>& ne) {
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x = call.input_f32("x", make_shape({ne[0], ne[1], ne[2], 1}), in.data());
    Tensor* out = models::wan_vae_decode_stage(nn::Scope(call.ctx(), weights_, kScope), config_,
                                               stage, x, clip);
    const std::array<int64_t, 4> shape = {out->ne[0], out->ne[1], out->ne[2], out->ne[3]};
    std::vector<float> result = run_clip_graph(call, out, clip);
    // The frames it gave, each on its own.
    struct Frame {
      std::vector<float> values;
      std::array<int64_t, 3> ne;
    };
    std::vector<Frame> frames_out;
    if (shape[3] == 1) {
      frames_out.push_back({std::move(result), {shape[0], shape[1], shape[2]}});
      return frames_out;
    }
    const size_t size = static_cast<size_t>(shape[0] * shape[1] * shape[2]);
    for (int64_t i = 0; i < shape[3]; ++i)
      frames_out.push_back(
          {std::vector<float>(result.begin() + static_cast<std::ptrdiff_t>(i * size),
                              result.begin() + static_cast<std::ptrdiff_t>((i + 1) * size)),
           {shape[0], shape[1], shape[2]}});
    return frames_out;
  };
  std::vector<std::vector<float>> video;
  // Depth first: each frame a stage gives goes through every later stage before its
  // sibling does (each layer still meets the clip's frames in order), so only one frame is
  // held per stage, not all four of a latent frame at full resolution.
  std::function<void(int, std::vector<float>, const std::array<int64_t, 3>&)> decode =
      [&](int stage, std::vector<float> in, const std::array<int64_t, 3>& ne) {
        auto out = run_stage(stage, in, ne);
        in = std::vector<float>();
        for (auto& g : out) {
          if (stage + 1 < stages) {
            decode(stage + 1, std::move(g.values), g.ne);
            continue;
          }
          SD_CHECK(g.values.size() == static_cast<size_t>(3 * pixels),
                   "[vae] a decoded frame of %zu values, expected %lldx%lld RGB", g.values.size(),
                   static_cast<long long>(w * config_.downscale()),
                   static_cast<long long>(h * config_.downscale()));
          for (float& v : g.values) v = (v + 1.0f) * 0.5f;
          video.push_back(std::move(g.values));
        }
      };
  for (int64_t t = 0; t < frames; ++t) {
    // Latent frame t with the VAE's statistics undone.
    std::vector<float> z = latent_frame(sampler_latent, plane, frames, t);
    normalize_latent(z, config_, true);
    decode(0, std::move(z), {w, h, c});
  }
  return video;
}

std::vector<float> VaeRunner::encode_whole(const std::vector<float>& image, int64_t width,
                                           int64_t height) {
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
      const std::vector<float> first_level = run_clip_graph(call, out, clip);
      features.insert(features.end(), first_level.begin(), first_level.end());
    }
    nn::GraphCall call;
    clip.begin(call);
    Tensor* x =
        call.input_f32("features", make_shape({ne[0], ne[1], ne[2], static_cast<int64_t>(count)}),
                       features.data());
    Tensor* out =
        models::wan_vae_encode_rest(nn::Scope(call.ctx(), weights_, kScope), config_, x, clip);
    const std::vector<float> mean = run_clip_graph(call, out, clip);
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
  models::taesd_decode(scope, ctx.new_tensor(DType::F32, {8, 8, config_.latent_channels(), 1}));
  if (scope["encoder"]["layers"]["0"].has("weight"))
    models::taesd_encode(scope, ctx.new_tensor(DType::F32, {64, 64, 3, 1}),
                         config_.latent_channels());
  return recorder.params();
}

}  // namespace sd::pipeline
