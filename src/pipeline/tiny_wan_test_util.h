// A tiny Wan text-to-video model as the files it is distributed as, in the released
// layouts: the transformer (ComfyUI names, 128-wide heads as released: the rotary axes need
// them), umT5 (Hugging Face names, a relative-position table in every block) and Wan 2.1's
// causal autoencoder with its temporal upsamplers (small channels), plus a tiny T5-style
// tokenizer.json beside umT5; and the image-to-video, Wan 2.2 TI2V and VACE variants.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "models/clip_vision.h"
#include "models/t5.h"
#include "models/taehv.h"
#include "models/wan.h"
#include "models/wan_vae.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/tiny_model_test_util.h"
#include "pipeline/tiny_qwen_image_test_util.h"
#include "tensor/error.h"

namespace sd::pipeline::test {

struct TinyWanFiles {
  std::string dit, umt5, vae, dir;
};

inline models::WanConfig tiny_wan_config() {
  models::WanConfig c;
  c.dim = 128;
  c.ffn_dim = 64;
  c.text_dim = 32;
  c.freq_dim = 32;
  c.layers = 2;
  return c;
}

inline models::T5Config tiny_umt5_config() {
  models::T5Config c;
  c.vocab_size = 16;
  c.model_dim = tiny_wan_config().text_dim;
  c.inner_dim = 32;
  c.heads = 2;
  c.ff_dim = 48;
  c.layers = 2;
  c.bias_per_layer = true;
  return c;
}

// Wan 2.2's autoencoder (TI2V-5B's) at small widths: 48 channels, 16x per side.
inline models::VaeConfig tiny_wan22_vae_config() {
  models::VaeConfig c = models::VaeConfig::wan22();
  c.ch = 16;
  c.decoder_ch = 32;
  return c;
}

// A Wan autoencoder (Wan 2.1's unless `vc` says) with what a clip's later frames read (the
// temporal upsamplers).
inline void write_tiny_wan_video_vae(const std::string& path, uint32_t seed,
                                     const models::VaeConfig& vc = tiny_wan_vae_config()) {
  nn::RandomWeights w(DType::F16, seed);
  const int64_t side = 2 * vc.downscale();
  nn::GraphCall call;
  Context& ctx = call.ctx();
  const nn::Scope s(ctx, w, "");
  models::vae_encode(s, vc, ctx.new_tensor(DType::F32, {side, side, 3, 1}));
  {
    // A clip's encoding: the first frame, then four (the temporal downsamplers).
    models::WanClipCache chunks;
    nn::GraphCall first, second;
    chunks.begin(first);
    models::wan_vae_encode_chunk(nn::Scope(first.ctx(), w, ""), vc,
                                 first.ctx().new_tensor(DType::F32, {side, side, 3, 1}), chunks);
    chunks.keep_zeros();
    chunks.begin(second);
    models::wan_vae_encode_chunk(nn::Scope(second.ctx(), w, ""), vc,
                                 second.ctx().new_tensor(DType::F32, {side, side, 3, 4}), chunks);
  }
  models::WanClipCache clip;
  clip.begin(call);
  Tensor* x = ctx.new_tensor(DType::F32, {2, 2, vc.z_channels, 1});
  for (int stage = 0; stage < models::wan_vae_decode_stages(vc); ++stage) {
    models::wan_vae_decode_stage(s, vc, stage, x, clip);  // a clip's first frame
    Tensor* out = models::wan_vae_decode_stage(s, vc, stage, x, clip);
    x = ctx.new_tensor(DType::F32, {out->ne[0], out->ne[1], out->ne[2], 1});
  }
  w.save_safetensors(path);
}

// A TAEHV at small widths for `latent_channels` (16: taew2_1's, 48 with `patch` 2:
// taew2_2's), with its encoder or as a decoder-only file.
inline void write_tiny_taehv(const std::string& path, int64_t latent_channels, int64_t patch,
                             bool encoder, uint32_t seed) {
  models::TaehvConfig c;
  c.latent_channels = latent_channels;
  c.patch = patch;
  c.decoder_widths = {16, 12, 8, 8};
  c.encoder_width = 8;
  c.has_encoder = encoder;
  nn::RandomWeights w(DType::F16, seed);
  models::taehv_record_parameters(w, "", c);
  w.save_safetensors(path);
}

// A text-to-video transformer of `wc`'s shape (Wan 2.2 A14B's experts are two of them;
// with wc.vace_layers, a VACE one).
inline void write_tiny_wan_dit(const std::string& path, const models::WanConfig& wc,
                               uint32_t seed) {
  Context ctx;
  nn::RandomWeights w(DType::F16, seed);
  Tensor* patches = ctx.new_tensor(DType::F32, {wc.patch_in(), 4});
  Tensor* text = ctx.new_tensor(DType::F32, {wc.text_dim, 3});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* r = ctx.new_tensor(DType::F32, {wc.head_dim / 2, 4});
  Tensor* vace = wc.vace_layers > 0 ? ctx.new_tensor(DType::F32, {wc.vace_patch_in(), 4}) : nullptr;
  models::wan_forward(nn::Scope(ctx, w, ""), wc, patches, text, t, r, r, nullptr, vace);
  w.save_safetensors(path);
}

inline TinyWanFiles write_tiny_wan(const std::string& dir) {
  TinyWanFiles f{dir + "/wan.safetensors", dir + "/umt5.safetensors", dir + "/wan_vae.safetensors",
                 dir};
  std::filesystem::create_directories(dir);
  Context ctx;
  write_tiny_wan_dit(f.dit, tiny_wan_config(), 51);
  {
    const models::T5Config tc = tiny_umt5_config();
    nn::RandomWeights w(DType::F16, 52);
    Tensor* ids = ctx.new_tensor(DType::I32, {4, 1});
    Tensor* buckets = ctx.new_tensor(DType::I32, {16});
    models::t5_encoder_forward(nn::Scope(ctx, w, ""), tc, ids, buckets);
    w.save_safetensors(f.umt5);
  }
  write_tiny_wan_video_vae(f.vae, 53);
  std::ofstream(dir + "/tokenizer.json") << kTinyT5TokenizerJson;
  return f;
}

// What generating `r` fails with ("" when it does not).
inline std::string generation_error(StableDiffusion& sd, const ImageRequest& r) {
  try {
    sd.generate(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The tiny T2V model's files as options, and the small clip the pipeline tests ask of it:
// 16x16, five frames (two latent frames), two steps without guidance.
inline ModelOptions tiny_wan_options(const TinyWanFiles& f) {
  ModelOptions o;
  o.diffusion_model = f.dit;
  o.t5xxl = f.umt5;
  o.vae = f.vae;
  o.threads = 2;
  return o;
}
inline ImageRequest tiny_wan_request() {
  ImageRequest r;
  r.prompt = "a cat";
  r.width = r.height = 16;
  r.steps = 2;
  r.cfg_scale = 1.0f;
  r.video_frames = 5;
  return r;
}

// Wan 2.2 TI2V-5B in small: a transformer reading and predicting Wan 2.2's 48 channels and
// Wan 2.2's autoencoder, beside write_tiny_wan's umT5.
inline TinyWanFiles write_tiny_wan_ti2v(const std::string& dir) {
  TinyWanFiles f = write_tiny_wan(dir);
  f.dit = dir + "/wan_ti2v.safetensors";
  f.vae = dir + "/wan22_vae.safetensors";
  models::WanConfig wc = tiny_wan_config();
  wc.in_channels = wc.out_channels = tiny_wan22_vae_config().z_channels;
  write_tiny_wan_dit(f.dit, wc, 57);
  write_tiny_wan_video_vae(f.vae, 58, tiny_wan22_vae_config());
  return f;
}

// Wan 2.1 VACE in small: four blocks and two VACE blocks (hints after blocks 0 and 2) reading
// the 96-channel context of write_tiny_wan's autoencoder, beside its umT5.
inline models::WanConfig tiny_wan_vace_config() {
  models::WanConfig c = tiny_wan_config();
  c.layers = 4;
  c.vace_layers = 2;
  c.vace_in_channels = 2 * tiny_wan_vae_config().z_channels + 64;
  return c;
}
inline TinyWanFiles write_tiny_wan_vace(const std::string& dir) {
  TinyWanFiles f = write_tiny_wan(dir);
  f.dit = dir + "/wan_vace.safetensors";
  write_tiny_wan_dit(f.dit, tiny_wan_vace_config(), 59);
  return f;
}

// Image to video: the transformer reads 36 channels and (Wan 2.1) attends to a tiny CLIP
// vision tower's tokens (FLF2V: with the first and last frames' position table; Wan 2.2 I2V:
// no image attention); the umT5 and autoencoder files of write_tiny_wan beside it.
enum class TinyWanI2VKind { Wan21, Flf2v, Wan22 };
struct TinyWanI2VFiles {
  TinyWanFiles base;
  std::string clip_vision;
};

inline models::ClipVisionConfig tiny_clip_vision_config() {
  models::ClipVisionConfig c;
  c.hidden = 32;
  c.intermediate = 64;
  c.layers = 2;
  c.patch = 14;
  c.image_size = 28;  // 2 x 2 patches and the class token
  c.activation = models::ClipActivation::QuickGelu;
  return c;
}

inline TinyWanI2VFiles write_tiny_wan_i2v(const std::string& dir, TinyWanI2VKind kind) {
  TinyWanI2VFiles f{write_tiny_wan(dir), dir + "/clip_vision.safetensors"};
  f.base.dit = dir + "/wan_i2v.safetensors";
  Context ctx;
  {
    models::WanConfig wc = tiny_wan_config();
    wc.in_channels = 36;
    if (kind != TinyWanI2VKind::Wan22) wc.image_dim = tiny_clip_vision_config().hidden;
    if (kind == TinyWanI2VKind::Flf2v) wc.image_pos_tokens = 2 * tiny_clip_vision_config().tokens();
    nn::RandomWeights w(DType::F16, 54 + static_cast<uint32_t>(kind));
    Tensor* patches = ctx.new_tensor(DType::F32, {wc.patch_in(), 4});
    Tensor* text = ctx.new_tensor(DType::F32, {wc.text_dim, 3});
    Tensor* image = wc.image_dim > 0 ? ctx.new_tensor(DType::F32, {wc.image_dim, 5}) : nullptr;
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* r = ctx.new_tensor(DType::F32, {wc.head_dim / 2, 4});
    models::wan_forward(nn::Scope(ctx, w, ""), wc, patches, text, t, r, r, image);
    w.save_safetensors(f.base.dit);
  }
  if (kind != TinyWanI2VKind::Wan22) {
    const models::ClipVisionConfig cc = tiny_clip_vision_config();
    nn::RandomWeights w(DType::F16, 60);
    models::clip_vision_hidden(nn::Scope(ctx, w, ""), cc,
                               ctx.new_tensor(DType::F32, {cc.image_size, cc.image_size, 3, 1}),
                               cc.layers);
    w.save_safetensors(f.clip_vision);
  }
  return f;
}

}  // namespace sd::pipeline::test
