// A tiny FLUX.2 klein as the files it is distributed as, in the released layouts: the
// transformer (Black Forest Labs names, no biases), a Qwen3-style LLM of 28 layers (klein
// reads the states after layer 27), the FLUX.2 autoencoder (small channels, batch-norm
// statistics over its 2x2 latent patches), and a byte-level BPE tokenizer.json with Qwen's
// chat and padding tokens. 128-channel heads as released (the rotary axes need them).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "models/flux.h"
#include "models/llm.h"
#include "models/vae.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_z_image_test_util.h"

namespace sd::pipeline::test {

struct TinyFlux2Files {
  std::string dit, llm, vae, tokenizer, dir;
};

inline models::LlmConfig tiny_flux2_qwen3_config() {
  models::LlmConfig c = tiny_qwen3_config();
  c.layers = 28;
  return c;
}

inline models::FluxConfig tiny_flux2_config() {
  models::FluxConfig c = models::FluxConfig::flux2_klein();
  c.hidden = 128;
  c.heads = 1;
  c.mlp_hidden = 48;
  c.context_dim = 3 * tiny_flux2_qwen3_config().hidden;
  c.depth = 1;
  c.depth_single = 1;
  return c;
}

inline models::VaeConfig tiny_flux2_vae_config() {
  models::VaeConfig c = models::VaeConfig::flux2();
  c.ch = 32;
  c.ch_mult = {1, 2};
  c.num_res_blocks = 1;
  return c;
}

// The FLUX.2 autoencoder with statistics a trained one could have (a positive variance).
inline void write_tiny_flux2_vae(const std::string& path, uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  const models::VaeConfig vc = tiny_flux2_vae_config();
  Context ctx;
  models::vae_decode(nn::Scope(ctx, w, ""), vc,
                     ctx.new_tensor(DType::F32, {2, 2, vc.latent_channels(), 1}));
  models::vae_encode(nn::Scope(ctx, w, ""), vc, ctx.new_tensor(DType::F32, {8, 8, 3, 1}));
  const int64_t n = vc.latent_channels();
  std::vector<float> mean(static_cast<size_t>(n)), var(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    mean[static_cast<size_t>(i)] = 0.05f * static_cast<float>(i % 7 - 3);
    var[static_cast<size_t>(i)] = 1.5f + 0.1f * static_cast<float>(i % 5);
  }
  w.set("bn.running_mean", make_shape({n}), mean);
  w.set("bn.running_var", make_shape({n}), var);
  w.save_safetensors(path);
}

inline TinyFlux2Files write_tiny_flux2(const std::string& dir,
                                       const models::FluxConfig& fc = tiny_flux2_config(),
                                       const models::LlmConfig& lc = tiny_flux2_qwen3_config()) {
  TinyFlux2Files f{dir + "/flux2_klein.safetensors", dir + "/qwen3.safetensors",
                   dir + "/ae.safetensors", dir + "/tokenizer.json", dir};
  std::filesystem::create_directories(dir);
  Context ctx;
  {
    nn::RandomWeights w(DType::F16, 41);
    Tensor* img = ctx.new_tensor(DType::F32, {fc.in_channels, 4, 1});
    Tensor* txt = ctx.new_tensor(DType::F32, {fc.context_dim, 4, 1});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* g = ctx.new_tensor(DType::F32, {1});
    Tensor* rope = ctx.new_tensor(DType::F32, {1, fc.head_dim() / 2, 8});
    models::flux_forward(nn::Scope(ctx, w, ""), fc, img, txt, t, fc.guidance_embed ? g : nullptr,
                         nullptr, rope, rope);
    w.save_safetensors(f.dit);
  }
  {
    nn::RandomWeights w(DType::F16, 42);
    Tensor* ids = ctx.new_tensor(DType::I32, {4});
    Tensor* r = ctx.new_tensor(DType::F32, {lc.head_dim / 2, 4});
    Tensor* mask = ctx.new_tensor(DType::F32, {4, 4});
    models::llm_forward(nn::Scope(ctx, w, ""), lc, ids, r, r, mask, {lc.layers});
    w.save_safetensors(f.llm);
  }
  write_tiny_flux2_vae(f.vae, 43);
  std::ofstream(f.tokenizer) << tiny_bpe_tokenizer_json(true);
  return f;
}

}  // namespace sd::pipeline::test
