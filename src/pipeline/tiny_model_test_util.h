// A tiny SD 1.x-shaped model for pipeline tests: a few channels per block, written once
// per test process to a safetensors file by the project's own code.
#pragma once

#include <filesystem>
#include <string>

#include "io/io_test_util.h"
#include "models/clip_text.h"
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

// Asks every network for its weights once (building graphs reads them) and saves them.
inline std::string write_tiny_checkpoint(const Architecture& a) {
  // One file per test process: ctest runs these tests in parallel processes.
  static const io::test::TempDir dir;
  static const std::string path = dir.file("tiny_sd1.safetensors");
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

}  // namespace sd::pipeline::test
