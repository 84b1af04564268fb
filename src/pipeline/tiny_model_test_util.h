// A tiny SD 1.x-shaped model for pipeline tests: a few channels per block, written once
// per test process to a safetensors file by the project's own code.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "io/io_test_util.h"
#include "models/clip_text.h"
#include "models/flux.h"
#include "models/t5.h"
#include "models/taesd.h"
#include "nn/random_weights.h"
#include "pipeline/stable_diffusion.h"

namespace sd::pipeline::test {

inline Architecture tiny_architecture() {
  Architecture a;
  a.version = io::ModelVersion::SD1;
  a.unet.model_channels = 32;
  a.unet.channel_mult = {1, 2};
  a.unet.num_res_blocks = 1;
  a.unet.attention_levels = {0};
  a.unet.num_heads = 2;
  a.unet.context_dim = 32;
  a.text = models::ClipTextConfig::vit_l14();
  a.text.hidden = 32;
  a.text.intermediate = 64;
  a.text.heads = 2;
  a.text.layers = 2;
  a.vae.ch = 32;
  a.vae.ch_mult = {1, 2};
  a.vae.num_res_blocks = 1;
  return a;
}

// Asks every network for its weights once (building graphs reads them) and saves them as
// `name`, once per name: pass another name for another architecture.
inline std::string write_tiny_checkpoint(const Architecture& a,
                                         const std::string& name = "tiny_sd1.safetensors") {
  // One folder per test process: ctest runs these tests in parallel processes.
  static const io::test::TempDir dir;
  const std::string path = dir.file(name);
  if (std::filesystem::exists(path)) return path;
  nn::RandomWeights w(DType::F16, 7);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* c = ctx.new_tensor(DType::F32, {32, 77, 1});
  models::unet_forward(nn::Scope(ctx, w, "model.diffusion_model."), a.unet, x, t, c);
  Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
  models::clip_text_forward(nn::Scope(ctx, w, "cond_stage_model.transformer.text_model."), a.text,
                            ids, mask, 1);
  Tensor* z = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
  Tensor* img = ctx.new_tensor(DType::F32, {16, 16, 3, 1});
  models::vae_decode(nn::Scope(ctx, w, "first_stage_model."), a.vae, z);
  models::vae_encode(nn::Scope(ctx, w, "first_stage_model."), a.vae, img);
  w.save_safetensors(path);
  return path;
}

// A tiny SDXL-shaped model: two text encoders (the second with a projection), a UNet with
// no attention at its first level, transformer depths 1 and 2 (2 in the middle), Linear
// projections and a vector input, the SD VAE layout. Every dimension differs from SDXL
// base's, so loading it proves the pipeline reads them from the file.
inline Architecture tiny_sdxl_architecture() {
  Architecture a;
  a.version = io::ModelVersion::SDXL;
  a.text = models::ClipTextConfig::sdxl_vit_l14();
  a.text.hidden = 64;  // 64-channel heads, as the real encoders
  a.text.intermediate = 128;
  a.text.heads = 1;
  a.text.layers = 3;
  a.text2 = models::ClipTextConfig::vit_bigg14();
  a.text2->hidden = 128;
  a.text2->intermediate = 256;
  a.text2->heads = 2;
  a.text2->layers = 3;
  a.text2->projection_dim = 128;
  a.unet = models::UnetConfig::sdxl();
  a.unet.model_channels = 32;
  a.unet.channel_mult = {1, 2, 2};
  a.unet.num_res_blocks = 1;
  a.unet.level_depth = {0, 1, 2};
  a.unet.middle_depth = 2;
  a.unet.transformer_depth = 2;
  a.unet.context_dim = a.text.hidden + a.text2->hidden;
  a.unet.adm_in_channels = a.text2->projection_dim + 3 * 2 * 256;  // pooled + 3 size pairs
  a.vae = models::VaeConfig::sd();
  a.vae.ch = 32;
  a.vae.ch_mult = {1, 2};
  a.vae.num_res_blocks = 1;
  a.vae.scale_factor = 0.13025f;
  return a;
}

// The tiny SDXL model's weights with the canonical (LDM) names, saved to `path`; with the
// VAE's encoder too when `vae_encoder` (image-to-image). Building each network's graph once
// asks for every weight it reads.
inline void save_tiny_sdxl_checkpoint(const std::string& path, bool vae_encoder) {
  const Architecture a = tiny_sdxl_architecture();
  nn::RandomWeights w(DType::F16, 11);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* c = ctx.new_tensor(DType::F32, {a.unet.context_dim, 77, 1});
  Tensor* y = ctx.new_tensor(DType::F32, {a.unet.adm_in_channels, 1});
  models::unet_forward(nn::Scope(ctx, w, "model.diffusion_model."), a.unet, x, t, c, y);
  Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
  models::clip_text_forward(nn::Scope(ctx, w, "cond_stage_model.transformer.text_model."), a.text,
                            ids, mask, 1);
  models::clip_text_forward_pooled(nn::Scope(ctx, w, "cond_stage_model.1.transformer.text_model."),
                                   *a.text2, ids, mask, 1, 0);
  Tensor* z = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
  models::vae_decode(nn::Scope(ctx, w, "first_stage_model."), a.vae, z);
  if (vae_encoder) {
    Tensor* image = ctx.new_tensor(DType::F32, {16, 16, 3, 1});
    models::vae_encode(nn::Scope(ctx, w, "first_stage_model."), a.vae, image);
  }
  w.save_safetensors(path);
}

// The tiny SDXL model as a checkpoint, made once per test process.
inline std::string write_tiny_sdxl_checkpoint() {
  static const io::test::TempDir dir;
  static const std::string path = dir.file("tiny_sdxl.safetensors");
  if (!std::filesystem::exists(path)) save_tiny_sdxl_checkpoint(path, false);
  return path;
}

// Tiny models with the layouts of SDXL's variants, every dimension as small as the tiny
// SDXL's: the inpainting UNet (9 input channels), the refiner (OpenCLIP-bigG alone, 4
// levels, a vector with an aesthetic score), and Segmind's distilled UNets (no middle
// transformer; transformer depth varying within a level: output_blocks.3 holds 2 blocks in
// SSD-1B, 1 in Vega).
enum class TinySdxlVariant { Inpaint, Refiner, Ssd1b, Vega };

inline Architecture tiny_sdxl_variant_architecture(TinySdxlVariant v) {
  Architecture a = tiny_sdxl_architecture();
  switch (v) {
    case TinySdxlVariant::Inpaint:
      a.version = io::ModelVersion::SDXLInpaint;
      a.unet.in_channels = 9;
      break;
    case TinySdxlVariant::Refiner:
      a.version = io::ModelVersion::SDXLRefiner;
      a.text = *a.text2;
      a.text.pad_token = 0;
      a.text2.reset();
      a.unet.channel_mult = {1, 2, 2, 2};
      a.unet.attention_levels = {1, 2};
      a.unet.level_depth = {0, 1, 2, 0};
      a.unet.middle_depth = 1;
      a.unet.context_dim = a.text.hidden;
      a.unet.adm_in_channels = a.text.projection_dim + 5 * 256;  // pooled, sizes, crop, score
      break;
    case TinySdxlVariant::Ssd1b:
    case TinySdxlVariant::Vega:
      a.version =
          v == TinySdxlVariant::Ssd1b ? io::ModelVersion::SDXLSSD1B : io::ModelVersion::SDXLVega;
      a.unet.middle_depth = 0;
      a.unet.input_block_depth = {0, 1, 2};
      a.unet.output_block_depth = {2, 1, 1, v == TinySdxlVariant::Ssd1b ? 2 : 1, 0, 0};
      break;
  }
  return a;
}

inline std::string write_tiny_sdxl_variant(TinySdxlVariant v) {
  static const io::test::TempDir dir;
  const std::string path =
      dir.file("tiny_sdxl_" + std::to_string(static_cast<int>(v)) + ".safetensors");
  if (std::filesystem::exists(path)) return path;
  const Architecture a = tiny_sdxl_variant_architecture(v);
  nn::RandomWeights w(DType::F16, 13 + static_cast<int>(v));
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, a.unet.in_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* c = ctx.new_tensor(DType::F32, {a.unet.context_dim, 77, 1});
  Tensor* y = ctx.new_tensor(DType::F32, {a.unet.adm_in_channels, 1});
  models::unet_forward(nn::Scope(ctx, w, "model.diffusion_model."), a.unet, x, t, c, y);
  Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
  Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
  models::clip_text_forward_pooled(nn::Scope(ctx, w, "cond_stage_model.transformer.text_model."),
                                   a.text, ids, mask, 1, 0);
  if (a.text2)
    models::clip_text_forward_pooled(
        nn::Scope(ctx, w, "cond_stage_model.1.transformer.text_model."), *a.text2, ids, mask, 1, 0);
  Tensor* z = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
  Tensor* img = ctx.new_tensor(DType::F32, {16, 16, 3, 1});
  models::vae_decode(nn::Scope(ctx, w, "first_stage_model."), a.vae, z);
  models::vae_encode(nn::Scope(ctx, w, "first_stage_model."), a.vae, img);
  w.save_safetensors(path);
  return path;
}

// A tiny FLUX.1 dev as the four files it is distributed as, with the released names and
// layouts (BFL transformer, Hugging Face T5 and CLIP, LDM autoencoder) and a small T5
// tokenizer.json next to the T5 file. 128-channel heads as released (the rotary axes need
// them); every other dimension is tiny.
struct TinyFluxFiles {
  std::string dit, t5, clip_l, vae, dir;
};

inline models::FluxConfig tiny_flux_config() {
  models::FluxConfig c = models::FluxConfig::dev();
  c.hidden = 128;
  c.heads = 1;
  c.mlp_hidden = 128;
  c.context_dim = 32;  // T5 width
  c.vec_dim = 64;      // CLIP width
  c.depth = 1;
  c.depth_single = 1;
  return c;
}

inline constexpr const char* kTinyT5TokenizerJson = R"({
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
  "model": {"type": "Unigram", "unk_id": 2, "vocab": [
    ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u2581", -2.0], ["a", -3.0],
    ["\u2581a", -1.0], ["c", -3.0], ["t", -3.0], ["\u2581cat", -1.5], ["\u2581dog", -1.5]
  ]}
})";

// FLUX.1's 16-channel autoencoder with 32 and 64 channels (LDM names, both halves).
inline void write_tiny_flux_vae(const std::string& path, uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  models::VaeConfig vc = models::VaeConfig::flux();
  vc.ch = 32;
  vc.ch_mult = {1, 2};
  vc.num_res_blocks = 1;
  Context ctx;
  Tensor* z = ctx.new_tensor(DType::F32, {4, 4, 16, 1});
  models::vae_decode(nn::Scope(ctx, w, ""), vc, z);
  Tensor* img = ctx.new_tensor(DType::F32, {8, 8, 3, 1});
  models::vae_encode(nn::Scope(ctx, w, ""), vc, img);
  w.save_safetensors(path);
}

// `t5_width`: T5's d_model; a value other than tiny_flux_config().context_dim makes a T5
// file that does not fit the transformer. `fc`: the transformer's shape (its context_dim
// and vec_dim must stay the tiny encoders' 32 and 64).
inline TinyFluxFiles write_tiny_flux(const std::string& dir, int64_t t5_width = 32,
                                     bool tokenizer = true,
                                     const models::FluxConfig& fc = tiny_flux_config()) {
  TinyFluxFiles f{dir + "/flux_dit.safetensors", dir + "/t5xxl.safetensors",
                  dir + "/clip_l.safetensors", dir + "/ae.safetensors", dir};
  std::filesystem::create_directories(dir);
  Context ctx;
  {
    nn::RandomWeights w(DType::F16, 21);
    Tensor* img = ctx.new_tensor(DType::F32, {fc.in_channels, 4, 1});
    Tensor* txt = ctx.new_tensor(DType::F32, {fc.context_dim, 4, 1});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* g = ctx.new_tensor(DType::F32, {1});
    Tensor* y = ctx.new_tensor(DType::F32, {fc.vec_dim, 1});
    Tensor* rope = ctx.new_tensor(DType::F32, {1, fc.head_dim() / 2, 8});
    models::flux_forward(nn::Scope(ctx, w, ""), fc, img, txt, t, g, y, rope, rope);
    w.save_safetensors(f.dit);
  }
  {
    nn::RandomWeights w(DType::F16, 22);
    models::T5Config tc;
    tc.vocab_size = 16;
    tc.model_dim = t5_width;
    tc.inner_dim = 64;
    tc.heads = 1;
    tc.ff_dim = 48;
    tc.layers = 1;
    Tensor* ids = ctx.new_tensor(DType::I32, {4, 1});
    Tensor* buckets = ctx.new_tensor(DType::I32, {16});
    models::t5_encoder_forward(nn::Scope(ctx, w, ""), tc, ids, buckets);
    w.save_safetensors(f.t5);
  }
  {
    nn::RandomWeights w(DType::F16, 23);
    models::ClipTextConfig cc = models::ClipTextConfig::vit_l14();
    cc.hidden = fc.vec_dim;
    cc.intermediate = 64;
    cc.heads = 1;
    cc.layers = 1;
    Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
    Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
    models::clip_text_forward_pooled(nn::Scope(ctx, w, "text_model."), cc, ids, mask, 1, 0);
    w.save_safetensors(f.clip_l);
  }
  write_tiny_flux_vae(f.vae, 24);
  if (tokenizer) {
    std::ofstream(dir + "/tokenizer.json") << kTinyT5TokenizerJson;
  }
  return f;
}

// A tiny Chroma: write_tiny_flux's T5 (with its tokenizer.json), CLIP and autoencoder, and
// a Chroma transformer in the released layout (no modulation linears, an approximator).
// `dit` replaces the FLUX.1 transformer file.
inline models::FluxConfig tiny_chroma_config() {
  models::FluxConfig c = tiny_flux_config();
  c.guidance_embed = false;
  c.vec_dim = 0;
  c.depth = 2;
  c.depth_single = 1;
  c.approximator.in = 16;
  c.approximator.hidden = 24;
  c.approximator.depth = 2;
  return c;
}

inline TinyFluxFiles write_tiny_chroma(const std::string& dir,
                                       const models::FluxConfig& fc = tiny_chroma_config()) {
  TinyFluxFiles f = write_tiny_flux(dir);
  f.dit = dir + "/chroma_dit.safetensors";
  nn::RandomWeights w(DType::F16, 25);
  Context ctx;
  Tensor* img = ctx.new_tensor(DType::F32, {fc.in_channels, 4, 1});
  Tensor* txt = ctx.new_tensor(DType::F32, {fc.context_dim, 4, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* g = ctx.new_tensor(DType::F32, {1});
  Tensor* rope = ctx.new_tensor(DType::F32, {1, fc.head_dim() / 2, 8});
  models::flux_forward(nn::Scope(ctx, w, ""), fc, img, txt, t, g, nullptr, rope, rope);
  w.save_safetensors(f.dit);
  return f;
}

// A TAESD for a latent space of `latent_channels` (4: taesd's and taesdxl's, 16: taesd3's
// and taef1's) at its released widths, random f16; with its encoder or decoder-only.
inline void write_tiny_taesd(const std::string& path, int64_t latent_channels, bool encoder,
                             uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  Context ctx;
  models::taesd_decode(nn::Scope(ctx, w, ""),
                       ctx.new_tensor(DType::F32, {8, 8, latent_channels, 1}));
  if (encoder)
    models::taesd_encode(nn::Scope(ctx, w, ""), ctx.new_tensor(DType::F32, {64, 64, 3, 1}),
                         latent_channels);
  w.save_safetensors(path);
}

}  // namespace sd::pipeline::test
