// A tiny instruct-pix2pix model for pipeline tests: tiny_architecture()'s SD 1.x shapes with
// the UNet taking the edited image's latent as 4 more input channels.
#pragma once

#include <filesystem>
#include <string>

#include "pipeline/tiny_model_test_util.h"

namespace sd::pipeline::test {

inline Architecture tiny_pix2pix_architecture() {
  Architecture a = tiny_architecture();
  a.version = io::ModelVersion::SD1Pix2Pix;
  a.unet.in_channels = 8;
  return a;
}

inline std::string write_tiny_pix2pix_checkpoint(const Architecture& a) {
  static const io::test::TempDir dir;
  static const std::string path = dir.file("tiny_pix2pix.safetensors");
  if (std::filesystem::exists(path)) return path;
  nn::RandomWeights w(DType::F16, 11);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 8, a.unet.in_channels, 1});
  Tensor* t = ctx.new_tensor(DType::F32, {1});
  Tensor* c = ctx.new_tensor(DType::F32, {a.unet.context_dim, 77, 1});
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
