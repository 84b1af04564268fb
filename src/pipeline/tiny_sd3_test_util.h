// A tiny SD3 / SD3.5 Medium-shaped model for pipeline tests, written by the project's own
// code in the released layouts: one checkpoint with every part under its sd.cpp root, or
// the separate files users pass with --diffusion-model, --clip_l, --clip_g, --t5xxl, --vae.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "models/clip_text.h"
#include "models/mmdit.h"
#include "models/t5.h"
#include "models/vae.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "pipeline/sd3_conditioner.h"
#include "pipeline/tiny_model_test_util.h"

namespace sd::pipeline::test {

struct TinySd3Options {
  bool mmdit_x = false;            // SD3.5 Medium: q/k RMS norms and x_block.attn2 in block 0
  bool t5 = true;                  // write a T5 (4096 wide, as SD3 reads it)
  int64_t t5_width = 4096;         // another width makes a T5 that does not fit
  int64_t clip_g_projection = 40;  // another width makes a CLIP-G that does not fit
};

// 2 joint blocks of 16 (heads of 8), CLIP-L 64 wide, CLIP-G 128 wide projected to 40 (CLIP
// heads are 64 wide): a 104-value pooled vector.
inline models::MmditConfig tiny_mmdit_config(bool mmdit_x) {
  models::MmditConfig c =
      mmdit_x ? models::MmditConfig::sd3_5_medium() : models::MmditConfig::sd3_medium();
  c.hidden = 16;
  c.depth = 2;
  c.adm_dim = 64 + 40;
  c.pos_embed_max = 8;
  c.mlp_ratio = 2;
  c.x_self_attn_blocks = mmdit_x ? 1 : 0;
  return c;
}

inline models::ClipTextConfig tiny_sd3_clip(int64_t width, int64_t projection) {
  models::ClipTextConfig c =
      projection ? models::ClipTextConfig::vit_bigg14() : models::ClipTextConfig::sdxl_vit_l14();
  c.hidden = width;
  c.intermediate = 2 * width;
  c.heads = width / 64;
  c.layers = 2;
  c.projection_dim = projection;
  return c;
}

struct TinySd3Files {
  std::string checkpoint;                    // everything in one file
  std::string dit, clip_l, clip_g, t5, vae;  // the same weights, one file per part
};

// Writes both forms into `dir`.
inline TinySd3Files write_tiny_sd3(const std::string& dir, const TinySd3Options& o = {}) {
  std::filesystem::create_directories(dir);
  TinySd3Files f{dir + "/sd3.safetensors",
                 dir + "/dit.safetensors",
                 dir + "/clip_l.safetensors",
                 dir + "/clip_g.safetensors",
                 o.t5 ? dir + "/t5xxl.safetensors" : "",
                 dir + "/vae.safetensors"};
  Context ctx;
  nn::RandomWeights all(DType::F16, 31);  // the single checkpoint: the same values
  const models::MmditConfig mc = tiny_mmdit_config(o.mmdit_x);
  auto dit = [&](const nn::Scope& s) {
    Tensor* x = ctx.new_tensor(DType::F32, {4, 4, mc.in_channels, 1});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* y = ctx.new_tensor(DType::F32, {mc.adm_dim, 1});
    Tensor* c = ctx.new_tensor(DType::F32, {mc.context_dim, 4, 1});
    models::mmdit_forward(s, mc, x, t, y, c);
  };
  auto clip = [&](int64_t width, int64_t projection) {
    return [&ctx, width, projection](const nn::Scope& s) {
      Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
      Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
      models::clip_text_forward_pooled(s["text_model"], tiny_sd3_clip(width, projection), ids, mask,
                                       1, 0);
    };
  };
  auto t5 = [&](const nn::Scope& s) {
    models::T5Config tc;
    tc.vocab_size = 16;
    tc.model_dim = o.t5_width;
    tc.inner_dim = 64;
    tc.heads = 1;
    tc.ff_dim = 48;
    tc.layers = 1;
    Tensor* ids = ctx.new_tensor(DType::I32, {4, 1});
    Tensor* buckets = ctx.new_tensor(DType::I32, {16});
    models::t5_encoder_forward(s, tc, ids, buckets);
  };
  auto vae = [&](const nn::Scope& s) {
    models::VaeConfig vc = models::VaeConfig::flux();
    vc.ch = 32;
    vc.ch_mult = {1, 2};
    vc.num_res_blocks = 1;
    models::vae_decode(s, vc, ctx.new_tensor(DType::F32, {4, 4, 16, 1}));
    models::vae_encode(s, vc, ctx.new_tensor(DType::F32, {8, 8, 3, 1}));
  };
  struct Part {
    std::string file, root;
    std::function<void(const nn::Scope&)> declare;
  };
  std::vector<Part> parts = {
      {f.dit, "model.diffusion_model.", dit},
      {f.clip_l, "text_encoders.clip_l.transformer.", clip(64, 0)},
      {f.clip_g, "text_encoders.clip_g.transformer.", clip(128, o.clip_g_projection)},
      {f.vae, "first_stage_model.", vae}};
  if (o.t5) parts.push_back({f.t5, "text_encoders.t5xxl.transformer.", t5});
  uint32_t seed = 41;
  for (const Part& p : parts) {
    nn::RandomWeights part(DType::F16, seed++);
    nn::ParamRecorder recorder(part);
    p.declare(nn::Scope(ctx, recorder, ""));
    for (const nn::ParamDecl& d : recorder.params()) part.get(ctx, d.name, d.ne);
    part.save_safetensors(p.file);
    for (const nn::ParamDecl& d : recorder.params())
      all.set(p.root + d.name, d.ne, part.values(d.name));
  }
  all.save_safetensors(f.checkpoint);
  if (o.t5) std::ofstream(dir + "/tokenizer.json") << kTinyT5TokenizerJson;
  return f;
}

}  // namespace sd::pipeline::test
