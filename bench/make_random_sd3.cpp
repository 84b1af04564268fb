// Writes a random-weight SD3.5 Medium at full size as the five files it is used as
// (--diffusion-model, --clip_l, --clip_g, --t5xxl, --vae), for benchmarks side by side with
// the reference: the MMDiT-X at its real shape (24 joint blocks of 1536, self-attention in
// the first 13), CLIP-L and CLIP-G at their real size (the reference reads their depth
// from its own config, not the file), T5-XXL at its real width with `--t5-layers` layers
// (default 2: a random T5 is chaotic past a few layers, and its time is not what the step
// measures) and the 16-channel VAE.
//
//   sd-make-random-sd3 OUT_DIR [--t5-layers N]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "models/clip_text.h"
#include "models/mmdit.h"
#include "models/t5.h"
#include "models/vae.h"
#include "nn/param_recorder.h"
#include "nn/random_weights.h"
#include "tensor/context.h"
#include "tensor/error.h"

namespace {

using namespace sd;

void write_part(const std::string& file, uint32_t seed,
                const std::function<void(Context&, const nn::Scope&)>& declare) {
  Context ctx;
  nn::RandomWeights weights(DType::F16, seed);
  nn::ParamRecorder recorder(weights);
  declare(ctx, nn::Scope(ctx, recorder, ""));
  for (const nn::ParamDecl& d : recorder.params()) weights.get(ctx, d.name, d.ne);
  weights.save_safetensors(file);
  std::printf("wrote %s: %zu tensors\n", file.c_str(), recorder.params().size());
}

}  // namespace

int main(int argc, char** argv) {
  // A flag where the folder goes (`--help`) would otherwise become a folder of that name.
  if (argc < 2 || argv[1][0] == '-' || argc % 2 != 0) {
    std::fprintf(stderr, "usage: %s OUT_DIR [--t5-layers N]\n", argv[0]);
    return argc >= 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  const std::string dir = argv[1];
  int t5_layers = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) != "--t5-layers" || std::atoi(argv[i + 1]) < 1) {
      std::fprintf(stderr,
                   "error: unknown flag or bad value: %s %s (usage: %s OUT_DIR [--t5-layers N])\n",
                   argv[i], argv[i + 1], argv[0]);
      return 2;
    }
    t5_layers = std::atoi(argv[i + 1]);
  }
  try {
    std::filesystem::create_directories(dir);
    const models::MmditConfig mc = models::MmditConfig::sd3_5_medium();
    write_part(dir + "/sd3.5_medium.safetensors", 1, [&](Context& ctx, const nn::Scope& s) {
      models::mmdit_forward(s, mc, ctx.new_tensor(DType::F32, {4, 4, mc.in_channels, 1}),
                            ctx.new_tensor(DType::F32, {1}),
                            ctx.new_tensor(DType::F32, {mc.adm_dim, 1}),
                            ctx.new_tensor(DType::F32, {mc.context_dim, 4, 1}));
    });
    auto clip = [&](const models::ClipTextConfig& c) {
      return [c](Context& ctx, const nn::Scope& s) {
        models::clip_text_forward_pooled(s["text_model"], c, ctx.new_tensor(DType::I32, {77, 1}),
                                         ctx.new_tensor(DType::F32, {77, 77}), 1, 0);
      };
    };
    write_part(dir + "/clip_l.safetensors", 2, clip(models::ClipTextConfig::sdxl_vit_l14()));
    write_part(dir + "/clip_g.safetensors", 3, clip(models::ClipTextConfig::vit_bigg14()));
    write_part(dir + "/t5xxl.safetensors", 4, [&](Context& ctx, const nn::Scope& s) {
      models::T5Config tc = models::T5Config::xxl();
      tc.layers = t5_layers;
      models::t5_encoder_forward(s, tc, ctx.new_tensor(DType::I32, {4, 1}),
                                 ctx.new_tensor(DType::I32, {16}));
    });
    write_part(dir + "/vae.safetensors", 5, [&](Context& ctx, const nn::Scope& s) {
      const models::VaeConfig vc = models::VaeConfig::flux();  // SD3's 16-channel VAE
      models::vae_decode(s, vc, ctx.new_tensor(DType::F32, {4, 4, 16, 1}));
      models::vae_encode(s, vc, ctx.new_tensor(DType::F32, {8, 8, 3, 1}));
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
