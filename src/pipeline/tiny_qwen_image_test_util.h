// A tiny Qwen-Image as the files it is distributed as, in the released layouts: the MMDiT
// (diffusers names), a Qwen2.5-VL-style text model (Hugging Face names, q/k/v biases), the
// Wan 2.1 autoencoder (original names, 3-d kernels, small width) and a byte-level BPE
// tokenizer.json with Qwen's chat tokens. 128-channel heads as released (the rotary axes
// need them); the rest is tiny.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "models/llm.h"
#include "models/qwen_image.h"
#include "models/qwen_vl_vision.h"
#include "models/vae.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_z_image_test_util.h"

namespace sd::pipeline::test {

struct TinyQwenImageFiles {
  std::string dit, llm, vae, tokenizer, dir;
};

inline models::LlmConfig tiny_qwen2_5_vl_config() {
  models::LlmConfig c = tiny_qwen3_config();
  c.arch = models::LlmArch::Qwen2_5_VL;
  c.qkv_bias = true;
  c.qk_norm = false;
  c.layers = 2;
  // Without q/k norms the head width is not in the file: Qwen2.5-VL's 128.
  c.head_dim = 128;
  c.heads = 2;
  c.kv_heads = 1;
  return c;
}

inline models::QwenImageConfig tiny_qwen_image_config() {
  models::QwenImageConfig c;
  c.hidden = 128;
  c.heads = 1;
  c.mlp_hidden = 64;
  c.text_dim = tiny_qwen2_5_vl_config().hidden;
  c.layers = 2;
  return c;
}

inline models::VaeConfig tiny_wan_vae_config() {
  models::VaeConfig c = models::VaeConfig::wan21();
  c.ch = 32;
  return c;
}

// The Wan autoencoder's weights as the released file stores them: 3-d kernels
// [out, in, t, h, w] (written folded, [out * in, t, h, w], the same bytes) and RMS scales
// [C, 1, 1, 1] ([C, 1, 1] in the attention blocks), the latent-moment convs at the root.
inline void write_tiny_wan_vae(const std::string& path, uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  const models::VaeConfig vc = tiny_wan_vae_config();
  Context ctx;
  models::vae_decode(nn::Scope(ctx, w, ""), vc, ctx.new_tensor(DType::F32, {2, 2, 16, 1}));
  models::vae_encode(nn::Scope(ctx, w, ""), vc, ctx.new_tensor(DType::F32, {16, 16, 3, 1}));
  w.save_safetensors(path);
}

inline TinyQwenImageFiles write_tiny_qwen_image(
    const std::string& dir, const models::QwenImageConfig& qc = tiny_qwen_image_config(),
    const models::LlmConfig& lc = tiny_qwen2_5_vl_config()) {
  TinyQwenImageFiles f{dir + "/qwen_image.safetensors", dir + "/qwen2_5_vl.safetensors",
                       dir + "/qwen_image_vae.safetensors", dir + "/tokenizer.json", dir};
  std::filesystem::create_directories(dir);
  Context ctx;
  {
    nn::RandomWeights w(DType::F16, 51);
    Tensor* img = ctx.new_tensor(DType::F32, {qc.in_channels, 4});
    Tensor* txt = ctx.new_tensor(DType::F32, {qc.text_dim, 3});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* rope = ctx.new_tensor(DType::F32, {qc.head_dim / 2, 7});
    models::qwen_image_forward(nn::Scope(ctx, w, ""), qc, img, 4, txt, t, rope, rope);
    w.save_safetensors(f.dit);
  }
  {
    nn::RandomWeights w(DType::F16, 52);
    Tensor* ids = ctx.new_tensor(DType::I32, {4});
    Tensor* r = ctx.new_tensor(DType::F32, {lc.head_dim / 2, 4});
    Tensor* mask = ctx.new_tensor(DType::F32, {4, 4});
    models::llm_forward(nn::Scope(ctx, w, ""), lc, ids, r, r, mask, {lc.layers});
    w.save_safetensors(f.llm);
  }
  write_tiny_wan_vae(f.vae, 53);
  std::ofstream(f.tokenizer) << tiny_bpe_tokenizer_json_with(
      {"<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"});
  return f;
}

// A tiny Qwen2.5-VL vision tower giving `out_hidden`-wide tokens, as a --llm_vision file of
// the tower's names (llama.cpp's two 2-D patch kernels): 16 heads of 4.
inline models::QwenVisionConfig tiny_qwen_vision_config(int64_t out_hidden) {
  models::QwenVisionConfig c;
  c.hidden = 64;
  c.intermediate = 48;
  c.layers = 2;
  c.out_hidden = out_hidden;
  c.split_patch_embed = true;
  return c;
}

inline void write_tiny_qwen_vision(const std::string& path, int64_t out_hidden, uint32_t seed) {
  nn::RandomWeights w(DType::F16, seed);
  const models::QwenVisionConfig c = tiny_qwen_vision_config(out_hidden);
  Context ctx;
  const int64_t n = 4, half = c.head_dim() / 2;
  models::qwen_vision_forward(
      nn::Scope(ctx, w, ""), c, ctx.new_tensor(DType::F32, {3 * c.patch * c.patch, n}),
      ctx.new_tensor(DType::F32, {half, n}), ctx.new_tensor(DType::F32, {half, n}),
      ctx.new_tensor(DType::F32, {n, n}));
  w.save_safetensors(path);
}

}  // namespace sd::pipeline::test
